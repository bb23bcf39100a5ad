//! Requests that cannot be met: the pod stays Pending with `PodScheduled=False` reason
//! `Unschedulable`, the claim stays unallocated, the message names the cause, `explain`
//! finds the cause the request was built with, and once the request is fixed the pod
//! schedules. "More than a node has" and "more capacity than any device has" are measured
//! against the driver's inventory oracle, not against what the driver publishes. A refusal
//! counts only beside a control: a claim of the profile's own shape, asked on the same node,
//! is allocated. Where it is not (a driver that publishes nothing usable), every request would
//! be refused, so the refusals are skipped with that reason instead of passing for nothing.

use std::time::Duration;

use dracheck_objects::quantity::Quantity;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{Device, ResourceClaim, ResourceSlice};
use kube::api::{Api, DeleteParams, ListParams};

use super::common::{allocated, wait_unschedulable};
use crate::engine::wait::conditions;
use crate::engine::{Ctx, Role, Scenario, ScenarioError, Tier};
use crate::profile::{ImpossibleVariant, ids};
use crate::result::Evidence;

pub static SCENARIO: Scenario = Scenario {
    name: "impossible",
    tier: Tier::Cluster,
    role: Role::General,
    guarantees: &[
        ids::CLAIM_IMPOSSIBLE_UNKNOWN_CLASS,
        ids::CLAIM_IMPOSSIBLE_SELECTOR,
        ids::CLAIM_IMPOSSIBLE_COUNT,
        ids::CLAIM_IMPOSSIBLE_CAPACITY,
        ids::CLAIM_IMPOSSIBLE_EXPLAINED,
    ],
    disrupts: crate::engine::Disruption::None,
    run: crate::scenario_fn!(run),
};

const MISSING_CLASS: &str = "dracheck-no-such-class";

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let variants = ctx.profile().guarantees.impossible.as_ref().map(|i| i.variants.clone()).unwrap_or_default();
    let mut asked = Vec::new();
    let mut refusals: Vec<(&'static str, String)> = Vec::new();
    for (i, variant) in variants.iter().enumerate() {
        let (id, what) = match variant {
            ImpossibleVariant::UnknownClass => (ids::CLAIM_IMPOSSIBLE_UNKNOWN_CLASS, "an unknown DeviceClass"),
            ImpossibleVariant::SelectorMatchesNothing => {
                (ids::CLAIM_IMPOSSIBLE_SELECTOR, "a selector no device matches")
            }
            ImpossibleVariant::CountAboveInventory => {
                (ids::CLAIM_IMPOSSIBLE_COUNT, "more devices than any one node has")
            }
            ImpossibleVariant::CapacityTooLarge => {
                (ids::CLAIM_IMPOSSIBLE_CAPACITY, "more capacity than any device has")
            }
        };
        ctx.phase(&format!("asking for {what}"));
        let name = format!("impossible-{i}");
        let Some(claim) = impossible_claim(ctx, variant, &name).await else {
            let why = "the driver publishes no capacity to ask too much of";
            ctx.skip(id, why);
            asked.push(Asked::Skipped { variant: *variant, why });
            continue;
        };
        ctx.create(&claim).await?;
        ctx.create(&ctx.pod(&name).claim("devices", &name).command(dracheck_objects::IDLE).build()).await?;
        let verdict = wait_unschedulable(ctx, &name, Duration::from_secs(30)).await;
        let still_unallocated = ctx.get_claim(&name).await.is_some_and(|c| Ctx::allocated(&c).is_empty());
        match verdict {
            Some((reason, message)) if reason == "Unschedulable" && still_unallocated => {
                refusals.push((id, format!("Pending, Unschedulable: {message}")));
                asked.push(Asked::Refused { variant: *variant, pod: name, message });
            }
            Some((reason, message)) => {
                ctx.fail(
                    id,
                    format!(
                        "PodScheduled=False with reason {reason} (claim allocated: {}): {message}",
                        !still_unallocated
                    ),
                    ctx.evidence(&name).await,
                );
                asked.push(Asked::NotRefused { variant: *variant });
            }
            None => {
                ctx.fail(
                    id,
                    format!("{what} did not make the pod unschedulable within 30s"),
                    ctx.evidence(&name).await,
                );
                asked.push(Asked::NotRefused { variant: *variant });
            }
        }
    }
    let control = if refusals.is_empty() {
        Ok(())
    } else {
        ctx.phase("asking for a claim of the profile's own shape, the control");
        control(ctx).await
    };
    for (id, why) in refusals {
        match &control {
            Ok(()) => ctx.pass(id, why),
            Err(no) => ctx.skip(id, no),
        }
    }
    match judged(&asked) {
        Judged::Nothing => Ok(()),
        Judged::Explain { .. } if control.is_err() => {
            ctx.skip(ids::CLAIM_IMPOSSIBLE_EXPLAINED, control.unwrap_err());
            Ok(())
        }
        Judged::Skip(why) => {
            ctx.skip(ids::CLAIM_IMPOSSIBLE_EXPLAINED, why);
            Ok(())
        }
        Judged::Fail(why) => {
            ctx.fail(ids::CLAIM_IMPOSSIBLE_EXPLAINED, why, Vec::new());
            Ok(())
        }
        Judged::Explain { refused, skipped } => check_explained(ctx, &refused, skipped).await,
    }
}

