//! Driver upgrades as a DaemonSet's rolling update does them: the new pod's plugin starts beside
//! the old one on the node, with sockets of its own, and the kubelet sends new calls to the
//! newest registered instance. First a rolling update: a new instance starts, the old one goes,
//! and the new one must take over what the old one prepared. Then a failed update of that new
//! instance: another one registers and goes again, and the serving one must serve on as if
//! nothing happened. Through both the node's ResourceSlices must stay the very objects they
//! were, never written to (the upstream "rolling update" and "failed update" tests), and the
//! running workload keeps its devices. One claim runs at a time, so that a profile whose claim
//! takes all of a node's devices can be checked too.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::common::{allocated, device_names, kept_running, new_specs};
use crate::coverage::RowId::D;
use crate::coverage::Verdict::{Covered, Partial};
use crate::coverage::{UpstreamRow, e2e};
use crate::engine::{Ctx, Disruption, Role, Scenario, ScenarioError, Tier};
use crate::profile::ids;

pub static SCENARIO: Scenario = Scenario {
    name: "driver-upgrade",
    tier: Tier::Cluster,
    role: Role::Restarts,
    guarantees: &[ids::DRIVER_UPGRADE_FAILED, ids::DRIVER_UPGRADE_ROLLING],
    disrupts: Disruption::UpgradesDriver,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: D(5),
        test: "rolling update",
        at: e2e(1274),
        asserts: "a new instance starts beside the old one and the old one goes: the slices stay the same objects and \
                  pods run",
        guarantees: &[ids::DRIVER_UPGRADE_ROLLING],
        verdict: Covered,
    },
    UpstreamRow {
        id: D(6),
        test: "rolling update with long driver name",
        at: e2e(1317),
        asserts: "the same with a driver name so long that the instances' socket paths near the AF_UNIX limit",
        guarantees: &[ids::DRIVER_UPGRADE_ROLLING],
        verdict: Partial(
            "the update runs under the driver's own name and an 11-character instance ID where a DaemonSet pod's UID \
             has 36, so a driver whose socket paths overflow the limit with upstream's long name passes",
        ),
    },
    UpstreamRow {
        id: D(7),
        test: "failed update",
        at: e2e(1353),
        asserts: "a new instance that registers and goes again leaves the old one serving, its slices untouched",
        guarantees: &[ids::DRIVER_UPGRADE_FAILED],
        verdict: Covered,
    },
];

/// How long an instance has to register with the kubelet, or to be dropped by it once gone.
const REGISTRATION: Duration = Duration::from_secs(30);
/// Where the kubelet's registrations cannot be read, how long an instance is given for it.
const UNSEEN_REGISTRATION: Duration = Duration::from_secs(5);
const POD_START: Duration = Duration::from_secs(60);
/// A container that ended shows in its pod's status only after the kubelet's next relist
/// (1 s) and status update: what an update did to a running pod is read after this.
const STATUS_SETTLE: Duration = Duration::from_secs(3);
/// The IDs of the new instances (a pod UID in a DaemonSet).
const FAILED_INSTANCE: &str = "upgrade-failed";
const NEW_INSTANCE: &str = "upgrade-new";

/// A slice as an upgrade must leave it: the same object (UID), not written to (resource
/// version), by name.
type Slices = BTreeMap<String, (String, String)>;

async fn slices(ctx: &Ctx<'_>) -> Slices {
    let mut out = Slices::new();
    for s in ctx.slices_of(&ctx.node).await {
        let (Some(name), Some(uid), Some(rv)) = (s.metadata.name, s.metadata.uid, s.metadata.resource_version) else {
            continue;
        };
        out.insert(name, (uid, rv));
    }
    out
}

/// What became of the slices since `before`, or `None` where they are the same objects,
/// unwritten.
fn slices_changed(before: &Slices, now: &Slices) -> Option<String> {
    if before == now {
        return None;
    }
    let (had, has): (BTreeSet<_>, BTreeSet<_>) = (before.keys().collect(), now.keys().collect());
    let gone: Vec<_> = had.difference(&has).collect();
    let new: Vec<_> = has.difference(&had).collect();
    let written: Vec<_> = before.iter().filter(|(n, v)| now.get(*n).is_some_and(|w| w != *v)).map(|(n, _)| n).collect();
    Some(format!("the node's slices changed: gone {gone:?}, new {new:?}, recreated or written to {written:?}"))
}

/// Whether `endpoint` is the DRA socket of instance `id` (`dra-<id>.sock` for the mock and
/// the upstream helper).
fn of_instance(endpoint: &std::path::Path, id: &str) -> bool {
    endpoint.file_name().is_some_and(|f| f.to_string_lossy().contains(id))
}

