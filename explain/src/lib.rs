//! Why a ResourceClaim (or a pod's claims) is not allocated although devices are free: the
//! request evaluated against the inventory Kubernetes actually sees, as the scheduler's
//! allocator evaluates it, with the cause named and what would fit instead.

pub mod cel;
mod constraints;
mod counters;
mod diagnose;
mod evaluate;
pub mod model;
mod nodes;
mod pools;
mod refs;
mod render;
mod search;
pub mod state;
mod suggest;
#[cfg(test)]
mod tests;

pub use diagnose::explain_state;
pub use model::{Cause, Explanation, Reason, Summary};
pub use render::{summary_line, text};
pub use state::{ClusterState, Subject};

/// Why there is no explanation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The name or the pod is not something to explain (exit 2).
    #[error("{0}")]
    BadInput(String),
    /// The cluster does not answer (exit 3).
    #[error("{0}")]
    Unreachable(String),
    /// The cluster does not serve `resource.k8s.io/v1` (exit 3).
    #[error("{0}")]
    NoDraApi(String),
}

/// Reads the cluster and explains the pod or claim `namespace/name`.
pub async fn explain(client: &kube::Client, namespace: &str, name: &str) -> Result<Explanation, Error> {
    state::check_dra_api(client).await?;
    let subject = state::read_subject(client, namespace, name).await?;
    let cluster = state::read_cluster(client).await?;
    Ok(explain_state(&cluster, &subject))
}
