//! Real nodes: the upstream kubelet, containerd and runc, one set per node, so that every
//! verdict on such a node is what a production node does. Each node keeps everything it
//! has under its own dir and cgroups (see `containerd` and `kubelet` for why each setting),
//! and its teardown puts the machine back as it was (`host`), also for a killed run
//! ([`scrub`]).

pub mod cni;
pub mod containerd;
pub mod host;
pub mod images;
pub mod kubelet;
pub mod mountns;
pub mod preflight;
pub mod service;
pub mod stack;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::api::Api;

use self::containerd::{ContainerdConfig, ContainerdDirs};
use self::host::{Cgroups, SysctlsBefore};
use self::images::NodeImages;
use self::kubelet::KubeletSetup;
use self::stack::NodeStack;
use super::Progress;
use super::node::NodeConfig;
use super::pki::Pki;
use super::ports;
use super::process::{Lifetime, Supervised};
use super::versions::Release;
use crate::error::{ClusterError, Result, log_tail};

/// Which nodes a local cluster runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodeKind {
    /// The kubelet, containerd and runc built from their Go modules.
    #[default]
    Real,
    /// dracheck's own kubelet emulation: containers are host processes.
    Emulated,
}

impl NodeKind {
    pub fn name(self) -> &'static str {
        match self {
            NodeKind::Real => "real",
            NodeKind::Emulated => "emulated",
        }
    }
}

impl std::str::FromStr for NodeKind {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "real" => Ok(NodeKind::Real),
            "emulated" => Ok(NodeKind::Emulated),
            other => Err(format!("unknown node kind {other:?}: use real or emulated")),
        }
    }
}

/// What every real node of one cluster shares: the programs, the images, the machine's
/// cgroups and the cluster's identity.
pub struct RealNodeEnv {
    pub stack: NodeStack,
    pub images: NodeImages,
    cgroups: Cgroups,
    server: String,
    feature_gates: String,
    prefix: String,
}

impl RealNodeEnv {
    /// Checks the machine, builds or finds the programs and images, and records the kernel
    /// settings the kubelets will change.
    pub async fn prepare(
        release: &Release,
        cluster_dir: &Path,
        server: &str,
        feature_gates: &str,
        progress: &Progress,
    ) -> Result<RealNodeEnv> {
        let (cgroups, stack, images) = prebuild(release, progress).await?;
        SysctlsBefore::record_once(cluster_dir).map_err(ClusterError::io("recording the kernel settings"))?;
        host::raise_inotify_instances().map_err(ClusterError::io("raising fs.inotify.max_user_instances"))?;
        Ok(RealNodeEnv {
            stack,
            images,
            cgroups,
            server: server.to_string(),
            feature_gates: feature_gates.to_string(),
            prefix: kubelet::cluster_prefix(cluster_dir),
        })
    }
}

/// Where pods find the API server: the `kubernetes` Service's cluster IP, port 443.
fn service_address() -> std::net::SocketAddr {
    let ip: std::net::Ipv4Addr = super::SERVICE_IP.parse().expect("SERVICE_IP is an IPv4 address");
    (ip, 443).into()
}

impl RealNodeEnv {
    /// The API server's address on the host, from the cluster's server URL.
    fn upstream(&self) -> Result<std::net::SocketAddr> {
        let host_port = self.server.trim_start_matches("https://").trim_end_matches('/');
        host_port.parse().map_err(|e| ClusterError::Io {
            context: format!("reading the API server's address from {}", self.server),
            source: std::io::Error::other(e),
        })
    }
}

/// Checks that this machine can run real nodes and builds (or finds in the cache) their
/// programs and images, so that a later start is quick.
pub async fn prebuild(release: &Release, progress: &Progress) -> Result<(Cgroups, NodeStack, NodeImages)> {
    let cgroups = host::check_support().map_err(|reason| ClusterError::RealNodesUnsupported { reason })?;
    let stack = stack::ensure(release, progress).await?;
    let images = images::ensure(progress)?;
    Ok((cgroups, stack, images))
}

