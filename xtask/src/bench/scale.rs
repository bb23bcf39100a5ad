//! `bench scale`: allocation at the size of a GPU fleet, the shape of scheduler_perf's
//! `SchedulingWithResourceClaimTemplate`: N emulated nodes with the mock publishing D devices
//! each, then C pods each with a claim from one ResourceClaimTemplate, created at once. The
//! suite's figures come from watch events (when each claim got its allocation and each pod its
//! node), the scheduler's own from its metrics page read in the same run, so that their ratio
//! says whether the suite's timings are the scheduler's or its own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::api::{Api, PostParams};
use kube::runtime::watcher::{self, Event};
use serde::Serialize;

use dracheck_clusters::local::{self, NodeKind, Progress, process};
use dracheck_clusters::{LocalCluster, LocalClusterOptions};

use super::metrics;
use crate::exit;

#[derive(Debug, clap::Args)]
pub struct ScaleArgs {
    /// Node counts to measure, each on a cluster of its own, smallest first.
    #[arg(long, value_delimiter = ',', default_value = "10,30,100")]
    nodes: Vec<usize>,
    /// Devices the mock publishes on each node.
    #[arg(long, default_value_t = 8)]
    devices: usize,
    /// Claims (one per pod) at the largest node count; smaller counts get as many per node.
    #[arg(long, default_value_t = 800)]
    claims: usize,
    /// Pods created at once (requests in flight).
    #[arg(long, default_value_t = 16)]
    in_flight: usize,
    /// Where `bench-scale-<time>.json` and `.svg` go: CI's `$ARTIFACTS` where set, else `reports`.
    #[arg(long, env = "ARTIFACTS", default_value = "reports")]
    out: PathBuf,
}

/// Latency percentiles, in seconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

/// What one node count measured.
#[derive(Debug, Default, Serialize)]
pub struct SizeFigures {
    pub nodes: usize,
    pub devices_per_node: usize,
    pub claims: usize,
    /// Adding the nodes until each is Ready.
    pub nodes_ready_seconds: f64,
    /// From starting the drivers until every node's slices are in the API.
    pub slices_published_seconds: f64,
    /// Claims allocated per second, from the first allocation to the last, as the suite's
    /// watch saw them.
    pub suite_claims_per_second: f64,
    /// Pods scheduled per second by the scheduler's own counter
    /// (`scheduler_schedule_attempts_total{result="scheduled"}`), sampled every 250 ms.
    pub scheduler_pods_per_second: f64,
    /// `suite_claims_per_second / scheduler_pods_per_second`.
    pub throughput_ratio: f64,
    /// Pod create → its node seen on the suite's watch.
    pub suite_pod_scheduling: Percentiles,
    /// Pod create → its claim's allocation seen on the suite's watch.
    pub suite_claim_allocation: Percentiles,
    /// The pod's claim first seen (the resourceclaim controller made it from the template)
    /// → the pod's node seen: the part of a pod's way that the scheduler's SLI measures, which
    /// leaves out the time the pod waits for its claim (gated in PreEnqueue).
    pub suite_claim_to_bound: Percentiles,
    /// The scheduler's `scheduler_pod_scheduling_sli_duration_seconds` for the same pods.
    pub scheduler_sli: Percentiles,
    /// `suite_claim_to_bound.p50 / scheduler_sli.p50`.
    pub latency_ratio_p50: f64,
    /// The DynamicResources plugin's mean duration per extension point (seconds), from
    /// `scheduler_plugin_execution_duration_seconds` (which the scheduler samples).
    pub dynamic_resources_mean_seconds: BTreeMap<String, f64>,
    /// Scheduling attempts that found no fit (a full cluster has none until the last device).
    pub unschedulable_attempts: f64,
    /// The mock's processes and this process (which hosts the emulated nodes), per node.
    pub mib_per_node: f64,
    pub cpu_seconds_per_node: f64,
    /// The control plane's CPU time during the whole size, by component.
    pub control_plane_cpu_seconds: BTreeMap<String, f64>,
    pub wall_seconds: f64,
}

#[derive(Debug, Serialize)]
struct ScaleResult {
    cores: usize,
    kubernetes_version: String,
    sizes: Vec<SizeFigures>,
}

