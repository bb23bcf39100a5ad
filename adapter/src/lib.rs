//! What the suite knows of a driver, which each driver crate states of itself in an
//! [`Adapter`]: how its kubelet plugin starts on a node (which of its flags take the node's
//! name, dirs and kubeconfig), the devices it should publish (its inventory oracle), what a
//! workload of it sees, the DeviceClasses its installation brings. The suite and the clusters
//! know no driver by name; `xtask` picks the adapter for `--driver`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{CounterSet, Device, DeviceClass};

pub mod installation;
pub mod program;
pub mod share;
pub mod spec;

pub use installation::Installation;

use spec::DriverSpec;

/// The devices a driver should publish for a node.
pub type Oracle = Arc<dyn Fn(&str) -> Result<Vec<Device>, OracleError> + Send + Sync>;

/// The counter sets (`sharedCounters`) a driver should publish in a node's pool.
pub type CounterOracle = Arc<dyn Fn(&str) -> Result<Vec<CounterSet>, OracleError> + Send + Sync>;

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
    #[error("the driver's inventory {}: {source}", path.display())]
    Inventory {
        path: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("cannot run `{shown}`: {source}; build the driver first")]
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
    #[error(transparent)]
    Args(#[from] spec::UnknownPlaceholder),
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
    /// An installed dracheck without the driver program beside it.
    #[error(
        "{bin} is not installed beside this program (looked for {}): unpack the release archive's bin/ \
         (`cargo xtask dist`) together, or install the package {package} from a checkout too (`cargo install \
         --path DIR`, DIR its folder)",
        looked.display()
    )]
    NotInstalled { bin: String, package: String, looked: PathBuf },
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
    /// How the driver's opaque configuration shows in a container; `None` where the suite
    /// does not know, and the `config` family is skipped.
    pub config: Option<ConfigProbe>,
    /// How a share of a device (consumable capacity) shows in a container; `None` where the
    /// suite does not know, and the checks of what a share sees are skipped.
    pub shares: Option<SeenShares>,
}

/// Per device a container has a share of (named as [`Workload::key`] names it), the share it
/// shows.
pub type SeenShares = fn(log: &str) -> std::collections::BTreeMap<String, SeenShare>;

/// What a container shows of its share of a device: the allocation's share ID and what it
/// may use of each capacity (the allocation's `consumedCapacity`, as written there).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeenShare {
    pub share_id: Option<String>,
    pub capacity: std::collections::BTreeMap<String, String>,
}

/// How a driver's opaque configuration (`opaque.parameters`) reaches a container, as far as a
/// workload can show it: [`CONFIG_VARIANTS`] configurations of the driver that a workload can
/// tell apart, and which of them each of its devices was prepared with.
#[derive(Clone, Copy)]
pub struct ConfigProbe {
    /// The driver's `opaque.parameters` of configuration `i` (below [`CONFIG_VARIANTS`]).
    pub parameters: fn(i: usize) -> serde_json::Value,
    /// Per device the container has (named as [`Workload::key`] names it), which of the
    /// configurations it shows; `None`: none of them (the driver's default).
    pub seen: fn(log: &str) -> std::collections::BTreeMap<String, Option<usize>>,
}

/// A second driver the suite runs beside the one under test on a node of a cluster it started
/// (the mock under another name, with its own CDI kind and variables), for the checks of two
/// drivers sharing a node and a claim.
#[derive(Clone)]
pub struct Companion {
    /// How it starts on a node; its `name` is its DRA driver name.
    pub spec: spec::DriverSpec,
    /// The devices it gave a container that shows its environment.
    pub seen: SeenDevices,
}

/// A change of a driver's inventory on one node, as an administrator makes one (a device taken
/// out or put in, a setting that drops an attribute) and the driver must publish: the driver
/// started again as `spec` should publish exactly `devices` for the node.
#[derive(Clone)]
pub struct InventoryChange {
    /// What changed, for the report.
    pub what: String,
    pub spec: spec::DriverSpec,
    pub devices: Vec<Device>,
}

/// Makes an [`InventoryChange`] for a node (`node`), writing any file it needs under `dir`.
pub type ChangeInventory = Arc<dyn Fn(&str, &Path) -> Result<InventoryChange, String> + Send + Sync>;

/// Makes exactly `unhealthy` (device names; none: every device sound) the unhealthy devices
/// of the driver on the node with these dirs, as its health checks would find them; returns
/// what it did, for reports.
pub type SetHealth = Arc<dyn Fn(&spec::NodeDirs, &[String]) -> Result<String, String> + Send + Sync>;

/// How many configurations a [`ConfigProbe`] tells apart: one for a class, one for a claim.
pub const CONFIG_VARIANTS: usize = 2;

