//! Driver adapters: how each driver's kubelet plugin is started on an emulated node, i.e. which
//! of its flags take the node's name, registry, plugin and CDI dirs and the kubeconfig.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dracheck_clusters::local::DriverSpec;
use k8s_openapi::api::resource::v1::{Device, DeviceClass};

/// The devices a driver should publish for a node.
pub type Oracle = Arc<dyn Fn(&str) -> Result<Vec<Device>, OracleError> + Send + Sync>;

/// The inventory oracle has no answer for a node (e.g. the inventory file lacks it).
#[derive(Debug, thiserror::Error)]
#[error("the driver's inventory has no devices for node {node}: {source}")]
pub struct OracleError {
    pub node: String,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// Why a driver adapter could not be made.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    #[error("the mock's inventory {}: {source}", path.display())]
    Inventory {
        path: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("cannot run `{shown}`: {source}; build the driver first (cargo build -p dracheck-mock-driver)")]
    VersionNotRun {
        shown: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{shown}` failed ({status}): {stderr}")]
    VersionFailed { shown: String, status: std::process::ExitStatus, stderr: String },
    #[error("`{0}` printed no version")]
    NoVersion(String),
    /// `--driver-arg` templates that do not make a command line.
    #[error("{0}")]
    Args(String),
    #[error("running {cargo} build for {bin}: {source}")]
    Build {
        cargo: String,
        bin: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`cargo build --package {package} --bin {bin}` failed ({status})")]
    BuildFailed { package: String, bin: String, status: std::process::ExitStatus },
    #[error("{bin} was built but not found next to {}", exe.display())]
    NotBuilt { bin: String, exe: PathBuf },
    #[error("where this program runs from: {0}")]
    CurrentExe(#[source] std::io::Error),
}

/// What a workload's log shows its container sees: device names or, per [`DeviceKey`], another
/// value of each device.
pub type SeenDevices = fn(log: &str) -> Vec<String>;

/// How a device is named in what a workload shows: by its device name, or by one of its
/// attributes (the NVIDIA driver's `uuid`, which `nvidia-smi -L` lists).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKey {
    Name,
    Attribute(&'static str),
}

/// How the suite's workloads look into their containers.
#[derive(Clone)]
pub struct Workload {
    /// The container image; the local cluster's emulated nodes run the command on the host and
    /// ignore it.
    pub image: String,
    /// A shell command that prints what the container sees (the workload then stays up).
    pub show: String,
    /// How its output reads; `None` where the driver's container edits are unknown.
    pub seen: Option<SeenDevices>,
    pub key: DeviceKey,
}

/// The image of workloads on the local cluster, where it only labels the container.
pub const HOST_IMAGE: &str = "dracheck.io/workload:host";

impl Workload {
    /// A workload that shows its environment, where CDI env edits name the devices.
    pub fn env(seen: Option<SeenDevices>) -> Workload {
        Workload { image: HOST_IMAGE.into(), show: "env | sort".into(), seen, key: DeviceKey::Name }
    }

    /// The command of a workload that shows what it sees and stays up.
    pub fn show_and_wait(&self) -> String {
        format!("{}; sleep 3600", self.show)
    }
}

/// For a driver installed in the cluster, which the suite cannot start itself: whether what it
/// published (devices per node) matches what the machine running the suite sees of its own
/// hardware.
pub type HostInventory = Arc<dyn Fn(&std::collections::BTreeMap<String, Vec<Device>>) -> HostCheck + Send + Sync>;

/// The answer of a [`HostInventory`] check; each carries its summary for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostCheck {
    Matches(String),
    Differs(String),
    /// The check cannot be made here (e.g. this machine is none of the nodes).
    CannotCheck(String),
}

/// What the suite knows about a driver beyond how to start it.
#[derive(Clone)]
pub struct Adapter {
    /// The `--driver` name, e.g. `mock`.
    pub short: &'static str,
    /// The DRA driver name, e.g. `gpu.mock.dracheck.io`.
    pub name: String,
    /// How to start the driver's kubelet plugin on a node; `None` for a driver that only runs
    /// installed in a cluster (its DaemonSet), which the plugin tier then skips.
    pub spec: Option<DriverSpec>,
    pub version: String,
    /// The inventory oracle: the devices the driver should publish for a node; `None` for a
    /// driver the suite knows nothing about (`--driver-bin`), whose published devices are
    /// then taken as they are and the inventory check is skipped.
    pub oracle: Option<Oracle>,
    /// A published device as the oracle states it, for values the driver draws at random
    /// (e.g. UUIDs) that the oracle can only give the form of.
    pub canonical: fn(Device) -> Device,
    pub workload: Workload,
    /// The DeviceClasses the driver's installation creates (its chart's), which the local
    /// cluster installs with the driver.
    pub device_classes: Vec<DeviceClass>,
    /// The inventory check of an installed driver (see [`HostInventory`]).
    pub host_inventory: Option<HostInventory>,
    /// Image names (the last path segment) of the driver's kubelet-plugin containers: where
    /// nobody states an installed driver's version, it is read from their tag.
    pub plugin_images: &'static [&'static str],
}

impl Adapter {
    /// An adapter for the driver `spec` starts; the rest as for a driver the suite knows
    /// nothing about, to be filled in.
    fn runnable(short: &'static str, spec: DriverSpec, version: String) -> Adapter {
        Adapter {
            short,
            name: spec.name.clone(),
            spec: Some(spec),
            version,
            oracle: None,
            canonical: |d| d,
            workload: Workload::env(None),
            device_classes: Vec::new(),
            host_inventory: None,
            plugin_images: &[],
        }
    }
}

/// The mock driver as the suite runs it: its spec, its inventory as the oracle, and its CDI
/// environment (`DRACHECK_MOCK_DEVICE_<n>=<device>`) as what a workload sees.
pub fn mock_adapter(program: &Path, inventory: &Path, faults: &[String]) -> Result<Adapter, AdapterError> {
    let inv = dracheck_mock_driver::inventory::Inventory::load(inventory)
        .map_err(|e| AdapterError::Inventory { path: inventory.to_path_buf(), source: e.into() })?;
    let oracle = Arc::new(move |node: &str| {
        let devices = inv.devices_for(node).map_err(|e| OracleError { node: node.into(), source: e.into() })?;
        Ok(dracheck_mock_driver::slices::published_devices(devices, &Default::default()))
    });
    Ok(Adapter {
        oracle: Some(oracle),
        workload: Workload::env(Some(mock_seen_devices)),
        ..Adapter::runnable("mock", mock(program, inventory, faults), stated_version(program, faults)?)
    })
}

/// kubernetes-sigs/dra-example-driver's kubelet plugin at `program`, `devices` GPUs per node,
/// with the DeviceClass its chart installs.
pub fn example_adapter(program: &Path, devices: u32) -> Adapter {
    use dracheck_example_driver as example;
    Adapter {
        oracle: Some(Arc::new(move |_node: &str| Ok(example::published_devices(devices)))),
        canonical: example::canonical,
        workload: Workload::env(Some(example::seen_devices)),
        device_classes: vec![example::device_class()],
        ..Adapter::runnable("example", example::spec(program, devices), example::RELEASE.trim_start_matches('v').into())
    }
}

/// The NVIDIA DRA driver as installed in a cluster (its chart or a pre-installed driver): the
/// suite cannot start its kubelet plugin (it needs the GPUs and the container toolkit of a
/// real node), so the plugin tier is skipped; its inventory is checked against NVML for the
/// node that is this machine, and workloads run `nvidia-smi -L`, which must list exactly the
/// UUIDs of the allocated GPUs.
#[derive(Clone, Debug)]
pub struct NvidiaOptions {
    pub host: dracheck_nvidia::host::HostView,
    /// The workloads' image; the chart's CDI spec mounts `nvidia-smi` into it.
    pub image: String,
    /// The command that lists the container's GPUs.
    pub smi: String,
    /// The installed driver's version, where known.
    pub version: Option<String>,
}

/// The image the NVIDIA driver's own examples run `nvidia-smi -L` in.
pub const NVIDIA_WORKLOAD_IMAGE: &str = "ubuntu:24.04";

impl Default for NvidiaOptions {
    fn default() -> Self {
        NvidiaOptions {
            host: Default::default(),
            image: NVIDIA_WORKLOAD_IMAGE.into(),
            smi: "nvidia-smi".into(),
            version: None,
        }
    }
}

pub fn nvidia_adapter(opts: NvidiaOptions) -> Adapter {
    use dracheck_nvidia as nvidia;
    let host = opts.host;
    Adapter {
        short: "nvidia",
        name: nvidia::DRIVER.into(),
        spec: None,
        version: opts.version.unwrap_or_else(|| UNKNOWN_VERSION.into()),
        oracle: None,
        canonical: |d| d,
        workload: Workload {
            image: opts.image,
            show: format!("{} -L", opts.smi),
            seen: Some(nvidia::smi::uuids),
            key: DeviceKey::Attribute("uuid"),
        },
        device_classes: nvidia::device_classes(),
        host_inventory: Some(Arc::new(move |published| match host.check(published) {
            Ok(Ok(held)) => HostCheck::Matches(held),
            Ok(Err(differ)) => HostCheck::Differs(differ),
            Err(why) => HostCheck::CannotCheck(why),
        })),
        plugin_images: nvidia::PLUGIN_IMAGES,
    }
}

/// What a driver's version is when nobody states it (`--driver-bin` or `--driver nvidia`
/// without `--driver-version`); `versions.driver` is then skipped.
pub const UNKNOWN_VERSION: &str = "unknown";

/// Any kubelet-plugin binary (`--driver-bin`): `args` is its command line on a node with
/// the placeholders of [`dracheck_clusters::local::drivers::PLACEHOLDERS`], by default the
/// flags of the upstream kubeletplugin helper. The suite has no inventory oracle for it and
/// does not know what its workloads see.
pub fn binary_adapter(
    program: &Path,
    driver_name: &str,
    args: &[String],
    version: Option<&str>,
) -> Result<Adapter, AdapterError> {
    let args: Vec<String> = if args.is_empty() {
        dracheck_clusters::local::drivers::HELPER_FLAGS.iter().map(|f| f.to_string()).collect()
    } else {
        args.to_vec()
    };
    let spec = DriverSpec::from_template(driver_name, program, &args).map_err(AdapterError::Args)?;
    Ok(Adapter::runnable("custom", spec, version.unwrap_or(UNKNOWN_VERSION).to_string()))
}

/// The version the driver binary states (`<program> --version`, given the run's faults, which
/// may bend it), so that `versions.driver` judges the driver under test, not the suite.
fn stated_version(program: &Path, faults: &[String]) -> Result<String, AdapterError> {
    let shown = format!("{} --version", program.display());
    let out = std::process::Command::new(program)
        .args(faults.iter().map(|f| format!("--fault={f}")))
        .arg("--version")
        .output()
        .map_err(|source| AdapterError::VersionNotRun { shown: shown.clone(), source })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(AdapterError::VersionFailed { shown, status: out.status, stderr });
    }
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .last()
        .map(str::to_string)
        .ok_or(AdapterError::NoVersion(shown))
}

/// The mock's CDI edits set `DRACHECK_MOCK_DEVICE_<n>=<device>` per prepared device.
fn mock_seen_devices(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.starts_with("DRACHECK_MOCK_DEVICE_"))
        .filter_map(|l| l.split_once('=').map(|(_, v)| v.trim().to_string()))
        .collect()
}

/// Whether `seen` holds exactly the `allocated` devices.
pub fn sees_exactly(mut seen: Vec<String>, allocated: &[String]) -> Result<(), SeenOther> {
    seen.sort();
    seen.dedup();
    let mut allocated = allocated.to_vec();
    allocated.sort();
    if seen == allocated { Ok(()) } else { Err(SeenOther { seen, allocated }) }
}

/// A workload saw other devices than were allocated to it: fewer (allocation not delivered)
/// or more (isolation broken).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the container sees {seen:?}, but {allocated:?} were allocated")]
pub struct SeenOther {
    pub seen: Vec<String>,
    pub allocated: Vec<String>,
}

/// The mock driver's DRA driver name.
pub const MOCK_DRIVER: &str = "gpu.mock.dracheck.io";

/// The mock driver with `inventory` and the given `--fault` switches.
pub fn mock(program: &Path, inventory: &Path, faults: &[String]) -> DriverSpec {
    let (inventory, faults) = (inventory.to_path_buf(), faults.to_vec());
    DriverSpec {
        name: MOCK_DRIVER.into(),
        program: program.to_path_buf(),
        args: Arc::new(move |node, kubeconfig| {
            let dir = |p: PathBuf| p.display().to_string();
            let mut args = vec![
                format!("--driver-name={MOCK_DRIVER}"),
                format!("--node-name={}", node.name),
                format!("--kubeconfig={}", kubeconfig.display()),
                format!("--inventory={}", inventory.display()),
                format!("--registrar-dir={}", dir(node.registry_dir())),
                format!("--plugin-dir={}", dir(node.plugins_dir().join(MOCK_DRIVER))),
                format!("--cdi-dir={}", dir(node.cdi_dir())),
            ];
            args.extend(faults.iter().map(|f| format!("--fault={f}")));
            args
        }),
    }
}

/// A binary of this workspace: next to the running executable's target dir when `cargo test`
/// or `cargo build` already made it, else built now with cargo.
pub fn workspace_binary(package: &str, bin: &str) -> Result<PathBuf, AdapterError> {
    let exe = std::env::current_exe().map_err(AdapterError::CurrentExe)?;
    // target/<profile>/deps/<test> or target/<profile>/<bin>
    let candidates: Vec<PathBuf> = exe.ancestors().skip(1).take(2).map(|d| d.join(bin)).collect();
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return Ok(found.clone());
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = std::process::Command::new(&cargo)
        .args(["build", "--quiet", "--package", package, "--bin", bin])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .map_err(|source| AdapterError::Build { cargo: cargo.clone(), bin: bin.into(), source })?;
    if !status.success() {
        return Err(AdapterError::BuildFailed { package: package.into(), bin: bin.into(), status });
    }
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| AdapterError::NotBuilt { bin: bin.into(), exe })
}

/// The mock driver's default inventory, shipped in the repository.
pub fn mock_default_inventory() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../drivers/mock/inventory/default.yaml")
}
