//! Shares of one device (consumable capacity): two claims, each allocated a share of the same
//! device that allows multiple allocations (its own `shareID` and the request policy's default
//! of each capacity), are prepared on one node side by side: each answer names its own share
//! where it names one, their CDI devices are their own, and where the suite knows how the
//! driver shows a share, each claim's CDI devices show that claim's share. Unpreparing one
//! leaves the other's CDI devices defined. A driver that keys a shared device's setup by the
//! device hands the second share the first's; one that tears the device's sharing down when
//! one user goes leaves the other's container unable to start again.

use std::collections::BTreeMap;

use super::harness::{Allocated, PluginNode};
use crate::coverage::RowId::B;
use crate::coverage::Verdict::{Covered, Partial};
use crate::coverage::{UpstreamRow, e2e_node};
use crate::engine::{Ctx, ScenarioError};
use crate::profile::ids::PLUGIN_SHARES_INDEPENDENT as ID;

super::plugin_scenario!("plugin-shares", [ID]);

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: B(17),
        test: "Device ShareID: with a ShareID",
        at: e2e_node(1324),
        asserts: "a result that carries a share ID is prepared as that share",
        guarantees: &[ID],
        verdict: Covered,
    },
    UpstreamRow {
        id: B(18),
        test: "Device ShareID: same device with two ShareIDs",
        at: e2e_node(1335),
        asserts: "one claim with two results on the same device, each with its own share ID, is prepared with both",
        guarantees: &[ID],
        verdict: Partial(
            "the two shares here are two claims of one result each, never two results of one claim, so a driver that \
             keys a claim's setup by the device passes",
        ),
    },
];

/// The share IDs the suite allocates, as the scheduler writes them (RFC 4122 UIDs).
const SHARES: [(&str, &str); 2] =
    [("share-a", "5ba7e3c0-8f1d-4c2a-9b3e-00000000000a"), ("share-b", "5ba7e3c0-8f1d-4c2a-9b3e-00000000000b")];

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), ScenarioError> {
    let shareable =
        super::node_devices(node, ctx).await?.into_iter().find(|d| d.allow_multiple_allocations == Some(true));
    let Some(device) = shareable else {
        ctx.skip(ID, crate::engine::target::NO_SHAREABLE_DEVICE);
        return Ok(());
    };
    // What a claim that asks for no amount consumes: each capacity's default, else all of it.
    let consumed: BTreeMap<String, String> = device
        .capacity
        .iter()
        .flatten()
        .map(|(name, c)| {
            let default = c.request_policy.as_ref().and_then(|p| p.default.as_ref()).unwrap_or(&c.value);
            (name.clone(), default.0.clone())
        })
        .collect();
    let mut claims = Vec::new();
    for (name, share) in SHARES {
        let claim = dracheck_objects::claim(&ctx.ns, name, super::harness::PLUGIN_TIER_CLASS, 1, &[]);
        let result = Allocated { share: Some((share, &consumed)), ..node.result(&node.name, &device.name) };
        claims.push((node.allocate_results(claim, &[result]).await?, share));
    }
    let what = format!("shares {} and {} of device {}", SHARES[0].1, SHARES[1].1, device.name);

    let mut ids: Vec<Vec<String>> = Vec::new();
    for (claim, share) in &claims {
        let got = match node.prepared(claim).await {
            Ok(got) => got,
            Err(e) => {
                ctx.fail(ID, format!("of {what}, prepare of {} failed: {e}", claim.name), node.evidence());
                return Ok(());
            }
        };
        let wrong: Vec<_> = got
            .iter()
            .filter(|d| d.device_name != device.name || d.share_id.as_deref().is_some_and(|s| s != *share))
            .collect();
        if got.is_empty() || !wrong.is_empty() {
            ctx.fail(
                ID,
                format!("of {what}, prepare of {} (share {share}) returned {got:?}", claim.name),
                node.evidence(),
            );
            return Ok(());
        }
        ids.push(node.claim_cdi_ids(&got));
    }
    let common: Vec<&String> = ids[0].iter().filter(|id| ids[1].contains(id)).collect();
    if !common.is_empty() {
        ctx.fail(ID, format!("of {what}, both shares were given the CDI devices {common:?}"), node.evidence());
        return Ok(());
    }
    if let Some(seen_shares) = ctx.target.adapter.workload.shares {
        let defined = node.cdi_devices()?;
        for ((claim, share), ids) in claims.iter().zip(&ids) {
            // A container shows what its CDI devices' edits set.
            let env: Vec<&str> = ids.iter().filter_map(|id| defined.get(id)).flatten().map(String::as_str).collect();
            let shown = seen_shares(&env.join("\n")).remove(&device.name).and_then(|s| s.share_id);
            if shown.as_deref() != Some(*share) {
                ctx.fail(
                    ID,
                    format!("of {what}, the CDI devices of {} (share {share}) set up share {shown:?}", claim.name),
                    node.evidence(),
                );
                return Ok(());
            }
        }
    }

    let (first, second) = (&claims[0].0, &claims[1].0);
    if let Some(why) = node.unprepare_one_of_two(first, &ids[1], &what).await? {
        ctx.fail(ID, why, node.evidence());
        return Ok(());
    }
    // The second goes with the node; its unprepare is `plugin.unprepare.removes-state`'s.
    let _ = node.unprepared(second).await;
    ctx.pass(
        ID,
        format!(
            "{what} were prepared side by side, each with its own CDI devices and share, and unprepare of one left \
             the other's"
        ),
    );
    Ok(())
}
