//! The explanation as text: a summary line, the causes, per request a table per node of why
//! each device is ruled out, and suggestions.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::model::{Cause, DeviceRow, Explanation, NodeOutcome, Summary};

pub fn summary_line(s: &Summary) -> String {
    format!(
        "{} devices, {} free, {} compatible, {} free and compatible, needed {}",
        s.devices, s.free, s.compatible, s.free_compatible, s.needed
    )
}

fn node_header(node: &str, outcome: Option<&NodeOutcome>) -> String {
    match outcome {
        Some(NodeOutcome { problem: Some(p), .. }) => format!("{node}: ruled out: {p}"),
        Some(NodeOutcome { fits: true, detail, .. }) => format!("{node}: fits ({detail})"),
        Some(NodeOutcome { detail, .. }) => format!("{node}: no fit: {detail}"),
        None => format!("{node}:"),
    }
}

fn table(out: &mut String, rows: &[&DeviceRow]) {
    let why = |r: &DeviceRow| r.ruled_out.as_ref().map_or("free and compatible".to_string(), |x| x.describe());
    let w_dev = rows.iter().map(|r| r.device.len()).max().unwrap_or(0).max("DEVICE".len());
    let w_pool = rows.iter().map(|r| format!("{}/{}", r.driver, r.pool).len()).max().unwrap_or(0).max("POOL".len());
    let _ = writeln!(out, "      {:w_dev$}  {:w_pool$}  WHY", "DEVICE", "POOL");
    for r in rows {
        let _ = writeln!(out, "      {:w_dev$}  {:w_pool$}  {}", r.device, format!("{}/{}", r.driver, r.pool), why(r));
    }
}

pub fn text(e: &Explanation) -> String {
    let mut out = String::new();
    let verdict = if e.fits {
        if e.claims.iter().all(|c| c.allocated.is_some()) { "allocated" } else { "a device set fits" }
    } else if e.causes.iter().any(|c| matches!(c, Cause::Unevaluable { .. })) {
        // Without the selector's result, "no device set fits" would be a guess.
        "no verdict: dracheck cannot evaluate a selector (see why)"
    } else if e.causes.iter().any(|c| matches!(c, Cause::SelectorError { .. })) {
        // Some node may have a device set; the error fails the attempt all the same.
        "never scheduled: a selector error fails the scheduling attempt (SchedulerError)"
    } else {
        "no device set fits"
    };
    let _ = writeln!(out, "{}: {verdict}", e.subject);
    if !e.scheduling_gates.is_empty() {
        let _ = writeln!(
            out,
            "held: the pod has the scheduling gates {}; the scheduler does not try it until whoever added them \
             removes them (`kubectl get pod -o jsonpath='{{.spec.schedulingGates}}'`), so nothing is allocated yet",
            e.scheduling_gates.join(", ")
        );
    }
    let _ = writeln!(out, "{}", summary_line(&e.summary));
    if !e.causes.is_empty() {
        let _ = writeln!(out, "\nwhy:");
        for c in &e.causes {
            let _ = writeln!(out, "  - {}", c.describe());
        }
    }
    let outcomes: BTreeMap<&str, &NodeOutcome> = e.nodes.iter().map(|n| (n.node.as_str(), n)).collect();
    for c in &e.claims {
        let _ = writeln!(out, "\nclaim {}", c.claim);
        if let Some(devices) = &c.allocated {
            let _ = writeln!(out, "  allocated: {}", devices.join(", "));
        }
        for r in &c.requests {
            let count = if r.mode == "All" { "all devices".to_string() } else { format!("count {}", r.summary.needed) };
            let _ = writeln!(out, "  request {} (class {}, {count}): {}", r.name, r.class, summary_line(&r.summary));
            if !r.class_exists {
                let _ = writeln!(out, "    DeviceClass {} does not exist", r.class);
                continue;
            }
            let mut by_node: BTreeMap<&str, Vec<&DeviceRow>> = BTreeMap::new();
            for row in &r.devices {
                by_node.entry(row.node.as_str()).or_default().push(row);
            }
            for (node, rows) in &by_node {
                let _ = writeln!(out, "    {}", node_header(node, outcomes.get(node).copied()));
                table(&mut out, rows);
            }
        }
    }
    let quiet: Vec<&NodeOutcome> = e
        .nodes
        .iter()
        .filter(|n| !e.claims.iter().flat_map(|c| &c.requests).flat_map(|r| &r.devices).any(|d| d.node == n.node))
        .collect();
    if !quiet.is_empty() && e.claims.iter().any(|c| !c.requests.is_empty()) {
        let _ = writeln!(out, "\nnodes without devices of these requests:");
        for n in quiet {
            let _ = writeln!(out, "  {}", node_header(&n.node, Some(n)));
        }
    }
    if !e.suggestions.is_empty() {
        let _ = writeln!(out, "\nsuggestions:");
        for s in &e.suggestions {
            let _ = writeln!(out, "  - {s}");
        }
    }
    out
}
