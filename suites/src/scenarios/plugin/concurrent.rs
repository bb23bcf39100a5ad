//! Several claims prepared at the same time all succeed, each with its own devices (CDI
//! devices the driver defines for the whole node, before any claim, are shared by design).

use super::harness::PluginNode;
use crate::engine::{Ctx, ScenarioError};
use crate::profile::ids::PLUGIN_PREPARE_CONCURRENT as ID;

super::plugin_scenario!("plugin-concurrent", [ID]);

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), ScenarioError> {
    let devices = super::oracle_devices(node, ctx).await?;
    let mut claims = Vec::new();
    for (i, d) in devices.iter().take(4).enumerate() {
        claims.push(node.allocate(&format!("parallel-{i}"), &node.name, &[d]).await?);
    }
    let answers = futures::future::join_all(claims.iter().map(|c| node.prepared(c))).await;
    let errors: Vec<String> = answers.iter().filter_map(|a| a.as_ref().err().map(ToString::to_string)).collect();
    let mut ids: Vec<String> = answers.iter().flatten().flat_map(|a| node.claim_cdi_ids(a)).collect();
    let total = ids.len();
    ids.sort();
    ids.dedup();
    let ok = errors.is_empty() && ids.len() == total && total >= claims.len();
    ctx.check(
        ID,
        ok,
        format!("{} concurrent prepares, each with its own CDI devices", claims.len()),
        format!("errors {errors:?}; {total} CDI IDs, {} distinct", ids.len()),
        node.evidence(),
    );
    for c in &claims {
        let _ = node.unprepared(c).await;
    }
    Ok(())
}
