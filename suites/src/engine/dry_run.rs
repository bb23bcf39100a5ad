//! `conformance --dry-run`: the plan of a run without a cluster. Per driver contract and per
//! profile, each scenario with the guarantees it would check (after `--only`/`--skip` and
//! the profile's families), the node role it is pinned to, or why the target would skip it.
//! The skip reasons are the run's own (`Abilities::cannot`, the plugin tier's), so the plan
//! says what the run will.

use std::fmt::Write as _;

use super::runner::{Plan, roles_of, selected};
use super::scenario::{Scenario, Tier};
use super::target::Abilities;
use crate::scenarios::plugin::harness::NEEDS_BINARY;

/// One scenario of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub scenario: &'static str,
    pub guarantees: Vec<&'static str>,
    /// `None`: it runs; otherwise why the target skips it.
    pub skipped: Option<&'static str>,
}

/// `driver_startable`: the suite can start the driver's program (the plugin tier plays
/// kubelet against it); an installed driver has only its slices read.
pub fn driver_steps(plan: &Plan, abilities: Abilities, driver_startable: bool) -> Vec<Step> {
    plan.driver_scenarios
        .iter()
        .filter_map(|s| {
            let ids: Vec<_> = s.applicable(None).into_iter().filter(|id| plan.filter.selects(id)).collect();
            (!ids.is_empty()).then(|| Step {
                scenario: s.name,
                guarantees: ids,
                skipped: skip(s, abilities, driver_startable),
            })
        })
        .collect()
}

/// The steps of each profile, in run order.
pub fn profile_steps(plan: &Plan, abilities: Abilities) -> Vec<Vec<Step>> {
    plan.profiles
        .iter()
        .map(|(_, profile)| {
            selected(plan, profile)
                .into_iter()
                .map(|(s, ids)| Step { scenario: s.name, guarantees: ids, skipped: skip(s, abilities, true) })
                .collect()
        })
        .collect()
}

fn skip(s: &Scenario, abilities: Abilities, driver_startable: bool) -> Option<&'static str> {
    // An installed driver's slices are still read by the slices scenario.
    let slices_only = std::ptr::eq(s, &crate::scenarios::plugin::slices::SCENARIO);
    if s.tier == Tier::Plugin && !driver_startable && !slices_only {
        return Some(NEEDS_BINARY);
    }
    abilities.cannot(s.disrupts)
}

/// The plan as text, for people.
pub fn describe(plan: &Plan, abilities: Abilities, driver_startable: bool) -> String {
    let mut out = String::new();
    let write_steps = |out: &mut String, steps: &[Step]| {
        for step in steps {
            let verdict = if step.skipped.is_some() { "skip" } else { "run " };
            let _ = writeln!(out, "  {verdict}  {:<26} {}", step.scenario, step.guarantees.join(", "));
            if let Some(why) = step.skipped {
                let _ = writeln!(out, "        {:<26} {why}", "");
            }
        }
    };
    let driver = driver_steps(plan, abilities, driver_startable);
    let _ = writeln!(out, "driver contract (plugin tier): {} scenario(s)", driver.len());
    write_steps(&mut out, &driver);
    for ((path, profile), steps) in plan.profiles.iter().zip(profile_steps(plan, abilities)) {
        let roles = roles_of(plan, profile);
        let _ = writeln!(
            out,
            "profile {} ({}), class {}: {} scenario(s) on {} node role(s) ({})",
            profile.metadata.name,
            path.display(),
            profile.class_name(),
            steps.len(),
            roles.len(),
            roles.iter().map(|r| format!("{r:?}")).collect::<Vec<_>>().join(", ")
        );
        write_steps(&mut out, &steps);
    }
    out.push_str(
        "A run may still skip single checks for what only the target shows (a CDI dir it cannot read, an \
         API the cluster does not serve); its report names each reason.\n",
    );
    out
}
