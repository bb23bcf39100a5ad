//! Node restart: the kubelet process restarts while a workload runs; the containers keep
//! running and the kubelet keeps its DRA checkpoint. A kubelet does not prepare the claims of
//! running pods again (Prepare only comes before a pod's sandbox is created); what it does to
//! the driver is wipe the node's ResourceSlices at start-up and register the plugin again
//! from its registration socket. So the driver must publish its devices again, and still
//! serve what it did before: the running pod keeps its claim, that claim is unprepared when
//! its pod is deleted afterwards, and a new claim on the node is prepared.

use std::collections::BTreeSet;
use std::time::Duration;

use super::common::{allocated, secs};
use crate::coverage::RowId::{A, B};
use crate::coverage::Verdict::{Covered, Partial};
use crate::coverage::{UpstreamRow, e2e_node};
use crate::engine::wait::conditions;
use crate::engine::{Ctx, Role, Scenario, ScenarioError, Tier};
use crate::profile::ids;

pub static SCENARIO: Scenario = Scenario {
    name: "node-restart",
    tier: Tier::Cluster,
    role: Role::Restarts,
    guarantees: &[ids::NODE_RESTART_DRIVER_RECOVERS],
    disrupts: crate::engine::Disruption::ControlsNodes,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: A(2),
        test: "must register after Kubelet restart",
        at: e2e_node(113),
        asserts: "the plugin registers with a restarted kubelet and serves it",
        guarantees: &[ids::NODE_RESTART_DRIVER_RECOVERS],
        verdict: Covered,
    },
    UpstreamRow {
        id: B(9),
        test: "must call NodeUnprepareResources for deleted pod after Kubelet restart",
        at: e2e_node(354),
        asserts: "an unprepare that failed before and after a kubelet restart succeeds once retried",
        guarantees: &[ids::NODE_RESTART_DRIVER_RECOVERS],
        verdict: Partial(
            "the pod is deleted after the restart with a sound driver, so the first unprepare succeeds; none is made to \
             fail and then retried",
        ),
    },
];

/// The kubelet wipes the node's slices at start-up, about 60 ms after it starts: a driver on
/// upstream's helper sees the deletion and publishes again after its sync delay.
const REPUBLISHED: Duration = crate::scenarios::upstream::REPUBLISHED_AFTER_DELETION;
const GONE: Duration = Duration::from_secs(60);
const RUNNING: Duration = Duration::from_secs(60);

