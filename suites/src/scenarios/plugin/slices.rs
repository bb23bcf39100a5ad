//! The node's slices hold exactly the devices of the driver's inventory, and follow the pool
//! rules of a node-local pool: owned by the Node, named after it, one generation, a correct
//! slice count; no slice of the driver claims a node that is not there.

use std::collections::BTreeMap;
use std::time::Duration;

use dracheck_objects::quantity::Quantity;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{CounterSet, ResourceSlice};
use kube::api::{Api, ListParams};

use super::harness::PluginNode;
use crate::adapters::HostCheck;
use crate::coverage::RowId::D;
use crate::coverage::Verdict::{Covered, Partial};
use crate::coverage::{INTEGRATION_CORE, UpstreamRow, e2e, integration};
use crate::engine::{Ctx, ScenarioError, served};
use crate::profile::ids::{PLUGIN_SLICES_MATCH_INVENTORY as MATCH, PLUGIN_SLICES_OWNED_BY_NODE as OWNED};

pub static SCENARIO: crate::engine::Scenario = crate::engine::Scenario {
    name: "plugin-slices",
    tier: crate::engine::Tier::Plugin,
    role: crate::engine::Role::General,
    guarantees: &[MATCH, OWNED],
    disrupts: crate::engine::Disruption::None,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: D(1),
        test: "must manage ResourceSlices",
        at: e2e(1077),
        asserts: "each node's slices have their Node as controlling owner (apiVersion v1, no blockOwnerDeletion), name \
                  the node, form a pool named after it with the right slice count, and hold the driver's devices",
        guarantees: &[OWNED, MATCH],
        verdict: Partial(
            "the owner reference's apiVersion and blockOwnerDeletion are not compared, so a driver that sets \
             blockOwnerDeletion as controller-runtime's SetControllerReference does passes (an API server with \
             OwnerReferencesPermissionEnforcement refuses such slices to an account that may not update the Node's \
             finalizers)",
        ),
    },
    UpstreamRow {
        id: D(9),
        test: "testPublishResourceSlices: create",
        at: integration(INTEGRATION_CORE, 584),
        asserts: "the slices are published exactly as the driver states them (taints, counter-only slices, binding \
                  conditions, bindsToNode) and not written again once settled",
        guarantees: &[MATCH, crate::profile::ids::PLUGIN_SLICES_TAINTS_UNHEALTHY],
        verdict: Partial(
            "the comparison leaves out taints (read only by the unhealthy-device check), bindsToNode and per-device node \
             selection, and nothing counts writes after the slices settled",
        ),
    },
    UpstreamRow {
        id: D(13),
        test: "testInvalidResourceSlices",
        at: integration(INTEGRATION_CORE, 973),
        asserts: "a pool lists no device twice and counts its slices right",
        guarantees: &[MATCH, OWNED],
        verdict: Covered,
    },
];

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    if let (None, Some(check)) = (PluginNode::access(ctx), &ctx.target.adapter.host_inventory) {
        installed(ctx, check).await;
        return Ok(());
    }
    let Some(mut node) = super::harness::node_for(ctx, SCENARIO.guarantees).await? else { return Ok(()) };
    let outcome = check(ctx, &mut node).await;
    node.cleanup().await;
    outcome
}

