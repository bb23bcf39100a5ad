//! The cluster and driver under test, and the disruptions a scenario may cause: what every
//! provider (the local cluster with its own driver, the local cluster with a driver's chart, a
//! kubeconfig's cluster, kind, K3s) yields, and the one thing the engine runs on. Restarting a
//! kubelet or removing a node needs control over the nodes, which only the local cluster gives;
//! restarting the driver needs the driver's processes (the local cluster runs them) or its
//! DaemonSet's pods. Where the target lacks one, the scenarios that need it are skipped with
//! that reason.

use std::time::Duration;

use dracheck_clusters::LocalCluster;
use dracheck_clusters::local::{DriverInstance, Lifetime};
use tokio::sync::Mutex;

use super::error::DisruptionError;
use crate::result::{ClusterFacts, DriverFacts};

/// Access to the driver's binary for the plugin tier, which starts instances of its own.
#[derive(Clone)]
pub struct PluginAccess {
    pub spec: dracheck_clusters::local::DriverSpec,
    pub kubeconfig: std::path::PathBuf,
    /// A short dir (socket paths must stay within 108 bytes) for the harness's nodes.
    pub work_dir: std::path::PathBuf,
}

pub struct Target {
    pub client: kube::Client,
    /// What the suite knows of the driver: its oracle, its workloads, its classes.
    pub adapter: crate::adapters::Adapter,
    /// `None` where the suite cannot start the driver itself (a driver installed in a real
    /// cluster); plugin-tier scenarios are skipped there.
    pub plugin: Option<PluginAccess>,
    pub cluster: ClusterFacts,
    pub driver: DriverFacts,
    /// Nodes that run the driver, in a stable order.
    pub nodes: Vec<String>,
    /// The nodes the suite controls: the local cluster, where the run started one.
    local: Option<Mutex<LocalCluster>>,
    /// The local cluster runs the driver's processes itself (not its chart's pods).
    local_driver: bool,
    /// The driver's plugin pods (a DaemonSet's), where it was installed in the cluster: the
    /// driver is restarted through them.
    pub driver_pods: Option<DriverPods>,
    /// The second driver the suite may run beside this one on a node it started.
    pub companion: Option<crate::adapters::Companion>,
}

/// A driver process that ended on its own: named in every verdict of its node that did not
/// pass, since a dead driver explains them better than any wait that ran out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverExit {
    pub node: String,
    /// As the process's exit status reads (`exit status: 1`, `signal: 9 (SIGKILL)`).
    pub status: String,
    pub log_tail: String,
}

impl DriverExit {
    /// What a verdict's reason adds.
    pub fn said(&self) -> String {
        format!("the driver process on {} exited on its own ({}) and was not running", self.node, self.status)
    }

    pub fn evidence(&self) -> crate::result::Evidence {
        crate::result::Evidence {
            title: format!("the driver's log on {} (its process exited: {})", self.node, self.status),
            body: self.log_tail.clone(),
        }
    }
}

/// Label of the Nodes the plugin tier registers for its own driver instances.
pub const PLUGIN_TIER_LABEL: &str = "dracheck.io/plugin-tier";

/// Why a disruption cannot be done on this target.
pub const NEEDS_NODE_CONTROL: &str = "needs control over the nodes (kubelet restarts, node removal), which only a run that starts the local \
     cluster's nodes itself has (--cluster local), not one on another cluster (--cluster kubeconfig, kind, k3s)";
/// Why a second driver cannot join the one under test.
pub const NEEDS_NODE_DIRS: &str = "runs the mock as a second driver beside the one under test, which needs the kubelet's plugin and CDI \
     dirs of a node the suite started (--cluster local), not those of another cluster (--cluster kubeconfig, kind, k3s)";

/// Why a second driver cannot join where the run has none.
pub const NO_COMPANION: &str =
    "no second driver was given to this run (dracheck's `conformance` gives the mock, under another driver name)";