/// The node's slices of the driver: their UIDs and the device names they publish.
async fn slices(ctx: &Ctx<'_>) -> (BTreeSet<String>, BTreeSet<String>) {
    let slices = ctx.slices_of(&ctx.node).await;
    let uids = slices.iter().filter_map(|s| s.metadata.uid.clone()).collect();
    let devices = slices.iter().flat_map(|s| s.spec.devices.iter().flatten().map(|d| d.name.clone())).collect();
    (uids, devices)
}

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let id = ids::NODE_RESTART_DRIVER_RECOVERS;
    ctx.phase("a running workload");
    ctx.create(&ctx.profile_claim("survivor")).await?;
    ctx.create(&ctx.pod("survivor").claim("devices", "survivor").command(dracheck_objects::IDLE).build()).await?;
    let (claim, _) = allocated(ctx, "survivor", Duration::from_secs(30)).await?;
    ctx.wait_phase("survivor", "Running", RUNNING).await?;
    let uid = claim.metadata.uid.clone().unwrap_or_default();
    let checkpointed = || async {
        let prepared = ctx.target.prepared_claims(&ctx.node).await.unwrap_or_default();
        prepared.into_iter().find(|(u, _)| *u == uid).map(|(_, ids)| ids)
    };
    let before = checkpointed()
        .await
        .ok_or_else(|| ScenarioError::Unmet("the claim is not in the kubelet's checkpoint".into()))?;
    let (uids_before, devices_before) = slices(ctx).await;
    if devices_before.is_empty() {
        return Err(ScenarioError::Unmet(format!(
            "the driver publishes no devices on {} before the restart",
            ctx.node
        )));
    }

    ctx.phase(&format!("restarting the kubelet of {}", ctx.node));
    ctx.target.restart_kubelet(&ctx.node).await?;

    // Slices from before the restart may linger until the kubelet's wipe has run; only new
    // ones with the same devices show the driver published again.
    let republished = ctx
        .poll_until(
            REPUBLISHED,
            || slices(ctx),
            |(uids, devices)| uids.is_disjoint(&uids_before) && *devices == devices_before,
        )
        .await;
    let republished_in = match republished {
        Ok((_, took)) => took,
        Err((uids, devices)) => {
            let why = if !uids.is_disjoint(&uids_before) {
                format!(
                    "{}s after the kubelet restart the node's slices from before it are still there (the kubelet wipes them at start-up)",
                    REPUBLISHED.as_secs()
                )
            } else {
                let now = if devices.is_empty() { "no devices".to_string() } else { format!("{devices:?}") };
                format!(
                    "{}s after the kubelet restart wiped the node's slices, the driver publishes {now} there (before the restart: {devices_before:?}; the bound: {})",
                    REPUBLISHED.as_secs(),
                    crate::scenarios::upstream::republish_bound_named()
                )
            };
            ctx.fail(id, why, ctx.evidence("survivor").await);
            return Ok(());
        }
    };

    let pod = ctx.get_pod("survivor").await;
    let status = pod.and_then(|p| p.status).unwrap_or_default();
    let restarts: i32 = status.container_statuses.iter().flatten().map(|c| c.restart_count).sum();
    let after = checkpointed().await;
    if status.phase.as_deref() != Some("Running") || restarts != 0 || after.as_ref() != Some(&before) {
        ctx.fail(
            id,
            format!(
                "after the kubelet restart the pod is {:?} with {restarts} container restart(s), and the kubelet's checkpoint holds {after:?} for its claim (before: {before:?})",
                status.phase
            ),
            ctx.evidence("survivor").await,
        );
        return Ok(());
    }

    // The kubelet lets the pod go only once the driver unprepared the claim it prepared
    // before the restart; then the claim controller frees the devices.
    ctx.phase("deleting the workload from before the restart");
    let evidence = ctx.evidence("survivor").await;
    let unprepared_in = match ctx.delete_pod("survivor", GONE).await {
        Ok(took) => took,
        Err(e) => {
            ctx.fail(id, format!("{e}: the kubelet removes it once the driver unprepared its claim"), evidence);
            return Ok(());
        }
    };
    if let Some(ids) = checkpointed().await {
        ctx.fail(id, format!("the pod is gone but the kubelet's checkpoint still holds its claim ({ids:?})"), evidence);
        return Ok(());
    }
    let freed = ctx.wait_claim("survivor", conditions::claim_deallocated(), Duration::from_secs(30)).await;
    if let Err(expired) = freed {
        let status = expired.now.and_then(|c| c.status);
        let body = serde_json::to_string_pretty(&status).unwrap_or_default();
        let evidence = vec![crate::result::Evidence { title: format!("claim {}/survivor status", ctx.ns), body }];
        ctx.fail(id, "the claim of the deleted pod was still allocated 30s after the pod was gone", evidence);
        return Ok(());
    }
    let _ = ctx.api::<k8s_openapi::api::resource::v1::ResourceClaim>().delete("survivor", &Default::default()).await;

    ctx.phase("a new claim after the restart");
    ctx.create(&ctx.profile_claim("after")).await?;
    ctx.create(&ctx.pod("after").claim("devices", "after").command(dracheck_objects::IDLE).build()).await?;
    let ran_in = match ctx.wait_phase("after", "Running", RUNNING).await {
        Ok(took) => took,
        Err(e) => {
            ctx.fail(id, format!("a claim made after the kubelet restart: {e}"), ctx.evidence("after").await);
            return Ok(());
        }
    };
    ctx.pass(
        id,
        format!(
            "after the kubelet restart the driver published its {} device(s) again within {}; the running pod kept running with its claim's CDI devices {before:?} in the kubelet's checkpoint; deleted afterwards, it was gone in {} and its claim deallocated; a new pod on the node ran in {}",
            devices_before.len(),
            secs(republished_in),
            secs(unprepared_in),
            secs(ran_in)
        ),
    );
    Ok(())
}
