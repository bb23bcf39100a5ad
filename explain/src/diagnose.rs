//! Puts it together: evaluates every request against every device, searches each node for a
//! device set as the allocator would, and names the causes when no node has one.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::resource::v1::{DeviceConstraint, ResourceClaim};

use crate::cel::{Environment, Quantity};
use crate::constraints::{self, ConstraintId, Offer};
use crate::counters::Counters;
use crate::evaluate::{self, Consumed, DeviceEval, Match, Request, Slot};
use crate::model::{
    CAPACITY_MISS, Cause, ClaimReport, DeviceRow, Explanation, NodeOutcome, NodeValues, Reason, RequestReport,
    SelectorMiss, Summary, TAINT_MISS,
};
use crate::nodes::{node_problem, selector_matches};
use crate::pools::{self, Pool, PoolDevice, device_reaches, placement};
use crate::refs::{actual_values, references};
use crate::search::{Outcome, Search};
use crate::state::{ClusterState, Subject};
use crate::suggest;

fn key(ns: Option<&str>, name: Option<&str>) -> String {
    format!("{}/{}", ns.unwrap_or_default(), name.unwrap_or_default())
}

fn claim_key(c: &ResourceClaim) -> String {
    key(c.metadata.namespace.as_deref(), c.metadata.name.as_deref())
}

fn allocation_results(c: &ResourceClaim) -> Vec<&k8s_openapi::api::resource::v1::DeviceRequestAllocationResult> {
    c.status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
        .map(|r| r.iter().collect())
        .unwrap_or_default()
}

fn is_allocated(c: &ResourceClaim) -> bool {
    c.status.as_ref().and_then(|s| s.allocation.as_ref()).is_some()
}

/// Everything the evaluation computed, for the causes and suggestions to read.
pub struct Facts<'a> {
    pub env: &'a Environment,
    pub state: &'a ClusterState,
    pub pools: &'a [Pool<'a>],
    pub devices: &'a [PoolDevice<'a>],
    pub requests: &'a [Request<'a>],
    /// The claims' requests in order, each with its alternatives (indexes into `requests`).
    pub slots: &'a [Slot],
    pub evals: &'a [Vec<DeviceEval>],
    pub in_use: &'a [bool],
    pub holders: &'a [Option<String>],
    /// Per node that the pod may use: which devices it reaches.
    pub reach: &'a [(String, Vec<bool>)],
}

impl Facts<'_> {
    pub fn pool_usable(&self, d: usize) -> bool {
        self.pools[self.devices[d].pool].unusable.is_none()
    }

    /// In a usable pool and reached from some node the pod may use.
    pub fn reachable(&self, d: usize) -> bool {
        self.pool_usable(d) && self.reach.iter().any(|(_, v)| v[d])
    }

    /// Free, and [`Facts::reachable`]: a device the pod could be given, compatibility aside.
    pub fn free_and_reachable(&self, d: usize) -> bool {
        !self.in_use[d] && self.reachable(d)
    }

    /// Free, compatible and usable from the named node.
    pub fn free_compatible_on(&self, r: usize, node: &[bool]) -> usize {
        (0..self.devices.len()).filter(|&d| node[d] && !self.in_use[d] && self.evals[r][d].compatible()).count()
    }

    /// Compatible and usable from the named node, free or not.
    pub fn compatible_on(&self, r: usize, node: &[bool]) -> usize {
        (0..self.devices.len()).filter(|&d| node[d] && self.evals[r][d].compatible()).count()
    }
}

pub fn explain_state(state: &ClusterState, subject: &Subject) -> Explanation {
    explain_in(&Environment::new(), state, subject)
}