/// One running real node: its containerd and kubelet, and what they set up.
pub struct RealNode {
    cfg: NodeConfig,
    env: Arc<RealNodeEnv>,
    client: kube::Client,
    containerd: Option<Supervised>,
    kubelet: Option<Supervised>,
    kubelet_args: Vec<String>,
    /// The node's mount namespace (`mountns`), held for kubelet restarts.
    namespace: Option<mountns::Namespace>,
    /// The `kubernetes` Service in the node's pods.
    service: Option<service::ServiceProxy>,
    lifetime: Lifetime,
    /// The node's number in the cluster, which picks its pod subnet.
    index: usize,
    torn_down: bool,
}

/// How long a node may take from kubelet start to Ready (measured: about 1 s).
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long containerd may take to answer on its socket (measured: well under a second).
const CONTAINERD_TIMEOUT: Duration = Duration::from_secs(30);

impl RealNode {
    /// Starts node number `index` (0-based) of the cluster: containerd, the images, the
    /// kubelet; returns once the Node is Ready and has its address.
    pub async fn start(
        env: Arc<RealNodeEnv>,
        client: kube::Client,
        pki: &Pki,
        cfg: NodeConfig,
        index: usize,
        lifetime: Lifetime,
    ) -> Result<RealNode> {
        let mut node = RealNode {
            cfg,
            env,
            client,
            containerd: None,
            kubelet: None,
            kubelet_args: Vec::new(),
            namespace: None,
            service: None,
            lifetime,
            index,
            torn_down: false,
        };
        // On any error the half-started node is torn down by Drop.
        node.start_inner(pki).await?;
        Ok(node)
    }

    async fn start_inner(&mut self, pki: &Pki) -> Result<()> {
        let cfg = &self.cfg;
        cfg.create_dirs().map_err(ClusterError::io(format!("creating the dirs of {}", cfg.name)))?;
        self.start_runtime().await?;
        let cfg = &self.cfg;
        let (kubelet_cgroup, _) = kubelet::cgroup_names(&self.env.prefix, &cfg.name);
        let dirs = ContainerdDirs::new(&cfg.root);
        let setup = KubeletSetup {
            node: cfg,
            server: &self.env.server,
            containerd_endpoint: dirs.endpoint(),
            cgroup_root: &format!("/{kubelet_cgroup}"),
            port: ports::free_port()?,
            healthz_port: ports::free_port()?,
            feature_gates: &self.env.feature_gates,
        };
        let files = setup.write(pki)?;
        self.kubelet_args = setup.args(&files);
        self.spawn_kubelet()?;
        self.wait_ready().await?;
        kubelet::set_addresses(&self.client, &self.cfg.name, self.cfg.ip)
            .await
            .map_err(ClusterError::kube(format!("setting the addresses of node {}", self.cfg.name)))?;
        Ok(())
    }

