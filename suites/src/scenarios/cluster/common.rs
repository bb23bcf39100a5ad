//! What several cluster-tier scenarios do: start a workload on a claim and check what it got.

use std::time::Duration;

use dracheck_objects::published;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, ListParams, LogParams};

use crate::adapters::{DeviceKey, SeenOther};
use crate::engine::wait::conditions;
use crate::engine::{ApiContext, ApiError, Ctx, ScenarioError};

/// The device names allocated to a claim.
pub fn device_names(claim: &ResourceClaim) -> Vec<String> {
    Ctx::allocated(claim).into_iter().map(|(_, _, d)| d).collect()
}

/// Waits until the claim is allocated; returns it and the time it took.
pub async fn allocated(
    ctx: &Ctx<'_>,
    claim: &str,
    timeout: Duration,
) -> Result<(ResourceClaim, Duration), ScenarioError> {
    match ctx.wait_claim(claim, conditions::claim_allocated(), timeout).await {
        Ok((Some(c), took)) => Ok((c, took)),
        _ => Err(ScenarioError::timeout(format!("claim {claim} was not allocated"), timeout)),
    }
}

/// The claim once allocated and its pod running; `None` (the guarantee `id` failed, with the
/// pod's evidence) otherwise.
pub async fn running(ctx: &Ctx<'_>, id: &str, claim: &str, pod: &str, within: Duration) -> Option<ResourceClaim> {
    let outcome = match allocated(ctx, claim, within).await {
        Ok((claim, _)) => ctx.wait_phase(pod, "Running", within).await.map(|_| claim),
        Err(e) => Err(e),
    };
    match outcome {
        Ok(claim) => Some(claim),
        Err(e) => {
            ctx.fail(id, e, ctx.evidence(pod).await);
            None
        }
    }
}

/// How the driver's workloads show the devices they see, by name; `None`, with `id` skipped
/// and the reason, where the suite does not know it.
pub fn seen_by_name(ctx: &Ctx<'_>, id: &str) -> Option<crate::adapters::SeenDevices> {
    let workload = &ctx.target.adapter.workload;
    match (workload.seen, workload.key) {
        (Some(seen), DeviceKey::Name) => Some(seen),
        _ => {
            ctx.skip(
                id,
                format!(
                    "the suite does not know how driver {} names its devices in a container",
                    ctx.target.driver.name
                ),
            );
            None
        }
    }
}

/// The claim a pod uses under its pod-level name (standalone or generated from a template).
pub async fn claim_of(ctx: &Ctx<'_>, pod: &str) -> Option<String> {
    let p: Pod = ctx.get_pod(pod).await?;
    let spec = p.spec.as_ref()?.resource_claims.as_ref()?.first()?.clone();
    spec.resource_claim_name
        .or_else(|| p.status?.resource_claim_statuses?.into_iter().find(|s| s.name == spec.name)?.resource_claim_name)
}

pub async fn log(ctx: &Ctx<'_>, pod: &str) -> String {
    ctx.api::<Pod>().logs(pod, &LogParams::default()).await.unwrap_or_else(|e| format!("(no log: {e})"))
}