/// [`explain_state`] with selectors evaluated in `env`.
pub(crate) fn explain_in(env: &Environment, state: &ClusterState, subject: &Subject) -> Explanation {
    let pools = pools::gather(&state.slices);
    let devices = evaluate::all_devices(&pools);
    let subject_keys: BTreeSet<String> = subject.claims.iter().map(claim_key).collect();

    // Who holds which device; devices that allow several allocations are never exclusive.
    let index: HashMap<(String, String, String), usize> = devices
        .iter()
        .enumerate()
        .map(|(i, pd)| ((pd.slice.spec.driver.clone(), pd.slice.spec.pool.name.clone(), pd.device.name.clone()), i))
        .collect();
    let shareable: Vec<bool> = devices.iter().map(|pd| pd.device.allow_multiple_allocations == Some(true)).collect();
    let mut holders: Vec<Option<String>> = vec![None; devices.len()];
    let mut consumed: Consumed = HashMap::new();
    for c in &state.claims {
        if subject_keys.contains(&claim_key(c)) {
            continue;
        }
        for r in allocation_results(c) {
            if r.admin_access == Some(true) {
                continue;
            }
            let id = (r.driver.clone(), r.pool.clone(), r.device.clone());
            if let Some(&i) = index.get(&id) {
                if shareable[i] {
                    let used = consumed.entry(id).or_default();
                    for (name, q) in r.consumed_capacity.iter().flatten() {
                        let Ok(q) = Quantity::parse(&q.0) else { continue };
                        let sum = used.get(name).map_or(Ok(q.clone()), |u: &Quantity| u.add(&q)).unwrap_or(q);
                        used.insert(name.clone(), sum);
                    }
                } else {
                    holders[i] = Some(claim_key(c));
                }
            }
        }
    }
    // A free partition whose device's counters the allocated ones have taken is held by them.
    let held: Vec<bool> = holders.iter().map(Option::is_some).collect();
    let counters = Counters::new(&pools, &devices, &held);
    for d in 0..devices.len() {
        if held[d] {
            continue;
        }
        if let Some(k) = counters.short(d, std::iter::empty()) {
            let mut by: Vec<String> = (0..devices.len())
                .filter(|&o| held[o] && counters.takes(o, k))
                .filter_map(|o| holders[o].clone())
                .collect();
            by.sort();
            by.dedup();
            holders[d] = Some(format!("{} (through {}, which it shares)", by.join(", "), counters.names[k]));
        }
    }
    let in_use: Vec<bool> = holders.iter().map(Option::is_some).collect();

    let pending: Vec<&ResourceClaim> = subject.claims.iter().filter(|c| !is_allocated(c)).collect();
    let pinned: Vec<&ResourceClaim> = subject.claims.iter().filter(|c| is_allocated(c)).collect();
    let (requests, slots) = evaluate::requests(env, &pending, &state.classes);
    let evals: Vec<Vec<DeviceEval>> = requests
        .iter()
        .map(|r| devices.iter().map(|pd| evaluate::evaluate(env, r, pd, &consumed, &state.taint_rules)).collect())
        .collect();
    let constraints: Vec<Vec<DeviceConstraint>> = pending
        .iter()
        .map(|c| {
            c.spec.as_ref().and_then(|s| s.devices.as_ref()).and_then(|d| d.constraints.clone()).unwrap_or_default()
        })
        .collect();
    let missing_class: Vec<&Request<'_>> = requests.iter().filter(|r| r.class.is_none()).collect();

    // Node by node, as the scheduler filters them.
    let mut outcomes = Vec::new();
    let mut reach: Vec<(String, Vec<bool>)> = Vec::new();
    let mut node_problems: BTreeMap<String, String> = BTreeMap::new();
    let mut errors: Vec<(usize, usize, String)> = Vec::new();
    let mut blocked: BTreeSet<ConstraintId> = BTreeSet::new();
    let offer = Offer { requests: &requests, devices: &devices, evals: &evals, in_use: &in_use };
    for node in &state.nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let mut problem = node_problem(node, subject.pod.as_ref());
        if problem.is_none()
            && let Some(c) = pinned.iter().find(|c| {
                let sel = c.status.as_ref().and_then(|s| s.allocation.as_ref()).and_then(|a| a.node_selector.as_ref());
                sel.is_some_and(|s| !selector_matches(s, node))
            })
        {
            problem = Some(format!("claim {} is allocated with devices not available on this node", claim_key(c)));
        }
        if let Some(p) = &problem {
            node_problems.insert(name.clone(), p.clone());
            outcomes.push(NodeOutcome { node: name, fits: false, problem, detail: String::new() });
            continue;
        }
        let usable: Vec<bool> = devices
            .iter()
            .map(|pd| pools[pd.pool].unusable.is_none() && device_reaches(pd.slice, pd.device, node))
            .collect();
        reach.push((name.clone(), usable.clone()));
        if let Some(r) = missing_class.first() {
            let detail = format!("request {}: DeviceClass {} does not exist", r.name, r.class_name);
            outcomes.push(NodeOutcome { node: name, fits: false, problem: None, detail });
            continue;
        }
        // The allocator's search on this node under constraints `cs`.
        let fits_with = |cs: &[Vec<DeviceConstraint>]| {
            let taken = (in_use.as_slice(), shareable.as_slice(), &counters);
            Search::new(&requests, &slots, &devices, &evals, taken, usable.clone(), cs).run()
        };
        let (fits, detail) = match fits_with(&constraints) {
            Outcome::Fit(chosen) => {
                let picked: Vec<String> =
                    chosen.iter().map(|(r, d)| format!("{}: {}", requests[*r].name, device_id(&devices[*d]))).collect();
                (true, if picked.is_empty() { "nothing to allocate".into() } else { picked.join(", ") })
            }
            Outcome::NoFit => match shortfall(&requests, &slots, &evals, &in_use, &usable) {
                Some(short) => (false, short),
                None => {
                    let fits_without = |cs: &[Vec<DeviceConstraint>]| matches!(fits_with(cs), Outcome::Fit(_));
                    let here = constraints::blocking(&constraints, fits_without);
                    let detail = if here.is_empty() {
                        "enough devices per request, but no combination meets the claim's constraints".to_string()
                    } else {
                        let parts: Vec<String> = here
                            .iter()
                            .map(|&(ci, k)| {
                                let c = &constraints[ci][k];
                                let (kind, attribute) = constraints::kind(c);
                                format!("{kind} {attribute} not met: {}", offer.values(ci, c, &usable).join(", "))
                            })
                            .collect();
                        parts.join("; ")
                    };
                    blocked.extend(here);
                    (false, detail)
                }
            },
            Outcome::Error(r, d, e) => {
                let detail = format!(
                    "CEL error on {}: {e}; it fails the pod's whole scheduling attempt",
                    device_id(&devices[d])
                );
                errors.push((r, d, e));
                (false, detail)
            }
            Outcome::Undecided => (false, "the search gave up: too many combinations to try".into()),
        };
        outcomes.push(NodeOutcome { node: name, fits, problem: None, detail });
    }
    // A selector error on any node fails the pod's whole scheduling attempt: the allocator
    // returns it, the DynamicResources filter makes it an Error status (not Unschedulable),
    // and the scheduler's filtering stops at the first Error, so the pod stays Pending
    // (`SchedulerError`) whatever other nodes offer. (In large clusters the scheduler stops
    // filtering once it has found enough feasible nodes, at least 100, and may not reach the
    // failing one; that is not modelled.)
    let fits = pending.is_empty() || (errors.is_empty() && outcomes.iter().any(|o| o.fits));
    // The constraints that keep some node from a device set, with the values of their
    // attribute on each node where the search found nothing.
    let failed: BTreeSet<&str> = outcomes.iter().filter(|o| !o.fits).map(|o| o.node.as_str()).collect();
    let unmet: Vec<Cause> = blocked
        .iter()
        .map(|&(ci, k)| {
            let c = &constraints[ci][k];
            let (constraint, attribute) = constraints::kind(c);
            let nodes = reach
                .iter()
                .filter(|(n, _)| failed.contains(n.as_str()))
                .map(|(n, usable)| NodeValues { node: n.clone(), values: offer.values(ci, c, usable) })
                .collect();
            Cause::ConstraintUnmet { claim: claim_key(pending[ci]), constraint: constraint.into(), attribute, nodes }
        })
        .collect();

    let facts = Facts {
        env,
        state,
        pools: &pools,
        devices: &devices,
        requests: &requests,
        slots: &slots,
        evals: &evals,
        in_use: &in_use,
        holders: &holders,
        reach: &reach,
    };
    let reports = request_reports(&facts, &node_problems);
    let mut claims = Vec::new();
    for c in &subject.claims {
        let allocated = is_allocated(c).then(|| {
            allocation_results(c)
                .iter()
                .map(|r| format!("{}: {}/{}/{}", r.request, r.driver, r.pool, r.device))
                .collect()
        });
        let ci = pending.iter().position(|p| claim_key(p) == claim_key(c));
        let requests = match ci {
            Some(ci) => {
                requests.iter().zip(&reports).filter(|(r, _)| r.claim == ci).map(|(_, rep)| rep.clone()).collect()
            }
            None => Vec::new(),
        };
        claims.push(ClaimReport { claim: claim_key(c), allocated, requests });
    }
    let summary = overall_summary(&facts);
    let causes = if fits { Vec::new() } else { causes(&facts, &reports, &errors, unmet, &outcomes) };
    let suggestions = if fits { Vec::new() } else { suggest::suggestions(&facts, &causes) };
    let scheduling_gates = subject
        .pod
        .as_ref()
        .and_then(|p| p.spec.as_ref()?.scheduling_gates.as_ref())
        .map(|gates| gates.iter().map(|g| g.name.clone()).collect())
        .unwrap_or_default();
    Explanation {
        subject: subject.what.clone(),
        fits,
        summary,
        claims,
        nodes: outcomes,
        causes,
        suggestions,
        scheduling_gates,
    }
}

