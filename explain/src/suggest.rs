//! What would fit instead: another DeviceClass, the request without one of its selectors, a
//! toleration of the taints that keep free devices off, the largest count or capacity that is
//! free now. Every count is of devices the request could take: free, reachable, and passing
//! its own selectors, tolerations and capacity.

use crate::cel::{DeviceInput, Quantity};
use crate::diagnose::{Facts, device_id};
use crate::evaluate::Match;
use crate::model::{Cause, Reason};
use crate::refs::{Ref, find_attribute, references, zero_literal};

/// Free devices usable from some node that pass the class's selectors and `extra`, and that
/// request `r`'s tolerations and capacity allow (a tainted device or one with too little
/// capacity left is no device to suggest).
fn free_matching(
    facts: &Facts<'_>,
    r: usize,
    class: &k8s_openapi::api::resource::v1::DeviceClass,
    extra: &[String],
) -> Vec<usize> {
    let selectors: Vec<String> = class
        .spec
        .as_ref()
        .and_then(|s| s.selectors.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|s| s.cel.as_ref().map(|c| c.expression.clone()))
        .chain(extra.iter().cloned())
        .collect();
    let Ok(compiled) = selectors.iter().map(|s| facts.env.compile(s)).collect::<Result<Vec<_>, _>>() else {
        return Vec::new();
    };
    (0..facts.devices.len())
        .filter(|&d| facts.free_and_reachable(d))
        .filter(|&d| facts.evals[r][d].taint.is_none() && facts.evals[r][d].capacity.is_none())
        .filter(|&d| {
            let pd = &facts.devices[d];
            let input = DeviceInput::of(&pd.slice.spec.driver, pd.device);
            compiled.iter().all(|p| facts.env.matches(p, &input) == Ok(true))
        })
        .collect()
}

fn req_selectors(req: &crate::evaluate::Request<'_>) -> Vec<String> {
    req.selector_expressions()
}

fn request_index(facts: &Facts<'_>, name: &str) -> Option<usize> {
    facts.requests.iter().position(|r| r.name == name)
}

pub fn suggestions(facts: &Facts<'_>, causes: &[Cause]) -> Vec<String> {
    let mut out = Vec::new();
    for cause in causes {
        match cause {
            Cause::UnknownClass { request, class } => {
                let Some(r) = request_index(facts, request) else { continue };
                let extra = req_selectors(&facts.requests[r]);
                let mut known: Vec<String> = Vec::new();
                for c in &facts.state.classes {
                    let n = free_matching(facts, r, c, &extra).len();
                    known.push(format!(
                        "{} ({n} free matching device(s))",
                        c.metadata.name.as_deref().unwrap_or_default()
                    ));
                }
                if known.is_empty() {
                    out.push(format!(
                        "request {request}: create the DeviceClass {class}; the cluster has no DeviceClass at all"
                    ));
                } else {
                    out.push(format!(
                        "request {request}: create the DeviceClass {class} or use an existing one: {}",
                        known.join(", ")
                    ));
                }
            }
            Cause::NoDevicesPublished { request } => out.push(format!(
                "request {request}: check that the DRA driver runs on the nodes and publishes its devices (kubectl get resourceslices)"
            )),
            Cause::NoCompatibleDevice { request, .. } | Cause::AllocatedElsewhere { request, .. } => {
                toleration(facts, request, &mut out);
                other_classes(facts, request, &mut out);
                without_selector(facts, request, &mut out);
                largest_capacity(facts, request, &mut out);
            }
            Cause::CountAboveInventory { request, compatible, .. }
            | Cause::NotEnoughOnOneNode { request, most: compatible, .. } => {
                let Some(r) = request_index(facts, request) else { continue };
                let (node, most) = facts
                    .reach
                    .iter()
                    .map(|(n, v)| (n.clone(), facts.free_compatible_on(r, v)))
                    .max_by_key(|(_, c)| *c)
                    .unwrap_or_default();
                out.push(format!(
                    "request {request}: the largest count that fits now is {most}{} ({compatible} compatible in the cluster)",
                    if most > 0 { format!(" (on {node})") } else { String::new() }
                ));
            }
            Cause::SelectorError { request, device, error } => {
                if let Some(guard) = guard(facts, request, device) {
                    out.push(guard);
                } else if error.contains("no such key") {
                    out.push(format!(
                        "request {request}: guard the attribute lookup with has(...) (e.g. `has(device.attributes[\"domain\"].name) && ...`), as devices without it make the selector fail rather than not match"
                    ));
                }
            }
            Cause::Unevaluable { request, feature, .. } => out.push(format!(
                "request {request}: read the scheduler's events on the pod for this selector's verdict, or write it without {feature} to have dracheck explain it"
            )),
            Cause::ConstraintUnmet { claim, constraint, attribute, .. } => {
                let how = if constraint == "matchAttribute" {
                    "free devices so that one node has enough with one value, or pick the value with a selector"
                } else {
                    "free devices with other values on one node"
                };
                out.push(format!("claim {claim}: {how}, or drop the {constraint} {attribute} constraint"));
            }
            Cause::Unreachable { request, .. } => {
                out.push(format!("request {request}: the free compatible devices are on nodes the pod cannot use or in pools being updated; see the node table"));
            }
            Cause::NoCombination { .. } => {
                out.push(
                    "relax the claim's constraints (matchAttribute/distinctAttribute) or split the requests".into(),
                );
            }
        }
    }
    out.dedup();
    out
}

