//! ResourceSlices: this node's pool as the inventory describes it, kept published. Kubelet
//! wipes a node's slices when it starts and after a plugin unregisters, and people delete or
//! edit slices, so publishing is a reconcile loop, not a one-off create.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt as _, StreamExt as _};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{CounterSet, Device, DeviceAttribute, DeviceCapacity, ResourceSlice};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::faults::{Fault, Faults};
use crate::inventory::{Attribute, DeviceSpec, Pool};
use crate::log;

/// The API's limit of devices in one slice; larger pools are split.
pub const MAX_DEVICES_PER_SLICE: usize = 128;
/// The limit where any device of the slice has taints or consumes counters.
pub const MAX_ADVANCED_DEVICES_PER_SLICE: usize = 64;
/// The name of the slice that holds a pool's counter sets, after the pool's own: the API
/// refuses counter sets beside devices.
pub const COUNTERS_SUFFIX: &str = "counters";
const FIELD_MANAGER: &str = "dracheck-mock-driver";
/// A full comparison now and then, in case a watch event was missed.
const RESYNC: Duration = Duration::from_secs(30);
const RETRY: Duration = Duration::from_secs(1);

/// The devices as published: the inventory's, bent by the `wrong-attribute`,
/// `wrong-capacity` and `phantom-devices` faults. With no faults this is the oracle of what
/// the slices must hold.
pub fn published_devices(inventory: &[DeviceSpec], faults: &Faults) -> Vec<Device> {
    let mut devices: Vec<Device> = inventory
        .iter()
        .map(|spec| {
            let mut device = spec.to_device();
            for (name, value) in faults.wrong_attributes() {
                // Keep the inventory's type where the value allows it, so that the slice stays
                // valid and only the value is wrong.
                let attr = match spec.attribute(name) {
                    Some(Attribute::Int(_)) if value.parse::<i64>().is_ok() => {
                        DeviceAttribute { int: value.parse().ok(), ..DeviceAttribute::default() }
                    }
                    Some(Attribute::Bool(_)) if value.parse::<bool>().is_ok() => {
                        DeviceAttribute { bool: value.parse().ok(), ..DeviceAttribute::default() }
                    }
                    Some(Attribute::Version(_)) => {
                        DeviceAttribute { version: Some(value.to_string()), ..DeviceAttribute::default() }
                    }
                    _ => DeviceAttribute { string: Some(value.to_string()), ..DeviceAttribute::default() },
                };
                device.attributes.get_or_insert_default().insert(name.to_string(), attr);
            }
            for (name, value) in faults.wrong_capacities() {
                let capacity = DeviceCapacity { value: Quantity(value.to_string()), ..DeviceCapacity::default() };
                device.capacity.get_or_insert_default().insert(name.to_string(), capacity);
            }
            if faults.has(&Fault::UntaintedUnhealthy) {
                device.taints = None;
            }
            if faults.has(&Fault::PartitionConsumesNothing) {
                device.consumes_counters = None;
            }
            if faults.has(&Fault::NoBindingConditions) {
                device.binding_conditions = None;
                device.binding_failure_conditions = None;
            }
            if faults.has(&Fault::NoMultipleAllocations) && device.allow_multiple_allocations.take().is_some() {
                // The API refuses a request policy on a device allocated whole.
                for c in device.capacity.iter_mut().flat_map(|c| c.values_mut()) {
                    c.request_policy = None;
                }
            }
            device
        })
        .collect();
    // Copies of a real device, so that the same requests match them: the last that is no
    // partition, since copies of a partition would share its counters and not add devices,
    // and no shared one, since claims share it rather than count it.
    let whole = |d: &&Device| d.consumes_counters.is_none() && d.allow_multiple_allocations.is_none();
    if let Some(last) = devices.iter().rev().find(whole).cloned() {
        devices.extend((0..faults.phantom_devices()).map(|i| Device { name: format!("phantom-{i}"), ..last.clone() }));
    }
    devices
}