pub async fn run(args: ScaleArgs) -> u8 {
    let mut sizes = args.nodes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    let Some(&largest) = sizes.last().filter(|n| **n > 0) else {
        eprintln!("dracheck: bench scale needs at least one node count above 0 (--nodes 10,30,100)");
        return exit::BAD_INPUT;
    };
    if args.devices == 0 || args.claims == 0 {
        eprintln!("dracheck: bench scale needs --devices and --claims above 0");
        return exit::BAD_INPUT;
    }
    if let Err(e) = local::node_limit(NodeKind::Emulated).check(largest) {
        eprintln!("dracheck: {e}");
        return exit::of(e.failure());
    }
    let mut result = ScaleResult {
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        kubernetes_version: String::new(),
        sizes: Vec::new(),
    };
    for &nodes in &sizes {
        // The same claims per node at every size, so that the sizes differ in nodes only.
        let claims = (args.claims * nodes).div_ceil(largest).min(nodes * args.devices);
        eprintln!("== {nodes} nodes × {} devices, {claims} claims", args.devices);
        match measure(nodes, args.devices, claims, args.in_flight, &mut result.kubernetes_version).await {
            Ok(f) => {
                print_size(&f);
                result.sizes.push(f);
            }
            Err(e) => {
                eprintln!("dracheck: bench scale at {nodes} nodes: {e}");
                return exit::CLUSTER_DOWN;
            }
        }
    }
    match write(&args.out, &result) {
        Ok((json, svg)) => {
            println!("written: {}, {}", json.display(), svg.display());
            exit::OK
        }
        Err(e) => {
            eprintln!("dracheck: could not write the bench result under {}: {e}", args.out.display());
            exit::FAILED
        }
    }
}

fn print_size(f: &SizeFigures) {
    println!(
        "{:>4} nodes: nodes Ready {:.1}s, slices published {:.1}s; {} claims: suite {:.1} claims/s, scheduler {:.1} \
         pods/s (ratio {:.2}); p50/p90/p99: pod create → bound {:.3}/{:.3}/{:.3}s, claim made → bound \
         {:.3}/{:.3}/{:.3}s, scheduler SLI {:.3}/{:.3}/{:.3}s (p50 ratio {:.2}); {:.0} MiB and {:.2} CPU-s a node",
        f.nodes,
        f.nodes_ready_seconds,
        f.slices_published_seconds,
        f.claims,
        f.suite_claims_per_second,
        f.scheduler_pods_per_second,
        f.throughput_ratio,
        f.suite_pod_scheduling.p50,
        f.suite_pod_scheduling.p90,
        f.suite_pod_scheduling.p99,
        f.suite_claim_to_bound.p50,
        f.suite_claim_to_bound.p90,
        f.suite_claim_to_bound.p99,
        f.scheduler_sli.p50,
        f.scheduler_sli.p90,
        f.scheduler_sli.p99,
        f.latency_ratio_p50,
        f.mib_per_node,
        f.cpu_seconds_per_node,
    );
}

/// The mock's inventory for the bench: `devices` plain GPUs on every node.
fn inventory(dir: &Path, devices: usize) -> std::io::Result<PathBuf> {
    let mut yaml = String::from(
        "apiVersion: dracheck.io/v1alpha1\nkind: MockInventory\ngroups:\n  - nodes: [\"*\"]\n    devices:\n",
    );
    for i in 0..devices {
        yaml.push_str(&format!(
            "      - name: gpu-{i}\n        attributes:\n          index: {{ int: {i} }}\n          model: {{ string: bench }}\n"
        ));
    }
    let path = dir.join("inventory.yaml");
    std::fs::write(&path, yaml)?;
    Ok(path)
}

/// When each object of a watch first met a condition, by name.
type Seen = Arc<Mutex<BTreeMap<String, Instant>>>;

/// A condition of a watched object: the key it is recorded under once it holds.
type Condition<K> = Box<dyn Fn(&K) -> Option<String> + Send>;

/// Watches `api` once and records, for each condition and object, when it first held.
fn record_when<K, const N: usize>(api: Api<K>, met: [Condition<K>; N]) -> ([Seen; N], tokio::task::JoinHandle<()>)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let seen: [Seen; N] = std::array::from_fn(|_| Seen::default());
    let into = seen.clone();
    let task = tokio::spawn(async move {
        let mut stream = Box::pin(watcher::watcher(api, watcher::Config::default()));
        while let Some(event) = stream.next().await {
            let (Ok(Event::Apply(o)) | Ok(Event::InitApply(o))) = event else { continue };
            for (condition, record) in met.iter().zip(&into) {
                if let Some(key) = condition(&o) {
                    record.lock().expect("the watch's record").entry(key).or_insert_with(Instant::now);
                }
            }
        }
    });
    (seen, task)
}

