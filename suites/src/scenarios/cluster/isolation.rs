//! Exclusive profiles: two claims never get the same device, and each workload sees only its
//! own. Shared profiles: one claim used by two pods gives both the same devices.

use std::time::Duration;

use super::common::{allocated, device_names, runs_or_refused, sees};
use crate::engine::{Ctx, Role, Scenario, Tier};
use crate::profile::{IsolationMode, ids};

pub static SCENARIO: Scenario = Scenario {
    name: "isolation",
    tier: Tier::Cluster,
    role: Role::General,
    guarantees: &[ids::ISOLATION_EXCLUSIVE, ids::ISOLATION_SHARED],
    disrupts: crate::engine::Disruption::None,
    run: crate::scenario_fn!(run),
};

async fn run(ctx: &Ctx<'_>) -> Result<(), String> {
    let mode =
        ctx.profile().guarantees.isolation.as_ref().map(|i| i.mode).ok_or("the profile promises no isolation")?;
    match mode {
        IsolationMode::Exclusive => exclusive(ctx).await,
        IsolationMode::Shared => shared(ctx).await,
    }
}

async fn exclusive(ctx: &Ctx<'_>) -> Result<(), String> {
    let id = ids::ISOLATION_EXCLUSIVE;
    ctx.phase("two claims, two pods");
    for name in ["first", "second"] {
        ctx.create(&ctx.profile_claim(name)).await?;
        ctx.create(&ctx.workload(name).claim("devices", name).build()).await?;
    }
    let (a, _) = allocated(ctx, "first", Duration::from_secs(30)).await?;
    let a_devices = device_names(&a);
    let second = match runs_or_refused(ctx, "second", Duration::from_secs(30)).await {
        Some(Ok(())) => ctx.get_claim("second").await,
        _ => None,
    };
    let Some(b) = second else {
        // Only one claim fits the node: nothing was shared, but nothing could be compared.
        ctx.pass(
            id,
            format!(
                "only one claim fits on {}; the second stays unallocated instead of sharing {a_devices:?}",
                ctx.node
            ),
        );
        return Ok(());
    };
    let (ka, kb) = (Ctx::allocated(&a), Ctx::allocated(&b));
    let shared: Vec<_> = ka.iter().filter(|d| kb.contains(d)).collect();
    if !shared.is_empty() {
        ctx.fail(id, format!("two exclusive claims got the same device(s) {shared:?}"), ctx.evidence("second").await);
        return Ok(());
    }
    let b_devices = device_names(&b);
    for (pod, claim) in [("first", &a), ("second", &b)] {
        if let Err(e) = ctx.wait_phase(pod, "Running", Duration::from_secs(30)).await {
            ctx.fail(id, e, ctx.evidence(pod).await);
            return Ok(());
        }
        if let Err(e) = sees(ctx, pod, claim).await {
            ctx.fail(id, format!("pod {pod}: {e}"), ctx.evidence(pod).await);
            return Ok(());
        }
    }
    ctx.pass(id, format!("disjoint allocations {a_devices:?} and {b_devices:?}, each workload sees only its own"));
    Ok(())
}

async fn shared(ctx: &Ctx<'_>) -> Result<(), String> {
    let id = ids::ISOLATION_SHARED;
    ctx.phase("one claim, two pods");
    ctx.create(&ctx.profile_claim("shared")).await?;
    for pod in ["user-a", "user-b"] {
        ctx.create(&ctx.workload(pod).claim("devices", "shared").build()).await?;
    }
    for pod in ["user-a", "user-b"] {
        if let Err(e) = ctx.wait_phase(pod, "Running", Duration::from_secs(60)).await {
            ctx.fail(id, e, ctx.evidence(pod).await);
            return Ok(());
        }
    }
    let claim = ctx.get_claim("shared").await.ok_or("the shared claim is gone")?;
    let devices = device_names(&claim);
    let reserved = claim.status.as_ref().and_then(|s| s.reserved_for.as_ref()).map_or(0, |r| r.len());
    for pod in ["user-a", "user-b"] {
        if let Err(e) = sees(ctx, pod, &claim).await {
            ctx.fail(id, format!("pod {pod}: {e}"), ctx.evidence(pod).await);
            return Ok(());
        }
    }
    ctx.check(
        id,
        reserved == 2,
        format!("both pods run on {devices:?}"),
        format!("reservedFor lists {reserved} consumers, not 2"),
        Vec::new(),
    );
    Ok(())
}
