//! The embedded local cluster: real upstream etcd, kube-apiserver, kube-scheduler and
//! kube-controller-manager processes on 127.0.0.1, with a PKI of their own.
//!
//! Start order and readiness: etcd `/health` → apiserver `/readyz` → scheduler and
//! controller-manager `/healthz` (started together) → the `default` ServiceAccount, which
//! proves that the controllers act on the API. Teardown runs the other way round.

pub mod binaries;
pub mod capacity;
pub mod drivers;
mod health;
pub mod node;
pub mod nodes;
pub mod owner;
pub mod pki;
pub mod ports;
pub mod process;
pub mod real;
pub mod reap;
pub mod state;
pub mod versions;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::config::{KubeConfigOptions, Kubeconfig};

pub use self::binaries::BinDir;
pub use self::capacity::{NodeLimit, node_limit};
pub use self::drivers::{DriverInstance, DriverSpec};
use self::health::{etcd_health, http_ok, wait_healthy};
pub use self::node::{EmulatedNode, NodeConfig};
pub use self::nodes::LocalNode;
use self::owner::{Owner, OwnerProcess};
use self::pki::Pki;
pub use self::process::Lifetime;
use self::process::Supervised;
pub use self::real::NodeKind;
use self::real::{RealNode, RealNodeEnv};
use self::state::StateDir;
pub use self::state::{ClusterInfo, Stopped};
use crate::error::{ClusterError, Result};
use crate::gobuild::fmt_elapsed;
pub use dracheck_gobuild::Progress;

/// How to start a local cluster. `Default` gives a throw-away cluster of the default release,
/// on free ports, in a temporary state dir, that dies with its handle.
#[derive(Debug, Clone)]
pub struct LocalClusterOptions {
    /// `1.37`, `v1.37.2`…; `None` is the default release, or whatever `k8s_bin_dir` holds.
    pub k8s_version: Option<String>,
    /// Prebuilt binaries to use instead of the cached build.
    pub k8s_bin_dir: Option<PathBuf>,
    /// `None`: a temporary dir removed at teardown.
    pub state_dir: Option<PathBuf>,
    /// `Name=bool,…`, passed to every component.
    pub feature_gates: String,
    /// `resource.k8s.io` versions to serve beyond what a default API server of the release
    /// serves (`v1beta2`, …); empty: exactly those.
    pub resource_api_versions: Vec<String>,
    /// `None`: a free port.
    pub apiserver_port: Option<u16>,
    /// For each component to become healthy.
    pub start_timeout: Duration,
    pub lifetime: Lifetime,
    pub progress: Progress,
    /// What [`LocalCluster::add_nodes`] starts.
    pub node_kind: NodeKind,
    /// Only etcd and kube-apiserver, ready at `/readyz`: the floor that `bench cluster-up`
    /// compares a whole start with. Nothing schedules or reconciles in such a cluster.
    pub floor: bool,
    /// The program that reaps the cluster should its starter be killed (see [`reap::Reaper`]);
    /// `None`: the next run or `cluster down --stale` does.
    pub reaper: Option<reap::Reaper>,
}

impl LocalClusterOptions {
    /// The defaults, with the binaries chosen by `DRACHECK_K8S_BIN_DIR` or
    /// `DRACHECK_K8S_VERSION` when set (as `cargo xtask test` passes them on to the tests),
    /// and progress on stderr.
    pub fn from_env() -> Self {
        let var = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
        LocalClusterOptions {
            k8s_version: var("DRACHECK_K8S_VERSION"),
            k8s_bin_dir: var("DRACHECK_K8S_BIN_DIR").map(PathBuf::from),
            node_kind: var("DRACHECK_NODE_KIND").and_then(|k| k.parse().ok()).unwrap_or_default(),
            progress: Progress::stderr(),
            ..LocalClusterOptions::default()
        }
    }
}

