//! A recording of a host's GPUs as NVML reports them: what `xtask inventory --driver nvidia
//! --record FILE` writes and what the comparison reads, so the comparison is testable without a
//! GPU.

use serde::{Deserialize, Serialize};

/// Format version of a recording.
pub const FORMAT: u32 = 1;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Recording {
    pub format: u32,
    /// `nvml` when read from a real NVML; anything else (e.g. `synthetic`) marks a recording
    /// that no machine produced.
    pub source: String,
    /// Free text: the host, how it was made.
    #[serde(default)]
    pub note: String,
    pub driver_version: String,
    /// `sys_cuda_driver_version` as NVML returns it, e.g. 12040 for CUDA 12.4.
    pub cuda_driver_version: i32,
    pub gpus: Vec<Gpu>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Gpu {
    pub index: u32,
    /// The device's minor number: the driver names the device `gpu-<minor>`.
    pub minor: u32,
    pub uuid: String,
    pub product_name: String,
    /// `memory_info().total`, bytes.
    pub memory_bytes: u64,
    /// `mig_mode().current == 1`; `None` where the GPU does not support MIG.
    pub mig_enabled: Option<bool>,
    pub cuda_compute_capability: String,
}

impl Recording {
    pub fn is_real(&self) -> bool {
        self.source == "nvml"
    }

    /// `12040` → `12.4`, the form the driver publishes as `cudaDriverVersion` (semver, so
    /// `12.4.0`; see [`crate::compare`]).
    pub fn cuda_version(&self) -> String {
        format!("{}.{}", self.cuda_driver_version / 1000, (self.cuda_driver_version % 1000) / 10)
    }

    pub fn parse(text: &str) -> Result<Recording, String> {
        let r: Recording = serde_json::from_str(text).map_err(|e| format!("not an NVML recording: {e}"))?;
        if r.format != FORMAT {
            return Err(format!("NVML recording format {} is not {FORMAT}; record it again", r.format));
        }
        Ok(r)
    }
}
