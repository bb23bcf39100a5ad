//! Several claims prepared at the same time all succeed, each with its own devices.

use super::harness::PluginNode;
use crate::engine::Ctx;
use crate::profile::ids::PLUGIN_PREPARE_CONCURRENT as ID;

super::plugin_scenario!("plugin-concurrent", [ID]);

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), String> {
    let devices = super::oracle_devices(node, ctx).await?;
    let mut claims = Vec::new();
    for (i, d) in devices.iter().take(4).enumerate() {
        claims.push(node.allocate(&format!("parallel-{i}"), &node.name, &[d]).await?);
    }
    let answers = futures::future::join_all(claims.iter().map(|c| node.prepared(c))).await;
    let errors: Vec<String> = answers.iter().filter_map(|a| a.as_ref().err().cloned()).collect();
    let mut ids: Vec<String> = answers.iter().flatten().flatten().flat_map(|d| d.cdi_device_ids.clone()).collect();
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
