//! Cluster-tier scenarios: the real scheduler and controllers, workloads in pods.

pub(crate) mod admin_access;
pub(crate) mod binding_conditions;
pub(crate) mod coexistence;
mod common;
pub(crate) mod compatible;
pub(crate) mod config;
pub(crate) mod consumable_capacity;
pub(crate) mod container_restart;
pub(crate) mod device_status;
pub(crate) mod driver_outage;
pub(crate) mod driver_restart;
pub(crate) mod driver_upgrade;
pub(crate) mod exhaustion;
pub(crate) mod extended_resource;
pub(crate) mod force_delete;
pub(crate) mod health;
mod impossible;
pub(crate) mod isolation;
pub(crate) mod lifecycle;
mod limits;
mod node_reboot;
mod node_removal;
pub(crate) mod node_restart;
pub(crate) mod partitionable;
pub(crate) mod prepared_claim;
pub(crate) mod prioritized_list;
pub(crate) mod taints;
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
