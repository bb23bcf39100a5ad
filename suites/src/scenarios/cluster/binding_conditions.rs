//! Devices that need the driver to get them ready before a pod may use them (a partition
//! carved out of its GPU, a device attached over a fabric) are published with
//! `bindingConditions` (DRADeviceBindingConditions, beta and on by default since Kubernetes
//! 1.36). The scheduler allocates such a device, then holds the pod's binding until the driver
//! has set each condition `True` in the claim's `status.devices`. A pod with a claim of the
//! profile's shape must run; the allocation must carry the binding conditions the driver's
//! inventory gives the device (a driver that publishes it without them lets the pod start
//! before the device is ready), the claim's status must show each of them `True`, set no later
//! than the pod was bound, and the pod must be bound within the promised time of its
//! allocation (a driver whose controller never sets them leaves the pod unbound until the
//! scheduler gives up).

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceRequestAllocationResult, ResourceClaim};
use k8s_openapi::jiff::Timestamp;

use super::common::{allocated, secs};
use crate::coverage::RowId::E;
use crate::coverage::Verdict::Covered;
use crate::coverage::{INTEGRATION_BINDING_CONDITIONS, UpstreamRow, integration};
use crate::engine::{Ctx, Disruption, Role, Scenario, ScenarioError, Tier, served};
use crate::profile::ids::BINDING_CONDITIONS_BOUND_WHEN_READY as ID;

pub static SCENARIO: Scenario = Scenario {
    name: "binding-conditions",
    tier: Tier::Cluster,
    role: Role::General,
    guarantees: &[ID],
    disrupts: Disruption::None,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[UpstreamRow {
    id: E(17),
    test: "binding conditions: BasicFlow",
    at: integration(INTEGRATION_BINDING_CONDITIONS, 63),
    asserts: "the driver sets its device's binding conditions True, and the pod is bound only then",
    guarantees: &[ID],
    verdict: Covered,
}];

const NAME: &str = "bound";

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let Some(promise) = ctx.profile().guarantees.binding_conditions.as_ref() else { return Ok(()) };
    let driver = &ctx.target.driver.name;
    if let Some(why) = served::slice_dropped(&ctx.client(), driver, &served::BINDING_CONDITIONS).await? {
        ctx.skip(ID, why);
        return Ok(());
    }
    let within = Duration::from_secs(ctx.profile().guarantees.allocation.as_ref().map_or(60, |a| a.within_seconds));

    ctx.phase("a pod with a claim of the profile's shape, bound once the driver has its device ready");
    ctx.create(&ctx.profile_claim(NAME)).await?;
    ctx.create(&ctx.workload(NAME).claim("devices", NAME).build()).await?;
    let claim = match allocated(ctx, NAME, within).await {
        Ok((claim, _)) => claim,
        Err(e) => {
            ctx.fail(ID, e, ctx.evidence(NAME).await);
            return Ok(());
        }
    };
    let node = ctx.node.clone();
    let expected = expected_conditions(ctx, &node, &claim).await?;
    if expected.iter().all(|(_, want)| want.is_empty()) {
        ctx.skip(
            ID,
            format!(
                "the device(s) {:?} allocated on {node} have no binding conditions in the driver's inventory: the profile's \
                 class should select devices that need attaching",
                expected.iter().map(|(r, _)| r.device.as_str()).collect::<Vec<_>>()
            ),
        );
        ctx.delete_pod(NAME, within).await?;
        return Ok(());
    }
    for (result, want) in &expected {
        let got = result.binding_conditions.clone().unwrap_or_default();
        if want.iter().any(|c| !got.contains(c)) {
            ctx.fail(
                ID,
                format!(
                    "device {} was allocated with binding conditions {got:?}, but the driver's inventory gives it {want:?}: \
                     the scheduler bound the pod without waiting for the device to be ready",
                    result.device
                ),
                ctx.evidence(NAME).await,
            );
            ctx.delete_pod(NAME, within).await?;
            return Ok(());
        }
    }

    let bound = ctx.poll_until(promise.within(), || ctx.get_pod(NAME), |p| bound_at(p.as_ref()).is_some()).await;
    let pod = match bound {
        Ok((pod, _)) => pod,
        Err(_) => {
            let claim = ctx.get_claim(NAME).await.unwrap_or(claim);
            ctx.fail(
                ID,
                format!(
                    "pod {NAME} was not bound within {} of its allocation; the claim's device status: {}",
                    secs(promise.within()),
                    not_ready(&claim).unwrap_or_else(|| "every binding condition True".into())
                ),
                ctx.evidence(NAME).await,
            );
            ctx.delete_pod(NAME, within).await?;
            return Ok(());
        }
    };
    let bound_at = bound_at(pod.as_ref()).expect("the poll ended on a bound pod");
    let claim = ctx.get_claim(NAME).await.unwrap_or(claim);
    let verdict = match ready_at(&claim) {
        Err(why) => Err(format!("pod {NAME} was bound, but {why}")),
        Ok(ready) if ready.as_second() > bound_at.as_second() => Err(format!(
            "pod {NAME} was bound at {bound_at}, before the driver set the last binding condition at {ready}"
        )),
        Ok(ready) => ctx
            .wait_phase(NAME, "Running", within)
            .await
            .map(|_| {
                format!("the driver set every binding condition at {ready}; the pod was bound at {bound_at} and runs")
            })
            .map_err(|e| e.to_string()),
    };
    match verdict {
        Ok(pass) => ctx.pass(ID, pass),
        Err(why) => ctx.fail(ID, why, ctx.evidence(NAME).await),
    }
    ctx.delete_pod(NAME, within).await?;
    Ok(())
}

