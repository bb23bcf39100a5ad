//! Verdict fidelity: which guarantees each mock fault switch breaks. The fidelity test runs
//! the whole suite against the mock with each fault and compares with this table; the mock
//! driver's README shows the same table, generated from here.

use std::collections::BTreeSet;

use crate::profile::ids::*;
use crate::result::{RunResult, Verdict};

pub struct FaultCase {
    /// The `--fault` switch.
    pub fault: &'static str,
    pub misbehaviour: &'static str,
    /// Must fail (groups of IDs, flattened).
    pub breaks: &'static [&'static [&'static str]],
    /// May fail too: consequences whose reach depends on timing (a crashed driver's slices
    /// are wiped 30 s later; blocked pod deletions hold devices that later scenarios wait
    /// for). Every guarantee in neither list must pass.
    pub may_break: &'static [&'static [&'static str]],
}

impl FaultCase {
    pub fn breaks(&self) -> Vec<&'static str> {
        self.breaks.iter().flat_map(|g| g.iter().copied()).collect()
    }

    /// The timing-dependent ones that are not also certain.
    pub fn may_break(&self) -> Vec<&'static str> {
        let certain = self.breaks();
        self.may_break.iter().flat_map(|g| g.iter().copied()).filter(|id| !certain.contains(id)).collect()
    }
}

/// Plugin-tier checks that begin with a successful prepare.
const NEEDS_PREPARE: &[&str] = &[
    PLUGIN_PREPARE_ALLOCATED_CLAIM,
    PLUGIN_UNPREPARE_REMOVES_STATE,
    PLUGIN_PREPARE_IDEMPOTENT,
    PLUGIN_PREPARE_REFUSES_FOREIGN_NODE,
    PLUGIN_PREPARE_CONCURRENT,
    PLUGIN_RESTART_KEEPS_STATE,
    PLUGIN_CDI_VALID,
    PLUGIN_CDI_RESOLVABLE,
];

/// Cluster-tier checks that need a workload to start.
const NEEDS_RUNNING_WORKLOADS: &[&str] = &[
    WORKLOAD_SEES_DEVICES,
    LIMITS_MAX_DEVICES_PER_CLAIM,
    CAPACITY_RECOVERED,
    RETENTION_TEMPLATE_CLAIM_DELETED,
    RETENTION_STANDALONE_CLAIM_DEALLOCATED,
    LIFECYCLE_UNPREPARED,
    DRIVER_RESTART_WORKLOAD_KEEPS_DEVICES,
    DRIVER_RESTART_NEW_CLAIMS_WORK,
    DRIVER_RESTART_SLICES_KEPT,
    NODE_RESTART_REPREPARED_IDEMPOTENTLY,
    NODE_REMOVAL_SLICES_GONE,
    NODE_REMOVAL_PODS_GONE,
    NODE_REMOVAL_CLAIMS_DEALLOCATED,
    NODE_REMOVAL_CAPACITY_ELSEWHERE,
];

/// Cluster-tier checks that only need the scheduler to find free devices; with devices held
/// or slices gone they fail too, besides those that need running workloads.
const NEEDS_ALLOCATION: &[&str] =
    &[CLAIM_COMPATIBLE_ALLOCATED, CLAIM_IMPOSSIBLE_CAPACITY, CLAIM_IMPOSSIBLE_EXPLAINED, ISOLATION_EXCLUSIVE];

