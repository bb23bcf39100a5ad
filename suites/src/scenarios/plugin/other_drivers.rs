//! Several drivers on one node: a claim may have devices of several drivers (a request for
//! each), and the kubelet hands the whole claim to each of them. A driver prepares and
//! unprepares only the results that name it; the others are another plugin's. Upstream's
//! "with multiple drivers" tests, from the one driver's side.

use super::harness::{Allocated, PLUGIN_TIER_CLASS, PluginNode};
use crate::engine::{Ctx, ScenarioError};
use crate::profile::ids::PLUGIN_PREPARE_OWN_RESULTS_ONLY as ID;

super::plugin_scenario!("plugin-other-drivers", [ID]);

/// A driver that is not there: the suite allocates by hand, so nothing else needs to exist.
const OTHER_DRIVER: &str = "other.dracheck.io";
const OTHER_REQUEST: &str = "other";
const OTHER_DEVICE: &str = "other-device-0";

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), ScenarioError> {
    let mine = super::first_device(node, ctx).await?;
    let claim = dracheck_objects::ClaimBuilder::exact(PLUGIN_TIER_CLASS, 1)
        .and_request(OTHER_REQUEST, &format!("{PLUGIN_TIER_CLASS}-other"), 1)
        .claim(&ctx.ns, "two-drivers");
    let results = [
        node.result(&node.name, &mine),
        Allocated { request: OTHER_REQUEST, driver: OTHER_DRIVER, pool: &node.name, device: OTHER_DEVICE, share: None },
    ];
    let claim = node.allocate_results(claim, &results).await?;
    let got = match node.prepared(&claim).await {
        Ok(got) => got,
        Err(e) => {
            ctx.fail(
                ID,
                format!(
                    "prepare of a claim allocated {mine} of this driver and {OTHER_DEVICE} of driver {OTHER_DRIVER} failed: \
                     {e}; a driver prepares the results that name it and leaves the others to their plugins"
                ),
                node.evidence(),
            );
            return Ok(());
        }
    };
    let names: Vec<(&str, &[String])> =
        got.iter().map(|d| (d.device_name.as_str(), d.request_names.as_slice())).collect();
    let only_mine =
        got.len() == 1 && got[0].device_name == mine && got[0].request_names.iter().all(|r| r != OTHER_REQUEST);
    if !only_mine {
        ctx.fail(
            ID,
            format!(
                "prepare of a claim allocated {mine} of this driver and {OTHER_DEVICE} of driver {OTHER_DRIVER} returned \
                 {names:?}: only this driver's result belongs in the answer"
            ),
            node.evidence(),
        );
        return Ok(());
    }
    match node.unprepared(&claim).await {
        Ok(()) => ctx.pass(
            ID,
            format!(
                "of a claim allocated {mine} of this driver and {OTHER_DEVICE} of driver {OTHER_DRIVER}, prepare returned \
                 only {mine} and unprepare succeeded"
            ),
        ),
        Err(e) => ctx.fail(
            ID,
            format!("unprepare of a claim with another driver's result failed: {e}"),
            node.evidence(),
        ),
    }
    Ok(())
}
