//! Reading back what a driver published: a device in the slices, an attribute by name.

use k8s_openapi::api::resource::v1::{Device, DeviceAttribute, ResourceSlice};

/// The device `device` of `driver`'s pool `pool`, as any of `slices` publishes it.
pub fn find_device<'a>(slices: &'a [ResourceSlice], driver: &str, pool: &str, device: &str) -> Option<&'a Device> {
    slices
        .iter()
        .filter(|s| s.spec.driver == driver && s.spec.pool.name == pool)
        .flat_map(|s| s.spec.devices.iter().flatten())
        .find(|d| d.name == device)
}

/// The attribute `name` of a device of `driver`. Drivers may publish their own attributes
/// with or without their domain (`uuid` or `gpu.nvidia.com/uuid`); both mean the same.
pub fn attribute<'a>(d: &'a Device, driver: &str, name: &str) -> Option<&'a DeviceAttribute> {
    let attrs = d.attributes.as_ref()?;
    attrs.get(name).or_else(|| attrs.get(&format!("{driver}/{name}")))
}

/// An attribute's value as plain text, whatever its type (lists as JSON).
pub fn attribute_value(a: &DeviceAttribute) -> String {
    a.string
        .clone()
        .or_else(|| a.version.clone())
        .or_else(|| a.int.map(|i| i.to_string()))
        .or_else(|| a.bool.map(|b| b.to_string()))
        .unwrap_or_else(|| serde_json::to_string(a).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{device, resource_slice};

    #[test]
    fn an_attribute_is_found_with_or_without_the_drivers_domain() {
        let d = device("gpu-0")
            .string("uuid", "GPU-1")
            .string("gpu.nvidia.com/productName", "H100")
            .int("minor", 3)
            .build();
        let value = |name| attribute(&d, "gpu.nvidia.com", name).map(attribute_value);
        assert_eq!(value("uuid").as_deref(), Some("GPU-1"));
        assert_eq!(value("productName").as_deref(), Some("H100"));
        assert_eq!(value("minor").as_deref(), Some("3"));
        assert_eq!(value("missing"), None);
        assert_eq!(attribute(&d, "gpu.other.com", "productName"), None, "another driver's domain is not ours");
    }

    #[test]
    fn a_device_is_found_by_driver_pool_and_name() {
        let slices = [
            resource_slice("a.example.com", "node-1", "uid-1", vec![device("gpu-0").build()]),
            resource_slice("b.example.com", "node-1", "uid-1", vec![device("gpu-0").int("index", 7).build()]),
        ];
        let found = find_device(&slices, "b.example.com", "node-1", "gpu-0").expect("found");
        assert_eq!(attribute(found, "b.example.com", "index").map(attribute_value).as_deref(), Some("7"));
        assert!(find_device(&slices, "b.example.com", "node-2", "gpu-0").is_none());
        assert!(find_device(&slices, "b.example.com", "node-1", "gpu-1").is_none());
    }
}
