//! A container that exits and is started again (`restartPolicy: Always`, in CrashLoopBackOff)
//! stays the same pod: it keeps its generated claim and the claim keeps its devices, and the
//! restarted container sees them again. The kubelet prepares a pod's claims once, before its
//! sandbox; a restart is a new container in the same sandbox, whose CDI devices the runtime
//! resolves again from the specs the driver wrote at prepare. A driver that takes a spec to be
//! used up once the first container started leaves the restart unable to be created.

use std::time::Duration;

use super::common::{allocated, claim_of, container_states, device_names, secs, sees};
use crate::coverage::RowId::C;
use crate::coverage::Verdict::Covered;
use crate::coverage::{UpstreamRow, e2e};
use crate::engine::wait::conditions;
use crate::engine::{Ctx, Role, Scenario, ScenarioError, Tier};
use crate::profile::ids;

pub static SCENARIO: Scenario = Scenario {
    name: "container-restart",
    tier: Tier::Cluster,
    // Next to the driver and kubelet restarts, on a node whose devices it has to itself.
    role: Role::Restarts,
    guarantees: &[ids::LIFECYCLE_CONTAINER_RESTART],
    disrupts: crate::engine::Disruption::None,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: C(5),
        test: "supports simple pod referencing inline resource claim",
        at: e2e(1613),
        asserts: "a claim made from a template is prepared, and its pod runs with the devices",
        guarantees: &[ids::LIFECYCLE_CONTAINER_RESTART, ids::LIFECYCLE_UNPREPARED],
        verdict: Covered,
    },
    UpstreamRow {
        id: C(13),
        test: "does not delete generated claims when pod is restarting",
        at: e2e(1176),
        asserts: "a restarted container of a pod gets its claim's CDI devices again",
        guarantees: &[ids::LIFECYCLE_CONTAINER_RESTART],
        verdict: Covered,
    },
];

/// The container runs this long before it exits with 1; the kubelet starts it again at once
/// (its CrashLoopBackOff delays begin with the second restart). Long enough that a spec the
/// driver dropped soon after the prepare (the mock's `expire-cdi-spec=10`) is gone by then.
const RUNS_FOR: Duration = Duration::from_secs(12);
/// From the pod's creation to its first start, as the other scenarios wait.
const RUNNING: Duration = Duration::from_secs(60);
/// From the first start to the restart: the run and the second creation.
const RESTARTED: Duration = Duration::from_secs(RUNS_FOR.as_secs() + 45);
const GONE: Duration = Duration::from_secs(60);

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let id = ids::LIFECYCLE_CONTAINER_RESTART;
    ctx.phase("a workload whose container exits and is restarted");
    ctx.create(&ctx.profile().claim().template(&ctx.ns, "restarting")).await?;
    let show = &ctx.target.adapter.workload.show;
    let script = format!("{show}; sleep {}; exit 1", RUNS_FOR.as_secs());
    let pod = ctx.pod("restarting").claim_from_template("devices", "restarting").command(&script).restart_always();
    ctx.create(&pod.build()).await?;
    ctx.wait_pod("restarting", conditions::pod_claim_named(), Duration::from_secs(30))
        .await
        .map_err(|_| ScenarioError::timeout("the pod's claim was not generated", Duration::from_secs(30)))?;
    let name = claim_of(ctx, "restarting")
        .await
        .ok_or_else(|| ScenarioError::Unmet("the pod names no generated claim".into()))?;
    let (claim, _) = allocated(ctx, &name, Duration::from_secs(30)).await?;
    let (uid, devices) = (claim.metadata.uid.clone().unwrap_or_default(), device_names(&claim));

    // A workload that never starts is the other scenarios' finding; it fails here early.
    ctx.wait_phase("restarting", "Running", RUNNING).await?;
    ctx.phase("waiting for the container's restart");
    let took = match ctx.wait_pod("restarting", conditions::containers_restarted(), RESTARTED).await {
        Ok((_, took)) => took,
        Err(expired) => {
            ctx.fail(
                id,
                format!(
                    "{}s after the pod ran its container, which exits after {}s, had not been started again: {}{}. \
                     A restarted container is a new one whose CDI devices the runtime resolves again, from the specs the \
                     driver wrote when it prepared the claim",
                    RESTARTED.as_secs(),
                    RUNS_FOR.as_secs(),
                    container_states(expired.now.as_ref()),
                    expired.watch_note()
                ),
                ctx.evidence("restarting").await,
            );
            return Ok(());
        }
    };
    let now = ctx.get_claim(&name).await;
    let kept = now.as_ref().is_some_and(|c| c.metadata.uid.as_deref() == Some(&uid) && device_names(c) == devices);
    let named = claim_of(ctx, "restarting").await;
    let still_named = named.as_deref() == Some(name.as_str());
    if !kept || !still_named {
        let what = match &now {
            None => "was deleted".to_string(),
            Some(c) => {
                format!("has UID {:?} and devices {:?}", c.metadata.uid.as_deref().unwrap_or_default(), device_names(c))
            }
        };
        ctx.fail(
            id,
            format!(
                "after the container's restart the pod's generated claim {name} (UID {uid}, devices {devices:?}) {what}; \
                 the pod names {named:?}: a restarting pod keeps its claim"
            ),
            ctx.evidence("restarting").await,
        );
        return Ok(());
    }
    let seen = match sees(ctx, "restarting", &claim).await {
        Ok(how) => how.unwrap_or_else(|| "it ran (the suite knows no way to read what it sees)".into()),
        Err(e) => {
            ctx.fail(id, format!("the container was started again, but {e}"), ctx.evidence("restarting").await);
            return Ok(());
        }
    };

    ctx.phase("deleting the restarting workload");
    if let Err(e) = ctx.delete_pod("restarting", GONE).await {
        ctx.fail(
            id,
            format!("{e}: the kubelet removes it once the driver unprepared its claim"),
            ctx.evidence("restarting").await,
        );
        return Ok(());
    }
    ctx.pass(
        id,
        format!(
            "the container exited after {}s and was started again {} after the pod ran; the pod kept its generated \
             claim {name} (UID {uid}) with {devices:?}, and {seen}",
            RUNS_FOR.as_secs(),
            secs(took)
        ),
    );
    Ok(())
}
