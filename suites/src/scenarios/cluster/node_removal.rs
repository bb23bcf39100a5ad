//! Node removal: the node's slices disappear, its pods go away, its claims are deallocated,
//! and the capacity of other nodes is used instead.

use std::time::Duration;

use super::common::allocated;
use crate::engine::wait::conditions;
use crate::engine::{Ctx, Role, Scenario, ScenarioError, Tier};
use crate::profile::ids;

pub static SCENARIO: Scenario = Scenario {
    name: "node-removal",
    tier: Tier::Cluster,
    role: Role::Removal,
    guarantees: &[
        ids::NODE_REMOVAL_SLICES_GONE,
        ids::NODE_REMOVAL_PODS_GONE,
        ids::NODE_REMOVAL_CLAIMS_DEALLOCATED,
        ids::NODE_REMOVAL_CAPACITY_ELSEWHERE,
    ],
    disrupts: crate::engine::Disruption::ControlsNodes,
    run: crate::scenario_fn!(run),
};

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    ctx.phase(&format!("a workload on {}", ctx.node));
    ctx.create(&ctx.profile_claim("pinned")).await?;
    ctx.create(&ctx.pod("victim").claim("devices", "pinned").command(dracheck_objects::IDLE).build()).await?;
    allocated(ctx, "pinned", Duration::from_secs(30)).await?;
    ctx.wait_phase("victim", "Running", Duration::from_secs(60)).await?;

    ctx.phase(&format!("removing {}", ctx.node));
    ctx.target.remove_node(&ctx.node).await?;
    match ctx.poll_until(Duration::from_secs(60), || ctx.slices_of(&ctx.node), |s| s.is_empty()).await {
        Ok((_, took)) => ctx.pass(
            ids::NODE_REMOVAL_SLICES_GONE,
            format!("the node's slices were removed {:.1}s after the node", took.as_secs_f64()),
        ),
        Err(left) => ctx.fail(
            ids::NODE_REMOVAL_SLICES_GONE,
            format!("{} slice(s) of the removed node are still published after 60s", left.len()),
            Vec::new(),
        ),
    }
    // PodGC deletes pods of a node that no longer exists after a quarantine of about 40 s.
    match ctx.wait_pod("victim", conditions::gone(), Duration::from_secs(120)).await {
        Ok((_, took)) => ctx.pass(
            ids::NODE_REMOVAL_PODS_GONE,
            format!("the node's pod was deleted {:.1}s after the node", took.as_secs_f64()),
        ),
        Err(expired) => ctx.fail(
            ids::NODE_REMOVAL_PODS_GONE,
            format!("the pod of the removed node still exists after 120s{}", expired.watch_note()),
            ctx.evidence("victim").await,
        ),
    }
    let released = ctx.wait_claim("pinned", conditions::claim_deallocated(), Duration::from_secs(60)).await;
    match released {
        Ok(_) => ctx.pass(ids::NODE_REMOVAL_CLAIMS_DEALLOCATED, "the claim of the removed node's pod was deallocated"),
        Err(expired) => {
            ctx.fail(
                ids::NODE_REMOVAL_CLAIMS_DEALLOCATED,
                format!("the claim is still allocated to the removed node after 60s{}", expired.watch_note()),
                Vec::new(),
            );
            return Ok(());
        }
    }

    ctx.phase("the same claim on another node");
    let mut moved = dracheck_objects::pod(&ctx.ns, "moved").claim("devices", "pinned").command(dracheck_objects::IDLE);
    if let Some(spare) = ctx.spare_nodes.first() {
        moved = moved.on_node(spare);
    }
    ctx.create(&moved.build()).await?;
    match ctx.wait_phase("moved", "Running", Duration::from_secs(60)).await {
        Ok(_) => {
            let node = ctx.get_pod("moved").await.and_then(|p| p.spec).and_then(|s| s.node_name).unwrap_or_default();
            ctx.pass(
                ids::NODE_REMOVAL_CAPACITY_ELSEWHERE,
                format!("the claim was allocated again and its pod runs on {node}"),
            );
        }
        Err(e) => ctx.fail(ids::NODE_REMOVAL_CAPACITY_ELSEWHERE, e, ctx.evidence("moved").await),
    }
    Ok(())
}
