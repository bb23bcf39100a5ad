//! Node restart (the kubelet restarts, its containers keep running): the kubelet prepares the
//! claims of running pods again from its checkpoint, and the driver must answer exactly as
//! before.

use std::time::Duration;

use super::common::allocated;
use crate::engine::{Ctx, Role, Scenario, Tier};
use crate::profile::ids;

pub static SCENARIO: Scenario = Scenario {
    name: "node-restart",
    tier: Tier::Cluster,
    role: Role::Restarts,
    guarantees: &[ids::NODE_RESTART_REPREPARED_IDEMPOTENTLY],
    disrupts: crate::engine::Disruption::ControlsNodes,
    run: crate::scenario_fn!(run),
};

async fn run(ctx: &Ctx<'_>) -> Result<(), String> {
    let id = ids::NODE_RESTART_REPREPARED_IDEMPOTENTLY;
    ctx.phase("a running workload");
    ctx.create(&ctx.profile_claim("survivor")).await?;
    ctx.create(&ctx.pod("survivor").claim("devices", "survivor").command("sleep 3600").build()).await?;
    let (claim, _) = allocated(ctx, "survivor", Duration::from_secs(30)).await?;
    ctx.wait_phase("survivor", "Running", Duration::from_secs(60)).await?;
    let uid = claim.metadata.uid.clone().unwrap_or_default();
    let ids_of = |prepared: Option<Vec<(String, Vec<String>)>>| {
        prepared.unwrap_or_default().into_iter().find(|(u, _)| *u == uid).map(|(_, ids)| ids)
    };
    let before =
        ids_of(ctx.target.prepared_claims(&ctx.node).await).ok_or("the claim is not in the kubelet's checkpoint")?;

    ctx.phase(&format!("restarting the kubelet of {}", ctx.node));
    ctx.target.restart_kubelet(&ctx.node).await?;
    // The restarted kubelet logs each pod whose claims it prepared again.
    let marker = format!("claims prepared again: {}/survivor", ctx.ns);
    let reprepared = ctx
        .wait_until(
            Duration::from_secs(30),
            || async { ctx.target.kubelet_log(&ctx.node, 200).await.unwrap_or_default() },
            |log| log.contains(&marker),
        )
        .await;
    if reprepared.is_err() {
        ctx.fail(
            id,
            "the restarted kubelet did not prepare the running pod's claim again within 30s",
            ctx.evidence("survivor").await,
        );
        return Ok(());
    }
    let after = ids_of(ctx.target.prepared_claims(&ctx.node).await).unwrap_or_default();
    let phase = ctx.get_pod("survivor").await.and_then(|p| p.status).and_then(|s| s.phase).unwrap_or_default();
    ctx.check(
        id,
        after == before && phase == "Running",
        format!("prepared again after the restart with the same CDI devices {before:?}; the pod kept running"),
        format!("after the restart: CDI devices {after:?} (before {before:?}), pod {phase}"),
        ctx.evidence("survivor").await,
    );
    Ok(())
}
