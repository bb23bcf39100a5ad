//! CDI spec files: how the container runtime turns the CDI device IDs that prepare returns
//! into container edits. One spec per claim, so unprepare removes exactly that claim's file.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::checkpoint::PreparedClaim;
use crate::fsutil;

/// The CDI version whose features the spec uses (env edits only; 0.6.0 is widely supported).
pub const CDI_VERSION: &str = "0.6.0";

/// The default prefix of the environment variables the specs set.
pub const DEFAULT_ENV_PREFIX: &str = "DRACHECK_MOCK";

/// How this process names its CDI devices and their variables. One mock process is one driver,
/// so this is set once at start-up ([`configure`]); a second mock under another driver name on
/// the same node must differ in both, or the container runtime would find one spec file for
/// two drivers and one variable set twice.
struct Naming {
    /// `<vendor>/<class>`.
    kind: String,
    env_prefix: String,
}

static NAMING: std::sync::OnceLock<Naming> = std::sync::OnceLock::new();

fn naming() -> &'static Naming {
    NAMING.get_or_init(|| Naming { kind: kind_of(crate::cli::DEFAULT_DRIVER), env_prefix: DEFAULT_ENV_PREFIX.into() })
}

/// Sets this process's naming from its driver name and `--env-prefix`; the first call wins.
pub fn configure(driver_name: &str, env_prefix: &str) {
    let _ = NAMING.set(Naming { kind: kind_of(driver_name), env_prefix: env_prefix.into() });
}

/// The CDI kind of a driver: its name's first label as the class, the rest as the vendor
/// (`gpu.mock.dracheck.io` → `mock.dracheck.io/gpu`); a name of one label is a class of ours.
pub fn kind_of(driver_name: &str) -> String {
    match driver_name.split_once('.') {
        Some((class, vendor)) if !vendor.is_empty() => format!("{vendor}/{class}"),
        _ => format!("mock.dracheck.io/{driver_name}"),
    }
}

/// `<vendor>/<class>` of every device this process hands out.
pub fn kind() -> &'static str {
    &naming().kind
}

/// The fully qualified CDI device ID of a device name in our spec.
pub fn device_id(name: &str) -> String {
    format!("{}={name}", kind())
}

pub fn spec_path(dir: &Path, claim_uid: &str) -> PathBuf {
    dir.join(format!("{}_{claim_uid}.json", kind().replace('/', "-")))
}

/// Environment variable of a device: its position in the node's inventory, so that several
/// claims injected into one container never overwrite each other's device variables.
pub fn device_env(index: usize, device: &str) -> String {
    format!("{}={device}", device_var(&naming().env_prefix, index))
}

/// `<prefix>_DEVICE_<index>`: the variable that names a prepared device.
pub fn device_var(prefix: &str, index: usize) -> String {
    format!("{prefix}_DEVICE_{index}")
}

/// The name of the environment variable of a setting of a device's opaque configuration (see
/// `config`).
pub fn config_var(index: usize, name: &str) -> String {
    format!("{}_CONFIG_{index}_{name}", naming().env_prefix)
}

/// `<prefix>_CLAIM_UID=<uid>`, which every container that uses a claim of ours carries.
pub fn claim_uid_env(uid: &str) -> String {
    format!("{}_CLAIM_UID={uid}", naming().env_prefix)
}

fn config_env(index: usize, name: &str, value: &str) -> String {
    format!("{}={value}", config_var(index, name))
}

/// `<prefix>_SHARE_<index>`: the share ID of a prepared share of a device.
pub fn share_var(prefix: &str, index: usize) -> String {
    format!("{prefix}_SHARE_{index}")
}

/// `<prefix>_CAPACITY_<index>_<name>`: what a share of a device may use of its capacity
/// `name` (characters a variable name cannot hold as `_`).
pub fn capacity_var(prefix: &str, index: usize, name: &str) -> String {
    let name: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    format!("{prefix}_CAPACITY_{index}_{name}")
}

/// A share's variables: its ID and what it may use of each capacity, so that the workload
/// (a process limiting itself to its share of a GPU's memory) knows its limits.
fn share_env(d: &crate::checkpoint::PreparedDevice) -> Vec<String> {
    let prefix = &naming().env_prefix;
    let id = d.share_id.iter().map(|id| format!("{}={id}", share_var(prefix, d.env_index)));
    let capacity = d.capacity.iter().map(|(name, q)| format!("{}={q}", capacity_var(prefix, d.env_index, name)));
    id.chain(capacity).collect()
}

pub fn spec(claim: &PreparedClaim) -> serde_json::Value {
    let devices: Vec<_> = claim
        .devices
        .iter()
        .map(|d| {
            let settings = d.config.iter().map(|(name, value)| config_env(d.env_index, name, value));
            let env: Vec<String> =
                std::iter::once(device_env(d.env_index, &d.device)).chain(settings).chain(share_env(d)).collect();
            json!({ "name": d.cdi_name, "containerEdits": { "env": env } })
        })
        .collect();
    let names: Vec<&str> = claim.devices.iter().map(|d| d.device.as_str()).collect();
    let prefix = &naming().env_prefix;
    json!({
        "cdiVersion": CDI_VERSION,
        "kind": kind(),
        "devices": devices,
        "containerEdits": {
            "env": [
                format!("{prefix}_DEVICES={}", names.join(",")),
                format!("{prefix}_CLAIM={}/{}", claim.namespace, claim.name),
                claim_uid_env(&claim.uid),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drivers_cdi_kind_follows_its_name() {
        assert_eq!(kind_of(crate::cli::DEFAULT_DRIVER), "mock.dracheck.io/gpu");
        assert_eq!(kind_of("nic.companion.dracheck.io"), "companion.dracheck.io/nic");
        assert_eq!(kind_of("plain"), "mock.dracheck.io/plain");
    }

    #[test]
    fn a_second_mock_reads_its_own_variables_only() {
        let log = "DRACHECK_MOCK_DEVICE_0=gpu-0\nDRACHECK_MOCK_DEVICES=gpu-0\nDRACHECK_COMPANION_DEVICE_1=nic-1\n";
        assert_eq!(crate::adapter::seen_devices(log), ["gpu-0"]);
        assert_eq!(crate::adapter::seen_devices_with("DRACHECK_COMPANION", log), ["nic-1"]);
        assert_eq!(device_var("DRACHECK_COMPANION", 1), "DRACHECK_COMPANION_DEVICE_1");
    }
}
