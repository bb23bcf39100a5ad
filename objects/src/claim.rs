//! The one builder of the ResourceClaims dracheck creates. A scenario starts from the claim a
//! profile publishes (or from one exact request) and derives the variant it needs by name
//! (`.count(n)`, `.selector(cel)`, `.class(name)`), instead of patching `Option` chains of
//! the API types after the fact; the same builder gives the claim, a template of it, or the
//! bare spec.

use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, CapacityRequirements, DeviceClaim, DeviceClaimConfiguration, DeviceRequest, DeviceSelector,
    DeviceSubRequest, DeviceToleration, ExactDeviceRequest, OpaqueDeviceConfiguration, ResourceClaim,
    ResourceClaimSpec, ResourceClaimTemplate, ResourceClaimTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;

/// The request name of a claim built from a class and a count.
pub const REQUEST: &str = "req";

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClaimBuilder {
    spec: ResourceClaimSpec,
}

impl ClaimBuilder {
    /// Starts from a spec as the API takes it, e.g. the one a profile publishes.
    pub fn from_spec(spec: ResourceClaimSpec) -> ClaimBuilder {
        ClaimBuilder { spec }
    }

    /// One exact request, [`REQUEST`], for `count` devices of `class`.
    pub fn exact(class: &str, count: i64) -> ClaimBuilder {
        let request = DeviceRequest {
            name: REQUEST.into(),
            exactly: Some(ExactDeviceRequest {
                device_class_name: class.into(),
                allocation_mode: Some("ExactCount".into()),
                count: Some(count),
                ..ExactDeviceRequest::default()
            }),
            first_available: None,
        };
        ClaimBuilder {
            spec: ResourceClaimSpec {
                devices: Some(DeviceClaim { requests: Some(vec![request]), ..DeviceClaim::default() }),
            },
        }
    }

    /// One more exact request, `name`, for `count` devices of `class` (another driver's, say).
    pub fn and_request(mut self, name: &str, class: &str, count: i64) -> ClaimBuilder {
        let more = ClaimBuilder::exact(class, count).spec.devices.and_then(|d| d.requests).unwrap_or_default();
        let requests = self.spec.devices.get_or_insert_default().requests.get_or_insert_default();
        requests.extend(more.into_iter().map(|r| DeviceRequest { name: name.into(), ..r }));
        self
    }

    /// The first request asks for exactly `count` devices (each of its alternatives, for a
    /// `firstAvailable` request).
    pub fn count(mut self, count: i64) -> ClaimBuilder {
        self.each_of_first(|e| {
            *e.allocation_mode = Some("ExactCount".into());
            *e.count = Some(count);
        });
        self
    }

    /// The first request also needs `expression` to hold (each of its alternatives).
    pub fn selector(mut self, expression: &str) -> ClaimBuilder {
        self.each_of_first(|e| {
            e.selectors.get_or_insert_default().push(cel(expression));
        });
        self
    }

    /// The first request (each of its alternatives) tolerates every device taint (`operator:
    /// Exists` without a key), whatever its effect.
    pub fn tolerate_all_taints(mut self) -> ClaimBuilder {
        self.each_of_first(|e| {
            e.tolerations
                .get_or_insert_default()
                .push(DeviceToleration { operator: Some("Exists".into()), ..DeviceToleration::default() });
        });
        self
    }

    /// The first request (each of its alternatives) asks for `quantity` of each device's
    /// capacity `name` (consumable capacity: a share of a device several claims hold).
    pub fn capacity(mut self, name: &str, quantity: &str) -> ClaimBuilder {
        self.each_of_first(|e| {
            e.capacity.get_or_insert_default().requests.get_or_insert_default().insert(
                name.to_string(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity(quantity.to_string()),
            );
        });
        self
    }

    /// Every `selectors` entry of `expressions`, in order.
    pub fn selectors<'a>(self, expressions: impl IntoIterator<Item = &'a str>) -> ClaimBuilder {
        expressions.into_iter().fold(self, ClaimBuilder::selector)
    }

