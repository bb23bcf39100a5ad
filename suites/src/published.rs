//! What a driver publishes as the scheduler sees it: the devices of the newest generation of
//! each pool, by the node their slices name.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{Device, ResourceSlice};

/// The devices of `slices` (one driver's) in the newest generation of their pool, by node;
/// slices for no single node are left out.
pub fn current_devices_by_node(slices: &[ResourceSlice]) -> BTreeMap<String, Vec<Device>> {
    let mut newest: BTreeMap<&str, i64> = BTreeMap::new();
    for s in slices {
        let g = newest.entry(s.spec.pool.name.as_str()).or_insert(s.spec.pool.generation);
        *g = (*g).max(s.spec.pool.generation);
    }
    let mut out: BTreeMap<String, Vec<Device>> = BTreeMap::new();
    for s in slices {
        let (Some(node), Some(devices)) = (&s.spec.node_name, &s.spec.devices) else { continue };
        if newest.get(s.spec.pool.name.as_str()) == Some(&s.spec.pool.generation) {
            out.entry(node.clone()).or_default().extend(devices.iter().cloned());
        }
    }
    out
}
