//! The pod worker: for each pod bound to this node, prepare its claims, start its containers
//! with the CDI environment, report status, and unprepare the claims once the pod's containers
//! have all ended or the pod is deleted, whichever comes first, as kubelet's
//! `SyncTerminatingPod` does: before a terminal phase is reported, and before the pod object
//! may go (deletion waits while unprepare fails). The status carries the health of each
//! container's devices (`allocatedResourcesStatus`), read when the kubelet would sync the pod:
//! when its containers change, at its periodic resync, and at once for the pods using a device
//! whose health changed.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Container, Pod, ResourceStatus};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::{WatchStreamExt as _, reflector, watcher};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::config::NodeConfig;
use super::dra::{ClaimSource, DraManager, PodClaim, PreparedDevice};
use super::events::Log;
use super::health::HealthCache;
use super::health::status::allocated_resources_status;
use super::logs::PodIndex;
use super::runtime::{ContainerSpec, ContainerStatus, POD_INITIALIZING, Runtime, State};

/// When the kubelet syncs a pod again after a failed start (`pod_workers.go` completeWork).
/// A sync that returned an error (a container that could not be created) is requeued after the
/// back-off period, 10 s. A failed NodePrepareResources is not such an error: kuberuntime's
/// SyncPod records an event and returns without one, so the pod waits for the regular resync,
/// the kubelet's `syncFrequency` of 1 min. Both are jittered by up to half again.
const SYNC_ERROR_RETRY: Duration = Duration::from_secs(10);
const RESYNC: Duration = Duration::from_secs(60);

/// The kubelet's wait before it syncs a pod again whose start failed for `reason`.
fn retry_after(reason: &str) -> Duration {
    if reason == PREPARE_FAILED { RESYNC } else { SYNC_ERROR_RETRY }
}

/// How long after its start the kubelet first syncs its pods. Measured on the real kubelet
/// (v1.37, a node reboot): its plugin watcher registers a driver's socket within 0.1 s, its
/// first "SyncLoop ADD" comes 1 s after start (the sync loop waits for the runtime's first
/// status and the pod source's first list). A driver started with its node is therefore
/// registered before the kubelet prepares anything; a prepare before that would fail and, as
/// above, wait a whole resync.
const FIRST_SYNC_DELAY: Duration = Duration::from_secs(1);

/// `base` stretched by a random fraction of up to half of it, as `wait.Jitter(base, 0.5)`.
fn jittered(base: Duration) -> Duration {
    use std::hash::BuildHasher as _;
    let random = std::collections::hash_map::RandomState::new().hash_one(Instant::now());
    base + base.mul_f64(0.5 * (random % 1000) as f64 / 1000.0)
}

/// The event reason of a failed prepare, as the kubelet's.
const PREPARE_FAILED: &str = "FailedPrepareDynamicResources";

#[derive(Default)]
struct Progress {
    next_try: Option<Instant>,
    last_event: Option<String>,
    last_status: Option<String>,
    /// The claims were unprepared after the containers ended (or there was nothing to do).
    unprepared: bool,
    /// Started or taken over by this kubelet instance; false for a pod whose containers run
    /// on from before a restart until its first sync logs where its claims came from.
    known: bool,
    /// The containers' `allocatedResourcesStatus` as last read, by container name.
    allocated: BTreeMap<String, Vec<ResourceStatus>>,
    /// The containers' states when `allocated` was read: a change is a sync (PLEG's event).
    allocated_for: Option<String>,
    /// When the pod's resync reads `allocated` again.
    allocated_resync: Option<Instant>,
    /// A device of the pod changed its health since `allocated` was read.
    health_changed: bool,
}

pub struct PodWorker {
    pub client: kube::Client,
    pub cfg: NodeConfig,
    pub runtime: Arc<Runtime>,
    pub dra: Arc<DraManager>,
    pub health: Arc<HealthCache>,
    pub log: Log,
    pub index: PodIndex,
}

