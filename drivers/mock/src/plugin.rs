//! The DRAPlugin service: prepare and unprepare claims. One implementation serves both the
//! v1 and the wire-identical v1beta1 service.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use dracheck_kubelet_api::{dra_v1, dra_v1beta1, rewire};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;
use tokio::sync::{Mutex, watch};
use tonic::{Request, Response, Status};

use crate::checkpoint::{Checkpoint, CheckpointFile, PreparedClaim, PreparedDevice};
use crate::faults::{Fault, Faults};
use crate::inventory::Pool;
use crate::{cdi, config, log};

/// Everything prepare and unprepare need besides their mutable state.
pub struct Context {
    pub driver: String,
    pub node: String,
    pub cdi_dir: PathBuf,
    pub checkpoint: CheckpointFile,
    pub client: kube::Client,
    pub devices: watch::Receiver<Arc<Pool>>,
    pub faults: Arc<Faults>,
}

pub struct Plugin {
    ctx: Context,
    /// Held for a whole call: calls are serialized, as the upstream helper does by default,
    /// so that the checkpoint never sees two writers.
    state: Mutex<State>,
}

struct State {
    checkpoint: Checkpoint,
    prepare_calls: u32,
}

impl Plugin {
    pub fn new(ctx: Context, checkpoint: Checkpoint) -> Arc<Plugin> {
        Arc::new(Plugin { ctx, state: Mutex::new(State { checkpoint, prepare_calls: 0 }) })
    }

    pub async fn prepare(
        &self,
        request: dra_v1::NodePrepareResourcesRequest,
    ) -> Result<dra_v1::NodePrepareResourcesResponse, Status> {
        let faults = &self.ctx.faults;
        let claims: Vec<String> =
            request.claims.iter().map(|c| format!("{}/{} ({})", c.namespace, c.name, c.uid)).collect();
        if faults.has(&Fault::ExitOnPrepare) {
            log!("NodePrepareResources {}: fault exit-on-prepare, exiting", claims.join(", "));
            std::process::exit(1);
        }
        if faults.has(&Fault::HangPrepare) {
            log!("NodePrepareResources {}: fault hang-prepare, never answering", claims.join(", "));
            std::future::pending::<()>().await;
        }
        let mut state = self.state.lock().await;
        let _shared = self.refresh(&mut state).await?;
        state.prepare_calls += 1;
        let call = state.prepare_calls;
        if call <= faults.fail_prepare() {
            log!(
                "NodePrepareResources {}: fault fail-prepare, failing call {call} of {}",
                claims.join(", "),
                faults.fail_prepare()
            );
            return Err(Status::unavailable(format!(
                "fault fail-prepare={}: call {call} fails on purpose",
                faults.fail_prepare()
            )));
        }
        let mut answers = HashMap::new();
        for claim in &request.claims {
            let answer = match self.prepare_claim(&mut state, claim, call).await {
                Ok(prepared) => {
                    let ids: Vec<String> = prepared.iter().flat_map(|d| d.cdi_device_ids.clone()).collect();
                    log!(
                        "NodePrepareResources {}/{} ({}): prepared [{}]",
                        claim.namespace,
                        claim.name,
                        claim.uid,
                        ids.join(", ")
                    );
                    if faults.has(&Fault::NoDeviceStatus) {
                        log!("fault no-device-status: {}/{} gets no device status", claim.namespace, claim.name);
                    } else if let Err(e) =
                        crate::status::report(&self.ctx.client, &self.ctx.driver, &self.ctx.node, claim, &prepared)
                            .await
                    {
                        log!("error: {e}");
                    }
                    dra_v1::NodePrepareResourceResponse { devices: prepared, error: String::new() }
                }
                Err(error) => {
                    log!("NodePrepareResources {}/{} ({}): error: {error}", claim.namespace, claim.name, claim.uid);
                    dra_v1::NodePrepareResourceResponse { devices: Vec::new(), error }
                }
            };
            answers.insert(claim.uid.clone(), answer);
        }
        if faults.has(&Fault::DropUnlistedClaims) {
            self.drop_unlisted(&mut state, &request.claims);
        }
        Ok(dra_v1::NodePrepareResourcesResponse { claims: answers })
    }

