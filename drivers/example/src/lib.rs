//! kubernetes-sigs/dra-example-driver (`gpu.example.com`) as dracheck runs it on the local
//! cluster: its kubelet plugin built from the upstream Go module at a pinned release, the
//! command line that points it at an emulated node's directories, the DeviceClass its chart
//! installs, and an inventory oracle written from what the driver documents.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dracheck_adapter::spec::{DriverSpec, HELPER_FLAGS};
use dracheck_adapter::{Adapter, ConfigProbe, Workload};
use dracheck_gobuild::{self as gobuild, GoBinary, GoBuildError, GoRecipe, Progress};
use k8s_openapi::api::resource::v1::{Device, DeviceAttribute, DeviceClass};

/// The DRA driver name of the `gpu` device profile (`<profile>.example.com`).
pub const DRIVER: &str = "gpu.example.com";
/// The pinned upstream release; `recipes/<release>/` holds its Go recipe.
pub const RELEASE: &str = "v0.4.0";
/// Devices per node: the plugin's `--num-devices` default and the chart's
/// `kubeletPlugin.numDevices`.
pub const DEVICES_PER_NODE: u32 = 8;
/// The binary the recipe builds.
pub const BINARY: &str = "dra-example-kubeletplugin";
/// What the oracle says of a `uuid` attribute: the driver draws UUIDs from Go's `math/rand`
/// seeded with a hash of the node name, so the oracle holds their documented form, and
/// [`canonical`] turns a published UUID of that form into the same text.
pub const UUID_FORM: &str = "gpu-<uuid>";

/// A guarantee the pinned release does not meet, found by running the suite against it, and
/// why (read in the driver's source). `suites/tests/example_driver.rs` holds the run to it:
/// these fail, everything else passes.
pub struct Finding {
    pub id: &'static str,
    pub why: &'static str,
}

pub const FINDINGS: &[Finding] = &[
    Finding {
        id: "plugin.prepare.refuses-foreign-node",
        why: "v0.4.0 prepares a claim whose allocation names another node's pool: it looks allocated devices up by \
          name only (cmd/dra-example-kubeletplugin/state.go, computeDeviceConfig: `s.allocatable[result.Device]`), \
          and every node has gpu-0 … gpu-7, so it hands out this node's gpu-0 for another node's gpu-0. A kubelet \
          sends only claims allocated for its node, so it takes a stale or misrouted claim to matter.",
    },
    Finding {
        id: "node.reboot.workloads-resume",
        why: "v0.4.0 does not bring its pods back after a node reboot: its Prepare answers a claim its checkpoint \
              lists from the checkpoint and returns before it writes the claim's CDI spec \
              (cmd/dra-example-kubeletplugin/state.go, DeviceState.Prepare: `restoreClaimFromCheckpoint` returns \
              ahead of `CreateClaimSpecFile`). The checkpoint is on disk and survives the reboot, the spec in \
              /var/run/cdi (tmpfs) does not, so the kubelet's new Prepare gets IDs nothing resolves and the pod stays \
              in CreateContainerError (`unresolvable CDI devices k8s.gpu.example.com/gpu=<claim>-gpu-0`), the bug \
              of dra-example-driver issue 259 and kubernetes issue 141433.",
    },
    Finding {
        id: "prioritized.chosen-subrequest",
        why: "v0.4.0 matches an opaque configuration to an allocation result by the exact request name \
              (cmd/dra-example-kubeletplugin/state.go, prepareDevices: `slices.Contains(c.Requests, result.Request)`), \
              so a configuration given for a whole `firstAvailable` request (`gpu`) never reaches the device allocated \
              for one of its alternatives (`gpu/fits`): the device gets the driver's default GpuConfig instead.",
    },
];

/// How the plugin is built: `go build` of its command package from a recipe that requires
/// the release (and pins its dependencies through go.sum).
pub fn recipe() -> GoRecipe {
    GoRecipe {
        what: format!("dra-example-driver {RELEASE}"),
        cache_subdir: Path::new("drivers/dra-example-driver").join(RELEASE),
        version: RELEASE,
        // What the upstream Makefile stamps; this command does not read it yet.
        version_ldflags: format!("-X main.version={RELEASE}"),
        go_mod: include_str!("../recipes/v0.4.0/go.mod"),
        go_sum: include_str!("../recipes/v0.4.0/go.sum"),
        min_go: "1.26.0",
        estimate: "about 3 min on 2 cores with an empty Go cache",
        instead: "pass --driver-bin with a dra-example-kubeletplugin you built",
        binaries: vec![GoBinary {
            name: BINARY,
            package: "sigs.k8s.io/dra-example-driver/cmd/dra-example-kubeletplugin",
            stamped: true,
            ..GoBinary::PLAIN
        }],
    }
}