    /// The machine's side of a boot: the node's cgroups, its CNI config, containerd in a
    /// mount namespace of its own with the `kubernetes` Service in its pods, and the images.
    async fn start_runtime(&mut self) -> Result<()> {
        let cfg = &self.cfg;
        let (kubelet_cgroup, runtime_cgroup) = kubelet::cgroup_names(&self.env.prefix, &cfg.name);
        for name in [&kubelet_cgroup, &runtime_cgroup] {
            self.env.cgroups.create(name).map_err(ClusterError::io(format!("creating cgroup /{name}")))?;
        }
        let cni = cni::install(&cfg.root, &cni::pod_subnet(self.index)?)?;

        let dirs = ContainerdDirs::new(&cfg.root);
        ContainerdConfig {
            dirs: &dirs,
            stack: &self.env.stack,
            node_ip: cfg.ip,
            cdi_dir: &cfg.cdi_dir(),
            cni_bin_dir: &cni.bin_dir,
            cni_conf_dir: &cni.conf_dir,
        }
        .write()?;
        let mut cmd = std::process::Command::new(&self.env.stack.containerd);
        cmd.arg("--config").arg(dirs.config()).env_clear().env("PATH", containerd::path_env(&self.env.stack));
        let binds = mountns::node_binds(&cfg.root, &cfg.cdi_dir());
        let what = format!("setting up the mount namespace of {}", cfg.name);
        let in_namespace = |e| ClusterError::io(what.clone())(e);
        mountns::ensure_mount_points(&binds).map_err(&in_namespace)?;
        mountns::start_in_new(&mut cmd, &binds).map_err(&in_namespace)?;
        let log = cfg.root.join("containerd.log");
        let proc = Supervised::spawn_command("containerd", cmd, &log, false, self.lifetime)?;
        // Before it starts any shim: the shims and their containers inherit the cgroup, so
        // teardown finds every one of them there.
        let pid = proc.record().pid;
        self.namespace = Some(mountns::Namespace::of(pid).map_err(&in_namespace)?);
        let proxy = service::ServiceProxy::start(&cni.service_dir, pid, service_address(), self.env.upstream()?);
        self.service =
            Some(proxy.map_err(ClusterError::io(format!("serving the kubernetes Service on {}", cfg.name)))?);
        self.containerd = Some(proc);
        self.env.cgroups.add(&runtime_cgroup, pid).map_err(ClusterError::io("moving containerd into its cgroup"))?;
        // A containerd that exits (a socket path it cannot take, a bad config) is named at once
        // with its exit status, not after the whole wait.
        let ctr = self.env.stack.ctr.clone();
        let ready = containerd::wait_ready(&ctr, &dirs, CONTAINERD_TIMEOUT);
        tokio::pin!(ready);
        let outcome = loop {
            tokio::select! {
                outcome = &mut ready => break outcome,
                () = tokio::time::sleep(Duration::from_millis(100)) => {
                    if let Some(status) = self.containerd.as_mut().and_then(Supervised::exited) {
                        return Err(ClusterError::ComponentDied {
                            component: format!("containerd of {}", self.cfg.name),
                            status: status.to_string(),
                            tail: log_tail(&log, 15),
                            log,
                        });
                    }
                }
            }
        };
        if let Err(last) = outcome {
            return Err(self.component_failed("containerd", &log, CONTAINERD_TIMEOUT, last));
        }
        for archive in [&self.env.images.pause, &self.env.images.workload] {
            images::import(&self.env.stack.ctr, &dirs.socket(), archive).await?;
        }
        Ok(())
    }

    /// Imports an image archive into the node's containerd, as a node that pulled it would
    /// have it: pods with `imagePullPolicy: IfNotPresent` (or `Never`) run it without a pull.
    pub async fn import_image(&self, archive: &Path) -> Result<()> {
        images::import(&self.env.stack.ctr, &ContainerdDirs::new(&self.cfg.root).socket(), archive).await
    }

    fn spawn_kubelet(&mut self) -> Result<()> {
        let mut cmd = std::process::Command::new(&self.env.stack.kubelet);
        cmd.args(&self.kubelet_args).env_clear().env("PATH", super::node::DEFAULT_PATH);
        if let Some(ns) = &self.namespace {
            ns.join(&mut cmd).map_err(ClusterError::io(format!("joining the mount namespace of {}", self.cfg.name)))?;
        }
        // Appended: a restarted kubelet's log follows the earlier one, as in a node's journal.
        self.kubelet = Some(Supervised::spawn_command("kubelet", cmd, &self.log_path(), true, self.lifetime)?);
        Ok(())
    }