/// A driver installed in the cluster: what it publishes on each node (the newest generation of
/// each pool) against what this machine sees of its own devices, and the pool rules of every
/// node's slices.
async fn installed(ctx: &Ctx<'_>, check: &crate::adapters::HostInventory) {
    let slices: Api<ResourceSlice> = Api::all(ctx.client());
    let lp = ListParams::default().fields(&format!("spec.driver={}", ctx.target.driver.name));
    let all = match slices.list(&lp).await {
        Ok(l) => l.items,
        Err(e) => return ctx.fail(MATCH, format!("listing the driver's slices: {e}"), Vec::new()),
    };
    match check(&crate::published::current_devices_by_node(&all)) {
        HostCheck::Matches(held) => ctx.pass(MATCH, held),
        HostCheck::Differs(differ) => ctx.fail(MATCH, differ, Vec::new()),
        HostCheck::CannotCheck(why) => ctx.skip(MATCH, why),
    }

    let nodes: Api<Node> = Api::all(ctx.client());
    let (mut held, mut problems) = (Vec::new(), Vec::new());
    for name in ctx.target.live_nodes().await {
        let uid = nodes.get_opt(&name).await.ok().flatten().and_then(|n| n.metadata.uid).unwrap_or_default();
        let (summary, broken) = pool_rules(ctx, &all, &name, &uid).await;
        held.push(summary);
        problems.extend(broken);
    }
    problems.sort();
    problems.dedup();
    ctx.check(OWNED, problems.is_empty(), held.join("; "), problems.join("; "), Vec::new());
}

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), ScenarioError> {
    let slices: Api<ResourceSlice> = Api::all(ctx.client());
    let lp = ListParams::default().fields(&format!("spec.driver={}", node.driver_name));
    // Judged once the pool is complete (a driver writes its slices one by one), or as it
    // stands after 30 s.
    let within = Duration::from_secs(30);
    let all = match ctx
        .poll_until(
            within,
            || async { slices.list(&lp).await.map(|l| l.items).unwrap_or_default() },
            |s| super::pool_complete(s, &node.name),
        )
        .await
    {
        Ok((all, _)) => all,
        Err(last) if last.iter().any(|s| s.spec.node_name.as_deref() == Some(node.name.as_str())) => last,
        Err(_) => {
            return Err(ScenarioError::timeout(format!("the driver published no slice for {}", node.name), within));
        }
    };
    let own: Vec<&ResourceSlice> = all.iter().filter(|s| s.spec.pool.name == node.name).collect();

    let adapter = &ctx.target.adapter;
    match &adapter.oracle {
        Some(oracle) => {
            let mut want_devices = oracle(&node.name)?;
            let want_counters = match &adapter.counter_oracle {
                Some(counters) => counters(&node.name)?,
                None => Vec::new(),
            };
            let mut unserved = unserved_fields(ctx, &node.driver_name, &mut want_devices).await?;
            // Where the API server drops counter sets (DRAPartitionableDevices off), no driver
            // can publish them either.
            if !want_counters.is_empty()
                && !unserved.iter().any(|(f, _)| f.gate == served::SHARED_COUNTERS.gate)
                && let Some(why) =
                    served::slice_dropped(&ctx.client(), &node.driver_name, &served::SHARED_COUNTERS).await?
            {
                unserved.push((&served::SHARED_COUNTERS, why));
            }
            let counters_unserved = unserved.iter().any(|(f, _)| f.gate == served::SHARED_COUNTERS.gate);
            let want_counters = if counters_unserved { Vec::new() } else { want_counters };
            let want: BTreeMap<String, String> = want_devices.iter().map(|d| (d.name.clone(), shape(d))).collect();
            let got: BTreeMap<String, String> = own
                .iter()
                .flat_map(|s| s.spec.devices.iter().flatten())
                .map(|d| (d.name.clone(), shape(&(adapter.canonical)(d.clone()))))
                .collect();
            let mut differ: Vec<String> = want
                .keys()
                .chain(got.keys())
                .filter(|k| want.get(*k) != got.get(*k))
                .map(|k| {
                    format!(
                        "{k}: published {} but the inventory says {}",
                        got.get(k).map_or("nothing", String::as_str),
                        want.get(k).map_or("nothing", String::as_str)
                    )
                })
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            // A name twice in a pool makes the scheduler take the whole pool for invalid
            // (upstream testInvalidResourceSlices); the map above would hide it.
            differ.extend(
                duplicates(&own).into_iter().map(|(name, n)| format!("{name}: published {n} times in the pool")),
            );
            differ.extend(counter_differences(&own, &want_counters));
            let mut counted = match want_counters.len() {
                0 => String::new(),
                n => format!(", and {n} counter set(s)"),
            };
            for (field, why) in &unserved {
                counted.push_str(&format!("; {} not compared: {why}", field.path));
            }
            ctx.check(
                MATCH,
                differ.is_empty(),
                format!("{} device(s) exactly as in the inventory{counted}", want.len()),
                differ.join("; "),
                node.evidence(),
            );
        }
        None => ctx.skip(
            MATCH,
            format!("the suite has no inventory oracle for {}: it was given as a binary only", node.driver_name),
        ),
    }

    let (summary, problems) = pool_rules(ctx, &all, &node.name, &node.uid).await;
    ctx.check(OWNED, problems.is_empty(), summary, problems.join("; "), node.evidence());
    Ok(())
}

