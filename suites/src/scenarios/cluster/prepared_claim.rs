//! A pod with a claim that is already prepared on its node and a new one. A first pod runs
//! with one claim; a second pod uses that claim too and one of its own. The kubelet prepares
//! a claim once per node, however many pods use it, so the driver is asked to prepare only the
//! new claim, in a call that does not name the other. Its state is per claim: what it set up
//! for the first claim must stay, or the second pod's container cannot be created with it.

use std::time::Duration;

use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::DeleteParams;

use super::common::{Unread, device_names, judge_sees_all, running};
use crate::coverage::RowId::C;
use crate::coverage::Verdict::Covered;
use crate::coverage::{UpstreamRow, e2e};
use crate::engine::{Ctx, Role, Scenario, ScenarioError, Tier};
use crate::profile::ids;

pub static SCENARIO: Scenario = Scenario {
    name: "prepared-claim",
    tier: Tier::Cluster,
    // Two devices of the profile's first request on one node, after the lifecycle scenario
    // has given its back.
    role: Role::General,
    guarantees: &[ids::LIFECYCLE_PREPARED_AND_NEW],
    disrupts: crate::engine::Disruption::None,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: C(8),
        test: "supports external claim referenced by multiple pods",
        at: e2e(1635),
        asserts: "a claim prepared once on a node serves every pod that uses it",
        guarantees: &[ids::LIFECYCLE_PREPARED_AND_NEW],
        verdict: Covered,
    },
    UpstreamRow {
        id: C(9),
        test: "supports external claim referenced by multiple containers of multiple pods",
        at: e2e(1648),
        asserts: "the same, with several containers in each pod",
        guarantees: &[ids::LIFECYCLE_PREPARED_AND_NEW, ids::CONFIG_PER_REQUEST],
        verdict: Covered,
    },
    UpstreamRow {
        id: C(11),
        test: "requests an already allocated and a new claim for a pod",
        at: e2e(1719),
        asserts: "preparing a pod's new claim leaves the claim it has prepared already as it was",
        guarantees: &[ids::LIFECYCLE_PREPARED_AND_NEW],
        verdict: Covered,
    },
];

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let id = ids::LIFECYCLE_PREPARED_AND_NEW;
    let within = Duration::from_secs(ctx.profile().guarantees.allocation.as_ref().map_or(60, |a| a.within_seconds));
    // One device of the profile's first request each, so that two fit on a node of the
    // profile's size.
    let claim = ctx.profile().claim().first_per_name(&["device"]);

    ctx.phase("a pod with a claim of its own");
    ctx.create(&claim.claim(&ctx.ns, "prepared")).await?;
    ctx.create(&ctx.workload("holder").claim("prepared", "prepared").build()).await?;
    let Some(first) = running(ctx, id, "prepared", "holder", within).await else { return cleanup(ctx, within).await };

    ctx.phase("a second pod with that claim, prepared on the node already, and a new one");
    ctx.create(&claim.claim(&ctx.ns, "new")).await?;
    ctx.create(&ctx.workload("joiner").claim("prepared", "prepared").claim("new", "new").build()).await?;
    let Some(second) = running(ctx, id, "new", "joiner", within).await else { return cleanup(ctx, within).await };
    judge_sees_all(ctx, id, "joiner", &[&first, &second], Unread::PassOnWhatRan, |seen| {
        format!(
            "a pod with the claim another pod runs with ({:?}) and a new one ({:?}) ran{}",
            device_names(&first),
            device_names(&second),
            if seen.is_some() { " and sees both" } else { "" }
        )
    })
    .await;
    cleanup(ctx, within).await
}

/// The pods first (the kubelet unprepares their claims), then the claims.
async fn cleanup(ctx: &Ctx<'_>, within: Duration) -> Result<(), ScenarioError> {
    for pod in ["joiner", "holder"] {
        let _ = ctx.delete_pod(pod, within).await;
    }
    for claim in ["new", "prepared"] {
        let _ = ctx.api::<ResourceClaim>().delete(claim, &DeleteParams::default()).await;
    }
    Ok(())
}
