//! The kubelet's DRA manager: the checks before a pod may use its claims, the
//! NodePrepareResources / NodeUnprepareResources calls per driver, and the checkpoint. As in
//! upstream kubelet (`pkg/kubelet/cm/dra/manager.go`), a restarted kubelet takes the claims of
//! running pods from the checkpoint without calling the driver (Prepare only runs before a
//! pod's sandbox is created), and can still unprepare claims whose objects are gone.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use dracheck_kubelet_api::dra_v1;
use dracheck_kubelet_api::kubelet::ClaimOutcome;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::Api;
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use super::health::DeviceKey;
use super::health::status::ClaimDevices;
use super::plugins::Registry;

/// One prepared device, as the driver returned it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PreparedDevice {
    pub pool_name: String,
    pub device_name: String,
    pub request_names: Vec<String>,
    pub cdi_device_ids: Vec<String>,
}

/// The checkpoint's entry for a claim (upstream `ClaimInfoState`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClaimEntry {
    claim_uid: String,
    claim_name: String,
    namespace: String,
    pod_uids: Vec<String>,
    /// Driver → devices.
    driver_state: BTreeMap<String, Vec<PreparedDevice>>,
    /// Not persisted: entries restored after a restart are not prepared, as in kubelet, so a
    /// pod that starts with such a claim afterwards calls Prepare again; running pods do not.
    #[serde(skip)]
    prepared: bool,
    /// Not persisted: the last pod's unprepare began (and may have failed); until it succeeds
    /// no new pod may take the claim, as in kubelet.
    #[serde(skip)]
    unpreparing: bool,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Checkpoint {
    version: String,
    entries: Vec<ClaimEntry>,
}

/// Which of a pod's claims a ResourceClaim is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimSource {
    /// The entry of `spec.resourceClaims` of this name.
    Spec(String),
    /// The claim the scheduler created for the pod's extended resources backed by DRA
    /// (`status.extendedResourceClaimStatus`).
    ExtendedResources,
}

/// A pod claim resolved for the containers: which claim of the pod it is, and its devices.
#[derive(Debug, Clone)]
pub struct PodClaim {
    pub source: ClaimSource,
    pub devices: Vec<PreparedDevice>,
}

/// One ResourceClaim the kubelet prepares for a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ClaimToPrepare {
    source: ClaimSource,
    /// The ResourceClaim's name; the error while a template's claim is not generated yet.
    name: Result<String, String>,
    /// Generated from a template: it must be owned by the pod (`resourceclaim.Name`'s
    /// `mustCheckOwner`). A named claim and the extended-resource claim are not checked.
    generated: bool,
}

/// The claims the kubelet prepares for `pod`, in its order (`prepareResources`): those of
/// `spec.resourceClaims` (but a template's claim the claim controller decided the pod does not
/// need), then the extended-resource claim once the scheduler named it in the pod's status.
fn claims_to_prepare(pod: &Pod) -> Vec<ClaimToPrepare> {
    let pod_claims = pod.spec.as_ref().and_then(|s| s.resource_claims.as_ref());
    let statuses = pod.status.as_ref().and_then(|s| s.resource_claim_statuses.as_ref());
    let mut out = Vec::new();
    for pc in pod_claims.into_iter().flatten() {
        let source = ClaimSource::Spec(pc.name.clone());
        let (name, generated) = match &pc.resource_claim_name {
            Some(n) => (Ok(n.clone()), false),
            None => match statuses.into_iter().flatten().find(|s| s.name == pc.name) {
                Some(s) => match &s.resource_claim_name {
                    Some(n) => (Ok(n.clone()), true),
                    // The claim controller decided the pod does not need this claim.
                    None => continue,
                },
                None => (Err(format!("waiting for the ResourceClaim of pod claim {} to be generated", pc.name)), true),
            },
        };
        out.push(ClaimToPrepare { source, name, generated });
    }
    if let Some(name) = super::extended::claim_name(pod) {
        out.push(ClaimToPrepare { source: ClaimSource::ExtendedResources, name: Ok(name.into()), generated: false });
    }
    out
}

/// Claim UID → every CDI device ID its checkpoint entry holds, as read from the file.
pub fn read_checkpoint(path: &std::path::Path) -> Vec<(String, Vec<String>)> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<Checkpoint>(&t).ok())
        .map(|c| {
            c.entries
                .into_iter()
                .map(|e| (e.claim_uid, e.driver_state.into_values().flatten().flat_map(|d| d.cdi_device_ids).collect()))
                .collect()
        })
        .unwrap_or_default()
}

