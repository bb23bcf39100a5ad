//! Claims share one device by a capacity (`allowMultipleAllocations`, DRAConsumableCapacity,
//! beta and on by default since Kubernetes 1.36), as inference pods share a GPU by memory. On
//! one node: a pod whose claim asks for no amount, which must get the device's default (its
//! `requestPolicy.default`, else all of it); then pods whose claims each ask for the profile's
//! `share`, one after another, until the scheduler refuses one. At least two claims must hold
//! shares of one device at once, each with its own share ID, never together beyond what the
//! device has (the driver's inventory, as its oracle states it; the published capacity where
//! the suite has none). A driver that publishes the device without `allowMultipleAllocations`
//! lets one claim take it whole. Each running container must see its device with its own
//! share ID and the capacity allocated to it: a driver that keys a shared device's setup by
//! the device alone hands later shares the first one's.

use std::collections::BTreeMap;
use std::time::Duration;

use dracheck_objects::quantity::Quantity;
use k8s_openapi::api::resource::v1::{Device, ResourceClaim};

use super::common::{Decided, log, running, runs_or_refused, secs};
use crate::coverage::RowId::E;
use crate::coverage::Verdict::Partial;
use crate::coverage::{UpstreamRow, e2e};
use crate::engine::{Ctx, Disruption, Role, Scenario, ScenarioError, Tier, served};
use crate::profile::ids::{CONSUMABLE_PREPARED_SHARE as PREPARED, CONSUMABLE_SHARED as SHARED};

pub static SCENARIO: Scenario = Scenario {
    name: "consumable-capacity",
    tier: Tier::Cluster,
    role: Role::General,
    guarantees: &[SHARED, PREPARED],
    disrupts: Disruption::None,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[UpstreamRow {
    id: E(5),
    test: "consumable capacity: must allow multiple allocations and consume capacity",
    at: e2e(2570),
    asserts: "shares of one device are prepared side by side; a claim too large for what is left waits until the \
                  others are freed, then runs",
    guarantees: &[SHARED, PREPARED, crate::profile::ids::PLUGIN_SHARES_INDEPENDENT],
    verdict: Partial(
        "the claim the scheduler refused is never run once shares are freed, so a driver that keeps a freed share's \
             setup and fails the larger share's prepare passes",
    ),
}];

/// The pod whose claim asks for no amount.
const DEFAULT: &str = "share-default";
/// More shares than the device's capacity allows at the profile's share: the loop ends at the
/// scheduler's refusal.
const MAX_SHARES: usize = 16;

/// A claim's share of a device, as its allocation states it.
#[derive(Debug, Clone)]
struct Share {
    pod: String,
    device: String,
    share_id: Option<String>,
    /// The allocation's `consumedCapacity` of the profile's capacity.
    consumed: Option<Quantity>,
}

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let Some(promise) = ctx.profile().guarantees.consumable_capacity.as_ref() else { return Ok(()) };
    let driver = &ctx.target.driver.name;
    if let Some(why) = served::slice_dropped(&ctx.client(), driver, &served::MULTIPLE_ALLOCATIONS).await? {
        for id in SCENARIO.guarantees {
            ctx.skip(id, &why);
        }
        return Ok(());
    }
    let within = Duration::from_secs(ctx.profile().guarantees.allocation.as_ref().map_or(60, |a| a.within_seconds));
    let node = ctx.node.clone();
    let capacity = promise.capacity.as_str();

    ctx.phase("a pod whose claim asks for no amount of the device");
    ctx.create(&ctx.profile().claim().claim(&ctx.ns, DEFAULT)).await?;
    ctx.create(&ctx.workload(DEFAULT).claim("devices", DEFAULT).build()).await?;
    let Some(first) = running(ctx, SHARED, DEFAULT, DEFAULT, within).await else {
        ctx.fail(PREPARED, "no pod with a share ran", Vec::new());
        return Ok(());
    };
    let mut held: Vec<Share> = shares(DEFAULT, &first, driver, capacity);

    ctx.phase(&format!(
        "pods whose claims each ask for {} of {capacity}, until the scheduler refuses one",
        promise.share
    ));
    let mut refused = None;
    for i in 0..MAX_SHARES {
        let name = format!("share-{i}");
        ctx.create(&ctx.profile().claim().capacity(capacity, &promise.share).claim(&ctx.ns, &name)).await?;
        ctx.create(&ctx.workload(&name).claim("devices", &name).build()).await?;
        match runs_or_refused(ctx, &name, within).await {
            Some(Decided::Runs) => {
                let Some(claim) = ctx.get_claim(&name).await else { continue };
                held.extend(shares(&name, &claim, driver, capacity));
            }
            Some(Decided::Refused(message)) => {
                refused = Some((name, message));
                break;
            }
            None => {
                ctx.fail(
                    SHARED,
                    format!("pod {name} neither ran nor was refused within {}", secs(within)),
                    ctx.evidence(&name).await,
                );
                return judge_prepared(ctx, &held, capacity).await;
            }
        }
    }

    let devices = ctx.node_devices(&node).await?;
    match judge_shared(&held, &devices, capacity, &promise.share, refused.as_ref()) {
        Ok(pass) => ctx.pass(SHARED, format!("on {node}: {pass}")),
        Err(why) => ctx.fail(SHARED, format!("on {node}: {why}"), ctx.evidence(DEFAULT).await),
    }
    judge_prepared(ctx, &held, capacity).await
}

