//! A claim is its UID, not its name: two claims of the same name (in two namespaces, or one
//! deleted and made again while a force-deleted pod's claim is still prepared) are prepared
//! on one node side by side, each with its own devices, and unpreparing one leaves the other
//! as it was. The kubelet's DRA API names claims by UID for this reason; a driver that keys
//! its state or its CDI spec files by name hands one claim the other's devices.

use super::harness::PluginNode;
use crate::engine::{Ctx, ScenarioError};
use crate::profile::ids::PLUGIN_PREPARE_KEYED_BY_UID as ID;

super::plugin_scenario!("plugin-claim-identity", [ID]);

const NAME: &str = "twin";

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), ScenarioError> {
    let devices = super::oracle_devices(node, ctx).await?;
    let [first, second, ..] = devices.as_slice() else {
        ctx.skip(ID, format!("the driver offers {} device(s) on the node; two claims need two", devices.len()));
        return Ok(());
    };
    let other_ns = ctx.other_namespace("twin").await?;
    let claim = |ns: &str| dracheck_objects::claim(ns, NAME, super::harness::PLUGIN_TIER_CLASS, 1, &[]);
    let one = node.allocate_results(claim(&ctx.ns), &[node.result(&node.name, first)]).await?;
    let two = node.allocate_results(claim(&other_ns), &[node.result(&node.name, second)]).await?;
    let what = format!("claims {}/{NAME} ({first}) and {other_ns}/{NAME} ({second})", ctx.ns);

    let mut answers = Vec::new();
    for (claim, device) in [(&one, first), (&two, second)] {
        match node.prepared(claim).await {
            Ok(got) if got.iter().map(|d| d.device_name.as_str()).eq([device.as_str()]) => answers.push(got),
            Ok(got) => {
                let names: Vec<&str> = got.iter().map(|d| d.device_name.as_str()).collect();
                ctx.fail(
                    ID,
                    format!(
                        "of {what}, prepare of {}/{NAME} (UID {}) returned {names:?}: a claim of the same name is \
                         another claim",
                        claim.namespace, claim.uid
                    ),
                    node.evidence(),
                );
                return Ok(());
            }
            Err(e) => {
                ctx.fail(ID, format!("of {what}, prepare of {}/{NAME} failed: {e}", claim.namespace), node.evidence());
                return Ok(());
            }
        }
    }
    // The second's CDI devices as they stand before the first is unprepared: whether they
    // resolve at all is `plugin.cdi.resolvable`'s to judge.
    let before = node.cdi_devices()?;
    let theirs: Vec<String> =
        node.claim_cdi_ids(&answers[1]).into_iter().filter(|id| before.contains_key(id)).collect();
    if let Some(why) = node.unprepare_one_of_two(&one, &theirs, &what).await? {
        ctx.fail(ID, why, node.evidence());
        return Ok(());
    }
    // The second claim goes with the node; its unprepare is `plugin.unprepare.removes-state`'s
    // to judge.
    let _ = node.unprepared(&two).await;
    ctx.pass(
        ID,
        format!("{what} were prepared side by side, each with its own device, and unprepare of one left the other's CDI devices"),
    );
    Ok(())
}
