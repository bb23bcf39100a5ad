//! Devices asked for as an extended resource (DRAExtendedResource, GA in Kubernetes 1.37): a
//! platform that moves from device plugins to DRA keeps its users' pods as they are, asking for
//! `resources.limits: {<name>: 1}`. The scheduler makes a claim for the pod from the DeviceClass
//! that names the resource (the profile's class: its `extendedResourceName`, else the name every
//! class has, `deviceclass.resource.kubernetes.io/<class>`), allocates it, and records it in the
//! pod's `status.extendedResourceClaimStatus` with a request per container; the kubelet
//! prepares it with the pod and gives each container the devices of its request, by the
//! request names the driver's prepare answers.
//!
//! A pod of two containers asks for one device each: it must run, its status must name the
//! claim, and each container must see exactly the device of its own request
//! (`extended-resource.prepared`); once the pod is deleted, the claim must go with it
//! (`extended-resource.claim-deleted`, the garbage collector's).

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::LogParams;

use super::common::secs;
use crate::coverage::RowId::E;
use crate::coverage::Verdict::Covered;
use crate::coverage::{UpstreamRow, e2e};
use crate::engine::{ApiContext, Ctx, Disruption, Role, Scenario, ScenarioError, Tier, served};
use crate::profile::ids::{EXTENDED_RESOURCE_CLAIM_DELETED as DELETED, EXTENDED_RESOURCE_PREPARED as PREPARED};

pub static SCENARIO: Scenario = Scenario {
    name: "extended-resource",
    tier: Tier::Cluster,
    role: Role::General,
    guarantees: &[PREPARED, DELETED],
    disrupts: Disruption::None,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: E(10),
        test: "extended resources: implicit and explicit names, one container two resources",
        at: e2e(3293),
        asserts: NAMES,
        guarantees: &[PREPARED],
        verdict: Covered,
    },
    UpstreamRow {
        id: E(11),
        test: "extended resources: one container one resource",
        at: e2e(3310),
        asserts: NAMES,
        guarantees: &[PREPARED],
        verdict: Covered,
    },
    UpstreamRow {
        id: E(12),
        test: "extended resources: implicit name, one container one resource",
        at: e2e(3324),
        asserts: NAMES,
        guarantees: &[PREPARED],
        verdict: Covered,
    },
    UpstreamRow {
        id: E(13),
        test: "extended resources: one container three resources",
        at: e2e(3333),
        asserts: NAMES,
        guarantees: &[PREPARED],
        verdict: Covered,
    },
    UpstreamRow {
        id: E(14),
        test: "extended resources: three containers one resource each",
        at: e2e(3352),
        asserts: NAMES,
        guarantees: &[PREPARED],
        verdict: Covered,
    },
    UpstreamRow {
        id: E(15),
        test: "extended resources: three containers multiple resources each",
        at: e2e(3384),
        asserts: NAMES,
        guarantees: &[PREPARED],
        verdict: Covered,
    },
    UpstreamRow {
        id: E(16),
        test: "extended resources: accurately populate ExtendedResourceClaimStatus",
        at: e2e(3543),
        asserts: NAMES,
        guarantees: &[PREPARED],
        verdict: Covered,
    },
];

/// What upstream's extended-resource tests ask of a driver, whatever the pod's shape.
const NAMES: &str = "prepare answers the request names the scheduler gave the claim it made (one per container and \
                     resource), so that each container gets the devices of its own requests";

