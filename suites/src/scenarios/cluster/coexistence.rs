//! Two drivers on one node share a claim. Beside the driver under test the suite runs the run's
//! second driver on the scenario's node (its companion: the mock as `nic.mock.dracheck.io`,
//! two NICs, a CDI kind and variables of its own), as another vendor's DaemonSet would, and
//! makes the profile's claim with one more request, for a device of the companion. The kubelet asks each driver to prepare
//! that claim: each must prepare only its own allocation results. A driver that takes the
//! other's result as its own fails the prepare (it does not have that device) or hands the
//! container a device it was not given. The container must see the devices of both drivers,
//! and once the pod is gone neither driver's CDI spec of the claim may be left on the node.

use std::time::Duration;

use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, DeviceClass, DeviceClassSpec, DeviceSelector, ResourceClaim, ResourceSlice,
};
use kube::api::{Api, DeleteParams, ListParams};

use super::common::{log, new_specs, running, seen_by_name};
use crate::adapters::{Companion, SeenDevices, sees_exactly};
use crate::coverage::RowId::{A, B};
use crate::coverage::Verdict::{Covered, Partial};
use crate::coverage::{UpstreamRow, e2e, e2e_node};
use crate::engine::{Ctx, Disruption, Role, Scenario, ScenarioError, Tier};
use crate::profile::ids;

pub static SCENARIO: Scenario = Scenario {
    name: "coexistence",
    tier: Tier::Cluster,
    // The profile's claim and one more device on one node, after the configuration checks
    // have given theirs back.
    role: Role::Exhaustion,
    guarantees: &[ids::DRIVERS_COEXIST],
    disrupts: Disruption::AddsDriver,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: A(8),
        test: "with multiple drivers, using only drapbv1: work",
        at: e2e(4343),
        asserts: "a pod with two claims of each of two drivers runs: each driver prepares both its claims in one call",
        guarantees: &[ids::DRIVERS_COEXIST, ids::PLUGIN_PREPARE_OWN_RESULTS_ONLY],
        verdict: Partial(NO_BATCH),
    },
    UpstreamRow {
        id: A(9),
        test: "with multiple drivers, using drapbv1beta1 and drapbv1: work",
        at: e2e(4344),
        asserts: "the same, for drivers that serve both v1beta1.DRAPlugin and v1.DRAPlugin",
        guarantees: &[ids::DRIVERS_COEXIST, ids::PLUGIN_PREPARE_OWN_RESULTS_ONLY],
        verdict: Partial(NO_BATCH),
    },
    UpstreamRow {
        id: B(14),
        test: "Two plugins: must prepare and unprepare resources",
        at: e2e_node(606),
        asserts: "each of two drivers prepares and unprepares its part of a claim they share",
        guarantees: &[ids::DRIVERS_COEXIST, ids::PLUGIN_PREPARE_OWN_RESULTS_ONLY],
        verdict: Covered,
    },
];

/// What the two-driver checks leave out of upstream's "with multiple drivers".
const NO_BATCH: &str = "the claim here has one device of each driver and the plugin tier sends one claim per call, so no \
                        prepare carries two claims of the driver and one that mishandles a batch of claims passes";

