//! The stable guarantee IDs. Reports, scenarios and profiles name guarantees only through
//! these constants, so an ID is spelled in one place and a rename is a compile error. Which
//! family publishes which is `family::FAMILIES`.

// allocation
pub const CLAIM_COMPATIBLE_ALLOCATED: &str = "claim.compatible.allocated";
pub const WORKLOAD_SEES_DEVICES: &str = "workload.sees-devices";

// impossible
pub const CLAIM_IMPOSSIBLE_UNKNOWN_CLASS: &str = "claim.impossible.unknown-class";
pub const CLAIM_IMPOSSIBLE_SELECTOR: &str = "claim.impossible.selector";
pub const CLAIM_IMPOSSIBLE_COUNT: &str = "claim.impossible.count";
pub const CLAIM_IMPOSSIBLE_CAPACITY: &str = "claim.impossible.capacity";
pub const CLAIM_IMPOSSIBLE_EXPLAINED: &str = "claim.impossible.explained";

// isolation
pub const ISOLATION_EXCLUSIVE: &str = "isolation.exclusive";
pub const ISOLATION_SHARED: &str = "isolation.shared";

// limits
pub const LIMITS_MAX_DEVICES_PER_CLAIM: &str = "limits.max-devices-per-claim";

// capacityRecovery
pub const CAPACITY_RECOVERED: &str = "capacity.recovered";

// retention
pub const RETENTION_TEMPLATE_CLAIM_DELETED: &str = "retention.template-claim-deleted";
pub const RETENTION_STANDALONE_CLAIM_DEALLOCATED: &str = "retention.standalone-claim-deallocated";
pub const LIFECYCLE_UNPREPARED: &str = "lifecycle.unprepared";
pub const LIFECYCLE_CONTAINER_RESTART: &str = "lifecycle.container-restart";
pub const LIFECYCLE_PREPARED_AND_NEW: &str = "lifecycle.prepared-and-new";
pub const LIFECYCLE_FORCE_DELETE: &str = "lifecycle.force-delete";

// config
pub const CONFIG_CLASS_AND_CLAIM: &str = "config.class-and-claim";
pub const CONFIG_PER_REQUEST: &str = "config.per-request";

// coexistence
pub const DRIVERS_COEXIST: &str = "drivers.coexist";

// prioritizedList
pub const PRIORITIZED_CHOSEN_SUBREQUEST: &str = "prioritized.chosen-subrequest";

// adminAccess
pub const ADMIN_ACCESS_IN_USE_DEVICE: &str = "admin-access.in-use-device";
pub const ADMIN_ACCESS_NAMESPACE_LABEL: &str = "admin-access.namespace-label";

// partitionable
pub const PARTITIONABLE_COUNTERS_RESPECTED: &str = "partitionable.counters-respected";
pub const PARTITIONABLE_CAPACITY_RESTORED: &str = "partitionable.capacity-restored";
pub const PARTITIONABLE_PREPARED_PARTITION: &str = "partitionable.prepared-partition";

// consumableCapacity
pub const CONSUMABLE_SHARED: &str = "consumable.shared";
pub const CONSUMABLE_PREPARED_SHARE: &str = "consumable.prepared-share";

// bindingConditions
pub const BINDING_CONDITIONS_BOUND_WHEN_READY: &str = "binding-conditions.bound-when-ready";

// deviceStatus
pub const DEVICE_STATUS_REPORTED: &str = "device-status.reported";

// deviceTaints
pub const TAINTS_UNHEALTHY_KEPT_OFF: &str = "taints.unhealthy-kept-off";
pub const TAINTS_RULE_EVICTS: &str = "taints.rule-evicts";

// extendedResource
pub const EXTENDED_RESOURCE_PREPARED: &str = "extended-resource.prepared";
pub const EXTENDED_RESOURCE_CLAIM_DELETED: &str = "extended-resource.claim-deleted";

// resourceHealth
pub const HEALTH_POD_STATUS: &str = "health.pod-status";

// driverRestart
pub const DRIVER_RESTART_WORKLOAD_KEEPS_DEVICES: &str = "driver.restart.workload-keeps-devices";
pub const DRIVER_RESTART_NEW_CLAIMS_WORK: &str = "driver.restart.new-claims-work";
pub const DRIVER_RESTART_SLICES_KEPT: &str = "driver.restart.slices-kept";
pub const DRIVER_RESTART_NO_LEAKS: &str = "driver.restart.no-leaks";
pub const DRIVER_UPGRADE_ROLLING: &str = "driver.upgrade.rolling";
pub const DRIVER_UPGRADE_FAILED: &str = "driver.upgrade.failed";

// driverOutage
pub const DRIVER_RESTART_LONG_OUTAGE: &str = "driver.restart.long-outage";