/// The counter sets as published: the inventory's, each counter doubled by the
/// `counters-larger` fault. With no faults this is the oracle of the pool's `sharedCounters`.
pub fn published_counter_sets(pool: &Pool, faults: &Faults) -> Vec<CounterSet> {
    let mut sets: Vec<CounterSet> = pool.counter_sets.iter().map(|s| s.to_counter_set()).collect();
    if faults.has(&Fault::CountersLarger) {
        for counter in sets.iter_mut().flat_map(|s| s.counters.values_mut()) {
            let doubled = dracheck_objects::quantity::Quantity::parse(&counter.value.0).and_then(|q| q.add(&q));
            if let Ok(v) = doubled {
                counter.value = Quantity(v.to_string());
            }
        }
    }
    sets
}

/// The controller ownerRef to the Node, so that the garbage collector removes the slices with
/// the Node, as the upstream helper sets it.
fn owner(node: &Node) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: node.metadata.name.clone()?,
        uid: node.metadata.uid.clone()?,
        controller: Some(true),
        block_owner_deletion: None,
    })
}

/// The slices of `node`'s pool at `generation`: one per [`MAX_DEVICES_PER_SLICE`] devices
/// ([`MAX_ADVANCED_DEVICES_PER_SLICE`] where a device has taints or consumes counters), and
/// one more for the counter sets, if there are any.
pub fn desired(
    driver: &str,
    node: &str,
    owner: Option<&OwnerReference>,
    devices: &[Device],
    counter_sets: &[CounterSet],
    generation: i64,
) -> Vec<ResourceSlice> {
    let advanced = devices.iter().any(|d| {
        d.taints.as_ref().is_some_and(|t| !t.is_empty()) || d.consumes_counters.as_ref().is_some_and(|c| !c.is_empty())
    });
    let per_slice = if advanced { MAX_ADVANCED_DEVICES_PER_SLICE } else { MAX_DEVICES_PER_SLICE };
    let chunks: Vec<&[Device]> = if devices.is_empty() { vec![&[]] } else { devices.chunks(per_slice).collect() };
    let split = chunks.len() > 1;
    let uid = owner.map_or("", |o| o.uid.as_str());
    let mut slices: Vec<ResourceSlice> = chunks
        .into_iter()
        .enumerate()
        .map(|(i, chunk)| {
            let mut slice = dracheck_objects::resource_slice(driver, node, uid, chunk.to_vec());
            if split {
                let name = slice.metadata.name.take().unwrap_or_default();
                slice.metadata.name = Some(format!("{name}-{i}"));
            }
            slice
        })
        .collect();
    if !counter_sets.is_empty() {
        let mut slice = dracheck_objects::resource_slice(driver, node, uid, Vec::new());
        slice.metadata.name = slice.metadata.name.map(|n| format!("{n}-{COUNTERS_SUFFIX}"));
        slice.spec.devices = None;
        slice.spec.shared_counters = Some(counter_sets.to_vec());
        slices.push(slice);
    }
    let count = slices.len() as i64;
    for slice in &mut slices {
        if owner.is_none() {
            slice.metadata.owner_references = None;
        }
        slice.spec.pool.generation = generation;
        slice.spec.pool.resource_slice_count = count;
    }
    slices
}

/// What of a slice this driver decides.
fn view(slice: &ResourceSlice) -> Value {
    serde_json::json!({
        "labels": slice.metadata.labels,
        "ownerReferences": slice.metadata.owner_references,
        "spec": slice.spec,
    })
}

/// Whether the server's `have` is what this driver wants: `have` holds everything of `want`
/// (the server may add defaults), and no device has an attribute, capacity or taint that
/// `want` lacks. The server defaults no entry of those, so an extra one is what the inventory
/// dropped (a device that is sound again), and a subset check alone would leave it published.
fn matches(have: &Value, want: &Value) -> bool {
    contains(have, want) && entry_names(have) == entry_names(want) && taint_keys(have) == taint_keys(want)
}

