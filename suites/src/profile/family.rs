//! The guarantee families, each declared once: its key under `guarantees:`, its parameters,
//! every guarantee ID it can publish, which of them a profile's parameters select, and the
//! scenarios that check it. The profile's `guarantee_ids`, the list of all IDs, the "add at
//! least one of …" message, `profiles/README.md`'s table (checked by a test) and the tests'
//! ID lists come from here. Adding a family: its declaration here (with its typed parameters
//! in `model` and their validation in `file`), its scenario and its fidelity rows.

use super::ids::*;
use super::model::{Guarantees, ImpossibleVariant, IsolationMode};

pub struct Family {
    /// The key under `guarantees:` in a profile.
    pub key: &'static str,
    /// The parameters it takes, as written in a profile.
    pub parameters: &'static [&'static str],
    /// Every guarantee ID the family can publish, in report order.
    pub ids: &'static [&'static str],
    /// Which of `ids` a profile publishes.
    pub publishes: Publishes,
    /// The scenarios (`Scenario::name`) whose verdicts are this family's.
    pub scenarios: &'static [&'static str],
}

pub enum Publishes {
    /// Every one of the family's IDs, when the profile has the family.
    All(fn(&Guarantees) -> bool),
    /// Those the profile's parameters select (none when it leaves the family out).
    Selected(fn(&Guarantees) -> Vec<&'static str>),
}

impl Family {
    /// The guarantee IDs `g` publishes through this family.
    pub fn published(&self, g: &Guarantees) -> Vec<&'static str> {
        match self.publishes {
            Publishes::All(present) if present(g) => self.ids.to_vec(),
            Publishes::All(_) => Vec::new(),
            Publishes::Selected(select) => select(g),
        }
    }
}