// nodeRestart
pub const NODE_RESTART_DRIVER_RECOVERS: &str = "node.restart.driver-recovers";

// nodeReboot
pub const NODE_REBOOT_WORKLOADS_RESUME: &str = "node.reboot.workloads-resume";

// nodeRemoval
pub const NODE_REMOVAL_SLICES_GONE: &str = "node.removal.slices-gone";
pub const NODE_REMOVAL_PODS_GONE: &str = "node.removal.pods-gone";
pub const NODE_REMOVAL_CLAIMS_DEALLOCATED: &str = "node.removal.claims-deallocated";
pub const NODE_REMOVAL_CAPACITY_ELSEWHERE: &str = "node.removal.capacity-elsewhere";

// versions
pub const VERSIONS_KUBERNETES: &str = "versions.kubernetes";
pub const VERSIONS_DRIVER: &str = "versions.driver";

// Driver contract (plugin tier): checked once per driver, independent of profiles.
pub const PLUGIN_REGISTRATION_INFO: &str = "plugin.registration.info";
pub const PLUGIN_REGISTRATION_V1: &str = "plugin.registration.v1";
pub const PLUGIN_REGISTRATION_RECOVERS: &str = "plugin.registration.recovers";
pub const PLUGIN_SLICES_MATCH_INVENTORY: &str = "plugin.slices.match-inventory";
pub const PLUGIN_SLICES_OWNED_BY_NODE: &str = "plugin.slices.owned-by-node";
pub const PLUGIN_SLICES_RECREATED: &str = "plugin.slices.recreated";
pub const PLUGIN_SLICES_FOLLOW_INVENTORY: &str = "plugin.slices.follow-inventory";
pub const PLUGIN_SLICES_OWN_NODE_ONLY: &str = "plugin.slices.own-node-only";
pub const PLUGIN_SLICES_TAINTS_UNHEALTHY: &str = "plugin.slices.taints-unhealthy";
pub const PLUGIN_HEALTH_REPORTED: &str = "plugin.health.reported";
pub const PLUGIN_PREPARE_ALLOCATED_CLAIM: &str = "plugin.prepare.allocated-claim";
pub const PLUGIN_UNPREPARE_REMOVES_STATE: &str = "plugin.unprepare.removes-state";
pub const PLUGIN_PREPARE_IDEMPOTENT: &str = "plugin.prepare.idempotent";
pub const PLUGIN_PREPARE_RETRY: &str = "plugin.prepare.retry";
pub const PLUGIN_UNPREPARE_UNKNOWN_CLAIM: &str = "plugin.unprepare.unknown-claim";
pub const PLUGIN_PREPARE_REFUSES_FOREIGN_NODE: &str = "plugin.prepare.refuses-foreign-node";
pub const PLUGIN_PREPARE_CONCURRENT: &str = "plugin.prepare.concurrent";
pub const PLUGIN_PREPARE_OWN_RESULTS_ONLY: &str = "plugin.prepare.own-results-only";
pub const PLUGIN_PREPARE_KEYED_BY_UID: &str = "plugin.prepare.keyed-by-uid";
pub const PLUGIN_SHARES_INDEPENDENT: &str = "plugin.shares.independent";
pub const PLUGIN_RESTART_KEEPS_STATE: &str = "plugin.restart.keeps-state";
pub const PLUGIN_CDI_VALID: &str = "plugin.cdi.valid";
pub const PLUGIN_CDI_RESOLVABLE: &str = "plugin.cdi.resolvable";

