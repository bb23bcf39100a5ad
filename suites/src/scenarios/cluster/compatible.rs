//! A claim of the profile's shape is allocated by the scheduler within the promised time, its
//! pod runs, and the workload sees exactly the allocated devices.

use std::time::Duration;

use super::common::{allocated, device_names, secs, sees};
use crate::coverage::RowId::C;
use crate::coverage::Verdict::Covered;
use crate::coverage::{UpstreamRow, e2e};
use crate::engine::{Ctx, Role, Scenario, ScenarioError, Tier};
use crate::profile::ids;

pub static SCENARIO: Scenario = Scenario {
    name: "compatible",
    tier: Tier::Cluster,
    role: Role::General,
    guarantees: &[ids::CLAIM_COMPATIBLE_ALLOCATED, ids::WORKLOAD_SEES_DEVICES],
    disrupts: crate::engine::Disruption::None,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[UpstreamRow {
    id: C(6),
    test: "supports simple pod referencing external resource claim",
    at: e2e(1627),
    asserts: "a standalone claim is prepared and its pod runs with the devices",
    guarantees: &[ids::CLAIM_COMPATIBLE_ALLOCATED, ids::WORKLOAD_SEES_DEVICES],
    verdict: Covered,
}];

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let within = Duration::from_secs(ctx.profile().guarantees.allocation.as_ref().map_or(30, |a| a.within_seconds));
    ctx.phase("a claim of the profile's shape and a pod using it");
    ctx.create(&ctx.profile_claim("compatible")).await?;
    ctx.create(&ctx.workload("consumer").claim("devices", "compatible").build()).await?;

    let (claim, took) = match allocated(ctx, "compatible", within).await {
        Ok(v) => v,
        Err(e) => {
            let why = match ctx.unschedulable("consumer").await {
                Some((_, message)) => format!("{e}; the scheduler says: {message}"),
                None => e.to_string(),
            };
            ctx.fail(ids::CLAIM_COMPATIBLE_ALLOCATED, why, ctx.evidence("consumer").await);
            ctx.fail(ids::WORKLOAD_SEES_DEVICES, "no devices were allocated", Vec::new());
            return Ok(());
        }
    };
    let devices = device_names(&claim);
    ctx.note_allocation(&claim).await;
    ctx.pass(
        ids::CLAIM_COMPATIBLE_ALLOCATED,
        format!("allocated {devices:?} in {} (promised {}s)", secs(took), within.as_secs()),
    );
    ctx.duration(ids::CLAIM_COMPATIBLE_ALLOCATED, "allocation", took);

    ctx.phase("waiting for the workload");
    if let Err(e) = ctx.wait_phase("consumer", "Running", within).await {
        ctx.fail(ids::WORKLOAD_SEES_DEVICES, e, ctx.evidence("consumer").await);
        return Ok(());
    }
    match sees(ctx, "consumer", &claim).await {
        Ok(Some(how)) => ctx.pass(ids::WORKLOAD_SEES_DEVICES, how),
        Ok(None) => {
            ctx.skip(ids::WORKLOAD_SEES_DEVICES, "the suite knows no way to read what a workload of this driver sees")
        }
        Err(e) => ctx.fail(ids::WORKLOAD_SEES_DEVICES, e, ctx.evidence("consumer").await),
    }
    Ok(())
}
