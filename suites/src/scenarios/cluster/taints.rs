//! Device taints on the Kubernetes side (DRADeviceTaints and DRADeviceTaintRules, GA in 1.37):
//! what a platform promises users when a device turns faulty or an administrator takes one
//! out. A pod of the profile's shape runs on a device; then:
//!
//! - an administrator's DeviceTaintRule puts a `NoExecute` taint on that device: the
//!   device-taint eviction controller must evict the pod (condition `DisruptionTarget`, reason
//!   `DeletionByDeviceTaintManager`) within the profile's bound (`taints.rule-evicts`, which
//!   no driver decides);
//! - the same device turns unhealthy while the driver runs (as its adapter says: the mock's
//!   health file): the driver must publish it tainted, so that a claim that only that device
//!   can satisfy stays unallocated, and the same claim with a toleration for every taint is
//!   allocated it and runs (`taints.unhealthy-kept-off`). A driver that finds the fault but
//!   publishes the device untainted lets the scheduler hand it out.
//!
//! The claim is pinned to the device by an attribute no other device of the node has the
//! same value of (an index, a UUID), so that the check needs nothing driver-specific. Each part
//! is skipped where the API server lacks what it needs, with the gate's name.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{
    Device, DeviceAttribute, DeviceTaint, DeviceTaintRule, DeviceTaintRuleSpec, DeviceTaintSelector, ResourceSlice,
};
use kube::api::DeleteParams;

use super::common::{health_control, running, secs};
use crate::coverage::RowId::E;
use crate::coverage::Verdict::Covered;
use crate::coverage::{UpstreamRow, e2e};
use crate::engine::{Ctx, Disruption, Role, Scenario, ScenarioError, Tier, served};
use crate::profile::ids::{TAINTS_RULE_EVICTS as EVICTS, TAINTS_UNHEALTHY_KEPT_OFF as KEPT_OFF};

pub static SCENARIO: Scenario = Scenario {
    name: "device-taints",
    tier: Tier::Cluster,
    role: Role::General,
    guarantees: &[EVICTS, KEPT_OFF],
    disrupts: Disruption::None,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: E(6),
        test: "device taints: NoSchedule keeps pod pending",
        at: e2e(2881),
        asserts: "the driver publishes its devices' taints, so that a claim that does not tolerate them waits",
        guarantees: &[KEPT_OFF, crate::profile::ids::PLUGIN_SLICES_TAINTS_UNHEALTHY],
        verdict: Covered,
    },
    UpstreamRow {
        id: E(7),
        test: "device taints: NoSchedule can be tolerated",
        at: e2e(2888),
        asserts: "a tainted device is prepared for a claim that tolerates the taint",
        guarantees: &[KEPT_OFF],
        verdict: Covered,
    },
    UpstreamRow {
        id: E(8),
        test: "device taints: NoExecute keeps pod pending",
        at: e2e(3062),
        asserts: "the same with the effect NoExecute",
        guarantees: &[KEPT_OFF, crate::profile::ids::PLUGIN_SLICES_TAINTS_UNHEALTHY],
        verdict: Covered,
    },
    UpstreamRow {
        id: E(9),
        test: "device taints: NoExecute can be tolerated",
        at: e2e(3069),
        asserts: "a device tainted NoExecute is prepared for a claim that tolerates the taint",
        guarantees: &[KEPT_OFF],
        verdict: Covered,
    },
];

