//! The migration gate: may cluster B replace cluster A? Guarantees that held on A and not on B
//! are regressions; and because the same profile name does not prove the same hardware, what
//! each profile's claims were actually given is compared attribute by attribute.

use std::collections::{BTreeMap, BTreeSet};

use dracheck_results::filter::glob;
use dracheck_results::{AllocatedDevice, GuaranteeResult, RunResult, Verdict};

use crate::view;

/// Attributes that name one device rather than describe it: they differ on any two clusters.
const IDENTITY_ATTRIBUTES: &[&str] = &["uuid", "index", "minor", "pciBusID", "serial", "pcieRoot"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// `profile/id`, or `driver/id` for the driver contract.
    pub label: String,
    pub a: Option<(Verdict, String)>,
    pub b: Option<(Verdict, String)>,
    /// Allowed by `--allow`.
    pub allowed: bool,
}

/// One attribute (or capacity, or the driver) whose values differ between the devices a
/// profile's claims got on A and on B.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HardwareDiff {
    pub profile: String,
    /// `driver`, `attribute model`, `capacity memory`.
    pub what: String,
    pub a: BTreeSet<String>,
    pub b: BTreeSet<String>,
    pub allowed: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Globs over guarantee labels (`profile/id`) or IDs whose regressions do not gate.
    pub allow: Vec<String>,
    /// Globs over profile names whose hardware may differ.
    pub allow_hardware: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    pub regressions: Vec<Change>,
    pub new_passes: Vec<Change>,
    pub changed_skips: Vec<Change>,
    pub still_failing: Vec<Change>,
    pub hardware: Vec<HardwareDiff>,
    /// Profiles whose claims got nothing on one side, so hardware could not be compared.
    pub hardware_unknown: Vec<String>,
}

impl Comparison {
    /// Whether B may replace A: no regression and no hardware difference that was not allowed.
    pub fn gate_passes(&self) -> bool {
        self.regressions.iter().all(|c| c.allowed) && self.hardware.iter().all(|h| h.allowed)
    }
}

fn verdicts(r: &RunResult) -> BTreeMap<String, (Verdict, String)> {
    view::sections(r)
        .iter()
        .flat_map(|s| {
            s.guarantees
                .iter()
                .map(|g: &GuaranteeResult| (format!("{}/{}", s.key, g.id), (g.verdict, g.reason.clone())))
        })
        .collect()
}

pub fn compare(a: &RunResult, b: &RunResult, opts: &Options) -> Comparison {
    let (va, vb) = (verdicts(a), verdicts(b));
    let labels: BTreeSet<&String> = va.keys().chain(vb.keys()).collect();
    let mut out = Comparison {
        regressions: vec![],
        new_passes: vec![],
        changed_skips: vec![],
        still_failing: vec![],
        hardware: vec![],
        hardware_unknown: vec![],
    };
    for label in labels {
        let (x, y) = (va.get(label).cloned(), vb.get(label).cloned());
        let id = label.split_once('/').map_or(label.as_str(), |(_, id)| id);
        let allowed = opts.allow.iter().any(|g| glob(g, label) || glob(g, id));
        let change = Change { label: label.clone(), a: x.clone(), b: y.clone(), allowed };
        let (vx, vy) = (x.as_ref().map(|v| v.0), y.as_ref().map(|v| v.0));
        match (vx, vy) {
            (Some(Verdict::Pass), Some(Verdict::Pass)) => {}
            (Some(Verdict::Pass), _) => out.regressions.push(change),
            (_, Some(Verdict::Pass)) => out.new_passes.push(change),
            (Some(Verdict::Fail), Some(Verdict::Fail)) => out.still_failing.push(change),
            (Some(Verdict::Skip), Some(Verdict::Skip)) if x.as_ref().map(|v| &v.1) == y.as_ref().map(|v| &v.1) => {}
            _ => out.changed_skips.push(change),
        }
    }
    for pa in &a.profiles {
        let Some(pb) = b.profiles.iter().find(|p| p.name == pa.name) else { continue };
        if pa.allocated_devices.is_empty() || pb.allocated_devices.is_empty() {
            out.hardware_unknown.push(pa.name.clone());
            continue;
        }
        let allowed = opts.allow_hardware.iter().any(|g| glob(g, &pa.name));
        let (sa, sb) = (shape(&pa.allocated_devices), shape(&pb.allocated_devices));
        let keys: BTreeSet<&String> = sa.keys().chain(sb.keys()).collect();
        for what in keys {
            let (x, y) = (sa.get(what).cloned().unwrap_or_default(), sb.get(what).cloned().unwrap_or_default());
            if x != y {
                out.hardware.push(HardwareDiff { profile: pa.name.clone(), what: what.clone(), a: x, b: y, allowed });
            }
        }
    }
    out
}

