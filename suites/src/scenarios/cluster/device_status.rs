//! The driver reports what it prepared in the claim's status (`status.devices`,
//! DRAResourceClaimDeviceStatus, GA in Kubernetes 1.37): once a pod with a claim of the
//! profile's shape runs, the claim must soon list every device allocated to the driver, each
//! with the condition types the profile documents `True`. The API refuses entries for devices
//! the claim was not allocated, so what is left to a driver is to report at all, to report
//! every device, and to report the conditions it promises.

use std::time::Duration;

use k8s_openapi::api::resource::v1::ResourceClaim;

use super::common::{running, secs};
use crate::coverage::RowId::E;
use crate::coverage::Verdict::Partial;
use crate::coverage::{UpstreamRow, e2e};
use crate::engine::{Ctx, Disruption, Role, Scenario, ScenarioError, Tier};
use crate::profile::ids::DEVICE_STATUS_REPORTED as ID;

pub static SCENARIO: Scenario = Scenario {
    name: "device-status",
    tier: Tier::Cluster,
    role: Role::General,
    guarantees: &[ID],
    disrupts: Disruption::None,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[UpstreamRow {
    id: E(20),
    test: "must be possible for a node ServiceAccount to update the node ResourceClaim.Status.Devices",
    at: e2e(4219),
    asserts: "the driver's node credentials may write the device status of its node's claims",
    guarantees: &[ID],
    verdict: Partial(
        "the status is read as the driver writes it, but on the local cluster the driver writes with an \
             administrator's credentials, so an installation whose node account lacks the right passes",
    ),
}];

const NAME: &str = "status";

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let Some(promised) = ctx.profile().guarantees.device_status.as_ref() else { return Ok(()) };
    let within = Duration::from_secs(ctx.profile().guarantees.allocation.as_ref().map_or(60, |a| a.within_seconds));
    ctx.phase("a pod with a claim of the profile's shape, then the claim's device status");
    ctx.create(&ctx.profile_claim(NAME)).await?;
    ctx.create(&ctx.workload(NAME).claim("devices", NAME).build()).await?;
    let Some(claim) = running(ctx, ID, NAME, NAME, within).await else { return Ok(()) };
    let driver = &ctx.target.driver.name;
    let ours: Vec<(String, String)> = Ctx::allocated(&claim)
        .into_iter()
        .filter(|(d, ..)| d == driver)
        .map(|(_, pool, device)| (pool, device))
        .collect();

    let outcome = ctx
        .poll_until(
            promised.within(),
            || async {
                ctx.get_claim(NAME).await.map_or_else(
                    || Err("the claim is gone".to_string()),
                    |c| missing(&c, driver, &ours, &promised.conditions),
                )
            },
            |m| m.is_ok(),
        )
        .await;
    let conditions = if promised.conditions.is_empty() {
        String::new()
    } else {
        format!(" with {} True", promised.conditions.join(", "))
    };
    match outcome {
        Ok((_, took)) => ctx.pass(
            ID,
            format!(
                "{} device(s) {ours:?} reported in status.devices{conditions} {} after the pod ran",
                ours.len(),
                secs(took)
            ),
        ),
        Err(last) => ctx.fail(
            ID,
            format!(
                "{} after the pod ran, {}",
                secs(promised.within()),
                last.err().unwrap_or_else(|| "the status was not read".into())
            ),
            ctx.evidence(NAME).await,
        ),
    }
    ctx.delete_pod(NAME, within).await?;
    Ok(())
}

/// `Ok` where `claim`'s status reports each of `ours` (pool, device) of `driver` with each of
/// `conditions` True; otherwise what is missing.
fn missing(
    claim: &ResourceClaim,
    driver: &str,
    ours: &[(String, String)],
    conditions: &[String],
) -> Result<(), String> {
    let reported = claim.status.as_ref().and_then(|s| s.devices.as_deref()).unwrap_or_default();
    let mut gaps = Vec::new();
    for (pool, device) in ours {
        let Some(entry) = reported.iter().find(|e| e.driver == driver && &e.pool == pool && &e.device == device) else {
            gaps.push(format!("{pool}/{device} has no entry"));
            continue;
        };
        for wanted in conditions {
            match entry.conditions.iter().flatten().find(|c| &c.type_ == wanted) {
                Some(c) if c.status == "True" => {}
                Some(c) => {
                    gaps.push(format!("{pool}/{device}: {wanted} is {} ({}: {})", c.status, c.reason, c.message))
                }
                None => gaps.push(format!("{pool}/{device}: no {wanted} condition")),
            }
        }
    }
    if gaps.is_empty() { Ok(()) } else { Err(format!("status.devices: {}", gaps.join("; "))) }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::resource::v1::{AllocatedDeviceStatus, ResourceClaimStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

    use super::*;

    fn claim(entries: Vec<AllocatedDeviceStatus>) -> ResourceClaim {
        ResourceClaim {
            status: Some(ResourceClaimStatus { devices: Some(entries), ..Default::default() }),
            ..Default::default()
        }
    }

    fn entry(device: &str, ready: Option<&str>) -> AllocatedDeviceStatus {
        AllocatedDeviceStatus {
            driver: "d".into(),
            pool: "p".into(),
            device: device.into(),
            conditions: ready.map(|s| {
                vec![Condition {
                    type_: "Ready".into(),
                    status: s.into(),
                    reason: "R".into(),
                    message: String::new(),
                    last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                    ),
                    observed_generation: None,
                }]
            }),
            ..Default::default()
        }
    }

    #[test]
    fn every_allocated_device_needs_an_entry_with_each_promised_condition_true() {
        let ours = [("p".to_string(), "a".to_string()), ("p".to_string(), "b".to_string())];
        let ready = ["Ready".to_string()];
        assert_eq!(
            missing(&claim(vec![entry("a", Some("True")), entry("b", Some("True"))]), "d", &ours, &ready),
            Ok(())
        );
        let gaps = missing(&claim(vec![entry("a", Some("False")), entry("c", Some("True"))]), "d", &ours, &ready);
        let gaps = gaps.unwrap_err();
        assert!(gaps.contains("p/a: Ready is False") && gaps.contains("p/b has no entry"), "{gaps}");
        assert!(
            missing(&claim(vec![entry("a", None), entry("b", None)]), "d", &ours, &ready)
                .unwrap_err()
                .contains("no Ready")
        );
        assert_eq!(missing(&claim(vec![entry("a", None), entry("b", None)]), "d", &ours, &[]), Ok(()), "entries alone");
        assert!(
            missing(&claim(vec![entry("a", Some("True"))]), "other", &ours[..1], &ready).is_err(),
            "another driver's"
        );
    }
}