impl Default for LocalClusterOptions {
    fn default() -> Self {
        LocalClusterOptions {
            k8s_version: None,
            k8s_bin_dir: None,
            state_dir: None,
            feature_gates: String::new(),
            resource_api_versions: Vec::new(),
            apiserver_port: None,
            start_timeout: Duration::from_secs(60),
            lifetime: Lifetime::Attached,
            progress: Progress::quiet(),
            node_kind: NodeKind::default(),
            floor: false,
            reaper: None,
        }
    }
}

/// A running local cluster. Dropping it stops every process it started and removes its state
/// dir, unless [`LocalCluster::detach`] handed the cluster over to `cluster down`.
pub struct LocalCluster {
    client: kube::Client,
    info: ClusterInfo,
    // Dropped in this order: drivers, then nodes, then the control plane.
    drivers: Vec<DriverInstance>,
    nodes: Vec<LocalNode>,
    node_kind: NodeKind,
    /// Shared by the real nodes; prepared when the first one is added.
    real: Option<Arc<RealNodeEnv>>,
    release: Option<&'static versions::Release>,
    progress: Progress,
    pki: Pki,
    running: Running,
    lifetime: Lifetime,
    pub startup: Duration,
    /// Finding or building the binaries (the control plane's, and the real nodes' when the
    /// first is added); not part of `startup`.
    pub build: Duration,
}

/// The processes and the state dir, torn down on drop: also when start-up fails halfway or
/// its future is dropped (Ctrl-C), and during a panic's unwinding.
struct Running {
    processes: Vec<Supervised>,
    state: StateDir,
    detached: bool,
    /// Watches this process from outside and reaps the cluster if it is killed.
    reaper: Option<std::process::Child>,
}

impl Running {
    fn teardown(&mut self) {
        while let Some(mut p) = self.processes.pop() {
            p.stop(Duration::from_secs(10));
        }
        // Real nodes tear themselves down when dropped; this catches what a node that never
        // finished starting left, and writes the kernel settings back once all are gone.
        real::scrub(self.state.path());
        self.state.remove();
        self.dismiss_reaper();
    }

    /// Nothing is left to reap: the reaper goes now rather than at its next look.
    fn dismiss_reaper(&mut self) {
        if let Some(mut reaper) = self.reaper.take() {
            let _ = reaper.kill();
            let _ = reaper.wait();
        }
    }

    /// Teardown after a failed start. An error that quotes a component's log would otherwise
    /// name a file that teardown deletes: the logs are moved out of the state dir first, and
    /// the error names where they went.
    fn fail(&mut self, mut e: ClusterError) -> ClusterError {
        while let Some(mut p) = self.processes.pop() {
            p.stop(Duration::from_secs(10));
        }
        real::scrub(self.state.path());
        if let Some(log) = e.quoted_log_mut() {
            let logs = self.state.path().join("logs");
            if let Some(kept) = state::keep_logs(self.state.path()) {
                *log = state::moved_log(log, &logs, &kept);
            }
        }
        self.state.remove();
        self.dismiss_reaper();
        e
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.detached {
            self.teardown();
        }
    }
}

