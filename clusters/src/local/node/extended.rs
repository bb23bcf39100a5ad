//! Extended resources backed by DRA (`DRAExtendedResource`, GA in 1.37): a container asks for a
//! DeviceClass's `extendedResourceName` (or `deviceclass.resource.kubernetes.io/<class>`) in its
//! resources, the scheduler creates and allocates a ResourceClaim for the pod and names it, with
//! the request behind each container's resource, in `status.extendedResourceClaimStatus`. The
//! kubelet prepares that claim with the pod's `spec.resourceClaims` and gives each container the
//! devices of the requests mapped to it (upstream `pkg/kubelet/cm/dra/manager.go`
//! `prepareResources` and `GetResources`).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, Pod};

/// The resource name prefix of a DeviceClass's implicit extended resource
/// (`resourceapi.ResourceDeviceClassPrefix`).
const DEVICE_CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// The name of the ResourceClaim the scheduler created for the pod's extended resources, once
/// it wrote `status.extendedResourceClaimStatus`.
pub fn claim_name(pod: &Pod) -> Option<&str> {
    let status = pod.status.as_ref()?.extended_resource_claim_status.as_ref()?;
    Some(status.resource_claim_name.as_str())
}

/// The requests of the extended-resource claim whose devices `container` gets, in the order of
/// the pod's request mappings: those mapped to the container's name for a DRA extended resource
/// it asks for with a quantity other than zero (upstream `GetResources`). The kubelet reads the
/// container's `requests`, which the apiserver defaults from `limits` per resource; a resource
/// only in `limits` counts the same here.
pub fn requests_for(pod: &Pod, container: &Container) -> Vec<String> {
    let Some(status) = pod.status.as_ref().and_then(|s| s.extended_resource_claim_status.as_ref()) else {
        return Vec::new();
    };
    let resources = container.resources.as_ref();
    let requests = resources.and_then(|r| r.requests.as_ref());
    let limits = resources.and_then(|r| r.limits.as_ref());
    let asked: BTreeSet<&str> = requests
        .into_iter()
        .flatten()
        .chain(limits.into_iter().flatten().filter(|(name, _)| !requests.is_some_and(|r| r.contains_key(*name))))
        .filter(|(name, quantity)| is_dra_extended_resource_name(name) && !is_zero(&quantity.0))
        .map(|(name, _)| name.as_str())
        .collect();
    status
        .request_mappings
        .iter()
        .filter(|m| m.container_name == container.name && asked.contains(m.resource_name.as_str()))
        .map(|m| m.request_name.clone())
        .collect()
}

/// A quantity of zero (`Quantity.IsZero`); one that does not parse (the apiserver lets none
/// through) counts as asked for.
fn is_zero(quantity: &str) -> bool {
    dracheck_objects::quantity::Quantity::parse(quantity).is_ok_and(|q| q.sign() == 0)
}

/// A resource name a DeviceClass may back (upstream `schedutil.IsDRAExtendedResourceName`): an
/// extended resource name, or a DeviceClass's implicit one.
pub fn is_dra_extended_resource_name(name: &str) -> bool {
    is_extended_resource_name(name) || name.starts_with(DEVICE_CLASS_PREFIX)
}

/// `v1helper.IsExtendedResourceName`: not native (unprefixed, or in a `kubernetes.io/`
/// namespace), not a quota `requests.` name, and a qualified name once prefixed with
/// `requests.`.
fn is_extended_resource_name(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    !native && !name.starts_with("requests.") && is_qualified_name(&format!("requests.{name}"))
}

