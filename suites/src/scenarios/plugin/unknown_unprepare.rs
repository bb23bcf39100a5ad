//! Unprepare of a claim the driver never prepared is not an error (kubelet may ask after a
//! restart, or twice).

use super::harness::{Claim, PluginNode};
use crate::engine::{Ctx, ScenarioError};
use crate::profile::ids::PLUGIN_UNPREPARE_UNKNOWN_CLAIM as ID;

super::plugin_scenario!("plugin-unknown-unprepare", [ID]);

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), ScenarioError> {
    let stranger = Claim {
        namespace: ctx.ns.clone(),
        uid: "0d15ea5e-0000-4000-8000-00000000beef".into(),
        name: "never-prepared".into(),
    };
    match node.unprepared(&stranger).await {
        Ok(()) => ctx.pass(ID, "unprepare of an unknown claim succeeded"),
        Err(e) => ctx.fail(ID, format!("unprepare of an unknown claim: {e}"), node.evidence()),
    }
    Ok(())
}