impl LocalCluster {
    pub async fn start(opts: LocalClusterOptions) -> Result<LocalCluster> {
        let feature_gates = validate_feature_gates(&opts.feature_gates)?;
        let building = std::time::Instant::now();
        let bins = resolve_binaries(&opts).await?;
        let build = building.elapsed();
        let release = versions::find_release(&bins.version).ok();
        if let Some(r) = release {
            r.check_resource_versions(&opts.resource_api_versions)?;
        }
        let state = match &opts.state_dir {
            Some(dir) => StateDir::given(dir)?,
            None => StateDir::temporary()?,
        };
        let dir = state.path().to_path_buf();
        let mut running = Running { processes: Vec::new(), state, detached: false, reaper: None };
        // The owner is on record before anything else is in the dir, so that a later run can
        // tell, whenever this one is killed, that the dir is stale (see `reap`).
        let owner = Owner::Process(OwnerProcess::current());
        if let Err(e) = (ClusterInfo { owner, ..ClusterInfo::default() }).save(&dir) {
            return Err(running.fail(e));
        }
        if let Some(reaper) = &opts.reaper {
            match reaper.spawn(&dir) {
                Ok(child) => running.reaper = Some(child),
                Err(e) => return Err(running.fail(e)),
            }
        }
        let outcome = async {
            let progress = &opts.progress;
            let started = Instant::now();

            let apiserver_port = ports::claim(opts.apiserver_port, "kube-apiserver")?;
            let etcd_port = ports::free_port()?;
            let etcd_peer_port = ports::free_port()?;
            let scheduler_port = ports::free_port()?;
            let kcm_port = ports::free_port()?;
            let server = format!("https://127.0.0.1:{apiserver_port}");

            let pki = Pki::create(&dir)?;
            let apiserver_cert = pki.serving(
                "kube-apiserver",
                &[
                    "kubernetes",
                    "kubernetes.default",
                    "kubernetes.default.svc",
                    "kubernetes.default.svc.cluster.local",
                    SERVICE_IP,
                ],
            )?;
            let scheduler_cert = pki.serving("kube-scheduler", &[])?;
            let kcm_cert = pki.serving("kube-controller-manager", &[])?;
            let kubelet_client = pki.client("kube-apiserver-kubelet-client", Some("system:masters"))?;
            let front_proxy = pki.client("front-proxy-client", None)?;
            let (sa_key, sa_pub) = pki.service_account_keys()?;
            let kubeconfig = dir.join("admin.kubeconfig");
            pki.kubeconfig(
                &kubeconfig,
                &server,
                "dracheck-admin",
                &pki.client("dracheck-admin", Some("system:masters"))?,
            )?;
            let scheduler_kc = dir.join("scheduler.kubeconfig");
            pki.kubeconfig(
                &scheduler_kc,
                &server,
                "system:kube-scheduler",
                &pki.client("system:kube-scheduler", None)?,
            )?;
            let kcm_kc = dir.join("controller-manager.kubeconfig");
            pki.kubeconfig(
                &kcm_kc,
                &server,
                "system:kube-controller-manager",
                // One identity for every controller (see `--use-service-account-credentials`),
                // which needs the rights of all of them.
                &pki.client("system:kube-controller-manager", Some("system:masters"))?,
            )?;

            let mut info = ClusterInfo {
                owner,
                kubernetes_version: bins.version.clone(),
                server: server.clone(),
                kubeconfig: kubeconfig.clone(),
                feature_gates: feature_gates.clone(),
                ports: [
                    ("etcd", etcd_port),
                    ("etcd-peer", etcd_peer_port),
                    ("kube-apiserver", apiserver_port),
                    ("kube-scheduler", scheduler_port),
                    ("kube-controller-manager", kcm_port),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
                ..ClusterInfo::default()
            };
            let logs = dir.join("logs");
            std::fs::create_dir_all(&logs).map_err(ClusterError::io(format!("creating {}", logs.display())))?;
            let p = |s: &Path| s.display().to_string();
            let gates = |args: &mut Vec<String>| {
                if !feature_gates.is_empty() {
                    args.push(format!("--feature-gates={feature_gates}"));
                }
            };
            let spawn = |running: &mut Running, info: &mut ClusterInfo, name: &str, args: Vec<String>| -> Result<()> {
                let proc =
                    Supervised::spawn(name, &bins.path(name), &args, &logs.join(format!("{name}.log")), opts.lifetime)?;
                info.processes.push(proc.record().clone());
                running.processes.push(proc);
                info.save(&dir)
            };

            progress.line(format!("starting etcd {} on 127.0.0.1:{etcd_port}", release.map_or("", |r| r.etcd_version)));
            let etcd_url = format!("http://127.0.0.1:{etcd_port}");
            let peer_url = format!("http://127.0.0.1:{etcd_peer_port}");
            spawn(
                &mut running,
                &mut info,
                "etcd",
                vec![
                    "--name=dracheck".into(),
                    format!("--data-dir={}", p(&dir.join("etcd"))),
                    format!("--listen-client-urls={etcd_url}"),
                    format!("--advertise-client-urls={etcd_url}"),
                    format!("--listen-peer-urls={peer_url}"),
                    format!("--initial-advertise-peer-urls={peer_url}"),
                    format!("--initial-cluster=dracheck={peer_url}"),
                    // Throw-away data: durability is not worth the fsync latency.
                    "--unsafe-no-fsync=true".into(),
                    "--log-level=warn".into(),
                ],
            )?;
            wait_healthy("etcd", opts.start_timeout, &mut running.processes.iter_mut().collect::<Vec<_>>(), || {
                etcd_health(etcd_port)
            })
            .await?;

            progress.line(format!("starting kube-apiserver {} on {server}", bins.version));
            let mut args = vec![
                format!("--etcd-servers={etcd_url}"),
                "--bind-address=127.0.0.1".into(),
                "--advertise-address=127.0.0.1".into(),
                // The endpoint reconciler refuses loopback addresses, and nothing in this cluster
                // reaches the apiserver through the `kubernetes` Service anyway.
                "--endpoint-reconciler-type=none".into(),
                format!("--secure-port={apiserver_port}"),
                format!("--tls-cert-file={}", p(&apiserver_cert.cert)),
                format!("--tls-private-key-file={}", p(&apiserver_cert.key)),
                format!("--client-ca-file={}", p(&pki.ca_file)),
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
                format!("--service-account-key-file={}", p(&sa_pub)),
                format!("--service-account-signing-key-file={}", p(&sa_key)),
                format!("--service-cluster-ip-range={SERVICE_RANGE}"),
                "--authorization-mode=Node,RBAC".into(),
                format!("--kubelet-client-certificate={}", p(&kubelet_client.cert)),
                format!("--kubelet-client-key={}", p(&kubelet_client.key)),
                format!("--kubelet-certificate-authority={}", p(&pki.ca_file)),
                // Reach emulated kubelets by their 127.0.0.0/8 InternalIP only: the default order
                // starts with Hostname, which would send a DNS query off the machine.
                "--kubelet-preferred-address-types=InternalIP".into(),
                // The aggregation layer's request-header auth, as every real control plane has it;
                // without it the scheduler and controller-manager log CA bundle errors forever.
                format!("--requestheader-client-ca-file={}", p(&pki.ca_file)),
                "--requestheader-allowed-names=front-proxy-client".into(),
                "--requestheader-username-headers=X-Remote-User".into(),
                "--requestheader-group-headers=X-Remote-Group".into(),
                "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
                format!("--proxy-client-cert-file={}", p(&front_proxy.cert)),
                format!("--proxy-client-key-file={}", p(&front_proxy.key)),
                "--allow-privileged=true".into(),
                "--profiling=false".into(),
            ];
            if let Some(runtime_config) = release.map(|r| r.runtime_config(&opts.resource_api_versions))
                && !runtime_config.is_empty()
            {
                args.push(format!("--runtime-config={runtime_config}"));
            }
            if let Some(log) = std::env::var_os(AUDIT_ENV).filter(|v| !v.is_empty()) {
                args.extend(audit_args(&dir, Path::new(&log))?);
            }
            gates(&mut args);
            spawn(&mut running, &mut info, "kube-apiserver", args)?;
            let client = client_for(&kubeconfig, None).await?;
            wait_healthy(
                "kube-apiserver",
                opts.start_timeout,
                &mut running.processes.iter_mut().collect::<Vec<_>>(),
                || http_ok(&client, "/readyz"),
            )
            .await?;

            // The floor stops here: what follows is the part of a start that a bare etcd and
            // apiserver do not pay for.
            if !opts.floor {
                progress.line("starting kube-scheduler and kube-controller-manager");
                let authn = |kc: &Path| {
                    vec![
                        format!("--kubeconfig={}", p(kc)),
                        format!("--authentication-kubeconfig={}", p(kc)),
                        format!("--authorization-kubeconfig={}", p(kc)),
                        "--leader-elect=false".into(),
                        "--bind-address=127.0.0.1".into(),
                    ]
                };
                let mut args = authn(&scheduler_kc);
                args.extend([
                    format!("--secure-port={scheduler_port}"),
                    format!("--tls-cert-file={}", p(&scheduler_cert.cert)),
                    format!("--tls-private-key-file={}", p(&scheduler_cert.key)),
                ]);
                gates(&mut args);
                spawn(&mut running, &mut info, "kube-scheduler", args)?;
                let mut args = authn(&kcm_kc);
                args.extend([
                    format!("--secure-port={kcm_port}"),
                    format!("--tls-cert-file={}", p(&kcm_cert.cert)),
                    format!("--tls-private-key-file={}", p(&kcm_cert.key)),
                    format!("--service-account-private-key-file={}", p(&sa_key)),
                    format!("--root-ca-file={}", p(&pki.ca_file)),
                    format!("--cluster-signing-cert-file={}", p(&pki.ca_file)),
                    format!("--cluster-signing-key-file={}", p(&dir.join("pki/ca.key"))),
                    // A service account and token per controller made the controller-manager
                    // spend ~5 s of each start creating them one after the other (start-up 8.5 s
                    // → 4.0 s without); nothing here tells the controllers apart by identity.
                    "--use-service-account-credentials=false".into(),
                    "--controllers=*".into(),
                ]);
                gates(&mut args);
                spawn(&mut running, &mut info, "kube-controller-manager", args)?;

                let scheduler = client_for(&kubeconfig, Some(scheduler_port)).await?;
                let kcm = client_for(&kubeconfig, Some(kcm_port)).await?;
                let mut watched = running.processes.iter_mut().collect::<Vec<_>>();
                wait_healthy("kube-scheduler", opts.start_timeout, &mut watched, || http_ok(&scheduler, "/healthz"))
                    .await?;
                wait_healthy("kube-controller-manager", opts.start_timeout, &mut watched, || http_ok(&kcm, "/healthz"))
                    .await?;
                let sa_api: kube::Api<ServiceAccount> = kube::Api::namespaced(client.clone(), "default");
                wait_healthy("kube-controller-manager", opts.start_timeout, &mut watched, || async {
                    match sa_api.get_opt("default").await {
                        Ok(Some(_)) => Ok(()),
                        Ok(None) => Err("the serviceaccount controller has not created default/default yet".into()),
                        Err(e) => Err(e.to_string()),
                    }
                })
                .await?;
            }
            info.resource_api_versions = served_resource_versions(&client).await?;
            info.ready = true;
            info.save(&dir)?;
            let startup = started.elapsed();
            progress.line(format!(
                "cluster {} ready in {} (resource.k8s.io {}), kubeconfig {}",
                bins.version,
                fmt_elapsed(startup),
                info.resource_api_versions.join(", "),
                kubeconfig.display()
            ));
            Ok::<_, ClusterError>((client, info, pki, startup))
        }
        .await;
        match outcome {
            Ok((client, info, pki, startup)) => Ok(LocalCluster {
                client,
                info,
                drivers: Vec::new(),
                nodes: Vec::new(),
                node_kind: opts.node_kind,
                real: None,
                release,
                progress: opts.progress.clone(),
                pki,
                running,
                lifetime: opts.lifetime,
                startup,
                build,
            }),
            Err(e) => Err(running.fail(e)),
        }
    }

    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.info.kubeconfig
    }

