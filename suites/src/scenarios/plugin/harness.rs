//! The suite as kubelet: a Node object of its own (tainted, so the scheduler never uses it),
//! one instance of the driver on that node's dirs, and the kubelet's side of the sockets.
//! Claims are allocated by hand, as the node e2e tests do, so that only the driver is tested.

use std::collections::BTreeMap;
use std::time::Duration;

use dracheck_clusters::local::node::cdi;
use dracheck_clusters::local::{DriverInstance, Lifetime, NodeConfig};
use dracheck_kubelet_api::kubelet::{self, CallError, ClaimOutcome, DraClient};
use dracheck_kubelet_api::registration::registration_client::RegistrationClient;
use dracheck_kubelet_api::registration::{InfoRequest, PluginInfo, RegistrationStatus};
use dracheck_kubelet_api::{connect_unix_as_plugin_watcher, dra_v1};
use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

use crate::engine::target::{PLUGIN_TIER_LABEL, PluginAccess};
use crate::engine::{ApiContext, ApiError, Ctx};
use crate::result::Evidence;
use dracheck_clusters::ClusterError;
use dracheck_kubelet_api::SocketError;

/// A kubelet gives up on a call after 45 s; the suite waits less so that a hanging driver
/// fails its check instead of stalling the run.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the plugin tier cannot run against a driver installed in the cluster.
pub const NEEDS_BINARY: &str = "the plugin tier starts its own driver instances, which needs the driver's binary; this driver was installed in the cluster";

pub struct PluginNode {
    pub name: String,
    pub uid: String,
    pub cfg: NodeConfig,
    pub driver_name: String,
    driver: DriverInstance,
    client: kube::Client,
    ns: String,
    /// The CDI devices the driver defined before any claim: node-wide ones (dra-example-driver's
    /// `common` device, which every claim gets), not state of a claim.
    node_wide_cdi: std::collections::BTreeSet<String>,
}

pub type Claim = dra_v1::Claim;

/// The DeviceClass the plugin tier's claims name: the suite allocates them by hand, so it
/// need not exist.
pub const PLUGIN_TIER_CLASS: &str = "dracheck-plugin-tier";

/// One allocation result the suite writes into a claim's status.
pub struct Allocated<'a> {
    pub request: &'a str,
    pub driver: &'a str,
    pub pool: &'a str,
    pub device: &'a str,
    /// A share of a device that allows multiple allocations: its `shareID` and
    /// `consumedCapacity`.
    pub share: Option<(&'a str, &'a BTreeMap<String, String>)>,
}

impl PluginNode {
    /// `None` when the target gives no access to the driver binary.
    pub fn access<'a>(ctx: &'a Ctx<'_>) -> Option<&'a PluginAccess> {
        ctx.target.plugin.as_ref()
    }

    pub async fn start(ctx: &Ctx<'_>, access: &PluginAccess) -> Result<PluginNode, HarnessError> {
        let name = format!("dracheck-plugin-{}", ctx.ns.rsplit('-').next().unwrap_or("x"))
            + "-"
            + &ctx.scenario.replace('_', "-");
        let client = ctx.client();
        let mut node = dracheck_objects::node(&name, "127.0.10.250");
        node.metadata.labels.get_or_insert_default().insert(PLUGIN_TIER_LABEL.into(), "true".into());
        node.spec.get_or_insert_default().taints = Some(vec![Taint {
            key: PLUGIN_TIER_LABEL.into(),
            value: Some("true".into()),
            effect: "NoSchedule".into(),
            time_added: None,
        }]);
        let nodes: Api<Node> = Api::all(client.clone());
        let created = nodes.create(&PostParams::default(), &node).await.doing(|| format!("creating node {name}"))?;
        let status = serde_json::json!({ "status": node.status });
        let _ = nodes.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await;
        let cfg = NodeConfig {
            name: name.clone(),
            ip: std::net::Ipv4Addr::new(127, 0, 10, 250),
            root: access.work_dir.join(ctx.scenario),
            wipe_delay: Duration::from_secs(30),
            call_timeout: CALL_TIMEOUT,
        };
        cfg.create_dirs().map_err(|source| HarnessError::Dir { path: cfg.root.clone(), source })?;
        let driver = DriverInstance::start(&access.spec, &cfg, &access.kubeconfig, Lifetime::Attached)
            .map_err(HarnessError::Start)?;
        let mut pn = PluginNode {
            name,
            uid: created.metadata.uid.unwrap_or_default(),
            cfg,
            driver_name: access.spec.name.clone(),
            driver,
            client,
            ns: ctx.ns.clone(),
            node_wide_cdi: Default::default(),
        };
        pn.wait_registered().await?;
        pn.node_wide_cdi = pn.cdi_devices()?.into_keys().collect();
        Ok(pn)
    }

