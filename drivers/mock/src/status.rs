//! The claim's device status (`status.devices`, DRAResourceClaimDeviceStatus, GA in 1.37): after
//! a prepare the driver reports each device it prepared, with a `Ready` condition and the CDI
//! IDs it handed out as the entry's data, by a server-side apply of its own entries (the list is
//! keyed by driver, pool and device: other drivers' entries stay). A failed report is logged,
//! not a failed prepare: the status informs people and controllers, the kubelet does not wait
//! for it.

use k8s_openapi::api::resource::v1::{AllocatedDeviceStatus, ResourceClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::Api;
use kube::api::{Patch, PatchParams};

use dracheck_kubelet_api::dra_v1;

/// The condition type the mock reports for a prepared device.
pub const READY: &str = "Ready";

/// Applies the entries of `devices` (prepared for `claim` on `node`) to the claim's status.
pub async fn report(
    client: &kube::Client,
    driver: &str,
    node: &str,
    claim: &dra_v1::Claim,
    devices: &[dra_v1::Device],
) -> Result<(), String> {
    let entries: Vec<AllocatedDeviceStatus> = devices
        .iter()
        .map(|d| AllocatedDeviceStatus {
            driver: driver.to_string(),
            pool: d.pool_name.clone(),
            device: d.device_name.clone(),
            conditions: Some(vec![condition_true(READY, "Prepared", format!("prepared on node {node}"))]),
            data: Some(RawExtension(serde_json::json!({ "cdiDeviceIDs": d.cdi_device_ids }))),
            // A share is its own entry: the API keys them by device and share.
            share_id: d.share_id.clone(),
            ..AllocatedDeviceStatus::default()
        })
        .collect();
    // One field manager per node: each node's plugin owns the entries it wrote.
    apply(client, &format!("{driver}/{node}"), &claim.namespace, &claim.name, &claim.uid, entries)
        .await
        .map_err(|e| format!("reporting the device status of ResourceClaim {}/{}: {e}", claim.namespace, claim.name))
}

/// A condition of a device's status, `True` as of now.
pub fn condition_true(type_: &str, reason: &str, message: String) -> Condition {
    Condition {
        type_: type_.into(),
        status: "True".into(),
        reason: reason.into(),
        message,
        last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
        observed_generation: None,
    }
}

/// Applies `entries` to `status.devices` of the claim `namespace/name` with UID `uid`, as field
/// manager `manager`: the entries that manager applied before and `entries` lacks go, others'
/// entries and conditions stay (the list is keyed by driver, pool, device and share).
pub async fn apply(
    client: &kube::Client,
    manager: &str,
    namespace: &str,
    name: &str,
    uid: &str,
    entries: Vec<AllocatedDeviceStatus>,
) -> kube::Result<()> {
    let body = serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        // The UID makes the apply fail for another claim made under the same name since.
        "metadata": { "name": name, "namespace": namespace, "uid": uid },
        "status": { "devices": entries },
    });
    Api::<ResourceClaim>::namespaced(client.clone(), namespace)
        .patch_status(name, &PatchParams::apply(manager).force(), &Patch::Apply(&body))
        .await
        .map(drop)
}
