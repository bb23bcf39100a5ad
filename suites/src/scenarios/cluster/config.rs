//! The driver's opaque configuration reaches the containers it is meant for. The suite uses
//! two configurations of the driver that a workload can tell apart (its adapter's
//! [`ConfigProbe`]): the first in a class made from the profile's, the second in claims. A
//! claim of the profile's shape on that class, with the second configuration: its container
//! shows the claim's (the API applies the class's first, the claim's after). Then a claim whose
//! first request is split in two, `first` and `second`, the claim's configuration for `first`
//! only, in a pod with a container per request, one using the whole claim and an init
//! container using it too: each container sees only its request's device, `first`'s with the
//! claim's configuration, `second`'s with the class's.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceClassConfiguration, OpaqueDeviceConfiguration, ResourceClaim};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{Api, DeleteParams, LogParams};

use super::common::{device_names, running};
use crate::adapters::{ConfigProbe, DeviceKey, sees_exactly};
use crate::coverage::RowId::C;
use crate::coverage::Verdict::{Covered, Partial};
use crate::coverage::{UpstreamRow, e2e};
use crate::engine::{ApiContext, Ctx, Role, Scenario, ScenarioError, Tier};
use crate::profile::ids;

pub static SCENARIO: Scenario = Scenario {
    name: "config",
    tier: Tier::Cluster,
    // Needs every device of the profile's claim and then two at once on one node, as the
    // exhaustion scenario does before it.
    role: Role::Exhaustion,
    guarantees: &[ids::CONFIG_CLASS_AND_CLAIM, ids::CONFIG_PER_REQUEST],
    disrupts: crate::engine::Disruption::None,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: C(1),
        test: "supports claim and class parameters",
        at: e2e(1475),
        asserts: "the class's and the claim's opaque configuration reach the container",
        guarantees: &[ids::CONFIG_CLASS_AND_CLAIM, ids::CONFIG_PER_REQUEST],
        verdict: Covered,
    },
    UpstreamRow {
        id: C(2),
        test: "must map configs and devices to the right containers",
        at: e2e(409),
        asserts: "of three claims of three requests each, prepared in one call with configurations per claim and per \
                  request, each container gets only its request's devices and configuration",
        guarantees: &[ids::CONFIG_PER_REQUEST],
        verdict: Partial(
            "the pod here has one claim of two requests, so no prepare carries several claims and no configuration \
             belongs to one claim among several",
        ),
    },
    UpstreamRow {
        id: C(3),
        test: "supports init containers with external claims",
        at: e2e(1133),
        asserts: "an init container using a standalone claim gets its devices and configuration",
        guarantees: &[ids::CONFIG_PER_REQUEST],
        verdict: Covered,
    },
    UpstreamRow {
        id: C(4),
        test: "supports init containers",
        at: e2e(1661),
        asserts: "the same with a claim made from a template, which is the same claim to the driver",
        guarantees: &[ids::CONFIG_PER_REQUEST],
        verdict: Covered,
    },
    UpstreamRow {
        id: C(7),
        test: "supports inline claim referenced by multiple containers",
        at: e2e(1620),
        asserts: "a claim prepared once serves several containers of its pod",
        guarantees: &[ids::CONFIG_PER_REQUEST],
        verdict: Covered,
    },
];

/// The requests the profile's first request is split into.
const REQUESTS: [&str; 2] = ["first", "second"];
/// The container of the per-request pod that uses the whole claim (the pod's first).
pub(super) const WHOLE: &str = "workload";
/// Its init container, which uses the whole claim too and ends before the others start.
const INIT: &str = "init";

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let Some(probe) = probe(ctx, SCENARIO.guarantees) else { return Ok(()) };
    let within = Duration::from_secs(ctx.profile().guarantees.allocation.as_ref().map_or(60, |a| a.within_seconds));
    let class = format!("{}-config", ctx.ns);
    ctx.phase("a DeviceClass like the profile's, with a configuration of its own");
    ctx.create_class(&class_with_config(ctx, &class, &probe).await?).await?;

    class_and_claim(ctx, &probe, &class, within).await?;
    per_request(ctx, &probe, &class, within).await
}