/// The fields of `devices` (as the driver's inventory states them) that the API server drops,
/// so that no driver can publish them: cleared in `devices`, which is then compared on the
/// rest, with the reason each was left out.
pub(super) async fn unserved_fields(
    ctx: &Ctx<'_>,
    driver: &str,
    devices: &mut [k8s_openapi::api::resource::v1::Device],
) -> Result<Vec<(&'static served::SliceField, String)>, ScenarioError> {
    type Device = k8s_openapi::api::resource::v1::Device;
    /// A gated field: whether a device has it, and how to clear it.
    type Gated = (&'static served::SliceField, fn(&Device) -> bool, fn(&mut Device));
    let fields: [Gated; 3] = [
        (&served::SHARED_COUNTERS, |d| d.consumes_counters.is_some(), |d| d.consumes_counters = None),
        (
            &served::MULTIPLE_ALLOCATIONS,
            |d| d.allow_multiple_allocations == Some(true),
            |d| {
                d.allow_multiple_allocations = None;
                d.capacity.iter_mut().flat_map(|c| c.values_mut()).for_each(|c| c.request_policy = None);
            },
        ),
        (
            &served::BINDING_CONDITIONS,
            |d| d.binding_conditions.is_some(),
            |d| {
                (d.binding_conditions, d.binding_failure_conditions) = (None, None);
            },
        ),
    ];
    let mut out = Vec::new();
    for (field, has, clear) in fields {
        if devices.iter().any(has)
            && let Some(why) = served::slice_dropped(&ctx.client(), driver, field).await?
        {
            devices.iter_mut().for_each(clear);
            out.push((field, why));
        }
    }
    Ok(out)
}

/// How the newest generation of the pool's counter sets differs from `want`: each set by
/// name, its counters compared by value (the server may write a quantity another way).
fn counter_differences(own: &[&ResourceSlice], want: &[CounterSet]) -> Vec<String> {
    let top = own.iter().map(|s| s.spec.pool.generation).max().unwrap_or(0);
    let as_values = |set: &CounterSet| -> BTreeMap<String, String> {
        set.counters
            .iter()
            .map(|(name, c)| {
                let value = Quantity::parse(&c.value.0).ok().and_then(|q| q.to_i128()).map(|v| v.to_string());
                (name.clone(), value.unwrap_or_else(|| c.value.0.clone()))
            })
            .collect()
    };
    let got: BTreeMap<&str, BTreeMap<String, String>> = own
        .iter()
        .filter(|s| s.spec.pool.generation == top)
        .flat_map(|s| s.spec.shared_counters.iter().flatten())
        .map(|set| (set.name.as_str(), as_values(set)))
        .collect();
    let want: BTreeMap<&str, BTreeMap<String, String>> =
        want.iter().map(|set| (set.name.as_str(), as_values(set))).collect();
    want.keys()
        .chain(got.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|name| want.get(*name) != got.get(*name))
        .map(|name| {
            let show = |m: Option<&BTreeMap<String, String>>| m.map_or("nothing".to_string(), |m| format!("{m:?}"));
            format!(
                "counter set {name}: published {} but the inventory says {}",
                show(got.get(name)),
                show(want.get(name))
            )
        })
        .collect()
}

/// The device names that the newest generation of a pool's slices lists more than once, with
/// how often.
fn duplicates(own: &[&ResourceSlice]) -> Vec<(String, usize)> {
    let top = own.iter().map(|s| s.spec.pool.generation).max().unwrap_or(0);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for s in own.iter().filter(|s| s.spec.pool.generation == top) {
        for d in s.spec.devices.iter().flatten() {
            *seen.entry(d.name.clone()).or_default() += 1;
        }
    }
    seen.into_iter().filter(|(_, n)| *n > 1).collect()
}

/// The pool rules of a node-local pool for `node`'s slices among `all` (the driver's): its
/// newest generation's slices are controlled by the Node, name it, and count themselves
/// right; and no slice of the driver names a node that does not exist (but for those the
/// garbage collector deletes with their Node). The summary of a
/// pass, and every broken rule.
async fn pool_rules(ctx: &Ctx<'_>, all: &[ResourceSlice], node: &str, uid: &str) -> (String, Vec<String>) {
    let own: Vec<&ResourceSlice> = all.iter().filter(|s| s.spec.pool.name == node).collect();
    let mut problems = Vec::new();
    let top = own.iter().map(|s| s.spec.pool.generation).max().unwrap_or(0);
    let current: Vec<&&ResourceSlice> = own.iter().filter(|s| s.spec.pool.generation == top).collect();
    for s in &current {
        let name = s.metadata.name.clone().unwrap_or_default();
        let owner = s.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true));
        if !owner.is_some_and(|o| o.kind == "Node" && o.name == node && o.uid == uid) {
            problems.push(format!("slice {name} is not controlled by Node {node} ({uid})"));
        }
        if s.spec.node_name.as_deref() != Some(node) {
            problems.push(format!("slice {name} of pool {node} names node {:?}", s.spec.node_name));
        }
        if s.spec.pool.resource_slice_count != current.len() as i64 {
            problems.push(format!(
                "slice {name} says the pool has {} slice(s); it has {}",
                s.spec.pool.resource_slice_count,
                current.len()
            ));
        }
    }
    let nodes: Api<Node> = Api::all(ctx.client());
    for s in all {
        // Controlled by the Node it names, which is gone: the garbage collector deletes it. Such
        // slices are the plugin tier's other stand-in nodes', whose scenarios run beside this
        // one and delete their nodes as they end.
        let collected = |n: &str| {
            s.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.kind == "Node" && o.name == n)
        };
        if let Some(n) = &s.spec.node_name
            && !collected(n)
            && nodes.get_opt(n).await.ok().flatten().is_none()
        {
            problems.push(format!(
                "slice {} is published for node {n}, which does not exist",
                s.metadata.name.clone().unwrap_or_default()
            ));
        }
    }
    let summary = format!("{} slice(s) of pool {node} at generation {top}, owned by the Node", current.len());
    (summary, problems)
}