/// Per device of a slice's [`view`], the keys of its taints.
fn taint_keys(view: &Value) -> Vec<Vec<&str>> {
    let devices = view.pointer("/spec/devices").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    devices
        .iter()
        .map(|device| {
            let taints = device.get("taints").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            taints.iter().filter_map(|t| t.get("key").and_then(Value::as_str)).collect()
        })
        .collect()
}

/// Per device of a slice's [`view`], the names of its attributes and of its capacities.
fn entry_names(view: &Value) -> Vec<[BTreeSet<&str>; 2]> {
    let devices = view.pointer("/spec/devices").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    devices
        .iter()
        .map(|device| {
            ["attributes", "capacity"].map(|field| {
                device
                    .get(field)
                    .and_then(Value::as_object)
                    .into_iter()
                    .flat_map(|m| m.keys())
                    .map(String::as_str)
                    .collect()
            })
        })
        .collect()
}

/// Whether `have` holds everything of `want`; the server may add defaults.
fn contains(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (_, Value::Null) => true,
        (Value::Object(h), Value::Object(w)) => w.iter().all(|(k, v)| contains(h.get(k).unwrap_or(&Value::Null), v)),
        (Value::Array(h), Value::Array(w)) => h.len() == w.len() && h.iter().zip(w).all(|(h, w)| contains(h, w)),
        _ => have == want,
    }
}

#[derive(Default)]
struct PoolState {
    /// 0 until the pool is known.
    generation: i64,
    /// Per slice name: what we applied and what the server answered, because the server
    /// normalizes (quantities) and an echo that is still there is in sync.
    written: HashMap<String, (Value, Value)>,
}

impl PoolState {
    fn in_sync(&self, want: &ResourceSlice, have: &ResourceSlice) -> bool {
        let (want_view, have_view) = (view(want), view(have));
        let name = want.metadata.name.as_deref().unwrap_or_default();
        matches(&have_view, &want_view)
            || self.written.get(name).is_some_and(|(applied, echo)| applied == &want_view && echo == &have_view)
    }
}

pub struct Publisher {
    slices: Api<ResourceSlice>,
    nodes: Api<Node>,
    /// The Node, once read: its UID is the slices' owner for the life of the process, as the
    /// upstream helper reads it once at start (a read per reconcile was a request per resync).
    node_object: Option<Node>,
    driver: String,
    node: String,
    faults: Arc<Faults>,
    devices: watch::Receiver<Arc<Pool>>,
    pools: HashMap<String, PoolState>,
    last_error: Option<String>,
    /// `trust-published`: until a change to the slices shows otherwise, those published
    /// before the restart are taken to be in place.
    trusting: bool,
    /// `upgrade-renames-devices`: a suffix to every device name.
    rename: Option<String>,
}

impl Publisher {
    pub fn new(
        client: kube::Client,
        driver: String,
        node: String,
        faults: Arc<Faults>,
        devices: watch::Receiver<Arc<Pool>>,
    ) -> Publisher {
        Publisher {
            slices: Api::all(client.clone()),
            nodes: Api::all(client),
            node_object: None,
            driver,
            node,
            faults,
            devices,
            pools: HashMap::new(),
            last_error: None,
            trusting: false,
            rename: None,
        }
    }

    /// The `trust-published` fault on a restart: no slice is written at start-up, only once
    /// the slices change (or the devices do).
    pub fn trust_published(&mut self) {
        self.trusting = true;
    }

    /// The `upgrade-renames-devices` fault in a new instance: every device is published as
    /// `<name>-<suffix>`, so that the pool's devices change under the claims allocated from it.
    pub fn rename_devices(&mut self, suffix: &str) {
        self.rename = Some(suffix.to_string());
    }

    fn selector(&self, node: &str) -> String {
        format!("spec.driver={},spec.nodeName={node}", self.driver)
    }

