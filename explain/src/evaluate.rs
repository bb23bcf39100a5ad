//! Each request against each device, as the scheduler's allocator checks them: pool usable,
//! not in use, class selectors, request selectors, device taints, requested capacity.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceRequest, DeviceTaintRule, DeviceToleration, ExactDeviceRequest, ResourceClaim,
};

use crate::cel::{CelError, DeviceInput, Environment, Quantity, Selector};
use crate::model::Reason;
use crate::pools::{Pool, PoolDevice};
use crate::refs::{actual_values, references};

/// One request (or one subrequest of `firstAvailable`) made ready to evaluate.
pub struct Request<'a> {
    pub claim: usize,
    /// `req` or `req/sub`.
    pub name: String,
    /// The request's own name, which constraints refer to.
    pub base: String,
    pub class_name: String,
    pub class: Option<&'a DeviceClass>,
    pub all: bool,
    pub count: usize,
    pub admin: bool,
    pub tolerations: Vec<DeviceToleration>,
    pub capacity: BTreeMap<String, Quantity>,
    class_selectors: Vec<Compiled>,
    selectors: Vec<Compiled>,
}

struct Compiled {
    expression: String,
    program: Result<Selector, CelError>,
}

/// The requests of a claim in order; a slot is one request, with several alternatives for
/// `firstAvailable`.
pub struct Slot {
    pub alternatives: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Match {
    Yes,
    No(Reason),
    Error(Reason),
    /// A selector dracheck cannot evaluate ([`Reason::Unevaluable`]): whether the device
    /// matches is unknown, so the search leaves it out and the explanation says why.
    Unknown(Reason),
}

/// A request against a device, before the device's use and the node are considered.
#[derive(Debug, Clone)]
pub struct DeviceEval {
    pub selectors: Match,
    pub taint: Option<String>,
    pub capacity: Option<Reason>,
}

impl DeviceEval {
    pub fn compatible(&self) -> bool {
        self.selectors == Match::Yes && self.taint.is_none() && self.capacity.is_none()
    }

    /// Why the device does not suit the request, ignoring use and placement.
    pub fn reason(&self) -> Option<Reason> {
        match &self.selectors {
            Match::No(r) | Match::Error(r) | Match::Unknown(r) => return Some(r.clone()),
            Match::Yes => {}
        }
        if let Some(t) = &self.taint {
            return Some(Reason::Taint { taint: t.clone() });
        }
        self.capacity.clone()
    }
}

fn compile(env: &Environment, expressions: impl Iterator<Item = String>) -> Vec<Compiled> {
    expressions.map(|expression| Compiled { program: env.compile(&expression), expression }).collect()
}

fn cel_expressions(
    selectors: Option<&Vec<k8s_openapi::api::resource::v1::DeviceSelector>>,
) -> impl Iterator<Item = String> + '_ {
    selectors.into_iter().flatten().map(|s| s.cel.as_ref().map(|c| c.expression.clone()).unwrap_or_default())
}

/// The claim's requests, in order, and how they group into slots.
pub fn requests<'a>(
    env: &Environment,
    claims: &[&ResourceClaim],
    classes: &'a [DeviceClass],
) -> (Vec<Request<'a>>, Vec<Slot>) {
    let mut out = Vec::new();
    let mut slots = Vec::new();
    for (ci, claim) in claims.iter().enumerate() {
        let reqs =
            claim.spec.as_ref().and_then(|s| s.devices.as_ref()).and_then(|d| d.requests.clone()).unwrap_or_default();
        for r in reqs {
            let mut slot = Slot { alternatives: Vec::new() };
            for (name, exact) in shapes(&r) {
                slot.alternatives.push(out.len());
                out.push(request(env, ci, &r.name, name, &exact, classes));
            }
            slots.push(slot);
        }
    }
    (out, slots)
}

fn shapes(r: &DeviceRequest) -> Vec<(String, ExactDeviceRequest)> {
    if let Some(exact) = &r.exactly {
        return vec![(r.name.clone(), exact.clone())];
    }
    r.first_available
        .iter()
        .flatten()
        .map(|s| {
            let exact = ExactDeviceRequest {
                device_class_name: s.device_class_name.clone(),
                allocation_mode: s.allocation_mode.clone(),
                count: s.count,
                selectors: s.selectors.clone(),
                tolerations: s.tolerations.clone(),
                capacity: s.capacity.clone(),
                ..ExactDeviceRequest::default()
            };
            (format!("{}/{}", r.name, s.name), exact)
        })
        .collect()
}

