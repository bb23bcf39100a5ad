//! The provider of a cluster where the driver is installed: reach it through a kubeconfig,
//! check that it serves DRA, find the driver's nodes and version, and yield the target.

use std::time::Duration;

use dracheck_clusters::{Failure, LocalCluster, reach};
use kube::api::{Api, ListParams};

use super::{Finished, NotUp, Started, driver_facts, plan, run_on, unreachable};
use crate::adapters::Adapter;
use crate::engine::target::PluginAccess;
use crate::engine::{Filter, Target};
use crate::profile::Profile;
use crate::result::ClusterFacts;
use dracheck_clusters::local::Progress;

/// A cluster where the driver already runs (`--cluster kubeconfig`, kind, K3s), or the local
/// cluster with the driver's chart installed (`--cluster local --install helm`).
pub struct ExistingRun {
    /// The local cluster the kubeconfig is for, where the run started one: the suite then
    /// controls its nodes (kubelet restarts, node removal). It comes back in [`Finished`].
    pub local: Option<LocalCluster>,
    pub kubeconfig: std::path::PathBuf,
    pub context: Option<String>,
    pub adapter: Adapter,
    pub profiles: Vec<(std::path::PathBuf, Profile)>,
    pub filter: Filter,
    pub scenario_timeout: Duration,
    pub parallel: usize,
    /// The driver's plugin pods, for driver restarts.
    pub driver_pods: Option<crate::engine::target::DriverPods>,
    /// The second driver of the checks of two drivers on one node, run where the suite
    /// started the nodes (`local`).
    pub companion: Option<crate::adapters::Companion>,
}

/// Runs the plan against a cluster where the driver is installed. Scenarios that restart
/// kubelets or remove nodes are skipped unless the run started that cluster (`local`); the
/// plugin tier runs its own driver instances from the adapter's binary against the cluster's
/// API. The local cluster, if any, comes back in [`Finished::kept`] (the caller removes the
/// driver's release from it first, then stops it).
pub async fn run_existing(cfg: ExistingRun, run_id: &str, progress: &Progress) -> Result<Finished, NotUp> {
    let started = Started::now();
    let fix = "check --kubeconfig and --context, and that the cluster is up";
    let reach::Reached { client, server } =
        reach::client(&cfg.kubeconfig, cfg.context.as_deref(), None).await.map_err(|e| NotUp {
            failure: e.failure(),
            message: match e {
                reach::ReachError::Client { .. } => format!("{e}; {fix}"),
                _ => e.to_string(),
            },
        })?;
    let version = tokio::time::timeout(Duration::from_secs(15), client.apiserver_version())
        .await
        .map_err(|_| unreachable(format!("the cluster at {server} did not answer within 15s; {fix}")))?
        .map_err(|e| unreachable(format!("the cluster at {server} cannot be reached: {}; {fix}", reach::cause(&e))))?;
    let served =
        dracheck_clusters::local::served_resource_versions(&client).await.map_err(|e| unreachable(e.to_string()))?;
    if !served.iter().any(|v| v == "v1") {
        return Err(unreachable(format!(
            "the cluster (Kubernetes {}) does not serve resource.k8s.io/v1 (served: {served:?}); dracheck checks DRA as \
             Kubernetes 1.34 and later serve it: upgrade the cluster or use the local one (--cluster local)",
            version.git_version
        )));
    }
    // Short of a permission, a run would fail scenarios one by one with a 403 in their
    // evidence; asked first, every gap of the credentials is named at once.
    if cfg.local.is_none() {
        let asked = std::time::Instant::now();
        let missing = crate::access::missing(&client).await.map_err(|e| {
            unreachable(format!("asking the cluster at {server} what these credentials may do: {}", reach::cause(&e)))
        })?;
        if !missing.is_empty() {
            return Err(NotUp { failure: Failure::Forbidden, message: crate::access::refusal(&missing) });
        }
        progress.line(format!(
            "access: the credentials have every permission the suite needs (asked in {:.1} s)",
            asked.elapsed().as_secs_f64()
        ));
    }
    let facts = ClusterFacts {
        provider: if cfg.local.is_some() { "local" } else { "kubeconfig" }.into(),
        kubernetes_version: version.git_version.clone(),
        resource_api_versions: served,
        feature_gates: cfg.local.as_ref().map(|l| l.info().feature_gates.clone()).unwrap_or_default(),
        nodes: 0,
        node_kind: cfg.local.as_ref().map(|l| l.node_kind().name().to_string()),
        served_features: Default::default(),
        enabled_gates: Default::default(),
    };
    super::profile_objects::check(&client, &cfg.profiles).await?;
    let driver = driver_facts(&cfg.adapter);
    let work =
        tempfile::Builder::new().prefix("dracheck-p").tempdir().map_err(|e| unreachable(format!("a temp dir: {e}")))?;
    let access = cfg.adapter.spec.clone().map(|spec| PluginAccess {
        spec,
        kubeconfig: cfg.kubeconfig.clone(),
        work_dir: work.path().to_path_buf(),
    });
    let name = cfg.adapter.name.clone();
    let mut target = Target::new(client, cfg.adapter, facts, driver, Vec::new(), cfg.local, cfg.driver_pods, access);
    target.companion = cfg.companion;
    target.nodes = target.live_nodes().await;
    if target.nodes.is_empty() {
        return Err(unreachable(format!(
            "the driver {name} publishes no ResourceSlices on this cluster; install it first (the mock: `{program} cluster up --nodes N --driver mock`; a chart: --install helm)",
            program = dracheck_adapter::program::name()
        )));
    }
    target.cluster.nodes = target.nodes.len();
    if target.driver.version == crate::adapters::UNKNOWN_VERSION
        && let Some(v) = version_from_pods(&target.client, &target.nodes, target.adapter.plugin_images).await
    {
        target.driver.version = v;
    }
    let plan = plan(cfg.profiles, cfg.filter, run_id, cfg.scenario_timeout, cfg.parallel);
    // The work dir of the plugin tier's own nodes goes after the run.
    let finished = run_on(target, &plan, started, true, progress).await;
    drop(work);
    Ok(finished)
}

/// The version of an installed driver, from the image tag of its plugin's pod on one of
/// `nodes` (`v0.4.0` → `0.4.0`).
async fn version_from_pods(client: &kube::Client, nodes: &[String], images: &[&str]) -> Option<String> {
    use k8s_openapi::api::core::v1::Pod;
    if images.is_empty() {
        return None;
    }
    let pods: Api<Pod> = Api::all(client.clone());
    for node in nodes {
        let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
        let Ok(list) = pods.list(&lp).await else { continue };
        let tag = list
            .items
            .iter()
            .flat_map(|p| p.spec.iter().flat_map(|s| s.containers.iter()))
            .filter_map(|c| c.image.as_deref())
            .find_map(|image| {
                let (repo, tag) = image.split('@').next()?.rsplit_once(':')?;
                let name = repo.rsplit('/').next()?;
                (images.contains(&name) && !tag.contains('/')).then(|| tag.trim_start_matches('v').to_string())
            });
        if tag.is_some() {
            return tag;
        }
    }
    None
}
