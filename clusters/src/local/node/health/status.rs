//! Containers' `allocatedResourcesStatus`, as the 1.37 kubelet's
//! `UpdateAllocatedResourcesStatus` writes it on every status it generates: per claim a
//! container names, an entry `claim:<claim>` (or `claim:<claim>/<request>`) with one resource
//! per device prepared for that claim (only the request's devices where the container names a
//! request), identified by the device's first CDI device ID, else `<driver>/<pool>/<device>`,
//! its health read from the node's cache. Devices nobody reported on are Unknown; entries
//! without a device are left out.

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::api::core::v1::{Pod, ResourceHealth, ResourceStatus};

use super::Reading;
use crate::local::node::dra::PreparedDevice;

/// The devices prepared for one claim, by driver (the checkpoint's `driver_state`).
pub type ClaimDevices = BTreeMap<String, Vec<PreparedDevice>>;

/// The name of the ResourceClaim behind the pod's claim `pod_claim`: the generated one from
/// the pod's `resourceClaimStatuses`, else the spec's `resourceClaimName`, as upstream looks it
/// up (its status map first, `resourceclaim.Name` second).
pub fn claim_object_name(pod: &Pod, pod_claim: &str) -> Option<String> {
    let generated = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref())
        .into_iter()
        .flatten()
        .find(|s| s.name == pod_claim)
        .and_then(|s| s.resource_claim_name.clone());
    generated.or_else(|| {
        let spec = pod.spec.as_ref()?;
        let claim = spec.resource_claims.iter().flatten().find(|c| c.name == pod_claim)?;
        claim.resource_claim_name.clone()
    })
}

/// Each regular container's entries by container name; a container without entries is
/// absent. `prepared` holds the claims of the pod's namespace the kubelet knows, by claim
/// name; `health` reads a device's health by driver, pool and device.
pub fn allocated_resources_status(
    pod: &Pod,
    prepared: &HashMap<String, ClaimDevices>,
    health: impl Fn(&str, &str, &str) -> Reading,
) -> BTreeMap<String, Vec<ResourceStatus>> {
    let mut out = BTreeMap::new();
    let containers = pod.spec.as_ref().map(|s| s.containers.as_slice()).unwrap_or_default();
    for container in containers {
        let mut statuses: Vec<ResourceStatus> = Vec::new();
        for used in container.resources.as_ref().and_then(|r| r.claims.as_ref()).into_iter().flatten() {
            let Some(devices) = claim_object_name(pod, &used.name).and_then(|name| prepared.get(&name)) else {
                continue;
            };
            let request = used.request.as_deref().filter(|r| !r.is_empty());
            let name = match request {
                Some(r) => format!("claim:{}/{r}", used.name),
                None => format!("claim:{}", used.name),
            };
            let resources = resources(devices, request, &health);
            // The same claim and request named twice: the later wins, as upstream's map.
            match statuses.iter_mut().find(|s| s.name == name) {
                Some(existing) => existing.resources = Some(resources),
                None => statuses.push(ResourceStatus { name, resources: Some(resources) }),
            }
        }
        statuses.retain(|s| s.resources.as_ref().is_some_and(|r| !r.is_empty()));
        if !statuses.is_empty() {
            out.insert(container.name.clone(), statuses);
        }
    }
    out
}