    /// Reconciles until `stop` turns true, then hands itself back for the exit clean-up.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) -> Publisher {
        if self.faults.has(&Fault::WipeSlicesOnStart) {
            self.wipe().await;
        }
        let config = watcher::Config::default().fields(&self.selector(&self.node));
        let mut events = watcher(self.slices.clone(), config).default_backoff().boxed();
        let mut resync = tokio::time::interval(RESYNC);
        let mut retry_at: Option<Instant> = None;
        // `slice-sync-delay=SECS`, as upstream's workqueue `AddAfter`: the first event sets the
        // time, later ones until then do not move it.
        let sync_delay = self.faults.slice_sync_delay();
        let mut sync_at: Option<Instant> = None;
        // `no-slice-reconcile`: once published, only the driver's own devices are a reason to
        // write again, not what happened to the slices.
        let mut published = false;
        loop {
            let own_change = tokio::select! {
                _ = stop.wait_for(|s| *s) => break,
                changed = self.devices.changed() => if changed.is_err() { break } else { true },
                event = events.next() => match event {
                    Some(Ok(event)) => {
                        // The initial list is what was there; a change after it ends the trust.
                        let initial = matches!(event, watcher::Event::Init | watcher::Event::InitApply(_) | watcher::Event::InitDone);
                        self.trusting &= initial;
                        if let Some(delay) = sync_delay.filter(|_| !initial) {
                            sync_at.get_or_insert_with(|| Instant::now() + delay);
                            continue;
                        }
                        false
                    }
                    Some(Err(e)) => {
                        self.report(format!("watching ResourceSlices failed (retrying): {e}"));
                        continue;
                    }
                    None => break,
                },
                _ = resync.tick(), if sync_delay.is_none() => false,
                _ = tokio::time::sleep_until(sync_at.unwrap_or_else(Instant::now)), if sync_at.is_some() => {
                    sync_at = None;
                    false
                }
                _ = tokio::time::sleep_until(retry_at.unwrap_or_else(Instant::now)), if retry_at.is_some() => true,
            };
            // One reconcile answers every event that is already queued.
            while let Some(Some(_)) = events.next().now_or_never() {}
            if self.faults.has(&Fault::NoSliceReconcile) && published && !own_change {
                continue;
            }
            if self.trusting && !own_change {
                continue;
            }
            retry_at = match self.reconcile().await {
                Ok(()) => {
                    if self.faults.has(&Fault::NoSliceReconcile) && !published {
                        log!("fault no-slice-reconcile: published once; deleted or edited slices stay so");
                    }
                    published = true;
                    self.last_error = None;
                    None
                }
                Err(e) => {
                    self.report(e);
                    Some(Instant::now() + RETRY)
                }
            };
        }
        self
    }

    /// Logs a problem once, not on every retry.
    fn report(&mut self, error: String) {
        if self.last_error.as_ref() != Some(&error) {
            log!("ResourceSlices: {error}");
            self.last_error = Some(error);
        }
    }

    async fn reconcile(&mut self) -> Result<(), String> {
        let pool = Arc::clone(&self.devices.borrow());
        let mut devices = published_devices(&pool.devices, &self.faults);
        let counter_sets = published_counter_sets(&pool, &self.faults);
        if let Some(suffix) = &self.rename {
            devices.iter_mut().for_each(|d| d.name = format!("{}-{suffix}", d.name));
        }
        if self.node_object.is_none() {
            let node = self.nodes.get_opt(&self.node).await.map_err(|e| format!("reading Node {}: {e}", self.node))?;
            let Some(node) = node else {
                return Err(format!("Node {} does not exist yet; waiting for it before publishing", self.node));
            };
            self.node_object = Some(node);
        }
        let node = self.node_object.as_ref().expect("read above");
        let own = if self.faults.has(&Fault::NoOwnerReference) { None } else { owner(node) };
        self.reconcile_pool(&self.node.clone(), own.as_ref(), &devices, &counter_sets).await?;
        let faults = Arc::clone(&self.faults);
        for foreign in faults.foreign_slices() {
            let owner = self.nodes.get_opt(foreign).await.ok().flatten().as_ref().and_then(owner);
            let owner = owner.filter(|_| !faults.has(&Fault::NoOwnerReference));
            self.reconcile_pool(foreign, owner.as_ref(), &devices, &counter_sets).await?;
        }
        Ok(())
    }

    /// The slices of the pool as this driver writes them: [`desired`], and with the
    /// `duplicate-device` fault one more slice that holds the pool's first device again.
    fn pool_slices(
        (driver, faults): (&str, &Faults),
        node: &str,
        owner: Option<&OwnerReference>,
        (devices, counter_sets): (&[Device], &[CounterSet]),
        generation: i64,
    ) -> Vec<ResourceSlice> {
        let mut slices = desired(driver, node, owner, devices, counter_sets, generation);
        if let (true, Some(first), Some(model)) =
            (faults.has(&Fault::DuplicateDevice), devices.first(), slices.first().cloned())
        {
            let mut extra = model;
            extra.metadata.name = extra.metadata.name.map(|n| format!("{n}-duplicate"));
            extra.spec.devices = Some(vec![first.clone()]);
            slices.push(extra);
            let count = slices.len() as i64;
            slices.iter_mut().for_each(|s| s.spec.pool.resource_slice_count = count);
        }
        slices
    }

    async fn live(&self, node: &str) -> Result<Vec<ResourceSlice>, String> {
        let list = self
            .slices
            .list(&ListParams::default().fields(&self.selector(node)))
            .await
            .map_err(|e| format!("listing the slices of node {node}: {e}"))?;
        Ok(list.items.into_iter().filter(|s| s.spec.pool.name == node).collect())
    }

    async fn reconcile_pool(
        &mut self,
        node: &str,
        owner: Option<&OwnerReference>,
        devices: &[Device],
        counter_sets: &[CounterSet],
    ) -> Result<(), String> {
        let live = self.live(node).await?;
        let stale;
        let devices = if self.faults.has(&Fault::StaleDevices) {
            stale = with_stale(devices, &live);
            &stale
        } else {
            devices
        };
        let live_generation = live.iter().map(|s| s.spec.pool.generation).max().unwrap_or(0);
        let pool = self.pools.entry(node.to_string()).or_default();
        if pool.generation == 0 {
            pool.generation = live_generation;
        }
        let current =
            Self::pool_slices((&self.driver, &self.faults), node, owner, (devices, counter_sets), pool.generation);
        let in_sync = pool.generation > 0
            && live.len() == current.len()
            && current.iter().all(|want| {
                live.iter()
                    .find(|have| have.metadata.name == want.metadata.name)
                    .is_some_and(|have| pool.in_sync(want, have))
            });
        if in_sync {
            return Ok(());
        }
        // Any change bumps the generation of every slice of the pool, so consumers can tell
        // the new set from the old one.
        let generation = if self.faults.has(&Fault::NoGenerationBump) && live_generation > 0 {
            log!("fault no-generation-bump: publishing pool {node} under generation {live_generation} again");
            live_generation
        } else {
            pool.generation.max(live_generation) + 1
        };
        let next = Self::pool_slices((&self.driver, &self.faults), node, owner, (devices, counter_sets), generation);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let mut written = HashMap::new();
        for slice in &next {
            let name = slice.metadata.name.clone().unwrap_or_default();
            let echo = self
                .slices
                .patch(&name, &params, &Patch::Apply(slice))
                .await
                .map_err(|e| format!("publishing ResourceSlice {name}: {e}"))?;
            written.insert(name, (view(slice), view(&echo)));
        }
        for stale in live.iter().filter_map(|s| s.metadata.name.as_ref()).filter(|n| !written.contains_key(*n)) {
            self.delete(stale).await?;
        }
        log!(
            "ResourceSlices: published pool {node} generation {generation}: {} slice(s), {} device(s)",
            next.len(),
            devices.len()
        );
        let pool = self.pools.entry(node.to_string()).or_default();
        pool.generation = generation;
        pool.written = written;
        Ok(())
    }

    async fn delete(&self, name: &str) -> Result<(), String> {
        match self.slices.delete(name, &DeleteParams::default()).await {
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(format!("deleting ResourceSlice {name}: {e}")),
            Ok(_) => Ok(()),
        }
    }

    /// The `wipe-slices-on-start` fault: whatever a previous run published goes first.
    async fn wipe(&self) {
        let result = async {
            let live = self.live(&self.node).await?;
            for slice in &live {
                self.delete(slice.metadata.name.as_deref().unwrap_or_default()).await?;
            }
            Ok::<_, String>(live.len())
        };
        match result.await {
            Ok(n) => log!("fault wipe-slices-on-start: deleted {n} slice(s) of pool {}", self.node),
            Err(e) => log!("fault wipe-slices-on-start: error: {e}"),
        }
    }

    /// Deletes the slices of every pool this plugin publishes.
    pub async fn remove_all(&self) {
        let pools = std::iter::once(self.node.clone()).chain(self.faults.foreign_slices().map(str::to_string));
        for node in pools {
            let result = async {
                for slice in self.live(&node).await? {
                    self.delete(slice.metadata.name.as_deref().unwrap_or_default()).await?;
                }
                Ok::<_, String>(())
            };
            match result.await {
                Ok(()) => log!("ResourceSlices: removed pool {node}"),
                Err(e) => log!("ResourceSlices: error: removing pool {node}: {e}"),
            }
        }
    }
}

