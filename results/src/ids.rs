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

// config
pub const CONFIG_CLASS_AND_CLAIM: &str = "config.class-and-claim";
pub const CONFIG_PER_REQUEST: &str = "config.per-request";

// coexistence
pub const DRIVERS_COEXIST: &str = "drivers.coexist";

// driverRestart
pub const DRIVER_RESTART_WORKLOAD_KEEPS_DEVICES: &str = "driver.restart.workload-keeps-devices";
pub const DRIVER_RESTART_NEW_CLAIMS_WORK: &str = "driver.restart.new-claims-work";
pub const DRIVER_RESTART_SLICES_KEPT: &str = "driver.restart.slices-kept";
pub const DRIVER_RESTART_NO_LEAKS: &str = "driver.restart.no-leaks";

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
pub const PLUGIN_SLICES_MATCH_INVENTORY: &str = "plugin.slices.match-inventory";
pub const PLUGIN_SLICES_OWNED_BY_NODE: &str = "plugin.slices.owned-by-node";
pub const PLUGIN_SLICES_RECREATED: &str = "plugin.slices.recreated";
pub const PLUGIN_PREPARE_ALLOCATED_CLAIM: &str = "plugin.prepare.allocated-claim";
pub const PLUGIN_UNPREPARE_REMOVES_STATE: &str = "plugin.unprepare.removes-state";
pub const PLUGIN_PREPARE_IDEMPOTENT: &str = "plugin.prepare.idempotent";
pub const PLUGIN_UNPREPARE_UNKNOWN_CLAIM: &str = "plugin.unprepare.unknown-claim";
pub const PLUGIN_PREPARE_REFUSES_FOREIGN_NODE: &str = "plugin.prepare.refuses-foreign-node";
pub const PLUGIN_PREPARE_CONCURRENT: &str = "plugin.prepare.concurrent";
pub const PLUGIN_PREPARE_OWN_RESULTS_ONLY: &str = "plugin.prepare.own-results-only";
pub const PLUGIN_PREPARE_KEYED_BY_UID: &str = "plugin.prepare.keyed-by-uid";
pub const PLUGIN_RESTART_KEEPS_STATE: &str = "plugin.restart.keeps-state";
pub const PLUGIN_CDI_VALID: &str = "plugin.cdi.valid";
pub const PLUGIN_CDI_RESOLVABLE: &str = "plugin.cdi.resolvable";
