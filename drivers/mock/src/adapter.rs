//! The mock as the suite runs it: how it starts on a node, its inventory as the oracle, and
//! its CDI environment (`DRACHECK_MOCK_DEVICE_<n>=<device>`) as what a workload sees.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dracheck_adapter::spec::DriverSpec;
use dracheck_adapter::{Adapter, AdapterError, ConfigProbe, InventoryChange, OracleError, Workload};
use k8s_openapi::api::resource::v1::Device;

use crate::cli::DEFAULT_DRIVER as DRIVER;

/// The mock with `inventory` and the given `--fault` switches, as the suite knows it.
pub fn adapter(program: &Path, inventory: &Path, faults: &[String]) -> Result<Adapter, AdapterError> {
    let inv = crate::inventory::Inventory::load(inventory)
        .map_err(|e| AdapterError::Inventory { path: inventory.to_path_buf(), source: e.into() })?;
    let inv = Arc::new(inv);
    let pool = {
        let inv = Arc::clone(&inv);
        move |node: &str| inv.pool_for(node).map_err(|e| OracleError { node: node.into(), source: e.into() })
    };
    let oracle: dracheck_adapter::Oracle = {
        let pool = pool.clone();
        Arc::new(move |node: &str| Ok(crate::slices::published_devices(&pool(node)?.devices, &Default::default())))
    };
    let counter_oracle: dracheck_adapter::CounterOracle =
        Arc::new(move |node: &str| Ok(crate::slices::published_counter_sets(&pool(node)?, &Default::default())));
    let version = dracheck_adapter::stated_version(program, &fault_args(faults))?;
    let rewrite = |what: &'static str, file: &'static str, how: fn(Vec<Device>) -> Vec<Device>| {
        let (before, program, faults) = (Arc::clone(&oracle), program.to_path_buf(), faults.to_vec());
        let counters = Arc::clone(&counter_oracle);
        let change: dracheck_adapter::ChangeInventory = Arc::new(move |node: &str, dir: &Path| {
            let devices = how(before(node).map_err(|e| e.to_string())?);
            let path = dir.join(file);
            let counter_sets = counters(node).map_err(|e| e.to_string())?;
            std::fs::write(&path, crate::inventory::render(&devices, &counter_sets))
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
            Ok(InventoryChange { what: what.into(), spec: spec(&program, &path, &faults), devices })
        });
        change
    };
    let change = rewrite(CHANGE, "inventory-changed.yaml", changed);
    let unhealthy = rewrite(UNHEALTHY, "inventory-unhealthy.yaml", |mut devices| {
        if let Some(first) = devices.first_mut() {
            first.taints = Some(vec![crate::inventory::unhealthy_taint()]);
        }
        devices
    });
    Ok(Adapter {
        oracle: Some(oracle),
        counter_oracle: Some(counter_oracle),
        change_inventory: Some(change),
        mark_unhealthy: Some(unhealthy),
        set_health: Some(Arc::new(set_health)),
        instance_args: Some(|id| vec![format!("--instance={id}")]),
        installation: Some(crate::installation::installation(
            !faults.iter().any(|f| f == crate::faults::NO_NODE_POLICY),
        )),
        workload: Workload { config: Some(CONFIG), shares: Some(seen_shares), ..Workload::env(Some(seen_devices)) },
        ..Adapter::runnable("mock", spec(program, inventory, faults), version)
    })
}

/// The mock's health checks find the devices its node's health file lists faulty (see
/// `health`); the file is in its plugin dir, where the suite starts it.
fn set_health(node: &dracheck_adapter::spec::NodeDirs, unhealthy: &[String]) -> Result<String, String> {
    let path = node.plugins_dir().join(DRIVER).join(crate::health::HEALTH_FILE);
    crate::health::write(&path, unhealthy).map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(if unhealthy.is_empty() {
        format!("the mock's health file {} lists no device", path.display())
    } else {
        format!("the mock's health file {} lists {}", path.display(), unhealthy.join(", "))
    })
}

/// How the suite makes a device unhealthy: the inventory marks it so.
const UNHEALTHY: &str = "the inventory file marks the node's first device unhealthy (healthy: false)";

/// What [`changed`] does to a node's devices.
const CHANGE: &str = "the inventory file changed: its last device taken out, 128 devices added (a second slice), the \
                      first device's last attribute and the second's last capacity removed";

