//! End to end on the local cluster: the real scheduler and controllers, emulated nodes in the
//! kubelet's DRA role, and the mock driver's real kubelet plugin on each node.

use std::time::Duration;

use dracheck_clusters::{LocalCluster, LocalClusterOptions};
use dracheck_mock_driver::adapter as mock;
use dracheck_mock_driver::cli::DEFAULT_DRIVER as MOCK_DRIVER;
use dracheck_objects::{claim, claim_template, device_class, pod};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use kube::api::{Api, ListParams, PostParams};

const NS: &str = "default";

async fn cluster_with_mock(nodes: usize) -> LocalCluster {
    let mut cluster = LocalCluster::start(LocalClusterOptions::from_env()).await.expect("the local cluster starts");
    cluster.add_nodes(nodes).await.expect("emulated nodes start");
    let bin = mock::binary().expect("the mock driver builds");
    cluster.start_driver(&mock::spec(&bin, &mock::default_inventory(), &[])).expect("the driver starts");
    let classes: Api<DeviceClass> = Api::all(cluster.client());
    classes.create(&PostParams::default(), &device_class("mock-gpu", MOCK_DRIVER, &[])).await.unwrap();
    for n in 0..nodes {
        let node = format!("node-{}", n + 1);
        wait_for(
            &cluster,
            &format!("the mock driver publishes the slice of {node}"),
            60,
            || slice_count(&cluster, &node),
            |c| *c == POOL_SLICES,
        )
        .await;
    }
    cluster
}

/// The slices of a node's pool in the mock's default inventory: its devices, and the counter
/// sets its partitions share.
const POOL_SLICES: usize = 2;

async fn slice_count(cluster: &LocalCluster, node: &str) -> usize {
    let slices: Api<ResourceSlice> = Api::all(cluster.client());
    let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
    slices.list(&lp).await.map(|l| l.items.len()).unwrap_or(usize::MAX)
}

/// Polls `get` until `ok` holds, or fails the test naming `what` and the node logs.
async fn wait_for<T: std::fmt::Debug, F, Fut>(
    cluster: &LocalCluster,
    what: &str,
    secs: u64,
    mut get: F,
    ok: impl Fn(&T) -> bool,
) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let v = get().await;
        if ok(&v) {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            let mut evidence = String::new();
            for n in cluster.nodes() {
                evidence += &format!(
                    "\n--- {} kubelet log\n{}",
                    n.name(),
                    std::fs::read_to_string(n.log_path()).unwrap_or_default()
                );
            }
            for d in cluster.drivers() {
                evidence += &format!("\n--- driver on {}\n{}", d.node, d.log_tail(30));
            }
            panic!("timed out after {secs}s waiting until {what}; last value {v:?}{evidence}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn pod_phase(pods: &Api<Pod>, name: &str) -> String {
    match pods.get_opt(name).await {
        Ok(Some(p)) => p.status.and_then(|s| s.phase).unwrap_or_default(),
        Ok(None) => "<gone>".into(),
        Err(e) => format!("<error {e}>"),
    }
}

#[tokio::test]
async fn a_template_claim_pod_sees_its_device_and_is_cleaned_up_after_it_ends() {
    let cluster = cluster_with_mock(1).await;
    let client = cluster.client();
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), NS);
    templates
        .create(
            &PostParams::default(),
            &claim_template(
                NS,
                "one-l4",
                "mock-gpu",
                1,
                &[r#"device.attributes["gpu.mock.dracheck.io"].model == "l4""#],
            ),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    // Runs long enough for the log to be read while it runs, then ends on its own.
    let spec = pod(NS, "reader").claim_from_template("gpu", "one-l4").command("env | sort; sleep 4").build();
    pods.create(&PostParams::default(), &spec).await.unwrap();

    wait_for(&cluster, "the pod runs", 90, || pod_phase(&pods, "reader"), |p| p == "Running").await;
    let running = pods.get("reader").await.unwrap();
    let claim_name = running.status.as_ref().unwrap().resource_claim_statuses.as_ref().unwrap()[0]
        .resource_claim_name
        .clone()
        .unwrap();
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), NS);
    let allocated = claims.get(&claim_name).await.unwrap();
    let device = allocated.status.unwrap().allocation.unwrap().devices.unwrap().results.unwrap()[0].device.clone();
    assert!(device == "gpu-2" || device == "gpu-3", "an l4 was allocated, got {device}");

    // pods/log goes through the apiserver to the emulated kubelet's endpoint.
    let logs = wait_for(
        &cluster,
        "the pod log shows the CDI env",
        30,
        || async { pods.logs("reader", &Default::default()).await.unwrap_or_else(|e| format!("<error {e}>")) },
        |l| l.contains("DRACHECK_MOCK_DEVICE"),
    )
    .await;
    assert!(
        logs.lines().any(|l| l.starts_with("DRACHECK_MOCK_DEVICE") && l.ends_with(&format!("={device}"))),
        "the env names {device}:\n{logs}"
    );

    wait_for(&cluster, "the pod succeeds", 60, || pod_phase(&pods, "reader"), |p| p == "Succeeded").await;
    // As kubelet, the claims are unprepared once the containers ended, before the phase says so.
    let prepared = cluster.nodes()[0].prepared_claims();
    assert!(prepared.is_empty(), "unprepared before the pod was reported Succeeded: {prepared:?}");
    wait_for(
        &cluster,
        "the generated claim is deleted",
        60,
        || async { claims.get_opt(&claim_name).await.ok().flatten().is_some() },
        |exists| !exists,
    )
    .await;
    let cdi_dir = cluster.nodes()[0].config().cdi_dir();
    wait_for(
        &cluster,
        "unprepare removed the CDI spec",
        30,
        || async { std::fs::read_dir(&cdi_dir).map(|d| d.count()).unwrap_or(0) },
        |n| *n == 0,
    )
    .await;
    let kubelet_log = std::fs::read_to_string(cluster.nodes()[0].log_path()).unwrap();
    // The v1 DRA service, and the health service the mock offers beside it.
    assert!(
        kubelet_log.contains("registered DRA plugin gpu.mock.dracheck.io (V1, health v1.DRAResourceHealth)"),
        "{kubelet_log}"
    );
}