    /// Locks the checkpoint file for the call and reads it again: another instance of the
    /// driver on the node (a rolling update) may have changed it since this one last did.
    async fn refresh(&self, state: &mut State) -> Result<crate::checkpoint::CheckpointLock, Status> {
        let file = &self.ctx.checkpoint;
        let locked = file
            .lock()
            .await
            .map_err(|e| Status::internal(format!("locking the checkpoint {}: {e}", file.path().display())))?;
        state.checkpoint = file.load().map_err(|e| Status::internal(e.to_string()))?;
        Ok(locked)
    }

    async fn prepare_claim(
        &self,
        state: &mut State,
        claim: &dra_v1::Claim,
        call: u32,
    ) -> Result<Vec<dra_v1::Device>, String> {
        let ctx = &self.ctx;
        let faults = &ctx.faults;
        let known = if faults.has(&Fault::KeyByName) {
            state.checkpoint.claims.values().find(|p| p.name == claim.name)
        } else {
            state.checkpoint.claims.get(&claim.uid)
        };
        if !faults.has(&Fault::NonIdempotentPrepare)
            && let Some(prepared) = known
        {
            // The spec may be gone (a tmpfs CDI dir after a reboot); the answer must resolve.
            if !faults.has(&Fault::CdiWithoutSpec) && !faults.has(&Fault::TrustCheckpoint) {
                self.write_spec(prepared)?;
            }
            return Ok(prepared.response());
        }
        let who = format!("ResourceClaim {}/{}", claim.namespace, claim.name);
        let object = self.claim_object(claim).await?;
        let allocated = object
            .status
            .and_then(|s| s.allocation)
            .ok_or_else(|| format!("{who} is not allocated"))?
            .devices
            .unwrap_or_default();
        let results = allocated.results.unwrap_or_default();
        let configs = allocated.config.unwrap_or_default();
        let applying = config::Applying {
            ignore: faults.has(&Fault::IgnoreConfig),
            to_every_request: faults.has(&Fault::ConfigToEveryRequest),
            class_last: faults.has(&Fault::ClassConfigWins),
            exact: faults.has(&Fault::ConfigByExactRequest),
        };
        let every = faults.has(&Fault::PrepareEveryResult);
        let ours: Vec<_> = results.into_iter().filter(|r| every || r.driver == ctx.driver).collect();
        if ours.is_empty() {
            return Err(format!("{who} has no device allocated by driver {}", ctx.driver));
        }
        if let Some(foreign) = ours.iter().find(|r| r.pool != ctx.node)
            && !faults.has(&Fault::PrepareForeignClaims)
        {
            return Err(format!(
                "{who} is allocated device {} of node {} (pool {}), but this plugin serves node {}",
                foreign.device, foreign.pool, foreign.pool, ctx.node
            ));
        }
        let inventory = ctx.devices.borrow().clone();
        let mut devices: Vec<PreparedDevice> = Vec::new();
        let first_request = ours.first().map(|r| r.request.clone()).unwrap_or_default();
        for result in ours {
            // The kubelet gives a container that names a request the devices whose request
            // names include it; a pod cannot name an alternative (`gpu/small`), so the answer
            // names its request (`gpu`), as the upstream helper does.
            let request = if faults.has(&Fault::FirstRequestNames) { &first_request } else { &result.request };
            let named = if faults.has(&Fault::SubrequestRequestNames) {
                request.clone()
            } else {
                request.split_once('/').map_or(request.as_str(), |(r, _)| r).to_string()
            };
            if let Some(seen) = devices.iter_mut().find(|d| d.device == result.device && d.share_id == result.share_id)
            {
                if !seen.request_names.contains(&named) {
                    seen.request_names.push(named);
                }
                continue;
            }
            if faults.has(&Fault::RefuseInUse)
                && let Some(holder) = state
                    .checkpoint
                    .claims
                    .values()
                    .find(|p| p.uid != claim.uid && p.devices.iter().any(|d| d.device == result.device))
            {
                return Err(format!(
                    "{who} is allocated device {}, which ResourceClaim {}/{} holds",
                    result.device, holder.namespace, holder.name
                ));
            }
            let env_index = inventory.devices.iter().position(|d| d.name() == result.device).ok_or_else(|| {
                format!("{who} is allocated device {}, which node {} does not have", result.device, ctx.node)
            })?;
            let cdi_name = if faults.has(&Fault::NonIdempotentPrepare) {
                format!("{}-{}-call{call}", claim.uid, result.device)
            } else {
                format!("{}-{}", claim.uid, result.device)
            };
            let settings = config::settings_for(&configs, &ctx.driver, &result.request, applying)
                .map_err(|e| format!("{who}, device {}: {e}", result.device))?;
            let capacity = result.consumed_capacity.unwrap_or_default().into_iter().map(|(n, q)| (n, q.0)).collect();
            let mut share = (result.share_id, capacity);
            if faults.has(&Fault::ShareIdIgnored)
                && share.0.is_some()
                && let Some(first) = state
                    .checkpoint
                    .claims
                    .values()
                    .flat_map(|p| &p.devices)
                    .find(|d| d.device == result.device && d.pool == result.pool && d.share_id.is_some())
            {
                log!("fault share-id-ignored: {who} gets the share of device {} prepared first", result.device);
                share = (first.share_id.clone(), first.capacity.clone());
            }
            devices.push(PreparedDevice {
                config: settings,
                request_names: vec![named],
                pool: result.pool,
                device: result.device,
                cdi_name,
                env_index,
                share_id: share.0,
                capacity: share.1,
            });
        }
        let prepared = PreparedClaim {
            namespace: claim.namespace.clone(),
            name: claim.name.clone(),
            uid: claim.uid.clone(),
            devices,
        };
        // Checkpoint first: a crash before the spec is written leaves an entry whose spec the
        // next prepare rewrites and whose unprepare still cleans up.
        state.checkpoint.claims.insert(claim.uid.clone(), prepared.clone());
        if let Err(e) = ctx.checkpoint.save(&state.checkpoint) {
            state.checkpoint.claims.remove(&claim.uid);
            return Err(format!("saving the checkpoint {}: {e}", ctx.checkpoint.path().display()));
        }
        if !faults.has(&Fault::CdiWithoutSpec) {
            self.write_spec(&prepared)?;
        }
        Ok(prepared.response())
    }