/// Why the taint check cannot run for a driver whose adapter knows no way to make one of its
/// devices unhealthy (`Adapter::mark_unhealthy`).
pub const NO_UNHEALTHY_HOOK: &str = "the suite knows no way to make a device of this driver unhealthy as its health checks \
     would find it (its adapter states no mark_unhealthy)";

/// Why `plugin.shares.independent` is skipped for a driver that publishes no shareable device.
pub const NO_SHAREABLE_DEVICE: &str = "the driver publishes no device that allows multiple allocations on the node";

/// Why the health checks cannot run for a driver whose adapter knows no way to turn one of its
/// devices unhealthy while it runs (`Adapter::set_health`).
pub const NO_HEALTH_HOOK: &str = "the suite knows no way to turn a device of this driver unhealthy while it runs, as its health \
     checks would find it (its adapter states no set_health)";

/// Why the check cannot run for a driver whose plugin's account the suite cannot know.
pub const NEEDS_PLUGIN_ACCOUNT: &str = "needs the ServiceAccount the driver's kubelet plugin runs as: an installed driver's plugin pods \
     (--driver-pods LABEL-SELECTOR, --driver-namespace NS), or the installation a driver's adapter states (the mock's); a driver the \
     suite runs as its own processes with the cluster admin's credentials has no account of its own to check: install its chart \
     (--install helm) to check the chart's";

/// Why an installed driver cannot be restarted.
pub const NEEDS_DRIVER_PODS: &str = "pass --driver-pods LABEL-SELECTOR (and --driver-namespace NS) to restart an installed driver: the suite then deletes its plugin's pod on the node and waits for the DaemonSet's new one";

/// Why an installed driver cannot be kept down.
pub const NEEDS_DRIVER_PROCESSES: &str = "keeping the driver down for a while needs the driver's own processes on the local cluster \
     (--cluster local without --install): an installed driver's DaemonSet starts a deleted pod again at once";

/// Why an installed driver cannot be upgraded.
pub const NEEDS_DRIVER_PROCESSES_UPGRADE: &str = "a rolling update needs the driver's own processes on the local cluster (--cluster \
     local without --install), where the suite starts a second instance beside the first; an installed driver's \
     DaemonSet is not changed by the suite";

/// What a target lets the scenarios do, known before a run starts (`conformance --dry-run`
/// plans with it) and the source of every disruption's skip reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Abilities {
    /// The suite started the nodes: it restarts kubelets, reboots and removes nodes, and
    /// reaches their plugin and CDI dirs.
    pub node_control: bool,
    /// The suite runs the driver's processes on those nodes (not an installed chart's pods).
    pub driver_processes: bool,
    /// The installed driver's plugin pods are known, so it is restarted through them.
    pub driver_pods: bool,
    /// A second driver was given to the run.
    pub companion: bool,
}

impl Abilities {
    /// Why a target with these abilities does not allow `d`, if it does not.
    pub fn cannot(&self, d: crate::engine::Disruption) -> Option<&'static str> {
        use crate::engine::Disruption;
        match d {
            Disruption::None => None,
            Disruption::RestartsDriver if self.driver_pods || self.driver_processes => None,
            Disruption::RestartsDriver => Some(NEEDS_DRIVER_PODS),
            Disruption::StopsDriver if self.driver_processes => None,
            Disruption::StopsDriver => Some(NEEDS_DRIVER_PROCESSES),
            Disruption::ControlsNodes if self.node_control => None,
            Disruption::ControlsNodes => Some(NEEDS_NODE_CONTROL),
            Disruption::AddsDriver if !self.node_control => Some(NEEDS_NODE_DIRS),
            Disruption::AddsDriver if !self.companion => Some(NO_COMPANION),
            Disruption::AddsDriver => None,
            Disruption::UpgradesDriver if self.driver_processes => None,
            Disruption::UpgradesDriver => Some(NEEDS_DRIVER_PROCESSES_UPGRADE),
        }
    }
}

