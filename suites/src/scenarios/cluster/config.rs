//! The driver's opaque configuration reaches the containers it is meant for. A class made from
//! the profile's, with a config of its own, and a claim of the profile's shape with the
//! claim's config, which sets one of the class's settings too: its container sees the claim's
//! values. Then a claim whose first request is split in two, `first` and `second`, a config
//! for `first` only, in a pod with a container per request and one using the whole claim: each
//! container sees only its request's device, `first`'s with its config, `second`'s with the
//! class's and not `first`'s.
//!
//! What a container shows of its configuration is the driver's to say (its adapter's
//! [`ConfigProbe`]); the settings the suite chooses are named `dracheck_*` so that they cannot
//! collide with the profile's own config.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::resource::v1::{DeviceClass, DeviceClassConfiguration, OpaqueDeviceConfiguration, ResourceClaim};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{Api, DeleteParams, LogParams};

use super::common::{allocated, device_names};
use crate::adapters::{ConfigProbe, DeviceKey, Settings, sees_exactly};
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

/// The requests the profile's first request is split into.
const REQUESTS: [&str; 2] = ["first", "second"];
/// The container of the per-request pod that uses the whole claim (the pod's first).
const WHOLE: &str = "workload";

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let workload = &ctx.target.adapter.workload;
    let probe = match (workload.config, workload.key) {
        (Some(probe), DeviceKey::Name) => probe,
        (None, _) | (_, DeviceKey::Attribute(_)) => {
            let why = format!(
                "the suite does not know how driver {} shows its opaque configuration in a container",
                ctx.target.driver.name
            );
            for id in SCENARIO.guarantees {
                ctx.skip(id, &why);
            }
            return Ok(());
        }
    };
    let within = Duration::from_secs(ctx.profile().guarantees.allocation.as_ref().map_or(60, |a| a.within_seconds));
    let class = format!("{}-config", ctx.ns);
    ctx.phase("a DeviceClass like the profile's, with a configuration of its own");
    ctx.create_class(&class_with_config(ctx, &class, &probe).await?).await?;

    class_and_claim(ctx, &probe, &class, within).await?;
    per_request(ctx, &probe, &class, within).await
}

fn settings(pairs: &[(&str, &str)]) -> Settings {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The class's settings: one of its own and one the claim sets too.
fn class_settings() -> Settings {
    settings(&[("dracheck_class", "class"), ("dracheck_both", "class")])
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
            parameters: RawExtension((probe.parameters)(&class_settings())),
        }),
    });
    let metadata = kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() };
    Ok(DeviceClass { metadata, spec: Some(spec) })
}

/// What a device must show of its configuration: these settings, and none of `absent`.
/// Nothing else is judged: whether a driver merges the class's settings into the claim's or
/// takes the claim's config alone is the driver's choice (upstream's test driver merges, the
/// example driver takes the last config), and a profile's own config may add settings.
#[derive(Debug, Clone)]
struct Expect {
    want: Settings,
    absent: Vec<&'static str>,
}

/// `config.class-and-claim`: the profile's claim on the class with config, plus a claim config
/// that sets one of the class's settings too: the claim's values reach the container.
async fn class_and_claim(
    ctx: &Ctx<'_>,
    probe: &ConfigProbe,
    class: &str,
    within: Duration,
) -> Result<(), ScenarioError> {
    let id = ids::CONFIG_CLASS_AND_CLAIM;
    ctx.phase("the profile's claim with a configuration, on that class");
    let claim_settings = settings(&[("dracheck_claim", "claim"), ("dracheck_both", "claim")]);
    let driver = &ctx.target.driver.name;
    let claim = ctx.profile().claim().class_everywhere(class).config(&[], driver, (probe.parameters)(&claim_settings));
    ctx.create(&claim.claim(&ctx.ns, "configured")).await?;
    ctx.create(&ctx.workload("configured").claim("devices", "configured").build()).await?;
    let Some(claim) = running(ctx, id, "configured", "configured", within).await else { return Ok(()) };

    let expect = Expect { want: claim_settings, absent: Vec::new() };
    let expected: BTreeMap<String, Expect> = device_names(&claim).into_iter().map(|d| (d, expect.clone())).collect();
    match shows(ctx, probe, "configured", WHOLE, &expected).await {
        Ok(()) => ctx.pass(
            id,
            format!(
                "each of {:?} shows the claim's settings {:?}, also the one the class sets too",
                device_names(&claim),
                expect.want
            ),
        ),
        Err(why) => ctx.fail(id, why, ctx.evidence("configured").await),
    }
    // The next claim needs devices of this one on a node of the profile's size.
    ctx.delete_pod("configured", within).await?;
    let _ = ctx.api::<ResourceClaim>().delete("configured", &DeleteParams::default()).await;
    Ok(())
}