const FIRST: &str = "taints";
const KEPT: &str = "taints-kept-off";
const TOLERATING: &str = "taints-tolerating";
/// The taint the suite's rule sets.
const RULE_TAINT_KEY: &str = "dracheck.io/taken-out";
/// The eviction controller's reason on the pod's `DisruptionTarget` condition.
const EVICTION_REASON: &str = "DeletionByDeviceTaintManager";
/// How long a driver may take to publish a device it found unhealthy with its taint.
const TAINTED: Duration = Duration::from_secs(30);
/// How long the scheduler has to refuse the claim only the tainted device could satisfy.
const REFUSED: Duration = Duration::from_secs(30);

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let Some(promised) = ctx.profile().guarantees.device_taints.as_ref() else { return Ok(()) };
    let driver = ctx.target.driver.name.clone();
    let within = Duration::from_secs(ctx.profile().guarantees.allocation.as_ref().map_or(60, |a| a.within_seconds));

    ctx.phase("a pod on a device, then an administrator's NoExecute DeviceTaintRule on that device");
    ctx.create(&ctx.profile_claim(FIRST)).await?;
    ctx.create(&ctx.workload(FIRST).claim("devices", FIRST).build()).await?;
    let Some(claim) = running(ctx, EVICTS, FIRST, FIRST, within).await else {
        ctx.fail(KEPT_OFF, "no pod of the profile's shape ran", Vec::new());
        return Ok(());
    };
    let Some((pool, device)) =
        Ctx::allocated(&claim).into_iter().find(|(d, ..)| *d == driver).map(|(_, pool, device)| (pool, device))
    else {
        return Err(ScenarioError::Unmet(format!("the claim has no device of {driver}")));
    };
    let rule = taint_rule(&ctx.run_id, &driver, &pool, &device);
    match served::taint_rules_unserved(&ctx.client(), &rule).await? {
        Some(why) => ctx.skip(EVICTS, why),
        None => evicted(ctx, rule, promised.eviction_within()).await?,
    }
    // The pod is gone either way before the device is used again.
    ctx.delete_pod(FIRST, within).await?;
    let _ = ctx.api::<k8s_openapi::api::resource::v1::ResourceClaim>().delete(FIRST, &DeleteParams::default()).await;
    // Until its claim is gone the device is held, and a claim for it alone would be refused for
    // that, not for a taint.
    ctx.poll_until(within, || ctx.get_claim(FIRST), Option::is_none)
        .await
        .map_err(|_| ScenarioError::timeout(format!("claim {FIRST} to be gone after its deletion"), within))?;

    ctx.phase("the device turns unhealthy: a claim only it can satisfy, without and with a toleration");
    kept_off(ctx, &driver, &device, within).await
}

/// A rule that taints exactly `device` with `NoExecute`.
fn taint_rule(run_id: &str, driver: &str, pool: &str, device: &str) -> DeviceTaintRule {
    DeviceTaintRule {
        metadata: dracheck_objects::meta_for(&format!("dracheck-{run_id}-evict"), None),
        spec: DeviceTaintRuleSpec {
            device_selector: Some(DeviceTaintSelector {
                driver: Some(driver.into()),
                pool: Some(pool.into()),
                device: Some(device.into()),
            }),
            taint: DeviceTaint {
                key: RULE_TAINT_KEY.into(),
                value: Some("true".into()),
                effect: "NoExecute".into(),
                time_added: None,
            },
        },
        status: None,
    }
}

/// Applies `rule` and judges `taints.rule-evicts` on the pod [`FIRST`]; the rule goes again.
async fn evicted(ctx: &Ctx<'_>, rule: DeviceTaintRule, within: Duration) -> Result<(), ScenarioError> {
    let api: kube::Api<DeviceTaintRule> = kube::Api::all(ctx.client());
    let name = rule.metadata.name.clone().unwrap_or_default();
    ctx.create_taint_rule(&rule).await?;
    let outcome = ctx
        .poll_until(within, || async { ctx.get_pod(FIRST).await }, |p| p.as_ref().is_none_or(|p| eviction(p).is_some()))
        .await;
    let evidence = if outcome.is_err() { ctx.evidence(FIRST).await } else { Vec::new() };
    let _ = api.delete(&name, &DeleteParams::default()).await;
    match outcome {
        Ok((Some(pod), took)) => ctx.pass(
            EVICTS,
            format!(
                "the rule's NoExecute taint on the pod's device evicted it {} later: DisruptionTarget {}",
                secs(took),
                eviction(&pod).unwrap_or_default()
            ),
        ),
        // Gone between two looks: the controller's event on the pod says who deleted it.
        Ok((None, took)) => match eviction_event(ctx).await {
            Some(message) => ctx.pass(
                EVICTS,
                format!(
                    "the rule's NoExecute taint on the pod's device evicted it {} later: event {EVICTION_EVENT}: {message}",
                    secs(took)
                ),
            ),
            None => ctx.fail(
                EVICTS,
                format!(
                    "the pod was gone {} after the rule, with neither the condition {EVICTION_REASON} nor the event \
                     {EVICTION_EVENT}",
                    secs(took)
                ),
                Vec::new(),
            ),
        },
        Err(_) => ctx.fail(
            EVICTS,
            format!("{} after a NoExecute DeviceTaintRule on its device the pod still runs, unmarked", secs(within)),
            evidence,
        ),
    }
    Ok(())
}

