//! Driver restart: a running workload keeps its devices, the node's slices are not wiped by a
//! quick restart, and claims made after the restart work.

use std::collections::BTreeSet;
use std::time::Duration;

use super::common::{allocated, device_names, kept_running, new_specs};
use crate::coverage::RowId::D;
use crate::coverage::Verdict::Covered;
use crate::coverage::{UpstreamRow, e2e, e2e_node};
use crate::engine::{Ctx, Role, Scenario, ScenarioError, Tier};
use crate::profile::ids;

pub static SCENARIO: Scenario = Scenario {
    name: "driver-restart",
    tier: Tier::Cluster,
    role: Role::Restarts,
    guarantees: &[
        ids::DRIVER_RESTART_WORKLOAD_KEEPS_DEVICES,
        ids::DRIVER_RESTART_NEW_CLAIMS_WORK,
        ids::DRIVER_RESTART_SLICES_KEPT,
        ids::DRIVER_RESTART_NO_LEAKS,
    ],
    disrupts: crate::engine::Disruption::RestartsDriver,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: D(3),
        test: "ResourceSlice: must not be removed if plugin restarts quickly enough",
        at: e2e_node(887),
        asserts: "a plugin restarted within the kubelet's wipe delay leaves its slices as they were",
        guarantees: &[ids::DRIVER_RESTART_SLICES_KEPT, ids::DRIVER_UPGRADE_ROLLING],
        verdict: Covered,
    },
    UpstreamRow {
        id: D(4),
        test: "sequential update with pods replacing each other",
        at: e2e(1396),
        asserts: "a driver replaced within the wipe delay leaves its slices as they were, and pods run on",
        guarantees: &[
            ids::DRIVER_RESTART_SLICES_KEPT,
            ids::DRIVER_RESTART_NEW_CLAIMS_WORK,
            ids::DRIVER_UPGRADE_ROLLING,
        ],
        verdict: Covered,
    },
];

async fn slice_uids(ctx: &Ctx<'_>) -> BTreeSet<String> {
    ctx.slices_of(&ctx.node).await.into_iter().filter_map(|s| s.metadata.uid).collect()
}

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let max_downtime = ctx.profile().guarantees.driver_restart.as_ref().map_or(10, |d| d.max_downtime_seconds);
    let specs_before = ctx.target.cdi_specs(&ctx.node).await;
    ctx.phase("a workload before the restart");
    ctx.create(&ctx.profile_claim("before")).await?;
    ctx.create(&ctx.pod("before").claim("devices", "before").command(dracheck_objects::IDLE).build()).await?;
    let (claim, _) = allocated(ctx, "before", Duration::from_secs(30)).await?;
    ctx.wait_phase("before", "Running", Duration::from_secs(60)).await?;
    let devices = device_names(&claim);
    let slices_before = slice_uids(ctx).await;

    ctx.phase(&format!("restarting the driver on {}", ctx.node));
    // Any moment without the slices counts, not only the state after the restart; and the
    // driver gets a few seconds after it is back to rewrite what it wants to.
    let slices: kube::Api<k8s_openapi::api::resource::v1::ResourceSlice> = kube::Api::all(ctx.client());
    let fields = format!("spec.nodeName={},spec.driver={}", ctx.node, ctx.target.driver.name);
    let restart = ctx.target.restart_driver(&ctx.node);
    let (downtime, vanished) = crate::engine::wait::ever_empty(slices, &fields, restart, Duration::from_secs(3)).await;
    let downtime = downtime?;
    if downtime.as_secs() > max_downtime {
        return Err(ScenarioError::Unmet(format!(
            "the restart took {:.1}s, more than the profile's {max_downtime}s",
            downtime.as_secs_f64()
        )));
    }
    let slices_after = slice_uids(ctx).await;
    ctx.check(
        ids::DRIVER_RESTART_SLICES_KEPT,
        !vanished && !slices_before.is_empty() && slices_after == slices_before,
        format!("the node's {} slice(s) stayed in place across a {:.1}s restart", slices_before.len(), downtime.as_secs_f64()),
        format!("the slices changed across the restart (gone meanwhile: {vanished}, before {slices_before:?}, after {slices_after:?})"),
        Vec::new(),
    );

    let kept = kept_running(ctx, "before", &devices).await;
    ctx.check(
        ids::DRIVER_RESTART_WORKLOAD_KEEPS_DEVICES,
        kept.is_ok(),
        format!("the pod kept running with no container restart and its claim kept {devices:?}"),
        format!("after the restart {}", kept.err().unwrap_or_default()),
        ctx.evidence("before").await,
    );

    // The new claim must not depend on free devices besides the old one's.
    ctx.delete_pod("before", Duration::from_secs(60)).await?;
    // A driver that lost track of what it prepared before the restart answers its unprepare
    // with success and leaves the spec: only the node's CDI dir shows it.
    match (specs_before, ctx.target.cdi_specs(&ctx.node).await) {
        (Some(before), Some(now)) => {
            let left = new_specs(&before, &now);
            ctx.check(
                ids::DRIVER_RESTART_NO_LEAKS,
                left.is_empty(),
                "the claim prepared before the restart was unprepared after it: no CDI spec of it is left in the node's CDI dir",
                format!(
                    "the pod whose claim was prepared before the restart is gone, but the node's CDI dir still holds {left:?}, \
                     which appeared with its claim: the restarted driver does not remove what it prepared before"
                ),
                Vec::new(),
            );
        }
        _ => ctx.skip(
            ids::DRIVER_RESTART_NO_LEAKS,
            "the node's CDI dir can be read only on the local cluster's nodes, which the suite runs",
        ),
    }
    let _ = ctx.api::<k8s_openapi::api::resource::v1::ResourceClaim>().delete("before", &Default::default()).await;
    ctx.phase("a new claim after the restart");
    ctx.create(&ctx.profile_claim("after")).await?;
    ctx.create(&ctx.pod("after").claim("devices", "after").command(dracheck_objects::IDLE).build()).await?;
    match ctx.wait_phase("after", "Running", Duration::from_secs(60)).await {
        Ok(took) => ctx.pass(
            ids::DRIVER_RESTART_NEW_CLAIMS_WORK,
            format!("a pod created after the restart ran in {:.1}s", took.as_secs_f64()),
        ),
        Err(e) => ctx.fail(ids::DRIVER_RESTART_NEW_CLAIMS_WORK, e, ctx.evidence("after").await),
    }
    Ok(())
}
