//! A claim allocated to another node's pool is refused with a per-claim error.

use super::harness::{PluginNode, PrepareError};
use crate::engine::{Ctx, ScenarioError};
use crate::profile::ids::PLUGIN_PREPARE_REFUSES_FOREIGN_NODE as ID;

super::plugin_scenario!("plugin-foreign-node", [ID]);

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), ScenarioError> {
    let device = super::first_device(node, ctx).await?;
    let claim = node.allocate("elsewhere", "dracheck-other-node", &[&device]).await?;
    match node.prepared(&claim).await {
        Err(e @ PrepareError::Refused { .. }) => ctx.pass(ID, format!("refused: {e}")),
        Err(e) => ctx.fail(ID, format!("the call failed as a whole instead of for the claim: {e}"), node.evidence()),
        Ok(d) => ctx.fail(ID, format!("prepared a claim of another node's pool: {d:?}"), node.evidence()),
    }
    Ok(())
}
