//! Verdict fidelity: which guarantees each mock fault switch breaks. The fidelity test runs
//! the suite against the mock with each fault and compares with this table, in the tiers of
//! [`tiers`]; `cargo xtask fidelity --full` keeps what the whole table gave in a [`record`]; the
//! mock driver's README shows the same table, generated from here.
//!
//! Every guarantee the suite checks is either broken for certain by some fault (`breaks`),
//! or listed in [`NOT_DRIVER_PROPERTIES`] with the reason no driver behaviour decides it:
//! there Kubernetes (the scheduler, the controllers, the cluster's version) decides, and a
//! driver can only fail it by keeping workloads from running at all, which the prepare
//! faults already show. A unit test keeps the two lists complete and disjoint.

use std::collections::BTreeSet;

use dracheck_clusters::local::NodeKind;

use crate::profile::ids::*;
use crate::result::{RunResult, Verdict};

pub mod record;
pub mod tiers;

#[derive(Debug, PartialEq, Eq)]
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
    /// Must be skipped: the fault takes away what the check needs (an optional service the
    /// driver no longer offers), so the check says why it cannot judge; a profile's guarantee
    /// that relies on it fails instead.
    pub skips: &'static [&'static str],
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

    /// The guarantees a targeted run of this row checks: those it must fail or skip. `None`
    /// for a row that names none (a fault that must break nothing), which only a run of the
    /// whole suite can show. The ones it may break are left out: they show no sensitivity,
    /// and selecting them would make most rows a run of the whole suite.
    pub fn targeted(&self) -> Option<Vec<&'static str>> {
        let mut ids = self.breaks();
        ids.extend(self.skips.iter().copied());
        ids.sort_unstable();
        ids.dedup();
        (!ids.is_empty()).then_some(ids)
    }

    /// The node kinds this row's verdicts are checked on: emulated nodes always, real nodes
    /// too where the verdict depends on the kubelet or the runtime ([`NODE_DEPENDENT`]).
    pub fn node_kinds(&self) -> &'static [NodeKind] {
        if NODE_DEPENDENT.contains(&self.fault) { &[NodeKind::Emulated, NodeKind::Real] } else { &[NodeKind::Emulated] }
    }
}

/// Faults whose verdict depends on the node's kubelet or runtime, by their `--fault` name:
/// registration as the kubelet dials it, CDI as containerd resolves it, unprepare as the
/// kubelet calls it, a kubelet restart, a reboot, the kubelet's slice wipe after an outage, a
/// driver restart under running containers, the devices of which request a container gets,
/// the prepare of a claim that two drivers share, which claims of a pod the kubelet asks a
/// driver to prepare (not those prepared on the node already), when the kubelet unprepares the
/// claim of a force-deleted pod (after its object is gone), which instance of a driver it
/// calls when one of two loses its sockets, how the kubelet matches a container's request to
/// the request names a prepare answers (an alternative's), how the kubelet watches a plugin's
/// health and writes it into the pod's status (or writes `Unknown` where nothing is streamed).
/// Faults that only keep workloads from running (a hanging prepare) give the same verdicts
/// anywhere and are checked on emulated nodes alone.
pub const NODE_DEPENDENT: &[&str] = &[
    "strict-authority",
    "cdi-without-spec",
    "never-unprepare",
    "no-slice-reconcile",
    "register-first-start-only",
    "reset-devices-on-start",
    "trust-checkpoint",
    "trust-published",
    "expire-cdi-spec=10",
    "config-to-every-request",
    "prepare-every-result",
    "drop-unlisted-claims",
    "unprepare-needs-claim",
    "upgrade-removes-sockets",
    "subrequest-request-names",
    "no-health",
    "health-wrong-device",
    "first-request-names",
];

/// Plugin-tier checks that begin with a successful prepare.
const NEEDS_PREPARE: &[&str] = &[
    PLUGIN_PREPARE_ALLOCATED_CLAIM,
    PLUGIN_UNPREPARE_REMOVES_STATE,
    PLUGIN_PREPARE_IDEMPOTENT,
    PLUGIN_PREPARE_RETRY,
    PLUGIN_PREPARE_REFUSES_FOREIGN_NODE,
    PLUGIN_PREPARE_CONCURRENT,
    PLUGIN_PREPARE_OWN_RESULTS_ONLY,
    PLUGIN_PREPARE_KEYED_BY_UID,
    PLUGIN_SHARES_INDEPENDENT,
    PLUGIN_RESTART_KEEPS_STATE,
    PLUGIN_CDI_VALID,
    PLUGIN_CDI_RESOLVABLE,
];

/// Plugin-tier checks that need no prepare: the suite, like the kubelet, reaches a plugin only
/// through GetInfo, so without registration they fail too.
const NEEDS_REGISTRATION: &[&str] = &[
    PLUGIN_REGISTRATION_INFO,
    PLUGIN_REGISTRATION_RECOVERS,
    PLUGIN_REGISTRATION_V1,
    PLUGIN_SLICES_MATCH_INVENTORY,
    PLUGIN_SLICES_OWNED_BY_NODE,
    PLUGIN_SLICES_RECREATED,
    PLUGIN_SLICES_FOLLOW_INVENTORY,
    PLUGIN_SLICES_TAINTS_UNHEALTHY,
    PLUGIN_HEALTH_REPORTED,
    PLUGIN_UNPREPARE_UNKNOWN_CLAIM,
];

