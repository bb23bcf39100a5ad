//! A scenario: a named check of some guarantees, in a tier, with what it needs to run.

use futures::future::BoxFuture;

use super::ctx::Ctx;
use super::error::ScenarioError;
use crate::profile::Profile;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// The suite plays kubelet against the driver's sockets.
    Plugin,
    /// Real scheduler and controllers, workloads in pods.
    Cluster,
}

/// The node a cluster-tier scenario is pinned to. Scenarios of different roles run in
/// parallel when the cluster has a node per role; otherwise they share nodes and run in turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Allocation, impossible claims, isolation, limits, retention.
    General,
    /// Uses every device of its node; then what needs several devices of one node at once
    /// (configuration per request).
    Exhaustion,
    /// Restarts the driver and the kubelet of its node.
    Restarts,
    /// Takes its node out for longer than the kubelet's patience: a reboot, a driver outage
    /// past the slice wipe delay.
    Outages,
    /// Removes its node.
    Removal,
}

/// What a scenario does to the cluster beyond its own objects, which not every target allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disruption {
    None,
    /// Restarts the driver on its node.
    RestartsDriver,
    /// Keeps the driver on its node down for a while (its own processes: an installed driver's
    /// DaemonSet would start it again at once).
    StopsDriver,
    /// Restarts a kubelet or removes a node.
    ControlsNodes,
    /// Runs a second driver beside the one under test on its node.
    AddsDriver,
    /// Runs a second instance of the driver under test beside its own on its node (a rolling
    /// update), and stops the first for a while: the driver's own processes.
    UpgradesDriver,
}

/// A scenario's body. `Err`: it could not check what it set out to (see [`ScenarioError`]);
/// a guarantee that does not hold is recorded as failed, not returned.
pub type RunFn = for<'a> fn(&'a Ctx<'a>) -> BoxFuture<'a, Result<(), ScenarioError>>;

pub struct Scenario {
    pub name: &'static str,
    pub tier: Tier,
    pub role: Role,
    /// Every guarantee ID the scenario may record.
    pub guarantees: &'static [&'static str],
    /// Skipped where the target does not allow it.
    pub disrupts: Disruption,
    pub run: RunFn,
}

impl Scenario {
    /// The guarantees of this scenario that `profile` publishes (all, for driver-level ones).
    pub fn applicable(&self, profile: Option<&Profile>) -> Vec<&'static str> {
        match profile {
            None => self.guarantees.to_vec(),
            Some(p) => {
                let published = p.guarantee_ids();
                self.guarantees.iter().copied().filter(|id| published.contains(id)).collect()
            }
        }
    }
}

/// `scenario_fn!(run)` turns `async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError>` into a
/// [`RunFn`].
#[macro_export]
macro_rules! scenario_fn {
    ($f:path) => {{
        fn start<'a>(
            ctx: &'a $crate::engine::Ctx<'a>,
        ) -> futures::future::BoxFuture<'a, Result<(), $crate::engine::ScenarioError>> {
            Box::pin($f(ctx))
        }
        start
    }};
}