    /// Waits until the Node is Ready, or names the component that died or stayed unready.
    async fn wait_ready(&mut self) -> Result<()> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut last = String::from("the Node was not registered");
        while Instant::now() < deadline {
            for (name, log) in [("kubelet", self.log_path()), ("containerd", self.cfg.root.join("containerd.log"))] {
                let proc = if name == "kubelet" { self.kubelet.as_mut() } else { self.containerd.as_mut() };
                if let Some(status) = proc.and_then(|p| p.exited()) {
                    return Err(ClusterError::ComponentDied {
                        component: format!("{name} of {}", self.cfg.name),
                        status: status.to_string(),
                        tail: log_tail(&log, 15),
                        log,
                    });
                }
            }
            match nodes.get_opt(&self.cfg.name).await {
                Ok(Some(node)) => {
                    let ready = node
                        .status
                        .and_then(|s| s.conditions)
                        .unwrap_or_default()
                        .into_iter()
                        .find(|c| c.type_ == "Ready");
                    match ready {
                        Some(c) if c.status == "True" => return Ok(()),
                        Some(c) => last = format!("Ready={}: {}", c.status, c.message.unwrap_or_default()),
                        None => last = "no Ready condition yet".into(),
                    }
                }
                Ok(None) => {}
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Err(self.component_failed("kubelet", &self.log_path(), READY_TIMEOUT, last))
    }

    fn component_failed(&self, name: &str, log: &Path, timeout: Duration, last: String) -> ClusterError {
        ClusterError::NotHealthy {
            component: format!("{name} of {}", self.cfg.name),
            timeout_s: timeout.as_secs(),
            last,
            log: log.to_path_buf(),
            tail: log_tail(log, 15),
        }
    }

    /// A node restart: the kubelet process stops and starts again; containerd and the
    /// containers keep running, and the kubelet finds its state in its checkpoints.
    pub async fn restart_kubelet(&mut self) -> Result<()> {
        if let Some(mut k) = self.kubelet.take() {
            k.stop(Duration::from_secs(10));
        }
        self.spawn_kubelet()?;
        self.wait_ready().await
    }

    /// A node reboot: the machine goes down at once (kubelet, containerd, every container;
    /// tmpfs is lost: containerd's state and the CDI spec dir, as `/run` and `/var/run/cdi`
    /// are on a real machine) and boots again; disk is kept: the kubelet's checkpoints, its
    /// pods' dirs, containerd's images. The kubelet then finds its pods without sandboxes and
    /// starts them again, preparing their claims anew.
    pub async fn reboot(&mut self) -> Result<()> {
        self.power_off();
        let dirs = ContainerdDirs::new(&self.cfg.root);
        for tmpfs in [dirs.state(), dirs.runc_root(), self.cfg.cdi_dir()] {
            super::node::config::empty_dir(&tmpfs).map_err(ClusterError::io(format!(
                "emptying {} for the reboot of {}",
                tmpfs.display(),
                self.cfg.name
            )))?;
        }
        self.start_runtime().await?;
        self.spawn_kubelet()?;
        self.wait_ready().await
    }

    /// Node removal: the machine goes away (kubelet, containerd and every container stop at
    /// once) and its Node object is deleted.
    pub async fn remove(mut self) -> Result<()> {
        self.teardown();
        super::nodes::delete_node(&self.client, &self.cfg.name).await
    }

    /// What the node holds in memory now: the kubelet, and containerd with its shims and
    /// containers (all in the node's runtime cgroup), in MiB.
    pub fn resident_mib(&self) -> f64 {
        let (_, runtime) = kubelet::cgroup_names(&self.env.prefix, &self.cfg.name);
        let mut pids = self.env.cgroups.processes(&runtime);
        pids.extend(self.kubelet.as_ref().map(|k| k.record().pid));
        pids.iter().map(|pid| resident_mib(*pid)).sum()
    }

    /// Stops everything of the node and puts the machine back; idempotent.
    fn teardown(&mut self) {
        if std::mem::replace(&mut self.torn_down, true) {
            return;
        }
        self.power_off();
    }

    /// Everything of the node stops and what it set up on the machine goes (processes,
    /// mounts, cgroups, log links); its dirs stay.
    fn power_off(&mut self) {
        if let Some(mut k) = self.kubelet.take() {
            k.stop(Duration::from_secs(5));
        }
        scrub_node(&self.env.cgroups, &self.env.prefix, &self.cfg.root, &self.cfg.name);
        if let Some(mut c) = self.containerd.take() {
            c.stop(Duration::from_secs(1));
        }
        self.namespace = None;
        self.service = None;
    }

    pub fn config(&self) -> &NodeConfig {
        &self.cfg
    }

    pub fn name(&self) -> &str {
        &self.cfg.name
    }

    pub fn log_path(&self) -> PathBuf {
        self.cfg.root.join("kubelet.log")
    }

    /// The last `lines` lines of the kubelet's log about DRA, plugins, claims and CDI, and
    /// its errors, quoted as [`log_tail`] quotes.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let relevant: Vec<&str> = text.lines().filter(|l| is_dra_line(l)).collect();
        crate::error::quoted_tail(&relevant, lines)
    }