/// For a selector that fails on a device because it looks up an attribute or capacity the
/// device does not have: the guard for exactly those lookups, as `has(...)` and as optional
/// chaining. Either makes the selector false on such devices instead of failing the
/// scheduling attempt.
fn guard(facts: &Facts<'_>, request: &str, device: &str) -> Option<String> {
    let r = request_index(facts, request)?;
    let d = (0..facts.devices.len()).find(|&d| device_id(&facts.devices[d]) == device)?;
    let Match::Error(Reason::SelectorError { source, index, expression, .. }) = &facts.evals[r][d].selectors else {
        return None;
    };
    let pd = &facts.devices[d];
    let missing: Vec<Ref> =
        references(expression).into_iter().filter(|rf| !rf.present(&pd.slice.spec.driver, pd.device)).collect();
    if missing.is_empty() {
        return None;
    }
    let lacks: Vec<String> = missing.iter().map(Ref::qualified).collect();
    let has: Vec<String> = missing.iter().map(|rf| format!("has({})", rf.lookup())).collect();
    let optional: Vec<String> =
        missing.iter().map(|rf| format!("`{}` for `{}`", rf.optional(&zero_value(facts, rf)), rf.lookup())).collect();
    Some(format!(
        "request {request}: {source} selector #{index} fails on {device}, which has no {}; guard the lookup: `{} && ({expression})`, or write {}",
        lacks.join(" and no "),
        has.join(" && "),
        optional.join(" and ")
    ))
}

/// A value for `orValue(...)` of the type the devices that have the attribute give it.
fn zero_value(facts: &Facts<'_>, rf: &Ref) -> String {
    match rf {
        Ref::Capacity { .. } => "quantity(\"0\")".into(),
        Ref::Attribute { domain, name } => facts
            .devices
            .iter()
            .find_map(|pd| find_attribute(&pd.slice.spec.driver, pd.device, domain, name))
            .map_or("<default>".into(), |a| zero_literal(a).to_string()),
        Ref::Driver => "\"\"".into(),
    }
}

/// Other classes whose devices (with the request's own selectors) are free in number.
fn other_classes(facts: &Facts<'_>, request: &str, out: &mut Vec<String>) {
    let Some(r) = request_index(facts, request) else { return };
    let req = &facts.requests[r];
    let extra = req_selectors(req);
    for c in &facts.state.classes {
        let name = c.metadata.name.as_deref().unwrap_or_default();
        if name == req.class_name {
            continue;
        }
        let n = free_matching(facts, r, c, &extra).len();
        if n >= req.count.max(1) {
            out.push(format!(
                "request {request}: DeviceClass {name} would match {n} free device(s) with the request's selectors"
            ));
        }
    }
}

