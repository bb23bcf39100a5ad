//! The inventory check of an installed NVIDIA driver: NVML sees only the GPUs of the machine it
//! runs on, so the published devices are checked for the one node that is this machine.

use std::collections::BTreeMap;
use std::path::PathBuf;

use dracheck_adapter::HostCheck;
use k8s_openapi::api::resource::v1::Device;

use crate::compare;
use crate::record::Recording;

/// Where the NVML view comes from and which node it describes.
#[derive(Clone, Debug, Default)]
pub struct HostView {
    /// A recording (`cargo xtask inventory --driver nvidia --record FILE`) instead of this
    /// machine's NVML.
    pub recording: Option<PathBuf>,
    /// The node the view describes; default: this machine's host name.
    pub node: Option<String>,
}

impl HostView {
    fn read(&self) -> Result<Recording, String> {
        match &self.recording {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read the NVML recording {}: {e}", path.display()))?;
                Recording::parse(&text)
            }
            None => crate::nvml::read("").map_err(|e| e.0),
        }
    }

    fn node(&self) -> String {
        self.node.clone().or_else(host_name).unwrap_or_else(|| "(unknown host name)".into())
    }

    /// Compares the view with the devices published for its node (`published`: node → the
    /// driver's devices there); it cannot be made here without NVML (or a recording), or where
    /// no node of the cluster is this machine.
    pub fn check(&self, published: &BTreeMap<String, Vec<Device>>) -> HostCheck {
        let node = self.node();
        let Some(devices) = published.get(&node) else {
            let nodes: Vec<&String> = published.keys().collect();
            return HostCheck::CannotCheck(format!(
                "NVML sees only the GPUs of the machine it runs on, and this machine ({node}) is none of the nodes \
                 the driver publishes for ({nodes:?}); run dracheck on a GPU node, or `{program} inventory \
                 --driver nvidia` there",
                program = dracheck_adapter::program::name()
            ));
        };
        let nvml = match self.read() {
            Ok(nvml) => nvml,
            Err(why) => return HostCheck::CannotCheck(why),
        };
        let mismatches = compare::compare(&nvml, devices);
        let source = if nvml.is_real() { "NVML" } else { "the NVML recording" };
        if mismatches.is_empty() {
            HostCheck::Matches(format!(
                "node {node}: {} GPU(s) published as {source} reports them (UUID, product, memory, MIG mode, driver and CUDA versions)",
                nvml.gpus.len()
            ))
        } else {
            HostCheck::Differs(format!(
                "node {node} against {source}: {}",
                mismatches.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
            ))
        }
    }
}

/// This machine's host name, which a kubelet takes as its node name by default.
pub fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|h| h.trim().to_string()).filter(|h| !h.is_empty())
}
