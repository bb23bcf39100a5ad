//! Every guarantee the suite can record, as `cargo xtask list` shows it: its ID, what it
//! holds, where it comes from (a profile family, or the driver contract checked once per
//! driver), the scenario that checks it and what that scenario needs of the target beyond a
//! cluster and a driver. Built from the scenarios' own declarations, so it cannot drift.

use serde::Serialize;

use crate::engine::{Disruption, Scenario, Tier};
use crate::profile::family;
use crate::scenarios;

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Entry {
    pub id: &'static str,
    pub meaning: &'static str,
    /// `must` (the DRA contract requires it) or `should` (advice), with why for a `should`.
    pub level: dracheck_results::levels::Level,
    /// The profile family (`guarantees:` key) that publishes it; `None`: the driver contract
    /// (plugin tier), checked for every driver whatever its profiles.
    pub family: Option<&'static str>,
    pub scenario: &'static str,
    /// What the scenario needs beyond a cluster and a driver; empty when nothing.
    pub needs: Vec<&'static str>,
}

/// What a scenario needs of the target, for people: the reasons it is skipped elsewhere.
pub fn needs(scenario: &Scenario) -> Vec<&'static str> {
    let mut needs = Vec::new();
    if let Some(need) = scenarios::plugin::installed_driver_need(scenario) {
        needs.push(need);
    } else if scenario.tier == Tier::Plugin {
        needs.push("the driver's program, which the suite starts on a node of its own");
    }
    needs.extend(match scenario.disrupts {
        Disruption::None => None,
        Disruption::RestartsDriver => Some("restarting the driver"),
        Disruption::StopsDriver => Some("the driver's processes in the suite's hands (not a DaemonSet)"),
        Disruption::ControlsNodes => Some("control over the nodes (kubelet restarts, reboots, removal)"),
        Disruption::AddsDriver => Some("a second driver on a node the suite started"),
        Disruption::UpgradesDriver => Some("a second instance of the driver beside its own (a rolling update)"),
    });
    needs
}

/// Every guarantee, driver contract first, then the profile families, each once, in run order.
pub fn entries() -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    for scenario in scenarios::driver_scenarios().into_iter().chain(scenarios::cluster_scenarios()) {
        for &id in scenario.guarantees {
            if out.iter().any(|e| e.id == id) {
                continue;
            }
            out.push(Entry {
                id,
                meaning: dracheck_results::ids::meaning(id).unwrap_or(""),
                level: dracheck_results::levels::Level::of(id),
                family: family::of(id).map(|f| f.key),
                scenario: scenario.name,
                needs: needs(scenario),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_guarantee_has_a_meaning_and_every_meaning_a_guarantee() {
        let listed = entries();
        let silent: Vec<_> = listed.iter().filter(|e| e.meaning.is_empty()).map(|e| e.id).collect();
        assert_eq!(silent, Vec::<&str>::new(), "add these to dracheck_results::ids::MEANINGS");
        let orphans: Vec<_> = dracheck_results::ids::MEANINGS
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| !listed.iter().any(|e| e.id == *id))
            .collect();
        assert_eq!(orphans, Vec::<&str>::new(), "meanings of IDs no scenario records");
    }

    #[test]
    fn every_family_id_is_listed_under_its_family() {
        let listed = entries();
        for id in family::all_ids() {
            let entry = listed.iter().find(|e| e.id == id).unwrap_or_else(|| panic!("{id} is recorded by no scenario"));
            assert_eq!(entry.family, family::of(id).map(|f| f.key), "{id}");
        }
        let plugin: Vec<_> = listed.iter().filter(|e| e.family.is_none()).map(|e| e.id).collect();
        assert!(plugin.iter().all(|id| id.starts_with("plugin.")), "{plugin:?}");
    }
}