    /// The kubelet's DRA checkpoint: claim UID → the CDI device IDs the driver returned.
    pub fn prepared_claims(&self) -> Vec<(String, Vec<String>)> {
        read_kubelet_checkpoint(&self.cfg.root.join("dra_manager_state"))
    }

    /// The drivers whose plugin the kubelet is connected to now, from its log ("Connection
    /// changed", logged at -v=2).
    pub fn registered_drivers(&self) -> Vec<String> {
        connected_drivers(&std::fs::read_to_string(self.log_path()).unwrap_or_default())
    }

    /// The DRA sockets of the plugin instances the kubelet is connected to, by driver.
    pub fn registered_endpoints(&self) -> Vec<(String, std::path::PathBuf)> {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        connected_endpoints(&log).into_iter().map(|(d, e)| (d, e.into())).collect()
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// Kills whatever runs in a node's cgroups (containers, shims, containerd), detaches the
/// mounts under its dir, removes its cgroups and its log links. Used by teardown and for the
/// leftovers of a killed run; returns what it found, for the record.
pub fn scrub_node(cgroups: &Cgroups, prefix: &str, root: &Path, name: &str) -> Vec<String> {
    let mut found = Vec::new();
    let (kubelet_cgroup, runtime_cgroup) = kubelet::cgroup_names(prefix, name);
    for cg in [&kubelet_cgroup, &runtime_cgroup] {
        let killed = cgroups.kill_all(cg, Duration::from_secs(10));
        if killed > 0 {
            found.push(format!("{killed} processes in /{cg}"));
        }
    }
    let unmounted = host::unmount_under(root);
    if unmounted > 0 {
        found.push(format!("{unmounted} mounts under {}", root.display()));
    }
    for cg in [&kubelet_cgroup, &runtime_cgroup] {
        if let Err(e) = cgroups.remove(cg) {
            found.push(format!("cgroup /{cg} not removed: {e}"));
        }
    }
    let links = host::remove_container_log_links(&root.join("pod-logs"));
    if links > 0 {
        found.push(format!("{links} links in /var/log/containers"));
    }
    let results = host::remove_cni_results(root);
    if results > 0 {
        found.push(format!("{results} CNI results in /var/lib/cni"));
    }
    found
}

/// Imports an image archive into every real node of the running cluster recorded in
/// `cluster_dir`, as `kind load image-archive` does: its pods then run it without a registry.
/// Returns the nodes it went to.
pub async fn load_image(cluster_dir: &Path, archive: &Path, progress: &Progress) -> Result<Vec<String>> {
    let info = crate::local::ClusterInfo::load(cluster_dir)?;
    if !archive.is_file() {
        return Err(ClusterError::Io {
            context: format!("reading the image archive {}", archive.display()),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
    }
    let mut nodes: Vec<(String, PathBuf)> = std::fs::read_dir(cluster_dir.join("nodes"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), ContainerdDirs::new(&e.path()).socket()))
        .filter(|(_, socket)| socket.exists())
        .collect();
    nodes.sort();
    if nodes.is_empty() {
        return Err(ClusterError::RealNodesNeeded { what: "loading an image".into() });
    }
    let release = crate::local::versions::find_release(&info.kubernetes_version)?;
    let stack = stack::ensure(release, progress).await?;
    for (name, socket) in &nodes {
        images::import(&stack.ctr, socket, archive).await?;
        progress.line(format!("{name}: imported {}", archive.display()));
    }
    Ok(nodes.into_iter().map(|(name, _)| name).collect())
}

/// Scrubs every real node of the cluster in `cluster_dir` and writes back the kernel
/// settings recorded before its first node started. A cluster without real nodes has
/// nothing to scrub.
pub fn scrub(cluster_dir: &Path) -> Vec<String> {
    if !host::has_real_nodes(cluster_dir) {
        return Vec::new();
    }
    let mut found = Vec::new();
    if let Some(cgroups) = Cgroups::detect() {
        let prefix = kubelet::cluster_prefix(cluster_dir);
        for entry in std::fs::read_dir(cluster_dir.join("nodes")).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            found.extend(scrub_node(&cgroups, &prefix, &entry.path(), &name));
        }
        // Cgroups of nodes whose dir is already gone.
        for cg in cgroups.named_with_prefix(&prefix) {
            cgroups.kill_all(&cg, Duration::from_secs(5));
            if cgroups.remove(&cg).is_ok() {
                found.push(format!("cgroup /{cg}"));
            }
        }
    }
    if let Some(before) = SysctlsBefore::load() {
        found.extend(before.restore().into_iter().map(|s| format!("restored {s}")));
    }
    found
}

/// `VmRSS` of a process in MiB; 0 once it is gone.
pub fn resident_mib(pid: u32) -> f64 {
    super::process::status_mib(pid, "VmRSS")
}

/// Reads the kubelet's `dra_manager_state`: a JSON envelope whose `Data` is the JSON of the
/// claim list (pkg/kubelet/cm/dra/state).
pub fn read_kubelet_checkpoint(path: &Path) -> Vec<(String, Vec<String>)> {
    let Some(envelope) =
        std::fs::read_to_string(path).ok().and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
    else {
        return Vec::new();
    };
    let Some(data) = envelope["Data"].as_str().and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok()) else {
        return Vec::new();
    };
    data["ClaimInfoStateList"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|claim| {
            let ids = claim["DriverState"]
                .as_object()
                .into_iter()
                .flat_map(|m| m.values())
                .flat_map(|d| d["Devices"].as_array().into_iter().flatten())
                .flat_map(|dev| dev["CDIDeviceIDs"].as_array().into_iter().flatten())
                .filter_map(|id| id.as_str().map(str::to_string))
                .collect();
            (claim["ClaimUID"].as_str().unwrap_or_default().to_string(), ids)
        })
        .collect()
}

/// Whether a kubelet log line is evidence for DRA: errors (klog's `E` lines), and what
/// concerns plugins, claims, CDI and the DRA manager.
fn is_dra_line(line: &str) -> bool {
    const WORDS: &[&str] = &["DRA", "dra_", "/dra", "lugin", "laim", "CDI", "Prepare", "prepare"];
    line.starts_with('E') || WORDS.iter().any(|w| line.contains(w))
}

/// The drivers with an instance whose last "Connection changed" line says `connected=true`.
fn connected_drivers(log: &str) -> Vec<String> {
    let drivers: std::collections::BTreeSet<String> = connected_endpoints(log).into_iter().map(|(d, _)| d).collect();
    drivers.into_iter().collect()
}

/// The (driver, DRA socket) of each plugin instance whose last "Connection changed" line says
/// `connected=true`: a rolling update has two of one driver.
fn connected_endpoints(log: &str) -> Vec<(String, String)> {
    let field = |line: &str, name: &str| {
        line.split(&format!("{name}=\"")).nth(1).and_then(|r| r.split('"').next()).map(str::to_string)
    };
    let mut state = std::collections::BTreeMap::new();
    for line in log.lines().filter(|l| l.contains("\"Connection changed\"")) {
        let (Some(driver), Some(endpoint)) = (field(line, "driverName"), field(line, "endpoint")) else { continue };
        state.insert((driver, endpoint), line.contains("connected=true"));
    }
    state.into_iter().filter(|(_, up)| *up).map(|(key, _)| key).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelet_checkpoint_gives_each_claim_its_cdi_ids() {
        let data = serde_json::json!({
            "kind": "DRACheckpoint", "apiVersion": "checkpoint.dra.kubelet.k8s.io/v1",
            "ClaimInfoStateList": [{
                "ClaimUID": "u1", "ClaimName": "c", "Namespace": "n", "PodUIDs": {"p": {}},
                "DriverState": {"gpu.mock.dracheck.io": {"Devices": [
                    {"PoolName": "node-1", "DeviceName": "gpu-0", "RequestNames": ["r"], "CDIDeviceIDs": ["k8s.mock/gpu=a"]},
                ]}},
            }],
        });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dra_manager_state");
        std::fs::write(&path, serde_json::json!({"Data": data.to_string(), "Checksum": 1}).to_string()).unwrap();
        assert_eq!(read_kubelet_checkpoint(&path), vec![("u1".to_string(), vec!["k8s.mock/gpu=a".to_string()])]);
        assert!(read_kubelet_checkpoint(&dir.path().join("missing")).is_empty());
    }

    #[test]
    fn the_evidence_keeps_dra_lines_and_errors_only() {
        assert!(is_dra_line(r#"I1203 dra_plugin_manager.go:140] "Connection changed" driverName="a.io""#));
        assert!(is_dra_line(r#"E1203 kuberuntime_manager.go:1] "CreateContainer failed""#));
        assert!(is_dra_line(r#"I1203 reconciler.go:161] "OperationExecutor.RegisterPlugin started""#));
        assert!(!is_dra_line(r#"I1203 kubelet_node_status.go:1] "Node became ready""#));
    }

    #[test]
    fn connected_drivers_follow_the_last_connection_change() {
        let log = r#"I1203 1 dra_plugin_manager.go:140] "Connection changed" driverName="a.io" endpoint="x" connected=true
I1203 2 dra_plugin_manager.go:140] "Connection changed" driverName="b.io" endpoint="y" connected=true
I1203 3 dra_plugin_manager.go:140] "Connection changed" driverName="a.io" endpoint="x" connected=false
"#;
        assert_eq!(connected_drivers(log), vec!["b.io".to_string()]);
        let rolling = r#"I1203 1 dra_plugin_manager.go:140] "Connection changed" driverName="a.io" endpoint="/p/dra.sock" connected=true
I1203 2 dra_plugin_manager.go:140] "Connection changed" driverName="a.io" endpoint="/p/dra-new.sock" connected=true
I1203 3 dra_plugin_manager.go:140] "Connection changed" driverName="a.io" endpoint="/p/dra.sock" connected=false
"#;
        assert_eq!(connected_endpoints(rolling), vec![("a.io".to_string(), "/p/dra-new.sock".to_string())]);
        assert_eq!(connected_drivers(rolling), vec!["a.io".to_string()], "one instance left is enough");
    }

    #[test]
    fn node_kinds_parse_and_name_themselves() {
        for kind in [NodeKind::Real, NodeKind::Emulated] {
            assert_eq!(kind.name().parse::<NodeKind>().unwrap(), kind);
        }
        assert!("virtual".parse::<NodeKind>().unwrap_err().contains("real or emulated"));
    }
}