/// Per result of the driver in `claim`, the binding conditions its device has in the driver's
/// inventory (its oracle), else as published.
async fn expected_conditions(
    ctx: &Ctx<'_>,
    node: &str,
    claim: &ResourceClaim,
) -> Result<Vec<(DeviceRequestAllocationResult, Vec<String>)>, ScenarioError> {
    let devices = ctx.node_devices(node).await?;
    let driver = &ctx.target.driver.name;
    Ok(Ctx::allocation_results(claim)
        .filter(|r| &r.driver == driver)
        .map(|r| {
            let want = devices.iter().find(|d| d.name == r.device).and_then(|d| d.binding_conditions.clone());
            (r.clone(), want.unwrap_or_default())
        })
        .collect())
}

/// When the pod was bound to its node: its `PodScheduled=True` condition's transition.
fn bound_at(pod: Option<&Pod>) -> Option<Timestamp> {
    let pod = pod?;
    pod.spec.as_ref()?.node_name.as_ref()?;
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let scheduled = conditions.iter().find(|c| c.type_ == "PodScheduled" && c.status == "True")?;
    scheduled.last_transition_time.as_ref().map(|t| t.0)
}

/// When the last binding condition of `claim`'s results turned `True`; why not, where one is
/// not.
fn ready_at(claim: &ResourceClaim) -> Result<Timestamp, String> {
    let mut last: Option<Timestamp> = None;
    for result in Ctx::allocation_results(claim) {
        for wanted in result.binding_conditions.iter().flatten() {
            let condition = status_conditions(claim, result).find(|c| &c.type_ == wanted && c.status == "True");
            let Some(condition) = condition else {
                return Err(format!("the claim's status has no {wanted} True for device {}", result.device));
            };
            last = last.max(Some(condition.last_transition_time.0));
        }
    }
    last.ok_or_else(|| "the claim's results carry no binding condition".into())
}

/// What of `claim`'s binding conditions is not `True` yet, for the evidence.
fn not_ready(claim: &ResourceClaim) -> Option<String> {
    let missing: Vec<String> = Ctx::allocation_results(claim)
        .flat_map(|r| {
            r.binding_conditions.iter().flatten().filter_map(move |wanted| {
                let set = status_conditions(claim, r).any(|c| &c.type_ == wanted && c.status == "True");
                (!set).then(|| format!("{wanted} of {} not True", r.device))
            })
        })
        .collect();
    (!missing.is_empty()).then(|| missing.join(", "))
}

/// The conditions of `result`'s entry in `claim`'s `status.devices`.
fn status_conditions<'a>(
    claim: &'a ResourceClaim,
    result: &'a DeviceRequestAllocationResult,
) -> impl Iterator<Item = &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    let devices = claim.status.as_ref().and_then(|s| s.devices.as_ref()).into_iter().flatten();
    devices
        .filter(move |d| {
            d.driver == result.driver
                && d.pool == result.pool
                && d.device == result.device
                && d.share_id == result.share_id
        })
        .flat_map(|d| d.conditions.iter().flatten())
}
