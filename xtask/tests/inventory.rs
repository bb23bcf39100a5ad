//! `cargo xtask inventory --driver nvidia` as a user meets it: without NVML it says so and
//! exits 3; with a recording of NVML it sets each GPU next to what the cluster publishes for
//! the node and exits 1 on any disagreement.

mod common;

use common::{text, xtask};
use dracheck_clusters::{LocalCluster, LocalClusterOptions};
use dracheck_nvidia::compare::expected_devices;
use dracheck_nvidia::record::Recording;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, PostParams};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../drivers/nvidia/tests/fixtures/synthetic-2xa100.json");

#[test]
fn without_nvml_it_says_so() {
    if dracheck_nvidia::nvml::read("probe").is_ok() {
        eprintln!("skipped: this machine has NVML, so there is no absence to report");
        return;
    }
    let out = xtask(&["inventory", "--driver", "nvidia", "--record", "/tmp/never-written.json"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        text(&out).contains("no NVML on this machine") && text(&out).contains("--nvml-recording"),
        "{}",
        text(&out)
    );
    let other = xtask(&["inventory", "--driver", "mock"]);
    assert_eq!(other.status.code(), Some(2), "{}", text(&other));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_against_the_published_slices() {
    let cluster = LocalCluster::start(LocalClusterOptions::from_env()).await.expect("the local cluster starts");
    let client = cluster.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes.create(&PostParams::default(), &dracheck_objects::node("gpu-node", "127.0.10.9")).await.unwrap();
    let nvml = Recording::parse(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap();
    let mut devices = expected_devices(&nvml);
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    let uid = node.metadata.uid.unwrap();
    slices
        .create(
            &PostParams::default(),
            &dracheck_objects::resource_slice("gpu.nvidia.com", "gpu-node", &uid, devices.clone()),
        )
        .await
        .unwrap();
    let kubeconfig = cluster.kubeconfig().to_str().unwrap().to_string();
    let run = || {
        xtask(&[
            "inventory",
            "--driver",
            "nvidia",
            "--node",
            "gpu-node",
            "--kubeconfig",
            &kubeconfig,
            "--nvml-recording",
            FIXTURE,
        ])
    };
    let agree = run();
    assert_eq!(agree.status.code(), Some(0), "{}", text(&agree));
    assert!(text(&agree).contains(&nvml.gpus[1].uuid), "{}", text(&agree));

    // The driver loses the second GPU: a new generation of the pool without it.
    devices.pop();
    let mut fewer = dracheck_objects::resource_slice("gpu.nvidia.com", "gpu-node", &uid, devices);
    fewer.metadata.name = Some("gpu-node-gpu-nvidia-com-2".into());
    fewer.spec.pool.generation = 2;
    slices.create(&PostParams::default(), &fewer).await.unwrap();
    let differ = run();
    assert_eq!(differ.status.code(), Some(1), "{}", text(&differ));
    assert!(text(&differ).contains(&format!("GPU {} (minor", nvml.gpus[1].uuid)), "{}", text(&differ));
    assert!(text(&differ).contains("| nothing"), "{}", text(&differ));
}
