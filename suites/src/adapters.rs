//! Driver adapters: how each driver's kubelet plugin is started on an emulated node, i.e. which
//! of its flags take the node's name, registry, plugin and CDI dirs and the kubeconfig.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dracheck_clusters::local::DriverSpec;

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
pub fn workspace_binary(package: &str, bin: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
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
        .map_err(|e| format!("running {cargo} build for {bin}: {e}"))?;
    if !status.success() {
        return Err(format!("`cargo build --package {package} --bin {bin}` failed ({status})"));
    }
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| format!("{bin} was built but not found next to {}", exe.display()))
}

/// The mock driver's default inventory, shipped in the repository.
pub fn mock_default_inventory() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../drivers/mock/inventory/default.yaml")
}
