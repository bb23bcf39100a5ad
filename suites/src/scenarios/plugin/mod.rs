//! Plugin-tier scenarios: the suite plays kubelet against the driver's sockets, like
//! csi-sanity does for CSI drivers. Each scenario starts its own driver instance on a node
//! of its own.

mod cdi;
mod claim_identity;
mod concurrent;
mod foreign_node;
pub(crate) mod harness;
pub(crate) mod health;
pub(crate) mod idempotent;
pub(crate) mod inventory_change;
mod other_drivers;
pub(crate) mod permissions;
pub(crate) mod prepare;
pub(crate) mod prepare_retry;
pub(crate) mod registration;
pub(crate) mod registration_retry;
pub(crate) mod restart;
pub(crate) mod shares;
pub(crate) mod slices;
pub(crate) mod slices_kept;
mod taints;
pub(crate) mod unknown_unprepare;

use crate::engine::{Ctx, Scenario, ScenarioError};

pub fn all() -> Vec<&'static Scenario> {
    vec![
        &registration::SCENARIO,
        &registration_retry::SCENARIO,
        &slices::SCENARIO,
        &slices_kept::SCENARIO,
        &permissions::SCENARIO,
        &inventory_change::SCENARIO,
        &taints::SCENARIO,
        &health::SCENARIO,
        &prepare::SCENARIO,
        &idempotent::SCENARIO,
        &prepare_retry::SCENARIO,
        &unknown_unprepare::SCENARIO,
        &foreign_node::SCENARIO,
        &concurrent::SCENARIO,
        &other_drivers::SCENARIO,
        &claim_identity::SCENARIO,
        &shares::SCENARIO,
        &restart::SCENARIO,
        &cdi::SCENARIO,
    ]
}

/// The devices the driver should publish on `node`: by its inventory oracle, or as it
/// published them where the suite has no oracle for it.
async fn node_devices(
    node: &harness::PluginNode,
    ctx: &Ctx<'_>,
) -> Result<Vec<k8s_openapi::api::resource::v1::Device>, ScenarioError> {
    if let Some(oracle) = &ctx.target.adapter.oracle {
        return Ok(oracle(&node.name)?);
    }
    Ok(published_slices(node, ctx).await?.into_iter().flat_map(|s| s.spec.devices.unwrap_or_default()).collect())
}

/// The names of [`node_devices`].
async fn oracle_devices(node: &harness::PluginNode, ctx: &Ctx<'_>) -> Result<Vec<String>, ScenarioError> {
    Ok(node_devices(node, ctx).await?.into_iter().map(|d| d.name).collect())
}

/// The driver's slices for the suite's node, once its pool is complete, or as they stand after
/// 30 s if it published any (a driver writes a pool's slices one by one).
async fn published_slices(
    node: &harness::PluginNode,
    ctx: &Ctx<'_>,
) -> Result<Vec<k8s_openapi::api::resource::v1::ResourceSlice>, ScenarioError> {
    let within = std::time::Duration::from_secs(30);
    match ctx.poll_until(within, || ctx.slices_of(&node.name), |s| pool_complete(s, &node.name)).await {
        Ok((slices, _)) => Ok(slices),
        Err(last) if !last.is_empty() => Ok(last),
        Err(_) => Err(ScenarioError::timeout(format!("the driver published no slice for {}", node.name), within)),
    }
}

/// Whether the newest generation of pool `pool` among `slices` has as many slices as they
/// say it has: what a consumer (the scheduler) waits for before it uses the pool.
fn pool_complete(slices: &[k8s_openapi::api::resource::v1::ResourceSlice], pool: &str) -> bool {
    let own: Vec<_> = slices.iter().filter(|s| s.spec.pool.name == pool).collect();
    let top = own.iter().map(|s| s.spec.pool.generation).max();
    let current: Vec<_> = own.iter().filter(|s| Some(s.spec.pool.generation) == top).collect();
    !current.is_empty() && current.iter().all(|s| s.spec.pool.resource_slice_count <= current.len() as i64)
}

/// The first device the driver should publish on the suite's node, for a claim of one device.
async fn first_device(node: &harness::PluginNode, ctx: &Ctx<'_>) -> Result<String, ScenarioError> {
    oracle_devices(node, ctx)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| ScenarioError::Unmet("the inventory is empty".into()))
}

/// Where `s` also checks a driver the suite cannot start (one installed in the cluster), what
/// it needs then: the slices scenario reads what the driver published against a host
/// inventory, the permissions scenario acts as the plugin's account.
pub(crate) fn installed_driver_need(s: &Scenario) -> Option<&'static str> {
    if std::ptr::eq(s, &slices::SCENARIO) {
        Some("the driver's program, or an installed driver's slices and an inventory oracle")
    } else if std::ptr::eq(s, &permissions::SCENARIO) {
        Some(
            "the account of the driver's kubelet plugin: an installed driver's plugin pods, or the installation its adapter states",
        )
    } else {
        None
    }
}

/// Why `s` would be skipped on a target with `abilities` for the driver of `adapter` before
/// any disruption it needs is considered; `None` where it runs.
pub(crate) fn unreachable(
    s: &Scenario,
    adapter: &crate::adapters::Adapter,
    abilities: crate::engine::Abilities,
) -> Option<&'static str> {
    if std::ptr::eq(s, &permissions::SCENARIO) {
        let known = abilities.driver_pods || (adapter.installation.is_some() && abilities.driver_processes);
        return (!known).then_some(crate::engine::target::NEEDS_PLUGIN_ACCOUNT);
    }
    let installed = std::ptr::eq(s, &slices::SCENARIO) && adapter.host_inventory.is_some();
    (adapter.spec.is_none() && !installed).then_some(harness::NEEDS_BINARY)
}

/// Declares a plugin-tier scenario whose `check(ctx, &mut node)` runs with a started node.
macro_rules! plugin_scenario {
    ($name:literal, [$($id:expr),+ $(,)?]) => {
        pub static SCENARIO: $crate::engine::Scenario = $crate::engine::Scenario {
            name: $name,
            tier: $crate::engine::Tier::Plugin,
            role: $crate::engine::Role::General,
            guarantees: &[$($id),+],
            disrupts: $crate::engine::Disruption::None,
            run: $crate::scenario_fn!(run),
        };

        async fn run(ctx: &$crate::engine::Ctx<'_>) -> Result<(), $crate::engine::ScenarioError> {
            let Some(mut node) = super::harness::node_for(ctx, SCENARIO.guarantees).await? else { return Ok(()) };
            let outcome = check(ctx, &mut node).await;
            node.cleanup().await;
            outcome
        }
    };
}
use plugin_scenario;