/// The image of workloads on the local cluster, where it only labels the container.
pub const HOST_IMAGE: &str = "dracheck.io/workload:host";

impl Workload {
    /// A workload that shows its environment, where CDI env edits name the devices.
    pub fn env(seen: Option<SeenDevices>) -> Workload {
        Workload {
            image: HOST_IMAGE.into(),
            show: "env | sort".into(),
            seen,
            key: DeviceKey::Name,
            config: None,
            shares: None,
        }
    }

    /// The command of a workload that shows what it sees and stays up, until its pod is
    /// deleted: then it ends at once, as `dracheck_objects::IDLE` says why.
    pub fn show_and_wait(&self) -> String {
        format!("trap 'exit 0' TERM; {}; sleep 3600 & wait", self.show)
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
    /// The counter sets the driver should publish for a node, beside [`Adapter::oracle`]'s
    /// devices; `None` where the oracle knows of none.
    pub counter_oracle: Option<CounterOracle>,
    /// A published device as the oracle states it, for values the driver draws at random
    /// (e.g. UUIDs) that the oracle can only give the form of.
    pub canonical: fn(Device) -> Device,
    pub workload: Workload,
    /// The DeviceClasses the driver's installation creates (its chart's), which the local
    /// cluster installs with the driver.
    pub device_classes: Vec<DeviceClass>,
    /// The ServiceAccount, rights and admission policies the driver's installation gives its
    /// kubelet plugin, which the local cluster applies where it runs the driver's processes;
    /// `None` where the adapter states none (the plugin's own pods name it where installed).
    pub installation: Option<Installation>,
    /// The inventory check of an installed driver (see [`HostInventory`]).
    pub host_inventory: Option<HostInventory>,
    /// How the suite changes the driver's inventory on a node; `None` where it knows no way,
    /// and the check that the driver follows a change is skipped.
    pub change_inventory: Option<ChangeInventory>,
    /// How to make a device of a node unhealthy as the driver's health checks would find it
    /// (the driver started again as the change's `spec`); the change's `devices` are what it
    /// should publish then, the unhealthy one with its taint.
    pub mark_unhealthy: Option<ChangeInventory>,
    /// How to turn devices of a running driver's node unhealthy, or sound again, as its health
    /// checks would find them, without a restart; `None` where the suite knows no way, and the
    /// health checks are skipped.
    pub set_health: Option<SetHealth>,
    /// The arguments that make the driver's plugin a second instance with sockets of its own
    /// beside the first on a node (a rolling update's new pod; the upstream helper's
    /// `RollingUpdate` takes the pod UID); `None` where the suite knows none, and the upgrade
    /// checks are skipped.
    pub instance_args: Option<fn(id: &str) -> Vec<String>>,
    /// Image names (the last path segment) of the driver's kubelet-plugin containers: where
    /// nobody states an installed driver's version, it is read from their tag.
    pub plugin_images: &'static [&'static str],
}

impl Adapter {
    /// An adapter for the driver `spec` starts; the rest as for a driver the suite knows
    /// nothing about, to be filled in.
    pub fn runnable(short: &'static str, spec: DriverSpec, version: String) -> Adapter {
        Adapter {
            short,
            name: spec.name.clone(),
            spec: Some(spec),
            version,
            oracle: None,
            counter_oracle: None,
            canonical: |d| d,
            workload: Workload::env(None),
            device_classes: Vec::new(),
            installation: None,
            host_inventory: None,
            change_inventory: None,
            mark_unhealthy: None,
            set_health: None,
            instance_args: None,
            plugin_images: &[],
        }
    }
}

/// What a driver's version is when nobody states it (`--driver-bin` or `--driver nvidia`
/// without `--driver-version`); `versions.driver` is then skipped.
pub const UNKNOWN_VERSION: &str = "unknown";