pub const FAULTS: &[FaultCase] = &[
    FaultCase {
        fault: "fail-prepare=2",
        misbehaviour: "the first 2 NodePrepareResources calls fail; the kubelet's retries hide it from workloads",
        breaks: &[NEEDS_PREPARE],
        may_break: &[],
    },
    FaultCase {
        fault: "hang-prepare",
        misbehaviour: "NodePrepareResources never answers, past the kubelet's 45 s timeout",
        breaks: &[NEEDS_PREPARE, NEEDS_RUNNING_WORKLOADS],
        may_break: &[],
    },
    FaultCase {
        fault: "exit-on-prepare",
        misbehaviour: "the driver process exits when a prepare arrives; 30 s later the kubelet wipes its slices",
        breaks: &[NEEDS_PREPARE, NEEDS_RUNNING_WORKLOADS],
        may_break: &[NEEDS_ALLOCATION, NEEDS_RUNNING_WORKLOADS],
    },
    FaultCase {
        fault: "non-idempotent-prepare",
        misbehaviour: "each prepare of the same claim returns new CDI IDs",
        breaks: &[&[PLUGIN_PREPARE_IDEMPOTENT, NODE_RESTART_REPREPARED_IDEMPOTENTLY]],
        may_break: &[],
    },
    FaultCase {
        fault: "lose-checkpoint",
        misbehaviour: "the checkpoint is lost at start-up: after a restart, unprepare leaves the CDI spec behind",
        breaks: &[&[PLUGIN_RESTART_KEEPS_STATE]],
        may_break: &[],
    },
    FaultCase {
        fault: "stale-slices-on-exit",
        misbehaviour: "slices stay after a clean shutdown even with --remove-slices-on-exit; no guarantee depends on that flag, and the kubelet's wipe and the Node's garbage collection remove them",
        breaks: &[],
        may_break: &[],
    },
    FaultCase {
        fault: "cdi-without-spec",
        misbehaviour: "prepare returns CDI IDs but writes no spec file, so containers cannot start",
        breaks: &[&[PLUGIN_CDI_RESOLVABLE], NEEDS_RUNNING_WORKLOADS],
        may_break: &[],
    },
    FaultCase {
        fault: "wrong-attribute=index=7",
        misbehaviour: "every published device has attribute index = 7, unlike the inventory",
        breaks: &[&[PLUGIN_SLICES_MATCH_INVENTORY]],
        may_break: &[],
    },
    FaultCase {
        fault: "never-unprepare",
        misbehaviour: "NodeUnprepareResources fails for every claim, so pod deletions block and devices stay held",
        breaks: &[&[
            PLUGIN_UNPREPARE_REMOVES_STATE,
            PLUGIN_UNPREPARE_UNKNOWN_CLAIM,
            PLUGIN_RESTART_KEEPS_STATE,
            CAPACITY_RECOVERED,
        ]],
        may_break: &[NEEDS_ALLOCATION, NEEDS_RUNNING_WORKLOADS],
    },
    FaultCase {
        fault: "foreign-slice=node-99",
        misbehaviour: "also publishes a slice for node-99, a node that does not exist",
        breaks: &[&[PLUGIN_SLICES_OWNED_BY_NODE]],
        may_break: &[],
    },
];

/// Why `result` does not match `case`, if it does not.
pub fn mismatch(case: &FaultCase, result: &RunResult) -> Option<String> {
    let failed: BTreeSet<&str> = result.all().filter(|g| g.verdict == Verdict::Fail).map(|g| g.id.as_str()).collect();
    let not_passed: BTreeSet<&str> =
        result.all().filter(|g| g.verdict != Verdict::Pass).map(|g| g.id.as_str()).collect();
    let (breaks, may) = (case.breaks(), case.may_break());
    let missed: Vec<&str> = breaks.iter().copied().filter(|id| !failed.contains(id)).collect();
    let extra: Vec<&str> = not_passed.iter().copied().filter(|id| !breaks.contains(id) && !may.contains(id)).collect();
    match (missed.is_empty(), extra.is_empty()) {
        (true, true) => None,
        _ => Some(format!("expected to fail but did not: {missed:?}; did not pass but should have: {extra:?}")),
    }
}

/// The table as it stands in `drivers/mock/README.md`.
pub fn markdown_table() -> String {
    let mut out =
        String::from("| fault | misbehaviour | guarantees it breaks | may also break (timing) |\n|---|---|---|---|\n");
    let list = |ids: &[&str]| {
        if ids.is_empty() {
            "none".to_string()
        } else {
            ids.iter().map(|i| format!("`{i}`")).collect::<Vec<_>>().join(", ")
        }
    };
    for c in FAULTS {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            c.fault,
            c.misbehaviour,
            list(&c.breaks()),
            list(&c.may_break())
        ));
    }
    out
}
