//! A conformance run: a provider yields the [`Target`] (the local cluster with the driver on
//! each node: [`run`]; an existing cluster where the driver runs, or the local cluster with the
//! driver's chart: [`run_existing`]), and every run goes on the same way ([`run_on`]): the plan
//! over the target, the result assembled, the local cluster stopped or kept. `cargo xtask
//! conformance` and the verdict-fidelity tests both go through here.

use std::time::{Duration, Instant};

use dracheck_clusters::local::{Lifetime, Progress};
use dracheck_clusters::{ClusterError, Failure, LocalCluster, LocalClusterOptions};
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, ListParams};

use crate::adapters::Adapter;
use crate::engine::target::PluginAccess;
use crate::engine::{self, Filter, NamespaceLifetime, Plan, Target};
use crate::profile::Profile;
use crate::result::{ClusterFacts, DriverFacts, RunResult, SCHEMA_VERSION};
use crate::scenarios;

mod existing;
mod no_slices;
mod profile_objects;

pub use existing::{ExistingRun, run_existing};

pub struct LocalRun {
    pub adapter: Adapter,
    pub profiles: Vec<(std::path::PathBuf, Profile)>,
    pub filter: Filter,
    pub nodes: usize,
    pub cluster: LocalClusterOptions,
    pub scenario_timeout: Duration,
    /// `--parallel N`; 0: no limit beyond the nodes.
    pub parallel: usize,
    /// Leave the cluster running: returned instead of stopped.
    pub keep_cluster: bool,
    /// The second driver of the checks of two drivers on one node; without it they are
    /// skipped.
    pub companion: Option<crate::adapters::Companion>,
}

/// Nodes of a default run: every scenario role of the shipped profiles of the mock on a node
/// of its own (four each for standard-inference and training-intensive, one each for the
/// partitioned and the shared GPU), so that the profiles run side by side; `--nodes`' default
/// too.
pub const DEFAULT_NODES: usize = 10;