/// What each guarantee holds, in one line: `cargo xtask list` prints it beside the ID, and a
/// test holds the table to the IDs the scenarios record.
pub const MEANINGS: &[(&str, &str)] = &[
    (
        CLAIM_COMPATIBLE_ALLOCATED,
        "the profile's claim is allocated within the promised time (its pod running is `workload.sees-devices`)",
    ),
    (WORKLOAD_SEES_DEVICES, "the workload's container sees exactly the allocated devices"),
    (
        CLAIM_IMPOSSIBLE_UNKNOWN_CLASS,
        "a claim for a DeviceClass that does not exist stays pending, its pod unschedulable",
    ),
    (CLAIM_IMPOSSIBLE_SELECTOR, "a claim whose selector matches no device stays pending, its pod unschedulable"),
    (CLAIM_IMPOSSIBLE_COUNT, "a claim for one device more than the largest node has stays pending"),
    (CLAIM_IMPOSSIBLE_CAPACITY, "a claim for more capacity than any device has stays pending"),
    (
        CLAIM_IMPOSSIBLE_EXPLAINED,
        "each impossible claim's message and `explain` name its cause, and the fixed claim schedules",
    ),
    (ISOLATION_EXCLUSIVE, "no device is allocated to two claims"),
    (ISOLATION_SHARED, "one claim is used by several containers and pods at once"),
    (
        LIMITS_MAX_DEVICES_PER_CLAIM,
        "a claim for the promised device count is allocated that many devices and its pod runs",
    ),
    (CAPACITY_RECOVERED, "with every device in use the next pod waits, and runs once one is released"),
    (RETENTION_TEMPLATE_CLAIM_DELETED, "a claim made from a template is deleted with its pod"),
    (RETENTION_STANDALONE_CLAIM_DEALLOCATED, "a standalone claim outlives its pod, unreserved and deallocated"),
    (LIFECYCLE_UNPREPARED, "a deleted pod's claims are unprepared: the kubelet's DRA checkpoint no longer lists them"),
    (LIFECYCLE_CONTAINER_RESTART, "a container that exits and restarts keeps its claim and sees its devices again"),
    (LIFECYCLE_PREPARED_AND_NEW, "a pod with a claim prepared on its node already and a new one runs and sees both"),
    (
        LIFECYCLE_FORCE_DELETE,
        "a force-deleted pod's claim is unprepared though its object is gone, and a new claim of its name then runs",
    ),
    (
        CONFIG_CLASS_AND_CLAIM,
        "the class's and the claim's opaque configuration reach the container, the claim's winning",
    ),
    (CONFIG_PER_REQUEST, "each container gets only its request's devices and configuration"),
    (DRIVERS_COEXIST, "beside a second driver on one node, a claim with devices of both runs and unprepares"),
    (
        PRIORITIZED_CHOSEN_SUBREQUEST,
        "a firstAvailable request gets the first alternative that fits, and the container naming the request gets its device with the request's configuration",
    ),
    (
        ADMIN_ACCESS_IN_USE_DEVICE,
        "an admin-access claim gets and runs with a device in use, and the workload using it keeps running",
    ),
    (
        ADMIN_ACCESS_NAMESPACE_LABEL,
        "an admin-access claim outside a namespace labelled for admin access is refused by the API",
    ),
    (
        PARTITIONABLE_COUNTERS_RESPECTED,
        "partitions of one device are never allocated together beyond what the device has (its shared counters)",
    ),
    (
        PARTITIONABLE_CAPACITY_RESTORED,
        "freeing the partition that holds a device's counters lets a waiting pod have a part of it",
    ),
    (PARTITIONABLE_PREPARED_PARTITION, "the container of a partition's claim sees that partition, not its device"),
    (
        CONSUMABLE_SHARED,
        "claims share one device by its capacity, each with its own share, never beyond the capacity, a claim that asks for no amount getting the policy's default",
    ),
    (
        BINDING_CONDITIONS_BOUND_WHEN_READY,
        "a pod whose device needs the driver to get it ready is bound only once the driver has set its binding conditions True in the claim's status, within the promised time",
    ),
    (
        CONSUMABLE_PREPARED_SHARE,
        "the container of each share sees the device with its own share ID and the capacity allocated to it",
    ),
    (
        DEVICE_STATUS_REPORTED,
        "the driver reports each device it prepared in the claim's status.devices, with the conditions the profile documents",
    ),
    (
        TAINTS_UNHEALTHY_KEPT_OFF,
        "a device that turns unhealthy under a running driver is kept from new claims unless they tolerate its taint",
    ),
    (
        TAINTS_RULE_EVICTS,
        "an administrator's NoExecute DeviceTaintRule on a device evicts the pod using it, with the API's reason",
    ),
    (
        EXTENDED_RESOURCE_PREPARED,
        "a pod asking for devices as an extended resource runs, its status names the claim made for it, and each container sees its own request's devices",
    ),
    (EXTENDED_RESOURCE_CLAIM_DELETED, "the claim made for a pod's extended resources goes with the pod"),
    (
        HEALTH_POD_STATUS,
        "a device of a running pod that turns unhealthy shows as Unhealthy in the pod's allocatedResourcesStatus within the promised time",
    ),
    (DRIVER_RESTART_WORKLOAD_KEEPS_DEVICES, "running pods keep their devices across a driver restart"),
    (DRIVER_RESTART_NEW_CLAIMS_WORK, "claims made after a driver restart are prepared and run"),
    (DRIVER_RESTART_SLICES_KEPT, "a restarting driver leaves its slices in place: the devices never vanish"),
    (DRIVER_RESTART_NO_LEAKS, "a claim prepared before a restart leaves nothing behind once its pod goes"),
    (
        DRIVER_UPGRADE_ROLLING,
        "through a rolling update (a new instance beside the old, then the old gone) the slices stay as they are, \
         pods keep their devices, and the new instance prepares new claims and unprepares the old ones",
    ),
    (
        DRIVER_UPGRADE_FAILED,
        "a new instance that registers and goes again (a failed update) leaves the old one serving: the same \
         slices, new claims run",
    ),
    (
        DRIVER_RESTART_LONG_OUTAGE,
        "after an outage past the kubelet's 30 s wipe the same devices return and pods proceed",
    ),
    (
        NODE_RESTART_DRIVER_RECOVERS,
        "across a kubelet restart the devices are published again and running pods keep theirs",
    ),
    (
        NODE_REBOOT_WORKLOADS_RESUME,
        "after a node reboot (CDI specs gone, checkpoints kept) the pods run again with their devices",
    ),
    (NODE_REMOVAL_SLICES_GONE, "a removed node's slices go"),
    (NODE_REMOVAL_PODS_GONE, "a removed node's pods go"),
    (NODE_REMOVAL_CLAIMS_DEALLOCATED, "a removed node's claims are deallocated"),
    (NODE_REMOVAL_CAPACITY_ELSEWHERE, "after a node removal a new pod gets devices on another node"),
    (VERSIONS_KUBERNETES, "the cluster's Kubernetes version meets the profile's requirement"),
    (VERSIONS_DRIVER, "the driver's stated version meets the profile's requirement"),
    (
        PLUGIN_REGISTRATION_INFO,
        "GetInfo names a DRA plugin of the driver, its socket and a DRAPlugin service the kubelet takes (v1 or v1beta1)",
    ),
    (PLUGIN_REGISTRATION_V1, "GetInfo offers the v1 DRAPlugin service"),
    (
        PLUGIN_REGISTRATION_RECOVERS,
        "a plugin the kubelet refused stays up with its sockets and registers at the kubelet's next attempt",
    ),
    (PLUGIN_SLICES_MATCH_INVENTORY, "the node's slices hold exactly the devices of the driver's inventory"),
    (
        PLUGIN_SLICES_OWNED_BY_NODE,
        "slices follow the node-local pool rules: owned by the Node, one generation, right count",
    ),
    (PLUGIN_SLICES_RECREATED, "deleted slices are published again without a driver restart"),
    (
        PLUGIN_SLICES_FOLLOW_INVENTORY,
        "a changed inventory is published under a new pool generation, with nothing of the old set left",
    ),
    (
        PLUGIN_SLICES_OWN_NODE_ONLY,
        "the kubelet plugin's account, as on one node, may write that node's slices and no other node's nor cluster-wide ones",
    ),
    (
        PLUGIN_SLICES_TAINTS_UNHEALTHY,
        "a device the driver finds unhealthy is published with a NoSchedule or NoExecute taint, the others without",
    ),
    (
        PLUGIN_HEALTH_REPORTED,
        "a driver that offers DRAResourceHealth reports a device turning unhealthy, and sound again, under its own name and pool",
    ),
    (PLUGIN_PREPARE_ALLOCATED_CLAIM, "prepare returns each allocated device with its CDI IDs"),
    (PLUGIN_UNPREPARE_REMOVES_STATE, "unprepare succeeds and leaves no CDI spec of the claim"),
    (PLUGIN_PREPARE_IDEMPOTENT, "preparing the same claim twice gives the same answer"),
    (
        PLUGIN_PREPARE_RETRY,
        "a prepare that failed (the CDI dir could not be written) succeeds when retried, with CDI devices that resolve",
    ),
    (PLUGIN_UNPREPARE_UNKNOWN_CLAIM, "unprepare of a claim never prepared is not an error"),
    (PLUGIN_PREPARE_REFUSES_FOREIGN_NODE, "a claim allocated on another node's pool is refused with a per-claim error"),
    (PLUGIN_PREPARE_CONCURRENT, "claims prepared at the same time all succeed, each with its own devices"),
    (PLUGIN_PREPARE_OWN_RESULTS_ONLY, "of a claim with devices of several drivers, the driver prepares only its own"),
    (PLUGIN_PREPARE_KEYED_BY_UID, "two claims of one name are prepared side by side, each with its own devices"),
    (
        PLUGIN_SHARES_INDEPENDENT,
        "two shares of one device are prepared side by side, each with its own CDI devices and share, and unpreparing one leaves the other prepared",
    ),
    (PLUGIN_RESTART_KEEPS_STATE, "a restarted driver answers prepare as before and unprepares what it prepared"),
    (PLUGIN_CDI_VALID, "the CDI spec files the driver writes are valid"),
    (PLUGIN_CDI_RESOLVABLE, "every CDI ID prepare returns resolves to a device of a spec on the node"),
];

/// What `id` holds, in one line.
pub fn meaning(id: &str) -> Option<&'static str> {
    MEANINGS.iter().find(|(i, _)| *i == id).map(|(_, m)| *m)
}