pub fn device_id(pd: &PoolDevice<'_>) -> String {
    format!("{}/{}/{}", pd.slice.spec.driver, pd.slice.spec.pool.name, pd.device.name)
}

/// Why the search found nothing on a node: the first request short of devices there; `None`
/// when each has enough, so that only the combination fails. A request with alternatives
/// (`firstAvailable`) is short only when every alternative is, and then each one's shortfall
/// is named.
fn shortfall(
    requests: &[Request<'_>],
    slots: &[Slot],
    evals: &[Vec<DeviceEval>],
    in_use: &[bool],
    usable: &[bool],
) -> Option<String> {
    let short = |r: usize| {
        let free = (0..usable.len()).filter(|&d| usable[d] && !in_use[d] && evals[r][d].compatible()).count();
        let needed = if requests[r].all { 1 } else { requests[r].count };
        (free < needed).then_some((free, needed))
    };
    for slot in slots {
        let shortfalls: Option<Vec<(usize, (usize, usize))>> =
            slot.alternatives.iter().map(|&r| short(r).map(|s| (r, s))).collect();
        match shortfalls.as_deref() {
            None | Some([]) => {}
            Some([(r, (free, needed))]) => {
                return Some(format!(
                    "request {}: {free} of {needed} needed devices free and compatible here",
                    requests[*r].name
                ));
            }
            Some(all) => {
                let each: Vec<String> =
                    all.iter().map(|(r, (free, needed))| format!("{} {free} of {needed}", requests[*r].name)).collect();
                return Some(format!(
                    "no alternative has enough devices free and compatible here: {}",
                    each.join(", ")
                ));
            }
        }
    }
    None
}

fn needed(facts: &Facts<'_>, r: usize) -> usize {
    let req = &facts.requests[r];
    if req.all {
        (0..facts.devices.len()).filter(|&d| facts.evals[r][d].compatible()).count().max(1)
    } else {
        req.count
    }
}

fn request_summary(facts: &Facts<'_>, r: usize) -> Summary {
    let n = facts.devices.len();
    let known = facts.requests[r].class.is_some();
    Summary {
        devices: n,
        free: (0..n).filter(|&d| !facts.in_use[d]).count(),
        compatible: if known { (0..n).filter(|&d| facts.evals[r][d].compatible()).count() } else { 0 },
        free_compatible: if known {
            (0..n).filter(|&d| facts.free_and_reachable(d) && facts.evals[r][d].compatible()).count()
        } else {
            0
        },
        needed: needed(facts, r),
    }
}

fn overall_summary(facts: &Facts<'_>) -> Summary {
    let n = facts.devices.len();
    let rs = 0..facts.requests.len();
    let known = |r: usize| facts.requests[r].class.is_some();
    let compatible = |d: usize| rs.clone().any(|r| known(r) && facts.evals[r][d].compatible());
    Summary {
        devices: n,
        free: (0..n).filter(|&d| !facts.in_use[d]).count(),
        compatible: (0..n).filter(|&d| compatible(d)).count(),
        free_compatible: (0..n).filter(|&d| facts.free_and_reachable(d) && compatible(d)).count(),
        // A request with alternatives takes one of them: it needs what its least demanding
        // alternative needs, not all of them added up.
        needed: facts
            .slots
            .iter()
            .map(|slot| slot.alternatives.iter().map(|&r| needed(facts, r)).min().unwrap_or(0))
            .sum(),
    }
}

fn request_reports(facts: &Facts<'_>, node_problems: &BTreeMap<String, String>) -> Vec<RequestReport> {
    let mut out = Vec::new();
    for (r, req) in facts.requests.iter().enumerate() {
        let mut rows = Vec::new();
        if req.class.is_some() {
            for (d, pd) in facts.devices.iter().enumerate() {
                let pool = &facts.pools[pd.pool];
                let eval = &facts.evals[r][d];
                let ruled_out = if let Some(m) = &pool.unusable {
                    Some(Reason::Pool { message: m.clone() })
                } else if let Some(by) = &facts.holders[d] {
                    Some(Reason::Allocated { by: by.clone(), compatible: eval.compatible() })
                } else if let Some(reason) = eval.reason() {
                    Some(reason)
                } else if !facts.reach.iter().any(|(_, v)| v[d]) {
                    let place = placement(pd.slice);
                    let message =
                        node_problems.get(&place).cloned().unwrap_or_else(|| "on no node the pod may use".into());
                    Some(Reason::Node { message })
                } else {
                    None
                };
                rows.push(DeviceRow {
                    node: placement(pd.slice),
                    driver: pd.slice.spec.driver.clone(),
                    pool: pd.slice.spec.pool.name.clone(),
                    device: pd.device.name.clone(),
                    ruled_out,
                });
            }
        }
        out.push(RequestReport {
            name: req.name.clone(),
            class: req.class_name.clone(),
            class_exists: req.class.is_some(),
            mode: if req.all { "All".into() } else { "ExactCount".into() },
            summary: request_summary(facts, r),
            devices: rows,
        });
    }
    out
}

/// Groups the devices a request's selectors rule out by the selector that gave false or
/// failed first.
fn misses(facts: &Facts<'_>, r: usize, only_free: bool) -> Vec<SelectorMiss> {
    let mut groups: Vec<SelectorMiss> = Vec::new();
    for d in 0..facts.devices.len() {
        if only_free && facts.in_use[d] {
            continue;
        }
        let (source, index, expression, actual, error) = match &facts.evals[r][d].selectors {
            Match::No(Reason::Selector { source, index, expression, actual }) => {
                (source, index, expression, actual.clone(), None)
            }
            Match::Error(Reason::SelectorError { source, index, expression, error }) => {
                let pd = &facts.devices[d];
                let actual = actual_values(&references(expression), &pd.slice.spec.driver, pd.device);
                (source, index, expression, actual, Some(error))
            }
            _ => continue,
        };
        let actual = &actual;
        match groups
            .iter_mut()
            .find(|g| g.source == *source && g.index == *index && g.error.is_some() == error.is_some())
        {
            Some(g) => {
                g.devices += 1;
                if !actual.is_empty() && !g.actual.contains(actual) && g.actual.len() < 6 {
                    g.actual.push(actual.clone());
                }
            }
            None => groups.push(SelectorMiss {
                source: source.clone(),
                index: *index,
                expression: expression.clone(),
                devices: 1,
                actual: if actual.is_empty() { Vec::new() } else { vec![actual.clone()] },
                error: error.cloned(),
            }),
        }
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.devices));
    groups
}