/// Any kubelet-plugin binary (`--driver-bin`): `args` is its command line on a node with
/// the placeholders of [`spec::PLACEHOLDERS`], by default the
/// flags of the upstream kubeletplugin helper. The suite has no inventory oracle for it and
/// does not know what its workloads see.
pub fn binary_adapter(
    program: &Path,
    driver_name: &str,
    args: &[String],
    version: Option<&str>,
) -> Result<Adapter, AdapterError> {
    let args: Vec<String> =
        if args.is_empty() { spec::HELPER_FLAGS.iter().map(|f| f.to_string()).collect() } else { args.to_vec() };
    let spec = DriverSpec::from_template(driver_name, program, &args)?;
    Ok(Adapter::runnable("custom", spec, version.unwrap_or(UNKNOWN_VERSION).to_string()))
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

/// A binary of this workspace, next to the running executable: as `cargo test` built it,
/// built (brought up to date) now with cargo where this program runs from its checkout, or,
/// for an installed or unpacked dracheck, the one installed beside it.
pub fn workspace_binary(package: &str, bin: &str) -> Result<PathBuf, AdapterError> {
    let exe = std::env::current_exe().map_err(AdapterError::CurrentExe)?;
    // target/<profile>/deps/<test> or target/<profile>/<bin>
    let candidates: Vec<PathBuf> = exe.ancestors().skip(1).take(2).map(|d| d.join(bin)).collect();
    // A test binary runs under `cargo test`, which built the workspace's binaries with it and
    // holds the build dir's lock meanwhile. A program of the checkout (`cargo xtask`) asks
    // cargo, which does nothing if the binary is current: one left from before a change of its
    // sources would give the verdicts of the old driver.
    let under_test = exe.parent().is_some_and(|d| d.ends_with("deps"));
    if let Some(found) = candidates.iter().find(|p| p.is_file())
        && under_test
    {
        return Ok(found.clone());
    }
    let Some(workspace) = checkout_of(&exe) else {
        // Installed (`cargo install`) or unpacked from the release archive: the binary beside.
        let beside = exe.with_file_name(bin);
        return if beside.is_file() {
            Ok(beside)
        } else {
            Err(AdapterError::NotInstalled { bin: bin.into(), package: package.into(), looked: beside })
        };
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // A first build takes a while: say so, and let cargo show its progress; a check of a
    // built binary stays quiet.
    let first = !candidates.iter().any(|p| p.is_file());
    if first {
        eprintln!(
            "building {bin} (`cargo build --package {package}`), once: seconds after the command line's own build"
        );
    }
    let quiet: &[&str] = if first { &[] } else { &["--quiet"] };
    // Without `cargo run`'s variables (`cargo_run_vars`) cargo reuses the command line's build;
    // with them it reran ring's build script and compiled the stack again (90 s of a fresh
    // machine's first run). The command line's package is selected too so that the features
    // are resolved with it, as for `cargo xtask`; that part was not measured on its own.
    let mut command = std::process::Command::new(&cargo);
    for var in cargo_run_vars() {
        command.env_remove(var);
    }
    let status = command
        .args(["build", "--package", CLI_PACKAGE, "--package", package, "--bin", bin])
        .args(quiet)
        .current_dir(workspace)
        .status()
        .map_err(|source| AdapterError::Build { cargo: cargo.clone(), bin: bin.into(), source })?;
    if !status.success() {
        return Err(AdapterError::BuildFailed { package: package.into(), bin: bin.into(), status });
    }
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| AdapterError::NotBuilt { bin: bin.into(), exe })
}

/// The variables `cargo run` sets for the program it runs (`CARGO_PKG_*`, `CARGO_MANIFEST_*`,
/// …), as this process has them: a cargo started from here must not see them. Build scripts
/// that read such a variable through `rerun-if-env-changed` (ring reads `CARGO_PKG_NAME`,
/// `CARGO_MANIFEST_DIR`, `OUT_DIR`) compare it with cargo's own environment, so a nested
/// cargo that inherits them reruns ring's build script and recompiles rustls, kube and
/// everything above them, and the next cargo from the shell does it all again.
pub fn cargo_run_vars() -> Vec<std::ffi::OsString> {
    const EXACT: [&str; 4] = ["CARGO_CRATE_NAME", "CARGO_BIN_NAME", "CARGO_PRIMARY_PACKAGE", "OUT_DIR"];
    std::env::vars_os()
        .map(|(name, _)| name)
        .filter(|name| {
            let name = name.to_string_lossy();
            name.starts_with("CARGO_PKG_") || name.starts_with("CARGO_MANIFEST_") || EXACT.contains(&name.as_ref())
        })
        .collect()
}

/// The workspace's command line (`cargo xtask`), whose build every checkout build of a driver
/// shares.
const CLI_PACKAGE: &str = "xtask";

/// The checkout this program was built from, where it runs from it: cargo runs it (`cargo
/// xtask`, `cargo run`), or it lies in that checkout (its `target/`). `None` for an installed or
/// unpacked binary, also on a machine that still has the checkout.
fn checkout_of(exe: &Path) -> Option<&'static Path> {
    // The one place a driver binary is looked for in the source tree: building it there.
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
    let present = workspace.join("Cargo.toml").is_file();
    let ran_by_cargo = std::env::var_os("CARGO").is_some();
    (present && (ran_by_cargo || exe.starts_with(workspace))).then_some(workspace)
}

/// The version a driver binary states (`<program> <args> --version`, with the run's own
/// arguments, which may bend it), so that `versions.driver` judges the driver under test, not
/// the suite.
pub fn stated_version(program: &Path, args: &[String]) -> Result<String, AdapterError> {
    let shown = format!("{} --version", program.display());
    let out = std::process::Command::new(program)
        .args(args)
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