/// Waits until the kubelet of the scenario's node has (`up`) or no longer has an instance of
/// the driver that `which` picks among its registered sockets. Where the registrations
/// cannot be read, gives it [`UNSEEN_REGISTRATION`].
async fn registration(
    ctx: &Ctx<'_>,
    what: &str,
    up: bool,
    which: impl Fn(&std::path::Path) -> bool,
) -> Result<(), ScenarioError> {
    let endpoints = || ctx.target.registered_endpoints(&ctx.node, &ctx.target.adapter.name);
    match ctx.poll_until(REGISTRATION, endpoints, |e| e.as_ref().is_none_or(|e| e.iter().any(|e| which(e)) == up)).await
    {
        // A target that does not say what its kubelet registered: give it the time instead.
        Ok((None, _)) => {
            tokio::time::sleep(UNSEEN_REGISTRATION).await;
            Ok(())
        }
        Ok(_) => Ok(()),
        Err(endpoints) => Err(ScenarioError::timeout(
            format!(
                "the kubelet of {} did {}register {what} (registered: {:?})",
                ctx.node,
                if up { "not " } else { "not de" },
                endpoints.unwrap_or_default()
            ),
            REGISTRATION,
        )),
    }
}

/// A pod with a new claim of the profile's shape runs within [`POD_START`]; with how long it
/// took, the CDI specs that appeared with it where the node's CDI dir can be read. The error
/// says why it did not run.
async fn new_claim_runs(ctx: &Ctx<'_>, name: &str) -> Result<(Duration, Option<Vec<String>>), String> {
    let before = ctx.target.cdi_specs(&ctx.node).await;
    ctx.create(&ctx.profile_claim(name)).await.map_err(|e| e.to_string())?;
    ctx.create(&ctx.pod(name).claim("devices", name).command(dracheck_objects::IDLE).build())
        .await
        .map_err(|e| e.to_string())?;
    let took = ctx.wait_phase(name, "Running", POD_START).await.map_err(|e| e.to_string())?;
    let specs = match (before, ctx.target.cdi_specs(&ctx.node).await) {
        (Some(before), Some(now)) => Some(new_specs(&before, &now)),
        _ => None,
    };
    Ok((took, specs))
}

/// The devices of `pod`'s claim (named like it), once it runs.
async fn devices_of(ctx: &Ctx<'_>, pod: &str) -> Result<Vec<String>, ScenarioError> {
    let (claim, _) = allocated(ctx, pod, Duration::from_secs(30)).await?;
    Ok(device_names(&claim))
}

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    if ctx.target.adapter.instance_args.is_none() {
        let why = "the driver's adapter knows no way to run a second instance of its plugin beside the first (sockets of \
                   its own, as the upstream helper's RollingUpdate gives them)";
        ctx.skip(ids::DRIVER_UPGRADE_FAILED, why);
        ctx.skip(ids::DRIVER_UPGRADE_ROLLING, why);
        return Ok(());
    }
    ctx.phase("a workload before the update");
    let held = new_claim_runs(ctx, "held").await.map_err(ScenarioError::Unmet)?;
    let held = Running { pod: "held", devices: devices_of(ctx, "held").await?, specs: held.1 };

    // The rolling update leaves its new instance serving, with a pod it prepared; the failed
    // update is then one of that instance.
    let outcome = match rolling_update(ctx, held).await {
        Ok((new, prepared)) => {
            let failed = match prepared {
                Some(running) => failed_update(ctx, running).await,
                None => {
                    ctx.fail(
                        ids::DRIVER_UPGRADE_FAILED,
                        "the rolling update left no pod of the new instance to carry through a failed one",
                        Vec::new(),
                    );
                    Ok(())
                }
            };
            drop(new);
            failed
        }
        Err(e) => Err(e),
    };
    // The driver's own instance back, whatever happened: the node's next scenarios need it.
    ctx.phase("the driver's own instance back");
    ctx.target.start_driver(&ctx.node).await?;
    registration(ctx, "the driver's own instance", true, |e| !of_instance(e, NEW_INSTANCE)).await?;
    outcome
}

/// The node's slices before an update, which it must leave as they are.
async fn slices_before(ctx: &Ctx<'_>) -> Result<Slices, ScenarioError> {
    let before = slices(ctx).await;
    if before.is_empty() {
        return Err(ScenarioError::Unmet(format!("{} has no slices of the driver to keep", ctx.node)));
    }
    Ok(before)
}

/// A running pod and what the driver prepared for it.
struct Running {
    pod: &'static str,
    devices: Vec<String>,
    specs: Option<Vec<String>>,
}