impl LocalRun {
    /// The default run of a driver: its shipped profiles, on [`DEFAULT_NODES`] nodes.
    pub fn default_for(adapter: Adapter) -> Result<LocalRun, crate::profile::ProfileError> {
        let profiles = crate::profile::shipped(adapter.short)
            .into_iter()
            .map(|p| crate::profile::load(&p).map(|loaded| (p, loaded)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(LocalRun {
            adapter,
            profiles,
            filter: Filter::default(),
            nodes: DEFAULT_NODES,
            cluster: LocalClusterOptions::from_env(),
            scenario_timeout: Duration::from_secs(300),
            parallel: 0,
            keep_cluster: false,
            companion: None,
        })
    }
}

/// Why a run gave no verdict: the cluster or the driver could not be brought up.
#[derive(Debug)]
pub struct NotUp {
    /// What kind of failure it is; the command line chooses its exit code.
    pub failure: Failure,
    pub message: String,
}

impl From<ClusterError> for NotUp {
    fn from(e: ClusterError) -> NotUp {
        NotUp { failure: e.failure(), message: e.to_string() }
    }
}

pub struct Finished {
    pub result: RunResult,
    /// The cluster, when `keep_cluster` asked for it.
    pub kept: Option<LocalCluster>,
}

pub async fn run(cfg: LocalRun, run_id: &str, progress: &Progress) -> Result<Finished, NotUp> {
    let begun = Instant::now();
    let started_at = dracheck_objects::now().to_string();
    let opts = LocalClusterOptions {
        lifetime: if cfg.keep_cluster { Lifetime::Detached } else { Lifetime::Attached },
        progress: progress.clone(),
        ..cfg.cluster
    };
    let cluster = bring_up(opts, cfg.nodes, &cfg.adapter).await?;
    profile_objects::check(&cluster.client(), &cfg.profiles).await?;
    // A first run builds the control plane: minutes that are not the run's own time.
    let build = cluster.build;
    let cluster_start = begun.elapsed().saturating_sub(build);
    let facts = ClusterFacts {
        provider: "local".into(),
        kubernetes_version: cluster.kubernetes_version().to_string(),
        resource_api_versions: cluster.resource_api_versions().to_vec(),
        feature_gates: cluster.info().feature_gates.clone(),
        nodes: cluster.nodes().len(),
        node_kind: Some(cluster.node_kind().name().to_string()),
        served_features: Default::default(),
        enabled_gates: Default::default(),
    };
    let driver = driver_facts(&cfg.adapter);
    let access = cfg.adapter.spec.clone().map(|spec| PluginAccess {
        spec,
        kubeconfig: cluster.kubeconfig().to_path_buf(),
        // Short: the plugin tier's socket paths live under it.
        work_dir: cluster.state_dir().join("p"),
    });
    let nodes = cluster.nodes().iter().map(|n| n.name().to_string()).collect();
    let mut target = Target::new(cluster.client(), cfg.adapter, facts, driver, nodes, Some(cluster), None, access);
    target.companion = cfg.companion;
    let mut plan = plan(cfg.profiles, cfg.filter, run_id, cfg.scenario_timeout, cfg.parallel);
    if !cfg.keep_cluster {
        plan.namespaces = NamespaceLifetime::Cluster;
    }
    let started =
        Started { begun, started_at, build, phases: vec![("build", build), ("cluster-start", cluster_start)] };
    Ok(run_on(target, &plan, started, cfg.keep_cluster, progress).await)
}

/// When and how a run began: its clock, its start time, how long the binaries' build took
/// (left out of the run's duration) and the phases before the plan (build, cluster start).
struct Started {
    begun: Instant,
    started_at: String,
    build: Duration,
    phases: Vec<(&'static str, Duration)>,
}

impl Started {
    fn now() -> Started {
        Started {
            begun: Instant::now(),
            started_at: dracheck_objects::now().to_string(),
            build: Duration::ZERO,
            phases: Vec::new(),
        }
    }
}

/// The one way every run goes once its provider yielded the target: the plan over it, then the
/// local cluster (if the run started one) stopped, or kept when `keep` asks for it.
async fn run_on(mut target: Target, plan: &Plan, started: Started, keep: bool, progress: &Progress) -> Finished {
    let say = |l: &str| progress.line(l);
    target.cluster.served_features = engine::served::probe(&target.client).await;
    target.cluster.enabled_gates = engine::served::gates_enabled(&target.client).await;
    let outcome = engine::run(&target, plan, &say).await;
    let teardown = Instant::now();
    let (facts, driver) = (target.cluster.clone(), target.driver.clone());
    let local = target.into_local();
    let kept = if keep {
        local
    } else {
        if let Some(c) = local {
            c.stop();
        }
        None
    };
    let mut phases = started.phases;
    phases.push(("teardown", teardown.elapsed()));
    let result = assemble(started.begun, started.build, started.started_at, facts, driver, outcome, &phases);
    Finished { result, kept }
}

/// The result of a run; `build` (binaries built before the cluster started) is reported in the
/// timings and left out of the run's duration.
fn assemble(
    begun: Instant,
    build: Duration,
    started_at: String,
    cluster: ClusterFacts,
    driver: DriverFacts,
    outcome: engine::Outcome,
    phases: &[(&str, Duration)],
) -> RunResult {
    let mut timings = outcome.timings;
    timings.extend(phases.iter().map(|(k, d)| (k.to_string(), d.as_secs_f64())));
    RunResult {
        schema_version: SCHEMA_VERSION,
        dracheck_version: env!("CARGO_PKG_VERSION").into(),
        started_at,
        duration_seconds: begun.elapsed().saturating_sub(build).as_secs_f64(),
        cluster,
        driver,
        driver_guarantees: outcome.driver_guarantees,
        profiles: outcome.profiles,
        timings,
        shape: Default::default(),
    }
}

/// Every scenario, for `profiles`; `parallel` 0 sets no limit beyond the nodes.
pub fn plan(
    profiles: Vec<(std::path::PathBuf, Profile)>,
    filter: Filter,
    run_id: &str,
    scenario_timeout: Duration,
    parallel: usize,
) -> Plan {
    Plan {
        driver_scenarios: scenarios::driver_scenarios(),
        cluster_scenarios: scenarios::cluster_scenarios(),
        profiles,
        filter,
        run_id: run_id.to_string(),
        scenario_timeout,
        parallel: (parallel > 0).then(|| tokio::sync::Semaphore::new(parallel)),
        namespaces: NamespaceLifetime::Scenario,
    }
}

fn driver_facts(adapter: &Adapter) -> DriverFacts {
    DriverFacts {
        name: adapter.name.clone(),
        version: adapter.version.clone(),
        artifact: adapter
            .spec
            .as_ref()
            .map_or_else(|| "installed in the cluster".into(), |s| s.program.display().to_string()),
    }
}

fn unreachable(what: String) -> NotUp {
    NotUp { failure: Failure::ClusterDown, message: what }
}

/// How long a started driver has to publish its slices on every node.
const SLICE_WAIT: Duration = Duration::from_secs(60);
/// How long, once every node's slices are there, the run waits for every kubelet to have
/// registered the driver before it starts anyway.
const REGISTRATION_GRACE: Duration = Duration::from_secs(10);

/// The local cluster with `nodes` emulated nodes, the driver on each and its DeviceClasses,
/// ready once every node's slices are published and its kubelet registered the driver.
async fn bring_up(opts: LocalClusterOptions, nodes: usize, adapter: &Adapter) -> Result<LocalCluster, NotUp> {
    let spec = adapter.spec.as_ref().ok_or_else(|| NotUp {
        failure: Failure::BadInput,
        message: format!(
            "the driver {} runs only installed in a real cluster (its kubelet plugin needs the node's devices), not on \
             the local cluster's emulated nodes; install it there (--install helm, or a pre-installed driver) and run \
             with --cluster kubeconfig",
            adapter.name
        ),
    })?;
    let progress = opts.progress.clone();
    let mut cluster = LocalCluster::start(opts).await?;
    cluster.add_nodes_reporting(nodes, &progress).await?;
    install_driver(&cluster.client(), adapter).await.map_err(|e| unreachable(e.to_string()))?;
    cluster.start_driver(spec)?;
    let slices: Api<ResourceSlice> = Api::all(cluster.client());
    let deadline = Instant::now() + SLICE_WAIT;
    let mut published_at: Option<Instant> = None;
    loop {
        let lp = ListParams::default().fields(&format!("spec.driver={}", spec.name));
        let published: Vec<String> = slices
            .list(&lp)
            .await
            .map(|l| l.items.into_iter().filter_map(|s| s.spec.node_name).collect())
            .unwrap_or_default();
        let missing: Vec<String> = cluster
            .nodes()
            .iter()
            .map(|n| n.name().to_string())
            .filter(|n| !published.iter().any(|p| p == n))
            .collect();
        if missing.is_empty() {
            // Slices say nothing of the kubelet: a driver publishes them through the API
            // whether or not its registration went through, and a scenario that starts before
            // it did gets `driver … is not registered` from the kubelet. A driver that never
            // registers is for the plugin tier to fail, not a cluster that is not up.
            let published_at = *published_at.get_or_insert_with(Instant::now);
            let registered = cluster.nodes().iter().all(|n| n.registered_drivers().contains(&spec.name));
            if registered || published_at.elapsed() > REGISTRATION_GRACE {
                return Ok(cluster);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        let names: Vec<String> = cluster.nodes().iter().map(|n| n.name().to_string()).collect();
        let exited = names.iter().find_map(|n| {
            let d = cluster.driver_mut(n)?;
            let status = d.exited()?;
            Some((n.clone(), status, d.log_tail(15)))
        });
        if let Some((node, status, tail)) = exited {
            return Err(NotUp {
                failure: Failure::ClusterDown,
                message: format!(
                    "the driver {} on {node} exited ({status}) before it published its ResourceSlices: check that \
                     {} is a kubelet plugin and that its command line (--driver-arg) is right; its log:\n{tail}",
                    spec.name,
                    spec.program.display()
                ),
            });
        }
        // A plugin that registered under another name will never publish under this one:
        // say so now instead of at the deadline.
        let misnamed = cluster.nodes().iter().find_map(|n| {
            let names = n.registered_drivers();
            (!names.is_empty() && !names.contains(&spec.name)).then(|| (n.name().to_string(), names))
        });
        if let Some((node, names)) = misnamed {
            let tail = cluster.drivers().iter().find(|d| d.node == node).map(|d| d.log_tail(15)).unwrap_or_default();
            return Err(NotUp {
                failure: Failure::BadInput,
                message: format!(
                    "the driver registered with the kubelet of {node} as {names:?}, not as {}: pass the name it \
                     registers under (--driver-name), or fix its name flag in --driver-arg; its log:\n{tail}",
                    spec.name
                ),
            });
        }
        if Instant::now() > deadline {
            let silent: Vec<no_slices::Silent> = cluster
                .drivers()
                .iter()
                .filter(|d| missing.contains(&d.node))
                .filter_map(|d| {
                    let n = cluster.nodes().iter().find(|n| n.name() == d.node)?;
                    let registered = n.registered_drivers().contains(&spec.name);
                    Some(no_slices::Silent::observe(spec, n.config(), registered, &n.log_path(), &d.log_path()))
                })
                .collect();
            return Err(NotUp {
                failure: Failure::ClusterDown,
                message: no_slices::message(&spec.name, &spec.program, SLICE_WAIT, &silent),
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The fewest emulated nodes the selected scenarios of `profiles` can run on, and why: one
/// node for everything, plus one per profile whose node-removal scenario runs (each removal
/// takes a node for good, and its claim must find a node to move to).
pub fn nodes_needed(profiles: &[(std::path::PathBuf, Profile)], filter: &Filter) -> (usize, String) {
    let removals: Vec<&str> = profiles
        .iter()
        .filter(|(_, p)| {
            scenarios::cluster_scenarios()
                .iter()
                .any(|s| s.role == engine::Role::Removal && s.applicable(Some(p)).iter().any(|id| filter.selects(id)))
        })
        .map(|(_, p)| p.metadata.name.as_str())
        .collect();
    if removals.is_empty() {
        (1, "every scenario runs on a node".into())
    } else {
        (
            1 + removals.len(),
            format!(
                "one node for the scenarios, and one more for each profile whose node-removal scenario removes a node ({})",
                removals.join(", ")
            ),
        )
    }
}

/// The roles of the cluster-tier scenarios of `profile` that `filter` selects, one per scenario.
fn selected_roles(profile: &Profile, filter: &Filter) -> Vec<engine::Role> {
    scenarios::cluster_scenarios()
        .into_iter()
        .filter(|s| s.applicable(Some(profile)).iter().any(|id| filter.selects(id)))
        .map(|s| s.role)
        .collect()
}

/// Whether `filter` leaves no guarantee of the driver's scenarios or of `profiles`' to check: a
/// run of it would start a cluster, check nothing and pass.
pub fn selects_nothing(profiles: &[(std::path::PathBuf, Profile)], filter: &Filter) -> bool {
    let driver =
        scenarios::driver_scenarios().into_iter().any(|s| s.applicable(None).iter().any(|id| filter.selects(id)));
    !driver && profiles.iter().all(|(_, p)| selected_roles(p, filter).is_empty())
}

/// The nodes with which every selected scenario role of every profile has a node of its own,
/// so that the profiles run side by side (the engine runs them one after the other on fewer).
pub fn nodes_side_by_side(profiles: &[(std::path::PathBuf, Profile)], filter: &Filter) -> usize {
    profiles
        .iter()
        .map(|(_, p)| {
            let mut roles = selected_roles(p, filter);
            roles.sort();
            roles.dedup();
            roles.len()
        })
        .sum()
}

/// The nodes with which every selected scenario has a node of its own (and node removal a
/// spare): then no scenario waits for another, which is what a run of a fault that has each
/// scenario wait out its timeout needs to end in one timeout rather than several in a row.
pub fn nodes_each_alone(profiles: &[(std::path::PathBuf, Profile)], filter: &Filter) -> usize {
    profiles.iter().map(|(_, p)| engine::lanes_wanted(&selected_roles(p, filter))).sum()
}

/// Creates what the driver's installation brings, as its chart would: its DeviceClasses, and
/// its plugin's ServiceAccount, rights and admission policies where the adapter states them.
pub async fn install_driver(client: &kube::Client, adapter: &Adapter) -> Result<(), crate::engine::ScenarioError> {
    use crate::engine::ApiContext;
    use k8s_openapi::api::resource::v1::DeviceClass;
    let api: Api<DeviceClass> = Api::all(client.clone());
    for class in &adapter.device_classes {
        let name = class.metadata.name.clone().unwrap_or_default();
        api.create(&kube::api::PostParams::default(), class)
            .await
            .doing(|| format!("installing the DeviceClass {name} of the driver {}", adapter.name))?;
    }
    if let Some(installation) = &adapter.installation {
        crate::installation::apply_all(client, installation)
            .await
            .doing(|| format!("installing the kubelet plugin's account and policies of the driver {}", adapter.name))?;
    }
    Ok(())
}

/// Short, unique enough across runs on one cluster, valid in a namespace name.
pub fn run_id() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    format!("{:06x}", (nanos ^ ((std::process::id() as u128) << 20)) & 0xff_ffff)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::{Duration, Instant};

    use crate::engine::{Filter, Outcome};
    use crate::result::{ClusterFacts, DriverFacts};

    /// The default node count is what the mock's shipped profiles need to run side by side:
    /// fewer, and the default run takes the sum of the profiles' times instead of the longest.
    #[test]
    fn the_default_nodes_run_the_shipped_mock_profiles_side_by_side() {
        let profiles: Vec<_> = crate::profile::shipped("mock")
            .into_iter()
            .map(|p| {
                let loaded = crate::profile::load(&p).expect("a shipped profile loads");
                (p, loaded)
            })
            .collect();
        assert_eq!(super::nodes_side_by_side(&profiles, &Filter::default()), super::DEFAULT_NODES);
    }

    #[test]
    fn the_duration_is_the_runs_own_time_and_the_build_is_reported_apart() {
        let begun = Instant::now().checked_sub(Duration::from_secs(100)).expect("the clock is past 100s");
        let outcome = Outcome { driver_guarantees: Vec::new(), profiles: Vec::new(), timings: BTreeMap::new() };
        let facts = ClusterFacts {
            provider: "local".into(),
            kubernetes_version: "v1.37.2".into(),
            resource_api_versions: Vec::new(),
            feature_gates: String::new(),
            nodes: 1,
            node_kind: Some("real".into()),
            served_features: Default::default(),
            enabled_gates: Default::default(),
        };
        let driver = DriverFacts { name: "d".into(), version: "1".into(), artifact: "a".into() };
        let build = Duration::from_secs(90);
        let r = super::assemble(begun, build, String::new(), facts, driver, outcome, &[("build", build)]);
        assert!((10.0..20.0).contains(&r.duration_seconds), "duration {}", r.duration_seconds);
        assert_eq!(r.timings.get("build"), Some(&90.0));
    }

    fn shipped_mock() -> Vec<(std::path::PathBuf, crate::profile::Profile)> {
        crate::profile::shipped("mock")
            .into_iter()
            .map(|p| {
                let loaded = crate::profile::load(&p).expect("a shipped profile loads");
                (p, loaded)
            })
            .collect()
    }

    #[test]
    fn a_run_needs_a_node_more_for_each_profile_that_removes_one() {
        let profiles = shipped_mock();
        let removing =
            profiles.iter().filter(|(_, p)| p.guarantee_ids().iter().any(|id| id.starts_with("node.removal."))).count();
        assert!(removing > 0, "a shipped mock profile checks node removal");
        let (needed, why) = super::nodes_needed(&profiles, &Filter::default());
        assert_eq!(needed, 1 + removing, "{why}");
        let no_removal = Filter { only: Vec::new(), skip: vec!["node.removal.*".into()] };
        assert_eq!(super::nodes_needed(&profiles, &no_removal).0, 1);
    }
}
