//! Builders for the Kubernetes objects dracheck creates. Scenarios and tests build every
//! Node, DeviceClass, ResourceSlice, ResourceClaim and Pod here instead of copying YAML, so a
//! change to the API shape is made in one place.
//!
//! The value formats every layer checks live here too, once: resource quantities (`quantity`)
//! and the API's name formats (`names`); and how a failed request to a cluster is worded
//! (`kube_errors`), so that every command says it alike.

pub mod claim;
mod dra;
pub mod kube_errors;
pub mod names;
mod node;
mod pod;
pub mod published;
pub mod quantity;
mod rbac;

pub use claim::ClaimBuilder;
pub use dra::{DeviceBuilder, claim, claim_template, device, device_class, resource_slice};
pub use node::{NODE_LABEL, node, now};
pub use pod::{IDLE, PodBuilder, daemon_set, pod};
pub use rbac::bind_cluster_role;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Every object dracheck creates carries this label, so leftovers can be found and removed.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "dracheck");

pub(crate) fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    meta_for(name, namespace)
}

/// Metadata for any object dracheck creates: the name and the managed-by label.
pub fn meta_for(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        labels: Some([(MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string())].into()),
        ..ObjectMeta::default()
    }
}
