//! The node's slices hold exactly the devices of the driver's inventory, and follow the pool
//! rules of a node-local pool: owned by the Node, named after it, one generation, a correct
//! slice count; no slice of the driver claims a node that is not there.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, ListParams};

use super::harness::PluginNode;
use crate::engine::Ctx;
use crate::profile::ids::{PLUGIN_SLICES_MATCH_INVENTORY as MATCH, PLUGIN_SLICES_OWNED_BY_NODE as OWNED};

super::plugin_scenario!("plugin-slices", [MATCH, OWNED]);

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), String> {
    let slices: Api<ResourceSlice> = Api::all(ctx.client());
    let lp = ListParams::default().fields(&format!("spec.driver={}", node.driver_name));
    let all = ctx
        .wait_until(
            Duration::from_secs(30),
            || async { slices.list(&lp).await.map(|l| l.items).unwrap_or_default() },
            |s| s.iter().any(|s| s.spec.node_name.as_deref() == Some(node.name.as_str())),
        )
        .await
        .map_err(|_| format!("the driver published no slice for {} within 30s", node.name))?
        .0;
    let own: Vec<&ResourceSlice> = all.iter().filter(|s| s.spec.pool.name == node.name).collect();

    let access = ctx.target.plugin.as_ref().expect("the harness started");
    match &access.adapter.oracle {
        Some(oracle) => {
            let want: BTreeMap<String, String> =
                oracle(&node.name)?.into_iter().map(|d| (d.name.clone(), shape(&d))).collect();
            let got: BTreeMap<String, String> = own
                .iter()
                .flat_map(|s| s.spec.devices.iter().flatten())
                .map(|d| (d.name.clone(), shape(&(access.adapter.canonical)(d.clone()))))
                .collect();
            let differ: Vec<String> = want
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
            ctx.check(
                MATCH,
                differ.is_empty(),
                format!("{} device(s) exactly as in the inventory", want.len()),
                differ.join("; "),
                node.evidence(),
            );
        }
        None => ctx.skip(
            MATCH,
            format!("the suite has no inventory oracle for {}: it was given as a binary only", node.driver_name),
        ),
    }

    let mut problems = Vec::new();
    let top = own.iter().map(|s| s.spec.pool.generation).max().unwrap_or(0);
    let current: Vec<&&ResourceSlice> = own.iter().filter(|s| s.spec.pool.generation == top).collect();
    for s in &current {
        let name = s.metadata.name.clone().unwrap_or_default();
        let owner = s.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true));
        if !owner.is_some_and(|o| o.kind == "Node" && o.name == node.name && o.uid == node.uid) {
            problems.push(format!("slice {name} is not controlled by Node {} ({})", node.name, node.uid));
        }
        if s.spec.node_name.as_deref() != Some(node.name.as_str()) {
            problems.push(format!("slice {name} of pool {} names node {:?}", node.name, s.spec.node_name));
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
    for s in &all {
        if let Some(n) = &s.spec.node_name
            && nodes.get_opt(n).await.ok().flatten().is_none()
        {
            problems.push(format!(
                "slice {} is published for node {n}, which does not exist",
                s.metadata.name.clone().unwrap_or_default()
            ));
        }
    }
    ctx.check(
        OWNED,
        problems.is_empty(),
        format!("{} slice(s) of pool {} at generation {top}, owned by the Node", current.len(), node.name),
        problems.join("; "),
        node.evidence(),
    );
    Ok(())
}

/// A device's attributes and capacities as comparable text.
fn shape(d: &k8s_openapi::api::resource::v1::Device) -> String {
    serde_json::json!({ "attributes": d.attributes, "capacity": d.capacity.as_ref().map(|c| c.iter().map(|(k, v)| (k.clone(), v.value.0.clone())).collect::<BTreeMap<_, _>>()) }).to_string()
}
