//! A driver outage longer than the kubelet's patience: 30 s after a plugin's socket goes away
//! the kubelet wipes the node's ResourceSlices (`defaultWipingDelay`), so the devices vanish
//! from the scheduler. Once the driver is back it must publish them again as they were (same
//! pool, names, attributes, capacity), running pods must have kept their devices throughout,
//! and a claim made during the outage must be allocated and prepared afterwards. Upstream's
//! "service reconnect" node test and the ResourceSlice removal tests are this, seen from the
//! kubelet.

use std::time::{Duration, Instant};

use super::common::{allocated, device_names, kept_running, secs};
use crate::coverage::RowId::{B, C};
use crate::coverage::Verdict::Covered;
use crate::coverage::{UpstreamRow, e2e, e2e_node};
use crate::engine::{Ctx, Role, Scenario, ScenarioError, Tier};
use crate::profile::{KUBELET_SLICE_WIPE_DELAY_SECONDS, ids};

pub static SCENARIO: Scenario = Scenario {
    name: "driver-outage",
    tier: Tier::Cluster,
    role: Role::Outages,
    guarantees: &[ids::DRIVER_RESTART_LONG_OUTAGE],
    disrupts: crate::engine::Disruption::StopsDriver,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: B(15),
        test: "must be functional after service reconnect (two entries)",
        at: e2e_node(484),
        asserts: "after an outage past the kubelet's slice wipe the same slices come back and a deleted pod's claim is \
                  unprepared",
        guarantees: &[ids::DRIVER_RESTART_LONG_OUTAGE],
        verdict: Covered,
    },
    UpstreamRow {
        id: C(14),
        test: "runs pod after driver starts",
        at: e2e(1248),
        asserts: "a pod that waits for devices runs once the driver has published them",
        guarantees: &[ids::DRIVER_RESTART_LONG_OUTAGE],
        verdict: Covered,
    },
];

/// The kubelet's wipe delay and some slack for its timer and the deletion.
const WIPED: Duration = Duration::from_secs(KUBELET_SLICE_WIPE_DELAY_SECONDS + 30);
const REPUBLISHED: Duration = Duration::from_secs(30);
const RUNNING: Duration = Duration::from_secs(60);
const SETTLE: Duration = Duration::from_secs(3);

/// The node's published devices as the scheduler sees them: each device's JSON (name,
/// attributes, capacity), with the pool's name, sorted by device name.
async fn inventory(ctx: &Ctx<'_>) -> Vec<(String, String)> {
    let mut devices: Vec<(String, String)> = ctx
        .slices_of(&ctx.node)
        .await
        .into_iter()
        .flat_map(|s| {
            let pool = s.spec.pool.name.clone();
            s.spec
                .devices
                .unwrap_or_default()
                .into_iter()
                .map(move |d| (format!("{pool}/{}", d.name), serde_json::to_string(&d).unwrap_or_default()))
        })
        .collect();
    devices.sort();
    devices
}

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let id = ids::DRIVER_RESTART_LONG_OUTAGE;
    ctx.phase("a workload before the outage");
    ctx.create(&ctx.profile_claim("before")).await?;
    ctx.create(&ctx.pod("before").claim("devices", "before").command(dracheck_objects::IDLE).build()).await?;
    let (claim, _) = allocated(ctx, "before", Duration::from_secs(30)).await?;
    ctx.wait_phase("before", "Running", RUNNING).await?;
    let devices = device_names(&claim);
    let published = inventory(ctx).await;
    if published.is_empty() {
        return Err(ScenarioError::Unmet(format!("the driver publishes no devices on {} before the outage", ctx.node)));
    }

    ctx.phase(&format!("stopping the driver on {} until the kubelet wipes its slices", ctx.node));
    let down = Instant::now();
    ctx.target.stop_driver(&ctx.node).await?;
    let wiped = ctx.poll_until(WIPED, || ctx.slices_of(&ctx.node), |s| s.is_empty()).await;
    if wiped.is_err() {
        let _ = ctx.target.start_driver(&ctx.node).await;
        return Err(ScenarioError::Unmet(format!(
            "{}s after the driver stopped the node's slices were still there: the kubelet wipes them {KUBELET_SLICE_WIPE_DELAY_SECONDS}s after its plugin went away",
            WIPED.as_secs()
        )));
    }
    ctx.phase("a claim during the outage");
    ctx.create(&ctx.profile_claim("during")).await?;
    ctx.create(&ctx.pod("during").claim("devices", "during").command(dracheck_objects::IDLE).build()).await?;
    ctx.target.start_driver(&ctx.node).await?;
    let outage = down.elapsed();

    ctx.phase("the driver is back");
    let back = ctx.poll_until(REPUBLISHED, || inventory(ctx), |now| *now == published).await;
    let republished_in = match back {
        Ok((_, took)) => took,
        Err(now) => {
            let names = |d: &[(String, String)]| d.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
            let why = if names(&now) == names(&published) {
                "the same devices with other attributes or capacity".to_string()
            } else {
                format!("{:?} (before: {:?})", names(&now), names(&published))
            };
            ctx.fail(
                id,
                format!(
                    "{}s after the driver came back from a {} outage, which the kubelet answered by wiping the node's slices, it publishes {why}",
                    REPUBLISHED.as_secs(),
                    secs(outage)
                ),
                ctx.evidence("during").await,
            );
            return Ok(());
        }
    };
    // What a driver does at start-up to the devices it finds prepared takes a moment to show
    // in the pod's status.
    tokio::time::sleep(SETTLE).await;
    if let Err(why) = kept_running(ctx, "before", &devices).await {
        ctx.fail(id, format!("after the outage {why}"), ctx.evidence("before").await);
        return Ok(());
    }
    // The claim from the outage must not depend on devices besides the running pod's.
    ctx.delete_pod("before", RUNNING).await?;
    let ran_in = match ctx.wait_phase("during", "Running", RUNNING).await {
        Ok(took) => took,
        Err(e) => {
            ctx.fail(id, format!("a claim made during the outage: {e}"), ctx.evidence("during").await);
            return Ok(());
        }
    };
    ctx.pass(
        id,
        format!(
            "across a {} outage the kubelet wiped the node's slices; {} after the driver was back it published its {} device(s) as before; the running pod kept {devices:?}; a pod made during the outage ran {} after the pod from before was deleted",
            secs(outage),
            secs(republished_in),
            published.len(),
            secs(ran_in)
        ),
    );
    Ok(())
}