fn causes(
    facts: &Facts<'_>,
    reports: &[RequestReport],
    errors: &[(usize, usize, String)],
    unmet: Vec<Cause>,
    outcomes: &[NodeOutcome],
) -> Vec<Cause> {
    let mut out = Vec::new();
    for (r, req) in facts.requests.iter().enumerate() {
        let s = &reports[r].summary;
        let name = req.name.clone();
        if req.class.is_none() {
            out.push(Cause::UnknownClass { request: name, class: req.class_name.clone() });
            continue;
        }
        // A selector that cannot be evaluated makes every count below a guess: say so instead.
        let mut unevaluable = false;
        for d in 0..facts.devices.len() {
            if let Match::Unknown(Reason::Unevaluable { source, index, expression, feature }) =
                &facts.evals[r][d].selectors
            {
                unevaluable = true;
                let cause = Cause::Unevaluable {
                    request: name.clone(),
                    source: source.clone(),
                    index: *index,
                    expression: expression.clone(),
                    feature: feature.clone(),
                };
                if !out.contains(&cause) {
                    out.push(cause);
                }
            }
        }
        if unevaluable {
            continue;
        }
        for (er, d, e) in errors {
            if *er == r {
                let device = device_id(&facts.devices[*d]);
                if !out
                    .iter()
                    .any(|c| matches!(c, Cause::SelectorError { device: x, error: y, .. } if *x == device && y == e))
                {
                    out.push(Cause::SelectorError { request: name.clone(), device, error: e.clone() });
                }
            }
        }
        if facts.devices.is_empty() {
            out.push(Cause::NoDevicesPublished { request: name });
            continue;
        }
        if s.compatible == 0 {
            let mut m = misses(facts, r, false);
            for d in 0..facts.devices.len() {
                if facts.evals[r][d].selectors == Match::Yes
                    && let Some(reason) = facts.evals[r][d].reason()
                {
                    let (source, expression) = match &reason {
                        Reason::Taint { taint } => (TAINT_MISS.to_string(), taint.clone()),
                        other => (CAPACITY_MISS.to_string(), other.describe()),
                    };
                    // One line per taint or shortfall, with how many devices it keeps out.
                    match m.iter_mut().find(|g| g.source == source && g.expression == expression) {
                        Some(g) => g.devices += 1,
                        None => m.push(SelectorMiss {
                            source,
                            index: 0,
                            expression,
                            devices: 1,
                            actual: Vec::new(),
                            error: None,
                        }),
                    }
                }
            }
            out.push(Cause::NoCompatibleDevice { request: name, misses: m });
            continue;
        }
        if !req.all && req.count > s.compatible {
            out.push(Cause::CountAboveInventory { request: name, needed: req.count, compatible: s.compatible });
            continue;
        }
        // Nodes the pod may use have compatible devices, but none has enough even if all were
        // free: that is the cause, whatever else holds some of them now. (None at all is a
        // question of reach, below.)
        let need = needed(facts, r);
        if let Some((node, most)) =
            facts.reach.iter().map(|(n, v)| (n.clone(), facts.compatible_on(r, v))).max_by_key(|(_, c)| *c)
            && most > 0
            && most < need
        {
            out.push(Cause::NotEnoughOnOneNode { request: name, needed: need, most, node, in_all: true });
            continue;
        }
        let compatible_free =
            (0..facts.devices.len()).filter(|&d| !facts.in_use[d] && facts.evals[r][d].compatible()).count();
        if compatible_free == 0 {
            let mut holders: Vec<String> = (0..facts.devices.len())
                .filter(|&d| facts.evals[r][d].compatible())
                .filter_map(|d| facts.holders[d].clone())
                .collect();
            holders.sort();
            holders.dedup();
            let free_misses = misses(facts, r, true);
            out.push(Cause::AllocatedElsewhere { request: name, compatible: s.compatible, holders, free_misses });
            continue;
        }
        if s.free_compatible == 0 {
            let mut reasons: Vec<String> = (0..facts.devices.len())
                .filter(|&d| !facts.in_use[d] && facts.evals[r][d].compatible())
                .filter_map(|d| {
                    reports[r]
                        .devices
                        .get(d)
                        .and_then(|row| row.ruled_out.as_ref())
                        .map(|x| format!("{}: {}", row_name(&reports[r].devices[d]), x.describe()))
                })
                .collect();
            reasons.truncate(8);
            out.push(Cause::Unreachable { request: name, reasons });
            continue;
        }
        let (best_node, most) = facts
            .reach
            .iter()
            .map(|(n, v)| (n.clone(), facts.free_compatible_on(r, v)))
            .max_by_key(|(_, c)| *c)
            .unwrap_or_default();
        if most < need {
            out.push(Cause::NotEnoughOnOneNode { request: name, needed: need, most, node: best_node, in_all: false });
        }
    }
    if out.is_empty() && !unmet.is_empty() {
        return unmet;
    }
    if out.is_empty() {
        let detail: Vec<String> = outcomes
            .iter()
            .filter(|o| !o.fits)
            .map(|o| format!("{}: {}", o.node, o.problem.clone().unwrap_or(o.detail.clone())))
            .collect();
        let detail = if detail.is_empty() { "the cluster has no nodes".to_string() } else { detail.join("; ") };
        out.push(Cause::NoCombination { detail });
    }
    out
}

fn row_name(row: &DeviceRow) -> String {
    format!("{}/{}", row.node, row.device)
}