/// The control: a claim of the profile's own shape, in a pod on the scenario's node, is
/// allocated. `Err` says why the refusals show nothing.
async fn control(ctx: &Ctx<'_>) -> Result<(), String> {
    const NAME: &str = "impossible-control";
    const WITHIN: Duration = Duration::from_secs(30);
    let made = async {
        ctx.create(&ctx.profile_claim(NAME)).await?;
        ctx.create(&ctx.pod(NAME).claim("devices", NAME).command(dracheck_objects::IDLE).build()).await
    };
    let outcome = match made.await {
        Ok(_) => allocated(ctx, NAME, WITHIN).await.map(|_| ()).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    // Its device goes back before the fixed requests ask for one.
    let _ = ctx.delete_pod(NAME, WITHIN).await;
    let _ = ctx.api::<ResourceClaim>().delete(NAME, &DeleteParams::default()).await;
    outcome.map_err(|e| {
        format!(
            "refused, but so was the control, a claim of the profile's own shape on the same node ({e}): with nothing \
             allocatable every request is refused, so this refusal shows nothing of the request"
        )
    })
}

/// What became of one impossible request before its explanation is judged.
#[derive(Debug, Clone, PartialEq)]
enum Asked {
    /// Pending and Unschedulable, the claim unallocated: there is something to explain.
    Refused { variant: ImpossibleVariant, pod: String, message: String },
    /// Allocated, or refused for another reason: its own guarantee failed.
    NotRefused { variant: ImpossibleVariant },
    /// Not built on this driver (e.g. no capacity to ask too much of).
    Skipped { variant: ImpossibleVariant, why: &'static str },
}

/// How `claim.impossible.explained` is judged from the requests that were asked.
#[derive(Debug, PartialEq)]
enum Judged {
    /// The profile lists no impossible request.
    Nothing,
    Skip(String),
    Fail(String),
    /// Explain each refused request; `skipped` says which were not asked and why.
    Explain {
        refused: Vec<(ImpossibleVariant, String, String)>,
        skipped: Vec<String>,
    },
}

/// Only the requests that ran are judged: a variant the driver gives no way to build is
/// skipped with its own reason, and says nothing about whether the others are explained.
fn judged(asked: &[Asked]) -> Judged {
    let mut refused = Vec::new();
    let mut not_refused = Vec::new();
    let mut skipped = Vec::new();
    for a in asked {
        match a {
            Asked::Refused { variant, pod, message } => refused.push((*variant, pod.clone(), message.clone())),
            Asked::NotRefused { variant } => not_refused.push(variant.id().to_string()),
            Asked::Skipped { variant, why } => skipped.push(format!("{} ({why})", variant.id())),
        }
    }
    if asked.is_empty() {
        Judged::Nothing
    } else if !not_refused.is_empty() {
        Judged::Fail(format!(
            "the impossible request(s) {} were not refused as Unschedulable, so there is no refusal to explain for them",
            not_refused.join(", ")
        ))
    } else if refused.is_empty() {
        Judged::Skip(format!("no impossible request could be asked: skipped {}", skipped.join("; ")))
    } else {
        Judged::Explain { refused, skipped }
    }
}

/// The message must name the cause where the scheduler can know it (the missing class),
/// `explain` must find the cause the request was built with, and fixing the request must let
/// the pod schedule: the verdict was about the request, not the cluster.
async fn check_explained(
    ctx: &Ctx<'_>,
    cases: &[(ImpossibleVariant, String, String)],
    skipped: Vec<String>,
) -> Result<(), ScenarioError> {
    let total = cases.len();
    let mut explanations = Vec::new();
    for (variant, name, message) in cases {
        if matches!(variant, ImpossibleVariant::UnknownClass) && !message.contains(MISSING_CLASS) {
            ctx.fail(
                ids::CLAIM_IMPOSSIBLE_EXPLAINED,
                format!("the message does not name the missing class: {message}"),
                Vec::new(),
            );
        }
        if message.trim().is_empty() {
            ctx.fail(
                ids::CLAIM_IMPOSSIBLE_EXPLAINED,
                format!("pod {name} is unschedulable without a message"),
                Vec::new(),
            );
        }
        ctx.phase(&format!("explaining {name}"));
        match explains(ctx, *variant, name).await {
            Ok(e) => explanations.extend(e),
            Err(NotExplained { reason, evidence }) => ctx.fail(ids::CLAIM_IMPOSSIBLE_EXPLAINED, reason, evidence),
        }
        // The fix: the same pod with a claim of the profile's own shape.
        ctx.phase(&format!("fixing {name}"));
        let _ = ctx
            .api::<Pod>()
            .delete(name, &DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() })
            .await;
        let _ = ctx.api::<ResourceClaim>().delete(name, &DeleteParams::default()).await;
        ctx.wait_pod(name, conditions::gone(), Duration::from_secs(30)).await.map_err(|_| {
            ScenarioError::timeout(format!("pod {name} was not gone after its deletion"), Duration::from_secs(30))
        })?;
        let fixed = format!("{name}-fixed");
        ctx.create(&ctx.profile_claim(&fixed)).await?;
        ctx.create(&ctx.pod(&fixed).claim("devices", &fixed).command(dracheck_objects::IDLE).build()).await?;
        if let Err(e) = allocated(ctx, &fixed, Duration::from_secs(30)).await {
            ctx.fail(
                ids::CLAIM_IMPOSSIBLE_EXPLAINED,
                format!("after fixing the request of {name}: {e}"),
                ctx.evidence(&fixed).await,
            );
        }
        let _ = ctx.delete_pod(&fixed, Duration::from_secs(30)).await;
        let _ = ctx.api::<ResourceClaim>().delete(&fixed, &DeleteParams::default()).await;
    }
    if !ctx.is_recorded(ids::CLAIM_IMPOSSIBLE_EXPLAINED) {
        ctx.pass_with(
            ids::CLAIM_IMPOSSIBLE_EXPLAINED,
            format!(
                "{total} impossible request(s) refused with a message, explain named each cause, and each scheduled \
                 once fixed{}",
                if skipped.is_empty() { String::new() } else { format!("; not asked: {}", skipped.join("; ")) }
            ),
            explanations,
        );
    }
    Ok(())
}

/// `cargo xtask explain` of the refused pod names the cause `variant` built in. Either way the
/// explanation comes back as evidence; `Err` carries the failure.
async fn explains(ctx: &Ctx<'_>, variant: ImpossibleVariant, pod: &str) -> Result<Vec<Evidence>, NotExplained> {
    use dracheck_explain::Cause;
    let e = dracheck_explain::explain(&ctx.client(), &ctx.ns, pod)
        .await
        .map_err(|e| NotExplained { reason: format!("explain of pod {pod} failed: {e}"), evidence: Vec::new() })?;
    let text = dracheck_explain::text(&e);
    let evidence = vec![Evidence {
        title: format!("{} explain {}/{pod}", dracheck_adapter::program::name(), ctx.ns),
        body: text.clone(),
    }];
    let named = e.causes.iter().any(|c| match variant {
        ImpossibleVariant::UnknownClass => matches!(c, Cause::UnknownClass { class, .. } if class == MISSING_CLASS),
        ImpossibleVariant::SelectorMatchesNothing | ImpossibleVariant::CapacityTooLarge => {
            matches!(c, Cause::NoCompatibleDevice { .. })
        }
        ImpossibleVariant::CountAboveInventory => {
            matches!(c, Cause::CountAboveInventory { .. } | Cause::NotEnoughOnOneNode { .. })
        }
    });
    if e.fits || !named {
        let causes: Vec<String> = e.causes.iter().map(|c| c.describe()).collect();
        return Err(NotExplained {
            reason: format!(
                "explain of pod {pod} ({variant:?}) {}: {}",
                if e.fits { "says it fits" } else { "names another cause" },
                if causes.is_empty() { "no cause".to_string() } else { causes.join("; ") }
            ),
            evidence,
        });
    }
    Ok(evidence)
}

/// `explain` did not name the cause of an impossible claim: why, with its output.
struct NotExplained {
    reason: String,
    evidence: Vec<Evidence>,
}

/// The profile's claim bent into `variant`; `None` when the variant cannot be built here.
async fn impossible_claim(ctx: &Ctx<'_>, variant: &ImpossibleVariant, name: &str) -> Option<ResourceClaim> {
    let driver = &ctx.target.driver.name;
    let claim = ctx.profile().claim();
    let claim = match variant {
        ImpossibleVariant::UnknownClass => claim.class(MISSING_CLASS),
        ImpossibleVariant::SelectorMatchesNothing => {
            claim.selector(&format!("device.driver == {:?}", format!("{driver}.invalid")))
        }
        ImpossibleVariant::CountAboveInventory => claim.count(most_on_one_node(ctx).await + 1),
        ImpossibleVariant::CapacityTooLarge => {
            let (capacity, max) = largest_capacity(ctx).await?;
            let twice = twice(&max)?;
            claim.selector(&format!("device.capacity[{driver:?}].{capacity}.compareTo(quantity(\"{twice}\")) >= 0"))
        }
    };
    Some(claim.claim(&ctx.ns, name))
}

async fn driver_slices(ctx: &Ctx<'_>) -> Vec<ResourceSlice> {
    let api: Api<ResourceSlice> = Api::all(ctx.client());
    let lp = ListParams::default().fields(&format!("spec.driver={}", ctx.target.driver.name));
    api.list(&lp).await.map(|l| l.items).unwrap_or_default()
}

/// The devices of each node that runs the driver: by the driver adapter's inventory oracle,
/// so that a driver publishing devices or capacity it does not have makes the "impossible"
/// claim possible and fails; what the slices publish where the oracle has no answer. Devices
/// of slices for no single node (network-attached pools) are reachable from every node.
async fn inventory(ctx: &Ctx<'_>) -> Vec<(String, Vec<Device>)> {
    let published = driver_slices(ctx).await;
    let published_on = |node: Option<&str>| -> Vec<Device> {
        published
            .iter()
            .filter(|s| s.spec.node_name.as_deref() == node)
            .flat_map(|s| s.spec.devices.clone().unwrap_or_default())
            .collect()
    };
    let oracle = ctx.target.adapter.oracle.as_ref();
    let shared = published_on(None);
    let mut nodes = Vec::new();
    for node in ctx.target.live_nodes().await {
        let mut devices = match oracle {
            Some(oracle) => oracle(&node).unwrap_or_else(|_| published_on(Some(&node))),
            None => published_on(Some(&node)),
        };
        devices.extend(shared.iter().cloned());
        nodes.push((node, devices));
    }
    nodes
}

/// The most devices a claim can get on one node: all of its devices, whatever the class.
async fn most_on_one_node(ctx: &Ctx<'_>) -> i64 {
    inventory(ctx).await.iter().map(|(_, d)| d.len() as i64).max().unwrap_or(0)
}

/// A capacity the cluster's devices have and its largest value.
async fn largest_capacity(ctx: &Ctx<'_>) -> Option<(String, Quantity)> {
    let mut best: Option<(String, Quantity)> = None;
    for d in inventory(ctx).await.into_iter().flat_map(|(_, d)| d) {
        for (name, cap) in d.capacity.into_iter().flatten() {
            let Ok(v) = Quantity::parse(&cap.value.0) else { continue };
            if best.as_ref().is_none_or(|(_, b)| v > *b) && !name.contains('/') {
                best = Some((name, v));
            }
        }
    }
    best
}

/// Twice a quantity, as text a selector's `quantity()` reads.
fn twice(q: &Quantity) -> Option<String> {
    q.add(q).ok().map(|t| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::{Asked, Judged, judged};
    use crate::profile::ImpossibleVariant::*;

    fn refused(variant: crate::profile::ImpossibleVariant) -> Asked {
        Asked::Refused { variant, pod: "p".into(), message: "m".into() }
    }

    #[test]
    fn a_skipped_variant_does_not_fail_the_explanation_of_the_others() {
        let asked = [refused(UnknownClass), Asked::Skipped { variant: CapacityTooLarge, why: "no capacity" }];
        match judged(&asked) {
            Judged::Explain { refused, skipped } => {
                assert_eq!(refused.len(), 1);
                assert_eq!(skipped, ["claim.impossible.capacity (no capacity)"]);
            }
            other => panic!("expected the refused request to be explained, got {other:?}"),
        }
    }

    #[test]
    fn a_request_that_was_not_refused_fails_the_explanation_and_is_named() {
        let asked = [refused(UnknownClass), Asked::NotRefused { variant: CountAboveInventory }];
        let Judged::Fail(why) = judged(&asked) else { panic!("expected a failure") };
        assert!(why.contains("claim.impossible.count"), "{why}");
    }

    #[test]
    fn only_skipped_variants_skip_the_explanation_with_their_reasons() {
        let asked = [Asked::Skipped { variant: CapacityTooLarge, why: "no capacity" }];
        let Judged::Skip(why) = judged(&asked) else { panic!("expected a skip") };
        assert!(why.contains("no capacity"), "{why}");
        assert_eq!(judged(&[]), Judged::Nothing);
    }

    #[test]
    fn twice_a_quantity_is_written_for_quantity() {
        let twice = |q: &str| super::twice(&q.parse().unwrap());
        assert_eq!(twice("80Gi").as_deref(), Some("171798691840"));
        assert_eq!(twice("3").as_deref(), Some("6"));
        assert_eq!(twice("2k").as_deref(), Some("4000"));
        assert_eq!(twice("1.5Gi").as_deref(), Some("3221225472"));
        assert_eq!(twice("100m").as_deref(), Some("200000000n"));
    }
}