/// The reason of the eviction controller's event on the pod it evicts.
const EVICTION_EVENT: &str = "DeviceTaintManagerEviction";

/// The message of the eviction controller's event on pod [`FIRST`], if it made one.
async fn eviction_event(ctx: &Ctx<'_>) -> Option<String> {
    let events = ctx.api::<k8s_openapi::api::core::v1::Event>();
    let lp = kube::api::ListParams::default().fields(&format!("involvedObject.name={FIRST},reason={EVICTION_EVENT}"));
    let found = events.list(&lp).await.ok()?.items.into_iter().next()?;
    Some(found.message.unwrap_or_default())
}

/// The reason of `pod`'s DisruptionTarget condition where it is the eviction controller's.
fn eviction(pod: &Pod) -> Option<String> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .find(|c| c.type_ == "DisruptionTarget" && c.status == "True" && c.reason.as_deref() == Some(EVICTION_REASON))
        .map(|c| format!("{EVICTION_REASON}: {}", c.message.as_deref().unwrap_or("")))
}

/// Turns `device` unhealthy and judges `taints.unhealthy-kept-off`; sound again afterwards.
async fn kept_off(ctx: &Ctx<'_>, driver: &str, device: &str, within: Duration) -> Result<(), ScenarioError> {
    let Some((set_health, dirs)) = health_control(ctx, KEPT_OFF).await else { return Ok(()) };
    if let Some(why) = served::slice_dropped(&ctx.client(), driver, &served::DEVICE_TAINTS).await? {
        ctx.skip(KEPT_OFF, why);
        return Ok(());
    }
    let slices = ctx.slices_of(&ctx.node).await;
    let Some(pin) = pin(&slices, device) else {
        ctx.skip(
            KEPT_OFF,
            format!("no attribute of {device} has a value no other device of the node has, to ask for it alone"),
        );
        return Ok(());
    };

    let what = set_health(&dirs, &[device.to_string()]).map_err(ScenarioError::Unmet)?;
    let outcome = judge_kept_off(ctx, device, &pin, &what, within).await;
    set_health(&dirs, &[]).map_err(ScenarioError::Unmet)?;
    let outcome = outcome?;
    for pod in [KEPT, TOLERATING] {
        ctx.delete_pod(pod, within).await?;
    }
    match outcome {
        Ok(summary) => ctx.pass(KEPT_OFF, summary),
        Err((why, evidence)) => ctx.fail(KEPT_OFF, why, evidence),
    }
    untainted_again(ctx, device).await
}

/// Waits until `device`, made sound again, is published untainted on the scenario's node, so
/// that the scenarios after it there find it as before.
pub(super) async fn untainted_again(ctx: &Ctx<'_>, device: &str) -> Result<(), ScenarioError> {
    let untainted = |s: &Vec<ResourceSlice>| taints_of(s, device).is_some_and(|t| t.is_empty());
    ctx.poll_until(TAINTED, || ctx.slices_of(&ctx.node), untainted)
        .await
        .map(|_| ())
        .map_err(|_| ScenarioError::timeout(format!("{device} to be published untainted again"), TAINTED))
}

type Judged = Result<String, (String, Vec<crate::result::Evidence>)>;

