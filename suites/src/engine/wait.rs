//! Waits as named conditions on watch events (`kube::runtime::wait::await_condition`): a
//! scenario says what it waits for, the time it took is that of the event that made it true
//! (not of a poll after it), and on expiry the object is read once so that the message says
//! where it stands. What no watch gives (lists across objects, pod logs, a kubelet's files)
//! is polled by `Ctx::poll_until` instead.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Resource;
use kube::api::Api;
use kube::runtime::wait::{Condition, await_condition};
use serde::de::DeserializeOwned;

/// Waits until `condition` holds for the object `name` (absent objects included: a condition
/// may wait for one to go). `Ok`: the object as the event showed it, and how long it took.
/// `Err`: the object as it is when the time ran out (`None`: absent), with the watch's last
/// error if it had one.
///
/// `await_condition` ends at the watch's first error. An API server on a busy machine answers a
/// watch now and then with a transient error (its watch cache behind the resource version the
/// list returned: "Too large resource version"), which says nothing about the object; so the
/// wait starts a new watch, which lists again, until the time is up.
pub async fn until<K>(
    api: &Api<K>,
    name: &str,
    condition: impl Condition<K> + Clone,
    timeout: Duration,
) -> Result<(Option<K>, Duration), Expired<K>>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
{
    let started = Instant::now();
    let mut watch_error = None;
    while let Some(left) = timeout.checked_sub(started.elapsed()) {
        match tokio::time::timeout(left, await_condition(api.clone(), name, condition.clone())).await {
            Ok(Ok(object)) => return Ok((object, started.elapsed())),
            Ok(Err(e)) => {
                watch_error = Some(e.to_string());
                tokio::time::sleep(Duration::from_millis(200).min(left)).await;
            }
            Err(_) => break,
        }
    }
    Err(Expired { now: api.get_opt(name).await.ok().flatten(), watch_error })
}

/// Runs `during` while watching what `api` lists with the field selector `fields`, and for
/// `after` once it ended; says whether that list was ever empty. From the watch's events, so a
/// wipe that is republished at once is seen, which polling the list can miss. The watch has
/// its initial list before `during` starts.
pub async fn ever_empty<K, F>(api: Api<K>, fields: &str, during: F, after: Duration) -> (F::Output, bool)
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
    F: std::future::Future,
{
    use futures::StreamExt as _;
    use kube::runtime::watcher::{self, Event};
    let name = |o: &K| o.meta().name.clone().unwrap_or_default();
    let mut stream = Box::pin(watcher::watcher(api, watcher::Config::default().fields(fields)));
    let mut seen = std::collections::BTreeSet::new();
    let mut listing = std::collections::BTreeSet::new();
    let mut empty = false;
    let mut apply = |event: Event<K>, seen: &mut std::collections::BTreeSet<String>, empty: &mut bool| -> bool {
        match event {
            Event::Init => listing.clear(),
            Event::InitApply(o) => {
                listing.insert(name(&o));
            }
            Event::InitDone => {
                *seen = std::mem::take(&mut listing);
                *empty |= seen.is_empty();
                return true;
            }
            Event::Apply(o) => {
                seen.insert(name(&o));
            }
            Event::Delete(o) => {
                seen.remove(&name(&o));
                *empty |= seen.is_empty();
            }
        }
        false
    };
    // The initial list first (bounded: a watch that cannot start leaves the question open).
    let listed = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(event) = stream.next().await {
            if let Ok(event) = event
                && apply(event, &mut seen, &mut empty)
            {
                return;
            }
        }
    });
    let _ = listed.await;
    let watching = async {
        while let Some(event) = stream.next().await {
            if let Ok(event) = event {
                apply(event, &mut seen, &mut empty);
            }
        }
        std::future::pending::<()>().await;
    };
    tokio::pin!(watching, during);
    let output = tokio::select! {
        output = &mut during => output,
        () = &mut watching => unreachable!("the watch never ends"),
    };
    let _ = tokio::time::timeout(after, &mut watching).await;
    (output, empty)
}

