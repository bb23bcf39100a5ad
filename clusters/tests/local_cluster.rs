//! The local cluster runs the real upstream control plane, reports what it runs, and leaves
//! nothing behind: no process, no listening port, no state dir.

use std::path::Path;
use std::time::Duration;

use dracheck_clusters::local::ports::{is_listening, listeners};
use dracheck_clusters::local::versions::default_release;
use dracheck_clusters::{ClusterError, LocalCluster, LocalClusterOptions};

#[tokio::test]
async fn starts_the_real_control_plane_and_reports_it() {
    let cluster = LocalCluster::start(LocalClusterOptions::from_env()).await.expect("the local cluster starts");
    let client = cluster.client();

    let version = client.apiserver_version().await.unwrap();
    assert_eq!(version.git_version, cluster.kubernetes_version(), "/version reports the injected release");
    assert!(!version.git_version.contains("-dirty") && !version.git_version.starts_with("v0.0.0"));
    if std::env::var_os("DRACHECK_K8S_BIN_DIR").is_none() {
        assert_eq!(version.git_version, default_release().version);
        assert_eq!(
            cluster.resource_api_versions(),
            default_release().default_resource_api_versions,
            "exactly what a default API server of the release serves"
        );
    }
    assert!(cluster.resource_api_versions().iter().any(|v| v == "v1"));

    // The kubeconfig stands on its own, as an external user would use it.
    let kc = kube::config::Kubeconfig::read_from(cluster.kubeconfig()).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
    let outside = kube::Client::try_from(cfg).unwrap();
    let readyz = outside.request_text(http::Request::get("/readyz").body(Vec::new()).unwrap()).await.unwrap();
    assert_eq!(readyz.trim(), "ok");

    for (name, port) in &cluster.info().ports {
        assert!(is_listening(*port), "{name} listens on 127.0.0.1:{port}");
    }
    println!("cluster up in {:?}", cluster.startup);
}

#[tokio::test]
async fn two_clusters_run_side_by_side_and_teardown_leaves_nothing() {
    let (a, b) = tokio::join!(
        LocalCluster::start(LocalClusterOptions::from_env()),
        LocalCluster::start(LocalClusterOptions::from_env())
    );
    let (a, b) = (a.expect("cluster a starts"), b.expect("cluster b starts"));
    assert_ne!(a.info().server, b.info().server);
    for c in [&a, &b] {
        c.client().apiserver_version().await.expect("each cluster answers");
    }

    let mut leftovers = Vec::new();
    for c in [a, b] {
        let info = c.info().clone();
        let dir = c.state_dir().to_path_buf();
        assert_eq!(info.processes.len(), 4);
        drop(c);
        leftovers.push((info, dir));
    }
    for (info, dir) in leftovers {
        for p in &info.processes {
            assert!(!p.is_alive(), "{} (pid {}) still runs after drop", p.name, p.pid);
        }
        for (name, port) in &info.ports {
            let ours: Vec<_> =
                listeners(*port).into_iter().filter(|(_, cmd)| cmd.contains(&*dir.to_string_lossy())).collect();
            assert!(ours.is_empty(), "{name}'s port {port} is still held by {ours:?}");
        }
        assert!(!dir.exists(), "state dir {} left behind", dir.display());
    }
}

#[tokio::test]
async fn a_taken_apiserver_port_is_refused_before_anything_starts() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let parent = tempfile::tempdir().unwrap();
    let state_dir = parent.path().join("state");
    let opts = LocalClusterOptions {
        apiserver_port: Some(port),
        state_dir: Some(state_dir.clone()),
        ..LocalClusterOptions::from_env()
    };
    let err = LocalCluster::start(opts).await.err().expect("the clash is refused");
    assert!(matches!(err, ClusterError::PortInUse { port: p, .. } if p == port), "{err}");
    assert_eq!(err.failure(), dracheck_clusters::Failure::BadInput);
    assert!(!state_dir.exists(), "no half-made state dir is left");
}

/// A bin dir whose etcd dies at once: the real apiserver, scheduler and controller-manager
/// next to a crashing etcd.
fn bin_dir_with_dying_etcd(real: &Path, dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    for name in ["kube-apiserver", "kube-scheduler", "kube-controller-manager"] {
        std::os::unix::fs::symlink(real.join(name), dir.join(name)).unwrap();
    }
    let etcd = dir.join("etcd");
    std::fs::write(&etcd, "#!/bin/sh\necho 'etcd: member data is corrupt' >&2\nexit 7\n").unwrap();
    std::fs::set_permissions(&etcd, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[tokio::test]
async fn a_dying_etcd_is_reported_with_its_log_and_nothing_is_left_running() {
    let real = match std::env::var_os("DRACHECK_K8S_BIN_DIR") {
        Some(dir) => dracheck_clusters::local::BinDir::existing(Path::new(&dir)).unwrap(),
        None => dracheck_clusters::local::binaries::cached_or_build(
            default_release(),
            dracheck_clusters::local::NodeKind::Emulated,
            &dracheck_clusters::local::Progress::stderr(),
        )
        .await
        .unwrap(),
    };
    let bins = tempfile::tempdir().unwrap();
    bin_dir_with_dying_etcd(&real.dir, bins.path());
    let parent = tempfile::tempdir().unwrap();
    let state_dir = parent.path().join("state");
    let opts = LocalClusterOptions {
        k8s_bin_dir: Some(bins.path().to_path_buf()),
        state_dir: Some(state_dir.clone()),
        start_timeout: Duration::from_secs(20),
        ..LocalClusterOptions::from_env()
    };
    let err = LocalCluster::start(opts).await.err().expect("start-up fails");
    let msg = err.to_string();
    assert!(matches!(&err, ClusterError::ComponentDied { component, .. } if component == "etcd"), "{msg}");
    assert!(msg.contains("member data is corrupt"), "the log tail is quoted: {msg}");
    assert!(msg.contains("exit status: 7"), "{msg}");
    assert_eq!(err.failure(), dracheck_clusters::Failure::ClusterDown);
    assert!(!state_dir.exists(), "the state dir is removed");
    // The log the message names outlives the state dir: kept in `$TMPDIR/dracheck-failed-*`.
    let ClusterError::ComponentDied { log, .. } = &err else { unreachable!() };
    let kept = std::fs::read_to_string(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    assert!(kept.contains("member data is corrupt"), "{kept}");
    std::fs::remove_dir_all(log.parent().and_then(Path::parent).unwrap()).unwrap();
}
