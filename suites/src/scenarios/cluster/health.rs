//! Device health in the pod's status (ResourceHealthStatus, beta and on in Kubernetes 1.36 and
//! 1.37): a platform that promises "an unhealthy GPU shows in the pod's status" relies on the
//! driver streaming health to the kubelet (`DRAResourceHealth`) and the kubelet writing it into
//! `status.containerStatuses[].allocatedResourcesStatus`, under `claim:<pod's claim name>`,
//! one entry per device of the claim. A pod of the profile's shape runs; the suite turns its
//! device unhealthy as the driver's adapter says (the mock: its health file) and wants the
//! entry `Unhealthy` within the profile's bound; then the device is made sound again, and the
//! scenario waits for its taint to go before the node is used on.
//!
//! Where the node's kubelet writes no such entry for a running pod with a claim at all (a
//! kubelet before 1.31, or the gate off), the check is skipped with that reason: every
//! kubelet that has the feature reports the claim's devices, as `Unknown` at least.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::common::{health_control, running, secs};
use crate::coverage::RowId::F;
use crate::coverage::Verdict::{Covered, Partial};
use crate::coverage::{UpstreamRow, e2e, e2e_node};
use crate::engine::{Ctx, Disruption, Role, Scenario, ScenarioError, Tier};
use crate::profile::ids::HEALTH_POD_STATUS as ID;

pub static SCENARIO: Scenario = Scenario {
    name: "resource-health",
    tier: Tier::Cluster,
    role: Role::General,
    guarantees: &[ID],
    disrupts: Disruption::None,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: F(1),
        test: "should reflect device health changes in the Pod's status",
        at: e2e_node(943),
        asserts: "the driver streams its allocated device Unhealthy and then Healthy, which the pod's status shows",
        guarantees: &[ID, crate::profile::ids::PLUGIN_HEALTH_REPORTED],
        verdict: Covered,
    },
    UpstreamRow {
        id: F(4),
        test: "should report device health with custom messages",
        at: e2e(4353),
        asserts: "the message the driver streams with a device's health reaches the pod's allocatedResourcesStatus",
        guarantees: &[ID, crate::profile::ids::PLUGIN_HEALTH_REPORTED],
        verdict: Partial("only the health is read, never the message, so a driver that drops or garbles it passes"),
    },
];

const NAME: &str = "health";
/// The pod's name for its claim: the status entry is `claim:<this>`.
const POD_CLAIM: &str = "devices";

/// How long a running pod's kubelet may take to write the claim's entry at all.
const FIRST_ENTRY: Duration = Duration::from_secs(30);

/// The health of each resource in the entry `claim:<POD_CLAIM>` of the pod's containers, by
/// resource ID; `None` where no container has that entry.
fn entry(pod: &Pod) -> Option<Vec<(String, String)>> {
    let wanted = format!("claim:{POD_CLAIM}");
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    let found: Vec<(String, String)> = statuses
        .iter()
        .flat_map(|c| c.allocated_resources_status.iter().flatten())
        .filter(|e| e.name == wanted || e.name.starts_with(&format!("{wanted}/")))
        .flat_map(|e| e.resources.iter().flatten())
        .map(|r| (r.resource_id.clone(), r.health.clone().unwrap_or_else(|| "Unknown".into())))
        .collect();
    (!found.is_empty()).then_some(found)
}

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let Some(promised) = ctx.profile().guarantees.resource_health.as_ref() else { return Ok(()) };
    let Some((set_health, dirs)) = health_control(ctx, ID).await else { return Ok(()) };
    let within = Duration::from_secs(ctx.profile().guarantees.allocation.as_ref().map_or(60, |a| a.within_seconds));
    ctx.phase("a pod with a claim of the profile's shape, then its device turned unhealthy");
    ctx.create(&ctx.profile_claim(NAME)).await?;
    ctx.create(&ctx.workload(NAME).claim(POD_CLAIM, NAME).build()).await?;
    let Some(claim) = running(ctx, ID, NAME, NAME, within).await else { return Ok(()) };
    let driver = &ctx.target.driver.name;
    let ours: Vec<String> =
        Ctx::allocated(&claim).into_iter().filter(|(d, ..)| d == driver).map(|(_, _, device)| device).collect();
    let Some(device) = ours.first().cloned() else {
        return Err(ScenarioError::Unmet(format!("the claim has no device of {driver}")));
    };

    let first =
        ctx.poll_until(FIRST_ENTRY, || async { ctx.get_pod(NAME).await.as_ref().and_then(entry) }, Option::is_some);
    if first.await.is_err() {
        ctx.skip(
            ID,
            format!(
                "the node's kubelet wrote no allocatedResourcesStatus for claim:{POD_CLAIM} of a running pod within {}s \
                 (feature gate ResourceHealthStatus off, or a kubelet before 1.31)",
                FIRST_ENTRY.as_secs()
            ),
        );
        ctx.delete_pod(NAME, within).await?;
        return Ok(());
    }

    let what = set_health(&dirs, std::slice::from_ref(&device)).map_err(ScenarioError::Unmet)?;
    let outcome = ctx
        .poll_until(
            promised.within(),
            || async { ctx.get_pod(NAME).await.as_ref().and_then(entry) },
            |e| e.as_ref().is_some_and(|e| e.iter().any(|(_, h)| h == "Unhealthy")),
        )
        .await;
    let evidence = if outcome.is_err() { ctx.evidence(NAME).await } else { Vec::new() };
    set_health(&dirs, &[]).map_err(ScenarioError::Unmet)?;
    match outcome {
        Ok((_, took)) => ctx.pass(
            ID,
            format!(
                "{what}: the pod's allocatedResourcesStatus shows claim:{POD_CLAIM} Unhealthy {} later",
                secs(took)
            ),
        ),
        Err(last) => ctx.fail(
            ID,
            format!(
                "{what}; {} later the pod's allocatedResourcesStatus for claim:{POD_CLAIM} still reads {:?}",
                secs(promised.within()),
                last.unwrap_or_default()
            ),
            evidence,
        ),
    }
    ctx.delete_pod(NAME, within).await?;
    super::taints::untainted_again(ctx, &device).await
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ContainerStatus, PodStatus, ResourceHealth, ResourceStatus};

    use super::*;

    fn pod(entries: Vec<(&str, &str)>) -> Pod {
        let status = ContainerStatus {
            name: "c".into(),
            allocated_resources_status: Some(
                entries
                    .into_iter()
                    .map(|(name, health)| ResourceStatus {
                        name: name.into(),
                        resources: Some(vec![ResourceHealth {
                            resource_id: "mock.dracheck.io/gpu=x".into(),
                            health: Some(health.into()),
                            ..Default::default()
                        }]),
                    })
                    .collect(),
            ),
            ..Default::default()
        };
        Pod {
            status: Some(PodStatus { container_statuses: Some(vec![status]), ..Default::default() }),
            ..Default::default()
        }
    }

    #[test]
    fn the_entry_is_the_pods_claim_by_its_name_in_the_pod_spec() {
        assert_eq!(entry(&pod(vec![])), None);
        assert_eq!(entry(&pod(vec![("claim:other", "Unhealthy")])), None, "another claim's entry");
        assert_eq!(entry(&pod(vec![("claim:devices", "Healthy")])).unwrap()[0].1, "Healthy");
        assert_eq!(entry(&pod(vec![("claim:devices/gpu", "Unhealthy")])).unwrap()[0].1, "Unhealthy", "by request");
    }
}