/// Where an object stood when a wait for it ended without its condition.
#[derive(Debug)]
pub struct Expired<K> {
    pub now: Option<K>,
    /// The watch's last error, if it failed (and was started again) before the time was up.
    pub watch_error: Option<String>,
}

impl<K> Expired<K> {
    /// " (the watch's last error: …)" where the watch failed, for a failure's reason.
    pub fn watch_note(&self) -> String {
        self.watch_error.as_ref().map(|e| format!(" (the watch's last error: {e})")).unwrap_or_default()
    }
}

/// The named conditions scenarios wait for.
pub mod conditions {
    use super::*;

    /// The object does not exist (never did, or was deleted).
    pub fn gone<K>() -> impl Condition<K> + Clone {
        |object: Option<&K>| object.is_none()
    }

    /// The pod exists and is in `phase`.
    pub fn pod_phase(phase: &'static str) -> impl Condition<Pod> + Clone {
        move |pod: Option<&Pod>| phase_of(pod) == Some(phase)
    }

    /// Every container of the pod runs, each one started later than `since` (a container
    /// that was started again after a node reboot, say).
    pub fn containers_started_after(
        since: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
    ) -> impl Condition<Pod> + Clone {
        move |pod: Option<&Pod>| {
            let statuses = pod.and_then(|p| p.status.as_ref()?.container_statuses.as_ref());
            statuses.is_some_and(|s| {
                !s.is_empty()
                    && s.iter().all(|c| {
                        c.state
                            .as_ref()
                            .and_then(|st| st.running.as_ref()?.started_at.as_ref())
                            .is_some_and(|t| t.0 > since.0)
                    })
            })
        }
    }

    /// Every container of the pod was created again at least once after it ended
    /// (`restartCount` ≥ 1): the runtime resolved its devices anew.
    pub fn containers_restarted() -> impl Condition<Pod> + Clone {
        |pod: Option<&Pod>| {
            let statuses = pod.and_then(|p| p.status.as_ref()?.container_statuses.as_ref());
            statuses.is_some_and(|s| !s.is_empty() && s.iter().all(|c| c.restart_count >= 1))
        }
    }

    /// The scheduler has said no: `PodScheduled=False`.
    pub fn pod_unschedulable() -> impl Condition<Pod> + Clone {
        |pod: Option<&Pod>| unschedulable(pod).is_some()
    }

    /// The pod's status names the claim generated for its first claim.
    pub fn pod_claim_named() -> impl Condition<Pod> + Clone {
        |pod: Option<&Pod>| {
            pod.and_then(|p| p.status.as_ref()?.resource_claim_statuses.as_ref())
                .is_some_and(|s| s.iter().any(|s| s.resource_claim_name.is_some()))
        }
    }

    /// The claim exists and has devices allocated.
    pub fn claim_allocated() -> impl Condition<ResourceClaim> + Clone {
        |claim: Option<&ResourceClaim>| claim.is_some_and(|c| devices_of(c) > 0)
    }

    /// The claim exists and has no allocation.
    pub fn claim_deallocated() -> impl Condition<ResourceClaim> + Clone {
        |claim: Option<&ResourceClaim>| claim.is_some_and(|c| devices_of(c) == 0)
    }

    /// The claim exists, with no allocation and no consumer left in `reservedFor`.
    pub fn claim_released() -> impl Condition<ResourceClaim> + Clone {
        |claim: Option<&ResourceClaim>| {
            claim.is_some_and(|c| {
                let status = c.status.as_ref();
                status.is_none_or(|s| s.allocation.is_none() && s.reserved_for.as_ref().is_none_or(|r| r.is_empty()))
            })
        }
    }
}

/// The phase of a pod; `None` when it is absent or has none yet.
pub fn phase_of(pod: Option<&Pod>) -> Option<&str> {
    pod?.status.as_ref()?.phase.as_deref()
}

