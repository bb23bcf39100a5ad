//! Admin access (GA in Kubernetes 1.37): a claim whose request sets `adminAccess: true`, in a
//! namespace labelled `resource.kubernetes.io/admin-access: "true"`, may be allocated devices
//! that other claims use, as a monitoring or diagnostics agent needs. A pod first takes every
//! device of the profile's class on the scenario's node (the profile's first request with
//! `allocationMode: All`); an admin-access claim of one such device, for a pod on the same node,
//! is then necessarily given a device in use. The driver must prepare it (a driver that refuses
//! a device some other claim holds leaves the pod waiting) and must not disturb the workload
//! using it. The same claim in a namespace without the label is refused by the API server's
//! validation: admission, not the driver, but what a platform promises its tenants.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Api, PostParams};

use super::common::{device_names, kept_running, running, secs};
use crate::coverage::RowId::C;
use crate::coverage::Verdict::Covered;
use crate::coverage::{UpstreamRow, e2e};
use crate::engine::wait::{self, conditions};
use crate::engine::{ApiContext, ApiError, Ctx, Disruption, Role, Scenario, ScenarioError, Tier, served};
use crate::profile::ids;

pub static SCENARIO: Scenario = Scenario {
    name: "admin-access",
    tier: Tier::Cluster,
    // Takes every device of the profile's class on its node, as the exhaustion scenario does.
    role: Role::Exhaustion,
    guarantees: &[ids::ADMIN_ACCESS_NAMESPACE_LABEL, ids::ADMIN_ACCESS_IN_USE_DEVICE],
    disrupts: Disruption::None,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[UpstreamRow {
    id: C(15),
    test: "DaemonSet with admin access",
    at: e2e(591),
    asserts: "a claim with admin access to a device is prepared for the pods of a DaemonSet",
    guarantees: &[ids::ADMIN_ACCESS_IN_USE_DEVICE],
    verdict: Covered,
}];

/// The namespace label that admits admin-access claims (`resource.kubernetes.io/admin-access`).
const ADMIN_LABEL: &str = "resource.kubernetes.io/admin-access";

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let within = Duration::from_secs(ctx.profile().guarantees.allocation.as_ref().map_or(60, |a| a.within_seconds));
    let admin_ns = ctx.other_namespace_labelled("admin", &[(ADMIN_LABEL, "true")]).await?;
    let monitor = ctx.profile().claim().first_per_name(&["monitor"]).admin_access();
    if let Some(why) =
        served::dropped(&ctx.client(), &monitor.claim(&admin_ns, "monitor"), &served::ADMIN_ACCESS).await?
    {
        for id in SCENARIO.guarantees {
            ctx.skip(id, &why);
        }
        return Ok(());
    }

    namespace_label(ctx, &monitor.claim(&ctx.ns, "unlabelled")).await?;

    let id = ids::ADMIN_ACCESS_IN_USE_DEVICE;
    ctx.phase("a pod with every device of the profile's class on the node");
    ctx.create(&ctx.profile().claim().all_of_first().claim(&ctx.ns, "user")).await?;
    ctx.create(&ctx.workload("user").claim("devices", "user").build()).await?;
    // Devices of the scenario before may still be held until the kubelet has unprepared them.
    let Some(user) = running(ctx, id, "user", "user", within * 2).await else { return Ok(()) };
    let in_use = device_names(&user);

    ctx.phase("an admin-access claim of one of them, for a pod on the same node, in a namespace labelled for it");
    let claims: Api<ResourceClaim> = Api::namespaced(ctx.client(), &admin_ns);
    let pods: Api<Pod> = Api::namespaced(ctx.client(), &admin_ns);
    claims
        .create(&PostParams::default(), &monitor.claim(&admin_ns, "monitor"))
        .await
        .doing(|| format!("creating the admin-access ResourceClaim {admin_ns}/monitor"))?;
    let pod = ctx.workload_in(&admin_ns, "monitor").claim("devices", "monitor").build();
    pods.create(&PostParams::default(), &pod).await.doing(|| format!("creating pod {admin_ns}/monitor"))?;
    let allocated = wait::until(&claims, "monitor", conditions::claim_allocated(), within).await;
    let Ok((Some(monitor), _)) = allocated else {
        let why =
            format!("the admin-access claim was not allocated within {} while {in_use:?} were in use", secs(within));
        ctx.fail(id, why, ctx.evidence("user").await);
        return Ok(());
    };
    let given = Ctx::allocated(&monitor);
    let marked = Ctx::allocation_results(&monitor).all(|r| r.admin_access == Some(true));
    let outside: Vec<&str> =
        given.iter().map(|(_, _, d)| d.as_str()).filter(|d| !in_use.iter().any(|u| u == d)).collect();
    if given.is_empty() || !outside.is_empty() || !marked {
        let why = format!(
            "the admin-access claim was allocated {:?} (adminAccess marked on every result: {marked}), not one of the \
             devices in use {in_use:?}",
            given.iter().map(|(_, _, d)| d).collect::<Vec<_>>()
        );
        ctx.fail(id, why, ctx.evidence("user").await);
        return Ok(());
    }
    let runs = wait::until(&pods, "monitor", conditions::pod_phase("Running"), within).await;
    if let Err(e) = runs {
        let phase = wait::phase_of(e.now.as_ref()).unwrap_or("gone");
        let states = super::common::container_states(e.now.as_ref());
        let why = format!(
            "the admin-access pod was given {:?}, in use by pod user, and is {phase} after {}: the driver did not \
             prepare a device in use ({states})",
            given.iter().map(|(_, _, d)| d).collect::<Vec<_>>(),
            secs(within)
        );
        ctx.fail(id, why, ctx.evidence("user").await);
        return Ok(());
    }
    // The driver has prepared the device for the monitor; what it did to its user shows now.
    match kept_running(ctx, "user", &in_use).await {
        Ok(()) => ctx.pass(
            id,
            format!(
                "the admin-access claim got {:?} (adminAccess on its results), in use by pod user, and its pod runs; \
                 pod user keeps running with {in_use:?} and no container restart",
                given.iter().map(|(_, _, d)| d).collect::<Vec<_>>()
            ),
        ),
        Err(why) => ctx.fail(
            id,
            format!("once the admin-access pod ran, the pod using the device was disturbed: {why}"),
            ctx.evidence("user").await,
        ),
    }
    let _ = pods.delete("monitor", &Default::default()).await;
    let _ = wait::until(&pods, "monitor", conditions::gone(), within).await;
    ctx.delete_pod("user", within).await?;
    Ok(())
}

/// `admin-access.namespace-label`: the API server refuses an admin-access claim in the
/// scenario's own namespace, which lacks the label. Judged on the status code alone.
async fn namespace_label(ctx: &Ctx<'_>, claim: &ResourceClaim) -> Result<(), ScenarioError> {
    let id = ids::ADMIN_ACCESS_NAMESPACE_LABEL;
    ctx.phase("an admin-access claim in a namespace without the admin-access label");
    match ctx.api::<ResourceClaim>().create(&PostParams::default(), claim).await {
        Err(kube::Error::Api(e)) if e.code == 422 || e.code == 403 => {
            ctx.pass(id, format!("refused with {} {}: {}", e.code, e.reason, e.message));
            Ok(())
        }
        Ok(_) => {
            ctx.fail(
                id,
                format!(
                    "the API server created an admin-access claim in namespace {}, which lacks {ADMIN_LABEL}",
                    ctx.ns
                ),
                Vec::new(),
            );
            Ok(())
        }
        Err(e) => {
            Err(ApiError { doing: format!("creating the admin-access ResourceClaim {}/unlabelled", ctx.ns), source: e }
                .into())
        }
    }
}