impl PodWorker {
    pub async fn run(self, stop: CancellationToken) {
        let mut progress: HashMap<String, Progress> = HashMap::new();
        // A watch keeps a local copy of the node's pods, so that the sync loop below polls
        // containers often without asking the apiserver each time.
        let pods: Api<Pod> = Api::all(self.client.clone());
        let config = watcher::Config::default().fields(&format!("spec.nodeName={}", self.cfg.name));
        let (store, writer) = reflector::store();
        let feed = reflector(writer, watcher(pods, config)).default_backoff().for_each(|_| futures::future::ready(()));
        let feed = tokio::spawn(feed);
        tokio::select! {
            _ = stop.cancelled() => {
                feed.abort();
                return;
            }
            // Until the first list arrives, an empty store would look like "all pods gone".
            _ = async {
                store.wait_until_ready().await.ok();
                tokio::time::sleep(FIRST_SYNC_DELAY).await;
            } => {}
        }
        loop {
            let pods = store.state();
            let seen: Vec<String> = pods.iter().filter_map(|p| p.metadata.uid.clone()).collect();
            self.take_health_changes(&pods, &mut progress).await;
            for pod in &pods {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                let p = progress.entry(uid).or_default();
                self.sync(pod, p).await;
            }
            self.forget_vanished(&seen, &mut progress).await;
            tokio::select! {
                _ = stop.cancelled() => {
                    feed.abort();
                    return;
                }
                _ = tokio::time::sleep(Duration::from_millis(300)) => {}
            }
        }
    }

    /// Devices whose health changed: the pods using them are synced at once rather than at
    /// their next resync, as upstream's DRA manager sends their UIDs through `Updates()` and
    /// the sync loop syncs them (`HandlePodSyncs`). Pods no longer bound here are left out.
    async fn take_health_changes(&self, pods: &[Arc<Pod>], progress: &mut HashMap<String, Progress>) {
        let changed = self.health.take_changed();
        if changed.is_empty() {
            return;
        }
        let mut synced = Vec::new();
        for uid in self.dra.pods_using(&changed).await {
            let Some(pod) = pods.iter().find(|p| p.metadata.uid.as_deref() == Some(uid.as_str())) else { continue };
            progress.entry(uid).or_default().health_changed = true;
            let meta = &pod.metadata;
            synced.push(format!(
                "{}/{}",
                meta.namespace.as_deref().unwrap_or_default(),
                meta.name.as_deref().unwrap_or_default()
            ));
        }
        if !synced.is_empty() {
            self.log.info(format!("device health changed; syncing the status of {}", synced.join(", ")));
        }
    }

    /// The containers' `allocatedResourcesStatus` as it stands (ResourceHealthStatus and its
    /// message, both beta and on by default in 1.37).
    async fn allocated_resources(&self, pod: &Pod) -> BTreeMap<String, Vec<ResourceStatus>> {
        let prepared = self.dra.claim_devices(pod.metadata.namespace.as_deref().unwrap_or_default()).await;
        allocated_resources_status(pod, &prepared, |driver, pool, device| self.health.read(driver, pool, device))
    }

    /// Pods removed from the API without us (force deletion): stop and unprepare them too.
    /// That includes pods only the checkpoint still names, removed while no kubelet ran, as
    /// kubelet's reconcile loop unprepares the claims of pods that are no longer active.
    async fn forget_vanished(&self, seen: &[String], progress: &mut HashMap<String, Progress>) {
        let mut gone: Vec<String> = progress.keys().filter(|u| !seen.contains(u)).cloned().collect();
        for uid in self.dra.pods().await {
            if !seen.contains(&uid) && !gone.contains(&uid) {
                gone.push(uid);
            }
        }
        for uid in gone {
            self.kill(&uid, Duration::from_secs(2)).await;
            match self.dra.unprepare_pod(&uid).await {
                Ok(()) => {
                    progress.remove(&uid);
                    self.runtime.remove_pod_dir(&uid);
                    self.index.lock().unwrap().retain(|_, v| *v != uid);
                }
                Err(e) => {
                    // Tried again on every pass; said once per distinct error.
                    let p = progress.entry(uid.clone()).or_default();
                    let key = format!("FailedUnprepareDynamicResources: {e}");
                    if p.last_event.as_deref() != Some(&key) {
                        self.log.warn("FailedUnprepareDynamicResources", format!("force-deleted pod {uid}: {e}"));
                        p.last_event = Some(key);
                    }
                }
            }
        }
    }

