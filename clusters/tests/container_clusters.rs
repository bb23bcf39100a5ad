//! kind and K3s clusters for real: created DRA-ready, reachable through their own kubeconfig,
//! and gone afterwards. Both need a Docker daemon (and their images' registries); where none
//! answers they are skipped with the reason.

use std::process::Command;
use std::time::Duration;

use dracheck_clusters::k3s::K3sCluster;
use dracheck_clusters::kind::{self, KindCluster};
use dracheck_clusters::local::versions::default_release;
use dracheck_clusters::local::{Progress, client_for, served_resource_versions};
use dracheck_clusters::tools;

/// Whether Docker answers; if not, says why the test is skipped.
fn docker(test: &str) -> bool {
    match kind::docker_daemon() {
        Ok(_) => true,
        Err(why) => {
            println!("skipped: {test} needs a Docker daemon, and {why}");
            false
        }
    }
}

async fn serves_dra(kubeconfig: &std::path::Path) {
    let client = client_for(kubeconfig, None).await.expect("a client from the cluster's kubeconfig");
    let served = served_resource_versions(&client).await.expect("the cluster answers");
    assert!(served.iter().any(|v| v == "v1"), "resource.k8s.io/v1 is served: {served:?}");
    assert_eq!(served, default_release().default_resource_api_versions, "what a default API server serves");
}

fn containers_named(name: &str) -> String {
    let out = Command::new("docker")
        .args(["ps", "--all", "--filter", &format!("name={name}"), "--format", "{{.Names}}"])
        .output()
        .expect("docker runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kind_cluster_serves_dra_and_is_deleted() {
    if !docker("a_kind_cluster_serves_dra_and_is_deleted") {
        return;
    }
    let progress = Progress::stderr();
    let kind =
        tools::locate("kind", "kind", None, &kind::recipe(), &progress).await.expect("kind is on PATH or builds");
    let name = format!("dracheck-test-{}", std::process::id());
    let cluster =
        KindCluster::create(&kind.program, &name, default_release(), "", 0, Duration::from_secs(300), &progress)
            .await
            .expect("kind creates the cluster");
    serves_dra(&cluster.kubeconfig()).await;
    cluster.delete().expect("kind deletes the cluster");
    assert_eq!(containers_named(&name), "", "no node container is left");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_k3s_cluster_serves_dra_and_is_removed() {
    if !docker("a_k3s_cluster_serves_dra_and_is_removed") {
        return;
    }
    let name = format!("dracheck-test-k3s-{}", std::process::id());
    let cluster = K3sCluster::start(&name, default_release(), "", Duration::from_secs(300), &Progress::stderr())
        .await
        .expect("the K3s container starts");
    serves_dra(&cluster.kubeconfig()).await;
    cluster.stop().await.expect("the container is removed");
    assert_eq!(containers_named(&name), "", "no container is left");
}