/// `devices` after [`CHANGE`]: each kind of change a driver must publish, and enough new
/// devices that the pool needs one more slice, a change no single update can make.
fn changed(mut devices: Vec<Device>) -> Vec<Device> {
    let added: Vec<Device> = devices
        .first()
        .into_iter()
        .flat_map(|first| {
            (0..crate::slices::MAX_DEVICES_PER_SLICE)
                .map(move |i| Device { name: format!("added-{i}"), ..first.clone() })
        })
        .collect();
    devices.pop();
    if let Some(attrs) = devices.first_mut().and_then(|d| d.attributes.as_mut()) {
        attrs.pop_last();
    }
    if let Some(caps) = devices.get_mut(1).and_then(|d| d.capacity.as_mut()) {
        caps.pop_last();
    }
    // An emptied map is published as none at all.
    for d in &mut devices {
        d.attributes = d.attributes.take().filter(|a| !a.is_empty());
        d.capacity = d.capacity.take().filter(|c| !c.is_empty());
    }
    devices.extend(added);
    devices
}

/// The mock built in this workspace (built now if it is not yet) on its shipped inventory.
pub fn default(faults: &[String]) -> Result<Adapter, AdapterError> {
    adapter(&binary()?, &shipped_inventory(DEFAULT_INVENTORY)?, faults)
}

/// Names a mock program already built, used as it is instead of asking cargo: a test that runs
/// the CLI hands it the mock its `cargo test` built, since a nested `cargo build --package`
/// resolves features for that package alone and so builds a second copy of the stack.
pub const PROGRAM_ENV: &str = "DRACHECK_MOCK_DRIVER";

/// The mock's binary: `$DRACHECK_MOCK_DRIVER` when set, else this workspace's, built now if it
/// is not yet.
pub fn binary() -> Result<PathBuf, AdapterError> {
    match std::env::var_os(PROGRAM_ENV) {
        Some(program) => Ok(PathBuf::from(program)),
        None => dracheck_adapter::workspace_binary("dracheck-mock-driver", "dracheck-mock-driver"),
    }
}

fn fault_args(faults: &[String]) -> Vec<String> {
    faults.iter().map(|f| format!("--fault={f}")).collect()
}

/// The mock's CDI edits set `DRACHECK_MOCK_DEVICE_<n>=<device>` per prepared device.
pub fn seen_devices(log: &str) -> Vec<String> {
    seen_devices_with(crate::cdi::DEFAULT_ENV_PREFIX, log)
}

/// The devices a mock started with `--env-prefix=<prefix>` gave a container that printed its
/// environment as `log`: `<prefix>_DEVICE_<n>=<device>`.
pub fn seen_devices_with(prefix: &str, log: &str) -> Vec<String> {
    let start = format!("{prefix}_DEVICE_");
    log.lines()
        .filter_map(|l| l.strip_prefix(&start)?.split_once('='))
        .filter(|(index, _)| index.parse::<usize>().is_ok())
        .map(|(_, device)| device.trim().to_string())
        .collect()
}

/// Per device the mock's CDI edits name (`DRACHECK_MOCK_DEVICE_<n>`) with a share, the share
/// they show: `DRACHECK_MOCK_SHARE_<n>=<id>` and `DRACHECK_MOCK_CAPACITY_<n>_<name>=<quantity>`
/// (capacity names with `_` for what a variable name cannot hold).
pub fn seen_shares(log: &str) -> BTreeMap<String, dracheck_adapter::SeenShare> {
    let prefix = crate::cdi::DEFAULT_ENV_PREFIX;
    let device_prefix = format!("{prefix}_DEVICE_");
    let vars: Vec<(&str, &str)> = log.lines().filter_map(|l| l.split_once('=')).collect();
    let mut out = BTreeMap::new();
    for (var, device) in &vars {
        let Some(Ok(index)) = var.strip_prefix(&device_prefix).map(str::parse::<usize>) else { continue };
        let share_var = crate::cdi::share_var(prefix, index);
        let capacity_prefix = crate::cdi::capacity_var(prefix, index, "");
        let share_id = vars.iter().find(|(v, _)| *v == share_var).map(|(_, id)| id.trim().to_string());
        let capacity: BTreeMap<String, String> = vars
            .iter()
            .filter_map(|(v, q)| Some((v.strip_prefix(&capacity_prefix)?.to_string(), q.trim().to_string())))
            .collect();
        if share_id.is_some() || !capacity.is_empty() {
            out.insert(device.trim().to_string(), dracheck_adapter::SeenShare { share_id, capacity });
        }
    }
    out
}

/// The mock's opaque configuration (see `config`): configuration `i` sets `dracheck=config-<i>`,
/// which a container shows as `DRACHECK_MOCK_CONFIG_<n>_dracheck=config-<i>`.
pub const CONFIG: ConfigProbe =
    ConfigProbe { parameters: |i| serde_json::json!({ PROBE_SETTING: format!("config-{i}") }), seen: seen_config };

/// The setting the suite's configurations set.
const PROBE_SETTING: &str = "dracheck";

