//! Emulated nodes and drivers for `cluster up --nodes N --driver NAME` and for a kept
//! conformance run: they must outlive the command, so a detached agent process (`cluster
//! agent`, hidden) runs them next to the control plane and is stopped by `cluster down` like
//! the other recorded processes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use dracheck_clusters::LocalCluster;
use dracheck_clusters::local::process::{Lifetime, Supervised};
use dracheck_clusters::local::real::{RealNode, RealNodeEnv};
use dracheck_clusters::local::versions::find_release;
use dracheck_clusters::local::{
    ClusterInfo, DriverInstance, EmulatedNode, LocalNode, NodeConfig, NodeKind, Progress, client_for, pki::Pki, state,
};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, ListParams};

use crate::drivers::DriverArgs;
use crate::exit;

#[derive(Debug, Clone, Args)]
pub struct NodeArgs {
    /// Emulated nodes to run (node-1 … node-N at 127.0.10.1 …), each in the kubelet's DRA role.
    #[arg(long, default_value_t = 0)]
    pub nodes: usize,
    /// `real` (the upstream kubelet, containerd and runc) or `emulated`.
    #[arg(long, value_name = "KIND", env = "DRACHECK_NODE_KIND", default_value = "real", value_parser = ["real", "emulated"])]
    pub node_kind: String,
    /// The driver to run on every emulated node.
    #[command(flatten)]
    pub driver: DriverArgs,
}

impl NodeArgs {
    fn to_args(&self) -> Vec<String> {
        let mut out = vec![format!("--nodes={}", self.nodes), format!("--node-kind={}", self.node_kind)];
        out.extend(self.driver.to_args());
        out
    }
}

/// An agent that takes over the nodes of a run (`conformance --keep-cluster`) rather than
/// starting a cluster's first ones.
#[derive(Debug, Clone, Default)]
pub struct Takeover {
    /// Only these of the numbered nodes (the run may have removed some); empty: all.
    pub nodes: Vec<String>,
    /// The run installed the driver's DeviceClasses already.
    pub classes_exist: bool,
}

impl Takeover {
    fn to_args(&self) -> Vec<String> {
        let mut out: Vec<String> = self.nodes.iter().map(|n| format!("--node={n}")).collect();
        if self.classes_exist {
            out.push("--classes-exist".into());
        }
        out
    }

    /// The names of the nodes the agent runs, of `count` numbered ones.
    fn node_names(&self, count: usize) -> Vec<String> {
        (0..count)
            .map(|i| format!("node-{}", i + 1))
            .filter(|n| self.nodes.is_empty() || self.nodes.contains(n))
            .collect()
    }
}

