//! A node of the local cluster, whichever kind it is: what the suite may do with a node
//! (restart its kubelet, remove it, read its kubelet's log and checkpoint) is the same for
//! both, and each kind does it the way its kubelet does.

use std::path::PathBuf;

use super::node::{EmulatedNode, NodeConfig};
use super::real::RealNode;
use crate::error::Result;

/// Deletes the Node object of a removed node; the garbage collector then removes its slices
/// and the pod GC its pods.
pub(crate) async fn delete_node(client: &kube::Client, name: &str) -> Result<()> {
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
    nodes
        .delete(name, &kube::api::DeleteParams::default())
        .await
        .map_err(crate::error::ClusterError::kube(format!("deleting node {name}")))?;
    Ok(())
}

pub enum LocalNode {
    Emulated(EmulatedNode),
    Real(RealNode),
}

impl LocalNode {
    pub fn name(&self) -> &str {
        match self {
            LocalNode::Emulated(n) => n.name(),
            LocalNode::Real(n) => n.name(),
        }
    }

    pub fn config(&self) -> &NodeConfig {
        match self {
            LocalNode::Emulated(n) => n.config(),
            LocalNode::Real(n) => n.config(),
        }
    }

    /// The kubelet's log (the emulated node's own log of the same events).
    pub fn log_path(&self) -> PathBuf {
        match self {
            LocalNode::Emulated(n) => n.log_path(),
            LocalNode::Real(n) => n.log_path(),
        }
    }

    /// The last `lines` lines of the kubelet's log that concern DRA (a real kubelet logs
    /// much else: its housekeeping would crowd out the evidence).
    pub fn log_tail(&self, lines: usize) -> String {
        match self {
            LocalNode::Emulated(n) => crate::error::log_tail(&n.log_path(), lines),
            LocalNode::Real(n) => n.log_tail(lines),
        }
    }

    /// The kubelet's DRA checkpoint: claim UID → CDI device IDs.
    pub fn prepared_claims(&self) -> Vec<(String, Vec<String>)> {
        match self {
            LocalNode::Emulated(n) => n.prepared_claims(),
            LocalNode::Real(n) => n.prepared_claims(),
        }
    }

    /// The DRA drivers registered with the kubelet now.
    pub fn registered_drivers(&self) -> Vec<String> {
        match self {
            LocalNode::Emulated(n) => n.registered_drivers(),
            LocalNode::Real(n) => n.registered_drivers(),
        }
    }

    /// The DRA sockets of the plugin instances the kubelet has registered, by driver.
    pub fn registered_endpoints(&self) -> Vec<(String, std::path::PathBuf)> {
        match self {
            LocalNode::Emulated(n) => n.registered_endpoints(),
            LocalNode::Real(n) => n.registered_endpoints(),
        }
    }

    /// A node restart: the kubelet stops and starts again; containers keep running.
    pub async fn restart_kubelet(&mut self) -> Result<()> {
        match self {
            LocalNode::Emulated(n) => n.restart_kubelet().await,
            LocalNode::Real(n) => n.restart_kubelet().await,
        }
    }

    /// A node reboot: everything on the node stops at once, its tmpfs (the CDI spec dir) is
    /// lost, its disk (the kubelet's checkpoint) is kept, and it boots again.
    pub async fn reboot(&mut self) -> Result<()> {
        match self {
            LocalNode::Emulated(n) => n.reboot().await,
            LocalNode::Real(n) => n.reboot().await,
        }
    }

    /// Imports an image archive into the node's container runtime; emulated nodes run no
    /// images, so they are refused with the way to real nodes.
    pub async fn import_image(&self, archive: &std::path::Path) -> Result<()> {
        match self {
            LocalNode::Emulated(n) => Err(crate::error::ClusterError::RealNodesNeeded {
                what: format!("importing the image {} into node {}", archive.display(), n.name()),
            }),
            LocalNode::Real(n) => n.import_image(archive).await,
        }
    }

    /// Node removal: everything on the node stops and its Node object is deleted.
    pub async fn remove(self) -> Result<()> {
        match self {
            LocalNode::Emulated(n) => n.remove().await,
            LocalNode::Real(n) => n.remove().await,
        }
    }
}