#[tokio::test]
async fn a_driver_restart_does_not_break_a_running_pod_and_new_claims_work_after_it() {
    let mut cluster = cluster_with_mock(1).await;
    let client = cluster.client();
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    claims.create(&PostParams::default(), &claim(NS, "before", "mock-gpu", 1, &[])).await.unwrap();
    pods.create(&PostParams::default(), &pod(NS, "long").claim("gpu", "before").command("sleep 600").build())
        .await
        .unwrap();
    wait_for(&cluster, "the pod runs", 90, || pod_phase(&pods, "long"), |p| p == "Running").await;

    let old_pid = cluster.drivers()[0].pid();
    cluster.driver_mut("node-1").unwrap().restart(Duration::from_secs(5)).unwrap();
    assert_ne!(cluster.drivers()[0].pid(), old_pid);

    claims.create(&PostParams::default(), &claim(NS, "after", "mock-gpu", 1, &[])).await.unwrap();
    pods.create(&PostParams::default(), &pod(NS, "new").claim("gpu", "after").command("sleep 600").build())
        .await
        .unwrap();
    wait_for(&cluster, "a pod started after the restart runs", 90, || pod_phase(&pods, "new"), |p| p == "Running")
        .await;
    assert_eq!(pod_phase(&pods, "long").await, "Running", "the old pod keeps running");
    let restarts = pods.get("long").await.unwrap().status.unwrap().container_statuses.unwrap()[0].restart_count;
    assert_eq!(restarts, 0);
    let still = claims.get("before").await.unwrap().status.unwrap();
    assert!(
        still.allocation.is_some() && still.reserved_for.is_some_and(|r| !r.is_empty()),
        "the old claim keeps its device"
    );
    assert_eq!(slice_count(&cluster, "node-1").await, POOL_SLICES, "a quick restart does not wipe the slices");
}