/// Why a workload's devices are not those of its claim, or could not be looked at.
#[derive(Debug, thiserror::Error)]
pub enum NotSeen {
    #[error(transparent)]
    Other(#[from] SeenOther),
    #[error("device {device} of pool {pool} was allocated but no slice publishes its {attribute}")]
    Unpublished { device: String, pool: String, attribute: String },
    #[error(transparent)]
    Unreadable(#[from] ApiError),
}

/// Whether the workload `pod` sees exactly the devices allocated to `claim`, by the driver
/// adapter's reading of its log. `Ok(None)`: the suite knows no way to check it for this
/// driver.
pub async fn sees(ctx: &Ctx<'_>, pod: &str, claim: &ResourceClaim) -> Result<Option<String>, NotSeen> {
    sees_all(ctx, pod, &[claim]).await
}

/// Whether the workload `pod` sees exactly the devices allocated to `claims`, all together.
pub async fn sees_all(ctx: &Ctx<'_>, pod: &str, claims: &[&ResourceClaim]) -> Result<Option<String>, NotSeen> {
    let workload = &ctx.target.adapter.workload;
    let Some(seen) = workload.seen else { return Ok(None) };
    let mut devices = Vec::new();
    for claim in claims {
        devices.extend(match workload.key {
            DeviceKey::Name => device_names(claim),
            DeviceKey::Attribute(name) => attribute_of_allocated(ctx, claim, name).await?,
        });
    }
    let devices = devices.as_slice();
    let check = |log: &str, devices: &[String]| crate::adapters::sees_exactly(seen(log), devices);
    // The log fills as the container starts; give it a few seconds.
    let last = ctx.poll_until(Duration::from_secs(15), || log(ctx, pod), |l| check(l, devices).is_ok()).await;
    match last {
        Ok(_) => Ok(Some(format!("the workload sees exactly {devices:?}"))),
        Err(l) => Err(check(&l, devices).expect_err("the poll ended without a match").into()),
    }
}

/// What a guarantee is where the suite cannot read what the driver's pods see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unread {
    /// Seeing the devices is the guarantee: skipped, with the reason.
    Skip,
    /// The guarantee is what ran, and that was observed and held: it passes on that, and the
    /// reason names the part not checked.
    PassOnWhatRan,
}

/// Records `id` from what `pod` shows it sees of `claims`: passed (`passed` given what it
/// saw, or `None` where nothing could be read and `unread` lets it pass), skipped, or failed
/// with the pod's evidence.
pub async fn judge_sees_all(
    ctx: &Ctx<'_>,
    id: &str,
    pod: &str,
    claims: &[&ResourceClaim],
    unread: Unread,
    passed: impl FnOnce(Option<String>) -> String,
) {
    let driver = &ctx.target.driver.name;
    match (sees_all(ctx, pod, claims).await, unread) {
        (Ok(Some(seen)), _) => ctx.pass(id, passed(Some(seen))),
        (Ok(None), Unread::Skip) => {
            ctx.skip(id, format!("the suite does not know how driver {driver} shows its devices in a container"))
        }
        (Ok(None), Unread::PassOnWhatRan) => ctx.pass(
            id,
            format!(
                "{}; what pod {pod} sees is not checked: the suite does not know how driver {driver} shows its \
                 devices in a container",
                passed(None)
            ),
        ),
        (Err(e), _) => ctx.fail(id, e.to_string(), ctx.evidence(pod).await),
    }
}

/// The `name` attribute of each device allocated to `claim`, as its slice publishes it.
async fn attribute_of_allocated(ctx: &Ctx<'_>, claim: &ResourceClaim, name: &str) -> Result<Vec<String>, NotSeen> {
    let driver = &ctx.target.driver.name;
    let api: Api<ResourceSlice> = Api::all(ctx.client());
    let lp = ListParams::default().fields(&format!("spec.driver={driver}"));
    let slices = api.list(&lp).await.doing(|| "listing the driver's slices".into())?.items;
    let mut out = Vec::new();
    for (_, pool, device) in Ctx::allocated(claim) {
        let value = published::find_device(&slices, driver, &pool, &device)
            .and_then(|d| published::attribute(d, driver, name))
            .map(published::attribute_value)
            .ok_or_else(|| NotSeen::Unpublished {
                device: device.clone(),
                pool: pool.clone(),
                attribute: name.into(),
            })?;
        out.push(value);
    }
    Ok(out)
}

/// The reason and message of the pod's PodScheduled=False, waiting up to `timeout`.
pub async fn wait_unschedulable(ctx: &Ctx<'_>, pod: &str, timeout: Duration) -> Option<(String, String)> {
    let (p, _) = ctx.wait_pod(pod, conditions::pod_unschedulable(), timeout).await.ok()?;
    crate::engine::wait::unschedulable(p.as_ref())
}

pub fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// What became of a pod: it runs, or the scheduler refused it (with its message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    Runs,
    Refused(String),
}