/// Per device the mock's CDI edits name (`DRACHECK_MOCK_DEVICE_<n>`), which of the suite's
/// configurations it shows (`DRACHECK_MOCK_CONFIG_<n>_dracheck=config-<i>`).
pub fn seen_config(log: &str) -> BTreeMap<String, Option<usize>> {
    let device_prefix = format!("{}_DEVICE_", crate::cdi::DEFAULT_ENV_PREFIX);
    let vars: Vec<(&str, &str)> = log.lines().filter_map(|l| l.split_once('=')).collect();
    let mut out = BTreeMap::new();
    for (var, device) in &vars {
        let Some(Ok(index)) = var.strip_prefix(&device_prefix).map(str::parse) else { continue };
        let setting = crate::cdi::config_var(index, PROBE_SETTING);
        let variant = vars
            .iter()
            .find(|(v, _)| *v == setting)
            .and_then(|(_, value)| value.trim().strip_prefix("config-")?.parse().ok());
        out.insert(device.trim().to_string(), variant);
    }
    out
}

/// How the mock with `inventory` and the given `--fault` switches starts on a node.
pub fn spec(program: &Path, inventory: &Path, faults: &[String]) -> DriverSpec {
    spec_named(DRIVER, program, inventory, fault_args(faults))
}

/// The driver name of the mock's second instance, for checks of two drivers on one node.
pub const COMPANION_DRIVER: &str = "nic.mock.dracheck.io";
/// Its variables: `DRACHECK_MOCK_NIC_DEVICE_<n>=<device>`; its CDI kind `mock.dracheck.io/nic`.
pub const COMPANION_ENV_PREFIX: &str = "DRACHECK_MOCK_NIC";

/// The mock as a second driver beside the one under test: its own name, CDI kind and
/// variables, and an inventory of two NICs (`inventory/companion.yaml`). Its slices go with it
/// on a clean stop, so that it leaves nothing on the node it visited.
pub fn companion_spec(program: &Path) -> DriverSpec {
    companion_spec_with(program, &shipped_path(COMPANION_INVENTORY))
}

fn companion_spec_with(program: &Path, inventory: &Path) -> DriverSpec {
    let extra = vec![format!("--env-prefix={COMPANION_ENV_PREFIX}"), "--remove-slices-on-exit".into()];
    spec_named(COMPANION_DRIVER, program, inventory, extra)
}

/// The mock as the second driver of a run (`dracheck_adapter::Companion`), built now if it is
/// not yet.
pub fn companion() -> Result<dracheck_adapter::Companion, AdapterError> {
    let spec = companion_spec_with(&binary()?, &shipped_inventory(COMPANION_INVENTORY)?);
    Ok(dracheck_adapter::Companion { spec, seen: companion_seen_devices })
}

/// The devices the companion gave a container that printed its environment as `log`.
pub fn companion_seen_devices(log: &str) -> Vec<String> {
    seen_devices_with(COMPANION_ENV_PREFIX, log)
}

fn spec_named(driver: &'static str, program: &Path, inventory: &Path, extra: Vec<String>) -> DriverSpec {
    let inventory = inventory.to_path_buf();
    DriverSpec {
        name: driver.into(),
        program: program.to_path_buf(),
        args: Arc::new(move |node, kubeconfig| {
            let dir = |p: PathBuf| p.display().to_string();
            let mut args = vec![
                format!("--driver-name={driver}"),
                format!("--node-name={}", node.name),
                format!("--kubeconfig={}", kubeconfig.display()),
                format!("--inventory={}", inventory.display()),
                format!("--registrar-dir={}", dir(node.registry_dir())),
                format!("--plugin-dir={}", dir(node.plugins_dir().join(driver))),
                format!("--cdi-dir={}", dir(node.cdi_dir())),
            ];
            args.extend(extra.iter().cloned());
            args
        }),
    }
}

/// The mock's inventories as shipped (`inventory/`), embedded: a dracheck binary needs no
/// checkout to run the mock.
const INVENTORIES: &[dracheck_adapter::share::Embedded] = &[
    (DEFAULT_INVENTORY, include_bytes!("../inventory/default.yaml")),
    (COMPANION_INVENTORY, include_bytes!("../inventory/companion.yaml")),
];
/// Five GPUs of three models, one partitioned, one shared by memory.
pub const DEFAULT_INVENTORY: &str = "default.yaml";
/// The companion's two NICs.
pub const COMPANION_INVENTORY: &str = "companion.yaml";