/// Where a pod stands, for a timeout's message: its phase, and why it is not further (the
/// scheduler's refusal, or its node and the first container's waiting reason).
pub fn state_of(pod: Option<&Pod>) -> String {
    let Some(pod) = pod else { return "gone".into() };
    let phase = phase_of(Some(pod)).unwrap_or("without a phase").to_string();
    if let Some((reason, message)) = unschedulable(Some(pod)) {
        return format!("{phase}, {reason}: {message}");
    }
    let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
    let status = pod.status.as_ref();
    let waiting = status.and_then(|s| {
        s.init_container_statuses.iter().chain(s.container_statuses.iter()).flatten().find_map(|c| {
            let w = c.state.as_ref()?.waiting.as_ref()?;
            Some(format!(
                "container {} waiting: {} {}",
                c.name,
                w.reason.as_deref().unwrap_or(""),
                w.message.as_deref().unwrap_or("")
            ))
        })
    });
    match (node, waiting) {
        (None, _) => format!("{phase}, not scheduled yet"),
        (Some(node), Some(w)) => format!("{phase} on {node}, {}", w.trim_end()),
        (Some(node), None) => format!("{phase} on {node}"),
    }
}

/// The scheduler's verdict on a pod: `(reason, message)` once `PodScheduled=False`.
pub fn unschedulable(pod: Option<&Pod>) -> Option<(String, String)> {
    let c =
        pod?.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "PodScheduled" && c.status == "False")?;
    Some((c.reason.clone().unwrap_or_default(), c.message.clone().unwrap_or_default()))
}

fn devices_of(claim: &ResourceClaim) -> usize {
    super::Ctx::allocation_results(claim).count()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::api::resource::v1::{
        AllocationResult, DeviceAllocationResult, DeviceRequestAllocationResult, ResourceClaimConsumerReference,
        ResourceClaimStatus,
    };

    use super::conditions::*;
    use super::*;

    fn pod(phase: &str, scheduled: Option<&str>) -> Pod {
        Pod {
            status: Some(PodStatus {
                phase: Some(phase.into()),
                conditions: scheduled.map(|s| {
                    vec![PodCondition { type_: "PodScheduled".into(), status: s.into(), ..PodCondition::default() }]
                }),
                ..PodStatus::default()
            }),
            ..Pod::default()
        }
    }

    fn claim(allocated: bool, reserved: bool) -> ResourceClaim {
        let result = DeviceRequestAllocationResult {
            request: "req".into(),
            driver: "d".into(),
            pool: "p".into(),
            device: "gpu-0".into(),
            ..DeviceRequestAllocationResult::default()
        };
        ResourceClaim {
            status: Some(ResourceClaimStatus {
                allocation: allocated.then(|| AllocationResult {
                    devices: Some(DeviceAllocationResult { results: Some(vec![result]), config: None }),
                    ..AllocationResult::default()
                }),
                reserved_for: reserved.then(|| vec![ResourceClaimConsumerReference::default()]),
                ..ResourceClaimStatus::default()
            }),
            ..ResourceClaim::default()
        }
    }

    #[test]
    fn the_conditions_read_the_api_objects_as_named() {
        assert!(gone::<Pod>().matches_object(None));
        assert!(!gone().matches_object(Some(&pod("Running", None))));
        assert!(pod_phase("Running").matches_object(Some(&pod("Running", None))));
        assert!(!pod_phase("Running").matches_object(Some(&pod("Pending", None))));
        assert!(!pod_phase("Running").matches_object(None));
        assert!(pod_unschedulable().matches_object(Some(&pod("Pending", Some("False")))));
        assert!(!pod_unschedulable().matches_object(Some(&pod("Pending", Some("True")))));
        assert!(claim_allocated().matches_object(Some(&claim(true, true))));
        assert!(!claim_allocated().matches_object(Some(&claim(false, false))));
        assert!(claim_deallocated().matches_object(Some(&claim(false, true))));
        assert!(!claim_deallocated().matches_object(None), "a deleted claim is not a deallocated one");
        assert!(claim_released().matches_object(Some(&claim(false, false))));
        assert!(!claim_released().matches_object(Some(&claim(false, true))), "still reserved");
        assert!(!claim_released().matches_object(Some(&claim(true, false))), "still allocated");
    }
}
