//! Preparing the same claim twice gives the same answer, as kubelet relies on after its own
//! restarts.

use super::harness::PluginNode;
use crate::engine::{Ctx, ScenarioError};
use crate::profile::ids::PLUGIN_PREPARE_IDEMPOTENT as ID;

super::plugin_scenario!("plugin-idempotent", [ID]);

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