    /// As `/version` reports it, e.g. `v1.37.2`.
    pub fn kubernetes_version(&self) -> &str {
        &self.info.kubernetes_version
    }

    /// The `resource.k8s.io` versions the apiserver serves, e.g. `["v1", "v1beta2", …]`.
    pub fn resource_api_versions(&self) -> &[String] {
        &self.info.resource_api_versions
    }

    pub fn state_dir(&self) -> &Path {
        self.running.state.path()
    }

    pub fn info(&self) -> &ClusterInfo {
        &self.info
    }

    /// Adds `count` nodes of the cluster's kind (`node-<n>` at 127.0.10.<n>, numbered after
    /// the existing ones); each registers, heartbeats and runs the pods bound to it.
    pub async fn add_nodes(&mut self, count: usize) -> Result<()> {
        self.add_nodes_reporting(count, &Progress::quiet()).await
    }

    /// [`LocalCluster::add_nodes`], with a progress line every few seconds while many are
    /// added, so that a large count never looks like a hang.
    pub async fn add_nodes_reporting(&mut self, count: usize, progress: &Progress) -> Result<()> {
        node_limit(self.node_kind).check(count + self.nodes.len())?;
        let kind = self.node_kind;
        if kind == NodeKind::Real && self.real.is_none() {
            let release = self.release.ok_or_else(|| ClusterError::RealNodesUnsupported {
                reason: format!(
                    "Kubernetes {} has no build recipe here, so there is no kubelet to build for it",
                    self.info.kubernetes_version
                ),
            })?;
            // Building the node programs is, like the control plane's build, not start-up.
            let building = Instant::now();
            let env = RealNodeEnv::prepare(
                release,
                self.running.state.path(),
                &self.info.server,
                &self.info.feature_gates,
                &self.progress,
            )
            .await?;
            self.build += building.elapsed();
            self.real = Some(Arc::new(env));
        }
        let mut said = std::time::Instant::now();
        for added in 0..count {
            let index = self.nodes.len();
            let cfg = NodeConfig::numbered(self.running.state.path(), index);
            let node = match &self.real {
                Some(env) if kind == NodeKind::Real => LocalNode::Real(
                    RealNode::start(env.clone(), self.client.clone(), &self.pki, cfg, index, self.lifetime).await?,
                ),
                _ => LocalNode::Emulated(EmulatedNode::start(self.client.clone(), &self.pki, cfg).await?),
            };
            self.nodes.push(node);
            if said.elapsed() >= Duration::from_secs(3) && added + 1 < count {
                progress.line(format!("added {} of {count} {} nodes", added + 1, kind.name()));
                said = std::time::Instant::now();
            }
        }
        Ok(())
    }

