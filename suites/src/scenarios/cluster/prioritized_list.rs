//! A request with alternatives (`firstAvailable`, GA in Kubernetes 1.36). The profile's first
//! request becomes a list of three: `none` (its selectors and one that no device matches),
//! `fits` and `also-fits` (both the request as written); the claim has one more request,
//! `other`, for a device of the profile's class. The scheduler must take the first alternative
//! that fits, `fits`, and name its results `<request>/fits`. The claim configures the whole
//! request (`<request>`) and, after that, the alternatives not to be chosen (`<request>/none`,
//! `<request>/also-fits`) with another value. A container of the pod uses `<request>` alone
//! (`resources.claims[].request`): it must see the device of `fits` with the whole request's
//! configuration. What a driver gets wrong here: matching configurations to results by the
//! exact request name (`<request>` is not `<request>/fits`: the device shows none), and
//! answering the kubelet with `<request>/fits` as the device's request name (the upstream helper
//! strips the alternative; the kubelet gives the container, which names `<request>`, nothing).
//! The scheduler passes on only the chosen alternative's and the whole request's
//! configurations, and the second request keeps it from folding the whole request's into "all
//! requests".

use std::collections::BTreeMap;
use std::time::Duration;

use super::common::running;
use super::config::{CLAIM, CLASS, describe, probe, results, shows};
use crate::coverage::RowId::E;
use crate::coverage::Verdict::{Covered, Partial};
use crate::coverage::{UpstreamRow, e2e};
use crate::engine::{Ctx, Disruption, Role, Scenario, ScenarioError, Tier, served};
use crate::profile::ids;

pub static SCENARIO: Scenario = Scenario {
    name: "prioritized-list",
    tier: Tier::Cluster,
    // The profile's claim on one node, beside nothing else, after the configuration checks.
    role: Role::Exhaustion,
    guarantees: &[ids::PRIORITIZED_CHOSEN_SUBREQUEST],
    disrupts: Disruption::None,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: E(1),
        test: "prioritized list: selects the first subrequest that can be satisfied",
        at: e2e(1924),
        asserts: "prepare answers results of a request with alternatives, named `<request>/<subrequest>`, so that the \
                  container naming the request gets the device",
        guarantees: &[ids::PRIORITIZED_CHOSEN_SUBREQUEST],
        verdict: Covered,
    },
    UpstreamRow {
        id: E(2),
        test: "prioritized list: uses the config for the selected subrequest",
        at: e2e(1997),
        asserts: "the whole request's configuration and the chosen subrequest's own reach the container",
        guarantees: &[ids::PRIORITIZED_CHOSEN_SUBREQUEST],
        verdict: Partial(
            "the chosen alternative never gets a configuration of its own, so a driver that ignores configurations \
             naming the exact subrequest passes",
        ),
    },
    UpstreamRow {
        id: E(3),
        test: "prioritized list: filters config correctly for multiple devices",
        at: e2e(2167),
        asserts: "with two drivers and two requests configured per request and per subrequest, each container gets its \
                  request's devices with their configurations only",
        guarantees: &[ids::PRIORITIZED_CHOSEN_SUBREQUEST],
        verdict: Partial(
            "one driver takes part, and the claim's second request has neither a container nor a configuration",
        ),
    },
];

const NONE: &str = "none";
const FITS: &str = "fits";
const ALSO_FITS: &str = "also-fits";
/// The claim's second request.
const OTHER: &str = "other";

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let id = ids::PRIORITIZED_CHOSEN_SUBREQUEST;
    let Some(probe) = probe(ctx, SCENARIO.guarantees) else { return Ok(()) };
    let within = Duration::from_secs(ctx.profile().guarantees.allocation.as_ref().map_or(60, |a| a.within_seconds));
    let driver = &ctx.target.driver.name;
    let request = ctx.profile().claim().spec().devices.and_then(|d| d.requests).and_then(|r| r.into_iter().next());
    let Some(request) = request.map(|r| r.name) else {
        ctx.skip(id, "the profile's claim has no request");
        return Ok(());
    };
    let matches_nothing = format!("device.driver == {:?}", format!("{driver}.invalid"));
    let sub = |s: &str| format!("{request}/{s}");
    let claim = ctx
        .profile()
        .claim()
        .first_available(&[(NONE, &[matches_nothing.as_str()]), (FITS, &[]), (ALSO_FITS, &[])])
        .and_request(OTHER, ctx.profile().class_name(), 1)
        .config(&[&request], driver, (probe.parameters)(CLAIM))
        .config(&[&sub(NONE), &sub(ALSO_FITS)], driver, (probe.parameters)(CLASS))
        .claim(&ctx.ns, "alternatives");
    if let Some(why) = served::dropped(&ctx.client(), &claim, &served::FIRST_AVAILABLE).await? {
        ctx.skip(id, why);
        return Ok(());
    }

    ctx.phase("a claim whose request lists alternatives, the first matching nothing, configured as a whole and per alternative");
    ctx.create(&claim).await?;
    let show = ctx.target.adapter.workload.show_and_wait();
    let pod = ctx.workload("alternatives").claim("devices", "alternatives").container(
        &request,
        &show,
        "devices",
        Some(&request),
    );
    ctx.create(&pod.build()).await?;
    // Devices of the scenario before may still be held until the kubelet has unprepared them.
    let Some(claim) = running(ctx, id, "alternatives", "alternatives", within * 2).await else { return Ok(()) };

    let allocated: Vec<(String, String)> = results(ctx, &claim).into_iter().filter(|(r, _)| r != OTHER).collect();
    let wrong: Vec<&str> = allocated.iter().map(|(r, _)| r.as_str()).filter(|r| *r != sub(FITS)).collect();
    if allocated.is_empty() || !wrong.is_empty() {
        let why = format!(
            "the claim's results are for {:?}, not all for {} (the first alternative that fits)",
            allocated.iter().map(|(r, _)| r).collect::<Vec<_>>(),
            sub(FITS)
        );
        ctx.fail(id, why, ctx.evidence("alternatives").await);
        return Ok(());
    }
    let expected: BTreeMap<String, usize> = allocated.into_iter().map(|(_, d)| (d, CLAIM)).collect();
    match shows(ctx, &probe, "alternatives", &request, &expected).await {
        Ok(()) => ctx.pass(
            id,
            format!(
                "allocated for {} ({NONE} matches nothing, {ALSO_FITS} comes after), and the container of request \
                 {request} sees its device with the configuration given for the whole request, none of the others: {}",
                sub(FITS),
                describe(&expected)
            ),
        ),
        Err(why) => ctx.fail(
            id,
            format!(
                "allocated for {}, but the container of request {request}: {why} (the claim's: given for the whole \
                 request; the class's: given for the alternatives not chosen)",
                sub(FITS)
            ),
            ctx.evidence("alternatives").await,
        ),
    }
    ctx.delete_pod("alternatives", within).await?;
    Ok(())
}