/// Which of the probe's configurations the class gives and which the claims give.
pub(super) const CLASS: usize = 0;
pub(super) const CLAIM: usize = 1;

/// How the driver's workloads show its opaque configuration; `None`, with `ids` skipped and
/// the reason, where the suite does not know it.
pub(super) fn probe(ctx: &Ctx<'_>, ids: &[&str]) -> Option<ConfigProbe> {
    let workload = &ctx.target.adapter.workload;
    match (workload.config, workload.key) {
        (Some(probe), DeviceKey::Name) => Some(probe),
        (None, _) | (_, DeviceKey::Attribute(_)) => {
            let why = format!(
                "the suite does not know how driver {} shows its opaque configuration in a container",
                ctx.target.driver.name
            );
            for id in ids {
                ctx.skip(id, &why);
            }
            None
        }
    }
}

/// The profile's class (its spec, or the existing class's) with the class settings as config.
async fn class_with_config(ctx: &Ctx<'_>, name: &str, probe: &ConfigProbe) -> Result<DeviceClass, ScenarioError> {
    let profile_class = match ctx.profile().device_class() {
        Some(class) => class,
        None => {
            let existing = ctx.profile().class_name();
            Api::<DeviceClass>::all(ctx.client())
                .get(existing)
                .await
                .doing(|| format!("reading DeviceClass {existing}, which the profile uses"))?
        }
    };
    let mut spec = profile_class.spec.unwrap_or_default();
    // An extended resource name is one class's; this copy must not take it over.
    spec.extended_resource_name = None;
    spec.config.get_or_insert_default().push(DeviceClassConfiguration {
        opaque: Some(OpaqueDeviceConfiguration {
            driver: ctx.target.driver.name.clone(),
            parameters: RawExtension((probe.parameters)(CLASS)),
        }),
    });
    let metadata = kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() };
    Ok(DeviceClass { metadata, spec: Some(spec) })
}

/// `config.class-and-claim`: the profile's claim on the class with config, plus a claim config.
async fn class_and_claim(
    ctx: &Ctx<'_>,
    probe: &ConfigProbe,
    class: &str,
    within: Duration,
) -> Result<(), ScenarioError> {
    let id = ids::CONFIG_CLASS_AND_CLAIM;
    ctx.phase("the profile's claim with a configuration, on that class");
    let driver = &ctx.target.driver.name;
    let claim = ctx.profile().claim().class_everywhere(class).config(&[], driver, (probe.parameters)(CLAIM));
    ctx.create(&claim.claim(&ctx.ns, "configured")).await?;
    ctx.create(&ctx.workload("configured").claim("devices", "configured").build()).await?;
    let Some(claim) = running(ctx, id, "configured", "configured", within).await else { return Ok(()) };

    let expected: BTreeMap<String, usize> = device_names(&claim).into_iter().map(|d| (d, CLAIM)).collect();
    match shows(ctx, probe, "configured", WHOLE, &expected).await {
        Ok(()) => {
            ctx.pass(id, format!("each of {:?} shows the claim's configuration, not the class's", device_names(&claim)))
        }
        Err(why) => ctx.fail(id, why, ctx.evidence("configured").await),
    }
    // The next claim needs devices of this one on a node of the profile's size.
    ctx.delete_pod("configured", within).await?;
    let _ = ctx.api::<ResourceClaim>().delete("configured", &DeleteParams::default()).await;
    Ok(())
}