/// The devices of one claim for `request` (all for none), one entry per resource ID.
fn resources(
    devices: &ClaimDevices,
    request: Option<&str>,
    health: &impl Fn(&str, &str, &str) -> Reading,
) -> Vec<ResourceHealth> {
    // Devices carry their requests without a subrequest (`req/sub` was allocated for `req`);
    // a device that names no request serves every one.
    let base = request.map(|r| r.split('/').next().unwrap_or(r));
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (driver, devices) in devices {
        for device in devices {
            if base.is_some_and(|b| !device.request_names.is_empty() && !device.request_names.iter().any(|n| n == b)) {
                continue;
            }
            let resource_id = match device.cdi_device_ids.first() {
                Some(id) => id.clone(),
                None => format!("{driver}/{}/{}", device.pool_name, device.device_name),
            };
            // Several devices may share a CDI device ID.
            if !seen.insert(resource_id.clone()) {
                continue;
            }
            let reading = health(driver, &device.pool_name, &device.device_name);
            out.push(ResourceHealth {
                resource_id,
                health: Some(reading.health.as_str().to_string()),
                // ResourceHealthStatusMessage (beta, on by default): only a message there is.
                message: Some(reading.message).filter(|m| !m.is_empty()),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        Container, PodResourceClaim, PodResourceClaimStatus, PodSpec, PodStatus, ResourceClaim as ContainerClaim,
        ResourceRequirements,
    };

    use super::super::Health;
    use super::*;

    fn device(pool: &str, name: &str, requests: &[&str], cdi: &[&str]) -> PreparedDevice {
        PreparedDevice {
            pool_name: pool.into(),
            device_name: name.into(),
            request_names: requests.iter().map(|s| s.to_string()).collect(),
            cdi_device_ids: cdi.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn uses(name: &str, request: Option<&str>) -> ContainerClaim {
        ContainerClaim { name: name.into(), request: request.map(Into::into) }
    }

    fn container(name: &str, claims: Vec<ContainerClaim>) -> Container {
        Container {
            name: name.into(),
            resources: Some(ResourceRequirements { claims: Some(claims), ..Default::default() }),
            ..Default::default()
        }
    }

    /// Pod claim `gpu` from the claim `shared-gpu`, pod claim `tpl` from a template whose
    /// claim was generated as `pod-tpl-x7`.
    fn pod(containers: Vec<Container>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                containers,
                resource_claims: Some(vec![
                    PodResourceClaim {
                        name: "gpu".into(),
                        resource_claim_name: Some("shared-gpu".into()),
                        ..Default::default()
                    },
                    PodResourceClaim {
                        name: "tpl".into(),
                        resource_claim_template_name: Some("template".into()),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }),
            status: Some(PodStatus {
                resource_claim_statuses: Some(vec![PodResourceClaimStatus {
                    name: "tpl".into(),
                    resource_claim_name: Some("pod-tpl-x7".into()),
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Health as the tests set it: `gpu-0` unhealthy with a message, `gpu-1` healthy, the
    /// rest unreported.
    fn health(driver: &str, pool: &str, device: &str) -> Reading {
        match (driver, pool, device) {
            ("gpu.example.com", "node-1", "gpu-0") => {
                Reading { health: Health::Unhealthy, message: "ECC errors exceeded".into() }
            }
            ("gpu.example.com", "node-1", "gpu-1") => Reading { health: Health::Healthy, message: String::new() },
            _ => Reading::UNKNOWN,
        }
    }

    fn entry(id: &str, health: &str, message: Option<&str>) -> ResourceHealth {
        ResourceHealth { resource_id: id.into(), health: Some(health.into()), message: message.map(Into::into) }
    }

    #[test]
    fn the_claim_object_comes_from_the_status_for_templates_and_the_spec_otherwise() {
        let p = pod(vec![]);
        assert_eq!(claim_object_name(&p, "gpu").as_deref(), Some("shared-gpu"));
        assert_eq!(claim_object_name(&p, "tpl").as_deref(), Some("pod-tpl-x7"));
        assert_eq!(claim_object_name(&p, "missing"), None);
        let mut not_needed = p.clone();
        not_needed.status.as_mut().unwrap().resource_claim_statuses.as_mut().unwrap()[0].resource_claim_name = None;
        assert_eq!(claim_object_name(&not_needed, "tpl"), None, "the claim controller decided none is needed");
    }

    #[test]
    fn each_claim_of_a_container_lists_its_devices_with_their_health() {
        let p = pod(vec![container("main", vec![uses("gpu", None)]), container("sidecar", vec![])]);
        let prepared = HashMap::from([(
            "shared-gpu".to_string(),
            ClaimDevices::from([
                (
                    "gpu.example.com".to_string(),
                    vec![
                        device("node-1", "gpu-0", &["r"], &["gpu.example.com/gpu=gpu-0"]),
                        device("node-1", "gpu-1", &["r"], &[]),
                        // Unreported: Unknown, as for a driver without a health service.
                        device("node-1", "gpu-2", &["r"], &["gpu.example.com/gpu=gpu-2", "second-id"]),
                    ],
                ),
                ("nic.example.com".to_string(), vec![device("node-1", "eth-0", &["r"], &[])]),
            ]),
        )]);
        let status = allocated_resources_status(&p, &prepared, health);
        assert_eq!(status.keys().collect::<Vec<_>>(), ["main"], "containers without claims have none");
        assert_eq!(
            status["main"],
            [ResourceStatus {
                name: "claim:gpu".into(),
                resources: Some(vec![
                    entry("gpu.example.com/gpu=gpu-0", "Unhealthy", Some("ECC errors exceeded")),
                    entry("gpu.example.com/node-1/gpu-1", "Healthy", None),
                    entry("gpu.example.com/gpu=gpu-2", "Unknown", None),
                    entry("nic.example.com/node-1/eth-0", "Unknown", None),
                ]),
            }]
        );
    }

    #[test]
    fn a_named_request_lists_its_own_devices_and_a_subrequest_those_of_its_request() {
        let p = pod(vec![container(
            "main",
            vec![uses("tpl", Some("big")), uses("tpl", Some("small/fallback")), uses("tpl", Some("none"))],
        )]);
        let prepared = HashMap::from([(
            "pod-tpl-x7".to_string(),
            ClaimDevices::from([(
                "gpu.example.com".to_string(),
                vec![
                    device("node-1", "gpu-0", &["big"], &["cdi/gpu=0"]),
                    device("node-1", "gpu-1", &["small"], &["cdi/gpu=1"]),
                    // Names no request: it serves every one.
                    device("node-1", "gpu-2", &[], &["cdi/gpu=2"]),
                ],
            )]),
        )]);
        let status = allocated_resources_status(&p, &prepared, health);
        let names: Vec<(&str, Vec<&str>)> = status["main"]
            .iter()
            .map(|s| (s.name.as_str(), s.resources.iter().flatten().map(|r| r.resource_id.as_str()).collect()))
            .collect();
        assert_eq!(
            names,
            [
                ("claim:tpl/big", vec!["cdi/gpu=0", "cdi/gpu=2"]),
                ("claim:tpl/small/fallback", vec!["cdi/gpu=1", "cdi/gpu=2"]),
                ("claim:tpl/none", vec!["cdi/gpu=2"]),
            ]
        );
    }

    #[test]
    fn devices_sharing_a_resource_id_are_listed_once_and_empty_entries_left_out() {
        let p = pod(vec![
            container("main", vec![uses("gpu", None), uses("tpl", None)]),
            container("other", vec![uses("gpu", Some("absent"))]),
        ]);
        let prepared = HashMap::from([(
            "shared-gpu".to_string(),
            ClaimDevices::from([(
                "gpu.example.com".to_string(),
                vec![
                    device("node-1", "gpu-0", &["r"], &["cdi/shared"]),
                    device("node-1", "gpu-1", &["r"], &["cdi/shared"]),
                ],
            )]),
        )]);
        // `tpl` is not prepared (the kubelet knows no such claim): no entry.
        let status = allocated_resources_status(&p, &prepared, health);
        assert_eq!(status.keys().collect::<Vec<_>>(), ["main"], "a request without devices leaves nothing");
        assert_eq!(
            status["main"],
            [ResourceStatus {
                name: "claim:gpu".into(),
                // The first device's health: the entry stands for the resource ID.
                resources: Some(vec![entry("cdi/shared", "Unhealthy", Some("ECC errors exceeded"))]),
            }]
        );
        // A prepared claim without devices yet (its prepare runs) has no entry either.
        let pending = HashMap::from([("shared-gpu".to_string(), ClaimDevices::new())]);
        assert!(allocated_resources_status(&p, &pending, health).is_empty());
    }
}