pub const FAMILIES: &[Family] = &[
    Family {
        key: "allocation",
        parameters: &["withinSeconds"],
        ids: &[CLAIM_COMPATIBLE_ALLOCATED, WORKLOAD_SEES_DEVICES],
        publishes: Publishes::All(|g| g.allocation.is_some()),
        scenarios: &["compatible"],
    },
    Family {
        key: "impossible",
        parameters: &["variants"],
        ids: &[
            CLAIM_IMPOSSIBLE_UNKNOWN_CLASS,
            CLAIM_IMPOSSIBLE_SELECTOR,
            CLAIM_IMPOSSIBLE_COUNT,
            CLAIM_IMPOSSIBLE_CAPACITY,
            CLAIM_IMPOSSIBLE_EXPLAINED,
        ],
        publishes: Publishes::Selected(|g| {
            let Some(impossible) = &g.impossible else { return Vec::new() };
            ImpossibleVariant::ALL
                .into_iter()
                .filter(|v| impossible.variants.contains(v))
                .map(ImpossibleVariant::id)
                .chain([CLAIM_IMPOSSIBLE_EXPLAINED])
                .collect()
        }),
        scenarios: &["impossible"],
    },
    Family {
        key: "isolation",
        parameters: &["mode"],
        ids: &[ISOLATION_EXCLUSIVE, ISOLATION_SHARED],
        publishes: Publishes::Selected(|g| match g.isolation.as_ref().map(|i| i.mode) {
            None => Vec::new(),
            Some(IsolationMode::Exclusive) => vec![ISOLATION_EXCLUSIVE],
            Some(IsolationMode::Shared) => vec![ISOLATION_SHARED],
        }),
        scenarios: &["isolation"],
    },
    Family {
        key: "limits",
        parameters: &["maxDevicesPerClaim"],
        ids: &[LIMITS_MAX_DEVICES_PER_CLAIM],
        publishes: Publishes::All(|g| g.limits.is_some()),
        scenarios: &["limits"],
    },
    Family {
        key: "capacityRecovery",
        parameters: &["withinSeconds"],
        ids: &[CAPACITY_RECOVERED],
        publishes: Publishes::All(|g| g.capacity_recovery.is_some()),
        scenarios: &["exhaustion"],
    },
    Family {
        key: "retention",
        parameters: &[],
        ids: &[
            RETENTION_TEMPLATE_CLAIM_DELETED,
            RETENTION_STANDALONE_CLAIM_DEALLOCATED,
            LIFECYCLE_UNPREPARED,
            LIFECYCLE_CONTAINER_RESTART,
            LIFECYCLE_PREPARED_AND_NEW,
            LIFECYCLE_FORCE_DELETE,
        ],
        publishes: Publishes::All(|g| g.retention.is_some()),
        scenarios: &["lifecycle", "container-restart", "prepared-claim", "force-delete"],
    },
    Family {
        key: "config",
        parameters: &[],
        ids: &[CONFIG_CLASS_AND_CLAIM, CONFIG_PER_REQUEST],
        publishes: Publishes::All(|g| g.config.is_some()),
        scenarios: &["config"],
    },
    Family {
        key: "coexistence",
        parameters: &[],
        ids: &[DRIVERS_COEXIST],
        publishes: Publishes::All(|g| g.coexistence.is_some()),
        scenarios: &["coexistence"],
    },
    Family {
        key: "prioritizedList",
        parameters: &[],
        ids: &[PRIORITIZED_CHOSEN_SUBREQUEST],
        publishes: Publishes::All(|g| g.prioritized_list.is_some()),
        scenarios: &["prioritized-list"],
    },
    Family {
        key: "adminAccess",
        parameters: &[],
        ids: &[ADMIN_ACCESS_IN_USE_DEVICE, ADMIN_ACCESS_NAMESPACE_LABEL],
        publishes: Publishes::All(|g| g.admin_access.is_some()),
        scenarios: &["admin-access"],
    },
    Family {
        key: "partitionable",
        parameters: &["whole"],
        ids: &[PARTITIONABLE_COUNTERS_RESPECTED, PARTITIONABLE_CAPACITY_RESTORED, PARTITIONABLE_PREPARED_PARTITION],
        publishes: Publishes::All(|g| g.partitionable.is_some()),
        scenarios: &["partitionable"],
    },
    Family {
        key: "consumableCapacity",
        parameters: &["capacity", "share"],
        ids: &[CONSUMABLE_SHARED, CONSUMABLE_PREPARED_SHARE],
        publishes: Publishes::All(|g| g.consumable_capacity.is_some()),
        scenarios: &["consumable-capacity"],
    },
    Family {
        key: "bindingConditions",
        parameters: &["withinSeconds"],
        ids: &[BINDING_CONDITIONS_BOUND_WHEN_READY],
        publishes: Publishes::All(|g| g.binding_conditions.is_some()),
        scenarios: &["binding-conditions"],
    },
    Family {
        key: "deviceStatus",
        parameters: &["conditions", "withinSeconds"],
        ids: &[DEVICE_STATUS_REPORTED],
        publishes: Publishes::All(|g| g.device_status.is_some()),
        scenarios: &["device-status"],
    },
    Family {
        key: "deviceTaints",
        parameters: &["evictionWithinSeconds"],
        ids: &[TAINTS_RULE_EVICTS, TAINTS_UNHEALTHY_KEPT_OFF],
        publishes: Publishes::All(|g| g.device_taints.is_some()),
        scenarios: &["device-taints"],
    },
    Family {
        key: "extendedResource",
        parameters: &[],
        ids: &[EXTENDED_RESOURCE_PREPARED, EXTENDED_RESOURCE_CLAIM_DELETED],
        publishes: Publishes::All(|g| g.extended_resource.is_some()),
        scenarios: &["extended-resource"],
    },
    Family {
        key: "resourceHealth",
        parameters: &["withinSeconds"],
        ids: &[HEALTH_POD_STATUS],
        publishes: Publishes::All(|g| g.resource_health.is_some()),
        scenarios: &["resource-health"],
    },
    Family {
        key: "driverRestart",
        parameters: &["maxDowntimeSeconds"],
        ids: &[
            DRIVER_RESTART_WORKLOAD_KEEPS_DEVICES,
            DRIVER_RESTART_NEW_CLAIMS_WORK,
            DRIVER_RESTART_SLICES_KEPT,
            DRIVER_RESTART_NO_LEAKS,
            DRIVER_UPGRADE_ROLLING,
            DRIVER_UPGRADE_FAILED,
        ],
        publishes: Publishes::All(|g| g.driver_restart.is_some()),
        scenarios: &["driver-restart", "driver-upgrade"],
    },
    Family {
        key: "driverOutage",
        parameters: &[],
        ids: &[DRIVER_RESTART_LONG_OUTAGE],
        publishes: Publishes::All(|g| g.driver_outage.is_some()),
        scenarios: &["driver-outage"],
    },
    Family {
        key: "nodeRestart",
        parameters: &[],
        ids: &[NODE_RESTART_DRIVER_RECOVERS],
        publishes: Publishes::All(|g| g.node_restart.is_some()),
        scenarios: &["node-restart"],
    },
    Family {
        key: "nodeReboot",
        parameters: &[],
        ids: &[NODE_REBOOT_WORKLOADS_RESUME],
        publishes: Publishes::All(|g| g.node_reboot.is_some()),
        scenarios: &["node-reboot"],
    },
    Family {
        key: "nodeRemoval",
        parameters: &[],
        ids: &[
            NODE_REMOVAL_SLICES_GONE,
            NODE_REMOVAL_PODS_GONE,
            NODE_REMOVAL_CLAIMS_DEALLOCATED,
            NODE_REMOVAL_CAPACITY_ELSEWHERE,
        ],
        publishes: Publishes::All(|g| g.node_removal.is_some()),
        scenarios: &["node-removal"],
    },
    Family {
        key: "versions",
        parameters: &["kubernetes", "driver"],
        ids: &[VERSIONS_KUBERNETES, VERSIONS_DRIVER],
        publishes: Publishes::Selected(|g| {
            let Some(v) = &g.versions else { return Vec::new() };
            [(v.kubernetes.is_some(), VERSIONS_KUBERNETES), (v.driver.is_some(), VERSIONS_DRIVER)]
                .into_iter()
                .filter_map(|(given, id)| given.then_some(id))
                .collect()
        }),
        scenarios: &["versions"],
    },
];