    pub fn node_kind(&self) -> NodeKind {
        self.node_kind
    }

    pub fn nodes(&self) -> &[LocalNode] {
        &self.nodes
    }

    /// Imports an image archive into every node (real nodes only), so that a chart's pods
    /// find their image without a registry.
    pub async fn import_image(&self, archive: &Path) -> Result<()> {
        for node in &self.nodes {
            node.import_image(archive).await?;
        }
        Ok(())
    }

    pub fn node_mut(&mut self, name: &str) -> Option<&mut LocalNode> {
        self.nodes.iter_mut().find(|n| n.name() == name)
    }

    /// A node reboot: its driver dies with the machine (no shutdown path), the node boots
    /// again (see [`LocalNode::reboot`]) and the driver starts on it again, as its
    /// DaemonSet's pod would. A driver installed by its chart runs in the node's containers
    /// and is started by the kubelet itself.
    pub async fn reboot_node(&mut self, name: &str) -> Result<()> {
        for d in self.drivers.iter_mut().filter(|d| d.node == name) {
            d.kill();
        }
        let node = self.node_mut(name).ok_or_else(|| ClusterError::NoSuchNode { name: name.to_string() })?;
        node.reboot().await?;
        for d in self.drivers.iter_mut().filter(|d| d.node == name) {
            d.start_again()?;
        }
        Ok(())
    }

