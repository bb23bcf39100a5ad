//! An emulated node's identity and directories: the kubelet paths of a real node, rooted in
//! the node's own folder so that several nodes and clusters never share a socket.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub name: String,
    /// In 127.0.0.0/8; the node's InternalIP and where its kubelet endpoint listens.
    pub ip: Ipv4Addr,
    pub root: PathBuf,
    /// How long after a plugin unregisters its node's slices are wiped (kubelet: 30 s).
    pub wipe_delay: Duration,
    /// Per NodePrepareResources / NodeUnprepareResources call (kubelet: 45 s).
    pub call_timeout: Duration,
}

impl NodeConfig {
    /// Node `index` (0-based) of a cluster: `node-<index+1>` at 127.0.10.<index+1>.
    pub fn numbered(cluster_dir: &Path, index: usize) -> NodeConfig {
        let n = index + 1;
        NodeConfig {
            name: format!("node-{n}"),
            ip: Ipv4Addr::new(127, 0, 10 + (n / 250) as u8, (n % 250) as u8),
            root: cluster_dir.join("nodes").join(format!("node-{n}")),
            wipe_delay: Duration::from_secs(30),
            call_timeout: Duration::from_secs(45),
        }
    }

    /// The node's dirs as a driver on it sees them.
    pub fn dirs(&self) -> dracheck_adapter::spec::NodeDirs {
        dracheck_adapter::spec::NodeDirs { name: self.name.clone(), root: self.root.clone() }
    }

    /// `plugins_registry`: where drivers put their registration sockets.
    pub fn registry_dir(&self) -> PathBuf {
        self.dirs().registry_dir()
    }
    /// `plugins`: the parent of each driver's own socket dir.
    pub fn plugins_dir(&self) -> PathBuf {
        self.dirs().plugins_dir()
    }
    pub fn cdi_dir(&self) -> PathBuf {
        self.dirs().cdi_dir()
    }
    /// The kubelet's state (the DRA checkpoint).
    pub fn state_dir(&self) -> PathBuf {
        self.root.join("kubelet")
    }
    /// Per-pod working dirs and container logs.
    pub fn pods_dir(&self) -> PathBuf {
        self.root.join("pods")
    }

    pub fn create_dirs(&self) -> std::io::Result<()> {
        for dir in [self.registry_dir(), self.plugins_dir(), self.cdi_dir(), self.state_dir(), self.pods_dir()] {
            std::fs::create_dir_all(dir)?;
        }
        Ok(())
    }
}

/// Removes what `dir` holds, the dir itself stays (created where missing): the tmpfs dirs a
/// node loses in a reboot.
pub fn empty_dir(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() && !path.is_symlink() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(())
}
