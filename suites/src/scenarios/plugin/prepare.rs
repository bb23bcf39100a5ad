//! Prepare of an allocated claim returns each allocated device with its CDI IDs; unprepare
//! succeeds and leaves no CDI spec of the claim behind.

use super::harness::PluginNode;
use crate::coverage::RowId::B;
use crate::coverage::Verdict::Covered;
use crate::coverage::{UpstreamRow, e2e_node};
use crate::engine::{Ctx, ScenarioError};
use crate::profile::ids::{PLUGIN_PREPARE_ALLOCATED_CLAIM as PREPARE, PLUGIN_UNPREPARE_REMOVES_STATE as UNPREPARE};

super::plugin_scenario!("plugin-prepare", [PREPARE, UNPREPARE]);

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[UpstreamRow {
    id: B(16),
    test: "Device ShareID: without ShareID",
    at: e2e_node(1323),
    asserts: "a claim whose results carry no share ID is prepared and unprepared",
    guarantees: &[PREPARE, UNPREPARE],
    verdict: Covered,
}];

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), ScenarioError> {
    let devices = super::oracle_devices(node, ctx).await?;
    let picked: Vec<&str> = devices.iter().take(2).map(String::as_str).collect();
    let claim = node.allocate("prepared", &node.name, &picked).await?;
    let got = match node.prepared(&claim).await {
        Ok(d) => d,
        Err(e) => {
            ctx.fail(PREPARE, format!("prepare of an allocated claim failed: {e}"), node.evidence());
            ctx.fail(UNPREPARE, "nothing to unprepare: prepare failed", Vec::new());
            return Ok(());
        }
    };
    let mut names: Vec<&str> = got.iter().map(|d| d.device_name.as_str()).collect();
    names.sort();
    let ok = names == picked
        && got.iter().all(|d| {
            d.pool_name == node.name && d.request_names.iter().any(|r| r == "req") && !d.cdi_device_ids.is_empty()
        });
    ctx.check(
        PREPARE,
        ok,
        format!("prepared {names:?} with CDI IDs"),
        format!("prepare returned {got:?} for {picked:?}"),
        node.evidence(),
    );

    let ids = node.claim_cdi_ids(&got);
    if let Err(e) = node.unprepared(&claim).await {
        ctx.fail(UNPREPARE, format!("unprepare failed: {e}"), node.evidence());
        return Ok(());
    }
    let left: Vec<String> = node.cdi_devices()?.into_keys().filter(|k| ids.contains(k)).collect();
    ctx.check(
        UNPREPARE,
        left.is_empty(),
        "unprepare removed the claim's CDI devices",
        format!("after unprepare the CDI dir still defines {left:?}"),
        node.evidence(),
    );
    Ok(())
}
