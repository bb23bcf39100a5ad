//! Exhaustion and recovery: when every matching device of the node is in use, the next pod
//! waits; releasing one lets it run within the promised time.

use std::time::Duration;

use super::common::{Decided, runs_or_refused};
use crate::coverage::RowId::C;
use crate::coverage::Verdict::Covered;
use crate::coverage::{UpstreamRow, e2e};
use crate::engine::{Ctx, Role, Scenario, ScenarioError, Tier};
use crate::profile::ids;

pub static SCENARIO: Scenario = Scenario {
    name: "exhaustion",
    tier: Tier::Cluster,
    role: Role::Exhaustion,
    guarantees: &[ids::CAPACITY_RECOVERED],
    disrupts: crate::engine::Disruption::None,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[UpstreamRow {
    id: C(12),
    test: "supports reusing resources",
    at: e2e(1482),
    asserts: "a device is prepared, unprepared and prepared again for the next claim",
    guarantees: &[ids::CAPACITY_RECOVERED],
    verdict: Covered,
}];

/// More claims than any node here has devices for ends the fill even if nothing blocks.
const MAX_FILL: usize = 32;

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let id = ids::CAPACITY_RECOVERED;
    let within =
        Duration::from_secs(ctx.profile().guarantees.capacity_recovery.as_ref().map_or(30, |c| c.within_seconds));
    ctx.phase(&format!("filling {} until a pod has to wait", ctx.node));
    let mut running = Vec::new();
    let mut waiting = None;
    for i in 0..MAX_FILL {
        let name = format!("fill-{i}");
        ctx.create(&ctx.profile_claim(&name)).await?;
        ctx.create(&ctx.pod(&name).claim("devices", &name).command(dracheck_objects::IDLE).build()).await?;
        match runs_or_refused(ctx, &name, Duration::from_secs(30)).await {
            Some(Decided::Runs) => running.push(name),
            Some(Decided::Refused(_)) => {
                waiting = Some(name);
                break;
            }
            None => {
                ctx.fail(
                    id,
                    format!("pod {name} neither ran nor was refused by the scheduler within 30s"),
                    ctx.evidence(&name).await,
                );
                return Ok(());
            }
        }
    }
    let Some(waiting) = waiting else {
        ctx.skip(id, format!("{MAX_FILL} claims all fit on {}: the node could not be exhausted", ctx.node));
        return Ok(());
    };
    let Some(release) = running.first() else {
        ctx.fail(id, "not even one claim of the profile fits on the node", ctx.evidence(&waiting).await);
        return Ok(());
    };
    ctx.phase(&format!("{} pod(s) hold every device; releasing one", running.len()));
    let started = std::time::Instant::now();
    ctx.delete_pod(release, within).await?;
    let _ = ctx.api::<k8s_openapi::api::resource::v1::ResourceClaim>().delete(release, &Default::default()).await;
    match ctx.wait_phase(&waiting, "Running", within).await {
        Ok(_) => {
            let took = started.elapsed();
            ctx.pass(
                id,
                format!(
                    "{} devices in use; the waiting pod ran {:.1}s after one was released (promised {}s)",
                    running.len(),
                    took.as_secs_f64(),
                    within.as_secs()
                ),
            );
            ctx.duration(id, "recovery", took);
        }
        Err(e) => ctx.fail(id, format!("{e} after a device was released"), ctx.evidence(&waiting).await),
    }
    Ok(())
}