    async fn kill(&self, uid: &str, grace: Duration) {
        let (rt, uid) = (self.runtime.clone(), uid.to_string());
        let _ = tokio::task::spawn_blocking(move || rt.kill_pod(&uid, grace)).await;
    }

    async fn event(&self, pod: &Pod, p: &mut Progress, warning: bool, reason: &str, message: &str) {
        let key = format!("{reason}: {message}");
        if p.last_event.as_deref() != Some(&key) {
            self.log.pod_event(&self.client, pod, warning, reason, message).await;
            p.last_event = Some(key);
        }
    }

    async fn sync(&self, pod: &Pod, p: &mut Progress) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        self.index.lock().unwrap().insert((ns.clone(), name.clone()), uid.clone());
        let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
        let restart_policy =
            pod.spec.as_ref().and_then(|s| s.restart_policy.clone()).unwrap_or_else(|| "Always".into());

        if pod.metadata.deletion_timestamp.is_some() {
            let grace = pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds).unwrap_or(30);
            self.kill(&uid, Duration::from_secs(grace.clamp(1, 30) as u64)).await;
            // Nothing to do for claims already unprepared when the containers ended: the
            // checkpoint no longer names the pod.
            if let Err(e) = self.dra.unprepare_pod(&uid).await {
                self.event(pod, p, true, "FailedUnprepareDynamicResources", &e).await;
                return;
            }
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
            let dp = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions { uid: Some(uid.clone()), resource_version: None }),
                ..DeleteParams::default()
            };
            match pods.delete(&name, &dp).await {
                Ok(_) => self.log.info(format!("pod {ns}/{name} stopped, unprepared and removed")),
                // The local copy lags behind: already removed (or replaced) is done.
                Err(kube::Error::Api(e)) if e.is_not_found() || e.is_conflict() => {}
                Err(e) => self.log.warn("FailedDelete", format!("{ns}/{name}: {e}")),
            }
            return;
        }

        if phase == "Succeeded" || phase == "Failed" {
            // Reported terminal only after the unprepare below, so normally nothing is left;
            // a phase that someone else set still releases what the checkpoint holds.
            if !p.unprepared {
                match self.dra.unprepare_pod(&uid).await {
                    Ok(()) => p.unprepared = true,
                    Err(e) => self.event(pod, p, true, "FailedUnprepareDynamicResources", &e).await,
                }
            }
            return;
        }

        if self.runtime.has_pod(&uid) {
            if !p.known {
                // Running on from before a kubelet restart. Kubelet prepares claims only before
                // it creates a pod's sandbox, so the claims stay as the checkpoint has them
                // and the driver is not called.
                p.known = true;
                let claims = self.dra.claims_of(&uid).await;
                if !claims.is_empty() {
                    self.log.info(format!(
                        "claims taken from the checkpoint, not prepared again: {ns}/{name} ({})",
                        claims.join(", ")
                    ));
                }
            }
            let statuses = self.runtime.poll(&uid, &restart_policy);
            if !p.unprepared && all_ended(&statuses) {
                let claims = self.dra.claims_of(&uid).await;
                match self.dra.unprepare_pod(&uid).await {
                    Ok(()) => {
                        p.unprepared = true;
                        if !claims.is_empty() {
                            self.log.info(format!(
                                "containers of {ns}/{name} ended; its claims are released ({})",
                                claims.join(", ")
                            ));
                        }
                    }
                    Err(e) => self.event(pod, p, true, "FailedUnprepareDynamicResources", &e).await,
                }
            }
            self.report(pod, p, &statuses).await;
            return;
        }

        if restart_policy == "Never" && started_before(pod) {
            // Its containers were lost with the node's runtime (a reboot). Kubelet does not
            // start a pod of restartPolicy Never again: containerd reports the containers whose
            // task vanished as exited with 255, and the pod fails once its claims are
            // unprepared.
            if !p.unprepared {
                match self.dra.unprepare_pod(&uid).await {
                    Ok(()) => p.unprepared = true,
                    Err(e) => {
                        self.event(pod, p, true, "FailedUnprepareDynamicResources", &e).await;
                        return;
                    }
                }
            }
            let now = dracheck_objects::now();
            let lost: Vec<ContainerStatus> = pod
                .spec
                .iter()
                .flat_map(|s| s.containers.iter())
                .map(|c| ContainerStatus {
                    name: c.name.clone(),
                    state: State::Terminated { exit_code: LOST_EXIT_CODE, started_at: now, finished_at: now },
                    restart_count: 0,
                    last_exit_code: None,
                })
                .collect();
            self.report(pod, p, &lost).await;
            return;
        }

        if p.next_try.is_some_and(|t| Instant::now() < t) {
            return;
        }
        match self.start(pod).await {
            Ok(()) => {
                p.known = true;
                p.next_try = None;
                self.event(pod, p, false, "Started", "started the pod's containers").await;
                let statuses = self.runtime.poll(&uid, &restart_policy);
                self.report(pod, p, &statuses).await;
            }
            Err((reason, message)) => {
                self.event(pod, p, true, reason, &message).await;
                if reason == "Failed" && started_before(pod) {
                    self.report_waiting(pod, "CreateContainerError", &message).await;
                }
                p.next_try = Some(Instant::now() + jittered(retry_after(reason)));
            }
        }
    }

    /// Prepare, resolve CDI, start. The error is an event's reason and message.
    async fn start(&self, pod: &Pod) -> Result<(), (&'static str, String)> {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let claims = self.dra.prepare_pod(pod).await.map_err(|e| (PREPARE_FAILED, e))?;
        let spec = pod.spec.clone().unwrap_or_default();
        let init =
            self.container_specs(pod, spec.init_containers.iter().flatten(), &claims).map_err(|e| ("Failed", e))?;
        let specs = self.container_specs(pod, &spec.containers, &claims).map_err(|e| ("Failed", e))?;
        self.runtime.start_pod(&uid, init, specs).map_err(|e| ("Failed", format!("Error: {e}")))
    }

    fn container_specs<'c>(
        &self,
        pod: &Pod,
        containers: impl IntoIterator<Item = &'c Container>,
        claims: &[PodClaim],
    ) -> Result<Vec<ContainerSpec>, String> {
        let mut out = Vec::new();
        for c in containers {
            let env = super::env::environment(pod, c, &self.cfg.name, &self.cfg.ip.to_string())?;
            let argv: Vec<String> =
                c.command.iter().chain(c.args.iter()).flatten().map(|a| super::env::expand(a, &env)).collect();
            if argv.is_empty() {
                return Err(format!(
                    "Error: container {} has no command; emulated nodes run the command on the host and know no image entrypoints",
                    c.name
                ));
            }
            let cdi_devices = container_cdi_devices(pod, c, claims);
            out.push(ContainerSpec { name: c.name.clone(), argv, env, cdi_devices });
        }
        Ok(out)
    }

    /// A pod whose containers ran before and cannot be created again (after a reboot): its
    /// containers wait with the runtime's error, as kubelet reports them, not running on.
    async fn report_waiting(&self, pod: &Pod, reason: &str, message: &str) {
        let allocated = self.allocated_resources(pod).await;
        let containers = pod.spec.iter().flat_map(|s| s.containers.iter());
        let statuses: Vec<_> = containers
            .map(|c| {
                let mut status = json!({
                    "name": c.name,
                    "image": c.image.clone().unwrap_or_default(),
                    "imageID": "",
                    "ready": false,
                    "started": false,
                    "restartCount": 0,
                    "state": { "waiting": { "reason": reason, "message": message } },
                });
                with_allocated(&mut status, allocated.get(&c.name));
                status
            })
            .collect();
        let now = dracheck_objects::now().to_string();
        let unready = |t: &str| json!({ "type": t, "status": "False", "lastTransitionTime": now });
        let patch = json!({ "status": {
            "containerStatuses": statuses,
            "conditions": [unready("ContainersReady"), unready("Ready")],
        }});
        self.patch_status(pod, &patch).await;
    }

    /// Writes the pod's status from the containers' states, when it changed.
    async fn report(&self, pod: &Pod, p: &mut Progress, statuses: &[ContainerStatus]) {
        let all_done = all_ended(statuses);
        let failed = statuses.iter().any(|s| matches!(s.state, State::Terminated { exit_code, .. } if exit_code != 0));
        let initializing =
            statuses.iter().any(|s| matches!(&s.state, State::Waiting { reason, .. } if reason == POD_INITIALIZING));
        let phase = match (all_done, failed) {
            (false, _) if initializing => "Pending",
            (false, _) => "Running",
            (true, false) => "Succeeded",
            (true, true) => "Failed",
        };
        let init = self.runtime.init_statuses(pod.metadata.uid.as_deref().unwrap_or_default());
        // Kubelet holds a terminal phase back while the pod may still hold resources
        // (`mergePodStatus`): controllers deallocate a claim once its pods are terminal, so
        // the phase stays as it was until the claims are unprepared.
        let current = pod.status.as_ref().and_then(|s| s.phase.clone()).filter(|p| !p.is_empty());
        let phase = if all_done && !p.unprepared { current.as_deref().unwrap_or("Pending") } else { phase };
        let containers = format!(
            "{phase} {:?}",
            init.iter().chain(statuses).map(|s| (&s.name, &s.state, s.restart_count)).collect::<Vec<_>>()
        );
        // Device health is read when the kubelet would sync the pod, not on every pass: a
        // report that timed out shows at the pod's next sync, as upstream.
        let resync_due = p.allocated_resync.is_none_or(|t| Instant::now() >= t);
        if p.health_changed || resync_due || p.allocated_for.as_deref() != Some(&containers) {
            p.allocated = self.allocated_resources(pod).await;
            p.allocated_for = Some(containers.clone());
            p.allocated_resync = Some(Instant::now() + jittered(RESYNC));
            p.health_changed = false;
        }
        let summary = format!("{containers} {:?}", p.allocated);
        if p.last_status.as_deref() == Some(&summary) {
            return;
        }
        let ip = self.cfg.ip.to_string();
        let all_running = !statuses.is_empty() && statuses.iter().all(|s| matches!(s.state, State::Running { .. }));
        let ready = if all_running { "True" } else { "False" };
        let container_statuses: Vec<_> = statuses
            .iter()
            .map(|s| {
                let mut status = status_json(pod, s);
                with_allocated(&mut status, p.allocated.get(&s.name));
                status
            })
            .collect();
        // Upstream reports device health for regular containers only.
        let init_statuses: Vec<_> = init.iter().map(|s| status_json(pod, s)).collect();
        let now = dracheck_objects::now().to_string();
        let cond = |t: &str, status: &str| json!({ "type": t, "status": status, "lastTransitionTime": now });
        let patch = json!({ "status": {
            "phase": phase,
            "hostIP": ip, "hostIPs": [{ "ip": ip }],
            "podIP": ip, "podIPs": [{ "ip": ip }],
            "startTime": pod.status.as_ref().and_then(|s| s.start_time.as_ref()).map_or(now.clone(), |t| t.0.to_string()),
            "conditions": [
                cond("PodReadyToStartContainers", "True"),
                cond("Initialized", if initializing { "False" } else { "True" }),
                cond("ContainersReady", ready),
                cond("Ready", ready),
            ],
            "containerStatuses": container_statuses,
            "initContainerStatuses": init_statuses,
        }});
        if self.patch_status(pod, &patch).await {
            p.last_status = Some(summary);
        }
    }

    /// Patches the pod's status; a failure is logged (the next sync writes it again).
    async fn patch_status(&self, pod: &Pod, patch: &serde_json::Value) -> bool {
        let pods: Api<Pod> =
            Api::namespaced(self.client.clone(), pod.metadata.namespace.as_deref().unwrap_or_default());
        let name = pod.metadata.name.clone().unwrap_or_default();
        match pods.patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch)).await {
            Ok(_) => true,
            Err(e) => {
                self.log.warn("StatusUpdateFailed", format!("{name}: {e}"));
                false
            }
        }
    }
}

