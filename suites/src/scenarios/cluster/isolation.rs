//! Exclusive profiles: two claims never get the same device, and each workload sees only its
//! own. Shared profiles: one claim used by two pods gives both the same devices.

use std::time::Duration;

use super::common::{Decided, allocated, device_names, runs_or_refused, sees};
use crate::coverage::RowId::C;
use crate::coverage::Verdict::Partial;
use crate::coverage::{UpstreamRow, e2e};
use crate::engine::{Ctx, Role, Scenario, ScenarioError, Tier};
use crate::profile::{IsolationMode, ids};

pub static SCENARIO: Scenario = Scenario {
    name: "isolation",
    tier: Tier::Cluster,
    role: Role::General,
    guarantees: &[ids::ISOLATION_EXCLUSIVE, ids::ISOLATION_SHARED],
    disrupts: crate::engine::Disruption::None,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[UpstreamRow {
    id: C(10),
    test: "supports sharing a claim concurrently",
    at: e2e(1511),
    asserts: "pods created at once on one claim all run with its devices",
    guarantees: &[ids::ISOLATION_SHARED, ids::LIFECYCLE_PREPARED_AND_NEW],
    verdict: Partial(
        "the shared-claim check runs only for a profile that promises shared claims, which no shipped mock profile \
             does, and the pods that share a prepared claim elsewhere start one after another",
    ),
}];

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let mode = ctx
        .profile()
        .guarantees
        .isolation
        .as_ref()
        .map(|i| i.mode)
        .ok_or_else(|| ScenarioError::Unmet("the profile promises no isolation".into()))?;
    match mode {
        IsolationMode::Exclusive => exclusive(ctx).await,
        IsolationMode::Shared => shared(ctx).await,
    }
}

async fn exclusive(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let id = ids::ISOLATION_EXCLUSIVE;
    ctx.phase("two claims, two pods");
    for name in ["first", "second"] {
        ctx.create(&ctx.profile_claim(name)).await?;
        ctx.create(&ctx.workload(name).claim("devices", name).build()).await?;
    }
    let (a, _) = allocated(ctx, "first", Duration::from_secs(30)).await?;
    let a_devices = device_names(&a);
    let decided = runs_or_refused(ctx, "second", Duration::from_secs(30)).await;
    // Whatever the pod did, an allocation of the second claim is compared: a pod that is
    // slow to start must not hide a shared device.
    let second = ctx.get_claim("second").await.filter(|c| !Ctx::allocated(c).is_empty());
    let Some(b) = second else {
        // Only one claim fits the node: nothing was shared, but nothing could be compared.
        let how = match decided {
            Some(Decided::Refused(message)) => format!("the scheduler refused it: {message}"),
            _ => "it stays unallocated".to_string(),
        };
        ctx.pass(id, format!("only one claim fits on {}: the second was not given {a_devices:?}; {how}", ctx.node));
        return Ok(());
    };
    let (ka, kb) = (Ctx::allocated(&a), Ctx::allocated(&b));
    let shared: Vec<_> = ka.iter().filter(|d| kb.contains(d)).collect();
    if !shared.is_empty() {
        ctx.fail(id, format!("two exclusive claims got the same device(s) {shared:?}"), ctx.evidence("second").await);
        return Ok(());
    }
    let b_devices = device_names(&b);
    let mut unread = None;
    for (pod, claim) in [("first", &a), ("second", &b)] {
        // A pod that does not start is another guarantee's failure (allocation, prepare);
        // the devices were still not shared, but what its workload sees cannot be read.
        if let Err(e) = ctx.wait_phase(pod, "Running", Duration::from_secs(30)).await {
            unread.get_or_insert(format!("pod {pod} did not run ({e})"));
            continue;
        }
        match sees(ctx, pod, claim).await {
            Ok(Some(_)) => {}
            Ok(None) => {
                unread.get_or_insert("what a workload sees cannot be read for this driver".to_string());
            }
            Err(e) => {
                ctx.fail(id, format!("pod {pod}: {e}"), ctx.evidence(pod).await);
                return Ok(());
            }
        }
    }
    ctx.pass(id, exclusive_reason(&a_devices, &b_devices, unread.as_deref()));
    Ok(())
}

/// The pass reason of two disjoint allocations: it says the workloads see only their own
/// devices only when both workloads' view was read, and otherwise why it was not.
fn exclusive_reason(a: &[String], b: &[String], unread: Option<&str>) -> String {
    match unread {
        None => format!("disjoint allocations {a:?} and {b:?}; both pods run and each workload sees exactly its own"),
        Some(why) => format!("disjoint allocations {a:?} and {b:?}; {why}, so what each workload sees was not checked"),
    }
}

async fn shared(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
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
    let claim = ctx.get_claim("shared").await.ok_or_else(|| ScenarioError::Unmet("the shared claim is gone".into()))?;
    let devices = device_names(&claim);
    let reserved = claim.status.as_ref().and_then(|s| s.reserved_for.as_ref()).map_or(0, |r| r.len());
    let mut read = true;
    for pod in ["user-a", "user-b"] {
        match sees(ctx, pod, &claim).await {
            Ok(how) => read &= how.is_some(),
            Err(e) => {
                ctx.fail(id, format!("pod {pod}: {e}"), ctx.evidence(pod).await);
                return Ok(());
            }
        }
    }
    let seen = if read { "; each workload sees exactly them" } else { "" };
    ctx.check(
        id,
        reserved == 2,
        format!("both pods run on {devices:?}, both in the claim's reservedFor{seen}"),
        format!("reservedFor lists {reserved} consumers, not 2"),
        Vec::new(),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_pass_claims_what_workloads_see_only_when_it_was_read() {
        let (a, b) = (vec!["gpu-0".to_string()], vec!["gpu-1".to_string()]);
        assert!(super::exclusive_reason(&a, &b, None).contains("each workload sees exactly its own"));
        let unread = super::exclusive_reason(&a, &b, Some("pod first did not run"));
        assert!(!unread.contains("sees exactly"), "{unread}");
        assert!(unread.contains("not checked"), "{unread}");
    }
}
