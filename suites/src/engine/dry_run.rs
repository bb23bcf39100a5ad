//! `conformance --dry-run`: the plan of a run without a cluster. Per driver contract and per
//! profile, each scenario with the guarantees it would check (after `--only`/`--skip` and
//! the profile's families), the node role it is pinned to, or why the target would skip it.
//! The skip reasons are the run's own (`Abilities::cannot`, the plugin tier's), so the plan
//! says what the run will.

use std::fmt::Write as _;

use super::runner::{Plan, driver_selected, roles_of, selected};
use super::target::Abilities;
use crate::adapters::Adapter;

/// One scenario of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub scenario: &'static str,
    pub guarantees: Vec<&'static str>,
    /// `None`: it runs; otherwise why the target skips it.
    pub skipped: Option<&'static str>,
}

/// The driver-level steps: the plugin tier plays kubelet against a driver the suite can start
/// (`adapter.spec`); of one it cannot, only what it published is read, where a host
/// inventory says what that should be.
pub fn driver_steps(plan: &Plan, abilities: Abilities, adapter: &Adapter) -> Vec<Step> {
    driver_selected(plan)
        .into_iter()
        .map(|(s, ids)| {
            let skipped = crate::scenarios::plugin::unreachable(s, adapter, abilities).or(abilities.cannot(s.disrupts));
            Step { scenario: s.name, guarantees: ids, skipped }
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
                .map(|(s, ids)| Step { scenario: s.name, guarantees: ids, skipped: abilities.cannot(s.disrupts) })
                .collect()
        })
        .collect()
}

/// The plan as text, for people.
pub fn describe(plan: &Plan, abilities: Abilities, adapter: &Adapter) -> String {
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
    let driver = driver_steps(plan, abilities, adapter);
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
