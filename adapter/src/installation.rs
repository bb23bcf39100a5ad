//! What a driver's installation gives its kubelet plugin in a cluster, as its chart does: the
//! ServiceAccount the plugin's pods run as, that account's rights, and the admission policies
//! that hold each node's plugin to its own node. The local cluster applies it where it runs the
//! driver's processes itself; the suite checks it by acting as that account.

use k8s_openapi::api::admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding};
use k8s_openapi::api::rbac::v1::PolicyRule;

#[derive(Clone, Debug)]
pub struct Installation {
    /// The namespace of the plugin's pods and of its ServiceAccount.
    pub namespace: String,
    /// The ServiceAccount the plugin's pods run as.
    pub service_account: String,
    /// What that account may do, as one ClusterRole bound to it.
    pub rules: Vec<PolicyRule>,
    /// Admission policies, each with its binding, e.g. upstream's that refuses a node's plugin
    /// any ResourceSlice of another node.
    pub policies: Vec<(ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding)>,
}

impl Installation {
    /// The user name the API server gives the plugin's account.
    pub fn user(&self) -> String {
        service_account_user(&self.namespace, &self.service_account)
    }
}

/// The user name of a ServiceAccount's tokens.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}