/// The pods of an installed driver's kubelet plugin (a DaemonSet's): the suite restarts the
/// driver on a node by deleting the node's pod.
#[derive(Clone, Debug)]
pub struct DriverPods {
    /// `None`: any namespace.
    pub namespace: Option<String>,
    /// A label selector, e.g. `app.kubernetes.io/name=my-driver`.
    pub selector: String,
}

impl Target {
    /// `local`: the local cluster whose nodes the suite controls, if the run started one;
    /// `driver_pods`: the installed driver's pods, where it was installed (otherwise the local
    /// cluster, if any, runs the driver's processes).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: kube::Client,
        adapter: crate::adapters::Adapter,
        cluster: ClusterFacts,
        driver: DriverFacts,
        nodes: Vec<String>,
        local: Option<LocalCluster>,
        driver_pods: Option<DriverPods>,
        plugin: Option<PluginAccess>,
    ) -> Target {
        let local_driver = local.as_ref().is_some_and(|l| !l.drivers().is_empty());
        Target {
            client,
            adapter,
            plugin,
            cluster,
            driver,
            nodes,
            local: local.map(Mutex::new),
            local_driver,
            driver_pods,
            companion: None,
        }
    }

    /// Nodes that exist and carry slices of the driver, except the plugin tier's own, sorted:
    /// what cluster-tier scenarios are pinned to. Read anew for each profile, because a
    /// node-removal scenario takes one away.
    pub async fn live_nodes(&self) -> Vec<String> {
        use k8s_openapi::api::core::v1::Node;
        use k8s_openapi::api::resource::v1::ResourceSlice;
        use kube::api::{Api, ListParams};
        let slices: Api<ResourceSlice> = Api::all(self.client.clone());
        let lp = ListParams::default().fields(&format!("spec.driver={}", self.driver.name));
        let mut names: Vec<String> = slices
            .list(&lp)
            .await
            .map(|l| l.items.into_iter().filter_map(|s| s.spec.node_name).collect())
            .unwrap_or_default();
        names.sort();
        names.dedup();
        // One LIST of the nodes, not a GET per node: it is asked for every profile.
        let nodes: Api<Node> = Api::all(self.client.clone());
        let existing = nodes.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
        let plugin_tier = |node: &Node| {
            node.metadata.labels.as_ref().is_some_and(|l| l.contains_key(PLUGIN_TIER_LABEL))
                || node.spec.iter().flat_map(|s| s.taints.iter().flatten()).any(|t| t.key == PLUGIN_TIER_LABEL)
        };
        let live: Vec<String> = names
            .into_iter()
            .filter(|n| existing.iter().any(|node| node.metadata.name.as_ref() == Some(n) && !plugin_tier(node)))
            .collect();
        if live.is_empty() { self.nodes.clone() } else { live }
    }

    /// Why this target does not allow `d`, if it does not.
    pub fn cannot(&self, d: crate::engine::Disruption) -> Option<&'static str> {
        self.abilities().cannot(d)
    }

    /// What this target lets the scenarios do.
    pub fn abilities(&self) -> Abilities {
        Abilities {
            node_control: self.local.is_some(),
            driver_processes: self.local_driver,
            driver_pods: self.driver_pods.is_some(),
            companion: self.companion.is_some(),
        }
    }

    /// The local cluster back, for teardown.
    pub fn into_local(self) -> Option<LocalCluster> {
        self.local.map(Mutex::into_inner)
    }

    async fn local(&self) -> Result<tokio::sync::MutexGuard<'_, LocalCluster>, DisruptionError> {
        match &self.local {
            Some(l) => Ok(l.lock().await),
            None => Err(DisruptionError::NoNodeControl),
        }
    }

    /// Graceful stop and start of the driver's plugin on `node` (its pod replaced by its
    /// DaemonSet, where it was installed); returns the downtime.
    pub async fn restart_driver(&self, node: &str) -> Result<Duration, DisruptionError> {
        if let Some(pods) = &self.driver_pods {
            return super::driver_pods::restart(&self.client, pods, node).await;
        }
        let started = std::time::Instant::now();
        self.on_local_driver(node, |driver| Ok(driver.restart(Duration::from_secs(10))?)).await?;
        Ok(started.elapsed())
    }

    /// Does `f` to the driver process the local cluster runs on `node`.
    async fn on_local_driver<T>(
        &self,
        node: &str,
        f: impl FnOnce(&mut dracheck_clusters::local::DriverInstance) -> Result<T, DisruptionError>,
    ) -> Result<T, DisruptionError> {
        let mut local = self.local().await?;
        f(local.driver_mut(node).ok_or_else(|| DisruptionError::NoDriver(node.into()))?)
    }

    /// The dirs of `node` where the suite runs the driver's process itself (the local cluster's
    /// nodes), which a driver's adapter may act through (`Adapter::set_health`); `None`
    /// elsewhere.
    pub async fn driver_dirs(&self, node: &str) -> Option<dracheck_adapter::spec::NodeDirs> {
        let mut local = self.local.as_ref()?.lock().await;
        local.driver_mut(node)?;
        Some(local.nodes().iter().find(|n| n.name() == node)?.config().dirs())
    }

    /// Whether the driver process the local cluster runs on `node` ended on its own (not by a
    /// scenario's stop or kill, which leave no process to ask): its exit status and the last
    /// lines of its log. `None` where it runs, or where the suite runs no process there.
    pub async fn driver_exit(&self, node: &str) -> Option<DriverExit> {
        let mut local = self.local.as_ref()?.lock().await;
        let driver = local.driver_mut(node)?;
        let status = driver.exited()?;
        Some(DriverExit { node: node.to_string(), status: status.to_string(), log_tail: driver.log_tail(20) })
    }

    /// Stops the driver on `node` (gracefully), for [`Target::start_driver`] to start again.
    pub async fn stop_driver(&self, node: &str) -> Result<(), DisruptionError> {
        self.on_local_driver(node, |driver| {
            driver.stop(Duration::from_secs(10));
            Ok(())
        })
        .await
    }

    /// Starts the driver on `node` again after [`Target::stop_driver`].
    pub async fn start_driver(&self, node: &str) -> Result<(), DisruptionError> {
        self.on_local_driver(node, |driver| Ok(driver.start_again()?)).await
    }

    /// Stops and starts the kubelet of `node` (its containers keep running).
    pub async fn restart_kubelet(&self, node: &str) -> Result<(), DisruptionError> {
        let mut local = self.local().await?;
        let n = local.node_mut(node).ok_or_else(|| DisruptionError::NoNode(node.into()))?;
        Ok(n.restart_kubelet().await?)
    }

    /// Reboots `node`: everything on it stops at once, its tmpfs (CDI specs) is lost, its
    /// checkpoints are kept, and it boots again with its driver.
    pub async fn reboot_node(&self, node: &str) -> Result<(), DisruptionError> {
        Ok(self.local().await?.reboot_node(node).await?)
    }

    /// The CDI spec files in `node`'s CDI dir (`/var/run/cdi` of the node) with their
    /// contents, where the suite can read them: the local cluster's nodes.
    pub async fn cdi_specs(&self, node: &str) -> Option<std::collections::BTreeMap<String, String>> {
        let local = self.local.as_ref()?.lock().await;
        let dir = local.nodes().iter().find(|n| n.name() == node)?.config().cdi_dir();
        let mut specs = std::collections::BTreeMap::new();
        for entry in std::fs::read_dir(dir).ok()?.flatten() {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            specs.insert(entry.file_name().to_string_lossy().into_owned(), text);
        }
        Some(specs)
    }

    /// Starts the run's second driver ([`Target::companion`]) on `node`, as a DaemonSet of
    /// another vendor would run it there; it stops when the returned instance is dropped.
    pub async fn start_companion(&self, node: &str) -> Result<DriverInstance, DisruptionError> {
        let companion = self.companion.as_ref().ok_or(DisruptionError::NoCompanion)?;
        let local = self.local().await?;
        let cfg =
            local.nodes().iter().find(|n| n.name() == node).ok_or_else(|| DisruptionError::NoNode(node.into()))?;
        Ok(DriverInstance::start(&companion.spec, cfg.config(), local.kubeconfig(), Lifetime::Attached)?)
    }

    /// Starts a second instance of the driver under test on `node`, named `id`, beside its own
    /// instance, as a DaemonSet's rolling update starts the new pod before the old one goes;
    /// it stops when the returned instance is dropped. `None` where the driver's adapter
    /// does not say how an instance gets sockets of its own.
    pub async fn start_instance(&self, node: &str, id: &str) -> Result<Option<DriverInstance>, DisruptionError> {
        let (Some(spec), Some(args)) = (&self.adapter.spec, self.adapter.instance_args) else { return Ok(None) };
        let local = self.local().await?;
        let n = local.nodes().iter().find(|n| n.name() == node).ok_or_else(|| DisruptionError::NoNode(node.into()))?;
        let spec = spec.with_args(args(id));
        Ok(Some(DriverInstance::start_instance(&spec, n.config(), local.kubeconfig(), Lifetime::Attached, id)?))
    }

    /// The DRA sockets of the plugin instances of `driver` that the kubelet of `node` has
    /// registered; `None` where the suite does not run the node.
    pub async fn registered_endpoints(&self, node: &str, driver: &str) -> Option<Vec<std::path::PathBuf>> {
        let local = self.local.as_ref()?.lock().await;
        let n = local.nodes().iter().find(|n| n.name() == node)?;
        Some(n.registered_endpoints().into_iter().filter(|(d, _)| d == driver).map(|(_, e)| e).collect())
    }

    /// Whether the kubelet of `node` has registered `driver`'s plugin; `None` where the suite
    /// does not run the node.
    pub async fn registered(&self, node: &str, driver: &str) -> Option<bool> {
        let local = self.local.as_ref()?.lock().await;
        let n = local.nodes().iter().find(|n| n.name() == node)?;
        Some(n.registered_drivers().iter().any(|d| d == driver))
    }

    /// Stops `node` and deletes its Node object.
    pub async fn remove_node(&self, node: &str) -> Result<(), DisruptionError> {
        Ok(self.local().await?.remove_node(node).await?)
    }

    /// The driver's log tail on `node`, for evidence.
    pub async fn driver_log(&self, node: &str, lines: usize) -> Option<String> {
        if let Some(pods) = &self.driver_pods {
            return super::driver_pods::log_tail(&self.client, pods, node, lines).await;
        }
        let local = self.local.as_ref()?.lock().await;
        local.drivers().iter().find(|d| d.node == node).map(|d| d.log_tail(lines))
    }

    /// The kubelet's log tail on `node`, for evidence.
    pub async fn kubelet_log(&self, node: &str, lines: usize) -> Option<String> {
        let local = self.local.as_ref()?.lock().await;
        Some(local.nodes().iter().find(|n| n.name() == node)?.log_tail(lines))
    }

    /// The last `lines` of the kubelet's and the driver's logs on `node`, as evidence: the
    /// node's own account of what it did with a pod.
    pub async fn node_logs(&self, node: &str, lines: usize) -> Vec<crate::result::Evidence> {
        let mut out = Vec::new();
        if let Some(log) = self.kubelet_log(node, lines).await {
            out.push(crate::result::Evidence { title: format!("kubelet log on {node}"), body: log });
        }
        if let Some(log) = self.driver_log(node, lines).await {
            out.push(crate::result::Evidence { title: format!("driver log on {node}"), body: log });
        }
        out
    }

    /// The kubelet's DRA checkpoint of `node` (claim UID → CDI device IDs), where it can be
    /// read: the local cluster's nodes keep it in their root dir, as the kubelet does.
    pub async fn prepared_claims(&self, node: &str) -> Option<Vec<(String, Vec<String>)>> {
        let local = self.local.as_ref()?.lock().await;
        let n = local.nodes().iter().find(|n| n.name() == node)?;
        Some(n.prepared_claims())
    }
}
