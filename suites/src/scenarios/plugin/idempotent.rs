//! Preparing the same claim twice gives the same answer, as kubelet relies on after its own
//! restarts.

use super::harness::PluginNode;
use crate::coverage::RowId::B;
use crate::coverage::Verdict::{Covered, Partial};
use crate::coverage::{UpstreamRow, e2e_node};
use crate::engine::{Ctx, ScenarioError};
use crate::profile::ids::PLUGIN_PREPARE_IDEMPOTENT as ID;

super::plugin_scenario!("plugin-idempotent", [ID]);

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: B(4),
        test: "must run pod if NodePrepareResources fails for one plugin and then succeeds",
        at: e2e_node(656),
        asserts: "of two plugins that share a claim, the one whose prepare succeeded is asked to prepare it again and \
                  answers as before",
        guarantees: &[ID, crate::profile::ids::PLUGIN_PREPARE_RETRY],
        verdict: Covered,
    },
    UpstreamRow {
        id: B(5),
        test: "must run pod if NodePrepareResources is in progress for one plugin when Kubelet restarts",
        at: e2e_node(706),
        asserts: "a prepare of a claim arrives while an earlier prepare of the same claim still runs",
        guarantees: &[ID, crate::profile::ids::PLUGIN_PREPARE_CONCURRENT],
        verdict: Partial(
            "one claim is prepared twice one call after the other and different claims at once, never one claim twice at \
             once",
        ),
    },
];

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), ScenarioError> {
    let device = super::first_device(node, ctx).await?;
    let claim = node.allocate("twice", &node.name, &[&device]).await?;
    let first = node.prepared(&claim).await;
    let second = node.prepared(&claim).await;
    match (first, second) {
        (Ok(a), Ok(b)) => ctx.check(
            ID,
            a == b,
            "the second prepare answered exactly as the first",
            format!("first {a:?}, then {b:?}"),
            node.evidence(),
        ),
        (a, b) => ctx.fail(ID, format!("prepare failed: first {:?}, second {:?}", a.err(), b.err()), node.evidence()),
    }
    let _ = node.unprepared(&claim).await;
    Ok(())
}
