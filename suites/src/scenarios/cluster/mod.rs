//! Cluster-tier scenarios: the real scheduler and controllers, workloads in pods.

mod admin_access;
mod binding_conditions;
mod coexistence;
mod common;
mod compatible;
mod config;
mod consumable_capacity;
mod container_restart;
mod device_status;
mod driver_outage;
mod driver_restart;
mod driver_upgrade;
mod exhaustion;
mod extended_resource;
mod force_delete;
mod health;
mod impossible;
mod isolation;
mod lifecycle;
mod limits;
mod node_reboot;
mod node_removal;
mod node_restart;
mod partitionable;
mod prepared_claim;
mod prioritized_list;
mod taints;
mod versions;

use crate::engine::Scenario;

/// In run order within a node role; roles run side by side.
pub fn all() -> Vec<&'static Scenario> {
    vec![
        &versions::SCENARIO,
        &compatible::SCENARIO,
        &impossible::SCENARIO,
        &isolation::SCENARIO,
        &limits::SCENARIO,
        &lifecycle::SCENARIO,
        &prepared_claim::SCENARIO,
        &force_delete::SCENARIO,
        &exhaustion::SCENARIO,
        &config::SCENARIO,
        &coexistence::SCENARIO,
        &prioritized_list::SCENARIO,
        &partitionable::SCENARIO,
        &consumable_capacity::SCENARIO,
        &binding_conditions::SCENARIO,
        &device_status::SCENARIO,
        &health::SCENARIO,
        &taints::SCENARIO,
        &extended_resource::SCENARIO,
        &admin_access::SCENARIO,
        &container_restart::SCENARIO,
        &driver_restart::SCENARIO,
        &driver_upgrade::SCENARIO,
        &node_restart::SCENARIO,
        &driver_outage::SCENARIO,
        &node_reboot::SCENARIO,
        &node_removal::SCENARIO,
    ]
}