/// Waits until the pod runs or the scheduler refuses it; `None` if neither happens within
/// `timeout`.
pub async fn runs_or_refused(ctx: &Ctx<'_>, pod: &str, timeout: Duration) -> Option<Decided> {
    let decided = ctx
        .poll_until(
            timeout,
            || async {
                let running =
                    ctx.get_pod(pod).await.and_then(|p| p.status).and_then(|s| s.phase).is_some_and(|p| p == "Running");
                if running {
                    Some(Decided::Runs)
                } else {
                    ctx.unschedulable(pod).await.map(|(_, m)| Decided::Refused(m))
                }
            },
            |v| v.is_some(),
        )
        .await;
    decided.ok().and_then(|(v, _)| v)
}

/// The spec files a node's CDI dir has `now` and did not have `before`: what a claim prepared
/// in between left, once it is unprepared again.
pub fn new_specs(
    before: &std::collections::BTreeMap<String, String>,
    now: &std::collections::BTreeMap<String, String>,
) -> Vec<String> {
    now.keys().filter(|name| !before.contains_key(*name)).cloned().collect()
}

/// Whether `pod` (whose claim has the same name) still runs with no container restart and its
/// claim still has `devices`: what a workload keeps across a disruption. The error says what
/// became of them.
pub async fn kept_running(ctx: &Ctx<'_>, pod: &str, devices: &[String]) -> Result<(), String> {
    let status = ctx.get_pod(pod).await.and_then(|p| p.status).unwrap_or_default();
    let restarts: i32 = status.container_statuses.iter().flatten().map(|c| c.restart_count).sum();
    let still = ctx.get_claim(pod).await.map(|c| device_names(&c)).unwrap_or_default();
    if status.phase.as_deref() == Some("Running") && restarts == 0 && still == devices {
        return Ok(());
    }
    Err(format!(
        "the pod is {:?} with {restarts} container restart(s), its claim has {still:?} (had {devices:?})",
        status.phase
    ))
}

/// What the pod's containers are doing, for a failure's reason: `name: waiting
/// CreateContainerError (message)` and the like.
pub fn container_states(pod: Option<&Pod>) -> String {
    let statuses = pod.and_then(|p| p.status.as_ref()?.container_statuses.clone()).unwrap_or_default();
    if statuses.is_empty() {
        return "no container status".into();
    }
    let states: Vec<String> = statuses
        .iter()
        .map(|c| {
            let state = c.state.clone().unwrap_or_default();
            let what = match (&state.running, &state.waiting, &state.terminated) {
                (Some(r), _, _) => {
                    format!("running since {}", r.started_at.as_ref().map(|t| t.0.to_string()).unwrap_or_default())
                }
                (_, Some(w), _) => format!(
                    "waiting {} ({})",
                    w.reason.clone().unwrap_or_default(),
                    w.message.clone().unwrap_or_default()
                ),
                (_, _, Some(t)) => {
                    format!("terminated with {} ({})", t.exit_code, t.reason.clone().unwrap_or_default())
                }
                _ => "in no state".into(),
            };
            format!("{}: {what}", c.name)
        })
        .collect();
    states.join("; ")
}

/// How the suite turns devices of the scenario's node unhealthy while the driver runs: the
/// adapter's hook and the node's dirs; `None`, with `id` skipped and the reason, where it
/// cannot (no hook, or a driver the suite does not run itself).
pub async fn health_control(
    ctx: &Ctx<'_>,
    id: &str,
) -> Option<(dracheck_adapter::SetHealth, dracheck_adapter::spec::NodeDirs)> {
    let Some(set_health) = ctx.target.adapter.set_health.clone() else {
        ctx.skip(id, crate::engine::target::NO_HEALTH_HOOK);
        return None;
    };
    let Some(dirs) = ctx.target.driver_dirs(&ctx.node).await else {
        ctx.skip(
            id,
            "turning a device unhealthy needs the driver's process run by the suite on a node it started (--cluster local)",
        );
        return None;
    };
    Some((set_health, dirs))
}