/// apimachinery's `IsQualifiedName`: an optional DNS subdomain prefix and `/`, then a name of 1 to
/// 63 characters of alphanumerics, `-`, `_` and `.`, starting and ending alphanumeric.
fn is_qualified_name(s: &str) -> bool {
    let name = match s.split('/').collect::<Vec<_>>()[..] {
        [name] => name,
        [prefix, name] => {
            if !dracheck_objects::names::is_dns_subdomain(prefix) {
                return false;
            }
            name
        }
        _ => return false,
    };
    let bytes = name.as_bytes();
    !name.is_empty()
        && name.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{
        ContainerExtendedResourceRequest, PodExtendedResourceClaimStatus, PodStatus, ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use rstest::rstest;

    use super::*;

    fn mapping(container: &str, resource: &str, request: &str) -> ContainerExtendedResourceRequest {
        ContainerExtendedResourceRequest {
            container_name: container.into(),
            resource_name: resource.into(),
            request_name: request.into(),
        }
    }

    fn pod(mappings: Vec<ContainerExtendedResourceRequest>) -> Pod {
        Pod {
            status: Some(PodStatus {
                extended_resource_claim_status: Some(PodExtendedResourceClaimStatus {
                    resource_claim_name: "pod-extended-resources-x7".into(),
                    request_mappings: mappings,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn list(entries: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
        Some(entries.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect())
    }

    fn container(name: &str, requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
        Container {
            name: name.into(),
            resources: Some(ResourceRequirements {
                requests: list(requests).filter(|r| !r.is_empty()),
                limits: list(limits).filter(|l| !l.is_empty()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[rstest]
    #[case::a_class_s_extended_resource("dracheck.io/gpu", true)]
    #[case::a_class_s_implicit_name("deviceclass.resource.kubernetes.io/gpu-class", true)]
    #[case::native_unprefixed("cpu", false)]
    #[case::native_prefixed("kubernetes.io/something", false)]
    #[case::native_subdomain("example.kubernetes.io/gpu", false)]
    #[case::hugepages("hugepages-2Mi", false)]
    #[case::a_quota_name("requests.dracheck.io/gpu", false)]
    #[case::an_uppercase_domain("Dracheck.io/gpu", false)]
    #[case::two_slashes("dracheck.io/gpu/0", false)]
    #[case::a_name_ending_badly("dracheck.io/gpu-", false)]
    fn dra_extended_resource_names(#[case] name: &str, #[case] expected: bool) {
        assert_eq!(is_dra_extended_resource_name(name), expected, "{name}");
    }

    #[test]
    fn a_pod_without_the_scheduler_s_status_has_no_extended_resource_claim() {
        assert_eq!(claim_name(&Pod::default()), None);
        assert_eq!(claim_name(&pod(vec![])), Some("pod-extended-resources-x7"));
        let c = container("main", &[("dracheck.io/gpu", "1")], &[]);
        assert!(requests_for(&Pod::default(), &c).is_empty());
    }

    #[test]
    fn a_container_gets_the_requests_mapped_to_it_for_the_resources_it_asks_for() {
        let p = pod(vec![
            mapping("main", "dracheck.io/gpu", "container-0-request-0"),
            mapping("sidecar", "dracheck.io/gpu", "container-1-request-0"),
            mapping("main", "deviceclass.resource.kubernetes.io/nic", "container-0-request-1"),
            // Asked for with zero, or not at all: no devices from it.
            mapping("main", "dracheck.io/zero", "container-0-request-2"),
            mapping("main", "dracheck.io/other", "container-0-request-3"),
        ]);
        let main = container(
            "main",
            &[("cpu", "1"), ("dracheck.io/gpu", "2"), ("dracheck.io/zero", "0")],
            // Only in limits: the apiserver defaults the request from it.
            &[("deviceclass.resource.kubernetes.io/nic", "1"), ("dracheck.io/zero", "0")],
        );
        assert_eq!(requests_for(&p, &main), ["container-0-request-0", "container-0-request-1"]);
        let sidecar = container("sidecar", &[], &[("dracheck.io/gpu", "1")]);
        assert_eq!(requests_for(&p, &sidecar), ["container-1-request-0"]);
        assert!(requests_for(&p, &container("other", &[("dracheck.io/gpu", "1")], &[])).is_empty());
    }
}
