//! Why a scenario could not check what it set out to check. Such an error ends the scenario;
//! the runner then fails each of its guarantees not yet recorded with "not checked: …". A
//! guarantee that does not hold is not an error: the scenario records it with `Ctx::fail`.

use std::time::Duration;

use dracheck_clusters::ClusterError;

use crate::scenarios::plugin::harness::{HarnessError, PrepareError};

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The profile's inline DeviceClass has the name of one dracheck did not make.
    #[error(
        "the profile's DeviceClass {0} already exists on the cluster and was not made by dracheck; refer to it \
         with `deviceClass: {{existing: {0}}}` or rename the profile's class"
    )]
    ForeignClass(String),
    /// The profile names an existing DeviceClass that is not there.
    #[error("the profile's DeviceClass {0} does not exist on this cluster")]
    NoClass(String),
    /// A named condition did not come about in time; `now` is what the object was instead.
    #[error("{what} within {}s{}", within.as_secs(), now.as_ref().map(|n| format!(" (it is {n})")).unwrap_or_default())]
    Timeout { what: String, within: Duration, now: Option<String> },
    /// The scenario did not end within the run's bound for one scenario.
    #[error("the scenario did not finish within {}s", .0.as_secs())]
    Deadline(Duration),
    /// A condition the scenario builds on did not hold, e.g. no devices published on its node
    /// before a restart, or a restart slower than the profile allows.
    #[error("{0}")]
    Unmet(String),
    /// The plugin tier's own node could not be set up or could not reach the driver.
    #[error(transparent)]
    Harness(#[from] HarnessError),
    /// A prepare or unprepare the scenario builds on went wrong.
    #[error("{step}: {source}")]
    Prepare {
        step: &'static str,
        #[source]
        source: PrepareError,
    },
    /// The driver's inventory oracle has no answer for the node.
    #[error(transparent)]
    Oracle(#[from] crate::adapters::OracleError),
    /// The target could not restart a driver or a kubelet, or remove a node.
    #[error(transparent)]
    Disruption(#[from] DisruptionError),
}

impl ScenarioError {
    /// A timeout of `what` ("pod x did not reach Running") after `within`.
    pub fn timeout(what: impl Into<String>, within: Duration) -> ScenarioError {
        ScenarioError::Timeout { what: what.into(), within, now: None }
    }
}

/// A call to the API server failed, with what the suite was doing: one type for every error
/// enum of the suite that has API calls in it (scenarios, disruptions, the plugin harness).
#[derive(Debug, thiserror::Error)]
#[error("{doing}: {source}")]
pub struct ApiError {
    pub doing: String,
    #[source]
    pub source: kube::Error,
}

/// A kube call's error, with what the suite was doing.
pub trait ApiContext<T> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, ApiError>;
}

impl<T> ApiContext<T> for Result<T, kube::Error> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, ApiError> {
        self.map_err(|source| ApiError { doing: what(), source })
    }
}

/// Why the target did not carry out a disruption a scenario asked for.
#[derive(Debug, thiserror::Error)]
pub enum DisruptionError {
    /// The target has no control over its nodes; the scenario should have been skipped.
    #[error("{}", super::target::NEEDS_NODE_CONTROL)]
    NoNodeControl,
    #[error("no driver runs on {0}")]
    NoDriver(String),
    #[error("no node {0} in the local cluster")]
    NoNode(String),
    /// The run has no second driver; the scenario should have been skipped.
    #[error("{}", super::target::NO_COMPANION)]
    NoCompanion,
    /// The local cluster failed to do it.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// An installed driver's pods could not be listed or deleted.
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("no ready pod matching {selector:?} runs on {node}: check --driver-pods and --driver-namespace")]
    NoDriverPod { selector: String, node: String },
    #[error(
        "after deleting the driver's pod {pod}, no new pod matching {selector:?} was ready on {node} within {}s",
        within.as_secs()
    )]
    NotBack { pod: String, selector: String, node: String, within: Duration },
}
