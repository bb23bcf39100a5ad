//! The NVIDIA DRA driver (`gpu.nvidia.com`, chart `dra-driver-nvidia-gpu`) as dracheck checks
//! it: what NVML says the host has ([`record`], [`nvml`]), whether the driver's ResourceSlices
//! agree ([`compare`]), and what a container sees (`nvidia-smi -L`, [`smi`]).

pub mod compare;
pub mod nvml;
pub mod record;
pub mod smi;

/// The driver's DRA driver name.
pub const DRIVER: &str = "gpu.nvidia.com";
/// DeviceClasses the chart installs (`templates/deviceclass-*.yaml`).
pub const GPU_CLASS: &str = "gpu.nvidia.com";
pub const MIG_CLASS: &str = "mig.nvidia.com";
