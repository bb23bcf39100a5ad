//! Resource pools as the scheduler gathers them: per driver and pool name only the slices of
//! the highest generation count; a pool with fewer slices than `resourceSliceCount` is
//! incomplete, one that lists a device twice is invalid, and neither gives devices.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{Device, ResourceSlice};

use crate::nodes::selector_matches;

#[derive(Debug, Clone)]
pub struct Pool<'a> {
    pub slices: Vec<&'a ResourceSlice>,
    /// Why no device of the pool can be allocated now, if so.
    pub unusable: Option<String>,
}

/// One device of a pool with where it is published.
#[derive(Debug, Clone, Copy)]
pub struct PoolDevice<'a> {
    pub pool: usize,
    pub slice: &'a ResourceSlice,
    pub device: &'a Device,
}

pub fn gather(slices: &[ResourceSlice]) -> Vec<Pool<'_>> {
    let mut by_id: BTreeMap<(String, String), Vec<&ResourceSlice>> = BTreeMap::new();
    for s in slices {
        by_id.entry((s.spec.driver.clone(), s.spec.pool.name.clone())).or_default().push(s);
    }
    let mut pools = Vec::new();
    for all in by_id.into_values() {
        let generation = all.iter().map(|s| s.spec.pool.generation).max().unwrap_or_default();
        let current: Vec<&ResourceSlice> = all.into_iter().filter(|s| s.spec.pool.generation == generation).collect();
        let expected = current.iter().map(|s| s.spec.pool.resource_slice_count).max().unwrap_or_default();
        let mut unusable = None;
        if (current.len() as i64) < expected {
            unusable = Some(format!(
                "pool incomplete: {} of {expected} slices of generation {generation} published",
                current.len()
            ));
        } else {
            let mut seen = std::collections::BTreeSet::new();
            for d in current.iter().flat_map(|s| s.spec.devices.iter().flatten()) {
                if !seen.insert(d.name.as_str()) {
                    unusable = Some(format!("pool invalid: device {} is listed twice", d.name));
                    break;
                }
            }
        }
        pools.push(Pool { slices: current, unusable });
    }
    pools
}

/// Whether the slice's devices can be used on `node` (per-device node selection is decided per
/// device by [`device_reaches`]).
pub fn slice_reaches(slice: &ResourceSlice, node: &Node) -> bool {
    let spec = &slice.spec;
    let node_name = node.metadata.name.as_deref().unwrap_or_default();
    if spec.per_device_node_selection == Some(true) {
        return true;
    }
    if let Some(n) = &spec.node_name {
        return n == node_name;
    }
    if spec.all_nodes == Some(true) {
        return true;
    }
    if let Some(sel) = &spec.node_selector {
        return selector_matches(sel, node);
    }
    false
}

pub fn device_reaches(slice: &ResourceSlice, device: &Device, node: &Node) -> bool {
    if slice.spec.per_device_node_selection != Some(true) {
        return slice_reaches(slice, node);
    }
    let node_name = node.metadata.name.as_deref().unwrap_or_default();
    if let Some(n) = &device.node_name {
        return n == node_name;
    }
    if device.all_nodes == Some(true) {
        return true;
    }
    device.node_selector.as_ref().is_some_and(|sel| selector_matches(sel, node))
}

/// Where a slice's devices are: a node's name, or how a shared pool picks its nodes.
pub fn placement(slice: &ResourceSlice) -> String {
    let spec = &slice.spec;
    match (&spec.node_name, spec.all_nodes, &spec.node_selector, spec.per_device_node_selection) {
        (Some(n), ..) => n.clone(),
        (_, Some(true), ..) => "all nodes".into(),
        (_, _, Some(_), _) => "nodes of a selector".into(),
        (.., Some(true)) => "per device".into(),
        _ => "no node".into(),
    }
}

impl<'a> Pool<'a> {
    pub fn devices(&self, index: usize) -> impl Iterator<Item = PoolDevice<'a>> + '_ {
        self.slices.iter().flat_map(move |s| {
            s.spec.devices.iter().flatten().map(move |d| PoolDevice { pool: index, slice: s, device: d })
        })
    }
}
