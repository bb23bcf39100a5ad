//! The state dir of a local cluster: certificates, kubeconfigs, data, logs, and
//! `cluster.json`, the record another process needs to find and stop the cluster.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::process::ProcessRecord;
use crate::error::{ClusterError, Result};

pub const INFO_FILE: &str = "cluster.json";

/// Written as soon as the first process starts and after every further one, so that even a
/// `cluster up` killed halfway leaves what `cluster down` needs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClusterInfo {
    pub kubernetes_version: String,
    pub server: String,
    pub kubeconfig: PathBuf,
    pub feature_gates: String,
    /// Filled once the apiserver answers discovery.
    pub resource_api_versions: Vec<String>,
    pub ready: bool,
    /// Component name → its port on 127.0.0.1.
    pub ports: std::collections::BTreeMap<String, u16>,
    /// In start order.
    pub processes: Vec<ProcessRecord>,
}

impl ClusterInfo {
    pub fn load(state_dir: &Path) -> Result<ClusterInfo> {
        let path = state_dir.join(INFO_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| ClusterError::NoState {
            state_dir: state_dir.to_path_buf(),
            detail: format!("{}: {e}", path.display()),
        })?;
        serde_json::from_str(&text).map_err(|e| ClusterError::NoState {
            state_dir: state_dir.to_path_buf(),
            detail: format!("{} is not a cluster record: {e}", path.display()),
        })
    }

    pub fn save(&self, state_dir: &Path) -> Result<()> {
        let path = state_dir.join(INFO_FILE);
        let tmp = state_dir.join(format!("{INFO_FILE}.tmp"));
        let text = serde_json::to_string_pretty(self).expect("cluster info serializes");
        std::fs::write(&tmp, text).map_err(ClusterError::io(format!("writing {}", tmp.display())))?;
        std::fs::rename(&tmp, &path).map_err(ClusterError::io(format!("writing {}", path.display())))
    }

    /// The first recorded process that is still running.
    pub fn first_alive(&self) -> Option<&ProcessRecord> {
        self.processes.iter().find(|p| p.is_alive())
    }

    /// Stops every recorded process, newest first. Returns the ones that would not die.
    pub fn stop_all(&self, grace: Duration) -> Vec<ProcessRecord> {
        self.processes.iter().rev().filter(|p| !p.stop(grace)).cloned().collect()
    }
}

/// Where the state lives and whether we made the directory.
#[derive(Debug)]
pub struct StateDir {
    path: PathBuf,
}

impl StateDir {
    /// A fresh temporary directory, removed at teardown.
    pub fn temporary() -> Result<StateDir> {
        let dir = tempfile::Builder::new()
            .prefix("dracheck-")
            .tempdir()
            .map_err(ClusterError::io("creating a temporary state dir"))?;
        Ok(StateDir { path: dir.keep() })
    }

    /// A directory the user named. It must be new, empty, or the state of a local cluster
    /// that is no longer running; anything else is refused, because teardown removes it.
    pub fn given(path: &Path) -> Result<StateDir> {
        let path = if path.is_absolute() {
            path.to_path_buf()
        } else {
            std::env::current_dir().map_err(ClusterError::io("reading the current dir"))?.join(path)
        };
        if path.exists() {
            let empty = std::fs::read_dir(&path)
                .map_err(ClusterError::io(format!("reading {}", path.display())))?
                .next()
                .is_none();
            if !empty {
                match ClusterInfo::load(&path) {
                    Ok(info) => {
                        if let Some(p) = info.first_alive() {
                            return Err(ClusterError::AlreadyRunning { state_dir: path, pid: p.pid });
                        }
                        std::fs::remove_dir_all(&path)
                            .map_err(ClusterError::io(format!("clearing the stale state in {}", path.display())))?;
                    }
                    Err(_) => return Err(ClusterError::StateDirNotOurs { state_dir: path }),
                }
            }
        }
        std::fs::create_dir_all(&path).map_err(ClusterError::io(format!("creating {}", path.display())))?;
        Ok(StateDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn remove(&self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
