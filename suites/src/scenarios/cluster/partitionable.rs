//! Partitions of one physical device (`sharedCounters`, DRAPartitionableDevices, beta and on
//! by default in Kubernetes 1.37): a pod holds a partition that takes a whole device (the
//! profile's `whole` selector); then pods ask, one after another on the same node, for the
//! class's other partitions (its parts). The scheduler may give them parts of other devices,
//! but must refuse one before any device's partitions together take more than the device has,
//! as the driver's inventory states it (its oracle; the published counters where the suite has
//! none). A driver that publishes counters larger than the device, or partitions that consume
//! nothing, lets the scheduler hand out overlapping partitions. Once the whole partition's pod
//! and claim go, the refused pod must get its part and run, and its container must see that
//! partition, not the whole device.

use std::collections::BTreeMap;
use std::time::Duration;

use dracheck_objects::quantity::Quantity;
use k8s_openapi::api::resource::v1::{CounterSet, Device, ResourceClaim};
use kube::api::DeleteParams;

use super::common::{Decided, Unread, device_names, judge_sees_all, running, runs_or_refused, secs};
use crate::coverage::RowId::E;
use crate::coverage::Verdict::Covered;
use crate::coverage::{UpstreamRow, e2e};
use crate::engine::{Ctx, Disruption, Role, Scenario, ScenarioError, Tier, served};
use crate::profile::ids::{
    PARTITIONABLE_CAPACITY_RESTORED as RESTORED, PARTITIONABLE_COUNTERS_RESPECTED as RESPECTED,
    PARTITIONABLE_PREPARED_PARTITION as PREPARED,
};

pub static SCENARIO: Scenario = Scenario {
    name: "partitionable",
    tier: Tier::Cluster,
    role: Role::General,
    guarantees: &[RESPECTED, RESTORED, PREPARED],
    disrupts: Disruption::None,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[UpstreamRow {
    id: E(4),
    test: "partitionable devices: must consume and free up counters",
    at: e2e(2509),
    asserts: "the driver publishes its devices' counters and their partitions' consumption right; a waiting pod gets \
                  its partition once another is released",
    guarantees: &[RESPECTED, RESTORED, PREPARED, crate::profile::ids::PLUGIN_SLICES_MATCH_INVENTORY],
    verdict: Covered,
}];

const WHOLE: &str = "whole";
/// More parts than any device has partitions: the loop ends at the scheduler's refusal.
const MAX_PARTS: usize = 16;

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let Some(partitionable) = ctx.profile().guarantees.partitionable.as_ref() else { return Ok(()) };
    let driver = &ctx.target.driver.name;
    if let Some(why) = served::slice_dropped(&ctx.client(), driver, &served::SHARED_COUNTERS).await? {
        for id in SCENARIO.guarantees {
            ctx.skip(id, &why);
        }
        return Ok(());
    }
    let g = &ctx.profile().guarantees;
    let within = Duration::from_secs(g.allocation.as_ref().map_or(60, |a| a.within_seconds));
    let recovery = g.capacity_recovery.as_ref().map_or(within, |c| c.within());

    ctx.phase("a pod with a partition that takes a whole device");
    ctx.create(&ctx.profile().claim().selector(&partitionable.whole).claim(&ctx.ns, WHOLE)).await?;
    ctx.create(&ctx.workload(WHOLE).claim("devices", WHOLE).build()).await?;
    let Some(whole) = running(ctx, RESPECTED, WHOLE, WHOLE, within).await else {
        ctx.fail(RESTORED, "no pod held a whole device", Vec::new());
        ctx.fail(PREPARED, "no pod held a whole device", Vec::new());
        return Ok(());
    };
    // Every pod of the scenario runs on its node.
    let node = ctx.node.clone();
    let part_selector = format!("!({})", partitionable.whole);

    ctx.phase("pods with parts of a device, on the same node, until the scheduler refuses one");
    let mut held: Vec<ResourceClaim> = vec![whole.clone()];
    let mut refused = None;
    for i in 0..MAX_PARTS {
        let name = format!("part-{i}");
        ctx.create(&ctx.profile().claim().selector(&part_selector).claim(&ctx.ns, &name)).await?;
        ctx.create(&ctx.workload(&name).claim("devices", &name).build()).await?;
        match runs_or_refused(ctx, &name, within).await {
            Some(Decided::Runs) => {
                let Some(claim) = ctx.get_claim(&name).await else { continue };
                held.push(claim);
                if let Some(over) = overcommitted(ctx, &node, &held).await? {
                    ctx.fail(RESPECTED, over, ctx.evidence(&name).await);
                    ctx.fail(RESTORED, "the scheduler refused no part while the whole device was held", Vec::new());
                    return judge_prepared(ctx, &name).await;
                }
            }
            Some(Decided::Refused(message)) => {
                refused = Some((name, message));
                break;
            }
            None => {
                ctx.fail(
                    RESPECTED,
                    format!("pod {name} neither ran nor was refused within {}", secs(within)),
                    ctx.evidence(&name).await,
                );
                ctx.fail(RESTORED, "no pod waited for the whole device's capacity", Vec::new());
                ctx.fail(PREPARED, "no pod of a part ran", Vec::new());
                return Ok(());
            }
        }
    }
    let Some((waiting, message)) = refused else {
        ctx.fail(
            RESPECTED,
            format!("{MAX_PARTS} pods with parts ran beside the whole device on {node}, none was refused"),
            ctx.evidence(WHOLE).await,
        );
        ctx.fail(RESTORED, "no pod waited for the whole device's capacity", Vec::new());
        return judge_prepared(ctx, "part-0").await;
    };
    let others: Vec<String> = held.iter().skip(1).flat_map(device_names).collect();
    ctx.pass(
        RESPECTED,
        format!(
            "with {:?} (whole) and {others:?} allocated on {node}, pod {waiting} was refused: {message}",
            device_names(&whole)
        ),
    );

    ctx.phase("the whole device freed: the waiting pod gets its part");
    ctx.delete_pod(WHOLE, within).await?;
    let _ = ctx.api::<ResourceClaim>().delete(WHOLE, &DeleteParams::default()).await;
    let Some(part) = running(ctx, RESTORED, &waiting, &waiting, recovery).await else {
        ctx.fail(PREPARED, format!("pod {waiting} never ran"), Vec::new());
        return Ok(());
    };
    ctx.pass(
        RESTORED,
        format!(
            "after the whole device's claim went, pod {waiting} got {:?} within {}s",
            device_names(&part),
            recovery.as_secs()
        ),
    );
    judge_prepared(ctx, &waiting).await
}