    /// The first request names the DeviceClass `class` (each of its alternatives).
    pub fn class(mut self, class: &str) -> ClaimBuilder {
        self.each_of_first(|e| *e.device_class_name = class.into());
        self
    }

    /// Every request names the DeviceClass `class` (each of its alternatives).
    pub fn class_everywhere(mut self, class: &str) -> ClaimBuilder {
        for request in self.spec.devices.iter_mut().flat_map(|d| d.requests.iter_mut().flatten()) {
            each_exact(request, &|e: &mut Exact<'_>| *e.device_class_name = class.into());
        }
        self
    }

    /// The first request, as one request of one device for each of `names` (same class and
    /// selectors; each alternative of a `firstAvailable` request), and nothing else: the
    /// other requests, constraints and configs are dropped.
    pub fn first_per_name(self, names: &[&str]) -> ClaimBuilder {
        let Some(first) = self.first_only() else { return ClaimBuilder::default() };
        let requests = names
            .iter()
            .map(|name| {
                let mut r = DeviceRequest { name: (*name).into(), ..first.clone() };
                each_exact(&mut r, &|e: &mut Exact<'_>| {
                    *e.allocation_mode = Some("ExactCount".into());
                    *e.count = Some(1);
                });
                r
            })
            .collect();
        ClaimBuilder::with_requests(requests)
    }

    /// The first request alone (other requests, constraints and configs dropped), as a
    /// `firstAvailable` list with one alternative per `(name, selectors)`: each the request as
    /// written (its first alternative, where it has some) with those selectors added.
    pub fn first_available(self, alternatives: &[(&str, &[&str])]) -> ClaimBuilder {
        let Some(first) = self.first_only() else { return ClaimBuilder::default() };
        let written = match (first.exactly, first.first_available.and_then(|a| a.into_iter().next())) {
            (Some(e), _) => DeviceSubRequest {
                name: String::new(),
                device_class_name: e.device_class_name,
                selectors: e.selectors,
                allocation_mode: e.allocation_mode,
                count: e.count,
                tolerations: e.tolerations,
                capacity: e.capacity,
                derived_attributes: e.derived_attributes,
            },
            (None, Some(sub)) => sub,
            (None, None) => return ClaimBuilder::default(),
        };
        let subs = alternatives
            .iter()
            .map(|(name, extra)| {
                let mut sub = DeviceSubRequest { name: (*name).into(), ..written.clone() };
                sub.selectors.get_or_insert_default().extend(extra.iter().copied().map(cel));
                sub
            })
            .collect();
        let request = DeviceRequest { name: first.name, exactly: None, first_available: Some(subs) };
        ClaimBuilder::with_requests(vec![request])
    }

    /// The first request alone (other requests, constraints and configs dropped), for every
    /// device it matches on the node (`allocationMode: All`; each of its alternatives).
    pub fn all_of_first(self) -> ClaimBuilder {
        let Some(first) = self.first_only() else { return ClaimBuilder::default() };
        let mut b = ClaimBuilder::with_requests(vec![first]);
        b.each_of_first(|e| {
            *e.allocation_mode = Some("All".into());
            *e.count = None;
        });
        b
    }

    /// The first request (an exact one: alternatives have no admin access) asks for admin
    /// access: devices in use by other claims may be allocated to it.
    pub fn admin_access(mut self) -> ClaimBuilder {
        let first = self.spec.devices.as_mut().and_then(|d| d.requests.as_mut()).and_then(|r| r.first_mut());
        if let Some(e) = first.and_then(|r| r.exactly.as_mut()) {
            e.admin_access = Some(true);
        }
        self
    }

    /// One more opaque configuration of `driver` for `requests` (all of the claim's when
    /// empty), after those the claim has.
    pub fn config(mut self, requests: &[&str], driver: &str, parameters: serde_json::Value) -> ClaimBuilder {
        self.spec.devices.get_or_insert_default().config.get_or_insert_default().push(DeviceClaimConfiguration {
            requests: (!requests.is_empty()).then(|| requests.iter().map(|r| r.to_string()).collect()),
            opaque: Some(OpaqueDeviceConfiguration { driver: driver.into(), parameters: RawExtension(parameters) }),
        });
        self
    }