    /// The claim `claim` names, as the API server has it now: an error if it is gone or is
    /// another claim of the same name.
    async fn claim_object(&self, claim: &dra_v1::Claim) -> Result<ResourceClaim, String> {
        let who = format!("ResourceClaim {}/{}", claim.namespace, claim.name);
        let object = Api::<ResourceClaim>::namespaced(self.ctx.client.clone(), &claim.namespace)
            .get_opt(&claim.name)
            .await
            .map_err(|e| format!("reading {who}: {e}"))?
            .ok_or_else(|| format!("{who} does not exist"))?;
        let uid = object.metadata.uid.as_deref().unwrap_or_default();
        if uid != claim.uid {
            return Err(format!(
                "{who} has UID {uid}, not {} as asked: the claim was deleted and created again",
                claim.uid
            ));
        }
        Ok(object)
    }

    /// The `drop-unlisted-claims` fault: every prepared claim that `listed` does not name is
    /// undone, as if the call were the node's whole set of claims.
    fn drop_unlisted(&self, state: &mut State, listed: &[dra_v1::Claim]) {
        let unlisted: Vec<String> =
            state.checkpoint.claims.keys().filter(|uid| !listed.iter().any(|c| &c.uid == *uid)).cloned().collect();
        self.undo(state, unlisted, &Fault::DropUnlistedClaims, "which the call did not name");
    }

    /// Undoes the claims `uids` (checkpoint entry and CDI spec) on behalf of `fault`, which
    /// takes them for gone (`why`).
    fn undo(&self, state: &mut State, uids: Vec<String>, fault: &Fault, why: &str) {
        for uid in uids {
            state.checkpoint.claims.remove(&uid);
            let undone = cdi::remove(&self.ctx.cdi_dir, &uid);
            log!("fault {fault}: undid claim {uid}, {why} ({undone:?})");
        }
        if let Err(e) = self.ctx.checkpoint.save(&state.checkpoint) {
            log!("fault {fault}: saving the checkpoint: {e}");
        }
    }

