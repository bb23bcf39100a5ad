//! Node reboot: the machine goes down with everything on it (containers, kubelet, driver) and
//! boots again. What was on tmpfs is lost, the CDI specs in `/var/run/cdi` among them; what
//! was on disk is kept: the kubelet's checkpoint and the driver's. The kubelet finds its pods
//! without sandboxes and starts them again, calling Prepare for their claims first (restored
//! checkpoint entries count as not prepared). A driver that answers from its own checkpoint
//! without writing the specs again hands out CDI IDs nothing resolves, and the pods stay in
//! `CreateContainerError`: the bug upstream kubernetes issue 141433 and five drivers had.
//! Afterwards the driver still unprepares the claim when its pod goes, leaving no spec behind.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

use super::common::{allocated, container_states, new_specs, secs, sees};
use crate::engine::wait::conditions;
use crate::engine::{Ctx, Role, Scenario, ScenarioError, Tier};
use crate::profile::ids;

pub static SCENARIO: Scenario = Scenario {
    name: "node-reboot",
    tier: Tier::Cluster,
    role: Role::Outages,
    guarantees: &[ids::NODE_REBOOT_WORKLOADS_RESUME],
    disrupts: crate::engine::Disruption::ControlsNodes,
    run: crate::scenario_fn!(run),
};

const RUNNING: Duration = Duration::from_secs(60);
/// From the node's Ready to the pod's containers running again: the kubelet's first sync of
/// the pod, a Prepare, a sandbox and the containers (measured: a few seconds).
const BACK: Duration = Duration::from_secs(90);
/// The kubelet wipes the node's slices at start-up; the driver publishes them again, on
/// upstream's helper after its sync delay.
const REPUBLISHED: Duration = crate::scenarios::upstream::REPUBLISHED_AFTER_DELETION;
const GONE: Duration = Duration::from_secs(60);

/// The devices the node's slices of the driver publish.
async fn published(ctx: &Ctx<'_>) -> BTreeSet<String> {
    let slices = ctx.slices_of(&ctx.node).await;
    slices.iter().flat_map(|s| s.spec.devices.iter().flatten().map(|d| d.name.clone())).collect()
}

/// When the last of the pod's containers started.
fn last_start(pod: Option<&Pod>) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time> {
    let statuses = pod?.status.as_ref()?.container_statuses.as_ref()?;
    statuses.iter().filter_map(|c| c.state.as_ref()?.running.as_ref()?.started_at.clone()).max_by_key(|t| t.0)
}

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let id = ids::NODE_REBOOT_WORKLOADS_RESUME;
    let specs_before = ctx.target.cdi_specs(&ctx.node).await;
    ctx.phase("a workload before the reboot");
    ctx.create(&ctx.profile_claim("rebooted")).await?;
    // A pod of restartPolicy Never does not come back from a reboot (its containers are
    // reported exited, the pod failed); Deployments' and DaemonSets' pods (Always) do.
    ctx.create(&ctx.workload("rebooted").claim("devices", "rebooted").restart_always().build()).await?;
    let (claim, _) = allocated(ctx, "rebooted", Duration::from_secs(30)).await?;
    ctx.wait_phase("rebooted", "Running", RUNNING).await?;
    let pod = ctx.get_pod("rebooted").await;
    let started = last_start(pod.as_ref())
        .ok_or_else(|| ScenarioError::Unmet("the running pod reports no container start time".into()))?;
    let devices_before = published(ctx).await;
    if devices_before.is_empty() {
        return Err(ScenarioError::Unmet(format!("the driver publishes no devices on {} before the reboot", ctx.node)));
    }
    // Kubernetes times have whole seconds: the reboot begins in a later second than the
    // containers' start, so that their start after it can be told apart.
    tokio::time::sleep(Duration::from_millis(1100)).await;

    ctx.phase(&format!("rebooting {}", ctx.node));
    let t = Instant::now();
    ctx.target.reboot_node(&ctx.node).await?;
    let booted = t.elapsed();

    ctx.phase("waiting for the pod to run again");
    let back = match ctx.wait_pod("rebooted", conditions::containers_started_after(started), BACK).await {
        Ok((_, took)) => took,
        Err(expired) => {
            ctx.fail(
                id,
                format!(
                    "{}s after the node was back (Ready) the pod's containers had not started again: {}{}. A rebooted \
                     node has lost its CDI specs (tmpfs); the kubelet prepares the pod's claims again and the driver must \
                     write their specs anew",
                    BACK.as_secs(),
                    container_states(expired.now.as_ref()),
                    expired.watch_note()
                ),
                ctx.evidence("rebooted").await,
            );
            return Ok(());
        }
    };
    let seen = match sees(ctx, "rebooted", &claim).await {
        Ok(how) => how.unwrap_or_else(|| "it runs (the suite knows no way to read what it sees)".into()),
        Err(e) => {
            ctx.fail(id, format!("after the reboot the pod runs again, but {e}"), ctx.evidence("rebooted").await);
            return Ok(());
        }
    };
    let republished = ctx.poll_until(REPUBLISHED, || published(ctx), |d| *d == devices_before).await;
    if let Err(now) = republished {
        ctx.fail(
            id,
            format!(
                "{}s after the reboot the driver publishes {now:?} on the node (before: {devices_before:?}; the bound: {})",
                REPUBLISHED.as_secs(),
                crate::scenarios::upstream::republish_bound_named()
            ),
            ctx.evidence("rebooted").await,
        );
        return Ok(());
    }

    ctx.phase("deleting the workload from before the reboot");
    let evidence = ctx.evidence("rebooted").await;
    let gone = match ctx.delete_pod("rebooted", GONE).await {
        Ok(took) => took,
        Err(e) => {
            ctx.fail(id, format!("{e}: the kubelet removes it once the driver unprepared its claim"), evidence);
            return Ok(());
        }
    };
    let leaks = match (&specs_before, ctx.target.cdi_specs(&ctx.node).await) {
        (Some(before), Some(now)) => Some(new_specs(before, &now)),
        _ => None,
    };
    if let Some(leaks) = leaks.as_ref().filter(|l| !l.is_empty()) {
        ctx.fail(
            id,
            format!(
                "the pod is gone, its claim unprepared, but the node's CDI dir still holds {leaks:?}, which appeared with \
                 the claim: a spec re-created after the reboot that unprepare does not remove"
            ),
            evidence,
        );
        return Ok(());
    }
    let uid = claim.metadata.uid.clone().unwrap_or_default();
    let leak_note = match leaks {
        Some(_) => "no CDI spec of it was left in the node's CDI dir",
        None => "(the node's CDI dir cannot be read on this target)",
    };
    ctx.pass(
        id,
        format!(
            "the reboot took {} (containers and CDI specs gone, checkpoints kept); {} later the pod ran again and {seen}; \
             the driver published its {} device(s) again; deleted, the pod was gone in {} and {leak_note} (claim {uid})",
            secs(booted),
            secs(back),
            devices_before.len(),
            secs(gone)
        ),
    );
    Ok(())
}
