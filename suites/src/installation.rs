//! A driver's installation ([`dracheck_adapter::Installation`]) applied to a cluster, as its
//! chart would create it: the namespace, the plugin's ServiceAccount, a ClusterRole with its
//! rights bound to that account, and the admission policies with their bindings. Server-side
//! apply, so that a second run on a kept cluster finds them as they are.

use dracheck_adapter::Installation;
use k8s_openapi::api::admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;

const MANAGER: &str = "dracheck";

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta { name: Some(name.into()), namespace: namespace.map(str::to_string), ..ObjectMeta::default() }
}

async fn apply<K>(api: Api<K>, object: &K) -> Result<(), kube::Error>
where
    K: Resource + Clone + Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = object.meta().name.clone().unwrap_or_default();
    api.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(object)).await.map(drop)
}

/// Creates (or updates) every object of `inst`.
pub async fn apply_all(client: &kube::Client, inst: &Installation) -> Result<(), kube::Error> {
    let ns = inst.namespace.as_str();
    apply(Api::<Namespace>::all(client.clone()), &Namespace { metadata: meta(ns, None), ..Namespace::default() })
        .await?;
    let account = ServiceAccount { metadata: meta(&inst.service_account, Some(ns)), ..ServiceAccount::default() };
    apply(Api::<ServiceAccount>::namespaced(client.clone(), ns), &account).await?;
    let role_name = format!("{ns}:{}", inst.service_account);
    let role =
        ClusterRole { metadata: meta(&role_name, None), rules: Some(inst.rules.clone()), ..ClusterRole::default() };
    apply(Api::<ClusterRole>::all(client.clone()), &role).await?;
    let binding = dracheck_objects::bind_cluster_role(meta(&role_name, None), &role_name, ns, &inst.service_account);
    apply(Api::<ClusterRoleBinding>::all(client.clone()), &binding).await?;
    for (policy, binding) in &inst.policies {
        apply(Api::<ValidatingAdmissionPolicy>::all(client.clone()), policy).await?;
        apply(Api::<ValidatingAdmissionPolicyBinding>::all(client.clone()), binding).await?;
    }
    Ok(())
}
