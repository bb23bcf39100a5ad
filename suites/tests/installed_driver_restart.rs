//! Driver restarts of an installed driver (`--cluster kubeconfig --driver-pods SELECTOR`): the
//! suite deletes the plugin's pod on the node and its DaemonSet makes a new one, as an operator
//! or an upgrade restarts it. Here the DaemonSet runs the mock on the local cluster's emulated
//! nodes, which run a pod's command on the host with the downward API's node name; a mock
//! that wipes its slices and resets its devices on start fails the restart guarantees. The
//! DaemonSet runs as the mock's installation's account, which the suite acts as to check that
//! a node's plugin may write only that node's slices; an installation without the admission
//! policy fails it.

use std::time::Duration;

use dracheck_adapter::Installation;
use dracheck_clusters::local::{NodeKind, Progress};
use dracheck_clusters::{LocalCluster, LocalClusterOptions};
use dracheck_mock_driver::adapter as mock;
use dracheck_mock_driver::cli::DEFAULT_DRIVER as MOCK_DRIVER;
use dracheck_suites::engine::Filter;
use dracheck_suites::engine::target::DriverPods;
use dracheck_suites::local_run::{self, ExistingRun};
use dracheck_suites::profile::ids::*;
use dracheck_suites::result::{RunResult, Verdict};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, ListParams};

const NODES: usize = 2;

/// The mock as a DaemonSet: one argv for every node, the node's dirs found through
/// `$(NODE_NAME)`.
fn mock_daemon_set(
    cluster: &LocalCluster,
    mock: &std::path::Path,
    faults: &[&str],
    account: &Installation,
) -> DaemonSet {
    let node = cluster.nodes()[0].config().clone();
    let per_node = |p: std::path::PathBuf| p.display().to_string().replace(&node.name, "$(NODE_NAME)");
    let mut argv = vec![
        mock.display().to_string(),
        format!("--driver-name={MOCK_DRIVER}"),
        "--node-name=$(NODE_NAME)".into(),
        format!("--kubeconfig={}", cluster.kubeconfig().display()),
        format!("--inventory={}", mock::default_inventory().display()),
        format!("--registrar-dir={}", per_node(node.registry_dir())),
        format!("--plugin-dir={}", per_node(node.plugins_dir().join(MOCK_DRIVER))),
        format!("--cdi-dir={}", per_node(node.cdi_dir())),
    ];
    argv.extend(faults.iter().map(|f| format!("--fault={f}")));
    let pod = dracheck_objects::pod(&account.namespace, "plugin")
        .service_account(&account.service_account)
        .exec(&argv)
        .field_env("NODE_NAME", "spec.nodeName")
        .restart_always()
        .build();
    dracheck_objects::daemon_set(&account.namespace, "dracheck-mock", pod)
}

async fn run(label: &'static str, faults: &[&str]) -> RunResult {
    let progress = Progress::to(move |l| eprintln!("[{label}] {l}"));
    let mut cluster =
        // Emulated nodes whatever DRACHECK_NODE_KIND says: the DaemonSet runs the host's mock
        // binary, which a real node's container does not see.
        LocalCluster::start(LocalClusterOptions {
            progress: progress.clone(),
            node_kind: NodeKind::Emulated,
            ..LocalClusterOptions::from_env()
        })
            .await
            .expect("the local cluster starts");
    cluster.add_nodes(NODES).await.expect("nodes start");
    let mock = mock::binary().expect("the mock builds");
    let faults: Vec<String> = faults.iter().map(|f| f.to_string()).collect();
    let adapter = mock::adapter(&mock, &mock::default_inventory(), &faults).expect("the adapter");
    // What the mock's chart would install: its plugin's account, rights and policy.
    let account = adapter.installation.clone().expect("the mock states its installation");
    local_run::install_driver(&cluster.client(), &adapter).await.expect("the installation applies");
    let ds: Api<DaemonSet> = Api::namespaced(cluster.client(), &account.namespace);
    let flags: Vec<&str> = faults.iter().map(String::as_str).collect();
    ds.create(&Default::default(), &mock_daemon_set(&cluster, &mock, &flags, &account))
        .await
        .expect("the DaemonSet is created");
    let slices: Api<ResourceSlice> = Api::all(cluster.client());
    let lp = ListParams::default().fields(&format!("spec.driver={MOCK_DRIVER}"));
    let mut published = false;
    for _ in 0..240 {
        if slices.list(&lp).await.is_ok_and(|l| l.items.len() >= NODES) {
            published = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    if !published {
        let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(cluster.client(), &account.namespace);
        let seen: Vec<String> = pods
            .list(&Default::default())
            .await
            .map(|l| l.items.iter().map(|p| format!("{:?}: {:?}", p.metadata.name, p.status)).collect())
            .unwrap_or_default();
        panic!("[{label}] the DaemonSet's mock published no slices on every node within 60s; its pods: {seen:#?}");
    }

    let profile = dracheck_suites::profile::shipped("mock")
        .into_iter()
        .find(|p| p.ends_with("standard-inference.yaml"))
        .expect("the mock ships standard-inference");
    let loaded = dracheck_suites::profile::load(&profile).expect("it loads");
    let cfg = ExistingRun {
        local: None,
        kubeconfig: cluster.kubeconfig().to_path_buf(),
        context: None,
        adapter,
        profiles: vec![(profile, loaded)],
        filter: Filter { only: vec!["driver.restart.*".into(), PLUGIN_SLICES_OWN_NODE_ONLY.into()], skip: Vec::new() },
        scenario_timeout: Duration::from_secs(240),
        parallel: 0,
        companion: None,
        driver_pods: Some(DriverPods {
            namespace: Some(account.namespace.clone()),
            selector: "app=dracheck-mock".into(),
        }),
    };
    let result =
        local_run::run_existing(cfg, &local_run::run_id(), &progress).await.map_err(|e| e.message).unwrap().result;
    cluster.stop();
    result
}

fn verdict(r: &RunResult, id: &str) -> (Verdict, String) {
    r.all().find(|g| g.id == id).map(|g| (g.verdict, g.reason.clone())).unwrap_or_else(|| panic!("{id} was not run"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_installed_driver_is_restarted_through_its_daemon_set() {
    let (good, broken) = tokio::join!(
        run("restart", &[]),
        run("restart-broken", &["wipe-slices-on-start", "reset-devices-on-start", "no-node-policy"])
    );
    for id in [
        DRIVER_RESTART_WORKLOAD_KEEPS_DEVICES,
        DRIVER_RESTART_NEW_CLAIMS_WORK,
        DRIVER_RESTART_SLICES_KEPT,
        PLUGIN_SLICES_OWN_NODE_ONLY,
    ] {
        let (v, why) = verdict(&good, id);
        eprintln!("{id}: {v} ({why})");
        assert_eq!(v, Verdict::Pass, "{id}: {why}");
    }
    let (_, kept) = verdict(&good, DRIVER_RESTART_SLICES_KEPT);
    assert!(kept.contains("restart"), "{kept}");
    let (_, acted) = verdict(&good, PLUGIN_SLICES_OWN_NODE_ONLY);
    assert!(acted.contains("the account of the plugin's pod dracheck-mock/"), "the pod's account: {acted}");
    for id in [DRIVER_RESTART_WORKLOAD_KEEPS_DEVICES, DRIVER_RESTART_SLICES_KEPT, PLUGIN_SLICES_OWN_NODE_ONLY] {
        let (v, why) = verdict(&broken, id);
        assert_eq!(v, Verdict::Fail, "{id}: {why}");
    }
}