/// A new instance starts, the old one goes; the pod the old one prepared keeps its devices,
/// the new one gives its claim back without leftovers and prepares a new claim. Returns the
/// new instance, still serving, and that new claim's pod where it runs.
async fn rolling_update(
    ctx: &Ctx<'_>,
    old: Running,
) -> Result<(dracheck_clusters::local::DriverInstance, Option<Running>), ScenarioError> {
    let id = ids::DRIVER_UPGRADE_ROLLING;
    let before = &slices_before(ctx).await?;
    ctx.phase(&format!("a rolling update: a new instance on {}, then the old one goes", ctx.node));
    let Some(new) = ctx.target.start_instance(&ctx.node, NEW_INSTANCE).await? else {
        return Err(ScenarioError::Unmet("the driver's adapter made no second instance".into()));
    };
    registration(ctx, "the new instance", true, |e| of_instance(e, NEW_INSTANCE)).await?;
    let overlap = slices_changed(before, &slices(ctx).await);
    ctx.target.stop_driver(&ctx.node).await?;
    registration(ctx, "the old instance", false, |e| !of_instance(e, NEW_INSTANCE)).await?;
    tokio::time::sleep(STATUS_SETTLE).await;

    ctx.phase("the old instance's claim given back, a new claim for the new instance");
    let checks = async {
        if let Some(changed) = overlap {
            return Err(format!("while both instances ran, {changed}"));
        }
        kept_running(ctx, old.pod, &old.devices)
            .await
            .map_err(|e| format!("the workload from before the update: {e}"))?;
        ctx.delete_pod(old.pod, POD_START).await.map_err(|e| format!("the old instance's claim: {e}"))?;
        if let (Some(specs), Some(now)) = (&old.specs, ctx.target.cdi_specs(&ctx.node).await) {
            let left: Vec<&String> = specs.iter().filter(|s| now.contains_key(*s)).collect();
            if !left.is_empty() {
                return Err(format!(
                    "the pod whose claim the old instance prepared is gone, but the node's CDI dir still holds {left:?}, \
                     which appeared with it: the new instance does not undo what the old one prepared"
                ));
            }
        }
        let (took, specs) = new_claim_runs(ctx, "after").await.map_err(|e| format!("a new claim did not run: {e}"))?;
        if let Some(changed) = slices_changed(before, &slices(ctx).await) {
            return Err(format!("after the old instance went, {changed}"));
        }
        Ok((took, specs))
    };
    let specs = match checks.await {
        Ok((took, specs)) => {
            ctx.pass(
                id,
                format!(
                    "the node's {} slice(s) stayed the same objects, unwritten, through the overlap and after the old \
                     instance went; the running pod kept {:?} and its claim was given back{}; a new claim ran in {:.1}s",
                    before.len(),
                    old.devices,
                    if old.specs.is_some() { " with no CDI spec of it left" } else { "" },
                    took.as_secs_f64()
                ),
            );
            specs
        }
        Err(why) => {
            ctx.fail(id, why, ctx.evidence("after").await);
            // The failed update still gets a pod of this instance where one can run.
            let _ = ctx.delete_pod(old.pod, POD_START).await;
            if ctx.get_pod("after").await.is_none() {
                let _ = new_claim_runs(ctx, "after").await;
            }
            None
        }
    };
    let phase = ctx.get_pod("after").await.and_then(|p| p.status?.phase);
    let prepared = match phase.as_deref() {
        Some("Running") => Some(Running { pod: "after", devices: devices_of(ctx, "after").await?, specs }),
        _ => None,
    };
    Ok((new, prepared))
}

/// A new instance registers and goes again; the serving one serves on: its pod keeps its
/// devices, is given back, and a new claim runs.
async fn failed_update(ctx: &Ctx<'_>, old: Running) -> Result<(), ScenarioError> {
    let id = ids::DRIVER_UPGRADE_FAILED;
    let before = &slices_before(ctx).await?;
    ctx.phase(&format!("a failed update: another new instance on {} registers and goes again", ctx.node));
    let Some(mut failed) = ctx.target.start_instance(&ctx.node, FAILED_INSTANCE).await? else {
        return Err(ScenarioError::Unmet("the driver's adapter made no second instance".into()));
    };
    registration(ctx, "the new instance", true, |e| of_instance(e, FAILED_INSTANCE)).await?;
    failed.stop(Duration::from_secs(10));
    registration(ctx, "the failed instance", false, |e| of_instance(e, FAILED_INSTANCE)).await?;
    tokio::time::sleep(STATUS_SETTLE).await;

    ctx.phase("the instance from before serves on: its pod given back, a new claim");
    let checks = async {
        kept_running(ctx, old.pod, &old.devices)
            .await
            .map_err(|e| format!("the workload from before the update: {e}"))?;
        ctx.delete_pod(old.pod, POD_START).await.map_err(|e| {
            format!("after the new instance went, the claim of the pod from before was not given back: {e}")
        })?;
        let (took, _) = new_claim_runs(ctx, "final")
            .await
            .map_err(|e| format!("after the new instance went, a new claim did not run: {e}"))?;
        if let Some(changed) = slices_changed(before, &slices(ctx).await) {
            return Err(changed);
        }
        Ok(took)
    };
    match checks.await {
        Ok(took) => ctx.pass(
            id,
            format!(
                "a new instance registered and went again; the one from before served on: its pod kept {:?} and was \
                 given back, a new claim ran in {:.1}s, and the node's {} slice(s) stayed the same objects, unwritten",
                old.devices,
                took.as_secs_f64(),
                before.len()
            ),
        ),
        Err(why) => ctx.fail(id, why, ctx.evidence("final").await),
    }
    Ok(())
}