    /// Node removal: its drivers and containers stop and its Node object is deleted.
    pub async fn remove_node(&mut self, name: &str) -> Result<()> {
        // The machine goes away: its kubelet stops first, so it observes nothing of its
        // plugins' end, and its drivers die without a shutdown path.
        let node = self.nodes.iter().position(|n| n.name() == name).map(|i| self.nodes.remove(i));
        let result = match node {
            Some(n) => n.remove().await,
            None => Ok(()),
        };
        for d in self.drivers.iter_mut().filter(|d| d.node == name) {
            d.kill();
        }
        self.drivers.retain(|d| d.node != name);
        result
    }

    /// Starts `spec` on every emulated node.
    pub fn start_driver(&mut self, spec: &DriverSpec) -> Result<()> {
        for node in &self.nodes {
            let d = DriverInstance::start(spec, node.config(), &self.info.kubeconfig, Lifetime::Attached)?;
            self.drivers.push(d);
        }
        Ok(())
    }

    pub fn drivers(&self) -> &[DriverInstance] {
        &self.drivers
    }

    pub fn driver_mut(&mut self, node: &str) -> Option<&mut DriverInstance> {
        self.drivers.iter_mut().find(|d| d.node == node)
    }

    /// Stops the emulated nodes and their drivers and keeps the control plane, so that a
    /// process that outlives this one (the node agent of a kept run) can run the nodes on.
    /// Returns the nodes that were running.
    pub fn stop_nodes(&mut self) -> Vec<NodeConfig> {
        self.drivers.clear();
        let nodes = self.nodes.iter().map(|n| n.config().clone()).collect();
        self.nodes.clear();
        nodes
    }

