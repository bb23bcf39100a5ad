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
            conditions: Some(vec![Condition {
                type_: READY.into(),
                status: "True".into(),
                reason: "Prepared".into(),
                message: format!("prepared on node {node}"),
                last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
                observed_generation: None,
            }]),
            data: Some(RawExtension(serde_json::json!({ "cdiDeviceIDs": d.cdi_device_ids }))),
            // A share is its own entry: the API keys them by device and share.
            share_id: d.share_id.clone(),
            ..AllocatedDeviceStatus::default()
        })
        .collect();
    let body = serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        // The UID makes the apply fail for another claim made under the same name since.
        "metadata": { "name": claim.name, "namespace": claim.namespace, "uid": claim.uid },
        "status": { "devices": entries },
    });
    // One field manager per node: each node's plugin owns the entries it wrote.
    let manager = format!("{driver}/{node}");
    Api::<ResourceClaim>::namespaced(client.clone(), &claim.namespace)
        .patch_status(&claim.name, &PatchParams::apply(&manager).force(), &Patch::Apply(&body))
        .await
        .map(|_| ())
        .map_err(|e| format!("reporting the device status of ResourceClaim {}/{}: {e}", claim.namespace, claim.name))
}
