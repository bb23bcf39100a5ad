//! A helm release of dracheck's leaves nothing behind: removed after use, and removed when a
//! panic unwinds past it; against the local cluster, with helm built from its Go module (the
//! first time about 3 minutes on 2 cores, then cached).

use std::path::Path;
use std::time::Duration;

use dracheck_clusters::helm::{self, Helm, Installed, ReleaseSpec, Target};
use dracheck_clusters::local::Progress;
use dracheck_clusters::{LocalCluster, LocalClusterOptions};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::Api;
use kube::api::ListParams;

/// A chart of one ConfigMap, which any cluster makes ready at once. JSON is YAML, so the
/// chart is written from values rather than kept as text.
fn probe_chart(dir: &Path) {
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    let chart = serde_json::json!({ "apiVersion": "v2", "name": "dracheck-probe", "version": "0.1.0" });
    std::fs::write(dir.join("Chart.yaml"), chart.to_string()).unwrap();
    let config_map = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": "probe" },
        "data": { "value": "{{ .Values.value }}" },
    });
    std::fs::write(dir.join("templates/configmap.yaml"), config_map.to_string()).unwrap();
}

fn spec(chart: &Path, namespace: &str) -> ReleaseSpec {
    ReleaseSpec {
        name: "probe".into(),
        namespace: namespace.into(),
        chart: chart.display().to_string(),
        version: None,
        values: vec!["value=set".into()],
        timeout: Duration::from_secs(60),
    }
}

async fn left_over(client: &kube::Client, namespace: &str) -> Vec<String> {
    let mut out = Vec::new();
    if Api::<Namespace>::all(client.clone()).get_opt(namespace).await.unwrap().is_some() {
        out.push(format!("namespace {namespace}"));
    }
    let releases = Api::<Secret>::all(client.clone()).list(&ListParams::default().labels("owner=helm")).await.unwrap();
    out.extend(releases.items.into_iter().map(|s| format!("release secret {}", s.metadata.name.unwrap_or_default())));
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_release_is_removed_after_use_and_when_a_panic_unwinds() {
    let started = std::time::Instant::now();
    let helm = Helm::locate(None, &Progress::stderr()).await.expect("helm is on PATH or builds");
    eprintln!("helm {} ready after {:?}", helm.version, started.elapsed());
    let cluster = LocalCluster::start(LocalClusterOptions::from_env()).await.expect("the local cluster starts");
    let client = cluster.client();
    let tmp = tempfile::tempdir().unwrap();
    probe_chart(tmp.path());
    let target = Target { kubeconfig: cluster.kubeconfig().to_path_buf(), context: None };

    let mut installed: Installed =
        helm::install(&helm, spec(tmp.path(), "probe-used"), target.clone(), &Progress::stderr())
            .await
            .expect("a chart of a ConfigMap installs");
    let cm = Api::<ConfigMap>::namespaced(client.clone(), "probe-used").get("probe").await.unwrap();
    assert_eq!(cm.data.unwrap()["value"], "set", "--set reaches the chart");
    assert_eq!(left_over(&client, "probe-used").await.len(), 2, "the namespace and the release are there");
    // A second install of the same release is refused, and leaves the first one alone.
    let again = helm::install(&helm, spec(tmp.path(), "probe-used"), target.clone(), &Progress::quiet()).await;
    let err = again.err().expect("a release of that name is there");
    assert_eq!(err.failure(), dracheck_clusters::Failure::BadInput, "{err}");
    assert!(err.to_string().contains("already holds a helm release probe"), "{err}");
    assert_eq!(left_over(&client, "probe-used").await.len(), 2, "the first release is untouched");
    let said = installed.remove().await.expect("removal works");
    assert!(said.contains("deleted namespace probe-used"), "{said}");
    assert_eq!(left_over(&client, "probe-used").await, Vec::<String>::new());

    // A panic while the release is held: its Drop removes it during the unwind.
    let (helm2, chart, target2) = (helm.clone(), tmp.path().to_path_buf(), target.clone());
    let panicked = std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let _held = rt
            .block_on(helm::install(&helm2, spec(&chart, "probe-panic"), target2, &Progress::stderr()))
            .expect("installs");
        panic!("a panic while the release is held");
    })
    .join();
    assert!(panicked.is_err(), "the thread panicked");
    assert_eq!(left_over(&client, "probe-panic").await, Vec::<String>::new(), "Drop removed the release");
}