/// The CDI device IDs `container` gets from the pod's prepared `claims` (upstream
/// `GetResources`): of each claim the container names in `resources.claims`, the devices of the
/// request it names (all where it names none); then, of the extended-resource claim, the devices
/// of each request the pod's request mappings give the container for the extended resources it
/// asks for, as `cdiDevicesAsList` picks them.
fn container_cdi_devices(pod: &Pod, container: &Container, claims: &[PodClaim]) -> Vec<String> {
    let mut ids = Vec::new();
    for used in container.resources.as_ref().and_then(|r| r.claims.as_ref()).into_iter().flatten() {
        let source = ClaimSource::Spec(used.name.clone());
        let Some(claim) = claims.iter().find(|pc| pc.source == source) else { continue };
        for d in &claim.devices {
            if used.request.as_ref().is_none_or(|r| d.request_names.iter().any(|n| n == r)) {
                ids.extend(d.cdi_device_ids.iter().cloned());
            }
        }
    }
    let extended = claims.iter().find(|pc| pc.source == ClaimSource::ExtendedResources);
    if let Some(claim) = extended {
        for request in super::extended::requests_for(pod, container) {
            ids.extend(cdi_devices_as_list(&claim.devices, &request));
        }
    }
    ids
}

/// The CDI device IDs of `devices` for `request` (upstream `cdiDevicesAsList`): those of the
/// devices whose prepare answer lists the request, or lists no request at all; every device's
/// for an empty request.
fn cdi_devices_as_list<'d>(devices: &'d [PreparedDevice], request: &'d str) -> impl Iterator<Item = String> + 'd {
    devices
        .iter()
        .filter(move |d| {
            request.is_empty() || d.request_names.is_empty() || d.request_names.iter().any(|n| n == request)
        })
        .flat_map(|d| d.cdi_device_ids.iter().cloned())
}

