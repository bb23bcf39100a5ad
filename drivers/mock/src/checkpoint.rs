//! What this plugin has prepared, on disk, so that a restarted plugin answers prepare as
//! before and can undo claims whose objects are gone (kubelet unprepares by UID only).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dracheck_kubelet_api::dra_v1;
use serde::{Deserialize, Serialize};

use crate::error::DriverError;
use crate::fsutil;

pub const FILE_NAME: &str = "dracheck-mock-checkpoint.json";
const VERSION: &str = "v1";

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    pub version: String,
    /// By claim UID.
    pub claims: BTreeMap<String, PreparedClaim>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PreparedClaim {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub devices: Vec<PreparedDevice>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PreparedDevice {
    pub request_names: Vec<String>,
    pub pool: String,
    pub device: String,
    /// The device's name in the claim's CDI spec.
    pub cdi_name: String,
    pub env_index: usize,
    /// The settings of the opaque configs that apply to it (`config`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub config: crate::config::Settings,
    /// The allocation's share of a device that several claims hold at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_id: Option<String>,
    /// What the share consumes of the device's capacities (the allocation's
    /// `consumedCapacity`), by capacity name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, String>,
}

impl PreparedClaim {
    /// The answer kubelet gets for this claim.
    pub fn response(&self) -> Vec<dra_v1::Device> {
        self.devices
            .iter()
            .map(|d| dra_v1::Device {
                request_names: d.request_names.clone(),
                pool_name: d.pool.clone(),
                device_name: d.device.clone(),
                cdi_device_ids: vec![crate::cdi::device_id(&d.cdi_name)],
                share_id: d.share_id.clone(),
            })
            .collect()
    }
}

#[derive(Debug, Clone)]
pub struct CheckpointFile {
    path: PathBuf,
}

impl CheckpointFile {
    pub fn new(state_dir: &Path) -> CheckpointFile {
        CheckpointFile { path: state_dir.join(FILE_NAME) }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The saved state; none saved yet is an empty one.
    pub fn load(&self) -> Result<Checkpoint, DriverError> {
        let bad = |detail: String| DriverError::Checkpoint { path: self.path.clone(), detail };
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Checkpoint { version: VERSION.into(), ..Checkpoint::default() });
            }
            Err(e) => return Err(bad(e.to_string())),
        };
        let checkpoint: Checkpoint = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        if checkpoint.version != VERSION {
            return Err(bad(format!("version {:?}, this plugin writes {VERSION:?}", checkpoint.version)));
        }
        Ok(checkpoint)
    }

    /// An exclusive lock on the checkpoint across processes, held until dropped: the instances
    /// of a rolling update share the file, and each call reads it, changes it and writes it
    /// back under this lock.
    pub async fn lock(&self) -> std::io::Result<CheckpointLock> {
        let path = self.path.with_extension("lock");
        let locked = tokio::task::spawn_blocking(move || {
            use std::os::fd::AsRawFd as _;
            let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path)?;
            // SAFETY: the descriptor belongs to `file`, which outlives the call.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(CheckpointLock { _file: file })
        });
        locked.await.map_err(std::io::Error::other)?
    }

    pub fn save(&self, checkpoint: &Checkpoint) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(checkpoint).map_err(std::io::Error::other)?;
        fsutil::write_atomic(&self.path, &bytes)
    }

    pub fn delete(&self) -> std::io::Result<()> {
        fsutil::remove_if_exists(&self.path)
    }
}

/// Closing the file releases the `flock`.
pub struct CheckpointLock {
    _file: std::fs::File,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_checkpoint_loads_back_and_a_corrupt_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = CheckpointFile::new(dir.path());
        assert!(file.load().unwrap().claims.is_empty());
        let mut cp = file.load().unwrap();
        cp.claims.insert(
            "u1".into(),
            PreparedClaim {
                namespace: "ns".into(),
                name: "c".into(),
                uid: "u1".into(),
                devices: vec![PreparedDevice {
                    request_names: vec!["req".into()],
                    pool: "n".into(),
                    device: "gpu-0".into(),
                    cdi_name: "u1-gpu-0".into(),
                    env_index: 0,
                    config: [("mode".to_string(), "watch".to_string())].into(),
                    share_id: Some("5ba7e3c0-8f1d-4c2a-9b3e-00000000000a".into()),
                    capacity: [("memory".to_string(), "4Gi".to_string())].into(),
                }],
            },
        );
        file.save(&cp).unwrap();
        assert_eq!(file.load().unwrap(), cp);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temp file is left behind");
        std::fs::write(file.path(), "{\"version\": \"v1\", \"claims\": {").unwrap();
        let e = file.load().unwrap_err().to_string();
        assert!(e.contains(FILE_NAME), "{e}");
    }
}
