//! Every scenario, by tier. A scenario is one small file that reads like its spec.

pub mod cluster;
pub mod plugin;
pub mod upstream;

use crate::engine::Scenario;

/// Driver-level scenarios (plugin tier), in run order.
pub fn driver_scenarios() -> Vec<&'static Scenario> {
    plugin::all()
}

/// Profile scenarios (cluster tier), in run order.
pub fn cluster_scenarios() -> Vec<&'static Scenario> {
    cluster::all()
}