/// `config.per-request`: the claim's configuration for the first request only, a container per
/// request and one for the whole claim.
async fn per_request(ctx: &Ctx<'_>, probe: &ConfigProbe, class: &str, within: Duration) -> Result<(), ScenarioError> {
    let id = ids::CONFIG_PER_REQUEST;
    ctx.phase("a claim of two requests, a configuration for the first, a container per request and one for both");
    let driver = &ctx.target.driver.name;
    let [first, second] = REQUESTS;
    let claim = ctx.profile().claim().first_per_name(&REQUESTS).class_everywhere(class).config(
        &[first],
        driver,
        (probe.parameters)(CLAIM),
    );
    ctx.create(&claim.claim(&ctx.ns, "per-request")).await?;
    let workload = &ctx.target.adapter.workload;
    let show = workload.show_and_wait();
    let pod = REQUESTS
        .iter()
        .fold(ctx.workload("per-request").claim("devices", "per-request"), |pod, r| {
            pod.container(r, &show, "devices", Some(r))
        })
        .init_container(INIT, &workload.show, "devices", None);
    ctx.create(&pod.build()).await?;
    // Devices of the claim before may still be held until the kubelet has unprepared them.
    let Some(claim) = running(ctx, id, "per-request", "per-request", within * 2).await else { return Ok(()) };

    let by_request: BTreeMap<String, String> = results(ctx, &claim).into_iter().collect();
    let mut wrong = Vec::new();
    let mut whole = BTreeMap::new();
    for (r, config) in [(first, CLAIM), (second, CLASS)] {
        let Some(device) = by_request.get(r) else {
            wrong.push(format!("request {r} has no device in the claim's allocation"));
            continue;
        };
        whole.insert(device.clone(), config);
        if let Err(why) = shows(ctx, probe, "per-request", r, &BTreeMap::from([(device.clone(), config)])).await {
            wrong.push(format!("container {r} (request {r}): {why}"));
        }
    }
    for (container, what) in [(WHOLE, "the whole claim"), (INIT, "an init container with the whole claim")] {
        if let Err(why) = shows(ctx, probe, "per-request", container, &whole).await {
            wrong.push(format!("container {container} ({what}): {why}"));
        }
    }
    if wrong.is_empty() {
        ctx.pass(
            id,
            format!(
                "each request's container sees only its device, {first}'s with the claim's configuration and \
                 {second}'s with the class's, and the init container and a container with the whole claim both: {}",
                describe(&whole)
            ),
        );
    } else {
        ctx.fail(id, wrong.join("; "), ctx.evidence("per-request").await);
    }
    Ok(())
}

/// Which configuration each device has, in words.
pub(super) fn describe(devices: &BTreeMap<String, usize>) -> String {
    devices.iter().map(|(d, c)| format!("{d}: {}", which(Some(*c)))).collect::<Vec<_>>().join(", ")
}

fn which(config: Option<usize>) -> &'static str {
    match config {
        Some(CLASS) => "the class's configuration",
        Some(CLAIM) => "the claim's configuration",
        Some(_) => "another configuration",
        None => "neither configuration",
    }
}

/// `(request, device)` of each allocation result of the driver under test.
pub(super) fn results(ctx: &Ctx<'_>, claim: &ResourceClaim) -> Vec<(String, String)> {
    Ctx::allocation_results(claim)
        .filter(|r| r.driver == ctx.target.driver.name)
        .map(|r| (r.request.clone(), r.device.clone()))
        .collect()
}

/// Whether container `container` of `pod` shows exactly the devices of `expected`, each with
/// its configuration. The log fills as the container starts; it gets a few seconds.
pub(super) async fn shows(
    ctx: &Ctx<'_>,
    probe: &ConfigProbe,
    pod: &str,
    container: &str,
    expected: &BTreeMap<String, usize>,
) -> Result<(), String> {
    let params = LogParams { container: Some(container.into()), ..LogParams::default() };
    let read = || async { ctx.api::<Pod>().logs(pod, &params).await.unwrap_or_default() };
    let judge = |log: &String| -> Result<(), String> {
        let seen = (probe.seen)(log);
        let devices: Vec<String> = expected.keys().cloned().collect();
        sees_exactly(seen.keys().cloned().collect(), &devices).map_err(|e| e.to_string())?;
        let off: Vec<String> = expected
            .iter()
            .filter(|(device, want)| seen[*device] != Some(**want))
            .map(|(device, want)| format!("device {device} shows {}, not {}", which(seen[device]), which(Some(*want))))
            .collect();
        if off.is_empty() { Ok(()) } else { Err(off.join("; ")) }
    };
    match ctx.poll_until(Duration::from_secs(15), read, |log| judge(log).is_ok()).await {
        Ok(_) => Ok(()),
        Err(log) => judge(&log),
    }
}