/// How long the companion has to register with the kubelet and publish its slices.
const COMPANION_UP: Duration = Duration::from_secs(30);
/// The claim's request for the companion's device.
const COMPANION_REQUEST: &str = "companion";

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let id = ids::DRIVERS_COEXIST;
    let Some(seen) = seen_by_name(ctx, id) else { return Ok(()) };
    // The engine skips the scenario where the run has no second driver.
    let companion = ctx.target.companion.as_ref().ok_or(crate::engine::DisruptionError::NoCompanion)?;
    let other = companion.spec.name.as_str();
    let within = Duration::from_secs(ctx.profile().guarantees.allocation.as_ref().map_or(60, |a| a.within_seconds));

    ctx.phase(&format!("a second driver, {other}, on {}", ctx.node));
    // Stopped when dropped, at the end of this function, on every path.
    let _running = ctx.target.start_companion(&ctx.node).await?;
    companion_up(ctx, other).await?;
    let class = format!("{}-companion", ctx.ns);
    ctx.create_class(&companion_class(&class, other)).await?;

    let specs_before = ctx.target.cdi_specs(&ctx.node).await.unwrap_or_default();
    ctx.phase("the profile's claim with one more request, for the second driver's device");
    let claim = ctx.profile().claim().and_request(COMPANION_REQUEST, &class, 1);
    ctx.create(&claim.claim(&ctx.ns, "both")).await?;
    ctx.create(&ctx.workload("both").claim("devices", "both").build()).await?;
    let Some(claim) = running(ctx, id, "both", "both", within).await else { return cleanup(ctx, within).await };
    let (ours, theirs) = split(ctx, other, &claim);
    if let Err(why) = sees_both(ctx, seen, companion, &ours, &theirs).await {
        ctx.fail(id, why, ctx.evidence("both").await);
        return cleanup(ctx, within).await;
    }

    ctx.phase("deleting the pod: each driver unprepares its part of the claim");
    ctx.delete_pod("both", within).await?;
    let left = new_specs(&specs_before, &ctx.target.cdi_specs(&ctx.node).await.unwrap_or_default());
    if left.is_empty() {
        ctx.pass(
            id,
            format!(
                "a claim with {ours:?} of {} and {theirs:?} of {other} ran on {}, its container saw all of them, and \
                 both drivers' CDI specs of it went with the pod",
                ctx.target.driver.name, ctx.node
            ),
        );
    } else {
        ctx.fail(
            id,
            format!(
                "the pod of the claim shared with {other} is gone, but the node's CDI dir still holds {left:?}, which \
                 appeared with it"
            ),
            Vec::new(),
        );
    }
    cleanup(ctx, within).await
}

/// Waits until the kubelet of the scenario's node registered the companion and its slices are
/// published: before that, a pod would wait for the kubelet's next resync.
async fn companion_up(ctx: &Ctx<'_>, other: &str) -> Result<(), ScenarioError> {
    let slices: Api<ResourceSlice> = Api::all(ctx.client());
    let lp = ListParams::default().fields(&format!("spec.nodeName={},spec.driver={other}", ctx.node));
    let state = || async {
        let registered = ctx.target.registered(&ctx.node, other).await.unwrap_or(false);
        (registered, slices.list(&lp).await.is_ok_and(|l| !l.items.is_empty()))
    };
    match ctx.poll_until(COMPANION_UP, state, |(registered, published)| *registered && *published).await {
        Ok(_) => Ok(()),
        Err((registered, published)) => Err(ScenarioError::timeout(
            format!(
                "the second driver {other} did not come up on {} (registered: {registered}, slices published: \
                 {published})",
                ctx.node
            ),
            COMPANION_UP,
        )),
    }
}

/// A class of the companion's devices.
fn companion_class(name: &str, other: &str) -> DeviceClass {
    let selector =
        DeviceSelector { cel: Some(CELDeviceSelector { expression: format!("device.driver == \"{other}\"") }) };
    DeviceClass {
        metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: Some(DeviceClassSpec { selectors: Some(vec![selector]), ..Default::default() }),
    }
}

/// The devices allocated to the claim: those of the driver under test and the companion's.
fn split(ctx: &Ctx<'_>, other: &str, claim: &ResourceClaim) -> (Vec<String>, Vec<String>) {
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for (driver, _, device) in Ctx::allocated(claim) {
        if driver == ctx.target.driver.name {
            ours.push(device);
        } else if driver == other {
            theirs.push(device);
        }
    }
    (ours, theirs)
}

/// Whether the workload sees exactly `ours` as the driver under test gives them and `theirs`
/// as the companion does. The log fills as the container starts; it gets a few seconds.
async fn sees_both(
    ctx: &Ctx<'_>,
    seen: SeenDevices,
    companion: &Companion,
    ours: &[String],
    theirs: &[String],
) -> Result<(), String> {
    let other = &companion.spec.name;
    let judge = |log: &String| -> Result<(), String> {
        sees_exactly(seen(log), ours).map_err(|e| format!("of {}'s devices: {e}", ctx.target.driver.name))?;
        sees_exactly((companion.seen)(log), theirs).map_err(|e| format!("of {other}'s devices: {e}"))
    };
    match ctx.poll_until(Duration::from_secs(15), || log(ctx, "both"), |l| judge(l).is_ok()).await {
        Ok(_) => Ok(()),
        Err(l) => judge(&l),
    }
}

/// The pod (if still there) and the claim go before the companion stops, so that it can
/// unprepare its part; the class is the run's to remove.
async fn cleanup(ctx: &Ctx<'_>, within: Duration) -> Result<(), ScenarioError> {
    let _ = ctx.delete_pod("both", within).await;
    let _ = ctx.api::<ResourceClaim>().delete("both", &DeleteParams::default()).await;
    Ok(())
}
