//! The inventory file: which devices the mock driver publishes on which node. It doubles as
//! the suite's oracle of what the slices must contain, so parsing is strict: unknown fields,
//! malformed values and duplicate devices are errors that name the file, line and field.
//!
//! ```yaml
//! apiVersion: dracheck.io/v1alpha1
//! kind: MockInventory
//! faults: []                  # optional, same syntax as --fault
//! groups:
//!   - nodes: ["*"]            # node names; "*" is every node no other group names
//!     devices:
//!       - name: gpu-0
//!         attributes: { model: { string: a100 }, index: { int: 0 } }
//!         capacity: { memory: 40Gi }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use dracheck_objects::{names, quantity};
use k8s_openapi::api::resource::v1::{Counter, CounterSet, Device, DeviceCounterConsumption};
use serde::Deserialize;
use serde::de::{self, Deserializer};
use serde_saphyr::Spanned;

use crate::faults::Fault;

pub const API_VERSION: &str = "dracheck.io/v1alpha1";
pub const KIND: &str = "MockInventory";
/// Matches every node that no group names explicitly.
pub const ANY_NODE: &str = "*";

#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    #[error("cannot read the inventory file {path}: {source}. Pass an existing file with --inventory.")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "invalid inventory {path}, line {line}, column {column}, field {field}: {message}. The format is \
         described in drivers/mock/README.md (apiVersion {API_VERSION}, kind {KIND}, groups of nodes and devices)."
    )]
    Invalid { path: PathBuf, line: u64, column: u64, field: String, message: String },

    #[error(
        "invalid inventory {path}, line {line}, field {field}: device name {device:?} is used twice for the same \
         nodes (first on line {first_line}). Device names must be unique within a node's pool; rename one of them."
    )]
    DuplicateDevice { path: PathBuf, line: u64, first_line: u64, field: String, device: String },

    #[error(
        "invalid inventory {path}, field {field}: node {node:?} is listed by more than one group, so its devices \
         would be ambiguous. List each node in one group only (and \"*\" at most once)."
    )]
    AmbiguousNode { path: PathBuf, field: String, node: String },

    #[error(
        "invalid inventory {path}, field {field}: the group lists no nodes, so it would apply to none. Name nodes, \
         or \"*\" for every node no other group names."
    )]
    NoNodes { path: PathBuf, field: String },

    #[error(
        "invalid inventory {path}, field {field}: {message}. A device's consumesCounters names a counter set of its \
         own group (counterSets) and counters that set has."
    )]
    UnknownCounter { path: PathBuf, field: String, message: String },

    #[error(
        "the inventory {path} has no devices for node {node:?}: no group lists it and there is no \"*\" group. \
         Add the node to a group, or pass the --node-name the inventory was written for."
    )]
    NodeMissing { path: PathBuf, node: String },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct InventoryFile {
    #[serde(rename = "apiVersion")]
    _api_version: ApiVersion,
    #[serde(rename = "kind")]
    _kind: Kind,
    #[serde(default)]
    faults: Vec<Fault>,
    groups: Vec<Group>,
}

#[derive(Debug, Clone, Deserialize)]
enum ApiVersion {
    #[serde(rename = "dracheck.io/v1alpha1")]
    V1alpha1,
}

#[derive(Debug, Clone, Deserialize)]
enum Kind {
    MockInventory,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Group {
    nodes: Vec<String>,
    /// Shared counters (`sharedCounters`) that partitions of one physical device consume, as
    /// MIG slices consume a GPU's memory and compute.
    #[serde(default, rename = "counterSets")]
    counter_sets: Vec<CounterSetSpec>,
    devices: Vec<DeviceSpec>,
}

/// A counter set of a node's pool: what its partitions together may consume.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CounterSetSpec {
    pub name: DeviceName,
    pub counters: BTreeMap<QualifiedName, Quantity>,
}

impl CounterSetSpec {
    /// The counter set as a ResourceSlice publishes it.
    pub fn to_counter_set(&self) -> CounterSet {
        CounterSet { name: self.name.0.clone(), counters: counters(&self.counters) }
    }
}

/// What a device takes from one counter set while it is allocated.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Consumption {
    #[serde(rename = "counterSet")]
    pub counter_set: DeviceName,
    pub counters: BTreeMap<QualifiedName, Quantity>,
}

fn counters(of: &BTreeMap<QualifiedName, Quantity>) -> BTreeMap<String, Counter> {
    of.iter()
        .map(|(name, q)| {
            (name.0.clone(), Counter { value: k8s_openapi::apimachinery::pkg::api::resource::Quantity(q.0.clone()) })
        })
        .collect()
}

