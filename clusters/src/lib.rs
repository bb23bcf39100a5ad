//! Cluster providers for dracheck. `local` is the embedded default: real upstream control-plane
//! binaries on loopback, built from their Go modules and cached.

pub mod error;
/// Programs built from upstream Go modules (its own crate: Go-written drivers build with it too).
pub use dracheck_gobuild as gobuild;
pub mod helm;
pub mod k3s;
pub mod kind;
pub mod local;
pub mod oci;
pub mod reach;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tools;

pub use error::{ClusterError, Failure};
pub use local::{LocalCluster, LocalClusterOptions};
