//! The NVIDIA DRA driver (`gpu.nvidia.com`, chart `dra-driver-nvidia-gpu`) as dracheck checks
//! it: what NVML says the host has ([`record`], [`nvml`]), whether the driver's ResourceSlices
//! agree ([`compare`]), and what a container sees (`nvidia-smi -L`, [`smi`]).

pub mod adapter;
pub mod compare;
pub mod nvml;
pub mod record;
pub mod smi;

/// The driver's DRA driver name.
pub const DRIVER: &str = "gpu.nvidia.com";
/// DeviceClasses the chart installs (`templates/deviceclass-*.yaml`).
pub const GPU_CLASS: &str = "gpu.nvidia.com";
pub const MIG_CLASS: &str = "mig.nvidia.com";
/// The names the driver's image went by, before and after the move to kubernetes-sigs.
pub const PLUGIN_IMAGES: &[&str] = &["k8s-dra-driver-gpu", "dra-driver-nvidia-gpu", "nvidia-dra-driver-gpu"];
pub mod host;

use k8s_openapi::api::resource::v1::DeviceClass;

/// The DeviceClasses the chart installs for GPUs and MIG devices, as it writes them: the
/// driver, and the device `type`.
pub fn device_classes() -> Vec<DeviceClass> {
    [(GPU_CLASS, "gpu"), (MIG_CLASS, "mig")]
        .into_iter()
        .map(|(name, kind)| {
            let by_type = format!("device.attributes[{DRIVER:?}].type == {kind:?}");
            dracheck_objects::device_class(name, DRIVER, &[by_type.as_str()])
        })
        .collect()
}
