//! Emulated nodes and drivers for `cluster up --nodes N --driver NAME`: they must outlive the
//! `up` command, so a detached agent process (`cluster agent`, hidden) runs them next to the
//! control plane and is stopped by `cluster down` like the other recorded processes.

use std::path::Path;
use std::time::Duration;

use clap::Args;
use dracheck_clusters::local::process::{Lifetime, Supervised};
use dracheck_clusters::local::{ClusterInfo, DriverInstance, EmulatedNode, NodeConfig, Progress, client_for, pki::Pki};
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
    /// The driver to run on every emulated node.
    #[command(flatten)]
    pub driver: DriverArgs,
}

impl NodeArgs {
    fn to_args(&self) -> Vec<String> {
        let mut out = vec![format!("--nodes={}", self.nodes)];
        out.extend(self.driver.to_args());
        out
    }
}

/// Starts the agent for `state_dir` and waits until its nodes are Ready (and the driver has
/// published a slice on each); records it in `cluster.json` so that `down` stops it.
pub async fn spawn_agent(state_dir: &Path, args: &NodeArgs, has_driver: bool) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd_args = vec!["cluster".to_string(), "agent".into(), format!("--state-dir={}", state_dir.display())];
    cmd_args.extend(args.to_args());
    let log = state_dir.join("logs/agent.log");
    let agent =
        Supervised::spawn("node-agent", &exe, &cmd_args, &log, Lifetime::Detached).map_err(|e| e.to_string())?;
    let mut info = ClusterInfo::load(state_dir).map_err(|e| e.to_string())?;
    info.processes.push(agent.record().clone());
    info.save(state_dir).map_err(|e| e.to_string())?;
    let mut agent = Some(agent);

    let client = client_for(&info.kubeconfig, None).await.map_err(|e| e.to_string())?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(status) = agent.as_mut().and_then(|a| a.exited()) {
            return Err(format!(
                "the node agent exited ({status}); its log {}:\n{}",
                log.display(),
                dracheck_clusters::error::log_tail(&log, 15)
            ));
        }
        if ready(&client, args.nodes, has_driver).await {
            agent.take().map(Supervised::release);
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "the emulated nodes were not ready within 90s; the agent's log {}:\n{}",
                log.display(),
                dracheck_clusters::error::log_tail(&log, 15)
            ));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn ready(client: &kube::Client, nodes: usize, has_driver: bool) -> bool {
    let node_api: Api<Node> = Api::all(client.clone());
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    for i in 0..nodes {
        let name = format!("node-{}", i + 1);
        let untainted = node_api
            .get_opt(&name)
            .await
            .ok()
            .flatten()
            .is_some_and(|n| n.spec.and_then(|s| s.taints).is_none_or(|t| t.is_empty()));
        if !untainted {
            return false;
        }
        if has_driver {
            let lp = ListParams::default().fields(&format!("spec.nodeName={name}"));
            if slices.list(&lp).await.map(|l| l.items.is_empty()).unwrap_or(true) {
                return false;
            }
        }
    }
    true
}

/// `cluster agent`: runs the nodes and drivers of a `cluster up` until SIGTERM.
pub async fn agent(state_dir: &Path, args: NodeArgs) -> u8 {
    match run_agent(state_dir, args).await {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("dracheck node agent: {e}");
            exit::CLUSTER_DOWN
        }
    }
}

async fn run_agent(state_dir: &Path, args: NodeArgs) -> Result<(), String> {
    let info = ClusterInfo::load(state_dir).map_err(|e| e.to_string())?;
    let client = client_for(&info.kubeconfig, None).await.map_err(|e| e.to_string())?;
    let pki = Pki::load(state_dir).map_err(|e| e.to_string())?;
    let adapter = args.driver.emulated_adapter(&Progress::stderr()).await.map_err(|(_, e)| e)?;
    if let Some(adapter) = &adapter {
        dracheck_suites::local_run::install_classes(&client, adapter).await?;
    }
    let spec = adapter.and_then(|a| a.spec);
    let mut nodes = Vec::new();
    let mut drivers: Vec<DriverInstance> = Vec::new();
    for i in 0..args.nodes {
        let node = EmulatedNode::start(client.clone(), &pki, NodeConfig::numbered(state_dir, i))
            .await
            .map_err(|e| e.to_string())?;
        eprintln!("node {} started", node.name());
        if let Some(spec) = &spec {
            drivers.push(
                DriverInstance::start(spec, node.config(), &info.kubeconfig, Lifetime::Attached)
                    .map_err(|e| e.to_string())?,
            );
        }
        nodes.push(node);
    }
    let mut term =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).map_err(|e| e.to_string())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    eprintln!("stopping {} driver(s) and {} node(s)", drivers.len(), nodes.len());
    drop(drivers);
    drop(nodes);
    Ok(())
}