    /// Lets the cluster outlive this handle and its owner, so that no later run reaps it;
    /// `cluster down` stops it through the state dir. Only meaningful for clusters started
    /// with [`Lifetime::Detached`].
    pub fn detach(mut self) -> Result<ClusterInfo> {
        debug_assert_eq!(self.lifetime, Lifetime::Detached, "an attached cluster dies with its starter anyway");
        self.running.detached = true;
        // A detached cluster is never reaped.
        self.running.dismiss_reaper();
        for p in self.running.processes.drain(..) {
            p.release();
        }
        // Read back: others (the node agent) may have added their processes to the record.
        // Should the save fail, the record still names this process as the owner, and the
        // next run reaps the cluster once it is gone: nothing is left unrecorded.
        let dir = self.running.state.path().to_path_buf();
        let mut info = ClusterInfo::load(&dir).unwrap_or_else(|_| self.info.clone());
        info.owner = Owner::Detached;
        info.save(&dir)?;
        self.info = info.clone();
        Ok(info)
    }

    /// Stops everything now (dropping the handle does the same).
    pub fn stop(mut self) {
        self.drivers.clear();
        self.nodes.clear();
        self.running.teardown();
    }
}

/// Service cluster IPs, in loopback: the one Service that pods reach, `kubernetes`, is served
/// inside each real node's pods (`real::service`), and no address here leaves loopback.
const SERVICE_RANGE: &str = "127.96.0.0/24";
/// The first address of `SERVICE_RANGE`, which the apiserver gives the `kubernetes` Service.
const SERVICE_IP: &str = "127.96.0.1";

async fn resolve_binaries(opts: &LocalClusterOptions) -> Result<BinDir> {
    match &opts.k8s_bin_dir {
        Some(dir) => {
            let bins = BinDir::existing(dir)?;
            if let Some(requested) = &opts.k8s_version {
                let wanted = requested.trim_start_matches('v');
                let found = bins.version.trim_start_matches('v');
                if found != wanted && !found.starts_with(&format!("{wanted}.")) {
                    return Err(ClusterError::BinaryVersionMismatch {
                        dir: dir.clone(),
                        found: bins.version,
                        requested: requested.clone(),
                    });
                }
            }
            Ok(bins)
        }
        None => {
            let release = match &opts.k8s_version {
                Some(v) => versions::find_release(v)?,
                None => versions::default_release(),
            };
            binaries::cached_or_build(release, opts.node_kind, &opts.progress).await
        }
    }
}