/// Records whether the container of `pod` (running) sees exactly its claim's partition.
async fn judge_prepared(ctx: &Ctx<'_>, pod: &str) -> Result<(), ScenarioError> {
    let Some(claim) = ctx.get_claim(pod).await else {
        ctx.fail(PREPARED, format!("claim {pod} is gone"), Vec::new());
        return Ok(());
    };
    judge_sees_all(ctx, PREPARED, pod, &[&claim], Unread::Skip, |seen| {
        format!("pod {pod}: {}, its partition", seen.unwrap_or_default())
    })
    .await;
    Ok(())
}

/// Where the devices allocated to `held` on `node` together take more of a device's counters
/// than it has, what they take; `None` where they fit. The counters and consumptions are the
/// driver's inventory's, as its oracle states them, else as published.
async fn overcommitted(ctx: &Ctx<'_>, node: &str, held: &[ResourceClaim]) -> Result<Option<String>, ScenarioError> {
    let adapter = &ctx.target.adapter;
    let (devices, sets): (Vec<Device>, Vec<CounterSet>) = match (&adapter.oracle, &adapter.counter_oracle) {
        (Some(devices), Some(sets)) => (devices(node)?, sets(node)?),
        _ => {
            let slices = ctx.slices_of(node).await;
            let devices = slices.iter().flat_map(|s| s.spec.devices.clone().unwrap_or_default()).collect();
            let sets = slices.iter().flat_map(|s| s.spec.shared_counters.clone().unwrap_or_default()).collect();
            (devices, sets)
        }
    };
    let allocated: Vec<String> = held.iter().flat_map(device_names).collect();
    let mut taken: BTreeMap<(String, String), (Quantity, Vec<String>)> = BTreeMap::new();
    for device in devices.iter().filter(|d| allocated.contains(&d.name)) {
        for consumption in device.consumes_counters.iter().flatten() {
            for (counter, value) in &consumption.counters {
                let Ok(value) = Quantity::parse(&value.value.0) else { continue };
                let entry = taken
                    .entry((consumption.counter_set.clone(), counter.clone()))
                    .or_insert_with(|| (Quantity::from_int(0), Vec::new()));
                entry.0 = entry.0.add(&value).unwrap_or(value);
                entry.1.push(device.name.clone());
            }
        }
    }
    for ((set, counter), (sum, by)) in &taken {
        let has = sets
            .iter()
            .find(|s| &s.name == set)
            .and_then(|s| s.counters.get(counter))
            .and_then(|c| Quantity::parse(&c.value.0).ok());
        if let Some(has) = has
            && sum.as_float() > has.as_float()
        {
            return Ok(Some(format!(
                "{by:?} are allocated together on {node} and take {sum} of counter {counter} of {set}, which has {has}"
            )));
        }
    }
    Ok(None)
}