/// The checkpoint entry a pod's claim joins, if any. As in kubelet, the claim cache is keyed by
/// namespace and name: while an entry of an older claim of the same name (its pod
/// force-deleted, its unprepare not yet done) is left, a new claim of that name waits; so does
/// a pod whose claim's last unprepare has begun.
fn entry_for(state: &[ClaimEntry], ns: &str, name: &str, uid: &str) -> Result<Option<usize>, String> {
    let Some(i) = state.iter().position(|e| e.namespace == ns && e.claim_name == name) else {
        return Ok(None);
    };
    let entry = &state[i];
    if entry.claim_uid != uid {
        return Err(format!(
            "old ResourceClaim with same name {name} and different UID {} still exists (previous pod force-deleted?!)",
            entry.claim_uid
        ));
    }
    if entry.unpreparing {
        return Err(format!("ResourceClaim {name} is being unprepared"));
    }
    Ok(Some(i))
}

/// The pods of the entries whose devices include any of `devices`.
fn pods_using(state: &[ClaimEntry], devices: &[DeviceKey]) -> Vec<String> {
    let holds = |e: &ClaimEntry, k: &DeviceKey| {
        e.driver_state
            .get(&k.driver)
            .is_some_and(|ds| ds.iter().any(|d| d.pool_name == k.pool && d.device_name == k.device))
    };
    let mut out: Vec<String> =
        state.iter().filter(|e| devices.iter().any(|k| holds(e, k))).flat_map(|e| e.pod_uids.iter().cloned()).collect();
    out.sort();
    out.dedup();
    out
}

pub struct DraManager {
    client: kube::Client,
    registry: Arc<Registry>,
    path: PathBuf,
    // Async: held across the gRPC calls, which serializes them per node like the kubelet's
    // claim cache lock does.
    state: Mutex<Vec<ClaimEntry>>,
}

