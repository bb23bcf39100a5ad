//! kind clusters ready for DRA: the cluster config (feature gates, the release's
//! `resource.k8s.io` versions through `runtimeConfig`, CDI in containerd), the check that
//! a Docker daemon answers, which kind needs and which the local cluster does not, and a
//! cluster of a run: created with kind (on PATH, or built from its Go module) and deleted
//! again when its handle goes, also on Ctrl-C and panics.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{ClusterError, Result};
use crate::gobuild::{GoBinary, GoRecipe, fmt_elapsed};
use crate::local::Progress;
use crate::local::versions::Release;
use crate::tools::output_tail;

/// The kind release built when none is on PATH.
pub const VERSION: &str = "v0.33.0";

/// kind's own module at [`VERSION`], pinned by go.sum. Its version is a constant in its
/// source, so nothing is stamped.
pub fn recipe() -> GoRecipe {
    GoRecipe {
        what: format!("kind {VERSION}"),
        cache_subdir: Path::new("tools/kind").join(VERSION),
        version: VERSION,
        version_ldflags: String::new(),
        go_mod: include_str!("../recipes/tools/kind/go.mod"),
        go_sum: include_str!("../recipes/tools/kind/go.sum"),
        min_go: "1.26.0",
        estimate: "about 15 s on 2 cores",
        instead: "put a kind binary on PATH",
        binaries: vec![GoBinary { name: "kind", package: "sigs.k8s.io/kind", stamped: false, ..GoBinary::PLAIN }],
    }
}

/// kind's node image of `release`.
pub fn node_image(release: &Release) -> String {
    format!("kindest/node:{}", release.version)
}

/// The kind config of a DRA-ready cluster: one control plane and `workers` workers of
/// `release`, `feature_gates` (`A=true,B=false`, already validated) on every component, the
/// `resource.k8s.io` versions a default API server of the release serves (no `runtimeConfig`:
/// a driver that needs a beta version fails here as on a default cluster), and CDI switched on
/// in containerd (both
/// the 1.x and 2.x config paths, so that any kind node image takes it).
pub fn config(release: &Release, feature_gates: &str, workers: usize) -> String {
    let mut out = String::from("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\n");
    let gates: Vec<(&str, &str)> = feature_gates.split(',').filter_map(|g| g.split_once('=')).collect();
    if !gates.is_empty() {
        out.push_str("featureGates:\n");
        for (name, value) in gates {
            out.push_str(&format!("  {name}: {value}\n"));
        }
    }
    out.push_str(
        "containerdConfigPatches:\n\
         - |-\n  [plugins.\"io.containerd.grpc.v1.cri\"]\n    enable_cdi = true\n\
         - |-\n  [plugins.\"io.containerd.cri.v1.runtime\"]\n    enable_cdi = true\n\
         nodes:\n",
    );
    let image = node_image(release);
    out.push_str(&format!("- role: control-plane\n  image: {image}\n"));
    for _ in 0..workers {
        out.push_str(&format!("- role: worker\n  image: {image}\n"));
    }
    out
}