#[tokio::test]
async fn a_kubelet_restart_prepares_nothing_again_and_a_shared_claim_goes_with_its_last_pod() {
    let mut cluster = cluster_with_mock(1).await;
    let client = cluster.client();
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    claims.create(&PostParams::default(), &claim(NS, "shared", "mock-gpu", 1, &[])).await.unwrap();
    // One pod ends on its own after the restart, the other runs on.
    for (name, script) in [("short", "sleep 8"), ("long", "sleep 600")] {
        pods.create(&PostParams::default(), &pod(NS, name).claim("gpu", "shared").command(script).build())
            .await
            .unwrap();
    }
    for name in ["short", "long"] {
        wait_for(&cluster, &format!("{name} runs"), 90, || pod_phase(&pods, name), |p| p == "Running").await;
    }
    let uid = claims.get("shared").await.unwrap().metadata.uid.unwrap();
    let cdi_dir = cluster.nodes()[0].config().cdi_dir();
    let specs = || std::fs::read_dir(&cdi_dir).map(|d| d.count()).unwrap_or(0);

    cluster.node_mut("node-1").unwrap().restart_kubelet().await.unwrap();
    let log_path = cluster.nodes()[0].log_path();
    wait_for(
        &cluster,
        "the restarted kubelet takes the running pod's claim from its checkpoint",
        30,
        || async { std::fs::read_to_string(&log_path).unwrap_or_default() },
        |l| l.contains("claims taken from the checkpoint, not prepared again: default/long (shared)"),
    )
    .await;
    wait_for(
        &cluster,
        "the wiped slice is published again",
        30,
        || slice_count(&cluster, "node-1"),
        |c| *c == POOL_SLICES,
    )
    .await;
    wait_for(&cluster, "short succeeds", 60, || pod_phase(&pods, "short"), |p| p == "Succeeded").await;
    // The pod still running keeps the claim prepared.
    let prepared = cluster.nodes()[0].prepared_claims();
    assert!(prepared.iter().any(|(u, _)| *u == uid), "still prepared for long: {prepared:?}");
    assert_eq!(specs(), 1, "the claim's CDI spec stays");
    let driver_log = cluster.drivers()[0].log_tail(200);
    assert_eq!(driver_log.matches("NodePrepareResources default/shared").count(), 1, "prepared once:\n{driver_log}");
    assert!(!driver_log.contains("NodeUnprepareResources"), "nothing unprepared yet:\n{driver_log}");

    pods.delete("long", &Default::default()).await.unwrap();
    wait_for(&cluster, "long is gone", 60, || pod_phase(&pods, "long"), |p| p == "<gone>").await;
    let prepared = cluster.nodes()[0].prepared_claims();
    assert!(prepared.is_empty(), "unprepared with its last pod: {prepared:?}");
    assert_eq!(specs(), 0, "the driver removed the CDI spec it wrote before the restart");
    let driver_log = cluster.drivers()[0].log_tail(200);
    let unprepared = format!("NodeUnprepareResources default/shared ({uid}): unprepared");
    assert_eq!(driver_log.matches(&unprepared).count(), 1, "unprepared once:\n{driver_log}");
}

#[tokio::test]
async fn a_removed_node_loses_its_slices_and_keeps_no_claim_allocated() {
    let mut cluster = cluster_with_mock(2).await;
    let client = cluster.client();
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    claims.create(&PostParams::default(), &claim(NS, "pinned", "mock-gpu", 1, &[])).await.unwrap();
    pods.create(&PostParams::default(), &pod(NS, "victim").claim("gpu", "pinned").command("sleep 600").build())
        .await
        .unwrap();
    wait_for(&cluster, "the pod runs", 90, || pod_phase(&pods, "victim"), |p| p == "Running").await;
    let node = pods.get("victim").await.unwrap().spec.unwrap().node_name.unwrap();

    cluster.remove_node(&node).await.unwrap();
    wait_for(
        &cluster,
        "the garbage collector removes the node's slices",
        60,
        || slice_count(&cluster, &node),
        |c| *c == 0,
    )
    .await;
    // The pod is orphaned; the controller-manager's PodGC deletes it (after a quarantine).
    wait_for(&cluster, "PodGC removes the orphaned pod", 150, || pod_phase(&pods, "victim"), |p| p == "<gone>").await;
    let cleared = wait_for(
        &cluster,
        "the claim is deallocated",
        60,
        || async { claims.get("pinned").await.unwrap().status.unwrap_or_default() },
        |s| s.allocation.is_none(),
    )
    .await;
    assert!(cleared.reserved_for.is_none_or(|r| r.is_empty()));
    let other = if node == "node-1" { "node-2" } else { "node-1" };
    assert_eq!(slice_count(&cluster, other).await, POOL_SLICES, "the other node keeps its slices");

    // Capacity elsewhere is used: the same claim now lands on the remaining node.
    pods.create(&PostParams::default(), &pod(NS, "moved").claim("gpu", "pinned").command("sleep 600").build())
        .await
        .unwrap();
    wait_for(
        &cluster,
        "a new pod with the claim runs on the other node",
        90,
        || pod_phase(&pods, "moved"),
        |p| p == "Running",
    )
    .await;
    assert_eq!(pods.get("moved").await.unwrap().spec.unwrap().node_name.as_deref(), Some(other));
}
