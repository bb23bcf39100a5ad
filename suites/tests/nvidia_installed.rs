//! The `--driver nvidia` path of a run against an existing cluster, end to end on the local
//! cluster: the real control plane, the NVIDIA driver's DeviceClasses, the shipped nvidia
//! profiles, the NVML inventory check and the `nvidia-smi -L` workload check.
//!
//! No NVIDIA GPU is here, so what publishes `gpu.nvidia.com` devices is the mock driver given
//! the devices the NVIDIA driver publishes for a recorded host (`expected_devices` of an NVML
//! recording, plus the attributes NVML does not vouch for), and what lists a container's GPUs
//! is a stand-in for `nvidia-smi -L` that prints, in nvidia-smi's format, the GPUs the mock's
//! CDI environment gave the container. Everything the suite decides from (allocation by the
//! real scheduler, slices, pod logs, the NVML comparison) is the same as on a GPU cluster.

use std::path::{Path, PathBuf};
use std::time::Duration;

use dracheck_clusters::local::{DriverSpec, NodeKind, Progress};
use dracheck_clusters::{LocalCluster, LocalClusterOptions};
use dracheck_nvidia::adapter::Options as NvidiaOptions;
use dracheck_nvidia::record::{Gpu, Recording};
use dracheck_suites::engine::Filter;
use dracheck_suites::engine::target::{
    NEEDS_DRIVER_PODS, NEEDS_DRIVER_PROCESSES, NEEDS_DRIVER_PROCESSES_UPGRADE, NEEDS_NODE_CONTROL,
};
use dracheck_suites::local_run::{self, ExistingRun};
use dracheck_suites::profile::ids::*;
use dracheck_suites::result::{RunResult, Verdict};
use k8s_openapi::api::resource::v1::{Device, ResourceSlice};
use kube::api::{Api, ListParams};

const NODES: usize = 4;

/// A host of eight H100s as NVML would report it.
fn recording() -> Recording {
    Recording {
        format: dracheck_nvidia::record::FORMAT,
        source: "synthetic".into(),
        note: "eight H100 80GB, made up for the nvidia path test".into(),
        driver_version: "570.133.20".into(),
        cuda_driver_version: 12080,
        gpus: (0..8)
            .map(|i| Gpu {
                index: i,
                minor: i,
                uuid: format!("GPU-0b3c55e1-7d2f-4a1e-9c6b-00000000000{i}"),
                product_name: "NVIDIA H100 80GB HBM3".into(),
                memory_bytes: 85_520_809_984,
                mig_enabled: Some(false),
                cuda_compute_capability: "9.0".into(),
            })
            .collect(),
    }
}

/// What the NVIDIA driver publishes for that host: what NVML vouches for, and the attributes
/// it reads elsewhere.
fn published(rec: &Recording) -> Vec<Device> {
    dracheck_nvidia::compare::expected_devices(rec)
        .into_iter()
        .map(|mut d| {
            let attrs = d.attributes.get_or_insert_default();
            for (name, value) in [("brand", "Nvidia"), ("architecture", "Hopper")] {
                attrs.insert(
                    name.into(),
                    k8s_openapi::api::resource::v1::DeviceAttribute {
                        string: Some(value.into()),
                        ..Default::default()
                    },
                );
            }
            d
        })
        .collect()
}