fn request<'a>(
    env: &Environment,
    claim: usize,
    base: &str,
    name: String,
    exact: &ExactDeviceRequest,
    classes: &'a [DeviceClass],
) -> Request<'a> {
    let class = classes.iter().find(|c| c.metadata.name.as_deref() == Some(exact.device_class_name.as_str()));
    let class_selectors = class
        .map(|c| compile(env, cel_expressions(c.spec.as_ref().and_then(|s| s.selectors.as_ref()))))
        .unwrap_or_default();
    let capacity = exact
        .capacity
        .as_ref()
        .and_then(|c| c.requests.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Quantity::parse(&v.0).ok().map(|q| (k.clone(), q)))
        .collect();
    Request {
        claim,
        name,
        base: base.to_string(),
        class_name: exact.device_class_name.clone(),
        class,
        all: exact.allocation_mode.as_deref() == Some("All"),
        count: exact.count.unwrap_or(1).max(0) as usize,
        admin: exact.admin_access == Some(true),
        tolerations: exact.tolerations.clone().unwrap_or_default(),
        capacity,
        class_selectors,
        selectors: compile(env, cel_expressions(exact.selectors.as_ref())),
    }
}

impl Request<'_> {
    /// The request's own CEL selectors.
    pub fn selector_expressions(&self) -> Vec<String> {
        self.selectors.iter().map(|c| c.expression.clone()).collect()
    }
}

fn tolerated(t: &DeviceToleration, key: &str, value: Option<&str>, effect: &str) -> bool {
    if t.effect.as_deref().is_some_and(|e| !e.is_empty() && e != effect) {
        return false;
    }
    match t.operator.as_deref().unwrap_or("Equal") {
        "Exists" => t.key.as_deref().is_none_or(|k| k.is_empty() || k == key),
        _ => t.key.as_deref() == Some(key) && t.value.as_deref().unwrap_or("") == value.unwrap_or(""),
    }
}

/// Already consumed capacity of devices that allow several allocations, by device ID.
pub type Consumed = HashMap<(String, String, String), BTreeMap<String, Quantity>>;

pub fn evaluate(
    env: &Environment,
    req: &Request<'_>,
    pd: &PoolDevice<'_>,
    consumed: &Consumed,
    rules: &[DeviceTaintRule],
) -> DeviceEval {
    let driver = pd.slice.spec.driver.as_str();
    let device = pd.device;
    let input = DeviceInput::of(driver, device);
    let class_source = format!("class {}", req.class_name);
    let mut selectors = Match::Yes;
    'outer: for (source, list) in [(class_source.as_str(), &req.class_selectors), ("request", &req.selectors)] {
        for (index, c) in list.iter().enumerate() {
            let result = match &c.program {
                Ok(p) => env.matches(p, &input),
                Err(e) => Err(e.clone()),
            };
            match result {
                Ok(true) => {}
                Ok(false) => {
                    let actual = actual_values(&references(&c.expression), driver, device);
                    selectors = Match::No(Reason::Selector {
                        source: source.to_string(),
                        index,
                        expression: c.expression.clone(),
                        actual,
                    });
                    break 'outer;
                }
                Err(CelError::Unsupported { feature }) => {
                    selectors = Match::Unknown(Reason::Unevaluable {
                        source: source.to_string(),
                        index,
                        expression: c.expression.clone(),
                        feature,
                    });
                    break 'outer;
                }
                Err(e) => {
                    let error = match e {
                        CelError::Compile(m) => format!("compile error: {m}"),
                        other => format!("runtime error: {other}"),
                    };
                    selectors = Match::Error(Reason::SelectorError {
                        source: source.to_string(),
                        index,
                        expression: c.expression.clone(),
                        error,
                    });
                    break 'outer;
                }
            }
        }
    }
    let ruled =
        rules.iter().filter(|r| rule_selects(r, driver, &pd.slice.spec.pool.name, &device.name)).map(|r| &r.spec.taint);
    let taint = device.taints.iter().flatten().chain(ruled).find_map(|t| {
        let effect = t.effect.as_str();
        let blocks = effect == "NoSchedule" || effect == "NoExecute";
        let ok = req.tolerations.iter().any(|tol| tolerated(tol, &t.key, t.value.as_deref(), effect));
        (blocks && !ok)
            .then(|| format!("{}{}:{effect}", t.key, t.value.as_deref().map(|v| format!("={v}")).unwrap_or_default()))
    });
    let id = (driver.to_string(), pd.slice.spec.pool.name.clone(), device.name.clone());
    let capacity = capacity_shortfall(req, device, consumed.get(&id));
    DeviceEval { selectors, taint, capacity }
}

/// Whether a DeviceTaintRule's selector picks the device: every field it sets matches, and a
/// rule without a selector picks none (the API's DeviceTaintRuleSpec).
fn rule_selects(rule: &DeviceTaintRule, driver: &str, pool: &str, device: &str) -> bool {
    let Some(sel) = &rule.spec.device_selector else { return false };
    let ok = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
    ok(&sel.driver, driver) && ok(&sel.pool, pool) && ok(&sel.device, device)
}

