//! The CDI spec files are valid, and every CDI ID that prepare returns resolves to a device
//! of one of them, as a CDI-enabled runtime requires before it starts a container.

use super::harness::PluginNode;
use crate::engine::Ctx;
use crate::profile::ids::{PLUGIN_CDI_RESOLVABLE as RESOLVABLE, PLUGIN_CDI_VALID as VALID};

super::plugin_scenario!("plugin-cdi", [VALID, RESOLVABLE]);

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), String> {
    let devices = super::oracle_devices(node, ctx).await?;
    let claim = node.allocate("cdi", &node.name, &[devices.first().ok_or("the inventory is empty")?]).await?;
    let prepared = node.prepared(&claim).await.map_err(|e| format!("prepare failed: {e}"))?;
    let registry = match node.cdi_devices() {
        Ok(r) => {
            ctx.pass(VALID, format!("the CDI dir's spec files parse and define {} device(s)", r.len()));
            r
        }
        Err(e) => {
            ctx.fail(VALID, e, node.evidence());
            return Ok(());
        }
    };
    let ids: Vec<String> = prepared.iter().flat_map(|d| d.cdi_device_ids.clone()).collect();
    let missing: Vec<&String> = ids.iter().filter(|id| !registry.contains_key(*id)).collect();
    ctx.check(
        RESOLVABLE,
        !ids.is_empty() && missing.is_empty(),
        format!("{ids:?} resolve to spec files"),
        format!("no spec file defines {missing:?} (returned {ids:?})"),
        node.evidence(),
    );
    let _ = node.unprepared(&claim).await;
    Ok(())
}
