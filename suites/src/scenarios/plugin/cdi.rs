//! The CDI spec files are valid, and every CDI ID that prepare returns resolves to a device
//! of one of them, as a CDI-enabled runtime requires before it starts a container.

use super::harness::PluginNode;
use crate::engine::{Ctx, ScenarioError};
use crate::profile::ids::{PLUGIN_CDI_RESOLVABLE as RESOLVABLE, PLUGIN_CDI_VALID as VALID};

super::plugin_scenario!("plugin-cdi", [VALID, RESOLVABLE]);

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), ScenarioError> {
    let device = super::first_device(node, ctx).await?;
    let claim = node.allocate("cdi", &node.name, &[&device]).await?;
    let prepared = node.prepared(&claim).await.map_err(|source| ScenarioError::Prepare { step: "prepare", source })?;
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
