//! What a scenario works with: its namespace, its profile, the node it is pinned to, the
//! target's disruptions, object creation that is cleaned up, waits with bounded timeouts,
//! evidence capture, and the verdict of each guarantee it checks.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use dracheck_objects::{PodBuilder, published};
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::api::resource::v1::{
    Device, DeviceClass, DeviceRequestAllocationResult, DeviceTaintRule, ResourceClaim, ResourceSlice,
};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::wait::Condition;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::{ApiContext, ScenarioError};
use super::target::Target;
use super::wait;
use crate::profile::Profile;
use crate::result::{AllocatedDevice, Evidence, GuaranteeResult, Verdict};

/// A cluster-scoped object a scenario made, by name, removed when it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterObject {
    Class(String),
    TaintRule(String),
}

pub struct Ctx<'a> {
    pub target: &'a Target,
    /// `None` for driver-level (plugin tier) scenarios.
    pub profile: Option<&'a Profile>,
    pub ns: String,
    /// The run's ID, which every object of the run is labelled with.
    pub run_id: String,
    pub scenario: &'static str,
    /// The node this scenario's pods are pinned to, so that scenarios on other nodes cannot
    /// take its devices.
    pub node: String,
    /// Nodes other scenarios do not use, for "capacity elsewhere" checks.
    pub spare_nodes: Vec<String>,
    results: Mutex<BTreeMap<String, GuaranteeResult>>,
    allocations: Mutex<Vec<AllocatedDevice>>,
    cluster_objects: Mutex<Vec<ClusterObject>>,
    /// Namespaces besides `ns` that the scenario made.
    namespaces: Mutex<Vec<String>>,
    progress: &'a (dyn Fn(&str) + Sync),
}