/// Cluster-tier checks that need a workload to start.
const NEEDS_RUNNING_WORKLOADS: &[&str] = &[
    WORKLOAD_SEES_DEVICES,
    LIMITS_MAX_DEVICES_PER_CLAIM,
    CAPACITY_RECOVERED,
    RETENTION_TEMPLATE_CLAIM_DELETED,
    RETENTION_STANDALONE_CLAIM_DEALLOCATED,
    LIFECYCLE_UNPREPARED,
    LIFECYCLE_CONTAINER_RESTART,
    LIFECYCLE_PREPARED_AND_NEW,
    LIFECYCLE_FORCE_DELETE,
    CONFIG_CLASS_AND_CLAIM,
    CONFIG_PER_REQUEST,
    DRIVERS_COEXIST,
    PRIORITIZED_CHOSEN_SUBREQUEST,
    ADMIN_ACCESS_IN_USE_DEVICE,
    PARTITIONABLE_COUNTERS_RESPECTED,
    PARTITIONABLE_CAPACITY_RESTORED,
    PARTITIONABLE_PREPARED_PARTITION,
    CONSUMABLE_SHARED,
    CONSUMABLE_PREPARED_SHARE,
    BINDING_CONDITIONS_BOUND_WHEN_READY,
    DEVICE_STATUS_REPORTED,
    TAINTS_RULE_EVICTS,
    TAINTS_UNHEALTHY_KEPT_OFF,
    EXTENDED_RESOURCE_PREPARED,
    EXTENDED_RESOURCE_CLAIM_DELETED,
    HEALTH_POD_STATUS,
    DRIVER_RESTART_WORKLOAD_KEEPS_DEVICES,
    DRIVER_RESTART_NEW_CLAIMS_WORK,
    DRIVER_RESTART_SLICES_KEPT,
    DRIVER_RESTART_NO_LEAKS,
    DRIVER_RESTART_LONG_OUTAGE,
    DRIVER_UPGRADE_FAILED,
    DRIVER_UPGRADE_ROLLING,
    NODE_RESTART_DRIVER_RECOVERS,
    NODE_REBOOT_WORKLOADS_RESUME,
    NODE_REMOVAL_SLICES_GONE,
    NODE_REMOVAL_PODS_GONE,
    NODE_REMOVAL_CLAIMS_DEALLOCATED,
    NODE_REMOVAL_CAPACITY_ELSEWHERE,
];

/// Cluster-tier checks that only need the scheduler to find free devices; with devices held
/// or slices gone they fail too, besides those that need running workloads. The refusals are
/// skipped then: their control, a claim of the profile's shape, is not allocated either.
const NEEDS_ALLOCATION: &[&str] = &[
    CLAIM_COMPATIBLE_ALLOCATED,
    CLAIM_IMPOSSIBLE_UNKNOWN_CLASS,
    CLAIM_IMPOSSIBLE_SELECTOR,
    CLAIM_IMPOSSIBLE_COUNT,
    CLAIM_IMPOSSIBLE_CAPACITY,
    CLAIM_IMPOSSIBLE_EXPLAINED,
    ISOLATION_EXCLUSIVE,
];

/// The refusals, skipped where no claim of the profile's shape can be allocated at all: with
/// nothing allocatable every request is refused, which shows nothing of the request.
const REFUSALS: &[&str] = &[
    CLAIM_IMPOSSIBLE_UNKNOWN_CLASS,
    CLAIM_IMPOSSIBLE_SELECTOR,
    CLAIM_IMPOSSIBLE_COUNT,
    CLAIM_IMPOSSIBLE_CAPACITY,
    CLAIM_IMPOSSIBLE_EXPLAINED,
];

