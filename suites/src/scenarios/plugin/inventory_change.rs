//! The slices follow the inventory. When a node's devices change (a GPU taken out or put in,
//! a setting that drops an attribute or a capacity) the driver, started again on its new
//! configuration, publishes the new set and leaves nothing of the old one behind: no device
//! the node no longer has, no slice of an older generation. Where the change spans more than
//! one slice (before or after), it comes under a new pool generation, so that consumers, who
//! take the newest generation as the pool, never mix old and new slices. A change within one
//! slice is one atomic update, and the upstream helper keeps the generation for it ("at most
//! one update API call is necessary"), so the suite does not ask for more. The API would also
//! let a driver that deleted all its slices first start its generations over; the suite does
//! not tell that from slices written next to old ones of the same generation, and such a driver
//! already fails `driver.restart.slices-kept` (its devices vanish while it restarts). Upstream's
//! `testPublishResourceSlices` checks the helper's part of this; here the whole driver is.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::resource::v1::{Device, ResourceSlice};

use super::harness::PluginNode;
use super::published_slices;
use super::slices::shape;
use crate::coverage::RowId::D;
use crate::coverage::Verdict::{Covered, Partial};
use crate::coverage::{INTEGRATION_CORE, UpstreamRow, e2e, integration};
use crate::engine::{Ctx, ScenarioError};
use crate::profile::ids::PLUGIN_SLICES_FOLLOW_INVENTORY as ID;

super::plugin_scenario!("plugin-inventory-change", [ID]);

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: D(12),
        test: "testPublishResourceSlices: recreate after update and delete",
        at: integration(INTEGRATION_CORE, 660),
        asserts: "a stale slice of the pool is reconciled into the current set, not left beside it",
        guarantees: &[ID],
        verdict: Covered,
    },
    UpstreamRow {
        id: D(14),
        test: "ResourceSlice Controller: creates slices (with the integration TestCreateResourceSlices)",
        at: e2e(3728),
        asserts: "a pool of slices at the API's size limits is published, not written again once settled, and shrinks \
                  to one empty slice",
        guarantees: &[ID],
        verdict: Partial(
            "the pool here grows to a second slice under a new generation; no slice is at the size limits, the pool \
             never shrinks, and writes after it settled are not counted",
        ),
    },
];

/// A driver started on a changed configuration publishes at start-up, as it does on its
/// first start.
const FOLLOWED: Duration = Duration::from_secs(60);

/// The pool as published: its newest generation, each generation's slice count, and each
/// device by name with its attributes and capacities (over every slice, whatever its
/// generation, since a consumer that lists them sees them all).
struct Pool {
    top: i64,
    slices: usize,
    generations: BTreeMap<i64, usize>,
    devices: BTreeMap<String, String>,
}

impl Pool {
    fn of(slices: &[ResourceSlice], canonical: fn(Device) -> Device) -> Pool {
        let mut generations = BTreeMap::new();
        for s in slices {
            *generations.entry(s.spec.pool.generation).or_insert(0) += 1;
        }
        Pool {
            top: generations.keys().max().copied().unwrap_or(0),
            slices: slices.len(),
            generations,
            devices: slices
                .iter()
                .flat_map(|s| s.spec.devices.iter().flatten())
                .map(|d| (d.name.clone(), shape(&canonical(d.clone()))))
                .collect(),
        }
    }
}

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), ScenarioError> {
    let adapter = &ctx.target.adapter;
    let (Some(change), Some(access)) = (&adapter.change_inventory, PluginNode::access(ctx)) else {
        ctx.skip(ID, format!("the suite knows no way to change the inventory of driver {}", node.driver_name));
        return Ok(());
    };
    let before = Pool::of(&published_slices(node, ctx).await?, adapter.canonical);
    let change = change(&node.name, &node.cfg.root).map_err(ScenarioError::Unmet)?;
    let mut devices = change.devices.clone();
    // What the API server drops (a gate off) no driver can publish.
    super::slices::unserved_fields(ctx, &node.driver_name, &mut devices).await?;
    let want: BTreeMap<String, String> =
        devices.iter().map(|d| (d.name.clone(), shape(&(adapter.canonical)(d.clone())))).collect();
    node.replace(&change.spec, access).await?;

    // Done once the pool is one generation holding exactly the new set, past the old one's
    // where more than one slice took part.
    let needs_bump = |p: &Pool| before.slices > 1 || p.slices > 1;
    let followed = |p: &Pool| (p.top > before.top || !needs_bump(p)) && p.generations.len() == 1 && p.devices == want;
    let outcome = ctx
        .poll_until(
            FOLLOWED,
            || async { Pool::of(&ctx.slices_of(&node.name).await, adapter.canonical) },
            |p| followed(p),
        )
        .await;
    match outcome {
        Ok((now, _)) => {
            let generation = if now.top > before.top {
                format!("went from generation {} to {}", before.top, now.top)
            } else {
                format!("kept generation {} (one slice, changed in one update)", now.top)
            };
            ctx.pass(
                ID,
                format!(
                    "{}: the pool ({} slice(s), {} before) {generation} with exactly the {} device(s) of the new \
                     inventory",
                    change.what,
                    now.slices,
                    before.slices,
                    want.len()
                ),
            )
        }
        Err(now) => {
            let mut problems = Vec::new();
            let stale: Vec<&String> = now.devices.keys().filter(|d| !want.contains_key(*d)).collect();
            if !stale.is_empty() {
                problems.push(format!("devices the node no longer has are still published: {stale:?}"));
            }
            let differ: Vec<&String> = want.keys().filter(|d| now.devices.get(*d) != want.get(*d)).collect();
            if !differ.is_empty() {
                problems.push(format!("devices missing or published as they were before: {differ:?}"));
            }
            if now.top <= before.top && now.devices != before.devices && needs_bump(&now) {
                problems.push(format!(
                    "the new set ({} slices, {} before) is published under generation {}, the old set's: a change \
                     of more than one slice must come with a new pool generation",
                    now.slices, before.slices, now.top
                ));
            }
            if now.generations.len() > 1 {
                problems.push(format!(
                    "slices of several generations are left: {:?} (generation: slices)",
                    now.generations
                ));
            }
            if problems.is_empty() {
                problems.push("the driver published nothing new".into());
            }
            ctx.fail(
                ID,
                format!("{}, and {}s later: {}", change.what, FOLLOWED.as_secs(), problems.join("; ")),
                node.evidence(),
            );
        }
    }
    Ok(())
}
