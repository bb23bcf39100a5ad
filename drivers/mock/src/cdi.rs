//! CDI spec files: how the container runtime turns the CDI device IDs that prepare returns
//! into container edits. One spec per claim, so unprepare removes exactly that claim's file.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::checkpoint::PreparedClaim;
use crate::fsutil;

/// `<vendor>/<class>` of every device the mock driver hands out.
pub const KIND: &str = "mock.dracheck.io/gpu";
/// The CDI version whose features the spec uses (env edits only; 0.6.0 is widely supported).
pub const CDI_VERSION: &str = "0.6.0";

/// The fully qualified CDI device ID of a device name in our spec.
pub fn device_id(name: &str) -> String {
    format!("{KIND}={name}")
}

pub fn spec_path(dir: &Path, claim_uid: &str) -> PathBuf {
    dir.join(format!("{}_{claim_uid}.json", KIND.replace('/', "-")))
}

/// Environment variable of a device: its position in the node's inventory, so that several
/// claims injected into one container never overwrite each other's device variables.
pub fn device_env(index: usize, device: &str) -> String {
    format!("DRACHECK_MOCK_DEVICE_{index}={device}")
}

/// The name of the environment variable of a setting of a device's opaque configuration (see
/// `config`).
pub fn config_var(index: usize, name: &str) -> String {
    format!("DRACHECK_MOCK_CONFIG_{index}_{name}")
}

fn config_env(index: usize, name: &str, value: &str) -> String {
    format!("{}={value}", config_var(index, name))
}

pub fn spec(claim: &PreparedClaim) -> serde_json::Value {
    let devices: Vec<_> = claim
        .devices
        .iter()
        .map(|d| {
            let settings = d.config.iter().map(|(name, value)| config_env(d.env_index, name, value));
            let env: Vec<String> = std::iter::once(device_env(d.env_index, &d.device)).chain(settings).collect();
            json!({ "name": d.cdi_name, "containerEdits": { "env": env } })
        })
        .collect();
    let names: Vec<&str> = claim.devices.iter().map(|d| d.device.as_str()).collect();
    json!({
        "cdiVersion": CDI_VERSION,
        "kind": KIND,
        "devices": devices,
        "containerEdits": {
            "env": [
                format!("DRACHECK_MOCK_DEVICES={}", names.join(",")),
                format!("DRACHECK_MOCK_CLAIM={}/{}", claim.namespace, claim.name),
                format!("DRACHECK_MOCK_CLAIM_UID={}", claim.uid),
            ]
        }
    })
}

pub fn write(dir: &Path, claim: &PreparedClaim) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(&spec(claim)).map_err(std::io::Error::other)?;
    fsutil::write_atomic(&spec_path(dir, &claim.uid), &bytes)
}

pub fn remove(dir: &Path, claim_uid: &str) -> std::io::Result<()> {
    fsutil::remove_if_exists(&spec_path(dir, claim_uid))
}
