//! The NVIDIA DRA driver as the suite knows it, installed in a cluster (its chart or a
//! pre-installed driver): the suite cannot start its kubelet plugin (it needs the GPUs and the
//! container toolkit of a real node), so the plugin tier is skipped; its inventory is checked
//! against NVML for the node that is this machine, and workloads run `nvidia-smi -L`, which
//! must list exactly the UUIDs of the allocated GPUs.

use std::sync::Arc;

use dracheck_adapter::{Adapter, DeviceKey, UNKNOWN_VERSION, Workload};

use crate::host::HostView;

#[derive(Clone, Debug)]
pub struct Options {
    pub host: HostView,
    /// The workloads' image; the chart's CDI spec mounts `nvidia-smi` into it.
    pub image: String,
    /// The command that lists the container's GPUs.
    pub smi: String,
    /// The installed driver's version, where known.
    pub version: Option<String>,
}

/// The image the NVIDIA driver's own examples run `nvidia-smi -L` in.
pub const WORKLOAD_IMAGE: &str = "ubuntu:24.04";

impl Default for Options {
    fn default() -> Self {
        Options { host: Default::default(), image: WORKLOAD_IMAGE.into(), smi: "nvidia-smi".into(), version: None }
    }
}

pub fn adapter(opts: Options) -> Adapter {
    let host = opts.host;
    Adapter {
        short: "nvidia",
        name: crate::DRIVER.into(),
        spec: None,
        version: opts.version.unwrap_or_else(|| UNKNOWN_VERSION.into()),
        oracle: None,
        counter_oracle: None,
        canonical: |d| d,
        workload: Workload {
            image: opts.image,
            show: format!("{} -L", opts.smi),
            seen: Some(crate::smi::uuids),
            key: DeviceKey::Attribute("uuid"),
            // The NVIDIA driver's configs (sharing, MPS) show in no command a workload can run
            // portably; the `config` family is skipped for it.
            config: None,
            // Time-slicing and MPS shares show no share ID in a container.
            shares: None,
        },
        device_classes: crate::device_classes(),
        // Its chart's: read from its plugin's pods (`--driver-pods`).
        installation: None,
        host_inventory: Some(Arc::new(move |published| host.check(published))),
        change_inventory: None,
        mark_unhealthy: None,
        set_health: None,
        // Installed by its chart: a rolling update is its DaemonSet's, which the suite leaves alone.
        instance_args: None,
        plugin_images: crate::PLUGIN_IMAGES,
    }
}
