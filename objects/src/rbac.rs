//! RBAC objects: a ClusterRole's binding to one ServiceAccount, as a driver's installation and
//! the suite's own in-cluster access both need it.

use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Binds the ClusterRole `role` to the ServiceAccount `namespace/account`.
pub fn bind_cluster_role(metadata: ObjectMeta, role: &str, namespace: &str, account: &str) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata,
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: role.to_string(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account.to_string(),
            namespace: Some(namespace.to_string()),
            ..Subject::default()
        }]),
    }
}
