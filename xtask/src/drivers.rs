//! The drivers `--driver NAME` knows, and any kubelet-plugin binary (`--driver-bin`), for
//! `conformance` and `cluster up` alike: how each one's binary is found or built, and the
//! suite's adapter for it.

use std::path::{Path, PathBuf};

use clap::Args;
use dracheck_clusters::local::Progress;
use dracheck_suites::adapters::{self, Adapter};

use crate::exit;

/// The names `--driver` takes.
pub const KNOWN: &str = "`mock` (dracheck's own kubelet plugin), `example` (kubernetes-sigs/dra-example-driver) and \
                         `nvidia` (the NVIDIA DRA driver installed in a cluster)";

#[derive(Debug, Clone, Default, Args)]
pub struct DriverArgs {
    /// The driver: `mock` (dracheck's own kubelet plugin), `example`
    /// (kubernetes-sigs/dra-example-driver, built from its Go module on first use) or `nvidia`
    /// (gpu.nvidia.com, installed in the cluster of `--cluster kubeconfig`).
    #[arg(long, conflicts_with = "driver_bin")]
    pub driver: Option<String>,
    /// The mock driver's inventory (default: drivers/mock/inventory/default.yaml, embedded).
    #[arg(long, value_name = "FILE")]
    pub inventory: Option<PathBuf>,
    /// A mock driver fault switch (repeatable), e.g. fail-prepare=2; see drivers/mock/README.md.
    #[arg(long = "fault", value_name = "NAME[=ARG]")]
    pub faults: Vec<String>,
    /// Any kubelet-plugin binary, run on every emulated node instead of a known driver.
    #[arg(long, value_name = "PATH", requires = "driver_name")]
    pub driver_bin: Option<PathBuf>,
    /// The DRA driver name the `--driver-bin` plugin registers and publishes under.
    #[arg(long, value_name = "NAME", requires = "driver_bin")]
    pub driver_name: Option<String>,
    /// The `--driver-bin` plugin's command line, one argument each (repeatable), with
    /// {node}, {kubeconfig}, {registrar-dir}, {plugins-dir}, {plugin-dir} and {cdi-dir} filled
    /// in per node. Default: the upstream kubeletplugin helper's flags (see README).
    #[arg(long = "driver-arg", value_name = "ARG", allow_hyphen_values = true, requires = "driver_bin")]
    pub driver_args: Vec<String>,
    /// The version of the `--driver-bin` plugin or of the installed `nvidia` driver, for the
    /// profiles' driver version check.
    #[arg(long, value_name = "VERSION")]
    pub driver_version: Option<String>,
    /// `nvidia`: compare the published GPUs with this NVML recording (`inventory --driver
    /// nvidia --record FILE`) instead of this machine's NVML.
    #[arg(long, value_name = "FILE")]
    pub nvml_recording: Option<PathBuf>,
    /// `nvidia`: the node whose GPUs NVML (or --nvml-recording) describes (default: this
    /// machine's host name).
    #[arg(long, value_name = "NODE")]
    pub nvml_node: Option<String>,
    /// `nvidia`: the image of the workloads that run `nvidia-smi -L`.
    #[arg(long, value_name = "IMAGE", default_value = dracheck_nvidia::adapter::WORKLOAD_IMAGE)]
    pub workload_image: String,
}

impl DriverArgs {
    /// The same choice as command-line arguments, for the node agent.
    pub fn to_args(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut flag = |name: &str, value: Option<String>| {
            if let Some(v) = value {
                out.push(format!("--{name}={v}"));
            }
        };
        flag("driver", self.driver.clone());
        flag("inventory", self.inventory.as_ref().map(|p| p.display().to_string()));
        flag("driver-bin", self.driver_bin.as_ref().map(|p| p.display().to_string()));
        flag("driver-name", self.driver_name.clone());
        flag("driver-version", self.driver_version.clone());
        flag("nvml-recording", self.nvml_recording.as_ref().map(|p| p.display().to_string()));
        flag("nvml-node", self.nvml_node.clone());
        if self.workload_image != dracheck_nvidia::adapter::WORKLOAD_IMAGE {
            flag("workload-image", Some(self.workload_image.clone()));
        }
        out.extend(self.faults.iter().map(|f| format!("--fault={f}")));
        out.extend(self.driver_args.iter().map(|a| format!("--driver-arg={a}")));
        out
    }

    pub fn is_set(&self) -> bool {
        self.driver.is_some() || self.driver_bin.is_some()
    }