impl DraManager {
    /// Loads the checkpoint in `path`, if any.
    pub fn load(client: kube::Client, registry: Arc<Registry>, path: PathBuf) -> DraManager {
        let entries = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<Checkpoint>(&t).ok())
            .map(|c| c.entries)
            .unwrap_or_default();
        DraManager { client, registry, path, state: Mutex::new(entries) }
    }

    fn save(&self, entries: &[ClaimEntry]) -> Result<(), String> {
        let cp = Checkpoint { version: "v1".into(), entries: entries.to_vec() };
        let tmp = self.path.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(&cp).expect("serializes")).map_err(|e| e.to_string())?;
        std::fs::rename(&tmp, &self.path).map_err(|e| format!("writing the DRA checkpoint: {e}"))
    }

    /// The kubelet's checks, then Prepare for every claim of `pod` not prepared yet, the
    /// extended-resource claim included ([`claims_to_prepare`]). The error is the message of a
    /// `FailedPrepareDynamicResources` event. Unprepare needs no such list: the checkpoint names
    /// every claim prepared for the pod, whichever of its claims it was.
    pub async fn prepare_pod(&self, pod: &Pod) -> Result<Vec<PodClaim>, String> {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
        let claims_api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &ns);
        let mut out = Vec::new();
        for c in claims_to_prepare(pod) {
            let (claim_name, generated) = (c.name?, c.generated);
            let claim = claims_api
                .get_opt(&claim_name)
                .await
                .map_err(|e| format!("getting ResourceClaim {claim_name}: {e}"))?
                .ok_or_else(|| format!("ResourceClaim {claim_name} not found"))?;
            let claim_uid = claim.metadata.uid.clone().unwrap_or_default();
            if generated {
                let owned = claim
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.controller == Some(true) && o.uid == pod_uid);
                if !owned {
                    return Err(format!(
                        "ResourceClaim {claim_name} was not created for pod {ns}/{pod_name} ({pod_uid})"
                    ));
                }
            }
            let status = claim.status.clone().unwrap_or_default();
            let reserved = status.reserved_for.iter().flatten().any(|r| r.uid == pod_uid);
            if !reserved {
                return Err(format!(
                    "pod {ns}/{pod_name} ({pod_uid}) is not allowed to use ResourceClaim {claim_name} ({claim_uid})"
                ));
            }
            let results = status.allocation.and_then(|a| a.devices).and_then(|d| d.results).unwrap_or_default();
            if results.is_empty() {
                return Err(format!("ResourceClaim {claim_name} is not allocated"));
            }
            let mut drivers: Vec<String> = results.iter().map(|r| r.driver.clone()).collect();
            drivers.sort();
            drivers.dedup();
            let devices = self.prepare_claim(&ns, &claim_name, &claim_uid, &pod_uid, &drivers).await?;
            out.push(PodClaim { source: c.source, devices });
        }
        Ok(out)
    }

    async fn prepare_claim(
        &self,
        ns: &str,
        name: &str,
        uid: &str,
        pod_uid: &str,
        drivers: &[String],
    ) -> Result<Vec<PreparedDevice>, String> {
        // Like kubelet, look the drivers up before the checkpoint names the pod: a pod whose
        // driver never registered must be deletable without an unprepare nobody can answer.
        let plugins = drivers
            .iter()
            .map(|d| {
                self.registry.get(d).map(|p| (d.clone(), p)).ok_or_else(|| format!("DRA driver {d} is not registered"))
            })
            .collect::<Result<Vec<_>, String>>()?;
        let mut state = self.state.lock().await;
        let idx = match entry_for(&state, ns, name, uid)? {
            Some(i) => i,
            None => {
                state.push(ClaimEntry {
                    claim_uid: uid.into(),
                    claim_name: name.into(),
                    namespace: ns.into(),
                    ..ClaimEntry::default()
                });
                state.len() - 1
            }
        };
        if !state[idx].pod_uids.iter().any(|p| p == pod_uid) {
            state[idx].pod_uids.push(pod_uid.into());
        }
        // Written before the call, so that a restart in the middle still knows to unprepare.
        self.save(&state)?;
        if state[idx].prepared {
            return Ok(state[idx].driver_state.values().flatten().cloned().collect());
        }
        let claim = dra_v1::Claim { namespace: ns.into(), uid: uid.into(), name: name.into() };
        let mut driver_state = BTreeMap::new();
        for (driver, plugin) in &plugins {
            let failed = |e: &dyn std::fmt::Display| {
                format!("prepare dynamic resources: NodePrepareResources failed for ResourceClaim {name}: {e}")
            };
            let mut outcomes = plugin.client.prepare(vec![claim.clone()]).await.map_err(|e| failed(&e))?;
            let devices = match outcomes.remove(uid).unwrap_or(ClaimOutcome::Missing) {
                ClaimOutcome::Done(devices) => devices,
                ClaimOutcome::Refused(error) => return Err(failed(&error)),
                ClaimOutcome::Missing => {
                    return Err("prepare dynamic resources: NodePrepareResources skipped 1 ResourceClaims".into());
                }
            };
            let devices = devices
                .iter()
                .map(|d| PreparedDevice {
                    pool_name: d.pool_name.clone(),
                    device_name: d.device_name.clone(),
                    request_names: d.request_names.clone(),
                    cdi_device_ids: d.cdi_device_ids.clone(),
                })
                .collect();
            driver_state.insert(driver.clone(), devices);
        }
        state[idx].driver_state = driver_state;
        state[idx].prepared = true;
        self.save(&state)?;
        Ok(state[idx].driver_state.values().flatten().cloned().collect())
    }

    /// The names of the claims the checkpoint holds for `pod_uid`.
    pub async fn claims_of(&self, pod_uid: &str) -> Vec<String> {
        let state = self.state.lock().await;
        state.iter().filter(|e| e.pod_uids.iter().any(|p| p == pod_uid)).map(|e| e.claim_name.clone()).collect()
    }

    /// The devices of every claim of namespace `ns` the kubelet knows, by claim name (empty
    /// while a claim's prepare has not succeeded), for the pods' `allocatedResourcesStatus`.
    pub async fn claim_devices(&self, ns: &str) -> HashMap<String, ClaimDevices> {
        let state = self.state.lock().await;
        state.iter().filter(|e| e.namespace == ns).map(|e| (e.claim_name.clone(), e.driver_state.clone())).collect()
    }

    /// The pods whose claims hold any of `devices`, whose status a health change touches (as
    /// upstream's `HandleWatchResourcesStream` finds them in its claim cache).
    pub async fn pods_using(&self, devices: &[DeviceKey]) -> Vec<String> {
        pods_using(&self.state.lock().await, devices)
    }

    /// Every pod the checkpoint names, for the reconcile of pods that went while no kubelet
    /// watched (upstream's reconcile loop over its active pods).
    pub async fn pods(&self) -> Vec<String> {
        let state = self.state.lock().await;
        let mut out: Vec<String> = state.iter().flat_map(|e| e.pod_uids.iter().cloned()).collect();
        out.sort();
        out.dedup();
        out
    }

    /// The pod no longer needs its claims (its containers ended, or it is going away). As in
    /// kubelet: a claim other pods still reference only loses this pod's reference; a claim
    /// this pod is the last user of is unprepared, and its entry goes only when that
    /// succeeded, so a failed unprepare is tried again and a successful one is never repeated
    /// (a pod the checkpoint does not name has nothing to unprepare). The error is the message
    /// of a `FailedUnprepareDynamicResources` event; the pod must not go away until this
    /// succeeds.
    pub async fn unprepare_pod(&self, pod_uid: &str) -> Result<(), String> {
        let mut state = self.state.lock().await;
        let mut last = Vec::new();
        for e in state.iter_mut().filter(|e| e.pod_uids.iter().any(|p| p == pod_uid)) {
            if e.pod_uids.len() > 1 {
                e.pod_uids.retain(|p| p != pod_uid);
            } else {
                e.unpreparing = true;
                last.push(e.clone());
            }
        }
        for entry in last {
            let claim = dra_v1::Claim {
                namespace: entry.namespace.clone(),
                uid: entry.claim_uid.clone(),
                name: entry.claim_name.clone(),
            };
            for driver in entry.driver_state.keys() {
                let plugin =
                    self.registry.get(driver).ok_or_else(|| format!("DRA driver {driver} is not registered"))?;
                let failed = |e: &dyn std::fmt::Display| {
                    format!(
                        "unprepare dynamic resources: NodeUnprepareResources failed for ResourceClaim {}: {e}",
                        entry.claim_name
                    )
                };
                let mut outcomes = plugin.client.unprepare(vec![claim.clone()]).await.map_err(|e| failed(&e))?;
                match outcomes.remove(&entry.claim_uid).unwrap_or(ClaimOutcome::Missing) {
                    ClaimOutcome::Done(()) => {}
                    ClaimOutcome::Refused(error) => return Err(failed(&error)),
                    ClaimOutcome::Missing => {
                        return Err(
                            "unprepare dynamic resources: NodeUnprepareResources skipped 1 ResourceClaims".into()
                        );
                    }
                }
            }
            // Saved at once, so that not even a restart makes the driver unprepare it twice.
            state.retain(|e| e.claim_uid != entry.claim_uid);
            self.save(&state)?;
        }
        self.save(&state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(ns: &str, name: &str, uid: &str) -> ClaimEntry {
        ClaimEntry { claim_uid: uid.into(), claim_name: name.into(), namespace: ns.into(), ..ClaimEntry::default() }
    }

    #[test]
    fn a_claim_joins_its_own_entry_and_waits_for_an_older_one_of_its_name() {
        let state = vec![entry("a", "gpu", "uid-1"), entry("b", "gpu", "uid-2")];
        assert_eq!(entry_for(&state, "a", "gpu", "uid-1"), Ok(Some(0)));
        assert_eq!(entry_for(&state, "a", "other", "uid-3"), Ok(None));
        // Same name in another namespace: its own entry.
        assert_eq!(entry_for(&state, "b", "gpu", "uid-2"), Ok(Some(1)));
        let refused = entry_for(&state, "a", "gpu", "uid-9").unwrap_err();
        assert!(refused.contains("different UID uid-1 still exists"), "{refused}");
    }

    #[test]
    fn a_health_change_reaches_the_pods_of_the_claims_holding_the_device() {
        let gpu = |pool: &str, name: &str| PreparedDevice {
            pool_name: pool.into(),
            device_name: name.into(),
            request_names: vec![],
            cdi_device_ids: vec![],
        };
        let shared = ClaimEntry {
            pod_uids: vec!["pod-b".into(), "pod-a".into()],
            driver_state: BTreeMap::from([("gpu.example.com".to_string(), vec![gpu("node-1", "gpu-0")])]),
            ..entry("a", "shared", "uid-1")
        };
        let other = ClaimEntry {
            pod_uids: vec!["pod-c".into()],
            driver_state: BTreeMap::from([("gpu.example.com".to_string(), vec![gpu("node-1", "gpu-1")])]),
            ..entry("a", "other", "uid-2")
        };
        let key = |driver: &str, device: &str| DeviceKey {
            driver: driver.into(),
            pool: "node-1".into(),
            device: device.into(),
        };
        let state = [shared, other];
        assert_eq!(pods_using(&state, &[key("gpu.example.com", "gpu-0")]), ["pod-a", "pod-b"]);
        assert_eq!(
            pods_using(&state, &[key("gpu.example.com", "gpu-0"), key("gpu.example.com", "gpu-1")]),
            ["pod-a", "pod-b", "pod-c"]
        );
        // The same pool and device name of another driver is another device.
        assert!(pods_using(&state, &[key("nic.example.com", "gpu-0")]).is_empty());
    }

    /// Pod claim `gpu` from the claim `shared-gpu`, `tpl` from a template whose claim was
    /// generated, `unneeded` from a template the claim controller generated no claim for.
    fn pod_with_claims(extended: Option<&str>) -> Pod {
        use k8s_openapi::api::core::v1::{
            PodExtendedResourceClaimStatus, PodResourceClaim, PodResourceClaimStatus, PodSpec, PodStatus,
        };
        let from_template = |name: &str| PodResourceClaim {
            name: name.into(),
            resource_claim_template_name: Some("t".into()),
            ..Default::default()
        };
        Pod {
            spec: Some(PodSpec {
                resource_claims: Some(vec![
                    PodResourceClaim {
                        name: "gpu".into(),
                        resource_claim_name: Some("shared-gpu".into()),
                        ..Default::default()
                    },
                    from_template("tpl"),
                    from_template("unneeded"),
                ]),
                ..Default::default()
            }),
            status: Some(PodStatus {
                resource_claim_statuses: Some(vec![
                    PodResourceClaimStatus { name: "tpl".into(), resource_claim_name: Some("pod-tpl-x7".into()) },
                    PodResourceClaimStatus { name: "unneeded".into(), resource_claim_name: None },
                ]),
                extended_resource_claim_status: extended.map(|name| PodExtendedResourceClaimStatus {
                    resource_claim_name: name.into(),
                    request_mappings: Vec::new(),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn spec_claim(pod_claim: &str, name: &str, generated: bool) -> ClaimToPrepare {
        ClaimToPrepare { source: ClaimSource::Spec(pod_claim.into()), name: Ok(name.into()), generated }
    }

    #[test]
    fn a_pod_s_claims_are_its_spec_s_then_the_one_of_its_extended_resources() {
        assert_eq!(
            claims_to_prepare(&pod_with_claims(None)),
            [spec_claim("gpu", "shared-gpu", false), spec_claim("tpl", "pod-tpl-x7", true)]
        );
        assert_eq!(
            claims_to_prepare(&pod_with_claims(Some("pod-extended-resources-k2"))),
            [
                spec_claim("gpu", "shared-gpu", false),
                spec_claim("tpl", "pod-tpl-x7", true),
                // Created by the scheduler for the pod, but not checked for its owner.
                ClaimToPrepare {
                    source: ClaimSource::ExtendedResources,
                    name: Ok("pod-extended-resources-k2".into()),
                    generated: false
                },
            ]
        );
        // Only extended resources: that claim alone.
        let mut only = pod_with_claims(Some("pod-extended-resources-k2"));
        only.spec = None;
        assert_eq!(
            claims_to_prepare(&only).iter().map(|c| c.source.clone()).collect::<Vec<_>>(),
            [ClaimSource::ExtendedResources]
        );
    }

    #[test]
    fn a_template_s_claim_not_generated_yet_is_waited_for_where_it_comes() {
        let mut p = pod_with_claims(Some("ext"));
        p.status.as_mut().unwrap().resource_claim_statuses.as_mut().unwrap().remove(0);
        let claims = claims_to_prepare(&p);
        assert_eq!(claims[0], spec_claim("gpu", "shared-gpu", false), "claims before it are prepared first");
        assert_eq!(claims[1].name, Err("waiting for the ResourceClaim of pod claim tpl to be generated".into()));
        assert_eq!(claims[2].source, ClaimSource::ExtendedResources);
    }

    #[test]
    fn a_claim_being_unprepared_takes_no_new_pod() {
        let state = vec![ClaimEntry { unpreparing: true, ..entry("a", "gpu", "uid-1") }];
        assert!(entry_for(&state, "a", "gpu", "uid-1").unwrap_err().contains("is being unprepared"));
    }
}
