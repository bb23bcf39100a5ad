//! The profile's limit: a claim for the maximum number of devices per claim is allocated, its
//! workload runs and sees every one of them.

use std::time::Duration;

use super::common::{allocated, device_names, sees};
use crate::engine::{Ctx, Role, Scenario, ScenarioError, Tier};
use crate::profile::ids;

pub static SCENARIO: Scenario = Scenario {
    name: "limits",
    tier: Tier::Cluster,
    role: Role::General,
    guarantees: &[ids::LIMITS_MAX_DEVICES_PER_CLAIM],
    disrupts: crate::engine::Disruption::None,
    run: crate::scenario_fn!(run),
};

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let id = ids::LIMITS_MAX_DEVICES_PER_CLAIM;
    let max = ctx
        .profile()
        .guarantees
        .limits
        .as_ref()
        .map(|l| l.max_devices_per_claim)
        .ok_or_else(|| ScenarioError::Unmet("the profile sets no limits".into()))?;
    ctx.phase(&format!("a claim for {max} devices"));
    ctx.create(&ctx.profile().claim().count(max).claim(&ctx.ns, "at-limit")).await?;
    ctx.create(&ctx.workload("at-limit").claim("devices", "at-limit").build()).await?;
    match allocated(ctx, "at-limit", Duration::from_secs(30)).await {
        Ok((c, _)) if device_names(&c).len() == max as usize => {
            let devices = device_names(&c);
            if let Err(e) = ctx.wait_phase("at-limit", "Running", Duration::from_secs(30)).await {
                ctx.fail(id, e, ctx.evidence("at-limit").await);
                return Ok(());
            }
            match sees(ctx, "at-limit", &c).await {
                Ok(Some(how)) => ctx.pass(id, format!("a claim for {max} devices got {devices:?} and runs; {how}")),
                Ok(None) => ctx.pass(
                    id,
                    format!("a claim for {max} devices got {devices:?} and runs (what it sees cannot be read for this driver)"),
                ),
                Err(e) => ctx.fail(id, e, ctx.evidence("at-limit").await),
            }
        }
        Ok((c, _)) => {
            ctx.fail(id, format!("asked for {max}, got {:?}", device_names(&c)), ctx.evidence("at-limit").await)
        }
        Err(e) => {
            let message = ctx.unschedulable("at-limit").await.map(|(_, m)| m).unwrap_or_default();
            ctx.fail(id, format!("{e}: {message}"), ctx.evidence("at-limit").await)
        }
    }
    Ok(())
}