/// `nvidia-smi -L` for the GPUs the mock's CDI env (`DRACHECK_MOCK_DEVICE_<n>=gpu-<minor>`)
/// gives the container.
fn stand_in_smi(dir: &Path, rec: &Recording) -> PathBuf {
    let cases: String = rec
        .gpus
        .iter()
        .map(|g| format!("    gpu-{}) echo \"GPU $i: {} (UUID: {})\" ;;\n", g.minor, g.product_name, g.uuid))
        .collect();
    let script = format!(
        "#!/bin/sh\ni=0\nfor d in $(env | grep '^DRACHECK_MOCK_DEVICE_' | cut -d= -f2 | sort -u); do\n  case \"$d\" in\n{cases}  esac\n  i=$((i+1))\ndone\n"
    );
    let path = dir.join("nvidia-smi");
    std::fs::write(&path, script).expect("writing the stand-in");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// A local cluster whose nodes run the mock as `gpu.nvidia.com` with `faults`, the NVIDIA
/// chart's DeviceClasses installed, and the suite run against it as against any cluster
/// where the driver is installed.
async fn run(label: &'static str, faults: &[&str]) -> RunResult {
    let progress = Progress::to(move |l| eprintln!("[{label}] {l}"));
    let work = tempfile::tempdir().expect("a temp dir");
    let rec = recording();
    let recording_file = work.path().join("nvml.json");
    std::fs::write(&recording_file, serde_json::to_string(&rec).unwrap()).unwrap();
    let inventory = work.path().join("inventory.yaml");
    std::fs::write(&inventory, dracheck_mock_driver::inventory::render(&published(&rec), &[])).unwrap();

    // Emulated nodes whatever DRACHECK_NODE_KIND says: the stand-in `nvidia-smi` is a host
    // file, and a real node's container would need an image with it.
    let mut cluster = LocalCluster::start(LocalClusterOptions {
        progress: progress.clone(),
        node_kind: NodeKind::Emulated,
        ..LocalClusterOptions::from_env()
    })
    .await
    .expect("the local cluster starts");
    cluster.add_nodes(NODES).await.expect("nodes start");
    let first_node = cluster.nodes()[0].name().to_string();
    let opts = NvidiaOptions {
        host: dracheck_nvidia::host::HostView { recording: Some(recording_file), node: Some(first_node) },
        smi: stand_in_smi(work.path(), &rec).display().to_string(),
        ..NvidiaOptions::default()
    };
    let adapter = dracheck_nvidia::adapter::adapter(opts);
    // What the chart would install.
    local_run::install_driver(&cluster.client(), &adapter).await.expect("the classes install");
    let mock = dracheck_mock_driver::adapter::binary().expect("the mock builds");
    let mut args: Vec<String> = [
        "--driver-name={driver}",
        "--node-name={node}",
        "--kubeconfig={kubeconfig}",
        "--registrar-dir={registrar-dir}",
        "--plugin-dir={plugin-dir}",
        "--cdi-dir={cdi-dir}",
    ]
    .iter()
    .map(|a| a.replace("{driver}", dracheck_nvidia::DRIVER))
    .collect();
    args.push(format!("--inventory={}", inventory.display()));
    args.extend(faults.iter().map(|f| format!("--fault={f}")));
    cluster
        .start_driver(&DriverSpec::from_template(dracheck_nvidia::DRIVER, &mock, &args).unwrap())
        .expect("the drivers start");
    wait_for_slices(&cluster.client()).await;
    // The plugin's pod as the chart runs it, for the driver's version; on an emulated node
    // its command runs on the host.
    let plugin_pod = dracheck_objects::pod("default", "dra-driver-nvidia-gpu-kubelet-plugin")
        .on_node(cluster.nodes()[1].name())
        .image("registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.0")
        .command("sleep 3600")
        .build();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(cluster.client(), "default");
    pods.create(&Default::default(), &plugin_pod).await.expect("the plugin pod is created");

    let profiles = dracheck_suites::profile::shipped("nvidia")
        .into_iter()
        .map(|p| dracheck_suites::profile::load(&p).map(|l| (p, l)).expect("a shipped profile loads"))
        .collect();
    let cfg = ExistingRun {
        local: None,
        kubeconfig: cluster.kubeconfig().to_path_buf(),
        context: None,
        adapter,
        profiles,
        filter: Filter::default(),
        scenario_timeout: Duration::from_secs(240),
        parallel: 0,
        companion: None,
        driver_pods: None,
    };
    let result =
        local_run::run_existing(cfg, &local_run::run_id(), &progress).await.map_err(|e| e.message).unwrap().result;
    cluster.stop();
    result
}

async fn wait_for_slices(client: &kube::Client) {
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    let lp = ListParams::default().fields(&format!("spec.driver={}", dracheck_nvidia::DRIVER));
    for _ in 0..240 {
        if slices.list(&lp).await.is_ok_and(|l| l.items.len() >= NODES) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("the mock published no gpu.nvidia.com slices on every node within 60s");
}

fn verdicts(r: &RunResult, id: &str) -> Vec<(Verdict, String)> {
    r.all().filter(|g| g.id == id).map(|g| (g.verdict, g.reason.clone())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_installed_nvidia_driver_is_judged_by_nvml_and_nvidia_smi() {
    let (good, broken) = tokio::join!(
        run("nvidia", &[]),
        run(
            "nvidia-broken",
            &["prepare-wrong-device", "wrong-attribute=productName=NVIDIA A100-SXM4-40GB", "no-owner-reference"]
        )
    );

    // The good driver: every guarantee the suite can check on an installed driver holds; the
    // rest is skipped because the suite does not own the driver's binary, its processes or the
    // nodes (driver restarts through a DaemonSet: installed_driver_restart.rs).
    let mut problems = Vec::new();
    for g in good.all() {
        let allowed_skip = g.id.starts_with("plugin.")
            || g.reason.contains(NEEDS_NODE_CONTROL)
            || g.reason.contains(NEEDS_DRIVER_PODS)
            || g.reason.contains(NEEDS_DRIVER_PROCESSES)
            || g.reason.contains(NEEDS_DRIVER_PROCESSES_UPGRADE)
            || (g.id == LIFECYCLE_UNPREPARED && g.reason.contains("checkpoint is read from the node"));
        match g.verdict {
            Verdict::Pass => {}
            Verdict::Skip if allowed_skip || g.id == VERSIONS_DRIVER => {}
            v => problems.push(format!("{} is {v}: {}", g.id, g.reason)),
        }
    }
    assert!(problems.is_empty(), "the good run:\n{}", problems.join("\n"));
    assert_eq!(good.driver.version, "0.4.0", "the version comes from the plugin pod's image tag");
    let inventory = verdicts(&good, PLUGIN_SLICES_MATCH_INVENTORY);
    assert!(
        matches!(inventory.as_slice(), [(Verdict::Pass, why)] if why.contains("8 GPU(s)")),
        "the NVML check ran: {inventory:?}"
    );
    for (v, why) in verdicts(&good, WORKLOAD_SEES_DEVICES) {
        assert!(v == Verdict::Pass && why.contains("GPU-0b3c55e1"), "nvidia-smi -L was read by UUID: {why}");
    }
    let owned = verdicts(&good, PLUGIN_SLICES_OWNED_BY_NODE);
    assert!(matches!(owned.as_slice(), [(Verdict::Pass, _)]), "the installed slices follow the pool rules: {owned:?}");
    for (v, why) in verdicts(&good, PLUGIN_PREPARE_ALLOCATED_CLAIM) {
        assert!(v == Verdict::Skip && why.contains("needs the driver's binary"), "{why}");
    }

    // The broken one: published products disagree with NVML, the slices have no owner, and
    // containers get another GPU than the one allocated.
    let inventory = verdicts(&broken, PLUGIN_SLICES_MATCH_INVENTORY);
    assert!(
        matches!(inventory.as_slice(), [(Verdict::Fail, why)] if why.contains("productName")),
        "the NVML check caught the product names: {inventory:?}"
    );
    let owned = verdicts(&broken, PLUGIN_SLICES_OWNED_BY_NODE);
    assert!(
        matches!(owned.as_slice(), [(Verdict::Fail, why)] if why.contains("not controlled by Node")),
        "slices without the Node as owner: {owned:?}"
    );
    let isolation = verdicts(&broken, ISOLATION_EXCLUSIVE);
    assert!(
        !isolation.is_empty() && isolation.iter().all(|(v, _)| *v == Verdict::Fail),
        "every profile's isolation fails: {isolation:?}"
    );
    assert!(!broken.all_held());
}
