//! README's `explain` section names every `kind` the JSON can carry, as the code spells it:
//! the causes and the reasons a device is ruled out.

use dracheck_explain::{Cause, Reason};

/// One of each cause; the match below fails to compile when a cause is added and not here.
fn every_cause() -> Vec<Cause> {
    let s = String::new;
    let all = vec![
        Cause::UnknownClass { request: s(), class: s() },
        Cause::NoDevicesPublished { request: s() },
        Cause::NoCompatibleDevice { request: s(), misses: vec![] },
        Cause::CountAboveInventory { request: s(), needed: 0, compatible: 0 },
        Cause::AllocatedElsewhere { request: s(), compatible: 0, holders: vec![], free_misses: vec![] },
        Cause::NotEnoughOnOneNode { request: s(), needed: 0, most: 0, node: s(), in_all: false },
        Cause::Unreachable { request: s(), reasons: vec![] },
        Cause::SelectorError { request: s(), device: s(), error: s() },
        Cause::Unevaluable { request: s(), source: s(), index: 0, expression: s(), feature: s() },
        Cause::ConstraintUnmet { claim: s(), constraint: s(), attribute: s(), nodes: vec![] },
        Cause::NoCombination { detail: s() },
    ];
    for c in &all {
        match c {
            Cause::UnknownClass { .. }
            | Cause::NoDevicesPublished { .. }
            | Cause::NoCompatibleDevice { .. }
            | Cause::CountAboveInventory { .. }
            | Cause::AllocatedElsewhere { .. }
            | Cause::NotEnoughOnOneNode { .. }
            | Cause::Unreachable { .. }
            | Cause::SelectorError { .. }
            | Cause::Unevaluable { .. }
            | Cause::ConstraintUnmet { .. }
            | Cause::NoCombination { .. } => {}
        }
    }
    all
}

/// One of each reason a device is ruled out, as [`every_cause`].
fn every_reason() -> Vec<Reason> {
    let s = String::new;
    let all = vec![
        Reason::Pool { message: s() },
        Reason::Allocated { by: s(), compatible: false },
        Reason::Selector { source: s(), index: 0, expression: s(), actual: s() },
        Reason::SelectorError { source: s(), index: 0, expression: s(), error: s() },
        Reason::Unevaluable { source: s(), index: 0, expression: s(), feature: s() },
        Reason::Taint { taint: s() },
        Reason::Capacity { name: s(), requested: s(), available: s() },
        Reason::Node { message: s() },
    ];
    for r in &all {
        match r {
            Reason::Pool { .. }
            | Reason::Allocated { .. }
            | Reason::Selector { .. }
            | Reason::SelectorError { .. }
            | Reason::Unevaluable { .. }
            | Reason::Taint { .. }
            | Reason::Capacity { .. }
            | Reason::Node { .. } => {}
        }
    }
    all
}

fn kinds<T: serde::Serialize>(all: &[T]) -> String {
    all.iter()
        .map(|v| format!("`{}`", serde_json::to_value(v).unwrap()["kind"].as_str().unwrap()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// README's explain section names every `kind` the JSON can carry, as the code spells it.
#[test]
fn the_readme_names_every_cause_and_reason_kind() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let line = format!("the causes are {}; the reasons {}.", kinds(&every_cause()), kinds(&every_reason()));
    let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains(&line), "README.md's explain section must say (wrapped as you like):\n{line}");
}