impl<'a> Ctx<'a> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        target: &'a Target,
        profile: Option<&'a Profile>,
        ns: String,
        run_id: &str,
        scenario: &'static str,
        node: String,
        spare_nodes: Vec<String>,
        progress: &'a (dyn Fn(&str) + Sync),
    ) -> Ctx<'a> {
        Ctx {
            target,
            profile,
            ns,
            run_id: run_id.to_string(),
            scenario,
            node,
            spare_nodes,
            results: Mutex::new(BTreeMap::new()),
            allocations: Mutex::new(Vec::new()),
            cluster_objects: Mutex::new(Vec::new()),
            namespaces: Mutex::new(Vec::new()),
            progress,
        }
    }

    pub fn client(&self) -> kube::Client {
        self.target.client.clone()
    }

    /// The profile of a cluster-tier scenario.
    pub fn profile(&self) -> &'a Profile {
        self.profile.expect("cluster-tier scenarios run with a profile")
    }

    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client(), &self.ns)
    }

    /// A progress line: the scenario and the phase it is in.
    pub fn phase(&self, what: &str) {
        (self.progress)(&format!("{}: {what}", self.scenario));
    }

    fn record(&self, id: &str, verdict: Verdict, reason: String, evidence: Vec<Evidence>) {
        let mut results = self.results.lock().unwrap();
        match results.get_mut(id) {
            None => {
                let r = GuaranteeResult {
                    id: id.to_string(),
                    scenario: self.scenario.to_string(),
                    verdict,
                    level: dracheck_results::levels::Level::of(id),
                    reason,
                    evidence,
                    durations: BTreeMap::new(),
                };
                results.insert(id.to_string(), r);
            }
            Some(entry) => {
                match (entry.verdict, verdict) {
                    (Verdict::Fail, Verdict::Fail) => entry.reason = format!("{}; {reason}", entry.reason),
                    // A failure is final: a later pass of the same guarantee does not hide it.
                    (Verdict::Fail, _) => {}
                    _ => {
                        entry.verdict = verdict;
                        entry.reason = reason;
                    }
                }
                entry.evidence.extend(evidence);
            }
        }
    }

    pub fn pass(&self, id: &str, reason: impl Display) {
        self.record(id, Verdict::Pass, reason.to_string(), Vec::new());
    }

    /// A pass that keeps what it was judged on.
    pub fn pass_with(&self, id: &str, reason: impl Display, evidence: Vec<Evidence>) {
        self.record(id, Verdict::Pass, reason.to_string(), evidence);
    }

    pub fn fail(&self, id: &str, reason: impl Display, evidence: Vec<Evidence>) {
        self.record(id, Verdict::Fail, reason.to_string(), evidence);
    }

    pub fn skip(&self, id: &str, reason: impl Display) {
        self.record(id, Verdict::Skip, reason.to_string(), Vec::new());
    }

    /// Pass if `ok`, else fail with `why` and `evidence`.
    pub fn check(&self, id: &str, ok: bool, pass: impl Display, why: impl Display, evidence: Vec<Evidence>) {
        if ok { self.pass(id, pass) } else { self.fail(id, why, evidence) }
    }

    pub fn duration(&self, id: &str, name: &str, d: Duration) {
        let mut results = self.results.lock().unwrap();
        if let Some(r) = results.get_mut(id) {
            r.durations.insert(name.to_string(), (d.as_secs_f64() * 1000.0).round() / 1000.0);
        }
    }

    pub fn is_recorded(&self, id: &str) -> bool {
        self.results.lock().unwrap().contains_key(id)
    }

    pub(crate) fn take_results(&self) -> Vec<GuaranteeResult> {
        std::mem::take(&mut *self.results.lock().unwrap()).into_values().collect()
    }

    /// Records what a claim of the profile got (driver, device, its attributes and
    /// capacities as the slice publishes them), for comparisons across clusters.
    pub async fn note_allocation(&self, claim: &ResourceClaim) {
        let api: Api<ResourceSlice> = Api::all(self.client());
        let slices = api.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
        for (driver, pool, device) in Ctx::allocated(claim) {
            let found = published::find_device(&slices, &driver, &pool, &device);
            let attributes = found
                .and_then(|d| d.attributes.as_ref())
                .map(|a| a.iter().map(|(k, v)| (k.clone(), published::attribute_value(v))).collect())
                .unwrap_or_default();
            let capacity = found
                .and_then(|d| d.capacity.as_ref())
                .map(|c| c.iter().map(|(k, v)| (k.clone(), v.value.0.clone())).collect())
                .unwrap_or_default();
            let mut all = self.allocations.lock().unwrap();
            let entry = AllocatedDevice { driver, pool, device, attributes, capacity };
            if !all.contains(&entry) {
                all.push(entry);
            }
        }
    }

    pub(crate) fn take_allocations(&self) -> Vec<AllocatedDevice> {
        std::mem::take(&mut *self.allocations.lock().unwrap())
    }

    pub(crate) fn take_cluster_objects(&self) -> Vec<ClusterObject> {
        std::mem::take(&mut *self.cluster_objects.lock().unwrap())
    }

    pub(crate) fn take_namespaces(&self) -> Vec<String> {
        std::mem::take(&mut *self.namespaces.lock().unwrap())
    }

    /// A second namespace of the run, `<ns>-<suffix>`, deleted with the scenario's own: for
    /// objects that must share a name with one in the scenario's namespace.
    pub async fn other_namespace(&self, suffix: &str) -> Result<String, ScenarioError> {
        self.other_namespace_labelled(suffix, &[]).await
    }

    /// [`Ctx::other_namespace`] with `labels` besides the run's, e.g. the label that admits
    /// admin-access claims.
    pub async fn other_namespace_labelled(
        &self,
        suffix: &str,
        labels: &[(&str, &str)],
    ) -> Result<String, ScenarioError> {
        let name = format!("{}-{suffix}", self.ns);
        super::runner::create_namespace(self.target, &name, &self.run_id, labels).await?;
        self.namespaces.lock().unwrap().push(name.clone());
        Ok(name)
    }

    /// Creates a namespaced object in the scenario's namespace (removed with it).
    pub async fn create<K>(&self, obj: &K) -> Result<K, ScenarioError>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Serialize
            + std::fmt::Debug,
        <K as kube::Resource>::DynamicType: Default,
    {
        let name = obj.meta().name.clone().unwrap_or_default();
        Ok(self
            .api::<K>()
            .create(&PostParams::default(), obj)
            .await
            .doing(|| format!("creating {} {name}", K::kind(&Default::default())))?)
    }

    /// Creates a DeviceClass for this scenario; removed when the scenario ends, or by
    /// `cargo xtask cleanup` if the run is killed before.
    pub async fn create_class(&self, class: &DeviceClass) -> Result<(), ScenarioError> {
        let name = class.metadata.name.clone().unwrap_or_default();
        let api: Api<DeviceClass> = Api::all(self.client());
        let mut class = class.clone();
        super::runner::mark(&mut class.metadata, &self.run_id);
        api.create(&PostParams::default(), &class).await.doing(|| format!("creating DeviceClass {name}"))?;
        self.cluster_objects.lock().unwrap().push(ClusterObject::Class(name));
        Ok(())
    }

    /// Creates a DeviceTaintRule for this scenario; removed when the scenario ends, or by
    /// `cargo xtask cleanup` if the run is killed before (a rule left behind would keep its
    /// devices from every claim).
    pub async fn create_taint_rule(&self, rule: &DeviceTaintRule) -> Result<(), ScenarioError> {
        let name = rule.metadata.name.clone().unwrap_or_default();
        let api: Api<DeviceTaintRule> = Api::all(self.client());
        let mut rule = rule.clone();
        super::runner::mark(&mut rule.metadata, &self.run_id);
        api.create(&PostParams::default(), &rule).await.doing(|| format!("creating DeviceTaintRule {name}"))?;
        self.cluster_objects.lock().unwrap().push(ClusterObject::TaintRule(name));
        Ok(())
    }

    /// A pod of the scenario, pinned to its node.
    pub fn pod(&self, name: &str) -> PodBuilder {
        self.pod_in(&self.ns, name)
    }

    /// A pod in namespace `ns` (one of [`Ctx::other_namespace`]), pinned to the scenario's node.
    pub fn pod_in(&self, ns: &str, name: &str) -> PodBuilder {
        dracheck_objects::pod(ns, name).on_node(&self.node).image(&self.target.adapter.workload.image)
    }

    /// A pod that shows what its container sees (as the driver's adapter knows to read it)
    /// and stays up.
    pub fn workload(&self, name: &str) -> PodBuilder {
        self.workload_in(&self.ns, name)
    }

    /// [`Ctx::workload`] in namespace `ns`.
    pub fn workload_in(&self, ns: &str, name: &str) -> PodBuilder {
        self.pod_in(ns, name).command(&self.target.adapter.workload.show_and_wait())
    }

    /// A claim of the profile's shape.
    pub fn profile_claim(&self, name: &str) -> ResourceClaim {
        self.profile().claim().claim(&self.ns, name)
    }

    /// Polls `get` until `ok` holds (returns the value and how long it took) or `timeout`
    /// passes (returns the last value seen): at once, then after 100 ms, each pause half as
    /// long again as the last up to 1 s ([`poll_pauses`]). What settles at once is seen within
    /// a tenth of a second, and a long wait (a fault that never republishes waits out a
    /// minute) costs the API server a LIST a second instead of five. Only for what no watch
    /// gives: lists across objects, logs, a kubelet's files; objects are waited for with
    /// [`Ctx::wait_pod`] and [`Ctx::wait_claim`].
    pub async fn poll_until<T, F, Fut>(
        &self,
        timeout: Duration,
        mut get: F,
        ok: impl Fn(&T) -> bool,
    ) -> Result<(T, Duration), T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = T>,
    {
        let started = Instant::now();
        let mut pauses = poll_pauses();
        loop {
            let v = get().await;
            if ok(&v) {
                return Ok((v, started.elapsed()));
            }
            let elapsed = started.elapsed();
            if elapsed >= timeout {
                return Err(v);
            }
            // The last look is at the timeout, not up to a pause after it.
            let pause = pauses.next().expect("the pauses never end");
            tokio::time::sleep(pause.min(timeout - elapsed)).await;
        }
    }

    /// Waits, on the pod's watch, until `condition` holds for pod `name`.
    pub async fn wait_pod(
        &self,
        name: &str,
        condition: impl Condition<Pod> + Clone,
        timeout: Duration,
    ) -> Result<(Option<Pod>, Duration), wait::Expired<Pod>> {
        wait::until(&self.api::<Pod>(), name, condition, timeout).await
    }

    /// Waits, on the claim's watch, until `condition` holds for claim `name`.
    pub async fn wait_claim(
        &self,
        name: &str,
        condition: impl Condition<ResourceClaim> + Clone,
        timeout: Duration,
    ) -> Result<(Option<ResourceClaim>, Duration), wait::Expired<ResourceClaim>> {
        wait::until(&self.api::<ResourceClaim>(), name, condition, timeout).await
    }

    pub async fn get_pod(&self, name: &str) -> Option<Pod> {
        self.api::<Pod>().get_opt(name).await.ok().flatten()
    }

    pub async fn get_claim(&self, name: &str) -> Option<ResourceClaim> {
        self.api::<ResourceClaim>().get_opt(name).await.ok().flatten()
    }

    /// Waits for the pod's phase to become `phase`.
    pub async fn wait_phase(
        &self,
        pod: &str,
        phase: &'static str,
        timeout: Duration,
    ) -> Result<Duration, ScenarioError> {
        match self.wait_pod(pod, wait::conditions::pod_phase(phase), timeout).await {
            Ok((_, took)) => Ok(took),
            Err(e) => Err(ScenarioError::Timeout {
                what: format!("pod {pod} did not reach {phase}"),
                within: timeout,
                now: Some(wait::state_of(e.now.as_ref())),
            }),
        }
    }

    /// The scheduler's verdict on a pod: `Some((reason, message))` once PodScheduled=False.
    pub async fn unschedulable(&self, pod: &str) -> Option<(String, String)> {
        wait::unschedulable(self.get_pod(pod).await.as_ref())
    }

    /// Deletes a pod and waits until it is gone (the kubelet unprepared its claims).
    pub async fn delete_pod(&self, name: &str, timeout: Duration) -> Result<Duration, ScenarioError> {
        let _ = self.api::<Pod>().delete(name, &DeleteParams::default()).await;
        self.wait_pod(name, wait::conditions::gone(), timeout)
            .await
            .map(|(_, d)| d)
            .map_err(|_| ScenarioError::timeout(format!("pod {name} was not gone after its deletion"), timeout))
    }

    /// The devices allocated to a claim: `(driver, pool, device)`.
    pub fn allocated(claim: &ResourceClaim) -> Vec<(String, String, String)> {
        Ctx::allocation_results(claim).map(|r| (r.driver.clone(), r.pool.clone(), r.device.clone())).collect()
    }

    /// The results of `claim`'s allocation, of every driver; none where it is not allocated.
    pub fn allocation_results(claim: &ResourceClaim) -> impl Iterator<Item = &DeviceRequestAllocationResult> {
        let allocation = claim.status.as_ref().and_then(|s| s.allocation.as_ref());
        allocation.and_then(|a| a.devices.as_ref()).and_then(|d| d.results.as_ref()).into_iter().flatten()
    }

    /// The driver's devices on `node` as its inventory oracle states them, else as published.
    pub async fn node_devices(&self, node: &str) -> Result<Vec<Device>, ScenarioError> {
        if let Some(oracle) = &self.target.adapter.oracle {
            return Ok(oracle(node)?);
        }
        Ok(self.slices_of(node).await.into_iter().flat_map(|s| s.spec.devices.unwrap_or_default()).collect())
    }

    /// The driver's slices of `node`.
    pub async fn slices_of(&self, node: &str) -> Vec<ResourceSlice> {
        let api: Api<ResourceSlice> = Api::all(self.client());
        let lp = ListParams::default().fields(&format!("spec.nodeName={node},spec.driver={}", self.target.driver.name));
        api.list(&lp).await.map(|l| l.items).unwrap_or_default()
    }

    /// Evidence about a pod: its status, its claims, its events, and the logs of the
    /// kubelet and driver on its node.
    pub async fn evidence(&self, pod: &str) -> Vec<Evidence> {
        let mut out = Vec::new();
        let yaml = |v: &dyn erased::Ser| v.to_yaml();
        if let Some(p) = self.get_pod(pod).await {
            out.push(Evidence { title: format!("pod {}/{pod} status", self.ns), body: yaml(&p.status) });
            let claim_names: Vec<String> = p
                .status
                .as_ref()
                .and_then(|s| s.resource_claim_statuses.as_ref())
                .map(|all| all.iter().filter_map(|s| s.resource_claim_name.clone()).collect())
                .unwrap_or_default();
            let direct: Vec<String> = p
                .spec
                .as_ref()
                .and_then(|s| s.resource_claims.as_ref())
                .map(|all| all.iter().filter_map(|c| c.resource_claim_name.clone()).collect())
                .unwrap_or_default();
            for name in claim_names.into_iter().chain(direct) {
                if let Some(c) = self.get_claim(&name).await {
                    out.push(Evidence {
                        title: format!("claim {}/{name}", self.ns),
                        body: yaml(&(&c.spec, &c.status)),
                    });
                }
            }
        }
        let events: Api<Event> = Api::namespaced(self.client(), &self.ns);
        let lp = ListParams::default().fields(&format!("involvedObject.name={pod}"));
        if let Ok(list) = events.list(&lp).await {
            let lines: Vec<String> = list
                .items
                .iter()
                .map(|e| {
                    format!(
                        "{} {} {}: {}",
                        e.type_.as_deref().unwrap_or_default(),
                        e.source.as_ref().and_then(|s| s.component.as_deref()).unwrap_or_default(),
                        e.reason.as_deref().unwrap_or_default(),
                        e.message.as_deref().unwrap_or_default()
                    )
                })
                .collect();
            out.push(Evidence { title: format!("events of pod {pod}"), body: lines.join("\n") });
        }
        out.extend(self.target.node_logs(&self.node, 20).await);
        out
    }
}

/// YAML for evidence bodies, from anything serializable.
mod erased {
    pub trait Ser {
        fn to_yaml(&self) -> String;
    }
    impl<T: serde::Serialize> Ser for T {
        fn to_yaml(&self) -> String {
            serde_saphyr::to_string(self).unwrap_or_else(|e| format!("(not serializable: {e})"))
        }
    }
}

/// The pauses of [`Ctx::poll_until`]: 100 ms, then each half as long again, at most 1 s.
pub fn poll_pauses() -> impl Iterator<Item = Duration> {
    std::iter::successors(Some(Duration::from_millis(100)), |p| Some((*p * 3 / 2).min(Duration::from_secs(1))))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn polls_start_quick_and_settle_at_a_second() {
        let ms: Vec<u128> = super::poll_pauses().take(9).map(|d| d.as_millis()).collect();
        assert_eq!(ms, [100, 150, 225, 337, 506, 759, 1000, 1000, 1000]);
        // A minute's wait: about 60 looks, not the 300 a fixed 200 ms gave.
        let mut spent = Duration::ZERO;
        let looks = super::poll_pauses().take_while(|p| {
            spent += *p;
            spent < Duration::from_secs(60)
        });
        assert_eq!(looks.count(), 63);
    }
}