/// The pod a claim was made for from its template: the claim's owner.
fn owner_pod(c: &ResourceClaim) -> Option<String> {
    c.metadata.owner_references.as_ref()?.iter().find(|o| o.kind == "Pod").map(|o| o.name.clone())
}

fn percentiles(mut v: Vec<f64>) -> Percentiles {
    v.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| if v.is_empty() { 0.0 } else { v[((v.len() - 1) as f64 * q).round() as usize] };
    Percentiles { p50: at(0.5), p90: at(0.9), p99: at(0.99) }
}

async fn scrape(client: &kube::Client) -> Result<Vec<metrics::Sample>, String> {
    let req = http::Request::get("/metrics").body(Vec::new()).map_err(|e| e.to_string())?;
    let page = client.request_text(req).await.map_err(|e| format!("reading the scheduler's /metrics: {e}"))?;
    Ok(metrics::parse(&page))
}

const SLI: &str = "scheduler_pod_scheduling_sli_duration_seconds";

fn scheduled(samples: &[metrics::Sample]) -> f64 {
    metrics::sum(samples, "scheduler_schedule_attempts_total", |s| s.label("result") == Some("scheduled"))
}

async fn measure(
    nodes: usize,
    devices: usize,
    claims: usize,
    in_flight: usize,
    version: &mut String,
) -> Result<SizeFigures, String> {
    let began = Instant::now();
    let opts = LocalClusterOptions {
        node_kind: NodeKind::Emulated,
        progress: Progress::stderr(),
        ..LocalClusterOptions::from_env()
    };
    let mut cluster = LocalCluster::start(opts).await.map_err(|e| e.to_string())?;
    version.clone_from(&cluster.info().kubernetes_version);
    let client = cluster.client();
    let control_plane: Vec<(String, u32)> = cluster.info().processes.iter().map(|p| (p.name.clone(), p.pid)).collect();
    let cpu_before: Vec<f64> = control_plane.iter().map(|(_, pid)| process::cpu_seconds(*pid)).collect();
    let own_cpu_before = process::cpu_seconds(std::process::id());
    let own_mib_before = local::real::resident_mib(std::process::id());

    let adding = Instant::now();
    cluster.add_nodes_reporting(nodes, &Progress::stderr()).await.map_err(|e| e.to_string())?;
    let nodes_ready_seconds = adding.elapsed().as_secs_f64();

    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let inventory = inventory(dir.path(), devices).map_err(|e| e.to_string())?;
    let program = dracheck_mock_driver::adapter::binary().map_err(|e| e.to_string())?;
    let spec = dracheck_mock_driver::adapter::spec(&program, &inventory, &[]);
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    let driver = spec.name.clone();
    let ([pools], pools_task) = record_when(
        slices,
        [Box::new(move |s: &ResourceSlice| {
            (s.spec.driver == driver && s.spec.devices.as_ref().is_some_and(|d| !d.is_empty()))
                .then(|| s.spec.pool.name.clone())
        })],
    );
    let publishing = Instant::now();
    cluster.start_driver(&spec).map_err(|e| e.to_string())?;
    wait_for(&pools, nodes, Duration::from_secs(60 + nodes as u64), "nodes' slices published").await?;
    let slices_published_seconds =
        pools.lock().expect("record").values().max().map_or(0.0, |t| t.duration_since(publishing).as_secs_f64());
    pools_task.abort();

    let ns = "dracheck-bench-scale";
    super::claim_setup(&client, ns, "dracheck-bench-scale", &spec.name).await?;

    // One watch of the claims: when each pod's claim was made, and when it was allocated.
    let ([made, allocated], claims_task) = record_when(
        Api::<ResourceClaim>::namespaced(client.clone(), ns),
        [
            Box::new(owner_pod),
            Box::new(|c: &ResourceClaim| {
                c.status.as_ref()?.allocation.as_ref()?;
                owner_pod(c)
            }),
        ],
    );
    let ([bound], pods_task) = record_when(
        Api::<Pod>::namespaced(client.clone(), ns),
        [Box::new(|p: &Pod| {
            p.spec.as_ref()?.node_name.as_ref()?;
            p.metadata.name.clone()
        })],
    );

    let port = *cluster.info().ports.get("kube-scheduler").ok_or("no scheduler port on record")?;
    let scheduler = local::client_for(&cluster.info().kubeconfig, Some(port)).await.map_err(|e| e.to_string())?;
    let before = scrape(&scheduler).await?;
    let sli_before = metrics::buckets(&before, SLI, |_| true);
    // The scheduler's counter, every 250 ms while pods are scheduled.
    let samples: Arc<Mutex<Vec<(Instant, f64)>>> = Arc::default();
    let sampler = {
        let (samples, scheduler) = (samples.clone(), scheduler.clone());
        tokio::spawn(async move {
            loop {
                if let Ok(page) = scrape(&scheduler).await {
                    samples.lock().expect("samples").push((Instant::now(), scheduled(&page)));
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
    };

    let pod_api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let created: Arc<Mutex<BTreeMap<String, Instant>>> = Arc::default();
    let image = local::real::images::WORKLOAD_IMAGE;
    let creates = futures::stream::iter(0..claims).map(|i| {
        let (pod_api, created) = (pod_api.clone(), created.clone());
        async move {
            let name = format!("p{i}");
            let pod = dracheck_objects::pod(ns, &name)
                .image(image)
                .claim_from_template("gpu", "one")
                .command("sleep 3600")
                .build();
            let at = Instant::now();
            pod_api.create(&PostParams::default(), &pod).await.map_err(|e| format!("creating pod {name}: {e}"))?;
            created.lock().expect("created").insert(name, at);
            Ok::<_, String>(())
        }
    });
    let results: Vec<Result<(), String>> = creates.buffer_unordered(in_flight.max(1)).collect().await;
    results.into_iter().collect::<Result<Vec<()>, String>>()?;
    let budget = Duration::from_secs(120 + claims as u64 / 2);
    wait_for(&allocated, claims, budget, "claims allocated").await?;
    wait_for(&bound, claims, budget, "pods bound to a node").await?;
    // The counter's last step may come after the watch saw the last pod.
    tokio::time::sleep(Duration::from_millis(600)).await;
    sampler.abort();
    claims_task.abort();
    pods_task.abort();
    let after = scrape(&scheduler).await?;

    let created = created.lock().expect("created").clone();
    let made = made.lock().expect("record").clone();
    let allocated = allocated.lock().expect("record").clone();
    let bound = bound.lock().expect("record").clone();
    let since_create = |seen: &BTreeMap<String, Instant>| -> Vec<f64> {
        seen.iter().filter_map(|(pod, t)| Some(t.duration_since(*created.get(pod)?).as_secs_f64())).collect()
    };
    let suite_claims_per_second = rate(allocated.values().copied());
    let scheduler_pods_per_second = counter_rate(&samples.lock().expect("samples"));
    let sli = metrics::delta(&metrics::buckets(&after, SLI, |_| true), &sli_before);
    let q = |p| metrics::quantile(p, &sli).unwrap_or(0.0);
    let scheduler_sli = Percentiles { p50: q(0.5), p90: q(0.9), p99: q(0.99) };
    let suite_pod_scheduling = percentiles(since_create(&bound));
    let suite_claim_to_bound = percentiles(
        bound.iter().filter_map(|(pod, t)| Some(t.duration_since(*made.get(pod)?).as_secs_f64())).collect(),
    );
    let mut dynamic_resources_mean_seconds = BTreeMap::new();
    let plugin = "scheduler_plugin_execution_duration_seconds";
    for point in ["PreEnqueue", "PreFilter", "Filter", "PostFilter", "Reserve", "PreBind", "PreScore", "Score"] {
        let keep = |s: &metrics::Sample| {
            s.label("plugin") == Some("DynamicResources") && s.label("extension_point") == Some(point)
        };
        let diff = |name: &str| metrics::sum(&after, name, keep) - metrics::sum(&before, name, keep);
        let count = diff(&format!("{plugin}_count"));
        if count > 0.0 {
            dynamic_resources_mean_seconds.insert(point.to_string(), diff(&format!("{plugin}_sum")) / count);
        }
    }
    let unschedulable = |s: &[metrics::Sample]| {
        metrics::sum(s, "scheduler_schedule_attempts_total", |x| x.label("result") == Some("unschedulable"))
    };

    let drivers: Vec<u32> = cluster.drivers().iter().filter_map(|d| d.pid()).collect();
    let drivers_mib: f64 = drivers.iter().map(|p| local::real::resident_mib(*p)).sum();
    let drivers_cpu: f64 = drivers.iter().map(|p| process::cpu_seconds(*p)).sum();
    let own_mib = (local::real::resident_mib(std::process::id()) - own_mib_before).max(0.0);
    let own_cpu = process::cpu_seconds(std::process::id()) - own_cpu_before;
    let control_plane_cpu_seconds = control_plane
        .iter()
        .zip(&cpu_before)
        .map(|((name, pid), before)| (name.clone(), process::cpu_seconds(*pid) - before))
        .collect();
    cluster.stop();
    Ok(SizeFigures {
        nodes,
        devices_per_node: devices,
        claims,
        nodes_ready_seconds,
        slices_published_seconds,
        suite_claims_per_second,
        scheduler_pods_per_second,
        throughput_ratio: ratio(suite_claims_per_second, scheduler_pods_per_second),
        suite_claim_allocation: percentiles(since_create(&allocated)),
        latency_ratio_p50: ratio(suite_claim_to_bound.p50, scheduler_sli.p50),
        suite_pod_scheduling,
        suite_claim_to_bound,
        scheduler_sli,
        dynamic_resources_mean_seconds,
        unschedulable_attempts: unschedulable(&after) - unschedulable(&before),
        mib_per_node: (drivers_mib + own_mib) / nodes as f64,
        cpu_seconds_per_node: (drivers_cpu + own_cpu) / nodes as f64,
        control_plane_cpu_seconds,
        wall_seconds: began.elapsed().as_secs_f64(),
    })
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// Events per second from the first to the last of `times`.
fn rate(times: impl Iterator<Item = Instant>) -> f64 {
    let times: Vec<Instant> = times.collect();
    let (Some(first), Some(last)) = (times.iter().min(), times.iter().max()) else { return 0.0 };
    let span = last.duration_since(*first).as_secs_f64();
    if span > 0.0 { (times.len() - 1) as f64 / span } else { 0.0 }
}

/// A counter's rate over the samples in which it rose: from the last sample before its first
/// rise to the first sample at its final value.
fn counter_rate(samples: &[(Instant, f64)]) -> f64 {
    let Some(&(_, start)) = samples.first() else { return 0.0 };
    let Some(&(_, end)) = samples.last() else { return 0.0 };
    let Some(from) = samples.iter().rposition(|(_, c)| *c == start) else { return 0.0 };
    let Some(to) = samples.iter().position(|(_, c)| *c == end) else { return 0.0 };
    let span = samples[to].0.duration_since(samples[from].0).as_secs_f64();
    if span > 0.0 { (end - start) / span } else { 0.0 }
}

/// Waits until `seen` holds `want` entries, with a line every 5 s.
async fn wait_for(seen: &Seen, want: usize, budget: Duration, what: &str) -> Result<(), String> {
    let start = Instant::now();
    let mut said = Instant::now();
    loop {
        let have = seen.lock().expect("record").len();
        if have >= want {
            return Ok(());
        }
        if start.elapsed() > budget {
            return Err(format!("only {have} of {want} {what} within {}s", budget.as_secs()));
        }
        if said.elapsed() >= Duration::from_secs(5) {
            eprintln!("  {have} of {want} {what}");
            said = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn write(out: &Path, result: &ScaleResult) -> std::io::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(out)?;
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let json = out.join(format!("bench-scale-{stamp}.json"));
    std::fs::write(&json, serde_json::to_string_pretty(result).map_err(std::io::Error::other)?)?;
    let svg = out.join(format!("bench-scale-{stamp}.svg"));
    std::fs::write(&svg, plot(&result.sizes))?;
    Ok((json, svg))
}

/// A line of the plot: its name, colour and points.
type Series<'a> = (&'a str, &'a str, Vec<(f64, f64)>);

/// Two small panels over the node counts: throughput (suite and scheduler) and p50 scheduling
/// latency (suite and the scheduler's SLI).
fn plot(sizes: &[SizeFigures]) -> String {
    let (w, h, pad) = (320.0, 200.0, 40.0);
    let max_nodes = sizes.iter().map(|s| s.nodes).max().unwrap_or(1) as f64;
    let panel = |x0: f64, title: &str, unit: &str, series: [Series; 2]| {
        let top = series.iter().flat_map(|(_, _, p)| p.iter().map(|(_, y)| *y)).fold(0.0, f64::max).max(1e-9) * 1.1;
        let at = |(x, y): (f64, f64)| (x0 + pad + x / max_nodes * (w - 2.0 * pad), h - pad - y / top * (h - 2.0 * pad));
        let mut s = format!(
            "<text x=\"{}\" y=\"16\" font-size=\"12\">{title}</text><line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\
             <line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/><text x=\"{}\" y=\"{}\" font-size=\"10\">{top:.3} {unit}</text>\
             <text x=\"{}\" y=\"{}\" font-size=\"10\">{max_nodes} nodes</text>",
            x0 + pad,
            x0 + pad,
            h - pad,
            x0 + w - pad,
            h - pad,
            x0 + pad,
            pad,
            x0 + pad,
            h - pad,
            x0 + 2.0,
            pad - 4.0,
            x0 + w - pad - 40.0,
            h - pad + 14.0,
        );
        for (i, (name, colour, points)) in series.iter().enumerate() {
            let path: Vec<String> = points.iter().map(|p| at(*p)).map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
            s.push_str(&format!(
                "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>",
                path.join(" ")
            ));
            for (x, y) in points.iter().map(|p| at(*p)) {
                s.push_str(&format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{colour}\"/>"));
            }
            s.push_str(&format!(
                "<text x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"{colour}\">{name}</text>",
                x0 + pad + 8.0,
                pad + 12.0 + 12.0 * i as f64
            ));
        }
        s
    };
    let points = |f: fn(&SizeFigures) -> f64| sizes.iter().map(|s| (s.nodes as f64, f(s))).collect::<Vec<_>>();
    let left = panel(
        0.0,
        "allocation throughput",
        "/s",
        [
            ("suite (claims/s)", "#1f77b4", points(|s| s.suite_claims_per_second)),
            ("scheduler (pods/s)", "#d62728", points(|s| s.scheduler_pods_per_second)),
        ],
    );
    let right = panel(
        w,
        "scheduling latency p50",
        "s",
        [
            ("suite (claim made → bound)", "#1f77b4", points(|s| s.suite_claim_to_bound.p50)),
            ("scheduler SLI", "#d62728", points(|s| s.scheduler_sli.p50)),
        ],
    );
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{h}\" font-family=\"sans-serif\">{left}{right}</svg>\n",
        2.0 * w
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_rate_spans_from_before_its_first_rise_to_its_final_value() {
        let t0 = Instant::now();
        let at = |ms: u64, c: f64| (t0 + Duration::from_millis(ms), c);
        // 0 until 500 ms, 100 reached at 1500 ms, then flat: 100 in 1 s.
        let samples =
            [at(0, 0.0), at(250, 0.0), at(500, 0.0), at(750, 20.0), at(1250, 80.0), at(1500, 100.0), at(1750, 100.0)];
        assert!((counter_rate(&samples) - 100.0).abs() < 1e-9);
        assert_eq!(counter_rate(&[]), 0.0);
        assert_eq!(counter_rate(&[at(0, 5.0), at(250, 5.0)]), 0.0);
    }

    #[test]
    fn a_rate_counts_the_intervals_between_the_first_and_last_event() {
        let t0 = Instant::now();
        let times = (0..11).map(|i| t0 + Duration::from_millis(100 * i));
        assert!((rate(times) - 10.0).abs() < 1e-9);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let p = percentiles((1..=100).map(f64::from).collect());
        assert_eq!((p.p50, p.p90, p.p99), (51.0, 90.0, 99.0));
    }

    #[test]
    fn the_plot_has_a_line_per_series() {
        let sizes = vec![
            SizeFigures {
                nodes: 10,
                suite_claims_per_second: 50.0,
                scheduler_pods_per_second: 52.0,
                ..Default::default()
            },
            SizeFigures {
                nodes: 100,
                suite_claims_per_second: 40.0,
                scheduler_pods_per_second: 41.0,
                ..Default::default()
            },
        ];
        let svg = plot(&sizes);
        assert!(svg.starts_with("<svg"));
        assert_eq!(svg.matches("<polyline").count(), 4);
    }
}