/// The results of `claim` (`pod`'s) for `driver`, as shares.
fn shares(pod: &str, claim: &ResourceClaim, driver: &str, capacity: &str) -> Vec<Share> {
    Ctx::allocation_results(claim)
        .filter(|r| r.driver == driver)
        .map(|r| Share {
            pod: pod.to_string(),
            device: r.device.clone(),
            share_id: r.share_id.clone(),
            consumed: r
                .consumed_capacity
                .as_ref()
                .and_then(|c| c.get(capacity))
                .and_then(|q| Quantity::parse(&q.0).ok()),
        })
        .collect()
}

/// A device's `capacity` and what a claim that asks for none of it consumes (the request
/// policy's default, else all of it).
fn capacity_of(devices: &[Device], device: &str, capacity: &str) -> Option<(Quantity, Quantity)> {
    let c = devices.iter().find(|d| d.name == device)?.capacity.as_ref()?.get(capacity)?;
    let value = Quantity::parse(&c.value.0).ok()?;
    let default = c.request_policy.as_ref().and_then(|p| p.default.as_ref()).and_then(|d| Quantity::parse(&d.0).ok());
    Some((value.clone(), default.unwrap_or(value)))
}

/// `SHARED`'s verdict from the shares `held` (the default claim's first) and the scheduler's
/// refusal: what passed, or why not.
fn judge_shared(
    held: &[Share],
    devices: &[Device],
    capacity: &str,
    share: &str,
    refused: Option<&(String, String)>,
) -> Result<String, String> {
    let Some(first) = held.first() else { return Err("the first claim was allocated no device of the driver".into()) };
    if first.share_id.is_none() {
        return Err(format!("pod {} got device {} whole (its allocation has no shareID)", first.pod, first.device));
    }
    let mut by_device: BTreeMap<&str, Vec<&Share>> = BTreeMap::new();
    for s in held {
        by_device.entry(&s.device).or_default().push(s);
    }
    let Some((device, most)) = by_device.iter().max_by_key(|(_, s)| s.len()) else { unreachable!("held is not empty") };
    if most.len() < 2 {
        let why = refused.map_or(String::new(), |(pod, m)| format!("; pod {pod} was refused: {m}"));
        return Err(format!("no two claims held shares of one device at once: {held:?}{why}"));
    }
    let ids: std::collections::BTreeSet<_> = held.iter().filter_map(|s| s.share_id.as_ref()).collect();
    if ids.len() != held.iter().filter(|s| s.share_id.is_some()).count() {
        return Err(format!("two allocations have the same shareID: {held:?}"));
    }
    if let Some((value, default)) = capacity_of(devices, &first.device, capacity)
        && first.consumed.as_ref().is_none_or(|c| c.as_float() != default.as_float())
    {
        return Err(format!(
            "pod {}'s claim asked for no amount of {capacity} and was allocated {} of device {} ({value}), not its default {default}",
            first.pod,
            first.consumed.as_ref().map_or("none".into(), |c| c.to_string()),
            first.device
        ));
    }
    for (device, on) in &by_device {
        let Some((value, _)) = capacity_of(devices, device, capacity) else { continue };
        let sum = on.iter().filter_map(|s| s.consumed.as_ref()).try_fold(Quantity::from_int(0), |a, q| a.add(q));
        let sum = sum.map_err(|e| format!("adding up the shares of {device}: {e}"))?;
        if sum.as_float() > value.as_float() {
            let pods: Vec<&str> = on.iter().map(|s| s.pod.as_str()).collect();
            return Err(format!(
                "pods {pods:?} hold shares of device {device} that take {sum} of its {capacity} together, which has {value}"
            ));
        }
    }
    let Some((pod, message)) = refused else {
        return Err(format!(
            "{MAX_SHARES} claims of {share} each ran beside the first, none was refused for want of {capacity}"
        ));
    };
    Ok(format!(
        "{} claims held shares of {device} at once ({}; the one asking for no amount got {}), and pod {pod} was refused: {message}",
        most.len(),
        most.iter()
            .map(|s| format!("{}: {}", s.pod, s.consumed.as_ref().map_or("?".into(), |c| c.to_string())))
            .collect::<Vec<_>>()
            .join(", "),
        first.consumed.as_ref().map_or("?".into(), |c| c.to_string()),
    ))
}

