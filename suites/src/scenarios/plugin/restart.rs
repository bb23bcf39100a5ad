//! A restarted driver (crash, then start on the same dirs) answers prepare as before and can
//! still unprepare what it prepared before the restart.

use super::harness::PluginNode;
use crate::coverage::RowId::A;
use crate::coverage::Verdict::Covered;
use crate::coverage::{UpstreamRow, e2e_node};
use crate::engine::{Ctx, ScenarioError};
use crate::profile::ids::PLUGIN_RESTART_KEEPS_STATE as ID;

super::plugin_scenario!("plugin-restart", [ID]);

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[UpstreamRow {
    id: A(3),
    test: "must register after plugin restart",
    at: e2e_node(129),
    asserts: "a restarted plugin registers again and serves",
    guarantees: &[ID, crate::profile::ids::DRIVER_RESTART_NEW_CLAIMS_WORK],
    verdict: Covered,
}];

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), ScenarioError> {
    let device = super::first_device(node, ctx).await?;
    let claim = node.allocate("survivor", &node.name, &[&device]).await?;
    let before = node
        .prepared(&claim)
        .await
        .map_err(|source| ScenarioError::Prepare { step: "prepare before the restart", source })?;
    node.restart().await?;
    let after = match node.prepared(&claim).await {
        Ok(a) => a,
        Err(e) => {
            ctx.fail(ID, format!("prepare after the restart: {e}"), node.evidence());
            return Ok(());
        }
    };
    if after != before {
        ctx.fail(ID, format!("after the restart prepare answered {after:?}, before {before:?}"), node.evidence());
        return Ok(());
    }
    // A second crash, then unprepare: only a kept checkpoint knows what to undo.
    node.restart().await?;
    let ids = node.claim_cdi_ids(&before);
    let undone = node.unprepared(&claim).await;
    let left: Vec<String> = node.cdi_devices()?.into_keys().filter(|k| ids.contains(k)).collect();
    ctx.check(
        ID,
        undone.is_ok() && left.is_empty(),
        "same answer after a restart, and unprepare after another restart removed the claim's CDI devices",
        format!("after restarts: unprepare {undone:?}, CDI devices left {left:?}"),
        node.evidence(),
    );
    Ok(())
}