/// A node's pool as the inventory describes it: its devices and the counters they share.
#[derive(Debug, Clone, Default)]
pub struct Pool {
    pub devices: Vec<DeviceSpec>,
    pub counter_sets: Vec<CounterSetSpec>,
}

impl Pool {
    /// The partition that takes all of the counter set `device` consumes from (the whole
    /// physical device), if `device` is another partition of it; with its index.
    pub fn whole_of(&self, device: &str) -> Option<(&DeviceSpec, usize)> {
        let set = self.devices.iter().find(|d| d.name() == device)?.consumes_counters.first()?;
        let counters = &self.counter_sets.iter().find(|s| s.name == set.counter_set)?.counters;
        self.devices
            .iter()
            .enumerate()
            .find(|(_, d)| {
                d.name() != device
                    && d.consumes_counters.iter().any(|c| c.counter_set == set.counter_set && &c.counters == counters)
            })
            .map(|(i, d)| (d, i))
    }
}

/// One device as the inventory describes it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    name: Spanned<DeviceName>,
    #[serde(default)]
    attributes: BTreeMap<QualifiedName, Attribute>,
    #[serde(default)]
    capacity: BTreeMap<QualifiedName, Capacity>,
    /// Several claims may hold the device at once, each consuming part of its capacities
    /// (`allowMultipleAllocations`, consumable capacity), as a GPU is shared by memory.
    #[serde(default, rename = "allowMultipleAllocations")]
    allow_multiple_allocations: bool,
    /// Conditions the driver sets on a claim's device status once the allocated device is
    /// ready (a partition carved out, a device attached); the scheduler binds the pod only
    /// then (`bindingConditions`).
    #[serde(default, rename = "bindingConditions")]
    binding_conditions: Vec<String>,
    /// Conditions that, set by the driver, send the pod back to scheduling.
    #[serde(default, rename = "bindingFailureConditions")]
    binding_failure_conditions: Vec<String>,
    /// `false`: the device is faulty (as a health check finds it); the mock publishes it with
    /// the [`UNHEALTHY_TAINT`] so that the scheduler keeps new claims off it.
    #[serde(default = "healthy")]
    healthy: bool,
    /// A partition's share of its group's counter sets.
    #[serde(default, rename = "consumesCounters")]
    consumes_counters: Vec<Consumption>,
}

fn healthy() -> bool {
    true
}

/// A capacity: a quantity, or for a device that allows multiple allocations also the policy
/// by which claims consume it (`{ value: 24Gi, requestPolicy: { default: 4Gi, validRange: { min:
/// 1Gi, step: 1Gi } } }`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Capacity {
    Value(Quantity),
    WithPolicy(CapacityWithPolicy),
}

impl<'de> Deserialize<'de> for Capacity {
    /// By hand rather than `untagged`, so that a malformed quantity keeps its own message.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Capacity, D::Error> {
        struct Visitor;
        impl<'de> de::Visitor<'de> for Visitor {
            type Value = Capacity;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a quantity, or { value: QUANTITY, requestPolicy: … }")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Capacity, E> {
                Ok(Capacity::Value(Quantity(n.to_string())))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Capacity, E> {
                Quantity::deserialize(de::value::StrDeserializer::new(s)).map(Capacity::Value)
            }
            fn visit_map<M: de::MapAccess<'de>>(self, map: M) -> Result<Capacity, M::Error> {
                CapacityWithPolicy::deserialize(de::value::MapAccessDeserializer::new(map)).map(Capacity::WithPolicy)
            }
        }
        d.deserialize_any(Visitor)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CapacityWithPolicy {
    pub value: Quantity,
    #[serde(default)]
    pub request_policy: Option<RequestPolicy>,
}

/// What a claim may consume of a shared capacity (the API's `CapacityRequestPolicy`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RequestPolicy {
    /// What a claim that asks for no amount consumes.
    #[serde(default)]
    pub default: Option<Quantity>,
    #[serde(default)]
    pub valid_values: Vec<Quantity>,
    #[serde(default)]
    pub valid_range: Option<RequestRange>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestRange {
    pub min: Quantity,
    #[serde(default)]
    pub max: Option<Quantity>,
    #[serde(default)]
    pub step: Option<Quantity>,
}

impl Capacity {
    pub fn value(&self) -> &Quantity {
        match self {
            Capacity::Value(q) => q,
            Capacity::WithPolicy(c) => &c.value,
        }
    }

