//! The allocation verdict comes from the real kube-scheduler: it allocates a device a slice
//! offers and reserves it for the pod, and it refuses a request no slice can meet.

use std::time::Duration;

use dracheck_clusters::{LocalCluster, LocalClusterOptions};
use dracheck_objects::{claim, device, device_class, node, pod, resource_slice};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;

const DRIVER: &str = "gpu.dracheck.io";
const NS: &str = "default";

/// A node with a slice of three GPUs of two models, and a class for the driver.
async fn inventory(client: &kube::Client) -> Vec<String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let created = nodes.create(&PostParams::default(), &node("node-a", "127.0.10.1")).await.unwrap();
    // Status on create is not guaranteed to be kept; set it the way a kubelet does.
    let status = serde_json::json!({ "status": node("node-a", "127.0.10.1").status });
    nodes.patch_status("node-a", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    let uid = created.metadata.uid.unwrap();
    // Admission taints every new node `not-ready` until the node lifecycle controller sees
    // it Ready; only an untainted node makes the DRA verdict the only possible one.
    tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(nodes.clone(), "node-a", |n: Option<&Node>| {
            n.and_then(|n| n.spec.as_ref()).is_some_and(|s| s.taints.as_ref().is_none_or(|t| t.is_empty()))
        }),
    )
    .await
    .expect("the node lifecycle controller untaints the Ready node within 60s")
    .unwrap();

    let devices = vec![
        device("gpu-0").string("model", "a100").capacity("memory", "40Gi").build(),
        device("gpu-1").string("model", "a100").capacity("memory", "40Gi").build(),
        device("gpu-2").string("model", "l4").capacity("memory", "24Gi").build(),
    ];
    let names = devices.iter().map(|d| d.name.clone()).collect();
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    slices.create(&PostParams::default(), &resource_slice(DRIVER, "node-a", &uid, devices)).await.unwrap();
    let classes: Api<DeviceClass> = Api::all(client.clone());
    classes.create(&PostParams::default(), &device_class("gpu", DRIVER, &[])).await.unwrap();
    names
}

#[tokio::test]
async fn the_scheduler_allocates_a_device_from_the_slice_and_binds_the_pod() {
    let cluster = LocalCluster::start(LocalClusterOptions::from_env()).await.unwrap();
    let client = cluster.client();
    let offered = inventory(&client).await;

    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), NS);
    claims
        .create(
            &PostParams::default(),
            &claim(NS, "one-a100", "gpu", 1, &[r#"device.attributes["gpu.dracheck.io"].model == "a100""#]),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let created =
        pods.create(&PostParams::default(), &pod(NS, "consumer").claim("gpu", "one-a100").build()).await.unwrap();
    let pod_uid = created.metadata.uid.unwrap();

    let bound = tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(pods.clone(), "consumer", |p: Option<&Pod>| {
            p.and_then(|p| p.spec.as_ref()).and_then(|s| s.node_name.as_ref()).is_some()
        }),
    )
    .await
    .expect("the scheduler binds the pod within 60s")
    .unwrap()
    .unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("node-a"));

    let allocated = claims.get("one-a100").await.unwrap();
    let status = allocated.status.expect("the claim has a status");
    let results = status.allocation.expect("the claim is allocated").devices.unwrap().results.unwrap();
    assert_eq!(results.len(), 1);
    let r = &results[0];
    assert_eq!((r.driver.as_str(), r.pool.as_str(), r.request.as_str()), (DRIVER, "node-a", "req"));
    assert!(offered.contains(&r.device), "{} is one of the slice's devices", r.device);
    assert!(r.device == "gpu-0" || r.device == "gpu-1", "the selector allowed only the a100s, got {}", r.device);
    let reserved = status.reserved_for.expect("the claim is reserved");
    assert!(
        reserved.iter().any(|c| c.resource == "pods" && c.name == "consumer" && c.uid == pod_uid),
        "reservedFor names the pod: {reserved:?}"
    );
}

#[tokio::test]
async fn a_device_no_slice_offers_leaves_the_pod_unschedulable_and_the_claim_unallocated() {
    let cluster = LocalCluster::start(LocalClusterOptions::from_env()).await.unwrap();
    let client = cluster.client();
    inventory(&client).await;

    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), NS);
    claims
        .create(
            &PostParams::default(),
            &claim(NS, "one-h100", "gpu", 1, &[r#"device.attributes["gpu.dracheck.io"].model == "h100""#]),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.create(&PostParams::default(), &pod(NS, "waiting").claim("gpu", "one-h100").build()).await.unwrap();

    let unschedulable = |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "PodScheduled" && c.status == "False"))
    };
    let p = tokio::time::timeout(Duration::from_secs(60), await_condition(pods.clone(), "waiting", unschedulable))
        .await
        .expect("the scheduler reports within 60s")
        .unwrap()
        .unwrap();
    let cond = p.status.unwrap().conditions.unwrap().into_iter().find(|c| c.type_ == "PodScheduled").unwrap();
    assert_eq!(cond.reason.as_deref(), Some("Unschedulable"));
    let message = cond.message.unwrap_or_default();
    assert!(message.contains("cannot allocate all claims"), "the scheduler's DRA message: {message}");
    assert!(p.spec.unwrap().node_name.is_none());

    // Still unallocated a while later: the verdict is stable, not a race.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let c = claims.get("one-h100").await.unwrap();
    assert!(c.status.and_then(|s| s.allocation).is_none(), "the claim stays unallocated");
}