    /// The adapter of the chosen driver (`default` when none is named), `None` if there is
    /// none. A failure is the message and its exit code, before anything was started.
    pub async fn adapter(&self, default: Option<&str>, progress: &Progress) -> Result<Option<Adapter>, (u8, String)> {
        let driver = self.driver.as_deref().or(if self.driver_bin.is_some() { None } else { default });
        if driver != Some("nvidia") {
            let nvidia_only = |flag: &str| {
                (exit::BAD_INPUT, format!("{flag} is a switch of the nvidia driver; drop it, or pass --driver nvidia"))
            };
            if self.nvml_recording.is_some() {
                return Err(nvidia_only("--nvml-recording"));
            }
            if self.nvml_node.is_some() {
                return Err(nvidia_only("--nvml-node"));
            }
            if self.workload_image != dracheck_nvidia::adapter::WORKLOAD_IMAGE {
                return Err(nvidia_only("--workload-image"));
            }
            if self.driver_version.is_some() && self.driver_bin.is_none() {
                return Err((
                    exit::BAD_INPUT,
                    "--driver-version states the version of a --driver-bin plugin or of the installed nvidia driver; \
                     the others state their own: drop it"
                        .into(),
                ));
            }
        }
        if driver != Some("mock") {
            let mock_only = |flag: &str| {
                (exit::BAD_INPUT, format!("{flag} is a switch of the mock driver; drop it, or pass --driver mock"))
            };
            if !self.faults.is_empty() {
                return Err(mock_only("--fault"));
            }
            if self.inventory.is_some() {
                return Err(mock_only("--inventory"));
            }
        }
        if let (Some(bin), Some(name)) = (&self.driver_bin, &self.driver_name) {
            return custom(bin, name, &self.driver_args, self.driver_version.as_deref()).map(Some);
        }
        match driver {
            None => Ok(None),
            Some("mock") => {
                let inventory = match &self.inventory {
                    Some(path) => path.clone(),
                    None => dracheck_mock_driver::adapter::shipped_inventory(
                        dracheck_mock_driver::adapter::DEFAULT_INVENTORY,
                    )
                    .map_err(|e| (exit::FAILED, e.to_string()))?,
                };
                if !inventory.is_file() {
                    return Err((
                        exit::BAD_INPUT,
                        format!("the inventory {} does not exist; pass --inventory FILE", inventory.display()),
                    ));
                }
                let bin = dracheck_mock_driver::adapter::binary().map_err(|e| (exit::CLUSTER_DOWN, e.to_string()))?;
                dracheck_mock_driver::adapter::adapter(&bin, &inventory, &self.faults)
                    .map(Some)
                    .map_err(|e| (exit::BAD_INPUT, e.to_string()))
            }
            Some("example") => {
                let bin =
                    dracheck_example_driver::binary(progress).await.map_err(|e| crate::install::cluster(e.into()))?;
                Ok(Some(dracheck_example_driver::adapter(&bin, dracheck_example_driver::DEVICES_PER_NODE)))
            }
            Some("nvidia") => {
                if let Some(path) = self.nvml_recording.as_ref().filter(|p| !p.is_file()) {
                    return Err((
                        exit::BAD_INPUT,
                        format!("the NVML recording {} does not exist; pass --nvml-recording FILE", path.display()),
                    ));
                }
                Ok(Some(dracheck_nvidia::adapter::adapter(dracheck_nvidia::adapter::Options {
                    host: dracheck_nvidia::host::HostView {
                        recording: self.nvml_recording.clone(),
                        node: self.nvml_node.clone(),
                    },
                    image: self.workload_image.clone(),
                    version: self.driver_version.clone(),
                    ..Default::default()
                })))
            }
            Some(other) => Err((
                exit::BAD_INPUT,
                format!(
                    "unknown driver {other:?}: known are {KNOWN}; pass one of them to --driver, or a kubelet-plugin \
                     binary with --driver-bin PATH --driver-name NAME"
                ),
            )),
        }
    }
}

impl DriverArgs {
    /// The adapter of a driver for the emulated nodes of `cluster up`, which must be one the
    /// suite can start.
    pub async fn emulated_adapter(&self, progress: &Progress) -> Result<Option<Adapter>, (u8, String)> {
        let adapter = self.adapter(None, progress).await?;
        if let Some(a) = adapter.as_ref().filter(|a| a.spec.is_none()) {
            return Err((
                exit::BAD_INPUT,
                format!(
                    "--driver {}: this driver runs only installed in a real cluster (its kubelet plugin needs the \
                     node's devices), not on emulated nodes; point `conformance --cluster kubeconfig` at a cluster \
                     where it is installed",
                    a.short
                ),
            ));
        }
        Ok(adapter)
    }
}

/// `--driver-bin`: an executable file, and a command line whose placeholders are known.
fn custom(bin: &Path, name: &str, args: &[String], version: Option<&str>) -> Result<Adapter, (u8, String)> {
    if !dracheck_clusters::tools::is_executable(bin) {
        return Err((
            exit::BAD_INPUT,
            format!(
                "--driver-bin {} is not an executable file; pass the path of a kubelet-plugin binary",
                bin.display()
            ),
        ));
    }
    adapters::binary_adapter(bin, name, args, version).map_err(|e| (exit::BAD_INPUT, format!("{e}; fix --driver-arg")))
}

/// The second driver of the checks of two drivers on one node: the mock under another name,
/// also beside the mock itself. Where it cannot be built the run goes on, and those checks are
/// skipped with the reason.
pub fn companion() -> Option<adapters::Companion> {
    match dracheck_mock_driver::adapter::companion() {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!(
                "dracheck: the mock, which runs as the second driver, is not available ({e}); coexistence is skipped"
            );
            None
        }
    }
}
