//! The driver's controller part for binding conditions (DRADeviceBindingConditions, beta and
//! on by default since Kubernetes 1.36). A device published with `bindingConditions` (a
//! partition that must be carved out of its GPU, a device attached over a fabric) is allocated
//! by the scheduler, which then holds the pod's binding until the driver reports each
//! condition `True` in the claim's `status.devices`. The mock "attaches" at once: it watches
//! the claims, and for every result of its own pool that carries binding conditions it applies
//! the conditions to the claim's status. A field manager of its own keeps them apart from the
//! entries prepare reports (`status`), so that neither apply removes the other's conditions.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::resource::v1::{AllocatedDeviceStatus, DeviceRequestAllocationResult, ResourceClaim};
use kube::Api;
use kube::runtime::{WatchStreamExt as _, watcher};
use tokio::sync::watch;

use crate::faults::{Fault, Faults};
use crate::inventory::{DeviceSpec, Pool};
use crate::log;
use crate::status::{self, condition_true};

/// The reason of the conditions the mock sets.
pub const REASON: &str = "Attached";

pub struct Binder {
    pub client: kube::Client,
    pub driver: String,
    pub node: String,
    pub faults: Arc<Faults>,
    /// The node's pool as the inventory has it now.
    pub devices: watch::Receiver<Arc<Pool>>,
}

impl Binder {
    /// Watches the claims until `stop`, setting the binding conditions of this node's results;
    /// from the time the pool has a device with binding conditions, since before it no claim
    /// can need them (and every node's plugin watching every claim would be for nothing).
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        tokio::select! {
            () = async { let _ = stop.wait_for(|s| *s).await; } => return,
            () = async {
                let _ = self.devices.wait_for(|p| p.devices.iter().any(DeviceSpec::has_binding_conditions)).await;
            } => {}
        }
        if self.faults.has(&Fault::NeverAttach) {
            log!("fault never-attach: the binding conditions of allocated devices are never set");
            return;
        }
        let api: Api<ResourceClaim> = Api::all(self.client.clone());
        let mut claims = watcher(api, watcher::Config::default()).default_backoff().applied_objects().boxed();
        loop {
            tokio::select! {
                () = async { let _ = stop.wait_for(|s| *s).await; } => return,
                next = claims.next() => match next {
                    Some(Ok(claim)) => self.attach(&claim).await,
                    Some(Err(e)) => {
                        log!("watching ResourceClaims for binding conditions: {e}");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    None => return,
                },
            }
        }
    }

    /// Sets the binding conditions of `claim`'s results on this node that do not have them yet.
    async fn attach(&self, claim: &ResourceClaim) {
        let pending: Vec<&DeviceRequestAllocationResult> =
            ours(claim, &self.driver, &self.node).filter(|r| !attached(claim, r)).collect();
        if pending.is_empty() {
            return;
        }
        let (ns, name) =
            (claim.metadata.namespace.clone().unwrap_or_default(), claim.metadata.name.clone().unwrap_or_default());
        let entries: Vec<AllocatedDeviceStatus> = pending
            .iter()
            .map(|r| AllocatedDeviceStatus {
                driver: r.driver.clone(),
                pool: r.pool.clone(),
                device: r.device.clone(),
                share_id: r.share_id.clone(),
                conditions: Some(
                    r.binding_conditions
                        .iter()
                        .flatten()
                        .map(|t| condition_true(t, REASON, format!("{} is ready on node {}", r.device, self.node)))
                        .collect(),
                ),
                ..AllocatedDeviceStatus::default()
            })
            .collect();
        let manager = format!("{}/{}/binding", self.driver, self.node);
        let uid = claim.metadata.uid.as_deref().unwrap_or_default();
        let devices: Vec<&str> = pending.iter().map(|r| r.device.as_str()).collect();
        match status::apply(&self.client, &manager, &ns, &name, uid, entries).await {
            Ok(_) => log!("ResourceClaim {ns}/{name}: binding conditions of {devices:?} set"),
            Err(e) => log!("ResourceClaim {ns}/{name}: setting the binding conditions of {devices:?}: {e}"),
        }
    }
}

/// `claim`'s results of `driver` on `node`'s pool that carry binding conditions.
fn ours<'a>(
    claim: &'a ResourceClaim,
    driver: &'a str,
    node: &'a str,
) -> impl Iterator<Item = &'a DeviceRequestAllocationResult> {
    let allocation = claim.status.as_ref().and_then(|s| s.allocation.as_ref());
    allocation
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .filter(move |r| r.driver == driver && r.pool == node)
        .filter(|r| r.binding_conditions.as_ref().is_some_and(|c| !c.is_empty()))
}

/// Whether every binding condition of `result` is `True` in `claim`'s status.
fn attached(claim: &ResourceClaim, result: &DeviceRequestAllocationResult) -> bool {
    let entry = claim.status.as_ref().and_then(|s| s.devices.as_ref()).into_iter().flatten().find(|d| {
        d.driver == result.driver && d.pool == result.pool && d.device == result.device && d.share_id == result.share_id
    });
    let conditions = entry.and_then(|e| e.conditions.as_ref());
    result
        .binding_conditions
        .iter()
        .flatten()
        .all(|t| conditions.into_iter().flatten().any(|c| &c.type_ == t && c.status == "True"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(results: serde_json::Value, devices: serde_json::Value) -> ResourceClaim {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "c", "namespace": "ns" },
            "spec": {},
            "status": { "allocation": { "devices": { "results": results } }, "devices": devices },
        }))
        .unwrap()
    }

    #[test]
    fn only_this_nodes_results_with_binding_conditions_wait_for_the_driver() {
        let result = |pool: &str, device: &str, conditions: &[&str]| serde_json::json!({ "request": "r", "driver": "gpu.mock.dracheck.io", "pool": pool, "device": device, "bindingConditions": conditions });
        let c = claim(
            serde_json::json!([
                result("n1", "a", &["x.io/ready"]),
                result("n1", "b", &[]),
                result("n2", "c", &["x.io/ready"])
            ]),
            serde_json::json!([]),
        );
        let pending: Vec<&str> = ours(&c, "gpu.mock.dracheck.io", "n1").map(|r| r.device.as_str()).collect();
        assert_eq!(pending, ["a"]);
        let done = claim(
            serde_json::json!([result("n1", "a", &["x.io/ready"])]),
            serde_json::json!([{ "driver": "gpu.mock.dracheck.io", "pool": "n1", "device": "a",
                "conditions": [{ "type": "x.io/ready", "status": "True", "reason": "Attached", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z" }] }]),
        );
        assert!(ours(&done, "gpu.mock.dracheck.io", "n1").all(|r| attached(&done, r)));
        assert!(!ours(&c, "gpu.mock.dracheck.io", "n1").any(|r| attached(&c, r)), "no status yet");
    }
}
