//! The explanation as data: what `--output json` prints and what the conformance run reads.

use serde::Serialize;

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub devices: usize,
    pub free: usize,
    pub compatible: usize,
    pub free_compatible: usize,
    pub needed: usize,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// `pod ns/name` or `ResourceClaim ns/name`.
    pub subject: String,
    /// Whether the scheduler would allocate: some node has a device set for every claim and
    /// no node's search fails with a selector error (or all claims are allocated).
    pub fits: bool,
    pub summary: Summary,
    pub claims: Vec<ClaimReport>,
    /// Per node: whether the claims fit there, and if not why.
    pub nodes: Vec<NodeOutcome>,
    /// Why nothing fits, most specific first; empty when it fits.
    pub causes: Vec<Cause>,
    pub suggestions: Vec<String>,
    /// The pod's scheduling gates: while it has any, the scheduler does not try it at all,
    /// whatever fits.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scheduling_gates: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimReport {
    /// `ns/name`.
    pub claim: String,
    /// The devices it already has, when allocated.
    pub allocated: Option<Vec<String>>,
    pub requests: Vec<RequestReport>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestReport {
    /// The request's name (`req/sub` for a subrequest of `firstAvailable`).
    pub name: String,
    pub class: String,
    pub class_exists: bool,
    /// `ExactCount` or `All`.
    pub mode: String,
    pub summary: Summary,
    pub devices: Vec<DeviceRow>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRow {
    /// The node the device is on, or how its pool picks nodes ("all nodes").
    pub node: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
    /// `None`: free and compatible with the request.
    pub ruled_out: Option<Reason>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Reason {
    /// The pool is incomplete or invalid.
    Pool { message: String },
    /// In use by another claim.
    Allocated { by: String, compatible: bool },
    /// A selector gave false; `actual` shows the values of what it refers to.
    Selector { source: String, index: usize, expression: String, actual: String },
    /// A selector failed to compile or to evaluate.
    SelectorError { source: String, index: usize, expression: String, error: String },
    /// A selector uses `feature`, which Kubernetes has and dracheck does not implement: its
    /// result is unknown, neither true nor false nor an error.
    Unevaluable { source: String, index: usize, expression: String, feature: String },
    /// A device taint the request does not tolerate.
    Taint { taint: String },
    /// The requested capacity is more than the device has left.
    Capacity { name: String, requested: String, available: String },
    /// No node the pod may use reaches the device.
    Node { message: String },
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeOutcome {
    pub node: String,
    pub fits: bool,
    /// A reason the pod cannot go there at all (not Ready, tainted, cordoned, …).
    pub problem: Option<String>,
    /// What the search found: the devices chosen, or why none could be.
    pub detail: String,
}

/// A selector that rules out devices, with how many and the values it saw.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SelectorMiss {
    pub source: String,
    pub index: usize,
    pub expression: String,
    pub devices: usize,
    /// Distinct values of what the selector refers to, e.g. `model="l4"`.
    pub actual: Vec<String>,
    /// The CEL error the selector fails with on these devices, rather than giving false.
    pub error: Option<String>,
}

/// The values a constraint's attribute has on one node, among the free devices that suit
/// the requests it covers.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeValues {
    pub node: String,
    /// Per value, the devices with it: `"a100" (gpu-0, gpu-1)`; `missing (gpu-3)`.
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Cause {
    /// The request names a DeviceClass that does not exist.
    UnknownClass { request: String, class: String },
    /// No ResourceSlice publishes a device at all: nothing can match.
    NoDevicesPublished { request: String },
    /// No device anywhere passes the selectors (and taints, capacity).
    NoCompatibleDevice { request: String, misses: Vec<SelectorMiss> },
    /// More devices asked for than compatible ones exist at all.
    CountAboveInventory { request: String, needed: usize, compatible: usize },
    /// Compatible devices exist but all are allocated.
    AllocatedElsewhere { request: String, compatible: usize, holders: Vec<String>, free_misses: Vec<SelectorMiss> },
    /// No node the pod may use has enough compatible devices: free ones, or with `in_all`,
    /// even counting the allocated ones.
    NotEnoughOnOneNode { request: String, needed: usize, most: usize, node: String, in_all: bool },
    /// The free compatible devices are only in pools or on nodes that cannot be used.
    Unreachable { request: String, reasons: Vec<String> },
    /// A selector failed to compile or failed at run time on a device the allocator reached
    /// on some node. The allocator returns the error, the DynamicResources filter turns it
    /// into an Error status (not Unschedulable) and the scheduler fails the pod's whole
    /// scheduling attempt (`SchedulerError`): the pod stays Pending whatever other nodes offer.
    SelectorError { request: String, device: String, error: String },
    /// A selector of the request uses something dracheck cannot evaluate (named by
    /// `feature`): the analysis of that request rests on an unknown, so no verdict is given
    /// on it.
    Unevaluable { request: String, source: String, index: usize, expression: String, feature: String },
    /// Enough devices per request, but a constraint of the claim (`matchAttribute` or
    /// `distinctAttribute`) is what keeps nodes from a device set: without it they would
    /// have one. The values of its attribute per node show why.
    ConstraintUnmet { claim: String, constraint: String, attribute: String, nodes: Vec<NodeValues> },
    /// Enough devices per request, but no combination meets the claim's constraints or the
    /// requests together.
    NoCombination { detail: String },
}

impl Cause {
    pub fn describe(&self) -> String {
        match self {
            Cause::UnknownClass { request, class } => {
                format!("request {request}: DeviceClass {class} does not exist")
            }
            Cause::NoDevicesPublished { request } => {
                format!("request {request}: no device matches: no ResourceSlice publishes a device")
            }
            Cause::NoCompatibleDevice { request, misses } => {
                let parts: Vec<String> = misses.iter().map(miss_text).collect();
                if parts.is_empty() {
                    format!("request {request}: no device matches")
                } else {
                    format!("request {request}: no device matches: {}", parts.join("; "))
                }
            }
            Cause::CountAboveInventory { request, needed, compatible } => format!(
                "request {request}: asks for {needed} device(s), but only {compatible} compatible device(s) exist in the cluster"
            ),
            Cause::AllocatedElsewhere { request, compatible, holders, free_misses } => {
                let free: Vec<String> = free_misses.iter().map(miss_text).collect();
                let free = if free.is_empty() {
                    String::new()
                } else {
                    format!("; the free ones do not match: {}", free.join("; "))
                };
                format!(
                    "request {request}: all {compatible} compatible device(s) are allocated, to {}{free}",
                    holders.join(", ")
                )
            }
            Cause::NotEnoughOnOneNode { request, needed, most, node, in_all } => format!(
                "request {request}: needs {needed} device(s) on one node, but the most {} compatible devices on a usable node is {most} ({node})",
                if *in_all { "(free or allocated)" } else { "free" }
            ),
            Cause::Unreachable { request, reasons } => {
                format!("request {request}: the free compatible devices cannot be used: {}", reasons.join("; "))
            }
            Cause::SelectorError { request, device, error } => format!(
                "request {request}: selector error on device {device}: {error}; the scheduler fails the pod's whole scheduling attempt on it (SchedulerError), whatever other nodes offer"
            ),
            Cause::Unevaluable { request, source, index, expression, feature } => format!(
                "request {request}: dracheck cannot evaluate this selector: {source} selector #{index} `{expression}` uses {feature}, which dracheck does not implement (the scheduler does); which devices it selects is unknown, so this is no verdict on the request"
            ),
            Cause::ConstraintUnmet { claim, constraint, attribute, nodes } => {
                let want = if constraint == "matchAttribute" {
                    "enough free devices with one value"
                } else {
                    "enough free devices with distinct values"
                };
                let per_node: Vec<String> = nodes
                    .iter()
                    .map(|n| {
                        let values = if n.values.is_empty() {
                            "no free suitable device".to_string()
                        } else {
                            n.values.join(", ")
                        };
                        format!("{}: {values}", n.node)
                    })
                    .collect();
                format!("claim {claim}: {constraint} {attribute}: no node has {want}: {}", per_node.join("; "))
            }
            Cause::NoCombination { detail } => format!("no combination of devices satisfies all requests: {detail}"),
        }
    }
}

/// The `source` of a [`SelectorMiss`] that is a device taint the request does not tolerate
/// (its `expression` the taint), not a selector.
pub const TAINT_MISS: &str = "device taint";
/// The `source` of a [`SelectorMiss`] that is a capacity the request asks for and the device
/// has too little of (its `expression` says which, how much and how much is left).
pub const CAPACITY_MISS: &str = "capacity request";

fn miss_text(m: &SelectorMiss) -> String {
    match m.source.as_str() {
        TAINT_MISS => return format!("device taint {} not tolerated, on {} device(s)", m.expression, m.devices),
        CAPACITY_MISS => return format!("{}, on {} device(s)", m.expression, m.devices),
        _ => {}
    }
    let actual = if m.actual.is_empty() { String::new() } else { format!(" (actual: {})", m.actual.join(", ")) };
    match &m.error {
        Some(error) => format!(
            "{} selector #{} `{}` fails with a CEL error on {} device(s){actual}: {error}",
            m.source, m.index, m.expression, m.devices
        ),
        None => {
            format!("{} selector #{} `{}` rules out {} device(s){actual}", m.source, m.index, m.expression, m.devices)
        }
    }
}

impl Reason {
    pub fn describe(&self) -> String {
        match self {
            Reason::Pool { message } => message.clone(),
            Reason::Allocated { by, compatible } => {
                format!("allocated to {by}{}", if *compatible { " (would match)" } else { "" })
            }
            Reason::Selector { source, index, actual, .. } => {
                let actual = if actual.is_empty() { String::new() } else { format!(": {actual}") };
                format!("{source} selector #{index} is false{actual}")
            }
            Reason::SelectorError { source, index, error, .. } => {
                format!("{source} selector #{index}: CEL error: {error}")
            }
            Reason::Unevaluable { source, index, feature, .. } => {
                format!("{source} selector #{index}: dracheck cannot evaluate this selector ({feature})")
            }
            Reason::Taint { taint } => format!("device taint {taint} not tolerated"),
            Reason::Capacity { name, requested, available } => {
                format!("capacity {name}: requested {requested}, available {available}")
            }
            Reason::Node { message } => message.clone(),
        }
    }
}
