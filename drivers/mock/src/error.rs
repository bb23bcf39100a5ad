//! Start-up errors. Each is one paragraph for the person at the terminal, and maps to the
//! suite's exit codes: 2 for bad input, 3 for a cluster that cannot be reached.

use std::path::PathBuf;

use dracheck_kubelet_api::SocketError;

use crate::inventory::InventoryError;

pub const EXIT_BAD_INPUT: i32 = 2;
pub const EXIT_CLUSTER_UNREACHABLE: i32 = 3;

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
    pub fn exit_code(&self) -> i32 {
        match self {
            DriverError::Unreachable { .. } | DriverError::NoDraApi { .. } => EXIT_CLUSTER_UNREACHABLE,
            DriverError::Serve(_) => 1,
            _ => EXIT_BAD_INPUT,
        }
    }
}