/// Free devices that pass the request's selectors and capacity but carry a taint it does not
/// tolerate: where they are enough, the tolerations that would let it take them (the taints'
/// owner decides whether the workload may run there; a NoExecute taint also evicts).
fn toleration(facts: &Facts<'_>, request: &str, out: &mut Vec<String>) {
    let Some(r) = request_index(facts, request) else { return };
    let req = &facts.requests[r];
    let tainted: Vec<(usize, &str)> = (0..facts.devices.len())
        .filter(|&d| facts.free_and_reachable(d))
        .filter_map(|d| {
            let e = &facts.evals[r][d];
            (e.selectors == Match::Yes && e.capacity.is_none()).then_some(())?;
            e.taint.as_deref().map(|t| (d, t))
        })
        .collect();
    if tainted.is_empty() || tainted.len() < req.count.max(1) {
        return;
    }
    let mut taints: Vec<&str> = tainted.iter().map(|(_, t)| *t).collect();
    taints.sort_unstable();
    taints.dedup();
    let tolerations: Vec<String> = taints
        .iter()
        .map(|t| {
            let (key_value, effect) = t.rsplit_once(':').unwrap_or((t, ""));
            let key = key_value.split_once('=').map_or(key_value, |(k, _)| k);
            format!("{{key: \"{key}\", operator: Exists, effect: {effect}}}")
        })
        .collect();
    out.push(format!(
        "request {request}: {} free device(s) match but carry taints it does not tolerate ({}); if the workload may use \
         such devices, add to the request `tolerations: [{}]`",
        tainted.len(),
        taints.join(", "),
        tolerations.join(", ")
    ));
}

/// The request without one of its selectors, when that frees enough devices.
fn without_selector(facts: &Facts<'_>, request: &str, out: &mut Vec<String>) {
    let Some(r) = request_index(facts, request) else { return };
    let req = &facts.requests[r];
    let Some(class) = req.class else { return };
    let all = req_selectors(req);
    if all.is_empty() {
        return;
    }
    for i in 0..all.len() {
        let rest: Vec<String> = all.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, s)| s.clone()).collect();
        let n = free_matching(facts, r, class, &rest).len();
        if n >= req.count.max(1) {
            out.push(format!("request {request}: without selector #{i} `{}`, {n} free device(s) would match", all[i]));
        }
    }
}

/// For capacities the failing selectors refer to: the largest value among free devices of the
/// class.
fn largest_capacity(facts: &Facts<'_>, request: &str, out: &mut Vec<String>) {
    let Some(r) = request_index(facts, request) else { return };
    let req = &facts.requests[r];
    let Some(class) = req.class else { return };
    let mut names: Vec<(String, String)> = Vec::new();
    for d in 0..facts.devices.len() {
        if let Match::No(Reason::Selector { expression, .. }) = &facts.evals[r][d].selectors {
            for rf in references(expression) {
                if let Ref::Capacity { domain, name } = rf
                    && !names.contains(&(domain.clone(), name.clone()))
                {
                    names.push((domain, name));
                }
            }
        }
    }
    for (name, requested) in &req.capacity {
        let _ = requested;
        let (domain, id) = name.split_once('/').unwrap_or(("", name));
        names.push((domain.to_string(), id.to_string()));
    }
    // Among the devices the request's other selectors allow: the largest value of a device it
    // could not take anyway suggests nothing.
    let own: Vec<String> = req_selectors(req)
        .into_iter()
        .filter(|s| !references(s).iter().any(|rf| matches!(rf, Ref::Capacity { .. })))
        .collect();
    let candidates = free_matching(facts, r, class, &own);
    for (domain, name) in names {
        let mut best: Option<(Quantity, usize)> = None;
        for &d in &candidates {
            let pd = &facts.devices[d];
            let driver = pd.slice.spec.driver.as_str();
            let caps = pd.device.capacity.as_ref();
            let key = if domain == driver || domain.is_empty() { name.clone() } else { format!("{domain}/{name}") };
            let value = caps.and_then(|c| c.get(&key).or_else(|| c.get(&format!("{domain}/{name}"))));
            let Some(q) = value.and_then(|v| Quantity::parse(&v.value.0).ok()) else { continue };
            if best.as_ref().is_none_or(|(b, _)| q > *b) {
                best = Some((q, d));
            }
        }
        if let Some((q, d)) = best {
            out.push(format!(
                "request {request}: the largest free {name} among devices of class {} is {q} ({} on {})",
                req.class_name,
                device_id(&facts.devices[d]),
                crate::pools::placement(facts.devices[d].slice)
            ));
        }
    }
}
