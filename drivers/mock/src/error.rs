//! Start-up errors. Each is one paragraph for the person at the terminal, and says what kind of
//! failure it is; the program's `main` gives each kind its exit code (README.md lists them).

use std::path::PathBuf;

use dracheck_kubelet_api::SocketError;

use crate::inventory::InventoryError;

/// What kind of failure a [`DriverError`] is. The library says only this; the exit code of
/// each kind is chosen by the program's `main`, as dracheck's are by its command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Bad input: flags, inventory, checkpoint, directories, socket paths.
    BadInput,
    /// The apiserver cannot be reached or does not serve `resource.k8s.io/v1`.
    ClusterUnreachable,
    /// Serving failed after a good start.
    ServeFailed,
}

#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error(transparent)]
    Inventory(#[from] InventoryError),

    #[error(
        "the checkpoint {path} is unreadable ({detail}). It holds the claims this plugin prepared; \
         move it away to start from an empty state (claims prepared earlier are then not unprepared)."
    )]
    Checkpoint { path: PathBuf, detail: String },

    #[error("cannot create the {what} directory {path}: {source}. Pass a writable --{flag}.")]
    Dir {
        what: &'static str,
        flag: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("cannot serve the {what} socket: {source}. Pass a writable, short enough --{flag}.")]
    Socket {
        what: &'static str,
        flag: &'static str,
        #[source]
        source: SocketError,
    },

    #[error(
        "no usable kubeconfig: {detail}. Pass --kubeconfig PATH, set KUBECONFIG, or run the plugin in a pod \
         with a service account."
    )]
    Kubeconfig { detail: String },

    #[error(
        "cannot reach the Kubernetes apiserver at {server}: {detail}. The plugin reads claims and publishes \
         ResourceSlices there; check that the cluster is up and that --kubeconfig points at it."
    )]
    Unreachable { server: String, detail: String },

    #[error(
        "the apiserver at {server} does not serve resource.k8s.io/v1 ResourceSlices ({detail}). This driver \
         needs Kubernetes 1.34 or newer with the DRA API enabled."
    )]
    NoDraApi { server: String, detail: String },

    #[error("serving gRPC stopped: {0}")]
    Serve(SocketError),
}

impl DriverError {
    /// What kind of failure this is; `main` turns it into the exit code.
    pub fn failure(&self) -> Failure {
        match self {
            DriverError::Unreachable { .. } | DriverError::NoDraApi { .. } => Failure::ClusterUnreachable,
            DriverError::Serve(_) => Failure::ServeFailed,
            _ => Failure::BadInput,
        }
    }
}