    /// The spec as the API takes it.
    pub fn spec(&self) -> ResourceClaimSpec {
        self.spec.clone()
    }

    /// A standalone claim `name` in `namespace`.
    pub fn claim(&self, namespace: &str, name: &str) -> ResourceClaim {
        ResourceClaim { metadata: crate::meta(name, Some(namespace)), spec: Some(self.spec()), status: None }
    }

    /// A template `name` in `namespace` whose generated claims have this spec.
    pub fn template(&self, namespace: &str, name: &str) -> ResourceClaimTemplate {
        ResourceClaimTemplate {
            metadata: crate::meta(name, Some(namespace)),
            spec: Some(ResourceClaimTemplateSpec { metadata: None, spec: Some(self.spec()) }),
        }
    }

    fn first_only(self) -> Option<DeviceRequest> {
        self.spec.devices.and_then(|d| d.requests).and_then(|r| r.into_iter().next())
    }

    fn with_requests(requests: Vec<DeviceRequest>) -> ClaimBuilder {
        ClaimBuilder {
            spec: ResourceClaimSpec {
                devices: Some(DeviceClaim { requests: Some(requests), ..DeviceClaim::default() }),
            },
        }
    }

    /// Applies `f` to the exact request of the first request, or to each of its alternatives.
    fn each_of_first(&mut self, f: impl Fn(&mut Exact<'_>)) {
        if let Some(first) = self.spec.devices.as_mut().and_then(|d| d.requests.as_mut()).and_then(|r| r.first_mut()) {
            each_exact(first, &f);
        }
    }
}

/// Applies `f` to the exact request of `request`, or to each of its alternatives.
fn each_exact(request: &mut DeviceRequest, f: &dyn Fn(&mut Exact<'_>)) {
    if let Some(e) = request.exactly.as_mut() {
        f(&mut Exact {
            device_class_name: &mut e.device_class_name,
            allocation_mode: &mut e.allocation_mode,
            count: &mut e.count,
            selectors: &mut e.selectors,
            tolerations: &mut e.tolerations,
            capacity: &mut e.capacity,
        });
    }
    for sub in request.first_available.iter_mut().flatten() {
        let DeviceSubRequest { device_class_name, allocation_mode, count, selectors, tolerations, capacity, .. } = sub;
        f(&mut Exact { device_class_name, allocation_mode, count, selectors, tolerations, capacity });
    }
}

/// What an exact request and a `firstAvailable` alternative have in common, so that one
/// variation applies to both.
struct Exact<'a> {
    device_class_name: &'a mut String,
    allocation_mode: &'a mut Option<String>,
    count: &'a mut Option<i64>,
    selectors: &'a mut Option<Vec<DeviceSelector>>,
    tolerations: &'a mut Option<Vec<DeviceToleration>>,
    capacity: &'a mut Option<CapacityRequirements>,
}

pub(crate) fn cel(expression: impl Into<String>) -> DeviceSelector {
    DeviceSelector { cel: Some(CELDeviceSelector { expression: expression.into() }) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first(b: &ClaimBuilder) -> DeviceRequest {
        b.spec().devices.unwrap().requests.unwrap().remove(0)
    }

    #[test]
    fn variants_change_the_first_request_only() {
        let mut second = first(&ClaimBuilder::exact("b", 1));
        second.name = "second".into();
        let two = ClaimBuilder::from_spec(ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(vec![first(&ClaimBuilder::exact("a", 1)), second.clone()]),
                ..DeviceClaim::default()
            }),
        });
        let requests =
            two.count(5).selector("device.driver == \"x\"").class("c").spec().devices.unwrap().requests.unwrap();
        let e = requests[0].exactly.as_ref().unwrap();
        assert_eq!((e.device_class_name.as_str(), e.count), ("c", Some(5)));
        assert_eq!(e.selectors.as_ref().unwrap()[0].cel.as_ref().unwrap().expression, "device.driver == \"x\"");
        assert_eq!(requests[1], second, "the second request is as it was");
    }

    #[test]
    fn the_first_request_splits_into_one_device_per_name_with_configs_per_request() {
        let profile = ClaimBuilder::exact("a", 2).selector("device.driver == \"x\"").and_request("other", "b", 1);
        let spec = profile
            .first_per_name(&["one", "two"])
            .class_everywhere("c")
            .config(&["one"], "x", serde_json::json!({"k": "v"}))
            .spec()
            .devices
            .unwrap();
        let requests = spec.requests.unwrap();
        assert_eq!(requests.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["one", "two"]);
        for r in &requests {
            let e = r.exactly.as_ref().unwrap();
            assert_eq!((e.device_class_name.as_str(), e.count), ("c", Some(1)));
            assert_eq!(e.selectors.as_ref().unwrap().len(), 1, "the selectors are kept");
        }
        let config = spec.config.unwrap();
        assert_eq!(config[0].requests.as_deref(), Some(&["one".to_string()][..]));
        assert_eq!(config[0].opaque.as_ref().unwrap().parameters.0["k"], "v");
    }

    #[test]
    fn an_alternatives_request_changes_in_each_alternative() {
        let sub = |class: &str| DeviceSubRequest {
            name: class.into(),
            device_class_name: class.into(),
            count: Some(1),
            allocation_mode: Some("All".into()),
            ..DeviceSubRequest::default()
        };
        let b = ClaimBuilder::from_spec(ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(vec![DeviceRequest {
                    name: "gpu".into(),
                    exactly: None,
                    first_available: Some(vec![sub("big"), sub("small")]),
                }]),
                ..DeviceClaim::default()
            }),
        })
        .count(3);
        for s in first(&b).first_available.unwrap() {
            assert_eq!((s.allocation_mode.as_deref(), s.count), (Some("ExactCount"), Some(3)), "{}", s.name);
        }
    }

    #[test]
    fn the_first_request_becomes_alternatives_all_of_its_devices_or_admin_access() {
        let profile = ClaimBuilder::exact("a", 2).selector("s").and_request("other", "b", 1);
        let alternatives = first(&profile.clone().first_available(&[("none", &["false"]), ("fits", &[])]));
        assert_eq!(alternatives.name, REQUEST);
        assert!(alternatives.exactly.is_none());
        let subs = alternatives.first_available.unwrap();
        assert_eq!(subs.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["none", "fits"]);
        assert_eq!((subs[0].device_class_name.as_str(), subs[0].count), ("a", Some(2)));
        assert_eq!(subs[0].selectors.as_ref().unwrap().len(), 2, "the request's selector and the added one");
        assert_eq!(subs[1].selectors.as_ref().unwrap().len(), 1);
        let all = profile.clone().all_of_first().spec().devices.unwrap().requests.unwrap();
        assert_eq!(all.len(), 1, "the other request is dropped");
        let e = all[0].exactly.as_ref().unwrap();
        assert_eq!((e.allocation_mode.as_deref(), e.count), (Some("All"), None));
        assert_eq!(first(&profile.admin_access()).exactly.unwrap().admin_access, Some(true));
    }

    #[test]
    fn claim_and_template_share_the_spec_and_carry_the_managed_by_label() {
        let b = ClaimBuilder::exact("gpu", 2).selectors(["a", "b"]);
        let claim = b.claim("ns", "c");
        let template = b.template("ns", "t");
        assert_eq!(claim.spec, template.spec.unwrap().spec);
        assert_eq!(claim.metadata.labels.unwrap()[crate::MANAGED_BY.0], crate::MANAGED_BY.1);
        let e = first(&b).exactly.unwrap();
        assert_eq!((e.count, e.selectors.unwrap().len()), (Some(2), 2));
    }
}