/// What the devices were, by property: `attribute model` → {a100, l4}. Absent on a device
/// counts as the value `(none)`, so "some have it, some do not" is a difference too.
fn shape(devices: &[AllocatedDevice]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let attr_names: BTreeSet<&String> = devices.iter().flat_map(|d| d.attributes.keys()).collect();
    let cap_names: BTreeSet<&String> = devices.iter().flat_map(|d| d.capacity.keys()).collect();
    for d in devices {
        out.entry("driver".into()).or_default().insert(d.driver.clone());
        for name in attr_names.iter().filter(|n| !is_identity(n)) {
            let v = d.attributes.get(*name).cloned().unwrap_or_else(|| "(none)".into());
            out.entry(format!("attribute {name}")).or_default().insert(v);
        }
        for name in &cap_names {
            let v = d.capacity.get(*name).cloned().unwrap_or_else(|| "(none)".into());
            out.entry(format!("capacity {name}")).or_default().insert(v);
        }
    }
    out
}

fn is_identity(name: &str) -> bool {
    let bare = name.rsplit('/').next().unwrap_or(name);
    IDENTITY_ATTRIBUTES.contains(&bare)
}

/// The comparison for tools (`compare -o json`): the gate's verdict, then each list as the
/// text shows it, a side as `{verdict, reason}` or `null` where it was not checked.
pub fn json(a: &RunResult, b: &RunResult, c: &Comparison) -> serde_json::Value {
    use serde_json::json;
    let side = |v: &Option<(Verdict, String)>| match v {
        Some((v, reason)) => json!({ "verdict": v, "reason": reason }),
        None => serde_json::Value::Null,
    };
    let changes = |items: &[Change]| {
        items
            .iter()
            .map(|ch| json!({ "label": ch.label, "a": side(&ch.a), "b": side(&ch.b), "allowed": ch.allowed }))
            .collect::<Vec<_>>()
    };
    let hardware: Vec<serde_json::Value> = c
        .hardware
        .iter()
        .map(|h| json!({ "profile": h.profile, "what": h.what, "a": h.a, "b": h.b, "allowed": h.allowed }))
        .collect();
    json!({
        "a": view::headline(a),
        "b": view::headline(b),
        "gatePasses": c.gate_passes(),
        "regressions": changes(&c.regressions),
        "newPasses": changes(&c.new_passes),
        "changedSkips": changes(&c.changed_skips),
        "stillFailing": changes(&c.still_failing),
        "hardware": hardware,
        "hardwareUnknown": c.hardware_unknown,
    })
}

/// The comparison for a person: what changed and the gate's verdict.
pub fn render(a: &RunResult, b: &RunResult, c: &Comparison) -> String {
    let side = |v: &Option<(Verdict, String)>| match v {
        Some((v, reason)) => format!("{v}: {reason}"),
        None => "not checked".into(),
    };
    let mut out = format!("A: {}\nB: {}\n", view::headline(a), view::headline(b));
    let list = |title: &str, items: &[Change], out: &mut String| {
        if items.is_empty() {
            return;
        }
        out.push_str(&format!("\n{title} ({}):\n", items.len()));
        for ch in items {
            let allowed = if ch.allowed { " [allowed]" } else { "" };
            out.push_str(&format!("  {}{allowed}\n    A {}\n    B {}\n", ch.label, side(&ch.a), side(&ch.b)));
        }
    };
    list("Regressions: held on A, not on B", &c.regressions, &mut out);
    list("New passes on B", &c.new_passes, &mut out);
    list("Changed skips", &c.changed_skips, &mut out);
    list("Failing on both", &c.still_failing, &mut out);
    if !c.hardware.is_empty() {
        out.push_str(&format!("\nHardware differences: same profile, different devices ({}):\n", c.hardware.len()));
        for h in &c.hardware {
            let allowed = if h.allowed { " [allowed]" } else { "" };
            let set = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
            out.push_str(&format!("  {} {}{allowed}: A {{{}}} B {{{}}}\n", h.profile, h.what, set(&h.a), set(&h.b)));
        }
    }
    for p in &c.hardware_unknown {
        out.push_str(&format!("\nHardware of profile {p} not compared: its claims got no devices on one side.\n"));
    }
    out.push_str(if c.gate_passes() {
        "\nGate: PASS, B may replace A.\n"
    } else {
        "\nGate: FAIL, B may not replace A (allow known differences with --allow ID-GLOB or --allow-hardware PROFILE-GLOB).\n"
    });
    out
}