/// A device's attributes, capacities (with their request policies), counter consumption,
/// whether it allows multiple allocations and its binding conditions, as comparable text.
pub(super) fn shape(d: &k8s_openapi::api::resource::v1::Device) -> String {
    let consumes: Option<BTreeMap<&str, BTreeMap<&str, &str>>> = d.consumes_counters.as_ref().map(|c| {
        c.iter()
            .map(|c| {
                (c.counter_set.as_str(), c.counters.iter().map(|(k, v)| (k.as_str(), v.value.0.as_str())).collect())
            })
            .collect()
    });
    let capacity = d.capacity.as_ref().map(|c| {
        c.iter()
            .map(|(k, v)| (k.clone(), serde_json::json!({ "value": v.value.0, "requestPolicy": v.request_policy })))
            .collect::<BTreeMap<_, _>>()
    });
    // Unset and empty mean the same to the scheduler.
    let listed = |l: &Option<Vec<String>>| l.clone().filter(|l| !l.is_empty());
    serde_json::json!({
        "attributes": d.attributes,
        "capacity": capacity,
        "consumesCounters": consumes,
        "allowMultipleAllocations": d.allow_multiple_allocations.unwrap_or(false),
        "bindingConditions": listed(&d.binding_conditions),
        "bindingFailureConditions": listed(&d.binding_failure_conditions),
    })
    .to_string()
}
