//! Claim lifecycle and retention: a template claim is deleted when its pod is done; a
//! standalone claim is kept but loses its reservation and allocation; the kubelet undid the
//! preparation (unprepare was called).

use std::time::Duration;

use super::common::claim_of;
use crate::coverage::RowId::B;
use crate::coverage::Verdict::Partial;
use crate::coverage::{UpstreamRow, e2e_node};
use crate::engine::wait::conditions;
use crate::engine::{Ctx, Role, Scenario, ScenarioError, Tier};
use crate::profile::ids;

pub static SCENARIO: Scenario = Scenario {
    name: "lifecycle",
    tier: Tier::Cluster,
    role: Role::General,
    guarantees: &[
        ids::RETENTION_TEMPLATE_CLAIM_DELETED,
        ids::RETENTION_STANDALONE_CLAIM_DEALLOCATED,
        ids::LIFECYCLE_UNPREPARED,
    ],
    disrupts: crate::engine::Disruption::None,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[UpstreamRow {
    id: B(8),
    test: "must call NodeUnprepareResources for deleted pod",
    at: e2e_node(330),
    asserts: "the claim of a deleted pod is unprepared, the first unprepare failing and the retry succeeding",
    guarantees: &[ids::LIFECYCLE_UNPREPARED, ids::PLUGIN_UNPREPARE_REMOVES_STATE],
    verdict: Partial(
        "a deleted pod's claim is unprepared here at the first attempt; no unprepare is made to fail and then retried",
    ),
}];

const DONE: Duration = Duration::from_secs(60);

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    ctx.phase("a short job on a template claim and one on a standalone claim");
    ctx.create(&ctx.profile().claim().template(&ctx.ns, "job")).await?;
    // Long enough that the generated claim is still there to be read when its name shows.
    ctx.create(&ctx.pod("templated").claim_from_template("devices", "job").command("sleep 5").build()).await?;
    ctx.create(&ctx.profile_claim("standalone")).await?;
    ctx.create(&ctx.pod("direct").claim("devices", "standalone").command("sleep 5").build()).await?;

    // The two jobs are independent: each is followed on its own, side by side, so that a
    // driver that keeps them from ending costs the scenario its waits once, not twice (a
    // driver that never unprepares had it sit out 294 s one job after the other).
    let (templated, direct) = futures::future::join(follow(ctx, "templated"), follow(ctx, "direct")).await;
    let claim_uids: Vec<String> = [&templated, &direct].iter().filter_map(|j| j.claim_uid.clone()).collect();
    let completed = usize::from(templated.completed) + usize::from(direct.completed);

    ctx.phase("checking that the kubelet unprepared both claims");
    let id = ids::LIFECYCLE_UNPREPARED;
    if ctx.target.prepared_claims(&ctx.node).await.is_none() {
        ctx.skip(
            id,
            "the kubelet's DRA checkpoint is read from the node's disk, which only a run that starts the local \
             cluster's nodes itself can do (--cluster local), not one on another cluster (--cluster kubeconfig, \
             kind, k3s)",
        );
        return Ok(());
    }
    let still = ctx
        .poll_until(
            Duration::from_secs(30),
            || async { ctx.target.prepared_claims(&ctx.node).await.unwrap_or_default() },
            |prepared| !prepared.iter().any(|(uid, _)| claim_uids.contains(uid)),
        )
        .await;
    if completed < 2 {
        ctx.fail(id, "the jobs did not complete, so the kubelet never unprepared their claims", Vec::new());
        return Ok(());
    }
    match still {
        Ok(_) if claim_uids.len() == 2 => {
            ctx.pass(id, "both claims left the kubelet's DRA checkpoint (unprepared) once their pods ended")
        }
        Ok(_) => ctx.fail(id, "the claims of the jobs could not be identified", Vec::new()),
        Err(prepared) => {
            let left: Vec<_> = prepared.into_iter().filter(|(uid, _)| claim_uids.contains(uid)).collect();
            let mut evidence = ctx.evidence("direct").await;
            evidence.extend(ctx.evidence("templated").await);
            ctx.fail(id, format!("still prepared on {} 30s after the pods ended: {left:?}", ctx.node), evidence);
        }
    }
    Ok(())
}

/// What following one job found: its claim's UID, once read, and whether the job completed.
struct Followed {
    claim_uid: Option<String>,
    completed: bool,
}

/// Follows the job `pod` (`templated` or `direct`) to its end and checks what becomes of its
/// claim: a generated claim is deleted, a standalone one kept but released.
async fn follow(ctx: &Ctx<'_>, pod: &str) -> Followed {
    // The generated claim's name is known once the controller made it; the standalone
    // claim's is in the pod's spec (waiting for a generated name there sat out the 30 s).
    if pod == "templated" {
        let _ = ctx.wait_pod(pod, conditions::pod_claim_named(), Duration::from_secs(30)).await;
    }
    let name = claim_of(ctx, pod).await;
    let claim_uid = match &name {
        Some(n) => ctx.get_claim(n).await.and_then(|c| c.metadata.uid),
        None => None,
    };
    let id = if pod == "templated" {
        ids::RETENTION_TEMPLATE_CLAIM_DELETED
    } else {
        ids::RETENTION_STANDALONE_CLAIM_DEALLOCATED
    };
    if let Err(e) = ctx.wait_phase(pod, "Succeeded", DONE).await {
        ctx.fail(id, e, ctx.evidence(pod).await);
        return Followed { claim_uid, completed: false };
    }
    let Some(name) = name else { return Followed { claim_uid, completed: true } };
    if pod == "templated" {
        match ctx.wait_claim(&name, conditions::gone(), DONE).await {
            Ok((_, took)) => {
                ctx.pass(id, format!("generated claim {name} deleted {:.1}s after the pod ended", took.as_secs_f64()))
            }
            Err(_) => ctx.fail(
                id,
                format!("generated claim {name} still exists {}s after its pod ended", DONE.as_secs()),
                ctx.evidence(pod).await,
            ),
        }
    } else {
        match ctx.wait_claim(&name, conditions::claim_released(), DONE).await {
            Ok(_) => ctx.pass(id, "the standalone claim is kept, with reservedFor empty and no allocation"),
            Err(expired) => {
                let why = match expired.now {
                    None => "the standalone claim was deleted; it must be kept".to_string(),
                    Some(_) => format!(
                        "the standalone claim still has a reservation or allocation {}s after its pod ended",
                        DONE.as_secs()
                    ),
                };
                ctx.fail(id, why, ctx.evidence(pod).await);
            }
        }
    }
    Followed { claim_uid, completed: true }
}