/// A container's status as the API has it; init containers' images come from `initContainers`.
fn status_json(pod: &Pod, s: &ContainerStatus) -> serde_json::Value {
    let state = match &s.state {
        State::Running { started_at } => json!({ "running": { "startedAt": started_at.to_string() } }),
        State::Waiting { reason, message } => json!({ "waiting": { "reason": reason, "message": message } }),
        State::Terminated { exit_code, started_at, finished_at } => json!({ "terminated": {
            "exitCode": exit_code,
            "reason": if *exit_code == 0 { "Completed" } else { "Error" },
            "startedAt": started_at.to_string(),
            "finishedAt": finished_at.to_string(),
        }}),
    };
    let spec = pod.spec.as_ref();
    let image = spec
        .into_iter()
        .flat_map(|sp| sp.containers.iter().chain(sp.init_containers.iter().flatten()))
        .find(|c| c.name == s.name)
        .and_then(|c| c.image.clone())
        .unwrap_or_default();
    json!({
        "name": s.name,
        "image": image,
        "imageID": "",
        "containerID": format!("dracheck://{}", s.name),
        "ready": matches!(s.state, State::Running { .. }),
        "started": matches!(s.state, State::Running { .. }),
        "restartCount": s.restart_count,
        "state": state,
        "lastState": s.last_exit_code.map_or(json!({}), |code| json!({ "terminated": { "exitCode": code } })),
    })
}