/// The `stale-devices` fault: `devices`, and every device of the `live` slices they lack.
fn with_stale(devices: &[Device], live: &[ResourceSlice]) -> Vec<Device> {
    let mut out = devices.to_vec();
    for d in live.iter().flat_map(|s| s.spec.devices.iter().flatten()) {
        if !out.iter().any(|o| o.name == d.name) {
            log!("fault stale-devices: device {} is no longer in the inventory and stays published", d.name);
            out.push(d.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn large_pools_are_split_and_every_slice_counts_them_all() {
        let devices: Vec<Device> = (0..300).map(|i| dracheck_objects::device(&format!("d{i}")).build()).collect();
        let slices = desired("drv.io", "n1", None, &devices, &[], 4);
        assert_eq!(slices.len(), 3);
        for s in &slices {
            assert_eq!((s.spec.pool.generation, s.spec.pool.resource_slice_count), (4, 3));
            assert_eq!(s.spec.pool.name, "n1");
            assert!(s.metadata.owner_references.is_none());
        }
        assert_eq!(slices[2].spec.devices.as_ref().unwrap().len(), 300 - 2 * MAX_DEVICES_PER_SLICE);
        assert_ne!(slices[0].metadata.name, slices[1].metadata.name);
    }

    #[test]
    fn counter_sets_get_a_slice_of_their_own_and_partitions_split_at_the_lower_limit() {
        let set = CounterSet {
            name: "gpu-4".into(),
            counters: [(
                "memory".to_string(),
                k8s_openapi::api::resource::v1::Counter { value: Quantity("24Gi".into()) },
            )]
            .into(),
        };
        let partition = |i: usize| {
            let mut d = dracheck_objects::device(&format!("p{i}")).build();
            d.consumes_counters = Some(vec![k8s_openapi::api::resource::v1::DeviceCounterConsumption {
                counter_set: "gpu-4".into(),
                counters: set.counters.clone(),
                ..Default::default()
            }]);
            d
        };
        let devices: Vec<Device> = (0..100).map(partition).collect();
        let slices = desired("drv.io", "n1", None, &devices, std::slice::from_ref(&set), 2);
        assert_eq!(slices.len(), 3, "64 and 36 partitions, then the counters");
        assert_eq!(slices[0].spec.devices.as_ref().unwrap().len(), MAX_ADVANCED_DEVICES_PER_SLICE);
        let counters = &slices[2];
        assert_eq!(counters.spec.devices, None, "the API refuses devices beside counter sets");
        assert_eq!(counters.spec.shared_counters.as_deref(), Some(std::slice::from_ref(&set)));
        assert!(counters.metadata.name.as_ref().unwrap().ends_with("-counters"));
        assert!(slices.iter().all(|s| s.spec.pool.resource_slice_count == 3 && s.spec.pool.generation == 2));
    }

    /// A change to an inventory's devices.
    type Edit = fn(&mut Vec<Device>);

    /// The pool that a two-GPU inventory publishes, bent by `edit` first.
    fn pool_of(edit: Edit) -> ResourceSlice {
        let gpu = |i: i64| {
            dracheck_objects::device(&format!("gpu-{i}"))
                .string("model", "a100")
                .int("index", i)
                .capacity("memory", "80Gi")
        };
        let mut devices = vec![gpu(0).build(), gpu(1).build()];
        edit(&mut devices);
        desired("drv.io", "n1", None, &devices, &[], 1).remove(0)
    }

    #[test]
    fn any_inventory_change_is_drift_and_an_unchanged_inventory_is_not() {
        let published = pool_of(|_| {});
        let pool = PoolState::default();
        assert!(pool.in_sync(&pool_of(|_| {}), &published), "an unchanged inventory must not be written again");

        let mut defaulted = published.clone();
        defaulted.spec.devices.as_mut().unwrap()[0].allow_multiple_allocations = Some(false);
        assert!(pool.in_sync(&pool_of(|_| {}), &defaulted), "a field the server defaults is not drift");

        fn attrs(d: &mut Device) -> &mut BTreeMap<String, DeviceAttribute> {
            d.attributes.as_mut().unwrap()
        }
        fn caps(d: &mut Device) -> &mut BTreeMap<String, DeviceCapacity> {
            d.capacity.as_mut().unwrap()
        }
        let changes: [(&str, Edit); 9] = [
            ("attribute removed", |d| _ = attrs(&mut d[0]).remove("index")),
            ("every attribute removed", |d| d[0].attributes = None),
            ("capacity removed", |d| d[1].capacity = None),
            ("attribute added", |d| _ = attrs(&mut d[0]).insert("numa".into(), DeviceAttribute::default())),
            ("capacity added", |d| _ = caps(&mut d[0]).insert("cores".into(), DeviceCapacity::default())),
            ("attribute changed", |d| attrs(&mut d[1]).get_mut("model").unwrap().string = Some("h100".into())),
            ("capacity changed", |d| caps(&mut d[1]).get_mut("memory").unwrap().value.0 = "40Gi".into()),
            ("device removed", |d| _ = d.pop()),
            ("device added", |d| d.push(dracheck_objects::device("gpu-2").build())),
        ];
        for (change, edit) in changes {
            assert!(!pool.in_sync(&pool_of(edit), &published), "{change}: the pool must be published again");
        }
        // Both ways for taints: a device found faulty, and one sound again.
        let tainted = pool_of(|d| d[0].taints = Some(vec![crate::inventory::unhealthy_taint()]));
        assert!(!pool.in_sync(&tainted, &published), "taint added: the pool must be published again");
        assert!(!pool.in_sync(&published, &tainted), "taint removed: the pool must be published again");
        assert!(pool.in_sync(&tainted, &tainted));
    }

    #[test]
    fn server_defaults_do_not_count_as_drift() {
        let want = serde_json::json!({"spec": {"a": 1, "list": [{"x": 1}]}, "labels": null});
        let have = serde_json::json!({"spec": {"a": 1, "b": 2, "list": [{"x": 1, "y": 0}]}, "labels": {"l": "v"}});
        assert!(contains(&have, &want));
        assert!(!contains(&serde_json::json!({"spec": {"a": 2, "list": [{"x": 1}]}}), &want));
        assert!(!contains(&serde_json::json!({"spec": {"a": 1, "list": []}}), &want));
    }
}
