//! The kubelet's side of Dynamic Resource Allocation as gRPC over Unix sockets: the DRA plugin
//! service (`v1` and the wire-identical `v1beta1`) and the plugin registration service, plus
//! the socket plumbing both ends need.
//!
//! Kubelet discovers a plugin through a socket in its plugin registry directory
//! (`Registration`), then calls `DRAPlugin` on the endpoint that `GetInfo` names.

pub mod authority;
pub mod kubelet;
mod socket;

pub use socket::{SUN_PATH_MAX, SocketError, UnixSocket, connect_unix, connect_unix_as_plugin_watcher};

/// `k8s.io.kubelet.pkg.apis.dra.v1`: `DRAPlugin` as served since Kubernetes 1.34.
pub mod dra_v1 {
    tonic::include_proto!("k8s.io.kubelet.pkg.apis.dra.v1");
}

/// `k8s.io.kubelet.pkg.apis.dra.v1beta1`: the same messages under the older package, which
/// kubelets before 1.34 call and newer ones fall back to.
pub mod dra_v1beta1 {
    tonic::include_proto!("k8s.io.kubelet.pkg.apis.dra.v1beta1");
}

/// `pluginregistration`: how a plugin introduces itself to kubelet.
pub mod registration {
    tonic::include_proto!("pluginregistration");
}

/// `v1`: the optional `DRAResourceHealth` service through which a plugin streams the health of
/// its devices (Kubernetes 1.37; ResourceHealthStatus, beta).
pub mod health_v1 {
    tonic::include_proto!("v1");
}

/// `v1alpha1`: the same messages under the package 1.36's kubelet calls.
pub mod health_v1alpha1 {
    tonic::include_proto!("v1alpha1");
}

/// `PluginInfo.supported_versions` entries of the health service: a plugin lists them beside
/// its DRA service, and a 1.37 kubelet watches health only where one is listed (newest first).
pub const HEALTH_V1_SERVICE: &str = "v1.DRAResourceHealth";
pub const HEALTH_V1ALPHA1_SERVICE: &str = "v1alpha1.DRAResourceHealth";

/// `PluginInfo.supported_versions` entry for the v1 DRA service (a gRPC service name, not an
/// API version).
pub const DRA_V1_SERVICE: &str = "v1.DRAPlugin";
/// `PluginInfo.supported_versions` entry for the v1beta1 DRA service.
pub const DRA_V1BETA1_SERVICE: &str = "v1beta1.DRAPlugin";
/// `PluginInfo.type` of a DRA plugin.
pub const DRA_PLUGIN_TYPE: &str = "DRAPlugin";

/// Converts a message between packages that share a wire format (v1 and v1beta1) by
/// re-encoding it, so one implementation can serve both services without field-by-field
/// copies that could drift.
pub fn rewire<B: prost::Message + Default>(message: &impl prost::Message) -> Result<B, prost::DecodeError> {
    B::decode(message.encode_to_vec().as_slice())
}