/// Adds a container's `allocatedResourcesStatus` to its status, where it has entries (the
/// kubelet leaves the field out otherwise; the list replaces the old one, as containerStatuses
/// is patched whole).
fn with_allocated(status: &mut serde_json::Value, allocated: Option<&Vec<ResourceStatus>>) {
    if let Some(entries) = allocated.filter(|e| !e.is_empty()) {
        status["allocatedResourcesStatus"] = serde_json::to_value(entries).expect("serializes");
    }
}

/// The exit code containerd reports for a container whose task vanished with the machine.
const LOST_EXIT_CODE: i32 = 255;

/// The pod's containers were started before, by an earlier kubelet of this node: its status
/// shows them running or ended.
fn started_before(pod: &Pod) -> bool {
    let statuses = pod.status.as_ref().and_then(|s| s.container_statuses.as_ref());
    statuses
        .into_iter()
        .flatten()
        .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some() || s.terminated.is_some()))
}

/// Every container has ended and none will restart (the runtime restarts those whose
/// `restartPolicy` says so before it reports them).
fn all_ended(statuses: &[ContainerStatus]) -> bool {
    !statuses.is_empty() && statuses.iter().all(|s| matches!(s.state, State::Terminated { .. }))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{
        ContainerExtendedResourceRequest, PodExtendedResourceClaimStatus, PodStatus, ResourceClaim as ContainerClaim,
        ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use super::*;

    fn device(name: &str, requests: &[&str], cdi: &[&str]) -> PreparedDevice {
        PreparedDevice {
            pool_name: "node-1".into(),
            device_name: name.into(),
            request_names: requests.iter().map(|s| s.to_string()).collect(),
            cdi_device_ids: cdi.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// A container naming `claims` (pod claim, request) and asking for `extended` resources in
    /// its limits, one of each.
    fn container(name: &str, claims: &[(&str, Option<&str>)], extended: &[&str]) -> Container {
        let claims = claims.iter().map(|(n, r)| ContainerClaim { name: n.to_string(), request: r.map(Into::into) });
        let limits: BTreeMap<String, Quantity> =
            extended.iter().map(|r| (r.to_string(), Quantity("1".into()))).collect();
        Container {
            name: name.into(),
            resources: Some(ResourceRequirements {
                claims: Some(claims.collect()).filter(|c: &Vec<_>| !c.is_empty()),
                limits: Some(limits).filter(|l| !l.is_empty()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The scheduler's status: `main` got `dracheck.io/gpu` from request `container-0-request-0`
    /// and `dracheck.io/nic` from `container-0-request-1`, `sidecar` `dracheck.io/gpu` from
    /// `container-1-request-0`.
    fn pod() -> Pod {
        let mapping = |container: &str, resource: &str, request: &str| ContainerExtendedResourceRequest {
            container_name: container.into(),
            resource_name: resource.into(),
            request_name: request.into(),
        };
        Pod {
            status: Some(PodStatus {
                extended_resource_claim_status: Some(PodExtendedResourceClaimStatus {
                    resource_claim_name: "pod-extended-resources-k2".into(),
                    request_mappings: vec![
                        mapping("main", "dracheck.io/gpu", "container-0-request-0"),
                        mapping("sidecar", "dracheck.io/gpu", "container-1-request-0"),
                        mapping("main", "dracheck.io/nic", "container-0-request-1"),
                    ],
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn claims() -> Vec<PodClaim> {
        vec![
            PodClaim {
                source: ClaimSource::Spec("gpu".into()),
                devices: vec![device("gpu-0", &["big"], &["cdi/gpu=0"]), device("gpu-1", &["small"], &["cdi/gpu=1"])],
            },
            PodClaim {
                source: ClaimSource::ExtendedResources,
                devices: vec![
                    device("gpu-2", &["container-0-request-0"], &["cdi/gpu=2", "cdi/common"]),
                    device("gpu-3", &["container-1-request-0"], &["cdi/gpu=3"]),
                    device("nic-0", &["container-0-request-1"], &["cdi/nic=0"]),
                ],
            },
        ]
    }

    #[test]
    fn a_container_gets_the_devices_of_the_claims_and_requests_it_names() {
        let (p, claims) = (pod(), claims());
        let ids = |c: &Container| container_cdi_devices(&p, c, &claims);
        assert_eq!(ids(&container("other", &[("gpu", None)], &[])), ["cdi/gpu=0", "cdi/gpu=1"]);
        assert_eq!(ids(&container("other", &[("gpu", Some("small"))], &[])), ["cdi/gpu=1"]);
        // A claim the pod has not prepared (a template's the controller did not generate).
        assert!(ids(&container("other", &[("absent", None)], &[])).is_empty());
        assert!(ids(&container("other", &[], &[])).is_empty());
    }

    #[test]
    fn a_container_gets_the_extended_resource_claim_s_devices_of_the_requests_mapped_to_it() {
        let (p, claims) = (pod(), claims());
        let ids = |c: &Container| container_cdi_devices(&p, c, &claims);
        assert_eq!(
            ids(&container("main", &[], &["dracheck.io/gpu", "dracheck.io/nic"])),
            ["cdi/gpu=2", "cdi/common", "cdi/nic=0"]
        );
        assert_eq!(ids(&container("sidecar", &[], &["dracheck.io/gpu"])), ["cdi/gpu=3"]);
        // Its spec's claims first, then the extended resources'.
        assert_eq!(ids(&container("main", &[("gpu", Some("big"))], &["dracheck.io/nic"])), ["cdi/gpu=0", "cdi/nic=0"]);
        // Mapped to it, but not asked for; asked for, but mapped to another container.
        assert!(ids(&container("main", &[], &[])).is_empty());
        assert!(ids(&container("other", &[], &["dracheck.io/gpu"])).is_empty());
        // Without the claim prepared (no status yet), nothing from it.
        let ordinary = &claims[..1];
        assert!(container_cdi_devices(&p, &container("main", &[], &["dracheck.io/gpu"]), ordinary).is_empty());
    }

    #[test]
    fn a_device_that_names_no_request_serves_every_request_of_the_extended_resource_claim() {
        let devices = [device("gpu-0", &[], &["cdi/all"]), device("gpu-1", &["r1"], &["cdi/r1"])];
        let list = |request: &str| cdi_devices_as_list(&devices, request).collect::<Vec<_>>();
        assert_eq!(list("r1"), ["cdi/all", "cdi/r1"]);
        assert_eq!(list("r2"), ["cdi/all"]);
        assert_eq!(list(""), ["cdi/all", "cdi/r1"]);
    }

    #[test]
    fn a_failed_prepare_waits_for_the_resync_and_a_failed_container_for_the_back_off() {
        for _ in 0..50 {
            let prepare = jittered(retry_after(PREPARE_FAILED));
            assert!((Duration::from_secs(60)..=Duration::from_secs(90)).contains(&prepare), "{prepare:?}");
            let create = jittered(retry_after("Failed"));
            assert!((Duration::from_secs(10)..=Duration::from_secs(15)).contains(&create), "{create:?}");
        }
        let spread: std::collections::BTreeSet<Duration> = (0..20).map(|_| jittered(RESYNC)).collect();
        assert!(spread.len() > 1, "the retries of several pods must not all fall at once: {spread:?}");
    }
}
