//! `cargo xtask bench …`: timings measured over several runs and reported as medians, since
//! a 2-core shared machine is too noisy for single numbers.

use std::collections::BTreeMap;

use clap::Subcommand;
use dracheck_clusters::local::{LocalNode, NodeKind, Progress, process};
use dracheck_clusters::{LocalCluster, LocalClusterOptions};
use dracheck_suites::local_run::{self, LocalRun};

use crate::exit;

mod metrics;
mod scale;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// `LocalCluster::start` with cached binaries: median start-up, the control plane's peak
    /// memory and CPU time, beside a bare etcd + kube-apiserver start (the floor) in the same
    /// run, and their ratio.
    ClusterUp {
        #[arg(long, default_value_t = 5)]
        runs: usize,
    },
    /// The default mock conformance run: median wall time, split into cluster start,
    /// scenarios and teardown.
    Conformance {
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// `real`, `emulated`, or `both`: runs of the two kinds alternate, so that both
        /// see the same machine, and the ratio of their medians is reported.
        #[arg(long, default_value = "both", value_parser = ["real", "emulated", "both"])]
        node_kind: String,
    },
    /// Nodes of both kinds side by side: adding N nodes until Ready, a pod with a claim from
    /// create to Running (median of `pods`), memory per node.
    Nodes {
        #[arg(long, default_value_t = 3)]
        nodes: usize,
        #[arg(long, default_value_t = 10)]
        pods: usize,
    },
    /// Allocation at fleet size (scheduler_perf's SchedulingWithResourceClaimTemplate shape):
    /// N emulated nodes × D mock devices, C pods with a claim from a template; throughput and
    /// latency as the suite's watches see them beside the scheduler's own metrics, the time
    /// until every node's slices are published, memory and CPU per node; at each node count.
    Scale(scale::ScaleArgs),
}