/// Starts the agent for `state_dir` and waits until its nodes are Ready (and the driver has
/// published a slice on each); records it in `cluster.json` so that `down` stops it. On
/// failure the agent is stopped again, and the message names its log in a folder that
/// outlives the state dir.
pub async fn spawn_agent(
    state_dir: &Path,
    args: &NodeArgs,
    takeover: &Takeover,
    has_driver: bool,
) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd_args = vec!["cluster".to_string(), "agent".into(), format!("--state-dir={}", state_dir.display())];
    cmd_args.extend(args.to_args());
    cmd_args.extend(takeover.to_args());
    let log = state_dir.join("logs/agent.log");
    let agent =
        Supervised::spawn("node-agent", &exe, &cmd_args, &log, Lifetime::Detached).map_err(|e| e.to_string())?;
    let mut info = ClusterInfo::load(state_dir).map_err(|e| e.to_string())?;
    info.processes.push(agent.record().clone());
    info.save(state_dir).map_err(|e| e.to_string())?;
    let mut agent = Some(agent);
    let names = takeover.node_names(args.nodes);

    let client = client_for(&info.kubeconfig, None).await.map_err(|e| e.to_string())?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(status) = agent.as_mut().and_then(|a| a.exited()) {
            let (log, tail) = kept_log(state_dir, &log);
            return Err(format!("the node agent exited ({status}); its log {}:\n{tail}", log.display()));
        }
        let Some(lacking) = not_ready(&client, &names, has_driver).await else {
            agent.take().map(Supervised::release);
            return Ok(());
        };
        if tokio::time::Instant::now() > deadline {
            drop(agent.take());
            let (log, tail) = kept_log(state_dir, &log);
            return Err(format!(
                "the nodes were not ready within 90s ({lacking}); the agent's log {}:\n{tail}",
                log.display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The agent's log moved out of the state dir, which the caller removes next, and its tail.
fn kept_log(state_dir: &Path, log: &Path) -> (PathBuf, String) {
    let logs = state_dir.join("logs");
    let log = match state::keep_logs(state_dir) {
        Some(kept) => state::moved_log(log, &logs, &kept),
        None => log.to_path_buf(),
    };
    let tail = dracheck_clusters::error::log_tail(&log, 15);
    (log, tail)
}

/// `conformance --keep-cluster`: the run's nodes and drivers live in this process, which is
/// about to end. A node agent takes them over as it runs those of `cluster up --nodes`, so
/// that the whole cluster stays for inspection until `cluster down`. Returns the cluster's
/// record; on failure the cluster is stopped.
pub async fn keep(mut cluster: LocalCluster, driver: &DriverArgs) -> Result<ClusterInfo, String> {
    let dir = cluster.state_dir().to_path_buf();
    let client = cluster.client();
    // Real nodes start again under the agent from their dirs and checkpoints, as after a
    // reboot of the machine.
    let kind = cluster.node_kind();
    let nodes = cluster.stop_nodes();
    for node in &nodes {
        set_run_logs_aside(&node.root);
        // The agent is ready once its drivers have published; the run's slices must not
        // count as theirs.
        let _ = dracheck_clusters::local::node::plugins::wipe_slices(&client, &node.name, None).await;
    }
    if !nodes.is_empty() {
        let count = nodes.iter().filter_map(|n| n.name.strip_prefix("node-")?.parse::<usize>().ok()).max();
        let mut driver = driver.clone();
        if !driver.is_set() {
            driver.driver = Some("mock".into());
        }
        let args = NodeArgs { nodes: count.unwrap_or(0), driver, node_kind: kind.name().to_string() };
        let takeover = Takeover { nodes: nodes.iter().map(|n| n.name.clone()).collect(), classes_exist: true };
        // On failure the handle, dropped on return, stops the control plane.
        spawn_agent(&dir, &args, &takeover, true).await.map_err(|e| format!("{e}\nThe cluster was stopped."))?;
    }
    cluster.detach().map_err(|e| {
        format!(
            "recording that the cluster is kept failed ({e}); the next run will stop it and remove {}",
            dir.display()
        )
    })
}

/// A driver started anew truncates its log: the run's log of each driver on the node is
/// renamed `driver-<name>.run.log` first.
fn set_run_logs_aside(node_root: &Path) {
    let Ok(entries) = std::fs::read_dir(node_root) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_prefix("driver-").and_then(|n| n.strip_suffix(".log"))
            && !stem.ends_with(".run")
        {
            let _ = std::fs::rename(entry.path(), node_root.join(format!("driver-{stem}.run.log")));
        }
    }
}

/// `None` once every node in `names` is untainted and (with a driver) has published a slice;
/// else what the first node that is not still lacks, for the message of a wait that ran out.
async fn not_ready(client: &kube::Client, names: &[String], has_driver: bool) -> Option<String> {
    let node_api: Api<Node> = Api::all(client.clone());
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    for name in names {
        let taints = match node_api.get_opt(name).await {
            Ok(Some(n)) => n.spec.and_then(|s| s.taints).unwrap_or_default(),
            Ok(None) => return Some(format!("node {name} is not registered")),
            Err(e) => return Some(format!("reading node {name}: {e}")),
        };
        if !taints.is_empty() {
            let keys: Vec<String> = taints.iter().map(|t| format!("{}:{}", t.key, t.effect)).collect();
            return Some(format!("node {name} still has the taints {}", keys.join(", ")));
        }
        if has_driver {
            let lp = ListParams::default().fields(&format!("spec.nodeName={name}"));
            match slices.list(&lp).await {
                Ok(l) if l.items.is_empty() => return Some(format!("the driver on node {name} published no slice")),
                Ok(_) => {}
                Err(e) => return Some(format!("listing the slices of node {name}: {e}")),
            }
        }
    }
    None
}

/// `cluster agent`: runs the nodes and drivers of a `cluster up` (or a kept run) until
/// SIGTERM.
pub async fn agent(state_dir: &Path, args: NodeArgs, takeover: Takeover) -> u8 {
    match run_agent(state_dir, args, takeover).await {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("dracheck node agent: {e}");
            exit::CLUSTER_DOWN
        }
    }
}

async fn run_agent(state_dir: &Path, args: NodeArgs, takeover: Takeover) -> Result<(), String> {
    let info = ClusterInfo::load(state_dir).map_err(|e| e.to_string())?;
    let client = client_for(&info.kubeconfig, None).await.map_err(|e| e.to_string())?;
    let pki = Pki::load(state_dir).map_err(|e| e.to_string())?;
    let adapter = args.driver.emulated_adapter(&Progress::stderr()).await.map_err(|(_, e)| e)?;
    if let Some(adapter) = adapter.as_ref().filter(|_| !takeover.classes_exist) {
        dracheck_suites::local_run::install_driver(&client, adapter).await.map_err(|e| e.to_string())?;
    }
    let spec = adapter.and_then(|a| a.spec);
    let kind: NodeKind = args.node_kind.parse()?;
    let real = match kind {
        NodeKind::Real => {
            let release = find_release(&info.kubernetes_version).map_err(|e| e.to_string())?;
            let env = RealNodeEnv::prepare(release, state_dir, &info.server, &info.feature_gates, &Progress::stderr())
                .await
                .map_err(|e| e.to_string())?;
            Some(std::sync::Arc::new(env))
        }
        NodeKind::Emulated => None,
    };
    let mut nodes = Vec::new();
    let mut drivers: Vec<DriverInstance> = Vec::new();
    let names = takeover.node_names(args.nodes);
    for (index, cfg) in
        (0..args.nodes).map(|i| (i, NodeConfig::numbered(state_dir, i))).filter(|(_, c)| names.contains(&c.name))
    {
        let node = match &real {
            Some(env) => LocalNode::Real(
                RealNode::start(env.clone(), client.clone(), &pki, cfg, index, Lifetime::Attached)
                    .await
                    .map_err(|e| e.to_string())?,
            ),
            None => {
                LocalNode::Emulated(EmulatedNode::start(client.clone(), &pki, cfg).await.map_err(|e| e.to_string())?)
            }
        };
        eprintln!("node {} started", node.name());
        if let Some(spec) = &spec {
            drivers.push(
                DriverInstance::start(spec, node.config(), &info.kubeconfig, Lifetime::Attached)
                    .map_err(|e| e.to_string())?,
            );
        }
        nodes.push(node);
    }
    crate::interrupt::interrupted().await;
    eprintln!("stopping {} driver(s) and {} node(s)", drivers.len(), nodes.len());
    drop(drivers);
    drop(nodes);
    Ok(())
}

/// [`keep`], and what the user needs next: where the cluster is and how to stop it.
/// [`keep`], saying where the kept cluster is and how to stop it; the error says why it
/// could not be kept (the cluster is stopped then).
pub async fn keep_and_say(cluster: LocalCluster, driver: &DriverArgs) -> Result<(), String> {
    let dir = cluster.state_dir().to_path_buf();
    let info = keep(cluster, driver).await?;
    eprintln!(
        "kept the cluster with its nodes and drivers: kubeconfig {}; logs under {} (the run's driver logs are \
         nodes/<node>/driver-*.run.log); stop it with `{} cluster down --state-dir {}`",
        info.kubeconfig.display(),
        dir.display(),
        crate::program(),
        dir.display()
    );
    Ok(())
}