/// The Docker daemon's version, or why none answers (within 10 s).
pub fn docker_daemon() -> Result<String, String> {
    let mut child = Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("the docker command cannot run ({e})"))?;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if child.try_wait().map_err(|e| e.to_string())?.is_some() {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err("`docker info` did not answer within 10s".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if out.status.success() && !version.is_empty() {
        Ok(version)
    } else {
        let said = String::from_utf8_lossy(&out.stderr);
        let said = said.lines().find(|l| !l.trim().is_empty()).unwrap_or("no answer").trim();
        Err(format!("`docker info` found no daemon: {said}"))
    }
}

/// `kind create cluster …`: the cluster's own kubeconfig file, not the user's, and kind's wait
/// for the control plane bounded by `wait`.
pub fn create_args(name: &str, config: &Path, kubeconfig: &Path, wait: Duration) -> Vec<String> {
    vec![
        "create".into(),
        "cluster".into(),
        "--name".into(),
        name.into(),
        "--config".into(),
        config.display().to_string(),
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
        "--wait".into(),
        format!("{}s", wait.as_secs()),
    ]
}

/// A kind cluster of this process; deleted by [`KindCluster::delete`] or on drop.
pub struct KindCluster {
    kind: PathBuf,
    name: String,
    dir: tempfile::TempDir,
    deleted: bool,
    progress: Progress,
}

impl KindCluster {
    /// Creates `name` with [`config`] of `release`; ready when kind's wait for the control
    /// plane ends. The handle exists before kind starts, so that a create stopped half-way
    /// (Ctrl-C drops this future) still deletes what kind had made.
    pub async fn create(
        kind: &Path,
        name: &str,
        release: &Release,
        feature_gates: &str,
        workers: usize,
        wait: Duration,
        progress: &Progress,
    ) -> Result<KindCluster> {
        let dir = tempfile::Builder::new()
            .prefix("dracheck-kind")
            .tempdir()
            .map_err(ClusterError::io("creating a temp dir for the kind cluster"))?;
        let cluster = KindCluster {
            kind: kind.to_path_buf(),
            name: name.into(),
            dir,
            deleted: false,
            progress: progress.clone(),
        };
        let config_path = cluster.dir.path().join("kind.yaml");
        std::fs::write(&config_path, config(release, feature_gates, workers))
            .map_err(ClusterError::io("writing the kind config"))?;
        let args = create_args(name, &config_path, &cluster.kubeconfig(), wait);
        progress.line(format!(
            "creating kind cluster {name} (Kubernetes {}, {} worker(s), image {})",
            release.version,
            workers,
            node_image(release)
        ));
        let started = Instant::now();
        let child = tokio::process::Command::new(kind)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(ClusterError::io(format!("running {}", kind.display())))?;
        let output = child.wait_with_output();
        tokio::pin!(output);
        let out = loop {
            tokio::select! {
                out = &mut output => break out.map_err(ClusterError::io("waiting for kind"))?,
                _ = tokio::time::sleep(Duration::from_secs(30)) => {
                    progress.line(format!("  creating kind cluster {name}… {}", fmt_elapsed(started.elapsed())));
                }
            }
        };
        if !out.status.success() {
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            return Err(ClusterError::KindCreateFailed {
                name: name.into(),
                elapsed_s: started.elapsed().as_secs(),
                status: out.status.to_string(),
                image: node_image(release),
                tail: output_tail(&text, 15),
            });
        }
        progress.line(format!("kind cluster {name} is up ({})", fmt_elapsed(started.elapsed())));
        Ok(cluster)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The cluster's kubeconfig, in a temp dir of its own (its context: `kind-<name>`).
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// `kind delete cluster`; what is left if it failed.
    pub fn delete(mut self) -> std::result::Result<(), String> {
        self.delete_now()
    }

    fn delete_now(&mut self) -> std::result::Result<(), String> {
        if std::mem::replace(&mut self.deleted, true) {
            return Ok(());
        }
        self.progress.line(format!("deleting kind cluster {}", self.name));
        let kubeconfig = self.kubeconfig();
        let mut child = Command::new(&self.kind)
            .args(["delete", "cluster", "--name", &self.name, "--kubeconfig"])
            .arg(&kubeconfig)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: a second Ctrl-C must not cut the cleanup short.
            .process_group(0)
            .spawn()
            .map_err(|e| format!("running {}: {e}", self.kind.display()))?;
        let deadline = Instant::now() + Duration::from_secs(180);
        while child.try_wait().map_err(|e| e.to_string())?.is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`kind delete cluster --name {}` did not finish within 180s; its containers may be left (docker ps)",
                    self.name
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            Err(format!("`kind delete cluster --name {}` failed:\n{}", self.name, output_tail(&text, 6)))
        }
    }
}

impl Drop for KindCluster {
    fn drop(&mut self) {
        if let Err(left) = self.delete_now() {
            eprintln!("dracheck: {left}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::versions::default_release;

    #[test]
    fn the_config_parses_as_yaml_with_the_dra_settings() {
        let text = config(default_release(), "DRAAdminAccess=true,DRAConsumableCapacity=false", 2);
        let v: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(v["featureGates"]["DRAAdminAccess"], true);
        assert_eq!(v["featureGates"]["DRAConsumableCapacity"], false);
        assert!(v.get("runtimeConfig").is_none(), "a default API server's versions: {text}");
        let patches = v["containerdConfigPatches"].as_array().unwrap();
        assert!(patches.iter().all(|p| p.as_str().unwrap().contains("enable_cdi = true")));
        let nodes = v["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), 3);
        assert!(nodes.iter().all(|n| n["image"] == "kindest/node:v1.37.2"));
    }

    /// A stand-in for kind that records its calls and fails `create` as kind does.
    fn fake_kind(dir: &Path, create_fails: bool) -> (PathBuf, PathBuf) {
        use std::os::unix::fs::PermissionsExt as _;
        let log = dir.join("calls");
        let program = dir.join("kind");
        let create = if create_fails {
            "echo 'Creating cluster \"x\" ...'; echo 'ERROR: failed to create cluster: image not present' >&2; exit 1"
        } else {
            "exit 0"
        };
        let script =
            format!("#!/bin/sh\necho \"$@\" >> {}\nif [ \"$1\" = create ]; then {create}; fi\nexit 0\n", log.display());
        std::fs::write(&program, script).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        (program, log)
    }

    #[tokio::test]
    async fn a_failed_create_says_what_kind_said_and_deletes_what_it_made() {
        let tmp = tempfile::tempdir().unwrap();
        let (kind, log) = fake_kind(tmp.path(), true);
        let release = default_release();
        let wait = Duration::from_secs(5);
        let err = match KindCluster::create(&kind, "dracheck-t1", release, "", 1, wait, &Progress::quiet()).await {
            Err(e) => e,
            Ok(_) => panic!("the create fails"),
        };
        assert_eq!(err.failure(), crate::Failure::ClusterDown);
        let msg = err.to_string();
        assert!(msg.contains("image not present") && msg.contains("kindest/node:v1.37.2"), "{msg}");
        let calls = std::fs::read_to_string(&log).unwrap();
        assert!(calls.lines().any(|l| l.starts_with("delete cluster --name dracheck-t1")), "{calls}");
    }

    #[tokio::test]
    async fn a_cluster_is_deleted_when_its_handle_goes() {
        let tmp = tempfile::tempdir().unwrap();
        let (kind, log) = fake_kind(tmp.path(), false);
        let wait = Duration::from_secs(5);
        let cluster = KindCluster::create(&kind, "dracheck-t2", default_release(), "", 0, wait, &Progress::quiet())
            .await
            .unwrap();
        let config = cluster.kubeconfig().with_file_name("kind.yaml");
        assert!(std::fs::read_to_string(&config).unwrap().contains("kind: Cluster"), "the config is written");
        drop(cluster);
        let calls = std::fs::read_to_string(&log).unwrap();
        assert_eq!(calls.lines().filter(|l| l.starts_with("delete cluster --name dracheck-t2")).count(), 1, "{calls}");
    }

    #[test]
    fn create_writes_the_kubeconfig_beside_the_config_and_bounds_the_wait() {
        let args = create_args(
            "dracheck-1a2b3c",
            Path::new("/t/kind.yaml"),
            Path::new("/t/kubeconfig"),
            Duration::from_secs(300),
        );
        assert_eq!(
            args.join(" "),
            "create cluster --name dracheck-1a2b3c --config /t/kind.yaml --kubeconfig /t/kubeconfig --wait 300s"
        );
    }
}