/// Names a file for the API server's audit log (every request: who, verb, resource, at
/// `Metadata` level, one JSON line each): a diagnostic of which client asks for what, as in
/// "Progress and diagnostics".
pub const AUDIT_ENV: &str = "DRACHECK_APISERVER_AUDIT";

fn audit_args(dir: &Path, log: &Path) -> Result<Vec<String>> {
    let policy = dir.join("audit-policy.yaml");
    let text = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n";
    std::fs::write(&policy, text).map_err(|source| ClusterError::Io {
        context: format!("writing the audit policy {}", policy.display()),
        source,
    })?;
    Ok(vec![
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", log.display()),
        "--audit-log-format=json".into(),
    ])
}

/// `Name=true,Other=false` normalized, or the entry that is not of that form.
pub fn validate_feature_gates(gates: &str) -> Result<String> {
    let mut out = Vec::new();
    for entry in gates.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let ok = entry.split_once('=').is_some_and(|(name, value)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric()) && matches!(value, "true" | "false")
        });
        if !ok {
            return Err(ClusterError::InvalidFeatureGates { entry: entry.to_string() });
        }
        out.push(entry.to_string());
    }
    Ok(out.join(","))
}

/// A client with the admin identity of `kubeconfig`, against the apiserver or, with
/// `port`, against another component's secure port on loopback (for its `/healthz`).
pub async fn client_for(kubeconfig: &Path, port: Option<u16>) -> Result<kube::Client> {
    let kc = Kubeconfig::read_from(kubeconfig).map_err(|e| ClusterError::Io {
        context: format!("reading {}", kubeconfig.display()),
        source: std::io::Error::other(e.to_string()),
    })?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.map_err(|e| {
        ClusterError::Io {
            context: format!("loading {}", kubeconfig.display()),
            source: std::io::Error::other(e.to_string()),
        }
    })?;
    if let Some(port) = port {
        config.cluster_url = format!("https://127.0.0.1:{port}").parse().expect("a valid loopback URL");
    }
    config.connect_timeout = Some(Duration::from_secs(2));
    config.read_timeout = Some(Duration::from_secs(30));
    kube::Client::try_from(config).map_err(ClusterError::kube("building a client"))
}

/// The versions of `resource.k8s.io` that discovery lists, preferred first.
pub async fn served_resource_versions(client: &kube::Client) -> Result<Vec<String>> {
    let groups = client.list_api_groups().await.map_err(ClusterError::kube("listing API groups"))?;
    Ok(groups
        .groups
        .into_iter()
        .find(|g| g.name == "resource.k8s.io")
        .map(|g| g.versions.into_iter().map(|v| v.version).collect())
        .unwrap_or_default())
}

/// Stops the cluster recorded in `state_dir` (started by an earlier `cluster up`) and removes
/// the dir. Succeeds on a dir whose processes are already gone, and says so.
pub fn stop_recorded(state_dir: &Path) -> Result<Stopped> {
    let mut info = ClusterInfo::load(state_dir)?;
    // This process owns the cluster while it takes it down: killed halfway, it leaves a record
    // whose owner is gone, which the next run reaps, not a detached cluster nobody stops.
    info.owner = Owner::Process(OwnerProcess::current());
    info.save(state_dir)?;
    let stopped = info.stop_all(Duration::from_secs(10))?;
    real::scrub(state_dir);
    state::remove_state_dir(state_dir).map_err(ClusterError::io(format!("removing {}", state_dir.display())))?;
    Ok(stopped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_gates_are_validated() {
        assert_eq!(validate_feature_gates(" A=true, B=false ,").unwrap(), "A=true,B=false");
        assert_eq!(validate_feature_gates("").unwrap(), "");
        for bad in ["A", "A=yes", "=true", "A B=true"] {
            let err = validate_feature_gates(bad).unwrap_err();
            assert_eq!(err.failure(), crate::error::Failure::BadInput, "{bad}");
        }
    }
}