/// Every profile guarantee ID, family by family.
pub fn all_ids() -> Vec<&'static str> {
    FAMILIES.iter().flat_map(|f| f.ids.iter().copied()).collect()
}

/// The families' keys, for messages: "allocation, impossible, …".
pub fn keys() -> String {
    FAMILIES.iter().map(|f| f.key).collect::<Vec<_>>().join(", ")
}

/// The family a guarantee ID belongs to.
pub fn of(id: &str) -> Option<&'static Family> {
    FAMILIES.iter().find(|f| f.ids.contains(&id))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// The rows of the table in `profiles/README.md`, "Guarantee families and IDs": the key,
    /// the parameters column and the IDs (backticked names with a dot) of each row.
    fn readme_rows() -> Vec<(String, String, BTreeSet<String>)> {
        let readme = include_str!("../../../profiles/README.md");
        let section = readme.split("## Guarantee families and IDs").nth(1).expect("the section exists");
        let section = section.split("\n## ").next().unwrap_or(section);
        section
            .lines()
            .filter(|l| l.starts_with("| `"))
            .map(|row| {
                let cells: Vec<&str> = row.split('|').map(str::trim).collect();
                let ids =
                    cells[3].split('`').skip(1).step_by(2).filter(|t| t.contains('.')).map(str::to_string).collect();
                (cells[1].trim_matches('`').to_string(), cells[2].to_string(), ids)
            })
            .collect()
    }

    #[test]
    fn the_readme_table_lists_the_families_in_order_with_their_parameters_and_ids() {
        let rows = readme_rows();
        let mut keys: Vec<&str> = rows.iter().map(|(k, _, _)| k.as_str()).collect();
        keys.dedup();
        assert_eq!(keys, FAMILIES.iter().map(|f| f.key).collect::<Vec<_>>(), "the table's families");
        for f in FAMILIES {
            let mine: Vec<&(String, String, BTreeSet<String>)> = rows.iter().filter(|(k, _, _)| k == f.key).collect();
            let ids: BTreeSet<String> = mine.iter().flat_map(|(_, _, ids)| ids.iter().cloned()).collect();
            let declared: BTreeSet<String> = f.ids.iter().map(|s| s.to_string()).collect();
            assert_eq!(ids, declared, "the IDs of {} in the table", f.key);
            for p in f.parameters {
                assert!(mine.iter().any(|(_, params, _)| params.contains(p)), "{} names parameter {p}", f.key);
            }
        }
    }

    #[test]
    fn each_family_is_checked_by_its_scenarios_and_every_scenario_id_has_a_family() {
        let scenarios = crate::scenarios::cluster::all();
        for f in FAMILIES {
            for id in f.ids {
                let checked = scenarios.iter().any(|s| f.scenarios.contains(&s.name) && s.guarantees.contains(id));
                assert!(checked, "{id} of {} is recorded by none of its scenarios {:?}", f.key, f.scenarios);
            }
        }
        for s in scenarios {
            for id in s.guarantees {
                let family =
                    of(id).unwrap_or_else(|| panic!("scenario {} records {id}, which no family declares", s.name));
                assert!(
                    family.scenarios.contains(&s.name),
                    "{} does not name scenario {} for {id}",
                    family.key,
                    s.name
                );
            }
        }
    }

    #[test]
    fn ids_are_declared_once() {
        let all = all_ids();
        let unique: BTreeSet<&str> = all.iter().copied().collect();
        assert_eq!(unique.len(), all.len(), "an ID in two families: {all:?}");
    }
}