pub const FAULTS: &[FaultCase] = &[
    FaultCase {
        fault: "fail-prepare=2",
        misbehaviour: "the first 2 NodePrepareResources calls of each driver process fail; the kubelet tries a pod's prepare again only at its next resync, 60–90 s later, so the first pods on a node may miss their deadlines and hold their devices meanwhile",
        breaks: &[NEEDS_PREPARE],
        may_break: &[NEEDS_RUNNING_WORKLOADS, NEEDS_ALLOCATION],
        skips: &[],
    },
    FaultCase {
        fault: "hang-prepare",
        misbehaviour: "NodePrepareResources never answers, past the kubelet's 45 s timeout",
        breaks: &[NEEDS_PREPARE, NEEDS_RUNNING_WORKLOADS],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "exit-on-prepare",
        misbehaviour: "the driver process exits when a prepare arrives; 30 s later the kubelet wipes its slices",
        breaks: &[NEEDS_PREPARE, NEEDS_RUNNING_WORKLOADS],
        may_break: &[NEEDS_ALLOCATION, NEEDS_RUNNING_WORKLOADS],
        skips: &[],
    },
    FaultCase {
        fault: "non-idempotent-prepare",
        misbehaviour: "each prepare of the same claim returns new CDI IDs",
        breaks: &[&[PLUGIN_PREPARE_IDEMPOTENT]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "lose-checkpoint",
        misbehaviour: "the checkpoint is lost at start-up: after a restart, unprepare leaves the CDI spec behind",
        breaks: &[&[PLUGIN_RESTART_KEEPS_STATE, DRIVER_RESTART_NO_LEAKS, DRIVER_UPGRADE_ROLLING]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "stale-slices-on-exit",
        misbehaviour: "slices stay after a clean shutdown even with --remove-slices-on-exit; the DRA contract leaves removal on exit to the driver (the upstream helper keeps them too) and the kubelet's wipe and the Node's garbage collection remove them, so the suite must not fail anything",
        breaks: &[],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "slice-sync-delay=30",
        misbehaviour: "none the contract forbids: slices someone deleted (the kubelet's wipe at start-up, the plugin tier) are written again 30 s after the deletion, as upstream's ResourceSlice controller does (DefaultSyncDelay), with no periodic resync; the suite's bounds must wait for that, not race it, so it must not fail anything",
        breaks: &[],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "cdi-without-spec",
        misbehaviour: "prepare returns CDI IDs but writes no spec file, so containers cannot start",
        // Two shares' CDI devices that resolve to nothing set up no share either.
        breaks: &[&[PLUGIN_CDI_RESOLVABLE, PLUGIN_SHARES_INDEPENDENT], NEEDS_RUNNING_WORKLOADS],
        // Skipped, not failed: a prepare that succeeds with no writable CDI dir may write its
        // specs elsewhere, so the retry cannot be provoked; `plugin.cdi.resolvable` fails it.
        may_break: &[&[PLUGIN_PREPARE_RETRY]],
        skips: &[],
    },
    FaultCase {
        fault: "wrong-attribute=index=7",
        misbehaviour: "every published device has attribute index = 7, unlike the inventory",
        // After an inventory change, too, the slices do not hold the inventory.
        breaks: &[&[PLUGIN_SLICES_MATCH_INVENTORY, PLUGIN_SLICES_FOLLOW_INVENTORY]],
        may_break: &[],
        skips: &[TAINTS_UNHEALTHY_KEPT_OFF],
    },
    FaultCase {
        fault: "wrong-capacity=memory=1Ti",
        misbehaviour: "every published device claims 1Ti of memory (the inventory has 24Gi and 80Gi), like memory reported in the wrong unit; the scheduler allocates requests no device can meet, and a claim that asks for no share of the shared GPU gets all of it",
        breaks: &[&[
            PLUGIN_SLICES_MATCH_INVENTORY,
            PLUGIN_SLICES_FOLLOW_INVENTORY,
            CLAIM_IMPOSSIBLE_CAPACITY,
            CLAIM_IMPOSSIBLE_EXPLAINED,
            CONSUMABLE_SHARED,
        ]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "phantom-devices=32",
        misbehaviour: "publishes 32 devices per node that do not exist; the scheduler allocates them (a claim for more devices than a node has, and a pod past the real capacity) and prepare refuses them; a claim for all of a node's devices asks for more than a claim may have",
        breaks: &[&[
            PLUGIN_SLICES_MATCH_INVENTORY,
            PLUGIN_SLICES_FOLLOW_INVENTORY,
            CLAIM_IMPOSSIBLE_COUNT,
            CLAIM_IMPOSSIBLE_EXPLAINED,
            CAPACITY_RECOVERED,
            // Every device of the class on the node (allocationMode All) is more than the 32 a
            // claim may have.
            ADMIN_ACCESS_IN_USE_DEVICE,
        ]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "no-owner-reference",
        misbehaviour: "slices carry no controller ownerRef to their Node, so nothing removes them when the Node is deleted",
        breaks: &[&[PLUGIN_SLICES_OWNED_BY_NODE, NODE_REMOVAL_SLICES_GONE]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "wipe-slices-on-start",
        misbehaviour: "every start deletes the node's slices and publishes them anew, so the devices vanish during a restart",
        // Started again on a changed inventory, it publishes the new set under generation 1
        // again, the old set's.
        breaks: &[&[
            DRIVER_RESTART_SLICES_KEPT,
            PLUGIN_SLICES_FOLLOW_INVENTORY,
            DRIVER_UPGRADE_FAILED,
            DRIVER_UPGRADE_ROLLING,
        ]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "prepare-wrong-device",
        misbehaviour: "the CDI spec of every claim sets up the node's first device, whatever was allocated; the response still names the allocated ones",
        breaks: &[&[
            WORKLOAD_SEES_DEVICES,
            ISOLATION_EXCLUSIVE,
            LIMITS_MAX_DEVICES_PER_CLAIM,
            LIFECYCLE_CONTAINER_RESTART,
            LIFECYCLE_PREPARED_AND_NEW,
            CONFIG_CLASS_AND_CLAIM,
            CONFIG_PER_REQUEST,
            DRIVERS_COEXIST,
            NODE_REBOOT_WORKLOADS_RESUME,
            PARTITIONABLE_PREPARED_PARTITION,
            EXTENDED_RESOURCE_PREPARED,
            CONSUMABLE_PREPARED_SHARE,
            PLUGIN_SHARES_INDEPENDENT,
        ]],
        // The force-delete and prioritized-list scenarios' claims have one device each: where
        // the scheduler allocates the node's first device, the wrong device is the right one.
        may_break: &[&[LIFECYCLE_FORCE_DELETE, PRIORITIZED_CHOSEN_SUBREQUEST]],
        skips: &[],
    },
    FaultCase {
        fault: "prepare-first-device-only",
        misbehaviour: "the CDI spec of a claim sets up only its first allocated device, for each of its devices",
        // The per-request claim has a device per request, and the training profile's claim
        // two: their containers see one device twice.
        breaks: &[&[
            WORKLOAD_SEES_DEVICES,
            LIMITS_MAX_DEVICES_PER_CLAIM,
            LIFECYCLE_CONTAINER_RESTART,
            CONFIG_CLASS_AND_CLAIM,
            CONFIG_PER_REQUEST,
            DRIVERS_COEXIST,
            NODE_REBOOT_WORKLOADS_RESUME,
            EXTENDED_RESOURCE_PREPARED,
        ]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "wrong-version=0.0.1",
        misbehaviour: "`--version` states 0.0.1, like a build without its release stamp; the profiles require >=0.1",
        breaks: &[&[VERSIONS_DRIVER]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "wrong-attribute=model=h100",
        misbehaviour: "every published device says it is an h100, so no device matches the profiles' classes and nothing can be allocated",
        breaks: &[
            &[
                CLAIM_COMPATIBLE_ALLOCATED,
                ISOLATION_EXCLUSIVE,
                PLUGIN_SLICES_MATCH_INVENTORY,
                PLUGIN_SLICES_FOLLOW_INVENTORY,
            ],
            NEEDS_RUNNING_WORKLOADS,
        ],
        may_break: &[],
        skips: REFUSALS,
    },
    FaultCase {
        fault: "prepare-foreign-claims",
        misbehaviour: "prepare does not check the pool, so a claim allocated on another node gets this node's devices of the same names",
        breaks: &[&[PLUGIN_PREPARE_REFUSES_FOREIGN_NODE]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "reset-devices-on-start",
        misbehaviour: "a start resets the devices the checkpoint lists as prepared, killing the workloads that use them",
        breaks: &[&[
            DRIVER_RESTART_WORKLOAD_KEEPS_DEVICES,
            DRIVER_RESTART_LONG_OUTAGE,
            DRIVER_UPGRADE_FAILED,
            DRIVER_UPGRADE_ROLLING,
        ]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "register-first-start-only",
        misbehaviour: "a restarted driver serves DRA but offers no registration socket, so the kubelet never learns it is back",
        // The pod from before the driver restart cannot go (its claim is not unprepared), so
        // the checks after its deletion fail. A reboot starts the driver again too. The node
        // restart fails only where it shares its node with the driver-restart scenario, which
        // runs first: the kubelet that restarts there finds no plugin to register; on a node
        // of its own (a targeted run has one per scenario) the driver's first start is the
        // only one, its socket is there, and the node restart holds.
        breaks: &[&[
            PLUGIN_RESTART_KEEPS_STATE,
            PLUGIN_SLICES_FOLLOW_INVENTORY,
            PLUGIN_SLICES_TAINTS_UNHEALTHY,
            DRIVER_RESTART_NEW_CLAIMS_WORK,
            DRIVER_RESTART_NO_LEAKS,
            DRIVER_RESTART_LONG_OUTAGE,
            NODE_REBOOT_WORKLOADS_RESUME,
            DRIVER_UPGRADE_FAILED,
            DRIVER_UPGRADE_ROLLING,
        ]],
        may_break: &[&[NODE_RESTART_DRIVER_RECOVERS]],
        skips: &[],
    },
    FaultCase {
        fault: "register-v1beta1-only",
        misbehaviour: "GetInfo offers only v1beta1.DRAPlugin; the kubelet falls back to it and everything else works",
        breaks: &[&[PLUGIN_REGISTRATION_V1]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "never-unprepare",
        misbehaviour: "NodeUnprepareResources fails for every claim, so pod deletions block and devices stay held",
        // The plugin-tier checks that end with an unprepare fail with it.
        breaks: &[&[
            PLUGIN_UNPREPARE_REMOVES_STATE,
            PLUGIN_UNPREPARE_UNKNOWN_CLAIM,
            PLUGIN_PREPARE_OWN_RESULTS_ONLY,
            PLUGIN_PREPARE_KEYED_BY_UID,
            PLUGIN_SHARES_INDEPENDENT,
            PLUGIN_RESTART_KEEPS_STATE,
            CAPACITY_RECOVERED,
            LIFECYCLE_UNPREPARED,
            LIFECYCLE_CONTAINER_RESTART,
            DRIVER_RESTART_NO_LEAKS,
            DRIVER_RESTART_LONG_OUTAGE,
            NODE_RESTART_DRIVER_RECOVERS,
            NODE_REBOOT_WORKLOADS_RESUME,
        ]],
        may_break: &[NEEDS_ALLOCATION, NEEDS_RUNNING_WORKLOADS],
        skips: &[],
    },
    FaultCase {
        fault: "no-slice-reconcile",
        misbehaviour: "slices are written at start-up and when the inventory changes, never re-created after someone deletes them: the plugin tier's deletion stays, and the kubelet wipes a node's slices when it starts, so after a kubelet restart the node offers no devices",
        // A rebooted node's kubelet wipes its slices at start-up, before the driver is back
        // as a rule; where the wipe comes later, nothing publishes them again.
        breaks: &[&[PLUGIN_SLICES_RECREATED, NODE_RESTART_DRIVER_RECOVERS]],
        may_break: &[&[NODE_REBOOT_WORKLOADS_RESUME]],
        skips: &[],
    },
    FaultCase {
        fault: "foreign-slice=node-99",
        misbehaviour: "also publishes a slice for node-99, a node that does not exist",
        breaks: &[&[PLUGIN_SLICES_OWNED_BY_NODE]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "strict-authority",
        misbehaviour: "the registration socket's HTTP/2 server refuses the `:authority` the kubelet's plugin watcher sends (the socket path), as a plain tonic server does: GetInfo fails, the plugin never registers, and no claim is prepared",
        breaks: &[NEEDS_REGISTRATION, NEEDS_PREPARE, NEEDS_RUNNING_WORKLOADS],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "trust-checkpoint",
        misbehaviour: "a prepare of a claim the driver's checkpoint lists answers from the checkpoint without writing the CDI spec again; after a node reboot (CDI specs on tmpfs gone, checkpoints on disk kept) the kubelet prepares the pods' claims again, and their containers cannot be created; a prepare that failed after its checkpoint entry was written is answered the same way when the kubelet retries it",
        breaks: &[&[NODE_REBOOT_WORKLOADS_RESUME, PLUGIN_PREPARE_RETRY]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "trust-published",
        misbehaviour: "a restarted driver takes the slices it published before to be in place and writes none until they change; after an outage past the kubelet's 30 s wipe delay the node offers no devices",
        // A reboot's kubelet wipes at start-up, before the driver is back as a rule. Started
        // again on a changed inventory, it publishes nothing of the change.
        breaks: &[&[DRIVER_RESTART_LONG_OUTAGE, PLUGIN_SLICES_FOLLOW_INVENTORY, PLUGIN_SLICES_TAINTS_UNHEALTHY]],
        may_break: &[&[NODE_REBOOT_WORKLOADS_RESUME]],
        skips: &[],
    },
    FaultCase {
        fault: "expire-cdi-spec=10",
        misbehaviour: "a claim's CDI spec is removed 10 s after its prepare, the claim still prepared: a container restarted later (a new container, whose CDI devices the runtime resolves again) cannot be created",
        // The container-restart scenario's container runs 12 s before its restart. Containers
        // created within 10 s of their prepare start; a reboot's sandbox that takes longer on
        // a loaded machine fails too.
        breaks: &[&[LIFECYCLE_CONTAINER_RESTART]],
        may_break: &[&[NODE_REBOOT_WORKLOADS_RESUME]],
        skips: &[],
    },
    FaultCase {
        fault: "prepare-every-result",
        misbehaviour: "prepare takes every allocation result of a claim as its own, also another driver's, and fails on the device it does not have",
        // The plugin tier hands it such a claim; the cluster tier's second driver on a node
        // shares one with it, and the kubelet asks both to prepare it.
        breaks: &[&[PLUGIN_PREPARE_OWN_RESULTS_ONLY, DRIVERS_COEXIST]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "key-by-name",
        misbehaviour: "a prepare finds a claim in the checkpoint by its name, not its UID: of two claims of one name prepared on a node, the second gets the first's devices",
        breaks: &[&[PLUGIN_PREPARE_KEYED_BY_UID]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "ignore-config",
        misbehaviour: "prepare applies no opaque configuration: every device is set up the same way, whatever the class and the claim ask",
        breaks: &[&[CONFIG_CLASS_AND_CLAIM, CONFIG_PER_REQUEST, PRIORITIZED_CHOSEN_SUBREQUEST]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "config-to-every-request",
        misbehaviour: "every opaque configuration of a claim is applied to every device, whichever requests it names: a container gets another request's settings",
        breaks: &[&[CONFIG_PER_REQUEST]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "class-config-wins",
        misbehaviour: "where the class's and the claim's configuration set the same value, the class's is applied",
        // The per-request claim's first request has both too.
        breaks: &[&[CONFIG_CLASS_AND_CLAIM, CONFIG_PER_REQUEST]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "drop-unlisted-claims",
        misbehaviour: "a prepare call is taken for the node's whole set of claims: the claims it does not name are undone (CDI spec and checkpoint entry), though pods still use them",
        // The second share's prepare undoes the first's, which the plugin tier then finds
        // without CDI devices.
        breaks: &[&[LIFECYCLE_PREPARED_AND_NEW, PLUGIN_SHARES_INDEPENDENT]],
        // The lifecycle scenario starts two pods at once on its node: where the second's
        // prepare comes between the first's and the creation of its container (on a real node
        // its sandbox is made in between), the first cannot be created.
        may_break: &[&[RETENTION_TEMPLATE_CLAIM_DELETED, RETENTION_STANDALONE_CLAIM_DEALLOCATED, LIFECYCLE_UNPREPARED]],
        skips: &[],
    },
    FaultCase {
        fault: "unprepare-needs-claim",
        misbehaviour: "an unprepare reads the claim from the API server to learn what to undo and fails when it is gone: a force-deleted pod's claim, deleted before the kubelet tears the pod down, stays prepared for good, and a new claim of its name never starts on the node",
        breaks: &[&[LIFECYCLE_FORCE_DELETE]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "stale-devices",
        misbehaviour: "devices published before that the inventory no longer has stay published: after a device is taken out, the scheduler can still allocate it",
        breaks: &[&[PLUGIN_SLICES_FOLLOW_INVENTORY]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "no-generation-bump",
        misbehaviour: "a change of the inventory is published under the pool generation already there, also one that adds a slice, so consumers cannot tell the new set from the old",
        breaks: &[&[PLUGIN_SLICES_FOLLOW_INVENTORY]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "upgrade-renames-devices",
        misbehaviour: "a new instance publishes the devices under other names: through a rolling update the pool changes under the claims allocated from it, and the old instance, still running, writes its names back",
        breaks: &[&[DRIVER_UPGRADE_FAILED, DRIVER_UPGRADE_ROLLING]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "upgrade-forgets-claims",
        misbehaviour: "a new instance starts with an empty state: the claims the old one prepared are unknown to it, and their unprepare leaves their CDI specs behind",
        breaks: &[&[DRIVER_UPGRADE_ROLLING]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "upgrade-removes-sockets",
        misbehaviour: "a new instance deletes the sockets of the running one as leftovers: the kubelet drops the old instance, and when the new one fails and goes, no instance serves the node",
        breaks: &[&[DRIVER_UPGRADE_FAILED]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "exit-on-refused-registration",
        misbehaviour: "a plugin the kubelet refuses ends its process, as CSI's node-driver-registrar does: it is gone until its container is restarted, and its slices are wiped meanwhile",
        breaks: &[&[PLUGIN_REGISTRATION_RECOVERS]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "duplicate-device",
        misbehaviour: "one more slice of the pool lists its first device again: the scheduler takes the node's whole pool for invalid and allocates none of its devices",
        // An impossible claim stays impossible, but so does a possible one: the refusals are
        // skipped for want of an allocated control.
        breaks: &[
            &[PLUGIN_SLICES_MATCH_INVENTORY, CLAIM_COMPATIBLE_ALLOCATED, ISOLATION_EXCLUSIVE],
            NEEDS_RUNNING_WORKLOADS,
        ],
        may_break: &[],
        skips: REFUSALS,
    },
    FaultCase {
        fault: "no-node-policy",
        misbehaviour: "its installation gives its plugin's account the rights on ResourceSlices and no admission policy: a node's plugin may write any node's slices",
        breaks: &[&[PLUGIN_SLICES_OWN_NODE_ONLY]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "config-by-exact-request",
        misbehaviour: "a configuration reaches a device only where it names the result's request exactly: one given for a whole `firstAvailable` request misses the device of its chosen alternative",
        breaks: &[&[PRIORITIZED_CHOSEN_SUBREQUEST]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "subrequest-request-names",
        misbehaviour: "a prepare answers `request/alternative` as the request names of a result for an alternative: the kubelet gives a container that names the request none of its devices",
        breaks: &[&[PRIORITIZED_CHOSEN_SUBREQUEST]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "refuse-in-use",
        misbehaviour: "a prepare fails for a device another prepared claim holds: an admin-access claim on a device in use never runs, nor does a second share of a shared device",
        breaks: &[&[ADMIN_ACCESS_IN_USE_DEVICE, CONSUMABLE_SHARED, PLUGIN_SHARES_INDEPENDENT]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "untainted-unhealthy",
        misbehaviour: "a device its health checks find faulty is published as before, without a taint: the scheduler goes on handing it out",
        breaks: &[&[PLUGIN_SLICES_TAINTS_UNHEALTHY, TAINTS_UNHEALTHY_KEPT_OFF]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "counters-larger",
        misbehaviour: "a partitionable GPU's shared counters are published at twice its size, so the scheduler may hand out partitions the device cannot hold together",
        breaks: &[&[PLUGIN_SLICES_MATCH_INVENTORY, PARTITIONABLE_COUNTERS_RESPECTED, PARTITIONABLE_CAPACITY_RESTORED]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "partition-consumes-nothing",
        misbehaviour: "partitions are published without what they consume of the physical GPU, so the scheduler may allocate overlapping partitions together",
        breaks: &[&[
            PLUGIN_SLICES_MATCH_INVENTORY,
            PLUGIN_SLICES_FOLLOW_INVENTORY,
            PARTITIONABLE_COUNTERS_RESPECTED,
            PARTITIONABLE_CAPACITY_RESTORED,
        ]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "prepare-whole-device",
        misbehaviour: "a partition is prepared as the whole device it is part of, so its container gets more than was allocated (and what other partitions hold)",
        breaks: &[&[PARTITIONABLE_PREPARED_PARTITION]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "no-device-status",
        misbehaviour: "prepared devices are never reported in the claim's status.devices, so neither people nor controllers see their state",
        breaks: &[&[DEVICE_STATUS_REPORTED]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "first-request-names",
        misbehaviour: "a prepare answers every device of a claim with the request name of the claim's first result: a container that uses the first request gets every device of the claim, one that uses another request gets none",
        breaks: &[&[CONFIG_PER_REQUEST, PRIORITIZED_CHOSEN_SUBREQUEST, EXTENDED_RESOURCE_PREPARED]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "no-health",
        misbehaviour: "the driver offers no DRAResourceHealth service: a device that turns faulty under a running pod never shows in the pod's status",
        breaks: &[&[HEALTH_POD_STATUS]],
        may_break: &[],
        skips: &[PLUGIN_HEALTH_REPORTED],
    },
    FaultCase {
        fault: "health-wrong-device",
        misbehaviour: "each device's health is streamed under its neighbour's name: the pod on a faulty device reads healthy, another pod's device reads faulty",
        breaks: &[&[PLUGIN_HEALTH_REPORTED, HEALTH_POD_STATUS]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "no-multiple-allocations",
        misbehaviour: "a GPU meant to be shared by memory is published as an ordinary one: the first claim takes it whole and the others wait",
        breaks: &[&[PLUGIN_SLICES_MATCH_INVENTORY, CONSUMABLE_SHARED, CONSUMABLE_PREPARED_SHARE]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "share-id-ignored",
        misbehaviour: "the driver keys a shared device's setup by the device alone: every later share of it is set up as the first, with that share's ID and memory",
        breaks: &[&[CONSUMABLE_PREPARED_SHARE, PLUGIN_SHARES_INDEPENDENT]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "unprepare-all-shares",
        misbehaviour: "unpreparing one share of a device tears down every share of it: the other pods' containers can no longer start again",
        breaks: &[&[PLUGIN_SHARES_INDEPENDENT]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "never-attach",
        misbehaviour: "the driver never reports a partition ready (its binding conditions): the scheduler holds every pod of a partition unbound",
        breaks: &[&[
            BINDING_CONDITIONS_BOUND_WHEN_READY,
            PARTITIONABLE_COUNTERS_RESPECTED,
            PARTITIONABLE_CAPACITY_RESTORED,
            PARTITIONABLE_PREPARED_PARTITION,
        ]],
        may_break: &[],
        skips: &[],
    },
    FaultCase {
        fault: "no-binding-conditions",
        misbehaviour: "partitions are published without their binding conditions: the scheduler binds a pod before its partition is ready",
        breaks: &[&[
            PLUGIN_SLICES_MATCH_INVENTORY,
            PLUGIN_SLICES_FOLLOW_INVENTORY,
            BINDING_CONDITIONS_BOUND_WHEN_READY,
        ]],
        may_break: &[],
        skips: &[],
    },
];

/// A guarantee no driver behaviour decides, and why.
pub struct NotDriverProperty {
    pub id: &'static str,
    pub why: &'static str,
}

pub const NOT_DRIVER_PROPERTIES: &[NotDriverProperty] = &[
    NotDriverProperty {
        id: CLAIM_IMPOSSIBLE_UNKNOWN_CLASS,
        why: "the scheduler refuses a claim whose DeviceClass does not exist before it looks at any slice",
    },
    NotDriverProperty {
        id: CLAIM_IMPOSSIBLE_SELECTOR,
        why: "the selector asks for a driver name no driver has (`<driver>.invalid`); whatever a driver publishes, only the scheduler's CEL evaluation is tested",
    },
    NotDriverProperty {
        id: ISOLATION_SHARED,
        why: "no shipped mock profile promises shared isolation, so the default run does not check it; its driver part, a prepared claim whose CDI spec sets up the allocated devices (the kubelet prepares a claim once per node, however many pods use it), is what `workload.sees-devices` checks and `prepare-wrong-device` breaks",
    },
    NotDriverProperty {
        id: RETENTION_TEMPLATE_CLAIM_DELETED,
        why: "the resourceclaim controller deletes the generated claim once its pod has ended; a driver can only keep the pod from running, as the prepare faults do",
    },
    NotDriverProperty {
        id: RETENTION_STANDALONE_CLAIM_DEALLOCATED,
        why: "the resourceclaim controller clears reservedFor and the allocation once the pod has ended; a driver can only keep the pod from running, as the prepare faults do",
    },
    NotDriverProperty {
        id: NODE_REMOVAL_PODS_GONE,
        why: "the pod garbage collector deletes the pods of a Node that no longer exists",
    },
    NotDriverProperty {
        id: NODE_REMOVAL_CLAIMS_DEALLOCATED,
        why: "the resourceclaim controller deallocates a claim once its pods are gone",
    },
    NotDriverProperty {
        id: NODE_REMOVAL_CAPACITY_ELSEWHERE,
        why: "the scheduler allocates the claim again on another node; the driver's part there is an ordinary prepare, which the prepare faults break",
    },
    NotDriverProperty {
        id: ADMIN_ACCESS_NAMESPACE_LABEL,
        why: "the API server's validation refuses an admin-access claim in a namespace without the label before any driver sees it",
    },
    NotDriverProperty {
        id: TAINTS_RULE_EVICTS,
        why: "the device-taint eviction controller evicts the pods whose claims have a device an administrator's NoExecute rule taints; a driver can only keep the pod from running, as the prepare faults do",
    },
    NotDriverProperty {
        id: EXTENDED_RESOURCE_CLAIM_DELETED,
        why: "the garbage collector deletes the claim the scheduler made for a pod, which the pod owns, once the pod is gone; a driver can only keep the pod from running, as the prepare faults do",
    },
    NotDriverProperty { id: VERSIONS_KUBERNETES, why: "the cluster's version" },
];

/// The rows `want` names: the fault as the table spells it (`fail-prepare=2`), or its name
/// before `=` (`fail-prepare`), which picks every row of that name. Empty where none matches.
pub fn named(want: &str) -> Vec<&'static FaultCase> {
    let name = |f: &'static str| f.split_once('=').map_or(f, |(n, _)| n);
    FAULTS.iter().filter(|c| c.fault == want || name(c.fault) == want).collect()
}

/// Why `result` does not match `case`, if it does not.
pub fn mismatch(case: &FaultCase, result: &RunResult) -> Option<String> {
    let failed: BTreeSet<&str> = result.all().filter(|g| g.verdict == Verdict::Fail).map(|g| g.id.as_str()).collect();
    let not_passed: BTreeSet<&str> =
        result.all().filter(|g| g.verdict != Verdict::Pass).map(|g| g.id.as_str()).collect();
    let skipped: BTreeSet<&str> = result.all().filter(|g| g.verdict == Verdict::Skip).map(|g| g.id.as_str()).collect();
    let (breaks, may) = (case.breaks(), case.may_break());
    let missed: Vec<&str> = breaks.iter().copied().filter(|id| !failed.contains(id)).collect();
    let unskipped: Vec<&str> = case.skips.iter().copied().filter(|id| !skipped.contains(id)).collect();
    let extra: Vec<&str> = not_passed
        .iter()
        .copied()
        .filter(|id| !breaks.contains(id) && !may.contains(id) && !case.skips.contains(id))
        .collect();
    match (missed.is_empty(), unskipped.is_empty(), extra.is_empty()) {
        (true, true, true) => None,
        _ => Some(format!(
            "expected to fail but did not: {missed:?}; expected to be skipped but were not: {unskipped:?}; did not \
             pass but should have: {extra:?}"
        )),
    }
}

/// The guarantees no driver decides, as a table in `drivers/mock/README.md`.
pub fn not_driver_properties_table() -> String {
    let mut out = String::from("| guarantee | not a driver property because |\n|---|---|\n");
    for n in NOT_DRIVER_PROPERTIES {
        out.push_str(&format!("| `{}` | {} |\n", n.id, n.why));
    }
    out
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
            match c.skips {
                [] => list(&c.breaks()),
                skips => format!("{}; skipped: {}", list(&c.breaks()), list(skips)),
            },
            list(&c.may_break())
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Consequences that many faults share: workloads that never run, devices that cannot be
    /// allocated. A guarantee broken only through these has no fault of its own.
    const CASCADES: &[&[&str]] = &[NEEDS_RUNNING_WORKLOADS, NEEDS_ALLOCATION];

    #[test]
    fn every_guarantee_is_broken_by_a_fault_of_its_own_or_is_no_driver_property() {
        let checked: BTreeSet<&str> = crate::scenarios::driver_scenarios()
            .into_iter()
            .chain(crate::scenarios::cluster_scenarios())
            .flat_map(|s| s.guarantees.iter().copied())
            .collect();
        let direct: BTreeSet<&str> = FAULTS
            .iter()
            .flat_map(|c| c.breaks.iter().filter(|g| !CASCADES.contains(g)).flat_map(|g| g.iter().copied()))
            .collect();
        let undriven: BTreeSet<&str> = NOT_DRIVER_PROPERTIES.iter().map(|n| n.id).collect();
        let uncovered: Vec<&&str> =
            checked.iter().filter(|id| !direct.contains(*id) && !undriven.contains(*id)).collect();
        assert!(
            uncovered.is_empty(),
            "no fault of its own breaks {uncovered:?}: add one, or say why no driver decides it"
        );
        let both: Vec<&&str> = direct.intersection(&undriven).collect();
        assert!(both.is_empty(), "{both:?} are broken directly by a fault and yet listed as no driver property");
        let unknown: Vec<&&str> = direct.union(&undriven).filter(|id| !checked.contains(*id)).collect();
        assert!(unknown.is_empty(), "{unknown:?} are checked by no scenario");
        assert_eq!(undriven.len(), NOT_DRIVER_PROPERTIES.len(), "a guarantee is listed twice");
    }

    #[test]
    fn the_node_dependent_faults_are_in_the_table() {
        for want in NODE_DEPENDENT {
            assert!(FAULTS.iter().any(|c| c.fault == *want), "{want} is not a fault of FAULTS");
        }
        // The kubelet restart is the node's own disruption: a fault that breaks it is among them.
        let restart = FAULTS
            .iter()
            .filter(|c| c.node_kinds().contains(&NodeKind::Real))
            .any(|c| c.breaks().iter().any(|id| id.starts_with("node.restart.")));
        assert!(restart, "no node-dependent fault breaks a node.restart.* guarantee");
    }

    #[test]
    fn a_targeted_run_checks_what_the_row_must_fail_or_skip() {
        let row = FAULTS.iter().find(|c| c.fault == "wrong-attribute=index=7").unwrap();
        assert_eq!(
            row.targeted().unwrap(),
            [PLUGIN_SLICES_FOLLOW_INVENTORY, PLUGIN_SLICES_MATCH_INVENTORY, TAINTS_UNHEALTHY_KEPT_OFF]
        );
        // What a fault only may break is no part of it: fail-prepare may break every workload.
        let row = FAULTS.iter().find(|c| c.fault == "fail-prepare=2").unwrap();
        assert!(!row.targeted().unwrap().contains(&WORKLOAD_SEES_DEVICES));
        let row = FAULTS.iter().find(|c| c.fault == "stale-slices-on-exit").unwrap();
        assert_eq!(row.targeted(), None, "a row that must break nothing needs the whole suite");
    }

    #[test]
    fn a_row_is_named_as_the_table_spells_it_or_by_its_name_before_the_argument() {
        assert_eq!(named("fail-prepare=2").iter().map(|c| c.fault).collect::<Vec<_>>(), ["fail-prepare=2"]);
        assert_eq!(named("fail-prepare").iter().map(|c| c.fault).collect::<Vec<_>>(), ["fail-prepare=2"]);
        assert!(named("wrong-attribute").len() >= 2, "every row of that name");
        assert!(named("hang").is_empty() && named("fail-prepare=3").is_empty());
    }

    #[test]
    fn faults_are_listed_once_and_parse() {
        let names: BTreeSet<&str> = FAULTS.iter().map(|c| c.fault).collect();
        assert_eq!(names.len(), FAULTS.len());
        for c in FAULTS {
            c.fault.parse::<dracheck_mock_driver::faults::Fault>().unwrap();
        }
    }
}