const NAME: &str = "extended";
const CONTAINERS: [&str; 2] = ["workload", "second"];
/// The resource name every DeviceClass answers to, after its own name.
const CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    if ctx.profile().guarantees.extended_resource.is_none() {
        return Ok(());
    }
    if let Some(why) = served::class_extended_resource_dropped(&ctx.client()).await? {
        for id in SCENARIO.guarantees {
            ctx.skip(id, &why);
        }
        return Ok(());
    }
    // The class as the cluster has it: the profile's own, or an existing one it names.
    let class_name = ctx.profile().class_name().to_string();
    let class = kube::Api::<k8s_openapi::api::resource::v1::DeviceClass>::all(ctx.client())
        .get_opt(&class_name)
        .await
        .doing(|| format!("reading DeviceClass {class_name}"))?;
    let resource =
        class.and_then(|c| c.spec?.extended_resource_name).unwrap_or_else(|| format!("{CLASS_PREFIX}{class_name}"));
    let within = Duration::from_secs(ctx.profile().guarantees.allocation.as_ref().map_or(60, |a| a.within_seconds));

    ctx.phase(&format!("a pod of two containers asking for one {resource} each"));
    let pod = ctx.workload(NAME).twin(CONTAINERS[1]).extended_resource(&resource, "1").build();
    ctx.create(&pod).await?;
    if let Err(e) = ctx.wait_phase(NAME, "Running", within).await {
        ctx.fail(PREPARED, e, ctx.evidence(NAME).await);
        ctx.fail(DELETED, "the pod did not run, so its claim could not be followed", Vec::new());
        return Ok(());
    }
    let pod = ctx.get_pod(NAME).await.ok_or_else(|| ScenarioError::Unmet(format!("pod {NAME} is gone")))?;
    let Some(status) = pod.status.as_ref().and_then(|s| s.extended_resource_claim_status.clone()) else {
        ctx.fail(PREPARED, "the pod runs, but its status.extendedResourceClaimStatus names no claim", Vec::new());
        ctx.fail(DELETED, "the pod's status names no claim to follow", Vec::new());
        return Ok(());
    };
    let claim_name = status.resource_claim_name.clone();
    let claim = ctx.get_claim(&claim_name).await;
    match judge(ctx, &pod, claim.as_ref(), &status.request_mappings).await {
        Ok(summary) => ctx.pass(PREPARED, format!("claim {claim_name}: {summary}")),
        Err(why) => ctx.fail(PREPARED, format!("claim {claim_name}: {why}"), ctx.evidence(NAME).await),
    }

    ctx.delete_pod(NAME, within).await?;
    let gone = ctx.poll_until(within, || ctx.get_claim(&claim_name), Option::is_none).await;
    match gone {
        Ok((_, took)) => ctx.pass(DELETED, format!("claim {claim_name} was gone {} after its pod", secs(took))),
        Err(_) => {
            ctx.fail(DELETED, format!("claim {claim_name} is still there {} after its pod", secs(within)), Vec::new())
        }
    }
    Ok(())
}

/// Whether each container of `pod` sees exactly the devices of the requests `mappings` give it.
async fn judge(
    ctx: &Ctx<'_>,
    pod: &Pod,
    claim: Option<&ResourceClaim>,
    mappings: &[k8s_openapi::api::core::v1::ContainerExtendedResourceRequest],
) -> Result<String, String> {
    let claim = claim.ok_or("the claim does not exist")?;
    let Some(seen) = ctx.target.adapter.workload.seen else {
        return Ok("allocated; the suite does not know how the driver shows its devices in a container".into());
    };
    let driver = &ctx.target.driver.name;
    let results: Vec<_> = Ctx::allocation_results(claim).collect();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let mut shown = Vec::new();
    for container in CONTAINERS {
        let requests: Vec<&str> =
            mappings.iter().filter(|m| m.container_name == container).map(|m| m.request_name.as_str()).collect();
        if requests.is_empty() {
            return Err(format!("no request of the claim is mapped to container {container}"));
        }
        let devices: Vec<String> = results
            .iter()
            .filter(|r| &r.driver == driver && requests.contains(&r.request.as_str()))
            .map(|r| r.device.clone())
            .collect();
        let params = LogParams { container: Some(container.into()), ..LogParams::default() };
        let read = || async { ctx.api::<Pod>().logs(&name, &params).await.unwrap_or_default() };
        let check = |log: &String| crate::adapters::sees_exactly(seen(log), &devices);
        let outcome = ctx.poll_until(Duration::from_secs(15), read, |l| check(l).is_ok()).await;
        if let Err(log) = outcome {
            let e = check(&log).expect_err("the poll ended without a match");
            return Err(format!("container {container} (request {}): {e}", requests.join(", ")));
        }
        shown.push(format!("{container} sees {devices:?} of request {}", requests.join(", ")));
    }
    Ok(shown.join("; "))
}