/// What of `device`'s capacity the request would take and does not find free, as the
/// scheduler's allocator counts it (`CmpRequestOverCapacity` in k8s.io/dynamic-resource-allocation
/// structured/internal/incubating/consumable_capacity.go): a capacity the device lacks fails
/// the device; on a device that allows several allocations every capacity of it is consumed,
/// the amount asked rounded up as its request policy says, or, asked for nothing, the policy's
/// default, else the whole capacity (`fillEmptyRequest`). A device for one claim at a time is
/// only checked for the amounts asked.
fn capacity_shortfall(
    req: &Request<'_>,
    device: &k8s_openapi::api::resource::v1::Device,
    used: Option<&BTreeMap<String, Quantity>>,
) -> Option<Reason> {
    let caps = device.capacity.clone().unwrap_or_default();
    if let Some(name) = req.capacity.keys().find(|n| !caps.contains_key(*n)) {
        let requested = req.capacity[name].to_string();
        return Some(Reason::Capacity { name: name.clone(), requested, available: "none".into() });
    }
    let shared = device.allow_multiple_allocations == Some(true);
    for (name, cap) in &caps {
        let Ok(value) = Quantity::parse(&cap.value.0) else { continue };
        let wanted = match (req.capacity.get(name), shared) {
            (Some(asked), true) => rounded_up(asked, cap.request_policy.as_ref()),
            (Some(asked), false) => asked.clone(),
            (None, true) => cap
                .request_policy
                .as_ref()
                .and_then(|p| p.default.as_ref())
                .and_then(|d| Quantity::parse(&d.0).ok())
                .unwrap_or_else(|| value.clone()),
            (None, false) => continue,
        };
        let available = match used.and_then(|u| u.get(name)) {
            Some(u) => value.sub(u).unwrap_or(value.clone()),
            None => value.clone(),
        };
        if available < wanted {
            let shown = |q: &Quantity| in_units_of(q, &value);
            let requested = match req.capacity.get(name) {
                Some(asked) if *asked != wanted => {
                    format!("{asked} (taken as {} by the capacity's request policy)", shown(&wanted))
                }
                Some(asked) => asked.to_string(),
                None => format!("{} (nothing asked: the capacity's default share)", shown(&wanted)),
            };
            return Some(Reason::Capacity { name: name.clone(), requested, available: shown(&available) });
        }
    }
    None
}

/// `q` in the binary unit `like` is written in (`5Gi` beside an `80Gi` capacity, not
/// `5368709120`), where it is a whole number of them; as it is otherwise.
fn in_units_of(q: &Quantity, like: &Quantity) -> String {
    let text = like.to_string();
    for (suffix, power) in [("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50), ("Ei", 60)] {
        if text.ends_with(suffix)
            && let Some(v) = q.to_i128()
            && v % (1i128 << power) == 0
        {
            return format!("{}{suffix}", v >> power);
        }
    }
    q.to_string()
}

/// `asked` as the request policy rounds it (`calculateConsumedCapacity`): up to the valid
/// range's minimum and then to a whole step above it, or up to the smallest valid value
/// that holds it; unchanged where the policy says nothing or the numbers are not integers.
fn rounded_up(asked: &Quantity, policy: Option<&k8s_openapi::api::resource::v1::CapacityRequestPolicy>) -> Quantity {
    let Some(policy) = policy else { return asked.clone() };
    let parse = |q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity| Quantity::parse(&q.0).ok();
    if let Some(range) = &policy.valid_range
        && let Some(min) = parse(&range.min)
    {
        if *asked <= min {
            return min;
        }
        let step = range.step.as_ref().and_then(parse);
        return match (step.as_ref().and_then(Quantity::to_i128), min.to_i128(), asked.to_i128()) {
            (Some(step), Some(low), Some(want)) if step > 0 => {
                let steps = (want - low + step - 1) / step;
                i64::try_from(low + steps * step).map_or_else(|_| asked.clone(), Quantity::from_int)
            }
            _ => asked.clone(),
        };
    }
    if let Some(values) = &policy.valid_values {
        let mut fitting: Vec<Quantity> = values.iter().filter_map(parse).filter(|v| v >= asked).collect();
        fitting.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
        if let Some(first) = fitting.into_iter().next() {
            return first;
        }
    }
    asked.clone()
}

/// Every device of the current generation of every pool, in the order the allocator walks
/// them.
pub fn all_devices<'a>(pools: &'a [Pool<'a>]) -> Vec<PoolDevice<'a>> {
    pools.iter().enumerate().flat_map(|(i, p)| p.devices(i)).collect()
}