/// The plugin binary, built into dracheck's cache on first use.
pub async fn binary(progress: &Progress) -> Result<PathBuf, GoBuildError> {
    Ok(gobuild::cached_or_build(&recipe(), progress).await?.join(BINARY))
}

/// The driver as the suite knows it: its plugin at `program` with `devices` GPUs per node, the
/// devices it publishes as the oracle, its CDI environment as what a workload sees, and the
/// DeviceClass its chart installs.
pub fn adapter(program: &Path, devices: u32) -> Adapter {
    Adapter {
        oracle: Some(Arc::new(move |_node: &str| Ok(published_devices(devices)))),
        canonical,
        workload: Workload { config: Some(CONFIG), ..Workload::env(Some(seen_devices)) },
        device_classes: vec![device_class()],
        // The upstream helper's rolling update: sockets named after the pod UID it is given.
        instance_args: Some(|id| vec![format!("--pod-uid={id}")]),
        change_inventory: devices.checked_sub(1).map(|fewer| {
            let program = program.to_path_buf();
            let change: dracheck_adapter::ChangeInventory = Arc::new(move |_node: &str, _dir: &Path| {
                Ok(dracheck_adapter::InventoryChange {
                    what: format!("the plugin started with --num-devices={fewer}: its last GPU taken out"),
                    spec: spec(&program, fewer),
                    devices: published_devices(fewer),
                })
            });
            change
        }),
        ..Adapter::runnable("example", spec(program, devices), RELEASE.trim_start_matches('v').into())
    }
}

/// The plugin on an emulated node, with the flags of the upstream kubeletplugin helper that
/// its DaemonSet sets through the environment. Health and metrics servers stay off: they
/// would listen on every interface.
pub fn spec(program: &Path, devices: u32) -> DriverSpec {
    let template: Vec<String> = HELPER_FLAGS
        .iter()
        .map(|f| f.to_string())
        .chain([
            format!("--num-devices={devices}"),
            "--device-profile=gpu".into(),
            "--healthcheck-port=-1".into(),
            "--metrics-port=-1".into(),
        ])
        .collect();
    DriverSpec::from_template(DRIVER, program, &template).expect("the helper flags use known placeholders")
}

/// The DeviceClass the chart installs (`templates/deviceclass.yaml`): named after the
/// driver, selecting all of its devices.
pub fn device_class() -> DeviceClass {
    dracheck_objects::device_class(DRIVER, DRIVER, &[])
}

/// What the `gpu` profile publishes for a node (`internal/profiles/gpu`): devices `gpu-0` …
/// with `index` (int), `uuid` (string, see [`UUID_FORM`]), `model` `LATEST-GPU-MODEL` and
/// `driverVersion` 1.0.0 (version), and capacities `memory` 80Gi and `compute` 100.
pub fn published_devices(devices: u32) -> Vec<Device> {
    (0..devices)
        .map(|i| {
            dracheck_objects::device(&format!("gpu-{i}"))
                .int("index", i64::from(i))
                .string("uuid", UUID_FORM)
                .string("model", "LATEST-GPU-MODEL")
                .version("driverVersion", "1.0.0")
                .capacity("memory", "80Gi")
                .capacity("compute", "100")
                .build()
        })
        .collect()
}

/// A published device as the oracle can compare it: a `uuid` of the documented form becomes
/// [`UUID_FORM`]; anything else is left as published, so that a malformed one shows.
pub fn canonical(mut device: Device) -> Device {
    if let Some(uuid) = device.attributes.as_mut().and_then(|a| a.get_mut("uuid"))
        && uuid.string.as_deref().is_some_and(is_gpu_uuid)
    {
        *uuid = DeviceAttribute { string: Some(UUID_FORM.into()), ..DeviceAttribute::default() };
    }
    device
}

/// `gpu-` and a UUID in its canonical 8-4-4-4-12 lowercase hex form.
fn is_gpu_uuid(s: &str) -> bool {
    let Some(uuid) = s.strip_prefix("gpu-") else { return false };
    let groups: Vec<&str> = uuid.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups.iter().all(|g| g.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)))
}

/// The devices a workload's `env` output shows: the claim's CDI spec sets
/// `GPU_DEVICE_<n>=gpu-<n>` for each prepared device.
pub fn seen_devices(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| l.trim().split_once('='))
        .filter(|(k, v)| k.starts_with("GPU_DEVICE_") && v.starts_with("gpu-"))
        .map(|(_, v)| v.to_string())
        .collect()
}

/// The time-slice intervals of the suite's configurations: a `GpuConfig` whose sharing is
/// time slicing with one of these, which the driver's CDI edits show as
/// `GPU_DEVICE_<n>_TIMESLICE_INTERVAL`. `Default`, what a device without config gets, is none
/// of them.
const INTERVALS: [&str; dracheck_adapter::CONFIG_VARIANTS] = ["Short", "Long"];

