//! The node's presence in the API: the Node object, its Ready condition and its Lease in
//! `kube-node-lease`, renewed like a kubelet does, so that the node lifecycle controller keeps
//! it Ready and untainted.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio_util::sync::CancellationToken;

use super::config::NodeConfig;

/// Lease renewal, as kubelet's `renewInterval` (a quarter of the 40 s lease duration).
const LEASE_RENEW: Duration = Duration::from_secs(10);
const LEASE_SECONDS: i32 = 40;
/// Full status refresh when nothing changed, as kubelet's `nodeStatusReportFrequency` (5 min):
/// the node lifecycle controller takes a renewed Lease as the node's heartbeat, so an unchanged
/// status need not be patched every 20 s (a request per node that a real kubelet does not make).
const STATUS_EVERY: Duration = Duration::from_secs(300);

/// Creates (or takes over) the Node object with a Ready status and the kubelet port; returns
/// its UID.
pub async fn register(client: &kube::Client, cfg: &NodeConfig, kubelet_port: u16) -> kube::Result<String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = dracheck_objects::node(&cfg.name, &cfg.ip.to_string());
    let uid = match nodes.create(&PostParams::default(), &node).await {
        Ok(n) => n.metadata.uid,
        Err(kube::Error::Api(e)) if e.is_already_exists() => nodes.get(&cfg.name).await?.metadata.uid,
        Err(e) => return Err(e),
    };
    patch_status(&nodes, cfg, kubelet_port).await?;
    Ok(uid.unwrap_or_default())
}

async fn patch_status(nodes: &Api<Node>, cfg: &NodeConfig, kubelet_port: u16) -> kube::Result<()> {
    let mut status = dracheck_objects::node(&cfg.name, &cfg.ip.to_string()).status.unwrap_or_default();
    status.daemon_endpoints = Some(k8s_openapi::api::core::v1::NodeDaemonEndpoints {
        kubelet_endpoint: Some(k8s_openapi::api::core::v1::DaemonEndpoint { port: kubelet_port as i32 }),
    });
    let patch = serde_json::json!({ "status": status });
    nodes.patch_status(&cfg.name, &PatchParams::default(), &Patch::Merge(&patch)).await.map(|_| ())
}

/// Renews the Lease and the Ready condition until `stop`.
pub async fn run(client: kube::Client, cfg: NodeConfig, node_uid: String, kubelet_port: u16, stop: CancellationToken) {
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    let mut last_status = tokio::time::Instant::now();
    loop {
        if let Err(e) = renew_lease(&leases, &cfg.name, &node_uid).await {
            eprintln!("[{}] lease renewal failed: {e}", cfg.name);
        }
        if last_status.elapsed() >= STATUS_EVERY {
            if let Err(e) = patch_status(&nodes, &cfg, kubelet_port).await {
                eprintln!("[{}] node status update failed: {e}", cfg.name);
            }
            last_status = tokio::time::Instant::now();
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(LEASE_RENEW) => {}
        }
    }
}

async fn renew_lease(leases: &Api<Lease>, node: &str, node_uid: &str) -> kube::Result<()> {
    let now = MicroTime(dracheck_objects::now());
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(node.to_string()),
            namespace: Some("kube-node-lease".into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: node.into(),
                uid: node_uid.into(),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(node.into()),
            lease_duration_seconds: Some(LEASE_SECONDS),
            renew_time: Some(now),
            ..LeaseSpec::default()
        }),
    };
    leases.patch(node, &PatchParams::apply("dracheck-kubelet").force(), &Patch::Apply(&lease)).await.map(|_| ())
}