    pub fn request_policy(&self) -> Option<&RequestPolicy> {
        match self {
            Capacity::Value(_) => None,
            Capacity::WithPolicy(c) => c.request_policy.as_ref(),
        }
    }

    /// The capacity as a ResourceSlice publishes it.
    fn to_api(&self) -> k8s_openapi::api::resource::v1::DeviceCapacity {
        use k8s_openapi::api::resource::v1::{CapacityRequestPolicy, CapacityRequestPolicyRange, DeviceCapacity};
        let q = |q: &Quantity| k8s_openapi::apimachinery::pkg::api::resource::Quantity(q.0.clone());
        DeviceCapacity {
            value: q(self.value()),
            request_policy: self.request_policy().map(|p| CapacityRequestPolicy {
                default: p.default.as_ref().map(q),
                valid_values: (!p.valid_values.is_empty()).then(|| p.valid_values.iter().map(q).collect()),
                valid_range: p.valid_range.as_ref().map(|r| CapacityRequestPolicyRange {
                    min: q(&r.min),
                    max: r.max.as_ref().map(q),
                    step: r.step.as_ref().map(q),
                }),
            }),
        }
    }
}

/// The taint key of a device the inventory marks unhealthy; its effect is `NoSchedule`, so
/// that running workloads stay (an administrator's DeviceTaintRule may evict them).
pub const UNHEALTHY_TAINT: &str = "dracheck.io/unhealthy";

/// A typed attribute, written like the API's DeviceAttribute: `{ int: 3 }`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum Attribute {
    String(ShortString),
    Int(i64),
    Bool(bool),
    Version(SemVer),
}

