use k8s_openapi::api::resource::v1::{
    Device, DeviceAttribute, DeviceCapacity, DeviceClass, DeviceClassSpec, ResourceClaim, ResourceClaimTemplate,
    ResourcePool, ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::claim::{ClaimBuilder, cel};

/// A DeviceClass that selects every device of `driver`, plus any extra CEL `selectors`.
pub fn device_class(name: &str, driver: &str, selectors: &[&str]) -> DeviceClass {
    let mut all = vec![cel(format!("device.driver == {driver:?}"))];
    all.extend(selectors.iter().map(|s| cel(*s)));
    DeviceClass {
        metadata: crate::meta(name, None),
        spec: Some(DeviceClassSpec { selectors: Some(all), ..DeviceClassSpec::default() }),
    }
}

/// A device of an inventory, built up with typed attributes and capacities.
#[derive(Debug, Clone)]
pub struct DeviceBuilder(Device);

pub fn device(name: &str) -> DeviceBuilder {
    DeviceBuilder(Device { name: name.to_string(), ..Device::default() })
}

impl DeviceBuilder {
    fn attr(mut self, name: &str, value: DeviceAttribute) -> Self {
        self.0.attributes.get_or_insert_default().insert(name.to_string(), value);
        self
    }
    pub fn string(self, name: &str, value: &str) -> Self {
        self.attr(name, DeviceAttribute { string: Some(value.into()), ..DeviceAttribute::default() })
    }
    pub fn int(self, name: &str, value: i64) -> Self {
        self.attr(name, DeviceAttribute { int: Some(value), ..DeviceAttribute::default() })
    }
    pub fn bool(self, name: &str, value: bool) -> Self {
        self.attr(name, DeviceAttribute { bool: Some(value), ..DeviceAttribute::default() })
    }
    pub fn version(self, name: &str, value: &str) -> Self {
        self.attr(name, DeviceAttribute { version: Some(value.into()), ..DeviceAttribute::default() })
    }
    pub fn capacity(mut self, name: &str, quantity: &str) -> Self {
        self.0
            .capacity
            .get_or_insert_default()
            .insert(name.to_string(), DeviceCapacity { value: Quantity(quantity.into()), ..DeviceCapacity::default() });
        self
    }
    pub fn build(self) -> Device {
        self.0
    }
}

/// The one slice of a node-local pool named after the node, owned by the Node object as a
/// driver's kubelet plugin publishes it.
pub fn resource_slice(driver: &str, node_name: &str, node_uid: &str, devices: Vec<Device>) -> ResourceSlice {
    let name = format!("{node_name}-{}", driver.replace('.', "-"));
    let mut meta = crate::meta(&name, None);
    meta.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: node_name.into(),
        uid: node_uid.into(),
        controller: Some(true),
        block_owner_deletion: None,
    }]);
    ResourceSlice {
        metadata: meta,
        spec: ResourceSliceSpec {
            driver: driver.into(),
            node_name: Some(node_name.into()),
            pool: ResourcePool { name: node_name.into(), generation: 1, resource_slice_count: 1 },
            devices: Some(devices),
            ..ResourceSliceSpec::default()
        },
    }
}

/// A template whose generated claims have the shape of [`claim`].
pub fn claim_template(
    namespace: &str,
    name: &str,
    class: &str,
    count: i64,
    selectors: &[&str],
) -> ResourceClaimTemplate {
    ClaimBuilder::exact(class, count).selectors(selectors.iter().copied()).template(namespace, name)
}

/// A standalone claim with one request `req` for `count` devices of `class`, narrowed by the
/// CEL `selectors`.
pub fn claim(namespace: &str, name: &str, class: &str, count: i64, selectors: &[&str]) -> ResourceClaim {
    ClaimBuilder::exact(class, count).selectors(selectors.iter().copied()).claim(namespace, name)
}
