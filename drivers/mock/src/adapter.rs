//! The mock as the suite runs it: how it starts on a node, its inventory as the oracle, and
//! its CDI environment (`DRACHECK_MOCK_DEVICE_<n>=<device>`) as what a workload sees.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dracheck_adapter::spec::DriverSpec;
use dracheck_adapter::{Adapter, AdapterError, OracleError, Workload};

use crate::cli::DEFAULT_DRIVER as DRIVER;

/// The mock with `inventory` and the given `--fault` switches, as the suite knows it.
pub fn adapter(program: &Path, inventory: &Path, faults: &[String]) -> Result<Adapter, AdapterError> {
    let inv = crate::inventory::Inventory::load(inventory)
        .map_err(|e| AdapterError::Inventory { path: inventory.to_path_buf(), source: e.into() })?;
    let oracle = Arc::new(move |node: &str| {
        let devices = inv.devices_for(node).map_err(|e| OracleError { node: node.into(), source: e.into() })?;
        Ok(crate::slices::published_devices(devices, &Default::default()))
    });
    let version = dracheck_adapter::stated_version(program, &fault_args(faults))?;
    Ok(Adapter {
        oracle: Some(oracle),
        workload: Workload::env(Some(seen_devices)),
        ..Adapter::runnable("mock", spec(program, inventory, faults), version)
    })
}

/// The mock built in this workspace (built now if it is not yet) on its shipped inventory.
pub fn default(faults: &[String]) -> Result<Adapter, AdapterError> {
    adapter(&binary()?, &default_inventory(), faults)
}

/// The mock's binary of this workspace, built now if it is not yet.
pub fn binary() -> Result<PathBuf, AdapterError> {
    dracheck_adapter::workspace_binary("dracheck-mock-driver", "dracheck-mock-driver")
}

fn fault_args(faults: &[String]) -> Vec<String> {
    faults.iter().map(|f| format!("--fault={f}")).collect()
}

/// The mock's CDI edits set `DRACHECK_MOCK_DEVICE_<n>=<device>` per prepared device.
pub fn seen_devices(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.starts_with("DRACHECK_MOCK_DEVICE_"))
        .filter_map(|l| l.split_once('=').map(|(_, v)| v.trim().to_string()))
        .collect()
}

/// How the mock with `inventory` and the given `--fault` switches starts on a node.
pub fn spec(program: &Path, inventory: &Path, faults: &[String]) -> DriverSpec {
    let (inventory, faults) = (inventory.to_path_buf(), fault_args(faults));
    DriverSpec {
        name: DRIVER.into(),
        program: program.to_path_buf(),
        args: Arc::new(move |node, kubeconfig| {
            let dir = |p: PathBuf| p.display().to_string();
            let mut args = vec![
                format!("--driver-name={DRIVER}"),
                format!("--node-name={}", node.name),
                format!("--kubeconfig={}", kubeconfig.display()),
                format!("--inventory={}", inventory.display()),
                format!("--registrar-dir={}", dir(node.registry_dir())),
                format!("--plugin-dir={}", dir(node.plugins_dir().join(DRIVER))),
                format!("--cdi-dir={}", dir(node.cdi_dir())),
            ];
            args.extend(faults.iter().cloned());
            args
        }),
    }
}

/// The mock's default inventory, shipped in the repository.
pub fn default_inventory() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory/default.yaml")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workload_sees_the_devices_its_env_names() {
        let log = "HOME=/\nDRACHECK_MOCK_DEVICE_0=gpu-1\nDRACHECK_MOCK_DEVICE_1= gpu-3\nPATH=/bin\n";
        assert_eq!(seen_devices(log), ["gpu-1", "gpu-3"]);
    }

    #[test]
    fn the_shipped_inventory_is_there() {
        assert!(default_inventory().is_file(), "{}", default_inventory().display());
    }
}