/// `config.per-request`: a claim config for the first request only, a container per request
/// and one for the whole claim. The first request's device shows its config; the second's
/// shows the class's config and not the first request's.
async fn per_request(ctx: &Ctx<'_>, probe: &ConfigProbe, class: &str, within: Duration) -> Result<(), ScenarioError> {
    let id = ids::CONFIG_PER_REQUEST;
    ctx.phase("a claim of two requests, a configuration for the first, a container per request and one for both");
    let driver = &ctx.target.driver.name;
    let [first, second] = REQUESTS;
    let first_settings = settings(&[("dracheck_request", first)]);
    let claim = ctx.profile().claim().first_per_name(&REQUESTS).class_everywhere(class).config(
        &[first],
        driver,
        (probe.parameters)(&first_settings),
    );
    ctx.create(&claim.claim(&ctx.ns, "per-request")).await?;
    let show = ctx.target.adapter.workload.show_and_wait();
    let pod = REQUESTS.iter().fold(ctx.workload("per-request").claim("devices", "per-request"), |pod, r| {
        pod.container(r, &show, "devices", Some(r))
    });
    ctx.create(&pod.build()).await?;
    // Devices of the claim before may still be held until the kubelet has unprepared them.
    let Some(claim) = running(ctx, id, "per-request", "per-request", within * 2).await else { return Ok(()) };

    let by_request: BTreeMap<String, String> = results(ctx, &claim).into_iter().collect();
    let expect = |r: &str| {
        if r == first {
            Expect { want: first_settings.clone(), absent: Vec::new() }
        } else {
            Expect { want: class_settings(), absent: vec!["dracheck_request"] }
        }
    };
    let mut wrong = Vec::new();
    let mut whole = BTreeMap::new();
    for r in [first, second] {
        let Some(device) = by_request.get(r) else {
            wrong.push(format!("request {r} has no device in the claim's allocation"));
            continue;
        };
        whole.insert(device.clone(), expect(r));
        let own = BTreeMap::from([(device.clone(), expect(r))]);
        if let Err(why) = shows(ctx, probe, "per-request", r, &own).await {
            wrong.push(format!("container {r} (request {r}): {why}"));
        }
    }
    if let Err(why) = shows(ctx, probe, "per-request", WHOLE, &whole).await {
        wrong.push(format!("container {WHOLE} (the whole claim): {why}"));
    }
    if wrong.is_empty() {
        let devices: Vec<&String> = whole.keys().collect();
        ctx.pass(
            id,
            format!(
                "each request's container sees only its device of {devices:?}; request {first}'s shows its config \
                 {first_settings:?}, request {second}'s the class's {:?} and not {first}'s",
                class_settings()
            ),
        );
    } else {
        ctx.fail(id, wrong.join("; "), ctx.evidence("per-request").await);
    }
    Ok(())
}

/// The claim once allocated and its pod running; `None` (the guarantee failed) otherwise.
async fn running(ctx: &Ctx<'_>, id: &str, claim: &str, pod: &str, within: Duration) -> Option<ResourceClaim> {
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

/// `(request, device)` of each allocation result of the driver under test.
fn results(ctx: &Ctx<'_>, claim: &ResourceClaim) -> Vec<(String, String)> {
    let results = claim.status.as_ref().and_then(|s| s.allocation.as_ref()).and_then(|a| a.devices.as_ref());
    results
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .filter(|r| r.driver == ctx.target.driver.name)
        .map(|r| (r.request.clone(), r.device.clone()))
        .collect()
}

/// Whether container `container` of `pod` shows exactly the devices of `expected`, each as
/// its [`Expect`] says. The log fills as the container starts; it gets a few seconds.
async fn shows(
    ctx: &Ctx<'_>,
    probe: &ConfigProbe,
    pod: &str,
    container: &str,
    expected: &BTreeMap<String, Expect>,
) -> Result<(), String> {
    let params = LogParams { container: Some(container.into()), ..LogParams::default() };
    let read = || async { ctx.api::<k8s_openapi::api::core::v1::Pod>().logs(pod, &params).await.unwrap_or_default() };
    let judge = |log: &String| -> Result<(), String> {
        let seen = (probe.seen)(log);
        let devices: Vec<String> = expected.keys().cloned().collect();
        sees_exactly(seen.keys().cloned().collect(), &devices).map_err(|e| e.to_string())?;
        let off: Vec<String> = expected
            .iter()
            .filter_map(|(device, Expect { want, absent })| {
                let got = &seen[device];
                let missing = want.iter().any(|(k, v)| got.get(k) != Some(v));
                let extra: Vec<&&str> = absent.iter().filter(|k| got.contains_key(**k)).collect();
                (missing || !extra.is_empty()).then(|| {
                    format!("device {device} shows settings {got:?}, which should have {want:?} and none of {absent:?}")
                })
            })
            .collect();
        if off.is_empty() { Ok(()) } else { Err(off.join("; ")) }
    };
    match ctx.poll_until(Duration::from_secs(15), read, |log| judge(log).is_ok()).await {
        Ok(_) => Ok(()),
        Err(log) => judge(&log),
    }
}