macro_rules! validated_string {
    ($(#[$doc:meta])* $name:ident, $check:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub String);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                let check: fn(&str) -> Result<(), String> = $check;
                check(&s).map_err(de::Error::custom)?;
                Ok($name(s))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

validated_string!(
    /// A DNS label, as the API requires of device names.
    DeviceName,
    |s| {
        if names::is_dns_label(s) { Ok(()) } else { Err(format!("{s:?} is not a valid device name (a DNS label: a-z, 0-9 and '-', at most 63)")) }
    }
);

validated_string!(
    /// An attribute or capacity name: a C identifier of at most 32 characters, optionally
    /// prefixed by a domain (`gpu.example.com/model`).
    QualifiedName,
    |s| {
        if names::is_qualified_name(s) {
            Ok(())
        } else {
            Err(format!("{s:?} is not a valid attribute or capacity name (a C identifier of at most 32 characters, optionally prefixed by a DNS domain and '/')"))
        }
    }
);

validated_string!(
    /// A string attribute value: the API allows at most 64 characters.
    ShortString,
    |s| if s.chars().count() <= 64 { Ok(()) } else { Err(format!("string attribute values have at most 64 characters, got {}", s.chars().count())) }
);

validated_string!(
    /// A semantic version 2.0.0 (`1.2.3`, `1.2.3-rc.1+build`), as version attributes require.
    SemVer,
    |s| {
        let core = s.split(['-', '+']).next().unwrap_or("");
        let parts: Vec<&str> = core.split('.').collect();
        let numeric = |p: &&str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && (p.len() == 1 || !p.starts_with('0'));
        if parts.len() == 3 && parts.iter().all(numeric) && s.len() <= 64 {
            Ok(())
        } else {
            Err(format!("{s:?} is not a semantic version (MAJOR.MINOR.PATCH, e.g. 1.2.3)"))
        }
    }
);

/// A resource quantity (`40Gi`, `500m`, `4`), kept as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quantity(pub String);

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Quantity, D::Error> {
        // YAML reads `4` as a number; a quantity may be written either way.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Text(String),
        }
        let s = match Raw::deserialize(d)? {
            Raw::Int(n) => n.to_string(),
            Raw::Text(s) => s,
        };
        if valid_quantity(&s) {
            Ok(Quantity(s))
        } else {
            Err(de::Error::custom(format!(
                "{s:?} is not a quantity (a number with an optional suffix such as Ki, Mi, Gi, k, M, G or m)"
            )))
        }
    }
}

/// Kubernetes' quantity grammar, as apimachinery parses it (`dracheck_objects::quantity`).
pub(crate) fn valid_quantity(s: &str) -> bool {
    quantity::Quantity::parse(s).is_ok()
}

impl DeviceSpec {
    pub fn name(&self) -> &str {
        &self.name.value.0
    }

    /// Whether the device's health checks find it sound (see `health`).
    pub fn healthy(&self) -> bool {
        self.healthy
    }

    /// As the health checks find a faulty device: published with the unhealthy taint and
    /// reported unhealthy to the kubelet.
    pub fn mark_unhealthy(&mut self) {
        self.healthy = false;
    }

    /// Whether the driver must set conditions on a claim before the scheduler binds its pod.
    pub fn has_binding_conditions(&self) -> bool {
        !self.binding_conditions.is_empty()
    }

    /// Whether several claims may hold the device at once, each a share of its capacities.
    pub fn allows_multiple_allocations(&self) -> bool {
        self.allow_multiple_allocations
    }

    pub fn attribute(&self, name: &str) -> Option<&Attribute> {
        self.attributes.get(&QualifiedName(name.to_string()))
    }

    /// The device as a ResourceSlice publishes it.
    pub fn to_device(&self) -> Device {
        let mut b = dracheck_objects::device(self.name());
        for (name, value) in &self.attributes {
            b = match value {
                Attribute::String(s) => b.string(&name.0, &s.0),
                Attribute::Int(i) => b.int(&name.0, *i),
                Attribute::Bool(v) => b.bool(&name.0, *v),
                Attribute::Version(v) => b.version(&name.0, &v.0),
            };
        }
        let mut device = b.build();
        if !self.capacity.is_empty() {
            device.capacity = Some(self.capacity.iter().map(|(name, c)| (name.0.clone(), c.to_api())).collect());
        }
        if self.allow_multiple_allocations {
            device.allow_multiple_allocations = Some(true);
        }
        if !self.binding_conditions.is_empty() {
            device.binding_conditions = Some(self.binding_conditions.clone());
        }
        if !self.binding_failure_conditions.is_empty() {
            device.binding_failure_conditions = Some(self.binding_failure_conditions.clone());
        }
        if !self.consumes_counters.is_empty() {
            device.consumes_counters = Some(
                self.consumes_counters
                    .iter()
                    .map(|c| DeviceCounterConsumption {
                        counter_set: c.counter_set.0.clone(),
                        counters: counters(&c.counters),
                        ..DeviceCounterConsumption::default()
                    })
                    .collect(),
            );
        }
        if !self.healthy {
            device.taints = Some(vec![unhealthy_taint()]);
        }
        device
    }
}

/// An inventory file that gives every node `devices` and `counter_sets` (as ResourceSlices
/// publish them), so that the mock can stand in for another driver's inventory.
pub fn render(devices: &[Device], counter_sets: &[CounterSet]) -> String {
    let mut out = String::from("apiVersion: dracheck.io/v1alpha1\nkind: MockInventory\ngroups:\n  - nodes: [\"*\"]\n");
    let quantities = |counters: &BTreeMap<String, Counter>| {
        let entries: Vec<String> = counters.iter().map(|(n, c)| format!("{n:?}: {:?}", c.value.0)).collect();
        format!("{{ {} }}", entries.join(", "))
    };
    if !counter_sets.is_empty() {
        out.push_str("    counterSets:\n");
        for set in counter_sets {
            out.push_str(&format!("      - name: {}\n        counters: {}\n", set.name, quantities(&set.counters)));
        }
    }
    out.push_str("    devices:\n");
    for d in devices {
        out.push_str(&format!("      - name: {}\n", d.name));
        if let Some(attrs) = d.attributes.as_ref().filter(|a| !a.is_empty()) {
            out.push_str("        attributes:\n");
            for (name, a) in attrs {
                let value = match (&a.string, a.int, a.bool, &a.version) {
                    (Some(s), ..) => format!("{{ string: {s:?} }}"),
                    (_, Some(i), ..) => format!("{{ int: {i} }}"),
                    (_, _, Some(b), _) => format!("{{ bool: {b} }}"),
                    (.., Some(v)) => format!("{{ version: {v:?} }}"),
                    _ => continue,
                };
                out.push_str(&format!("          {name:?}: {value}\n"));
            }
        }
        if let Some(caps) = d.capacity.as_ref().filter(|c| !c.is_empty()) {
            out.push_str("        capacity:\n");
            for (name, c) in caps {
                match &c.request_policy {
                    None => out.push_str(&format!("          {name:?}: {:?}\n", c.value.0)),
                    Some(p) => out.push_str(&format!(
                        "          {name:?}: {{ value: {:?}, requestPolicy: {} }}\n",
                        c.value.0,
                        render_policy(p)
                    )),
                }
            }
        }
        if d.allow_multiple_allocations == Some(true) {
            out.push_str("        allowMultipleAllocations: true\n");
        }
        for (field, conditions) in
            [("bindingConditions", &d.binding_conditions), ("bindingFailureConditions", &d.binding_failure_conditions)]
        {
            if let Some(c) = conditions.as_ref().filter(|c| !c.is_empty()) {
                let quoted: Vec<String> = c.iter().map(|c| format!("{c:?}")).collect();
                out.push_str(&format!("        {field}: [{}]\n", quoted.join(", ")));
            }
        }
        if d.taints.iter().flatten().any(|t| t.key == UNHEALTHY_TAINT) {
            out.push_str("        healthy: false\n");
        }
        if let Some(consumed) = d.consumes_counters.as_ref().filter(|c| !c.is_empty()) {
            out.push_str("        consumesCounters:\n");
            for c in consumed {
                out.push_str(&format!(
                    "          - counterSet: {}\n            counters: {}\n",
                    c.counter_set,
                    quantities(&c.counters)
                ));
            }
        }
    }
    out
}

/// A request policy as the inventory writes it, on one line.
fn render_policy(p: &k8s_openapi::api::resource::v1::CapacityRequestPolicy) -> String {
    let mut fields = Vec::new();
    if let Some(d) = &p.default {
        fields.push(format!("default: {:?}", d.0));
    }
    if let Some(values) = p.valid_values.as_ref().filter(|v| !v.is_empty()) {
        let values: Vec<String> = values.iter().map(|v| format!("{:?}", v.0)).collect();
        fields.push(format!("validValues: [{}]", values.join(", ")));
    }
    if let Some(r) = &p.valid_range {
        let mut range = vec![format!("min: {:?}", r.min.0)];
        range.extend(r.max.as_ref().map(|m| format!("max: {:?}", m.0)));
        range.extend(r.step.as_ref().map(|s| format!("step: {:?}", s.0)));
        fields.push(format!("validRange: {{ {} }}", range.join(", ")));
    }
    format!("{{ {} }}", fields.join(", "))
}

/// The taint a device the inventory marks unhealthy is published with.
pub fn unhealthy_taint() -> k8s_openapi::api::resource::v1::DeviceTaint {
    k8s_openapi::api::resource::v1::DeviceTaint {
        key: UNHEALTHY_TAINT.into(),
        value: Some("true".into()),
        effect: "NoSchedule".into(),
        time_added: None,
    }
}

/// A parsed, validated inventory file.
#[derive(Debug, Clone)]
pub struct Inventory {
    path: PathBuf,
    faults: Vec<Fault>,
    groups: Vec<Group>,
}

impl Inventory {
    pub fn load(path: &Path) -> Result<Inventory, InventoryError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| InventoryError::Read { path: path.to_path_buf(), source })?;
        Inventory::parse(path, &text)
    }

    /// Parses `text`; `path` is only used in messages.
    pub fn parse(path: &Path, text: &str) -> Result<Inventory, InventoryError> {
        let mut field = None;
        let parsed = serde_saphyr::with_deserializer_from_str(text, |de| {
            serde_path_to_error::deserialize::<_, InventoryFile>(de).map_err(|e| {
                field = Some(e.path().to_string());
                e.into_inner()
            })
        });
        let file = parsed.map_err(|e| {
            let location = e.location();
            InventoryError::Invalid {
                path: path.to_path_buf(),
                line: location.map_or(0, |l| l.line()),
                column: location.map_or(0, |l| l.column()),
                // `Spanned` names adds a `.value` step that is no field of the file.
                field: field
                    .filter(|f| f != ".")
                    .map(|f| f.strip_suffix(".value").map(str::to_string).unwrap_or(f))
                    .unwrap_or_else(|| "(document)".into()),
                message: first_line(&e.without_snippet().to_string()),
            }
        })?;
        let inventory = Inventory { path: path.to_path_buf(), faults: file.faults, groups: file.groups };
        inventory.validate()?;
        Ok(inventory)
    }

    fn validate(&self) -> Result<(), InventoryError> {
        let mut node_group: HashMap<&str, usize> = HashMap::new();
        for (g, group) in self.groups.iter().enumerate() {
            if group.nodes.is_empty() {
                return Err(InventoryError::NoNodes { path: self.path.clone(), field: format!("groups[{g}].nodes") });
            }
            for (n, node) in group.nodes.iter().enumerate() {
                if node_group.insert(node, g).is_some() {
                    return Err(InventoryError::AmbiguousNode {
                        path: self.path.clone(),
                        field: format!("groups[{g}].nodes[{n}]"),
                        node: node.clone(),
                    });
                }
            }
            let sets: HashMap<&str, &CounterSetSpec> =
                group.counter_sets.iter().map(|set| (set.name.0.as_str(), set)).collect();
            for (d, device) in group.devices.iter().enumerate() {
                for (c, consumption) in device.consumes_counters.iter().enumerate() {
                    let field = format!("groups[{g}].devices[{d}].consumesCounters[{c}]");
                    let unknown = |message: String| InventoryError::UnknownCounter {
                        path: self.path.clone(),
                        field: field.clone(),
                        message,
                    };
                    let Some(set) = sets.get(consumption.counter_set.0.as_str()) else {
                        return Err(unknown(format!("the group has no counter set {:?}", consumption.counter_set.0)));
                    };
                    if let Some(counter) = consumption.counters.keys().find(|k| !set.counters.contains_key(*k)) {
                        return Err(unknown(format!(
                            "counter set {:?} has no counter {:?}",
                            consumption.counter_set.0, counter.0
                        )));
                    }
                }
            }
            let mut seen: HashMap<&str, u64> = HashMap::new();
            for (d, device) in group.devices.iter().enumerate() {
                let line = device.name.referenced.line();
                if let Some(first_line) = seen.insert(device.name(), line) {
                    return Err(InventoryError::DuplicateDevice {
                        path: self.path.clone(),
                        line,
                        first_line,
                        field: format!("groups[{g}].devices[{d}].name"),
                        device: device.name().to_string(),
                    });
                }
            }
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The faults the file switches on.
    pub fn faults(&self) -> &[Fault] {
        &self.faults
    }

    /// The devices of `node`: its own group's, else the `*` group's.
    pub fn devices_for(&self, node: &str) -> Result<&[DeviceSpec], InventoryError> {
        self.group_for(node).map(|g| g.devices.as_slice())
    }

    /// The pool of `node`: its group's devices and counter sets.
    pub fn pool_for(&self, node: &str) -> Result<Pool, InventoryError> {
        self.group_for(node).map(|g| Pool { devices: g.devices.clone(), counter_sets: g.counter_sets.clone() })
    }

    fn group_for(&self, node: &str) -> Result<&Group, InventoryError> {
        let names = |name: &str| self.groups.iter().find(|g| g.nodes.iter().any(|n| n == name));
        names(node)
            .or_else(|| names(ANY_NODE))
            .ok_or_else(|| InventoryError::NodeMissing { path: self.path.clone(), node: node.to_string() })
    }
}

/// serde-saphyr appends the location (which we report as fields) and a snippet on later
/// lines; one line of message is what fits in a paragraph.
fn first_line(message: &str) -> String {
    let line = message.lines().next().unwrap_or(message).trim();
    line.split(" at line ").next().unwrap_or(line).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "apiVersion: dracheck.io/v1alpha1\nkind: MockInventory\n";

    fn parse(body: &str) -> Result<Inventory, InventoryError> {
        Inventory::parse(Path::new("inv.yaml"), &format!("{HEAD}{body}"))
    }

    #[test]
    fn the_shipped_example_parses_with_gpus_of_three_models_a_partitioned_one_and_a_shared_one() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory/default.yaml");
        let inv = Inventory::load(&path).unwrap();
        let pool = inv.pool_for("any-node").unwrap();
        let (partitions, devices): (Vec<&DeviceSpec>, Vec<&DeviceSpec>) =
            pool.devices.iter().partition(|d| !d.consumes_counters.is_empty());
        assert_eq!((devices.len(), partitions.len(), pool.counter_sets.len()), (5, 3, 1));
        let shared: Vec<&&DeviceSpec> = devices.iter().filter(|d| d.allows_multiple_allocations()).collect();
        assert_eq!(shared.len(), 1, "one GPU is shared by memory");
        let memory = &shared[0].to_device().capacity.unwrap()["memory"];
        let policy = memory.request_policy.as_ref().expect("the shared memory has a request policy");
        assert_eq!(policy.default.as_ref().map(|q| q.0.as_str()), Some("4Gi"));
        assert_eq!(shared[0].to_device().allow_multiple_allocations, Some(true));
        let whole = partitions[0].to_device().consumes_counters.unwrap();
        assert_eq!(whole[0].counters, pool.counter_sets[0].to_counter_set().counters, "the whole takes all");
        let models: std::collections::BTreeSet<_> = devices
            .iter()
            .map(|d| match d.attribute("model") {
                Some(Attribute::String(s)) => s.0.clone(),
                other => panic!("model is a string attribute, got {other:?}"),
            })
            .collect();
        assert_eq!(models.len(), 3);
        let published = devices[0].to_device();
        assert!(published.capacity.unwrap().contains_key("memory"));
        let attrs = published.attributes.unwrap();
        assert!(attrs["index"].int.is_some());
        assert!(attrs["driverVersion"].version.is_some());
    }

    #[test]
    fn a_rendered_inventory_publishes_the_devices_it_was_rendered_from() {
        let devices = vec![
            dracheck_objects::device("gpu-0")
                .string("uuid", "GPU-1")
                .string("productName", "NVIDIA \"H100\" 80GB")
                .int("index", 0)
                .bool("mig", false)
                .version("driverVersion", "550.54.15")
                .capacity("memory", "85899345920")
                .build(),
            dracheck_objects::device("gpu-1").build(),
            shared_device(),
        ];
        let inv = Inventory::parse(Path::new("rendered.yaml"), &render(&devices, &[])).unwrap();
        let back: Vec<Device> = inv.devices_for("any").unwrap().iter().map(DeviceSpec::to_device).collect();
        assert_eq!(back, devices);
    }

    /// A device several claims share by memory, with every field of a request policy.
    fn shared_device() -> Device {
        use k8s_openapi::api::resource::v1::{CapacityRequestPolicy, CapacityRequestPolicyRange};
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;
        let mut d = dracheck_objects::device("gpu-5").capacity("memory", "24Gi").capacity("slots", "4").build();
        let caps = d.capacity.as_mut().unwrap();
        caps.get_mut("memory").unwrap().request_policy = Some(CapacityRequestPolicy {
            default: Some(Q("4Gi".into())),
            valid_range: Some(CapacityRequestPolicyRange {
                min: Q("1Gi".into()),
                max: Some(Q("16Gi".into())),
                step: Some(Q("1Gi".into())),
            }),
            valid_values: None,
        });
        caps.get_mut("slots").unwrap().request_policy = Some(CapacityRequestPolicy {
            default: Some(Q("1".into())),
            valid_values: Some(vec![Q("1".into()), Q("2".into())]),
            valid_range: None,
        });
        d.allow_multiple_allocations = Some(true);
        d.binding_conditions = Some(vec!["gpu.example.com/attached".into()]);
        d.binding_failure_conditions = Some(vec!["gpu.example.com/attach-failed".into()]);
        d
    }

    #[test]
    fn typed_attributes_and_quantities_become_api_values() {
        let inv = parse(
            "groups:\n- nodes: [a]\n  devices:\n  - name: d0\n    attributes:\n      s: {string: x}\n      i: {int: 7}\n      \
             b: {bool: true}\n      v: {version: 1.2.3}\n    capacity:\n      memory: 40Gi\n      slots: 4\n",
        )
        .unwrap();
        let d = inv.devices_for("a").unwrap()[0].to_device();
        let a = d.attributes.unwrap();
        assert_eq!(a["s"].string.as_deref(), Some("x"));
        assert_eq!(a["i"].int, Some(7));
        assert_eq!(a["b"].bool, Some(true));
        assert_eq!(a["v"].version.as_deref(), Some("1.2.3"));
        let c = d.capacity.unwrap();
        assert_eq!(c["memory"].value.0, "40Gi");
        assert_eq!(c["slots"].value.0, "4");
    }

    #[test]
    fn explicit_nodes_win_over_the_wildcard() {
        let inv = parse(
            "groups:\n- nodes: [\"*\"]\n  devices: [{name: a}]\n- nodes: [big]\n  devices: [{name: a}, {name: b}]\n",
        )
        .unwrap();
        assert_eq!(inv.devices_for("big").unwrap().len(), 2);
        assert_eq!(inv.devices_for("small").unwrap().len(), 1);
        let only = parse("groups:\n- nodes: [big]\n  devices: [{name: a}]\n").unwrap();
        let missing = only.devices_for("small").unwrap_err().to_string();
        assert!(missing.contains("\"small\""), "{missing}");
    }

    #[test]
    fn an_unknown_field_names_file_line_and_field() {
        let e = parse("groups:\n- nodes: [a]\n  devices:\n  - name: d0\n    colour: red\n").unwrap_err();
        let InventoryError::Invalid { line, field, message, .. } = &e else { panic!("{e}") };
        assert_eq!(*line, 7, "{e}");
        assert!(field.starts_with("groups[0].devices[0]"), "{e}");
        assert!(message.contains("colour"), "{e}");
        assert!(e.to_string().contains("inv.yaml"), "{e}");
    }

    #[test]
    fn a_wrongly_typed_value_names_its_field() {
        let e = parse("groups:\n- nodes: [a]\n  devices:\n  - name: d0\n    attributes:\n      index: {int: many}\n")
            .unwrap_err();
        let InventoryError::Invalid { line, field, .. } = &e else { panic!("{e}") };
        assert_eq!(*line, 8, "{e}");
        assert!(field.contains("attributes.index"), "{e}");
        let bad_version =
            parse("groups:\n- nodes: [a]\n  devices:\n  - name: d0\n    attributes:\n      v: {version: \"1.2\"}\n")
                .unwrap_err()
                .to_string();
        assert!(bad_version.contains("semantic version"), "{bad_version}");
        let bad_quantity =
            parse("groups:\n- nodes: [a]\n  devices:\n  - name: d0\n    capacity:\n      memory: lots\n").unwrap_err();
        assert!(bad_quantity.to_string().contains("not a quantity"), "{bad_quantity}");
    }

    #[test]
    fn a_wrong_kind_or_version_is_rejected() {
        let e = Inventory::parse(Path::new("x.yaml"), "apiVersion: v1\nkind: MockInventory\ngroups: []\n").unwrap_err();
        assert!(e.to_string().contains("apiVersion"), "{e}");
        let e = Inventory::parse(Path::new("x.yaml"), &format!("{HEAD}groups: []\nfaults: [explode]\n")).unwrap_err();
        assert!(e.to_string().contains("unknown fault"), "{e}");
    }

    #[test]
    fn duplicate_devices_and_ambiguous_nodes_are_rejected() {
        let e = parse("groups:\n- nodes: [a]\n  devices:\n  - name: d0\n  - name: d1\n  - name: d0\n").unwrap_err();
        let InventoryError::DuplicateDevice { line, first_line, device, .. } = &e else { panic!("{e}") };
        assert_eq!((*line, *first_line, device.as_str()), (8, 6, "d0"), "{e}");
        let e = parse("groups:\n- nodes: [a]\n  devices: []\n- nodes: [a]\n  devices: []\n").unwrap_err();
        assert!(matches!(e, InventoryError::AmbiguousNode { .. }), "{e}");
    }

    #[test]
    fn partitions_name_counter_sets_and_counters_their_group_has() {
        let inv = parse(
            "groups:\n- nodes: [a]\n  counterSets:\n  - name: g\n    counters: {memory: 8Gi}\n  devices:\n  - name: half\n    \
             consumesCounters:\n    - counterSet: g\n      counters: {memory: 4Gi}\n",
        )
        .unwrap();
        let pool = inv.pool_for("a").unwrap();
        let published = pool.devices[0].to_device().consumes_counters.unwrap();
        assert_eq!((published[0].counter_set.as_str(), published[0].counters["memory"].value.0.as_str()), ("g", "4Gi"));
        let rendered = render(&[pool.devices[0].to_device()], &[pool.counter_sets[0].to_counter_set()]);
        let back = Inventory::parse(Path::new("r.yaml"), &rendered).unwrap().pool_for("a").unwrap();
        assert_eq!(back.counter_sets, pool.counter_sets);

        let unknown_set = parse(
            "groups:\n- nodes: [a]\n  devices:\n  - name: half\n    consumesCounters:\n    - counterSet: g\n      counters: {memory: 4Gi}\n",
        )
        .unwrap_err();
        let InventoryError::UnknownCounter { field, .. } = &unknown_set else { panic!("{unknown_set}") };
        assert_eq!(field, "groups[0].devices[0].consumesCounters[0]", "{unknown_set}");
        let unknown_counter = parse(
            "groups:\n- nodes: [a]\n  counterSets:\n  - name: g\n    counters: {memory: 8Gi}\n  devices:\n  - name: half\n    \
             consumesCounters:\n    - counterSet: g\n      counters: {cores: 4}\n",
        )
        .unwrap_err()
        .to_string();
        assert!(unknown_counter.contains("no counter \"cores\""), "{unknown_counter}");
    }

    #[test]
    fn faults_in_the_file_are_read() {
        let inv = parse("faults: [hang-prepare, \"fail-prepare=2\"]\ngroups: []\n").unwrap();
        assert_eq!(inv.faults(), [Fault::HangPrepare, Fault::FailPrepare(2)]);
    }

    #[test]
    fn quantities() {
        for ok in ["1", "40Gi", "500m", "1.5", "1e3", "-2", "0.5Ki"] {
            assert!(valid_quantity(ok), "{ok}");
        }
        for bad in ["", "Gi", "40GB", "1..2", "1e", "x1"] {
            assert!(!valid_quantity(bad), "{bad}");
        }
    }
}