    /// Writes the claim's CDI spec; with `expire-cdi-spec=SECS` it is removed SECS later.
    fn write_spec(&self, prepared: &PreparedClaim) -> Result<(), String> {
        let dir = &self.ctx.cdi_dir;
        cdi::write(dir, &self.exposed(prepared)).map_err(|e| format!("writing the CDI spec: {e}"))?;
        if let Some(after) = self.ctx.faults.expire_cdi_spec() {
            let (dir, uid) = (dir.clone(), prepared.uid.clone());
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                match cdi::remove(&dir, &uid) {
                    Ok(()) => log!("fault expire-cdi-spec: removed the CDI spec of claim {uid}, which stays prepared"),
                    Err(e) => log!("fault expire-cdi-spec: removing the CDI spec of claim {uid}: {e}"),
                }
            });
        }
        Ok(())
    }

    /// What the claim's CDI spec gives containers: its own devices, unless a fault makes each
    /// spec entry (its ID still resolves) set up another device.
    fn exposed(&self, prepared: &PreparedClaim) -> PreparedClaim {
        let faults = &self.ctx.faults;
        let stand_in = if faults.has(&Fault::PrepareWrongDevice) {
            self.ctx.devices.borrow().devices.first().map(|d| (d.name().to_string(), 0))
        } else if faults.has(&Fault::PrepareFirstDeviceOnly) {
            prepared.devices.first().map(|d| (d.device.clone(), d.env_index))
        } else {
            None
        };
        let mut claim = prepared.clone();
        if faults.has(&Fault::PrepareWholeDevice) {
            let pool = self.ctx.devices.borrow().clone();
            for d in &mut claim.devices {
                if let Some((whole, index)) = pool.whole_of(&d.device) {
                    log!(
                        "fault prepare-whole-device: the CDI spec of {}/{} sets up {} for {}",
                        claim.namespace,
                        claim.name,
                        whole.name(),
                        d.device
                    );
                    (d.device, d.env_index) = (whole.name().to_string(), index);
                }
            }
        }
        if let Some((device, env_index)) = stand_in {
            let fault = if faults.has(&Fault::PrepareWrongDevice) {
                Fault::PrepareWrongDevice
            } else {
                Fault::PrepareFirstDeviceOnly
            };
            log!("fault {fault}: the CDI spec of {}/{} sets up {device} for every device", claim.namespace, claim.name);
            for d in &mut claim.devices {
                (d.device, d.env_index) = (device.clone(), env_index);
            }
        }
        claim
    }

    pub async fn unprepare(
        &self,
        request: dra_v1::NodeUnprepareResourcesRequest,
    ) -> Result<dra_v1::NodeUnprepareResourcesResponse, Status> {
        let mut state = self.state.lock().await;
        let _shared = self.refresh(&mut state).await?;
        let mut answers = HashMap::new();
        for claim in &request.claims {
            let outcome = match self.claim_needed(&state, claim).await {
                Ok(()) => self.unprepare_claim(&mut state, claim),
                Err(e) => Err(e),
            };
            let error = match outcome {
                Ok(true) => {
                    log!("NodeUnprepareResources {}/{} ({}): unprepared", claim.namespace, claim.name, claim.uid);
                    String::new()
                }
                Ok(false) => {
                    log!(
                        "NodeUnprepareResources {}/{} ({}): not prepared here, nothing to do",
                        claim.namespace,
                        claim.name,
                        claim.uid
                    );
                    String::new()
                }
                Err(error) => {
                    log!("NodeUnprepareResources {}/{} ({}): error: {error}", claim.namespace, claim.name, claim.uid);
                    error
                }
            };
            answers.insert(claim.uid.clone(), dra_v1::NodeUnprepareResourceResponse { error });
        }
        Ok(dra_v1::NodeUnprepareResourcesResponse { claims: answers })
    }

    /// The `unprepare-needs-claim` fault: a prepared claim's unprepare first reads the claim
    /// from the API server, and fails where it is gone.
    async fn claim_needed(&self, state: &State, claim: &dra_v1::Claim) -> Result<(), String> {
        if !self.ctx.faults.has(&Fault::UnprepareNeedsClaim) || !state.checkpoint.claims.contains_key(&claim.uid) {
            return Ok(());
        }
        self.claim_object(claim).await.map(drop).map_err(|e| format!("fault unprepare-needs-claim: {e}"))
    }

    /// `Ok(false)`: the claim was not prepared by this plugin, which is not an error.
    fn unprepare_claim(&self, state: &mut State, claim: &dra_v1::Claim) -> Result<bool, String> {
        let ctx = &self.ctx;
        if ctx.faults.has(&Fault::NeverUnprepare) {
            return Err("fault never-unprepare: unprepare always fails".into());
        }
        // Only what the checkpoint records is undone: without it the plugin cannot know what
        // a claim's preparation touched.
        let Some(prepared) = state.checkpoint.claims.remove(&claim.uid) else {
            return Ok(false);
        };
        let undo = cdi::remove(&ctx.cdi_dir, &claim.uid)
            .map_err(|e| format!("removing the CDI spec: {e}"))
            .and_then(|()| ctx.checkpoint.save(&state.checkpoint).map_err(|e| format!("saving the checkpoint: {e}")));
        if let Err(e) = undo {
            state.checkpoint.claims.insert(claim.uid.clone(), prepared);
            return Err(e);
        }
        if ctx.faults.has(&Fault::UnprepareAllShares) {
            self.undo_other_shares(state, &prepared);
        }
        Ok(true)
    }

    /// The `unprepare-all-shares` fault: every other claim holding a share of a device that
    /// `gone` held a share of is undone too.
    fn undo_other_shares(&self, state: &mut State, gone: &PreparedClaim) {
        let shared = |d: &PreparedDevice| {
            d.share_id.is_some() && gone.devices.iter().any(|g| g.share_id.is_some() && g.device == d.device)
        };
        let others: Vec<String> =
            state.checkpoint.claims.values().filter(|p| p.devices.iter().any(shared)).map(|p| p.uid.clone()).collect();
        self.undo(state, others, &Fault::UnprepareAllShares, "which held a share of the same device");
    }
}