async fn judge_kept_off(
    ctx: &Ctx<'_>,
    device: &str,
    pin: &str,
    what: &str,
    within: Duration,
) -> Result<Judged, ScenarioError> {
    let tainted = ctx
        .poll_until(TAINTED, || ctx.slices_of(&ctx.node), |s| taints_of(s, device).is_some_and(|t| !t.is_empty()))
        .await;
    let taints = match tainted {
        Ok((slices, _)) => taints_of(&slices, device).unwrap_or_default(),
        Err(_) => {
            // Judged on what the scheduler does all the same: that is the promise.
            Vec::new()
        }
    };
    let shown: Vec<String> = taints.iter().map(|t| format!("{}:{}", t.key, t.effect)).collect();

    ctx.create(&ctx.profile().claim().selector(pin).claim(&ctx.ns, KEPT)).await?;
    ctx.create(&ctx.workload(KEPT).claim("devices", KEPT).build()).await?;
    let refused = ctx.poll_until(REFUSED, || ctx.unschedulable(KEPT), Option::is_some).await;
    let allocated = ctx.get_claim(KEPT).await.map(|c| Ctx::allocated(&c)).unwrap_or_default();
    if refused.is_err() || !allocated.is_empty() {
        let evidence = ctx.evidence(KEPT).await;
        return Ok(Err((
            format!(
                "{what}; the driver publishes it with taints {shown:?}, and a claim only {device} can satisfy ({pin}) \
                 was allocated {allocated:?} or not refused within {}",
                secs(REFUSED)
            ),
            evidence,
        )));
    }
    ctx.create(&ctx.profile().claim().selector(pin).tolerate_all_taints().claim(&ctx.ns, TOLERATING)).await?;
    ctx.create(&ctx.workload(TOLERATING).claim("devices", TOLERATING).build()).await?;
    let Some(claim) = running(ctx, KEPT_OFF, TOLERATING, TOLERATING, within).await else {
        return Ok(Err(("the same claim tolerating every taint did not run".into(), Vec::new())));
    };
    let got: Vec<String> = Ctx::allocated(&claim).into_iter().map(|(_, _, d)| d).collect();
    Ok(Ok(format!(
        "{what}: published with {shown:?}; a claim only it satisfies was refused by the scheduler, the same claim \
         tolerating every taint was allocated {got:?} and ran"
    )))
}

/// The taints `device` is published with, over the node's slices; `None` where it is not
/// published.
fn taints_of(slices: &[ResourceSlice], device: &str) -> Option<Vec<DeviceTaint>> {
    slices
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
        .find(|d| d.name == device)
        .map(|d| d.taints.clone().unwrap_or_default())
}

/// A CEL selector that only `device` among the devices of `slices` matches: one of its
/// string or int attributes whose value no other device has.
fn pin(slices: &[ResourceSlice], device: &str) -> Option<String> {
    let devices: Vec<(&Device, &str)> =
        slices.iter().flat_map(|s| s.spec.devices.iter().flatten().map(move |d| (d, s.spec.driver.as_str()))).collect();
    let (target, driver) = devices.iter().find(|(d, _)| d.name == device)?;
    let literal = |a: &DeviceAttribute| match (a.string.as_ref(), a.int) {
        (Some(s), _) => Some(format!("{s:?}")),
        (None, Some(i)) => Some(i.to_string()),
        _ => None,
    };
    target.attributes.iter().flatten().find_map(|(name, value)| {
        let value = literal(value)?;
        let (domain, short) = name.split_once('/').unwrap_or((driver, name.as_str()));
        let is_ident = short.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && short.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
        let unique = devices
            .iter()
            .filter(|(d, _)| d.name != device)
            .all(|(d, _)| d.attributes.as_ref().and_then(|a| a.get(name)).and_then(literal).as_deref() != Some(&value));
        (is_ident && unique).then(|| format!("device.attributes[{domain:?}].{short} == {value}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(devices: Vec<Device>) -> ResourceSlice {
        dracheck_objects::resource_slice("gpu.example.com", "node-1", "uid", devices)
    }

    #[test]
    fn a_device_is_pinned_by_an_attribute_only_it_has_that_value_of() {
        let d = |name: &str, model: &str, index: i64| {
            dracheck_objects::device(name).string("model", model).int("index", index).build()
        };
        let slices = [slice(vec![d("gpu-0", "l4", 0), d("gpu-1", "l4", 1)])];
        assert_eq!(pin(&slices, "gpu-1").as_deref(), Some(r#"device.attributes["gpu.example.com"].index == 1"#));
        let twins = [slice(vec![d("gpu-0", "l4", 0), d("gpu-1", "l4", 0)])];
        assert_eq!(pin(&twins, "gpu-0"), None, "no attribute tells them apart");
        assert_eq!(pin(&slices, "gpu-9"), None);
    }
}
