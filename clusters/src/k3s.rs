//! K3s clusters ready for DRA, one container each (testcontainers' K3s module): the release's
//! image, the feature gates and `resource.k8s.io` versions as K3s server arguments, the
//! apiserver published on 127.0.0.1 only, and the kubeconfig read from the container. The
//! container is removed when the handle goes, also on Ctrl-C and panics.

use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use testcontainers_modules::k3s::{K3s, KUBE_SECURE_PORT};
use testcontainers_modules::testcontainers::bollard::models::PortBinding;
use testcontainers_modules::testcontainers::runners::AsyncRunner;
use testcontainers_modules::testcontainers::{ContainerAsync, ImageExt};

use crate::error::{ClusterError, Result};
use crate::gobuild::fmt_elapsed;
use crate::local::Progress;
use crate::local::versions::Release;

pub const IMAGE: &str = "rancher/k3s";

/// The K3s image tag of `release`: K3s tags its first build of a Kubernetes release
/// `<version>-k3s1`. Whether the registry has that tag is only known when it is pulled.
pub fn image_tag(release: &Release) -> String {
    format!("{}-k3s1", release.version)
}

/// The K3s server's command line: the gates on every component K3s embeds, the
/// `resource.k8s.io` versions a default API server of the release serves (no
/// `runtime-config`), and
/// without the bundled ingress, which a conformance run does not use.
pub fn server_args(feature_gates: &str) -> Vec<String> {
    let mut out: Vec<String> = vec!["server".into(), "--snapshotter=native".into(), "--disable=traefik".into()];
    if !feature_gates.is_empty() {
        for component in ["kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubelet"] {
            out.push(format!("--{component}-arg=feature-gates={feature_gates}"));
        }
    }
    out
}

/// A K3s cluster of this process; removed by [`K3sCluster::stop`] or on drop.
pub struct K3sCluster {
    name: String,
    container: Option<ContainerAsync<K3s>>,
    dir: tempfile::TempDir,
    stopped: bool,
}

impl K3sCluster {
    /// Starts the container `name` and waits (up to `timeout`) until K3s says its node
    /// controller synced.
    pub async fn start(
        name: &str,
        release: &Release,
        feature_gates: &str,
        timeout: Duration,
        progress: &Progress,
    ) -> Result<K3sCluster> {
        let dir = tempfile::Builder::new()
            .prefix("dracheck-k3s")
            .tempdir()
            .map_err(ClusterError::io("creating a temp dir for the K3s cluster"))?;
        // The handle exists before the container: a start stopped half-way (Ctrl-C drops this
        // future) still removes the container by its name.
        let mut cluster = K3sCluster { name: name.into(), container: None, dir, stopped: false };
        let image = format!("{IMAGE}:{}", image_tag(release));
        progress.line(format!("starting K3s cluster {name} ({image})"));
        let started = Instant::now();
        let failed = |detail: String| ClusterError::K3sFailed { image: image.clone(), detail };
        let conf = cluster.dir.path().join("conf");
        std::fs::create_dir_all(&conf).map_err(ClusterError::io("creating the K3s conf dir"))?;
        let request = K3s::default()
            .with_conf_mount(&conf)
            .with_tag(image_tag(release))
            .with_cmd(server_args(feature_gates))
            .with_container_name(name)
            .with_privileged(true)
            .with_userns_mode("host")
            .with_startup_timeout(timeout)
            .with_host_config_modifier(loopback_apiserver);
        let container = request.start().await.map_err(|e| failed(e.to_string()))?;
        let port = container.get_host_port_ipv4(KUBE_SECURE_PORT).await.map_err(|e| failed(e.to_string()))?;
        let raw = container.image().read_kube_config().map_err(|e| failed(format!("no kubeconfig: {e}")))?;
        cluster.container = Some(container);
        std::fs::write(cluster.kubeconfig(), with_server(&raw, &format!("https://127.0.0.1:{port}")))
            .map_err(ClusterError::io("writing the K3s kubeconfig"))?;
        progress.line(format!("K3s cluster {name} is up at 127.0.0.1:{port} ({})", fmt_elapsed(started.elapsed())));
        Ok(cluster)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The cluster's kubeconfig, pointed at the published apiserver port.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// Removes the container; what is left if that failed.
    pub async fn stop(mut self) -> std::result::Result<(), String> {
        self.stopped = true;
        match self.container.take() {
            Some(c) => c.rm().await.map_err(|e| format!("removing the K3s container {}: {e}", self.name)),
            None => remove_by_name(&self.name),
        }
    }
}

impl Drop for K3sCluster {
    fn drop(&mut self) {
        if self.stopped {
            return;
        }
        // Removed by its name with the docker CLI, which needs no async runtime (this may run
        // while a panic unwinds); testcontainers' own removal on drop is then not needed.
        std::mem::forget(self.container.take());
        if let Err(left) = remove_by_name(&self.name) {
            eprintln!("dracheck: {left}");
        }
    }
}

/// Publishes only the apiserver, on 127.0.0.1 and a port Docker picks, instead of every
/// exposed port on every interface.
fn loopback_apiserver(host: &mut testcontainers_modules::testcontainers::bollard::models::HostConfig) {
    host.publish_all_ports = Some(false);
    let binding = PortBinding { host_ip: Some("127.0.0.1".into()), host_port: Some(String::new()) };
    host.port_bindings = Some([(KUBE_SECURE_PORT.to_string(), Some(vec![binding]))].into_iter().collect());
}

fn remove_by_name(name: &str) -> std::result::Result<(), String> {
    let out = Command::new("docker")
        .args(["rm", "--force", "--volumes", name])
        .stdin(Stdio::null())
        .process_group(0)
        .output()
        .map_err(|e| format!("`docker rm {name}` could not run: {e}"))?;
    let said = String::from_utf8_lossy(&out.stderr);
    if out.status.success() || said.contains("No such container") {
        Ok(())
    } else {
        Err(format!("`docker rm --force {name}` failed: {}", said.trim()))
    }
}

/// `kubeconfig` with every cluster's `server:` set to `server`: K3s writes its in-container
/// address, the host reaches it through the published port.
pub fn with_server(kubeconfig: &str, server: &str) -> String {
    let mut out: String = kubeconfig
        .lines()
        .map(|line| {
            let trimmed = line.trim_start();
            if trimmed.starts_with("server:") {
                format!("{}server: {server}", &line[..line.len() - trimmed.len()])
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_is_rewritten_with_its_indentation() {
        let kc = "clusters:\n- cluster:\n    certificate-authority-data: x\n    server: https://127.0.0.1:6443\n  name: default\n";
        let out = with_server(kc, "https://127.0.0.1:49153");
        assert!(out.contains("\n    server: https://127.0.0.1:49153\n"), "{out}");
        assert!(out.contains("certificate-authority-data: x"), "{out}");
    }

    #[test]
    fn the_port_is_published_on_loopback_only() {
        let mut host = Default::default();
        loopback_apiserver(&mut host);
        assert_eq!(host.publish_all_ports, Some(false));
        let bindings = host.port_bindings.unwrap();
        assert_eq!(bindings.len(), 1);
        let b = &bindings["6443/tcp"].as_ref().unwrap()[0];
        assert_eq!(b.host_ip.as_deref(), Some("127.0.0.1"));
    }
}