/// Records `PREPARED`: every running share's container shows its device with the share's ID
/// and consumed capacity.
async fn judge_prepared(ctx: &Ctx<'_>, held: &[Share], capacity: &str) -> Result<(), ScenarioError> {
    let Some(seen_shares) = ctx.target.adapter.workload.shares else {
        ctx.skip(
            PREPARED,
            format!("the suite does not know how driver {} shows a share in a container", ctx.target.driver.name),
        );
        return Ok(());
    };
    let shared: Vec<&Share> = held.iter().filter(|s| s.share_id.is_some()).collect();
    if shared.is_empty() {
        ctx.fail(PREPARED, format!("no claim was allocated a share of a device: {held:?}"), Vec::new());
        return Ok(());
    }
    for share in &shared {
        let wrong = |log: &str| mismatch(share, seen_shares(log).get(&share.device), capacity);
        // The log fills as the container starts; give it a few seconds.
        let last = ctx.poll_until(Duration::from_secs(15), || log(ctx, &share.pod), |l| wrong(l).is_none()).await;
        if let Err(l) = last {
            let why = wrong(&l).unwrap_or_default();
            ctx.fail(PREPARED, format!("pod {}: {why}", share.pod), ctx.evidence(&share.pod).await);
            return Ok(());
        }
    }
    ctx.pass(
        PREPARED,
        format!(
            "each of {} containers sees its device with its own share ID and {capacity}: {}",
            shared.len(),
            shared
                .iter()
                .map(|s| format!("{} {}", s.pod, s.consumed.as_ref().map_or("?".into(), |c| c.to_string())))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    Ok(())
}

/// Why what a container shows of `share` is not that share; `None` where it is.
fn mismatch(share: &Share, seen: Option<&crate::adapters::SeenShare>, capacity: &str) -> Option<String> {
    let Some(seen) = seen else {
        return Some(format!("its container shows no share of device {}", share.device));
    };
    if seen.share_id != share.share_id {
        return Some(format!(
            "its container shows share {:?} of device {}, but the claim was allocated share {:?}",
            seen.share_id, share.device, share.share_id
        ));
    }
    // Capacity names as variables hold them: what a variable name cannot hold is `_`.
    let key = |n: &str| n.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect::<String>();
    let shown = seen.capacity.iter().find(|(n, _)| key(n) == key(capacity)).and_then(|(_, q)| Quantity::parse(q).ok());
    match (&share.consumed, &shown) {
        (Some(want), Some(got)) if want.as_float() == got.as_float() => None,
        (None, _) => None,
        _ => Some(format!(
            "its container may use {} of {capacity} of device {}, but the claim was allocated {}",
            shown.map_or("nothing stated".into(), |q| q.to_string()),
            share.device,
            share.consumed.as_ref().map_or("?".into(), |c| c.to_string())
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(pod: &str, id: Option<&str>, consumed: &str) -> Share {
        Share {
            pod: pod.into(),
            device: "gpu-5".into(),
            share_id: id.map(Into::into),
            consumed: Quantity::parse(consumed).ok(),
        }
    }

    fn shared_gpu() -> Vec<Device> {
        let mut d = dracheck_objects::device("gpu-5").capacity("memory", "24Gi").build();
        d.capacity.as_mut().unwrap().get_mut("memory").unwrap().request_policy =
            Some(k8s_openapi::api::resource::v1::CapacityRequestPolicy {
                default: Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity("4Gi".into())),
                ..Default::default()
            });
        vec![d]
    }

    #[test]
    fn shares_within_the_capacity_with_the_default_first_and_a_refusal_pass() {
        let held = [share("d", Some("a"), "4Gi"), share("s0", Some("b"), "8Gi"), share("s1", Some("c"), "8Gi")];
        let refused = ("s2".to_string(), "cannot allocate all claims".to_string());
        let pass = judge_shared(&held, &shared_gpu(), "memory", "8Gi", Some(&refused)).unwrap();
        assert!(pass.contains("3 claims held shares of gpu-5"), "{pass}");
    }

    #[test]
    fn a_device_taken_whole_shares_beyond_capacity_or_a_wrong_default_fail() {
        let devices = shared_gpu();
        let refused = ("s".to_string(), "no".to_string());
        let whole = judge_shared(&[share("d", None, "24Gi")], &devices, "memory", "8Gi", Some(&refused)).unwrap_err();
        assert!(whole.contains("whole"), "{whole}");
        let over = [share("d", Some("a"), "4Gi"), share("s0", Some("b"), "16Gi"), share("s1", Some("c"), "16Gi")];
        let over = judge_shared(&over, &devices, "memory", "16Gi", Some(&refused)).unwrap_err();
        assert!(over.contains("which has 24Gi"), "{over}");
        let all = [share("d", Some("a"), "24Gi"), share("s0", Some("b"), "8Gi")];
        let all = judge_shared(&all, &devices, "memory", "8Gi", Some(&refused)).unwrap_err();
        assert!(all.contains("not its default 4Gi"), "{all}");
        let same = [share("d", Some("a"), "4Gi"), share("s0", Some("a"), "8Gi")];
        assert!(judge_shared(&same, &devices, "memory", "8Gi", Some(&refused)).unwrap_err().contains("same shareID"));
        let never = [share("d", Some("a"), "4Gi"), share("s0", Some("b"), "8Gi")];
        assert!(judge_shared(&never, &devices, "memory", "8Gi", None).unwrap_err().contains("none was refused"));
    }

    #[test]
    fn a_container_must_show_its_own_share_and_capacity() {
        let s = share("s0", Some("b"), "8Gi");
        let seen = |id: &str, q: &str| crate::adapters::SeenShare {
            share_id: Some(id.into()),
            capacity: [("memory".to_string(), q.to_string())].into(),
        };
        assert_eq!(mismatch(&s, Some(&seen("b", "8Gi")), "memory"), None);
        assert_eq!(mismatch(&s, Some(&seen("b", "8192Mi")), "memory"), None, "quantities compare by value");
        assert!(mismatch(&s, Some(&seen("a", "8Gi")), "memory").unwrap().contains("share Some(\"a\")"));
        assert!(mismatch(&s, Some(&seen("b", "4Gi")), "memory").unwrap().contains("may use 4Gi"));
        assert!(mismatch(&s, None, "memory").unwrap().contains("no share"));
    }
}
