//! One containerd per real node. Two kubelets on one containerd remove each other's pods
//! ("orphaned pod we had not seen before"), so each node has its own sockets, root, state,
//! CNI and CDI dirs, runc state, stream address and cgroup. Nothing is pulled: the registry
//! config names an unreachable loopback mirror, and the images are imported from archives.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::images::PAUSE_IMAGE;
use super::stack::NodeStack;
use crate::error::{ClusterError, Result};
use crate::tools::output_tail;

/// The files and dirs of one node's containerd, all under `<node>/containerd`.
#[derive(Debug, Clone)]
pub struct ContainerdDirs {
    pub base: PathBuf,
}

impl ContainerdDirs {
    pub fn new(node_root: &Path) -> ContainerdDirs {
        ContainerdDirs { base: node_root.join("containerd") }
    }
    pub fn socket(&self) -> PathBuf {
        self.base.join("containerd.sock")
    }
    pub fn config(&self) -> PathBuf {
        self.base.join("config.toml")
    }
    pub fn root(&self) -> PathBuf {
        self.base.join("root")
    }
    pub fn state(&self) -> PathBuf {
        self.base.join("state")
    }
    pub fn runc_root(&self) -> PathBuf {
        self.base.join("runc")
    }
    pub fn hosts_dir(&self) -> PathBuf {
        self.base.join("certs.d")
    }
    /// `unix://…`, as the kubelet's `containerRuntimeEndpoint` wants it.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket().display())
    }
}

/// What the node's containerd needs to know besides its own dirs.
pub struct ContainerdConfig<'a> {
    pub dirs: &'a ContainerdDirs,
    pub stack: &'a NodeStack,
    pub node_ip: Ipv4Addr,
    pub cdi_dir: &'a Path,
    pub cni_bin_dir: &'a Path,
    pub cni_conf_dir: &'a Path,
}

impl ContainerdConfig<'_> {
    /// The config file (format version 3, containerd 2.x).
    pub fn render(&self) -> String {
        let d = self.dirs;
        let q = |p: &Path| toml_str(&p.display().to_string());
        format!(
            r#"# Written by dracheck for one real node; see clusters/src/local/real/containerd.rs.
version = 3
root = {root}
state = {state}
# NRI would listen on a machine-wide socket that every node's containerd shares.
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = {socket}

[ttrpc]
  address = {ttrpc}

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '{pause}'
  [plugins.'io.containerd.cri.v1.images'.registry]
    # hosts.toml here sends any pull to a loopback address where nothing listens.
    config_path = {hosts}

[plugins.'io.containerd.cri.v1.runtime']
  # No CAP_SYS_RESOURCE in some VMs: runc cannot lower oom_score_adj below the parent's.
  restrict_oom_score_adj = true
  # The pods' network namespaces live under this node's state dir, not /run/netns.
  netns_mounts_under_state_dir = true
  enable_unprivileged_ports = false
  enable_unprivileged_icmp = false
  cdi_spec_dirs = [{cdi}]
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = {runc}
        Root = {runc_root}
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [{cni_bin}]
    conf_dir = {cni_conf}
    max_conf_num = 1
    # The loopback interface without the upstream `loopback` plugin binary: dracheck-cni
    # brings `lo` up itself.
    use_internal_loopback = true

[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = '{ip}'
  stream_server_port = '0'
"#,
            root = q(&d.root()),
            state = q(&d.state()),
            socket = q(&d.socket()),
            ttrpc = q(&d.base.join("containerd.sock.ttrpc")),
            pause = PAUSE_IMAGE,
            hosts = q(&d.hosts_dir()),
            cdi = q(self.cdi_dir),
            runc = q(&self.stack.runc),
            runc_root = q(&d.runc_root()),
            cni_bin = q(self.cni_bin_dir),
            cni_conf = q(self.cni_conf_dir),
            ip = self.node_ip,
        )
    }

    /// Writes the config and the registry hosts file.
    pub fn write(&self) -> Result<()> {
        let d = self.dirs;
        for dir in [d.base.clone(), d.root(), d.state(), d.runc_root(), d.hosts_dir().join("_default")] {
            std::fs::create_dir_all(&dir).map_err(ClusterError::io(format!("creating {}", dir.display())))?;
        }
        std::fs::write(d.config(), self.render()).map_err(ClusterError::io("writing containerd's config"))?;
        // Port 9 (discard) on loopback: a pull fails at once instead of leaving the machine.
        let hosts = "server = \"https://127.0.0.1:9\"\n\n[host.\"https://127.0.0.1:9\"]\n  capabilities = [\"pull\", \"resolve\"]\n";
        std::fs::write(d.hosts_dir().join("_default").join("hosts.toml"), hosts)
            .map_err(ClusterError::io("writing containerd's registry hosts"))?;
        Ok(())
    }
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The PATH containerd runs with: its shim (found by name) first, then the system's, for the
/// CNI plugin's `ip` and `nsenter`.
pub fn path_env(stack: &NodeStack) -> String {
    format!("{}:{}", stack.shim_dir.display(), crate::local::node::DEFAULT_PATH)
}

/// Waits until `ctr version` answers on the node's socket.
pub async fn wait_ready(ctr: &Path, dirs: &ContainerdDirs, timeout: Duration) -> std::result::Result<(), String> {
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    while Instant::now() < deadline {
        if dirs.socket().exists() {
            match ctr_output(ctr, dirs, &["version"]).await {
                Ok(_) => return Ok(()),
                Err(e) => last = e,
            }
        } else {
            last = format!("{} does not exist yet", dirs.socket().display());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(last)
}

async fn ctr_output(ctr: &Path, dirs: &ContainerdDirs, args: &[&str]) -> std::result::Result<String, String> {
    let out = tokio::process::Command::new(ctr)
        .arg("--address")
        .arg(dirs.socket())
        .args(args)
        .env_clear()
        .env("PATH", crate::local::node::DEFAULT_PATH)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("running {}: {e}", ctr.display()))?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if out.status.success() { Ok(text) } else { Err(output_tail(&text, 8)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_keeps_everything_of_the_node_under_its_own_dirs() {
        let dirs = ContainerdDirs::new(Path::new("/tmp/c/nodes/node-1"));
        let stack = NodeStack {
            kubelet: "/k/kubelet".into(),
            containerd: "/c/containerd".into(),
            shim_dir: "/c".into(),
            ctr: "/c/ctr".into(),
            runc: "/r/runc".into(),
        };
        let cfg = ContainerdConfig {
            dirs: &dirs,
            stack: &stack,
            node_ip: Ipv4Addr::new(127, 0, 10, 1),
            cdi_dir: Path::new("/tmp/c/nodes/node-1/cdi"),
            cni_bin_dir: Path::new("/tmp/c/nodes/node-1/cni/bin"),
            cni_conf_dir: Path::new("/tmp/c/nodes/node-1/cni/conf"),
        };
        let text = cfg.render();
        let paths = text.lines().filter(|l| l.contains('/') && !l.contains(PAUSE_IMAGE));
        for line in paths.filter(|l| !l.trim_start().starts_with('#')) {
            assert!(line.contains("/tmp/c/nodes/node-1/") || line.contains("/r/runc"), "{line}");
        }
        assert!(text.contains("netns_mounts_under_state_dir = true"));
        assert!(text.contains("stream_server_address = '127.0.10.1'"));
        assert!(text.contains(PAUSE_IMAGE));
    }
}
