//! NVML's view of a host against the devices the driver published for that node.
//!
//! Attribute names follow the driver's `cmd/gpu-kubelet-plugin/deviceinfo.go`: `type` (`gpu` or
//! `mig`), `uuid`, `productName`, `driverVersion`, `cudaDriverVersion` (both version-typed),
//! capacity `memory` in bytes; MIG devices carry `parentUUID`. Device names are `gpu-<minor>`.
//! Not checked: which devices the driver publishes for a GPU in MIG mode besides its MIG
//! devices; that depends on the driver release and its `DynamicMIG` gate. The rule here is only
//! the one every release keeps: a GPU in MIG mode has MIG devices with its `parentUUID`, a GPU
//! not in MIG mode has none.

use std::collections::BTreeMap;

use dracheck_objects::published;
use dracheck_objects::quantity::Quantity;
use k8s_openapi::api::resource::v1::{Device, DeviceAttribute};

use crate::DRIVER;
use crate::record::Recording;

/// One disagreement between NVML and the published devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mismatch {
    /// NVML has the GPU, no published device carries its UUID.
    Missing {
        uuid: String,
        minor: u32,
    },
    /// `gpu-<minor>` is published with another UUID.
    WrongUuid {
        device: String,
        published: String,
        nvml: String,
    },
    /// A published GPU NVML does not know.
    Unknown {
        device: String,
        uuid: String,
    },
    Attribute {
        device: String,
        name: &'static str,
        published: String,
        nvml: String,
    },
    Memory {
        device: String,
        published: Option<u64>,
        nvml: u64,
    },
    Mig {
        device: String,
        nvml_enabled: bool,
        published_mig_devices: usize,
    },
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::Missing { uuid, minor } => write!(f, "GPU {uuid} (minor {minor}) is not published"),
            Mismatch::WrongUuid { device, published, nvml } => {
                write!(f, "{device}: published uuid {published}, NVML says {nvml}")
            }
            Mismatch::Unknown { device, uuid } => write!(f, "{device} ({uuid}) is published but NVML has no such GPU"),
            Mismatch::Attribute { device, name, published, nvml } => {
                write!(f, "{device}: {name} published {published:?}, NVML says {nvml:?}")
            }
            Mismatch::Memory { device, published, nvml } => match published {
                Some(p) => write!(f, "{device}: capacity memory published {p} bytes, NVML says {nvml}"),
                None => write!(f, "{device}: no capacity memory published, NVML says {nvml} bytes"),
            },
            Mismatch::Mig { device, nvml_enabled, published_mig_devices } => write!(
                f,
                "{device}: NVML says MIG mode is {}, but {published_mig_devices} MIG device(s) are published for it",
                if *nvml_enabled { "on" } else { "off" }
            ),
        }
    }
}

/// A published attribute, by its plain name or qualified with the driver's domain.
pub fn attribute(d: &Device, name: &str) -> Option<String> {
    published::attribute(d, DRIVER, name).map(published::attribute_value)
}

/// The `memory` capacity in bytes.
pub fn memory(d: &Device) -> Option<u64> {
    let caps = d.capacity.as_ref()?;
    let c = caps.get("memory").or_else(|| caps.get(&format!("{DRIVER}/memory")))?;
    quantity_bytes(&c.value.0)
}

/// A Kubernetes quantity as a whole, non-negative number (bytes): `40Gi`, `42949672960`,
/// `1.5Gi`; `None` for junk, fractions, negatives and values beyond u64.
pub fn quantity_bytes(q: &str) -> Option<u64> {
    Quantity::parse(q.trim()).ok()?.to_i128().and_then(|v| u64::try_from(v).ok())
}

/// Versions are published semver-normalised (`12.4` → `12.4.0`): compare on that form.
/// `12.4` → `12.4.0`: DRA version attributes are semantic versions of three parts.
fn semver(v: &str) -> String {
    let mut parts: Vec<&str> = v.trim().split('.').collect();
    while parts.len() < 3 {
        parts.push("0");
    }
    parts.join(".")
}

fn same_version(published: &str, nvml: &str) -> bool {
    let norm = |v: &str| {
        let mut parts: Vec<&str> = v.trim().split('.').collect();
        while parts.len() < 3 {
            parts.push("0");
        }
        parts.iter().map(|p| p.trim_start_matches('0').to_string()).collect::<Vec<_>>()
    };
    norm(published) == norm(nvml)
}

