//! GetInfo names a DRA plugin of the driver, its service socket and the v1 service.

use super::harness::PluginNode;
use crate::engine::{Ctx, ScenarioError};
use crate::profile::ids::PLUGIN_REGISTRATION_INFO as ID;
use dracheck_kubelet_api::{DRA_PLUGIN_TYPE, DRA_V1_SERVICE, DRA_V1BETA1_SERVICE};

super::plugin_scenario!("plugin-registration", [ID]);

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), ScenarioError> {
    let info = node.info().await?;
    let mut problems = Vec::new();
    if info.r#type != DRA_PLUGIN_TYPE {
        problems.push(format!("type {:?}, not {DRA_PLUGIN_TYPE:?}", info.r#type));
    }
    if info.name != node.driver_name {
        problems.push(format!("name {:?}, not the driver's {:?}", info.name, node.driver_name));
    }
    if !std::path::Path::new(&info.endpoint).exists() {
        problems.push(format!("endpoint {} does not exist", info.endpoint));
    }
    if !info.supported_versions.iter().any(|v| v == DRA_V1_SERVICE) {
        problems.push(format!("supported_versions {:?} lack {DRA_V1_SERVICE}", info.supported_versions));
    }
    let beta = if info.supported_versions.iter().any(|v| v == DRA_V1BETA1_SERVICE) { " and v1beta1" } else { "" };
    ctx.check(
        ID,
        problems.is_empty(),
        format!("a DRAPlugin named {} at {}, serving v1{beta}", info.name, info.endpoint),
        problems.join("; "),
        node.evidence(),
    );
    Ok(())
}