fn internal(e: prost::DecodeError) -> Status {
    Status::internal(format!("converting between v1 and v1beta1 messages: {e}"))
}

/// `k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin`.
pub struct V1(pub Arc<Plugin>);

#[tonic::async_trait]
impl dra_v1::dra_plugin_server::DraPlugin for V1 {
    async fn node_prepare_resources(
        &self,
        request: Request<dra_v1::NodePrepareResourcesRequest>,
    ) -> Result<Response<dra_v1::NodePrepareResourcesResponse>, Status> {
        self.0.prepare(request.into_inner()).await.map(Response::new)
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<dra_v1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<dra_v1::NodeUnprepareResourcesResponse>, Status> {
        self.0.unprepare(request.into_inner()).await.map(Response::new)
    }
}

/// `k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin`, for kubelets that fall back to it.
pub struct V1beta1(pub Arc<Plugin>);

#[tonic::async_trait]
impl dra_v1beta1::dra_plugin_server::DraPlugin for V1beta1 {
    async fn node_prepare_resources(
        &self,
        request: Request<dra_v1beta1::NodePrepareResourcesRequest>,
    ) -> Result<Response<dra_v1beta1::NodePrepareResourcesResponse>, Status> {
        let answer = self.0.prepare(rewire(&request.into_inner()).map_err(internal)?).await?;
        rewire(&answer).map(Response::new).map_err(internal)
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<dra_v1beta1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<dra_v1beta1::NodeUnprepareResourcesResponse>, Status> {
        let answer = self.0.unprepare(rewire(&request.into_inner()).map_err(internal)?).await?;
        rewire(&answer).map(Response::new).map_err(internal)
    }
}