pub async fn run(cmd: BenchCommand) -> u8 {
    match cmd {
        BenchCommand::ClusterUp { runs } => cluster_up(runs).await,
        BenchCommand::Conformance { runs, node_kind } => conformance(runs, &node_kind).await,
        BenchCommand::Nodes { nodes, pods } => nodes_bench(nodes, pods).await,
        BenchCommand::Scale(args) => scale::run(args).await,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

/// Peak resident memory (VmHWM) of a process, in MiB.
fn peak_mib(pid: u32) -> f64 {
    dracheck_clusters::local::process::status_mib(pid, "VmHWM")
}

/// One start of a local cluster: its time to ready, and at that moment the control plane's
/// peak memory and CPU time, per component.
struct Start {
    ready_s: f64,
    peak_mib: f64,
    cpu: Vec<(String, f64)>,
}

async fn start_once(floor: bool) -> Result<Start, u8> {
    let cluster =
        LocalCluster::start(LocalClusterOptions { floor, ..LocalClusterOptions::from_env() }).await.map_err(|e| {
            eprintln!("dracheck: {e}");
            exit::of(e.failure())
        })?;
    let processes = &cluster.info().processes;
    let start = Start {
        ready_s: cluster.startup.as_secs_f64(),
        peak_mib: processes.iter().map(|p| peak_mib(p.pid)).sum(),
        cpu: processes.iter().map(|p| (p.name.clone(), process::cpu_seconds(p.pid))).collect(),
    };
    cluster.stop();
    Ok(start)
}

/// Whole starts and the floor (a bare etcd and kube-apiserver, ready at `/readyz`) alternate,
/// so that both see the same machine; the ratio of their medians is the start's overhead.
async fn cluster_up(runs: usize) -> u8 {
    let (mut whole, mut floor) = (Vec::new(), Vec::new());
    for i in 0..runs {
        for (is_floor, into) in [(true, &mut floor), (false, &mut whole)] {
            let start = match start_once(is_floor).await {
                Ok(s) => s,
                Err(code) => return code,
            };
            let cpu: Vec<String> = start.cpu.iter().map(|(n, s)| format!("{n} {s:.1}s")).collect();
            eprintln!(
                "run {} {}: ready in {:.2}s; peak memory {:.0} MiB; CPU until ready: {}",
                i + 1,
                if is_floor { "floor (etcd + apiserver)" } else { "whole cluster" },
                start.ready_s,
                start.peak_mib,
                cpu.join(", ")
            );
            into.push(start);
        }
    }
    let ready = |v: &[Start]| median(v.iter().map(|s| s.ready_s).collect());
    let cpu = |v: &[Start]| median(v.iter().map(|s| s.cpu.iter().map(|(_, c)| c).sum()).collect());
    let (w, f) = (ready(&whole), ready(&floor));
    println!(
        "cluster up: median {w:.2}s over {runs} runs (min {:.2}s, max {:.2}s), CPU {:.1}s; control plane peak memory median {:.0} MiB",
        whole.iter().map(|s| s.ready_s).fold(f64::MAX, f64::min),
        whole.iter().map(|s| s.ready_s).fold(0.0, f64::max),
        cpu(&whole),
        median(whole.iter().map(|s| s.peak_mib).collect())
    );
    println!(
        "floor (etcd + kube-apiserver ready): median {f:.2}s, CPU {:.1}s; whole / floor = {:.2}x",
        cpu(&floor),
        if f > 0.0 { w / f } else { 0.0 }
    );
    exit::OK
}

/// The kinds a `--node-kind` of a bench asks for, in the order their runs alternate.
fn kinds(arg: &str) -> Vec<NodeKind> {
    match arg {
        "both" => vec![NodeKind::Real, NodeKind::Emulated],
        other => other.parse().into_iter().collect(),
    }
}

async fn conformance(runs: usize, node_kind: &str) -> u8 {
    let kinds = kinds(node_kind);
    let mut totals: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut parts: BTreeMap<(&str, String), Vec<f64>> = BTreeMap::new();
    let mut nodes = 0;
    for (i, kind) in (0..runs).flat_map(|i| kinds.iter().map(move |k| (i, *k))) {
        let run = dracheck_mock_driver::adapter::default(&[])
            .map_err(|e| e.to_string())
            .and_then(|adapter| LocalRun::default_for(adapter).map_err(|e| e.to_string()));
        let mut cfg = match run {
            Ok(c) => c,
            Err(e) => {
                eprintln!("dracheck: {e}");
                return exit::CLUSTER_DOWN;
            }
        };
        cfg.cluster.node_kind = kind;
        cfg.companion = crate::drivers::companion();
        nodes = cfg.nodes;
        let progress = Progress::quiet();
        let result = match local_run::run(cfg, &local_run::run_id(), &progress).await {
            Ok(f) => f.result,
            Err(e) => {
                eprintln!("dracheck: {}", e.message);
                return exit::of(e.failure);
            }
        };
        let name = kind.name();
        eprintln!("run {} on {name} nodes: {:.1}s, all held: {}", i + 1, result.duration_seconds, result.all_held());
        totals.entry(name).or_default().push(result.duration_seconds);
        for (k, v) in result.timings {
            parts.entry((name, k)).or_default().push(v);
        }
    }
    for (name, t) in &totals {
        println!(
            "conformance (mock, 2 profiles, {nodes} {name} nodes): median {:.1}s over {runs} runs",
            median(t.clone())
        );
        let mut rows: Vec<(&str, f64)> =
            parts.iter().filter(|((n, _), _)| n == name).map(|((_, k), v)| (k.as_str(), median(v.clone()))).collect();
        rows.sort_by(|a, b| b.1.total_cmp(&a.1));
        for (k, v) in rows {
            println!("  {v:7.1}s  {k}");
        }
    }
    if let (Some(real), Some(emulated)) = (totals.get("real"), totals.get("emulated")) {
        println!("real / emulated: {:.2}", median(real.clone()) / median(emulated.clone()));
    }
    exit::OK
}

/// What [`nodes_bench`] measured for one kind.
#[derive(Debug, Default)]
struct NodeFigures {
    add_seconds: f64,
    pod_seconds: Vec<f64>,
    mib_per_node: f64,
}

async fn nodes_bench(nodes: usize, pods: usize) -> u8 {
    let mut figures = BTreeMap::new();
    for kind in [NodeKind::Real, NodeKind::Emulated] {
        match measure_nodes(kind, nodes, pods).await {
            Ok(f) => {
                figures.insert(kind.name(), f);
            }
            Err(e) => {
                eprintln!("dracheck: {} nodes: {e}", kind.name());
                return exit::CLUSTER_DOWN;
            }
        }
    }
    for (name, f) in &figures {
        println!(
            "{name:>8}: {nodes} nodes Ready in {:.1}s ({:.2}s a node); pod with a claim create → Running: median \
             {:.2}s of {pods} (min {:.2}s, max {:.2}s); {:.0} MiB a node",
            f.add_seconds,
            f.add_seconds / nodes as f64,
            median(f.pod_seconds.clone()),
            f.pod_seconds.iter().copied().fold(f64::INFINITY, f64::min),
            f.pod_seconds.iter().copied().fold(0.0, f64::max),
            f.mib_per_node,
        );
    }
    exit::OK
}

/// A bench's namespace `ns`, DeviceClass `class` for `driver`'s devices and ResourceClaimTemplate
/// `one` (one device of the class) in it: what its pods' claims come from.
async fn claim_setup(client: &kube::Client, ns: &str, class: &str, driver: &str) -> Result<(), String> {
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::api::resource::v1::DeviceClass;
    use kube::api::{Api, PostParams};

    let namespace = Namespace { metadata: dracheck_objects::meta_for(ns, None), ..Namespace::default() };
    let pp = PostParams::default();
    Api::<Namespace>::all(client.clone())
        .create(&pp, &namespace)
        .await
        .map_err(|e| format!("creating namespace {ns}: {e}"))?;
    Api::<DeviceClass>::all(client.clone())
        .create(&pp, &dracheck_objects::device_class(class, driver, &[]))
        .await
        .map_err(|e| format!("creating DeviceClass {class}: {e}"))?;
    Api::namespaced(client.clone(), ns)
        .create(&pp, &dracheck_objects::claim_template(ns, "one", class, 1, &[]))
        .await
        .map_err(|e| format!("creating the ResourceClaimTemplate {ns}/one: {e}"))?;
    Ok(())
}

/// One cluster with `nodes` nodes of `kind` and the mock on each; `pods` pods with a claim
/// from a template, one after the other, each timed from create until the API says Running.
async fn measure_nodes(kind: NodeKind, nodes: usize, pods: usize) -> Result<NodeFigures, String> {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, DeleteParams, PostParams};

    let opts = LocalClusterOptions { node_kind: kind, progress: Progress::stderr(), ..LocalClusterOptions::from_env() };
    let mut cluster = LocalCluster::start(opts).await.map_err(|e| e.to_string())?;
    let started = std::time::Instant::now();
    cluster.add_nodes(nodes).await.map_err(|e| e.to_string())?;
    let add_seconds = started.elapsed().as_secs_f64();
    let adapter = dracheck_mock_driver::adapter::default(&[]).map_err(|e| e.to_string())?;
    let spec = adapter.spec.clone().ok_or("the mock has a driver spec")?;
    cluster.start_driver(&spec).map_err(|e| e.to_string())?;
    let client = cluster.client();
    let ns = "dracheck-bench-nodes";
    let class = "dracheck-bench";
    claim_setup(&client, ns, class, &spec.name).await?;
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut pod_seconds = Vec::new();
    for i in 0..pods {
        let name = format!("p{i}");
        let pod = dracheck_objects::pod(ns, &name)
            .on_node("node-1")
            .image(dracheck_clusters::local::real::images::WORKLOAD_IMAGE)
            .claim_from_template("gpu", "one")
            .command("sleep 3600")
            .build();
        let created = std::time::Instant::now();
        pod_api.create(&PostParams::default(), &pod).await.map_err(|e| e.to_string())?;
        loop {
            let phase = pod_api.get(&name).await.ok().and_then(|p| p.status?.phase);
            if phase.as_deref() == Some("Running") {
                break;
            }
            if created.elapsed() > std::time::Duration::from_secs(60) {
                return Err(format!("pod {name} not Running within 60s ({phase:?})"));
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        pod_seconds.push(created.elapsed().as_secs_f64());
        if i == pods - 1 {
            break;
        }
        pod_api.delete(&name, &DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() }).await.ok();
        while pod_api.get_opt(&name).await.ok().flatten().is_some() {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
    // With one pod running on node-1, as a node carries a workload.
    let drivers: f64 =
        cluster.drivers().iter().filter_map(|d| d.pid()).map(dracheck_clusters::local::real::resident_mib).sum();
    let nodes_mib: f64 = cluster
        .nodes()
        .iter()
        .map(|n| match n {
            LocalNode::Real(r) => r.resident_mib(),
            // The emulated nodes run in this process: its growth since the start is theirs.
            LocalNode::Emulated(_) => 0.0,
        })
        .sum::<f64>()
        + if kind == NodeKind::Emulated {
            dracheck_clusters::local::real::resident_mib(std::process::id())
        } else {
            0.0
        };
    cluster.stop();
    Ok(NodeFigures { add_seconds, pod_seconds, mib_per_node: (drivers + nodes_mib) / nodes as f64 })
}