/// Every disagreement between `nvml` and the devices published for its node (all pools of the
/// driver on that node).
pub fn compare(nvml: &Recording, published: &[Device]) -> Vec<Mismatch> {
    let kind = |d: &Device| attribute(d, "type").unwrap_or_else(|| "gpu".into());
    let gpus: BTreeMap<String, &Device> =
        published.iter().filter(|d| kind(d) == "gpu").filter_map(|d| attribute(d, "uuid").map(|u| (u, d))).collect();
    let mut out = Vec::new();
    for g in &nvml.gpus {
        let name = format!("gpu-{}", g.minor);
        let migs = published
            .iter()
            .filter(|d| kind(d) == "mig" && attribute(d, "parentUUID").as_deref() == Some(g.uuid.as_str()))
            .count();
        let mig_on = g.mig_enabled == Some(true);
        if mig_on != (migs > 0) {
            out.push(Mismatch::Mig { device: name.clone(), nvml_enabled: mig_on, published_mig_devices: migs });
        }
        let Some(d) = gpus.get(&g.uuid) else {
            if let Some(other) = published.iter().find(|d| d.name == name && kind(d) == "gpu") {
                out.push(Mismatch::WrongUuid {
                    device: name,
                    published: attribute(other, "uuid").unwrap_or_default(),
                    nvml: g.uuid.clone(),
                });
            } else if !mig_on {
                // A GPU in MIG mode may be published only through its MIG devices.
                out.push(Mismatch::Missing { uuid: g.uuid.clone(), minor: g.minor });
            }
            continue;
        };
        let mut attr = |attr_name: &'static str, want: &str, version: bool| {
            let got = attribute(d, attr_name).unwrap_or_default();
            let same = if version { same_version(&got, want) } else { got == want };
            if !same {
                out.push(Mismatch::Attribute {
                    device: d.name.clone(),
                    name: attr_name,
                    published: got,
                    nvml: want.to_string(),
                });
            }
        };
        attr("productName", &g.product_name, false);
        attr("driverVersion", &nvml.driver_version, true);
        attr("cudaDriverVersion", &nvml.cuda_version(), true);
        attr("cudaComputeCapability", &g.cuda_compute_capability, true);
        let mem = memory(d);
        if mem != Some(g.memory_bytes) {
            out.push(Mismatch::Memory { device: d.name.clone(), published: mem, nvml: g.memory_bytes });
        }
    }
    for (uuid, d) in &gpus {
        if !nvml.gpus.iter().any(|g| &g.uuid == uuid)
            && !out.iter().any(|m| matches!(m, Mismatch::WrongUuid { device, .. } if device == &d.name))
        {
            out.push(Mismatch::Unknown { device: d.name.clone(), uuid: uuid.clone() });
        }
    }
    out
}

/// The devices NVML says the driver should publish, as the suite's inventory oracle: one
/// `gpu-<minor>` per GPU not in MIG mode, with the attributes NVML can vouch for.
pub fn expected_devices(nvml: &Recording) -> Vec<Device> {
    use k8s_openapi::api::resource::v1::DeviceCapacity;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let s = |v: &str| DeviceAttribute { string: Some(v.into()), ..Default::default() };
    let ver = |v: &str| DeviceAttribute { version: Some(semver(v)), ..Default::default() };
    nvml.gpus
        .iter()
        .filter(|g| g.mig_enabled != Some(true))
        .map(|g| Device {
            name: format!("gpu-{}", g.minor),
            attributes: Some(BTreeMap::from([
                ("type".into(), s("gpu")),
                ("uuid".into(), s(&g.uuid)),
                ("productName".into(), s(&g.product_name)),
                ("driverVersion".into(), ver(&nvml.driver_version)),
                ("cudaDriverVersion".into(), ver(&nvml.cuda_version())),
                ("cudaComputeCapability".into(), ver(&g.cuda_compute_capability)),
            ])),
            capacity: Some(BTreeMap::from([(
                "memory".into(),
                DeviceCapacity { value: Quantity(g.memory_bytes.to_string()), ..Default::default() },
            )])),
            ..Default::default()
        })
        .collect()
}
