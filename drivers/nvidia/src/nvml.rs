//! Reading the host's GPUs from NVML. The library is opened at run time, so a machine without
//! an NVIDIA driver gets [`Unavailable`] and the suite skips with its reason.

use nvml_wrapper::Nvml;
use nvml_wrapper::error::NvmlError;

use crate::record::{FORMAT, Gpu, Recording};

/// Why NVML could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable(pub String);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The skip reason the suite reports where libnvidia-ml cannot be loaded.
pub const NO_NVML: &str = "no NVML on this machine";

fn unavailable(e: NvmlError) -> Unavailable {
    match e {
        NvmlError::LibloadingError(e) => Unavailable(format!("{NO_NVML} ({e})")),
        NvmlError::LibraryNotFound => Unavailable(format!("{NO_NVML} (library not found)")),
        NvmlError::DriverNotLoaded => {
            Unavailable(format!("{NO_NVML}: libnvidia-ml loads but the NVIDIA kernel driver is not loaded"))
        }
        NvmlError::NoPermission => Unavailable(format!("{NO_NVML}: no permission to query NVML")),
        other => Unavailable(format!("NVML failed: {other}")),
    }
}

/// Reads every GPU of this host. Values NVML does not support on a GPU (MIG mode) are `None`.
pub fn read(note: &str) -> Result<Recording, Unavailable> {
    let nvml = Nvml::init().map_err(unavailable)?;
    fn err(what: &'static str) -> impl Fn(NvmlError) -> Unavailable {
        move |e| Unavailable(format!("NVML {what}: {e}"))
    }
    let count = nvml.device_count().map_err(err("device count"))?;
    let mut gpus = Vec::new();
    for i in 0..count {
        let d = nvml.device_by_index(i).map_err(err("device_by_index"))?;
        let cc = d.cuda_compute_capability().map_err(err("cuda_compute_capability"))?;
        let mig_enabled = match d.mig_mode() {
            Ok(m) => Some(m.current == 1),
            Err(NvmlError::NotSupported) => None,
            Err(e) => return Err(err("mig_mode")(e)),
        };
        gpus.push(Gpu {
            index: i,
            minor: d.minor_number().map_err(err("minor_number"))?,
            uuid: d.uuid().map_err(err("uuid"))?,
            product_name: d.name().map_err(err("name"))?,
            memory_bytes: d.memory_info().map_err(err("memory_info"))?.total,
            mig_enabled,
            cuda_compute_capability: format!("{}.{}", cc.major, cc.minor),
        });
    }
    Ok(Recording {
        format: FORMAT,
        source: "nvml".into(),
        note: note.into(),
        driver_version: nvml.sys_driver_version().map_err(err("sys_driver_version"))?,
        cuda_driver_version: nvml.sys_cuda_driver_version().map_err(err("sys_cuda_driver_version"))?,
        gpus,
    })
}