    fn registration_socket(&self) -> std::path::PathBuf {
        self.cfg.registry_dir().join(format!("{}-reg.sock", self.driver_name))
    }

    async fn wait_registered(&self) -> Result<(), HarnessError> {
        let mut last = None;
        for _ in 0..150 {
            match self.info().await {
                Ok(_) => return Ok(()),
                Err(e) => last = Some(e),
            }
            if let Some(other) = self.registered_elsewhere().await {
                return Err(HarnessError::OtherName {
                    registered: other,
                    expected: self.driver_name.clone(),
                    log: self.driver.log_tail(15),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // A socket that is there but answers GetInfo wrongly is a different fault from no
        // socket at all: say which, with the call's error.
        let socket = self.registration_socket();
        let log = self.driver.log_tail(15);
        Err(match last {
            Some(error) if socket.exists() => HarnessError::NoInfo { socket, error: Box::new(error), log },
            _ => HarnessError::NoSocket { socket, log },
        })
    }

    /// The name a plugin gives on another registration socket of the node, as kubelet's
    /// plugin watcher would find it.
    async fn registered_elsewhere(&self) -> Option<String> {
        let ours = self.registration_socket();
        for entry in std::fs::read_dir(self.cfg.registry_dir()).ok()?.flatten() {
            let path = entry.path();
            if path == ours || !path.to_string_lossy().ends_with("-reg.sock") {
                continue;
            }
            let Ok(channel) = connect_unix_as_plugin_watcher(&path).await else { continue };
            if let Ok(info) = timed(RegistrationClient::new(channel).get_info(InfoRequest {})).await {
                return Some(info.into_inner().name);
            }
        }
        None
    }

    /// GetInfo on the registration socket; `NotifyRegistrationStatus` follows as kubelet does.
    pub async fn info(&self) -> Result<PluginInfo, HarnessError> {
        let (info, notified) =
            self.answer_info(RegistrationStatus { plugin_registered: true, error: String::new() }).await?;
        notified?;
        Ok(info)
    }

    /// GetInfo, answered by `NotifyRegistrationStatus` with the error `why`: the kubelet
    /// refusing the plugin (it could not use its endpoint, or found it taken).
    pub async fn refuse(&self, why: &str) -> Result<PluginInfo, HarnessError> {
        let status = RegistrationStatus { plugin_registered: false, error: why.into() };
        // The plugin may end the notification by exiting; what it does next is the check.
        let (info, _) = self.answer_info(status).await?;
        Ok(info)
    }

    /// GetInfo, then `status`; the notification's outcome apart, for the caller to judge.
    async fn answer_info(
        &self,
        status: RegistrationStatus,
    ) -> Result<(PluginInfo, Result<(), CallError>), HarnessError> {
        let channel = connect_unix_as_plugin_watcher(self.registration_socket()).await?;
        let mut reg = RegistrationClient::new(channel);
        let info = timed(reg.get_info(InfoRequest {})).await?.into_inner();
        let notified = timed(reg.notify_registration_status(status)).await.map(drop);
        Ok((info, notified))
    }

    /// `Some(status)` once the driver process has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.driver.exited()
    }

    /// The driver's DRA service, registered as the kubelet registers it (v1, else v1beta1).
    async fn dra(&self) -> Result<DraClient, PrepareError> {
        let registered = kubelet::register(&self.registration_socket(), CALL_TIMEOUT)
            .await
            .map_err(|e| PrepareError::Register(e.to_string()))?;
        Ok(registered.client)
    }

    /// A claim allocated by hand to `devices` of `pool`, reserved for a pod that does not exist.
    pub async fn allocate(&self, name: &str, pool: &str, devices: &[&str]) -> Result<Claim, HarnessError> {
        let claim = dracheck_objects::claim(&self.ns, name, PLUGIN_TIER_CLASS, devices.len().max(1) as i64, &[]);
        let results: Vec<Allocated> = devices.iter().map(|d| self.result(pool, d)).collect();
        self.allocate_results(claim, &results).await
    }

    /// A result of this driver: `device` of `pool`, for the claim's one request.
    pub fn result<'a>(&'a self, pool: &'a str, device: &'a str) -> Allocated<'a> {
        Allocated { request: dracheck_objects::claim::REQUEST, driver: &self.driver_name, pool, device, share: None }
    }

    /// `claim` created and allocated by hand to `results` (which may name other drivers),
    /// reserved for a pod that does not exist.
    pub async fn allocate_results(
        &self,
        claim: ResourceClaim,
        results: &[Allocated<'_>],
    ) -> Result<Claim, HarnessError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let ns = claim.metadata.namespace.clone().unwrap_or_else(|| self.ns.clone());
        let claims: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &ns);
        let created = claims.create(&PostParams::default(), &claim).await.doing(|| format!("creating claim {name}"))?;
        let results: Vec<_> = results
            .iter()
            .map(|r| {
                let mut result =
                    serde_json::json!({ "request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device });
                if let Some((id, consumed)) = r.share {
                    result["shareID"] = id.into();
                    result["consumedCapacity"] = serde_json::json!(consumed);
                }
                result
            })
            .collect();
        let name = name.as_str();
        let status = serde_json::json!({ "status": {
            "allocation": { "devices": { "results": results } },
            "reservedFor": [{ "resource": "pods", "name": format!("{name}-pod"), "uid": "0a1b2c3d-0000-4000-8000-000000000001" }],
        }});
        claims
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .doing(|| format!("allocating claim {name}"))?;
        Ok(Claim { namespace: ns, uid: created.metadata.uid.unwrap_or_default(), name: name.into() })
    }

    /// The devices prepare returned for `claim`; the call's failure or the claim's refusal.
    pub async fn prepared(&self, claim: &Claim) -> Result<Vec<dra_v1::Device>, PrepareError> {
        let mut outcomes = self.dra().await?.prepare(vec![claim.clone()]).await.map_err(PrepareError::call)?;
        PrepareError::judge(claim, outcomes.remove(&claim.uid))
    }

    /// Unprepare of one claim: `Ok` when the driver reports no error.
    pub async fn unprepared(&self, claim: &Claim) -> Result<(), PrepareError> {
        let mut outcomes = self.dra().await?.unprepare(vec![claim.clone()]).await.map_err(PrepareError::call)?;
        PrepareError::judge(claim, outcomes.remove(&claim.uid))
    }

    /// Every CDI device the spec files in the node's CDI dir define (`kind=name` → env).
    pub fn cdi_devices(&self) -> Result<BTreeMap<String, Vec<String>>, HarnessError> {
        let dir = self.cfg.cdi_dir();
        cdi::load_registry(&dir).map_err(|reason| HarnessError::Cdi { dir, reason })
    }

    /// Those of `ids` that no spec file in the node's CDI dir defines (any more).
    pub fn undefined_cdi(&self, ids: &[String]) -> Result<Vec<String>, HarnessError> {
        let defined = self.cdi_devices()?;
        Ok(ids.iter().filter(|id| !defined.contains_key(*id)).cloned().collect())
    }

    /// Unprepares `first` of two claims prepared side by side; `Ok(None)` where that left the
    /// second's CDI devices `theirs` defined, else why `what` failed.
    pub async fn unprepare_one_of_two(
        &self,
        first: &Claim,
        theirs: &[String],
        what: &str,
    ) -> Result<Option<String>, HarnessError> {
        if let Err(e) = self.unprepared(first).await {
            return Ok(Some(format!("of {what}, unprepare of the first failed: {e}")));
        }
        let lost = self.undefined_cdi(theirs)?;
        Ok((!lost.is_empty())
            .then(|| format!("of {what}, unprepare of the first removed the second's CDI devices {lost:?}")))
    }

    /// The CDI device IDs a prepare answer gives its claim alone: all but the node-wide ones.
    pub fn claim_cdi_ids(&self, prepared: &[dra_v1::Device]) -> Vec<String> {
        prepared
            .iter()
            .flat_map(|d| d.cdi_device_ids.iter())
            .filter(|id| !self.node_wide_cdi.contains(*id))
            .cloned()
            .collect()
    }

    /// A crash and a start on the same dirs.
    pub async fn restart(&mut self) -> Result<(), HarnessError> {
        self.driver.kill();
        // A killed plugin leaves its sockets; wait for the new instance to replace them.
        self.driver.start_again().map_err(HarnessError::Start)?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.wait_registered().await
    }

    /// A clean stop and a start as `spec` on the same dirs, as a DaemonSet replaces its pod
    /// after a change of the driver's configuration.
    pub async fn replace(
        &mut self,
        spec: &dracheck_adapter::spec::DriverSpec,
        access: &PluginAccess,
    ) -> Result<(), HarnessError> {
        self.driver.stop(Duration::from_secs(5));
        self.driver = DriverInstance::start(spec, &self.cfg, &access.kubeconfig, Lifetime::Attached)
            .map_err(HarnessError::Start)?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.wait_registered().await
    }

    pub fn evidence(&self) -> Vec<Evidence> {
        vec![Evidence { title: format!("driver log on {}", self.name), body: self.driver.log_tail(25) }]
    }

    /// Stops the driver, deletes the node (its slices go with it) and its dirs.
    pub async fn cleanup(mut self) {
        self.driver.stop(Duration::from_secs(5));
        let nodes: Api<Node> = Api::all(self.client.clone());
        let _ = nodes.delete(&self.name, &DeleteParams::default()).await;
        let _ = std::fs::remove_dir_all(&self.cfg.root);
    }
}

/// Why the suite's own node could not be set up, or could not reach the driver's registration.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("creating {}: {source}", path.display())]
    Dir {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("starting the driver: {0}")]
    Start(#[source] ClusterError),
    #[error("the driver registers as {registered:?}, not as {expected}; its log:\n{log}")]
    OtherName { registered: String, expected: String, log: String },
    #[error("the driver answered no GetInfo on {} within 30s ({error}); its log:\n{log}", socket.display())]
    NoInfo { socket: std::path::PathBuf, error: Box<HarnessError>, log: String },
    #[error("the driver offered no registration socket {} within 30s; its log:\n{log}", socket.display())]
    NoSocket { socket: std::path::PathBuf, log: String },
    #[error(transparent)]
    Connect(#[from] SocketError),
    #[error(transparent)]
    Call(#[from] CallError),
    #[error("the CDI spec files in {}: {reason}", dir.display())]
    Cdi { dir: std::path::PathBuf, reason: String },
}

/// How a prepare or unprepare of one claim went wrong: the scenarios decide on this, never on
/// message text.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PrepareError {
    /// The driver's DRA service could not be reached through its registration.
    #[error("{0}")]
    Register(String),
    /// The call failed as a whole.
    #[error(transparent)]
    Call(CallError),
    /// The driver answered with an error for the claim.
    #[error("claim {claim}: {error}")]
    Refused { claim: String, error: String },
    /// The response has no entry for the claim.
    #[error("the response leaves out claim {0}")]
    Missing(String),
}

impl PrepareError {
    fn call(e: CallError) -> PrepareError {
        PrepareError::Call(e)
    }

    fn judge<T>(claim: &Claim, outcome: Option<ClaimOutcome<T>>) -> Result<T, PrepareError> {
        match outcome.unwrap_or(ClaimOutcome::Missing) {
            ClaimOutcome::Done(v) => Ok(v),
            ClaimOutcome::Refused(error) => Err(PrepareError::Refused { claim: claim.name.clone(), error }),
            ClaimOutcome::Missing => Err(PrepareError::Missing(claim.name.clone())),
        }
    }
}

async fn timed<T>(call: impl Future<Output = Result<T, tonic::Status>>) -> Result<T, CallError> {
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(r) => Ok(r?),
        Err(_) => Err(CallError::Timeout(CALL_TIMEOUT)),
    }
}

/// A started node for the scenario, or `None` (its guarantees recorded as skipped) when
/// the target gives no access to the driver's binary.
pub async fn node_for(ctx: &Ctx<'_>, ids: &[&str]) -> Result<Option<PluginNode>, HarnessError> {
    let Some(access) = PluginNode::access(ctx) else {
        for id in ids {
            ctx.skip(id, NEEDS_BINARY);
        }
        return Ok(None);
    };
    PluginNode::start(ctx, access).await.map(Some)
}