/// A shipped inventory (`DEFAULT_INVENTORY`, `COMPANION_INVENTORY`) as a file the mock reads
/// (`--inventory`): written out of the binary into dracheck's cache.
pub fn shipped_inventory(name: &str) -> Result<PathBuf, AdapterError> {
    dracheck_adapter::share::materialize("mock-inventory", INVENTORIES)
        .map(|dir| dir.join(name))
        .map_err(|e| AdapterError::Inventory { path: e.path.clone(), source: e.into() })
}

/// [`shipped_inventory`], or where it would be when it cannot be written (reading it then
/// fails, naming the path).
fn shipped_path(name: &str) -> PathBuf {
    dracheck_adapter::share::materialize("mock-inventory", INVENTORIES).unwrap_or_else(|e| e.dir).join(name)
}

/// The mock's default inventory (see [`shipped_inventory`]).
pub fn default_inventory() -> PathBuf {
    shipped_path(DEFAULT_INVENTORY)
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
    fn a_workload_shows_each_devices_configuration() {
        let log = "DRACHECK_MOCK_CONFIG_1_dracheck=config-1\nDRACHECK_MOCK_DEVICE_0=gpu-0\nDRACHECK_MOCK_DEVICE_1=gpu-1\n\
                   DRACHECK_MOCK_CONFIG_1_level=3\nDRACHECK_MOCK_DEVICE_2=gpu-2\nDRACHECK_MOCK_CONFIG_2_dracheck=config-0\n";
        let seen = seen_config(log);
        assert_eq!(seen, [("gpu-0".to_string(), None), ("gpu-1".into(), Some(1)), ("gpu-2".into(), Some(0))].into());
        assert_eq!(seen_devices(log), ["gpu-0", "gpu-1", "gpu-2"], "configuration lines are no devices");
        assert_eq!((CONFIG.parameters)(1), serde_json::json!({"dracheck": "config-1"}));
    }

    #[test]
    fn a_workload_shows_its_share_of_a_device() {
        let log = "DRACHECK_MOCK_DEVICE_0=gpu-0\nDRACHECK_MOCK_DEVICE_5=gpu-5\n\
                   DRACHECK_MOCK_SHARE_5=0b9c2f1e-8d4a-4c3b-9e7f-1a2b3c4d5e6f\nDRACHECK_MOCK_CAPACITY_5_memory=4Gi\n";
        let seen = seen_shares(log);
        assert_eq!(seen.len(), 1, "a device held whole shows no share: {seen:?}");
        assert_eq!(seen["gpu-5"].share_id.as_deref(), Some("0b9c2f1e-8d4a-4c3b-9e7f-1a2b3c4d5e6f"));
        assert_eq!(seen["gpu-5"].capacity, [("memory".to_string(), "4Gi".to_string())].into());
    }

    #[test]
    fn a_changed_inventory_takes_out_adds_and_drops_what_it_says() {
        let inv = crate::inventory::Inventory::load(&default_inventory()).unwrap();
        let pool = inv.pool_for("n").unwrap();
        let before = crate::slices::published_devices(&pool.devices, &Default::default());
        let after = changed(before.clone());
        let names: Vec<&str> = after.iter().map(|d| d.name.as_str()).skip(before.len() - 2).take(2).collect();
        assert_eq!(names, ["gpu-4-half-1", "added-0"], "the last device is taken out, then the copies follow");
        assert_eq!(after.len(), before.len() - 1 + crate::slices::MAX_DEVICES_PER_SLICE, "more than one slice holds");
        let count =
            |d: &Device| (d.attributes.as_ref().map_or(0, |a| a.len()), d.capacity.as_ref().map_or(0, |c| c.len()));
        assert_eq!(count(&after[0]), (count(&before[0]).0 - 1, count(&before[0]).1));
        assert_eq!(count(&after[1]), (count(&before[1]).0, count(&before[1]).1 - 1));
        // What the mock reads back from the written file is what the oracle says.
        let counter_sets = crate::slices::published_counter_sets(&pool, &Default::default());
        let text = crate::inventory::render(&after, &counter_sets);
        let reread = crate::inventory::Inventory::parse(Path::new("x"), &text).unwrap().pool_for("n").unwrap();
        assert_eq!(crate::slices::published_devices(&reread.devices, &Default::default()), after);
        assert_eq!(crate::slices::published_counter_sets(&reread, &Default::default()), counter_sets);
    }

    #[test]
    fn the_shipped_inventories_are_there() {
        assert!(default_inventory().is_file(), "{}", default_inventory().display());
        let companion = shipped_inventory(COMPANION_INVENTORY).unwrap();
        assert_eq!(std::fs::read(&companion).unwrap(), include_bytes!("../inventory/companion.yaml"));
        let devices = crate::inventory::Inventory::load(&companion).unwrap().devices_for("any-node").unwrap().len();
        assert_eq!(devices, 2, "the companion has two devices on every node");
    }
}
