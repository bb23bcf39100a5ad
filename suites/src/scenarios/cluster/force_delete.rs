//! A force-deleted pod, its claim deleted and made again under the same name. A force deletion
//! removes the pod from the API at once, while the kubelet is still tearing it down; the user
//! then deletes the claim and makes a new one of that name for a new pod. The kubelet keeps its
//! claims by namespace and name, so the new claim waits until the old one is unprepared
//! (upstream's "blocks new pod after force-delete"), and that unprepare comes for a claim that
//! no longer exists in the API (upstream's "must unprepare resources for force-deleted pod"):
//! a driver that needs the claim object to undo its work never finishes it, and the new pod
//! never starts. A driver whose state is per claim UID prepares the new claim as a claim of its
//! own, and the pod sees the devices allocated to it.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::DeleteParams;

use super::common::{Unread, device_names, judge_sees_all, running};
use crate::coverage::RowId::B;
use crate::coverage::Verdict::Covered;
use crate::coverage::{UpstreamRow, e2e};
use crate::engine::wait::conditions;
use crate::engine::{Ctx, Role, Scenario, ScenarioError, Tier};
use crate::profile::ids;

pub static SCENARIO: Scenario = Scenario {
    name: "force-delete",
    tier: Tier::Cluster,
    // One device of the profile's first request, on the node where the other lifecycle
    // scenarios have given theirs back.
    role: Role::General,
    guarantees: &[ids::LIFECYCLE_FORCE_DELETE],
    disrupts: crate::engine::Disruption::None,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: B(12),
        test: "must unprepare resources for force-deleted pod",
        at: e2e(375),
        asserts: "the claim of a force-deleted pod is unprepared",
        guarantees: &[ids::LIFECYCLE_FORCE_DELETE],
        verdict: Covered,
    },
    UpstreamRow {
        id: B(13),
        test: "blocks new pod after force-delete",
        at: e2e(512),
        asserts: "the old claim is unprepared without its object, and a new claim of the same name is another claim",
        guarantees: &[ids::LIFECYCLE_FORCE_DELETE, ids::PLUGIN_PREPARE_KEYED_BY_UID],
        verdict: Covered,
    },
];

/// How long the kubelet may take to unprepare the claim of a pod that is gone.
const UNPREPARED: Duration = Duration::from_secs(30);

/// The kubelet answers a failed prepare by trying the pod again at its next resync (1 min,
/// jittered up to 1.5): where the suite cannot see the kubelet's claims, the new pod may have
/// come while the old claim was still prepared and wait that long.
const KUBELET_RESYNC: Duration = Duration::from_secs(90);

/// How long a kubelet usually takes to tear a force-deleted pod down.
const TEARDOWN: Duration = Duration::from_secs(5);

const CLAIM: &str = "reused";

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let id = ids::LIFECYCLE_FORCE_DELETE;
    let within = Duration::from_secs(ctx.profile().guarantees.allocation.as_ref().map_or(60, |a| a.within_seconds));
    let claim = ctx.profile().claim().first_per_name(&["device"]);

    ctx.phase("a pod with a standalone claim");
    ctx.create(&claim.claim(&ctx.ns, CLAIM)).await?;
    ctx.create(&ctx.workload("first").claim(CLAIM, CLAIM).build()).await?;
    let Some(old) = running(ctx, id, CLAIM, "first", within).await else { return cleanup(ctx, within).await };
    let old_uid = old.metadata.uid.clone().unwrap_or_default();

    ctx.phase("force-deleting the pod, then deleting its claim");
    let force = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
    let _ = ctx.api::<Pod>().delete("first", &force).await;
    let _ = ctx.api::<ResourceClaim>().delete(CLAIM, &DeleteParams::default()).await;
    // The resourceclaim controller releases the claim once the pod is gone from the API, which
    // a force deletion makes immediate; no driver takes part.
    if ctx.wait_claim(CLAIM, conditions::gone(), within).await.is_err() {
        return Err(ScenarioError::timeout(format!("claim {CLAIM} of the force-deleted pod was not deleted"), within));
    }

    // Where the kubelet's claims can be read, the unprepare is seen as it happens, and a
    // driver that never finishes it is named for what it did.
    let kubelet_visible = ctx.target.prepared_claims(&ctx.node).await.is_some();
    if kubelet_visible {
        ctx.phase("waiting for the kubelet to unprepare the deleted claim");
        let still = ctx
            .poll_until(
                UNPREPARED,
                || async { ctx.target.prepared_claims(&ctx.node).await.unwrap_or_default() },
                |prepared| !prepared.iter().any(|(uid, _)| *uid == old_uid),
            )
            .await;
        if still.is_err() {
            ctx.fail(
                id,
                format!(
                    "claim {}/{CLAIM} (UID {old_uid}) of the force-deleted pod is gone from the API but still prepared \
                     on {} {}s later: the driver did not unprepare a claim whose object no longer exists",
                    ctx.ns,
                    ctx.node,
                    UNPREPARED.as_secs()
                ),
                ctx.evidence("first").await,
            );
            return cleanup(ctx, within).await;
        }
    } else {
        // Unseen, the teardown usually takes a second or two; a new pod that comes before it
        // ends waits for the resync (allowed for below), which this pause mostly spares.
        tokio::time::sleep(TEARDOWN).await;
    }

    ctx.phase("the claim made again under its name, and a new pod");
    ctx.create(&claim.claim(&ctx.ns, CLAIM)).await?;
    ctx.create(&ctx.workload("second").claim(CLAIM, CLAIM).build()).await?;
    let bound = if kubelet_visible { within } else { within + KUBELET_RESYNC };
    let Some(new) = running(ctx, id, CLAIM, "second", bound).await else { return cleanup(ctx, within).await };
    let new_uid = new.metadata.uid.as_deref().unwrap_or_default();
    // What the new pod sees is a part: the unprepare without the object and the new claim
    // running are the guarantee, and stand where the pod's view cannot be read.
    judge_sees_all(ctx, id, "second", &[&new], Unread::PassOnWhatRan, |seen| {
        format!(
            "after its pod was force-deleted, claim {CLAIM} (UID {old_uid}) was unprepared without its object, and \
             the claim made again under its name (UID {new_uid}, {:?}) ran a new pod{}",
            device_names(&new),
            seen.map(|s| format!(": {s}")).unwrap_or_default()
        )
    })
    .await;
    cleanup(ctx, within).await
}

/// The pods first (the kubelet unprepares their claims), then the claim.
async fn cleanup(ctx: &Ctx<'_>, within: Duration) -> Result<(), ScenarioError> {
    for pod in ["second", "first"] {
        let _ = ctx.delete_pod(pod, within).await;
    }
    let _ = ctx.api::<ResourceClaim>().delete(CLAIM, &DeleteParams::default()).await;
    Ok(())
}
