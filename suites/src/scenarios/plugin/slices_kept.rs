//! The slices are the driver's to keep true, not a one-off write: whoever deletes them (an
//! admin, a clean-up script, a kubelet at start-up), the driver publishes the same devices
//! again, under new slice objects, without a restart. The upstream helper's controller does
//! so `DefaultSyncDelay` (30 s) after it sees the deletion, but not before the slices it
//! wrote leave its mutation cache (`DefaultMutationCacheTTL`, 60 s after it wrote them):
//! measured with dra-example-driver v0.4.0, 60 s after a deletion right after its start.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, DeleteParams};

use super::harness::PluginNode;
use super::published_slices;
use crate::coverage::RowId::D;
use crate::coverage::Verdict::{Covered, Partial};
use crate::coverage::{INTEGRATION_CORE, UpstreamRow, e2e, integration};
use crate::engine::{ApiContext, Ctx, ScenarioError};
use crate::profile::ids::PLUGIN_SLICES_RECREATED as ID;

super::plugin_scenario!("plugin-slices-kept", [ID]);

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: D(8),
        test: "reconciles ResourceSlices with ReconcilePoolWithName",
        at: e2e(1210),
        asserts: "a pool that a kubelet plugin publishes for all nodes, under a name of its own, is published again after \
                  its slices were deleted",
        guarantees: &[ID],
        verdict: Partial(
            "only the node's own pool, named after the node, is deleted and waited for; a pool of another name or for all \
             nodes is never checked",
        ),
    },
    UpstreamRow {
        id: D(10),
        test: "testPublishResourceSlices: recreate after delete",
        at: integration(INTEGRATION_CORE, 615),
        asserts: "slices someone else deleted are published again",
        guarantees: &[ID],
        verdict: Covered,
    },
];

const RECREATED: Duration = crate::scenarios::upstream::REPUBLISHED_AFTER_DELETION;

/// Each device of the node's pool by name, with its attributes and capacities.
fn devices(slices: &[ResourceSlice]) -> BTreeMap<String, String> {
    slices
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
        .map(|d| (d.name.clone(), super::slices::shape(d)))
        .collect()
}

fn uids(slices: &[ResourceSlice]) -> BTreeSet<String> {
    slices.iter().filter_map(|s| s.metadata.uid.clone()).collect()
}

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), ScenarioError> {
    let before = published_slices(node, ctx).await?;
    let (want, old) = (devices(&before), uids(&before));
    let api: Api<ResourceSlice> = Api::all(ctx.client());
    for slice in before.iter().filter_map(|s| s.metadata.name.as_deref()) {
        match api.delete(slice, &DeleteParams::default()).await {
            Err(kube::Error::Api(e)) if e.is_not_found() => {}
            other => {
                other.doing(|| format!("deleting ResourceSlice {slice}"))?;
            }
        }
    }
    let deleted = Instant::now();
    // New objects (none of the deleted UIDs) that hold the devices as they were.
    let again = ctx
        .poll_until(
            RECREATED,
            || ctx.slices_of(&node.name),
            |now| !now.is_empty() && uids(now).is_disjoint(&old) && devices(now) == want,
        )
        .await;
    match again {
        Ok(_) => ctx.pass(
            ID,
            format!(
                "{} slice(s) deleted by someone else; {:.1}s later the driver had published its {} device(s) again, \
                 unchanged",
                before.len(),
                deleted.elapsed().as_secs_f64(),
                want.len()
            ),
        ),
        Err(now) => {
            let fresh: Vec<ResourceSlice> =
                now.into_iter().filter(|s| s.metadata.uid.as_ref().is_none_or(|u| !old.contains(u))).collect();
            let got = devices(&fresh);
            let why = if fresh.is_empty() {
                "no slice was published again".to_string()
            } else {
                let differ: Vec<&String> =
                    want.keys().chain(got.keys()).filter(|k| want.get(*k) != got.get(*k)).collect();
                format!("the slices published again differ from those deleted in {differ:?}")
            };
            ctx.fail(
                ID,
                format!(
                    "{} slice(s) of the driver on {} were deleted by someone else; {}s later {why}: a driver keeps its \
                     slices published (the bound: {})",
                    before.len(),
                    node.name,
                    RECREATED.as_secs(),
                    crate::scenarios::upstream::republish_bound_named()
                ),
                node.evidence(),
            );
        }
    }
    Ok(())
}