/// The driver's opaque configuration, `gpu.resource.example.com/v1alpha1` `GpuConfig`.
pub const CONFIG: ConfigProbe = ConfigProbe {
    parameters: |i| {
        serde_json::json!({
            "apiVersion": "gpu.resource.example.com/v1alpha1",
            "kind": "GpuConfig",
            "sharing": { "strategy": "TimeSlicing", "timeSlicingConfig": { "interval": INTERVALS[i] } },
        })
    },
    seen: seen_config,
};

/// Per device of a workload's `env` output, which of [`INTERVALS`] its time slicing has.
pub fn seen_config(log: &str) -> std::collections::BTreeMap<String, Option<usize>> {
    let vars: Vec<(&str, &str)> = log.lines().filter_map(|l| l.trim().split_once('=')).collect();
    vars.iter()
        .filter(|(k, v)| k.starts_with("GPU_DEVICE_") && v.starts_with("gpu-"))
        .map(|(k, device)| {
            let setting = format!("{k}_TIMESLICE_INTERVAL");
            let interval = vars.iter().find(|(v, _)| *v == setting).map(|(_, value)| *value);
            (device.to_string(), interval.and_then(|i| INTERVALS.iter().position(|known| *known == i)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_published_uuid_of_the_documented_form_matches_the_oracle() {
        let oracle = &published_devices(2)[1];
        let mut published = oracle.clone();
        published.attributes.as_mut().unwrap().get_mut("uuid").unwrap().string =
            Some("gpu-4fa7ea1c-7b14-2d6a-0b87-2f1b0b7a7c11".into());
        assert_eq!(&canonical(published.clone()), oracle);
        for bad in ["4fa7ea1c-7b14-2d6a-0b87-2f1b0b7a7c11", "gpu-4FA7EA1C-7b14-2d6a-0b87-2f1b0b7a7c11", "gpu-1"] {
            published.attributes.as_mut().unwrap().get_mut("uuid").unwrap().string = Some(bad.into());
            assert_ne!(&canonical(published.clone()), oracle, "{bad} is not of the documented form");
        }
    }

    #[test]
    fn the_workload_sees_the_gpu_device_variables_only() {
        let log = "DRA_ADMIN_ACCESS=false\nGPU_DEVICE_1=gpu-1\nGPU_DEVICE_GPU_1_RESOURCE_CLAIM=9c1f\n\
                   GPU_DEVICE_3=gpu-3\nGPU_DEVICE_3_SHARING_STRATEGY=TimeSlicing\nKUBERNETES_NODE_NAME=node-1\n";
        assert_eq!(seen_devices(log), ["gpu-1", "gpu-3"]);
    }

    #[test]
    fn a_workload_shows_the_time_slice_of_each_device() {
        let log = "GPU_DEVICE_1=gpu-1\nGPU_DEVICE_1_SHARING_STRATEGY=TimeSlicing\nGPU_DEVICE_1_TIMESLICE_INTERVAL=Long\n\
                   GPU_DEVICE_3=gpu-3\nGPU_DEVICE_3_TIMESLICE_INTERVAL=Default\nGPU_DEVICE_2=gpu-2\n";
        let seen = seen_config(log);
        assert_eq!(seen, [("gpu-1".to_string(), Some(1)), ("gpu-2".into(), None), ("gpu-3".into(), None)].into());
        assert_eq!((CONFIG.parameters)(0)["sharing"]["timeSlicingConfig"]["interval"], "Short");
    }

    #[test]
    fn the_plugin_gets_the_node_dirs_and_no_network_listeners() {
        let node = dracheck_adapter::spec::NodeDirs { name: "node-1".into(), root: "/tmp/c/nodes/node-1".into() };
        let args = (spec(Path::new("/bin/plugin"), 4).args)(&node, Path::new("/tmp/kc"));
        for want in [
            "--node-name=node-1",
            "--kubeconfig=/tmp/kc",
            "--num-devices=4",
            "--healthcheck-port=-1",
            "--metrics-port=-1",
        ] {
            assert!(args.iter().any(|a| a == want), "{want} in {args:?}");
        }
        assert!(args.iter().any(|a| a == "--kubelet-plugins-directory-path=/tmp/c/nodes/node-1/plugins"), "{args:?}");
    }

    #[test]
    fn the_recipe_requires_the_pinned_release() {
        let r = recipe();
        assert!(r.go_mod.contains(&format!("sigs.k8s.io/dra-example-driver {RELEASE}")), "{}", r.go_mod);
        assert!(r.go_sum.contains(&format!("sigs.k8s.io/dra-example-driver {RELEASE} h1:")));
    }
}
