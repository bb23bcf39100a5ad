//! The profile as the suite uses it: parsed, validated and typed. What each guarantee family
//! publishes is declared once, in `family`.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use dracheck_objects::ClaimBuilder;
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceClassSpec, ResourceClaimSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::error::ProfileError;
use super::{VersionReq, family, ids, lookup};

/// A parsed, validated profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    /// The file it was read from.
    pub path: PathBuf,
    pub metadata: Metadata,
    /// The DRA driver name (`gpu.mock.dracheck.io`).
    pub driver: String,
    pub device_class: ClassSource,
    /// The claim workloads of this profile make, as the API takes it: every request names
    /// the profile's class, counts and allocation modes are filled in.
    pub claim: ResourceClaimSpec,
    pub guarantees: Guarantees,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Metadata {
    /// The profile's name (`standard-inference`), as reports show it.
    pub name: String,
    pub description: String,
}

/// Where the profile's DeviceClass comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ClassSource {
    /// Created by the suite from the profile.
    Inline { name: String, spec: DeviceClassSpec },
    /// A class that already exists in the cluster (installed with the driver).
    Existing { name: String },
}

/// The guarantee families a profile publishes; a missing family is not checked.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Guarantees {
    pub allocation: Option<Allocation>,
    pub impossible: Option<Impossible>,
    pub isolation: Option<Isolation>,
    pub limits: Option<Limits>,
    pub capacity_recovery: Option<CapacityRecovery>,
    pub retention: Option<Retention>,
    pub config: Option<Config>,
    pub coexistence: Option<Coexistence>,
    pub prioritized_list: Option<PrioritizedList>,
    pub admin_access: Option<AdminAccess>,
    pub partitionable: Option<Partitionable>,
    pub device_status: Option<DeviceStatus>,
    pub device_taints: Option<DeviceTaints>,
    pub extended_resource: Option<ExtendedResource>,
    pub consumable_capacity: Option<ConsumableCapacity>,
    pub binding_conditions: Option<BindingConditions>,
    pub resource_health: Option<ResourceHealth>,
    pub driver_restart: Option<DriverRestart>,
    pub driver_outage: Option<DriverOutage>,
    pub node_restart: Option<NodeRestart>,
    pub node_reboot: Option<NodeReboot>,
    pub node_removal: Option<NodeRemoval>,
    pub versions: Option<Versions>,
}

/// A compatible claim is allocated and its pod runs within `withinSeconds`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Allocation {
    #[serde(deserialize_with = "super::file::positive_seconds")]
    #[schemars(schema_with = "super::file::schema::positive_seconds")]
    pub within_seconds: u64,
}

impl Allocation {
    pub fn within(&self) -> Duration {
        Duration::from_secs(self.within_seconds)
    }
}

/// Impossible claims stay pending, unallocated, with an actionable message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Impossible {
    pub variants: Vec<ImpossibleVariant>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ImpossibleVariant {
    /// The claim names a DeviceClass that does not exist.
    UnknownClass,
    /// A selector no device satisfies.
    SelectorMatchesNothing,
    /// More devices than any node has.
    CountAboveInventory,
    /// A minimum capacity no device has.
    CapacityTooLarge,
}

impl ImpossibleVariant {
    pub const ALL: [ImpossibleVariant; 4] = [
        ImpossibleVariant::UnknownClass,
        ImpossibleVariant::SelectorMatchesNothing,
        ImpossibleVariant::CountAboveInventory,
        ImpossibleVariant::CapacityTooLarge,
    ];

    /// The guarantee ID of this variant.
    pub fn id(self) -> &'static str {
        match self {
            ImpossibleVariant::UnknownClass => ids::CLAIM_IMPOSSIBLE_UNKNOWN_CLASS,
            ImpossibleVariant::SelectorMatchesNothing => ids::CLAIM_IMPOSSIBLE_SELECTOR,
            ImpossibleVariant::CountAboveInventory => ids::CLAIM_IMPOSSIBLE_COUNT,
            ImpossibleVariant::CapacityTooLarge => ids::CLAIM_IMPOSSIBLE_CAPACITY,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Isolation {
    pub mode: IsolationMode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum IsolationMode {
    /// Devices of one claim are never given to another claim.
    Exclusive,
    /// One claim is used by several containers or pods at once.
    Shared,
}

/// A claim for more than `maxDevicesPerClaim` devices is refused (never allocated).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    pub max_devices_per_claim: i64,
}

/// After the devices are exhausted and one claim is released, a waiting pod runs within
/// `withinSeconds`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CapacityRecovery {
    #[serde(deserialize_with = "super::file::positive_seconds")]
    #[schemars(schema_with = "super::file::schema::positive_seconds")]
    pub within_seconds: u64,
}

impl CapacityRecovery {
    pub fn within(&self) -> Duration {
        Duration::from_secs(self.within_seconds)
    }
}

/// Template claims are deleted with their pod; standalone claims are kept, `reservedFor`
/// emptied and the allocation cleared; prepared state is undone.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Retention {}

/// The driver's opaque configuration reaches the containers it is meant for: the class's and
/// the claim's (the claim's value where both set one), and per request only to the containers
/// that use that request.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {}

/// The driver shares a node and a claim with another driver: a claim with a request for a
/// device of each runs, each driver preparing only its own results, and both drivers' state of
/// it goes when the pod does.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Coexistence {}

/// A request may list alternatives (`firstAvailable`): the first that fits is allocated, the
/// result names it (`request/alternative`), and the driver prepares it with the configuration
/// given for that alternative (or for the whole request) and no other alternative's.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrioritizedList {}

/// A claim with `adminAccess` in a namespace labelled `resource.kubernetes.io/admin-access`
/// (monitoring, diagnostics) gets a device that a workload is using: the driver prepares it
/// without refusing and without disturbing that workload. Elsewhere the API refuses such a
/// claim.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdminAccess {}

/// The class's devices are partitions of physical devices that share their counters
/// (`sharedCounters`, as MIG slices share a GPU): the scheduler never allocates partitions that
/// together take more than the device has, freeing one makes room for a waiting pod, and the
/// driver prepares exactly the allocated partition. `whole` is a CEL selector for the
/// partitions that take a whole device; the others are its parts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Partitionable {
    pub whole: String,
}

/// The driver reports what it prepared in the claim's status (`status.devices`): within
/// `withinSeconds` of the pod running, an entry for each device allocated to the driver, with
/// each of `conditions` (condition types, e.g. `Ready`) `True`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeviceStatus {
    #[serde(default)]
    pub conditions: Vec<String>,
    #[serde(default = "DeviceStatus::default_seconds", deserialize_with = "super::file::positive_seconds")]
    #[schemars(schema_with = "super::file::schema::positive_seconds")]
    pub within_seconds: u64,
}

impl DeviceStatus {
    fn default_seconds() -> u64 {
        10
    }

    pub fn within(&self) -> Duration {
        Duration::from_secs(self.within_seconds)
    }
}

/// Claims share one device by one of its capacities (`allowMultipleAllocations`, consumable
/// capacity, as a GPU is shared by memory): pods whose claims each ask for `share` of
/// `capacity` run side by side on one device, each with its own share, until the next would
/// take more than the device has; a claim that asks for no amount gets the device's default;
/// and each container sees its own share and what it may use.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsumableCapacity {
    /// The capacity shares consume, as the slices name it (`memory`).
    #[serde(deserialize_with = "super::file::capacity_name")]
    #[schemars(schema_with = "super::file::schema::capacity_name")]
    pub capacity: String,
    /// What each claim asks for (`8Gi`).
    #[serde(deserialize_with = "super::file::quantity")]
    #[schemars(schema_with = "super::file::schema::quantity")]
    pub share: String,
}

/// Device taints do what they promise: an administrator's `NoExecute` DeviceTaintRule evicts
/// the pod on the device within `evictionWithinSeconds`; a device that turns unhealthy is
/// kept from claims that do not tolerate its taint.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeviceTaints {
    #[serde(default = "DeviceTaints::default_seconds", deserialize_with = "super::file::positive_seconds")]
    #[schemars(schema_with = "super::file::schema::positive_seconds")]
    pub eviction_within_seconds: u64,
}

impl DeviceTaints {
    fn default_seconds() -> u64 {
        30
    }

    pub fn eviction_within(&self) -> Duration {
        Duration::from_secs(self.eviction_within_seconds)
    }
}

/// Pods may ask for the class's devices as an extended resource (`resources.limits`): the
/// class's `extendedResourceName`, else `deviceclass.resource.kubernetes.io/<class>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExtendedResource {}

/// Device health reaches the pod (`allocatedResourcesStatus`): within `withinSeconds` of a
/// device of a running pod turning unhealthy, the pod's status shows it `Unhealthy`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResourceHealth {
    #[serde(default = "ResourceHealth::default_seconds", deserialize_with = "super::file::positive_seconds")]
    #[schemars(schema_with = "super::file::schema::positive_seconds")]
    pub within_seconds: u64,
}

impl ResourceHealth {
    fn default_seconds() -> u64 {
        30
    }

    pub fn within(&self) -> Duration {
        Duration::from_secs(self.within_seconds)
    }
}

/// The class's devices need the driver to get them ready before a pod may use them
/// (`bindingConditions`: a partition carved out, a device attached): the scheduler binds the
/// pod only once the driver has set each condition `True` in the claim's status, which must
/// happen within `withinSeconds` of the allocation.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BindingConditions {
    #[serde(default = "BindingConditions::default_seconds", deserialize_with = "super::file::positive_seconds")]
    #[schemars(schema_with = "super::file::schema::positive_seconds")]
    pub within_seconds: u64,
}

impl BindingConditions {
    fn default_seconds() -> u64 {
        30
    }

    pub fn within(&self) -> Duration {
        Duration::from_secs(self.within_seconds)
    }
}

/// The driver is down for at most `maxDowntimeSeconds` (shorter than the kubelet's 30 s
/// slice wipe delay): running workloads keep their devices, new claims work afterwards, and
/// the slices are not wiped.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DriverRestart {
    #[serde(default = "super::file::default_downtime", deserialize_with = "super::file::downtime_seconds")]
    #[schemars(schema_with = "super::file::schema::downtime_seconds")]
    pub max_downtime_seconds: u64,
}

impl DriverRestart {
    pub fn max_downtime(&self) -> Duration {
        Duration::from_secs(self.max_downtime_seconds)
    }
}

/// The driver down longer than the kubelet's slice wipe delay: the node's slices are wiped,
/// and once the driver is back they are published again as they were; running pods keep
/// their devices, and a claim made during the outage is allocated and prepared afterwards.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DriverOutage {}

/// A kubelet (node) restart, with containers and checkpoints kept: the driver publishes its
/// devices again after the kubelet's start-up wipe, running pods keep their claims, a claim
/// prepared before the restart is unprepared when its pod goes, and new claims are prepared.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeRestart {}

/// A node reboot: every container gone, the CDI spec dir (tmpfs) emptied, kubelet and driver
/// started again, checkpoints on disk kept. The pods that come back start again with the
/// devices of their claims, which the driver prepares anew (its CDI specs re-created), and
/// deleting them afterwards leaves no CDI spec behind.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeReboot {}

/// A removed node's slices and pods go away, its claims are deallocated, and capacity on
/// other nodes is used instead.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeRemoval {}

/// The Kubernetes and driver versions the profile is published for.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Versions {
    /// The Kubernetes versions (">=1.34").
    #[serde(default)]
    #[schemars(schema_with = "super::file::schema::version_requirement")]
    pub kubernetes: Option<VersionReq>,
    /// The driver versions (">=0.4").
    #[serde(default)]
    #[schemars(schema_with = "super::file::schema::version_requirement")]
    pub driver: Option<VersionReq>,
}

impl Profile {
    /// The DeviceClass the profile's claims name.
    pub fn class_name(&self) -> &str {
        match &self.device_class {
            ClassSource::Inline { name, .. } | ClassSource::Existing { name } => name,
        }
    }

    /// The inline class as an object to create, or `None` when the profile uses an existing
    /// class.
    pub fn device_class(&self) -> Option<DeviceClass> {
        match &self.device_class {
            ClassSource::Inline { name, spec } => Some(DeviceClass {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    labels: Some(
                        [(dracheck_objects::MANAGED_BY.0.to_string(), dracheck_objects::MANAGED_BY.1.to_string())]
                            .into(),
                    ),
                    ..ObjectMeta::default()
                },
                spec: Some(spec.clone()),
            }),
            ClassSource::Existing { .. } => None,
        }
    }

    /// The claim workloads of this profile make, as the API takes it.
    pub fn claim_spec(&self) -> ResourceClaimSpec {
        self.claim.clone()
    }

    /// The profile's claim, to derive variants from.
    pub fn claim(&self) -> ClaimBuilder {
        ClaimBuilder::from_spec(self.claim.clone())
    }

    /// How many devices one claim of this profile takes; `None` when a request takes all
    /// matching devices (`allocationMode: All`). A `firstAvailable` request counts its
    /// largest alternative.
    pub fn total_devices(&self) -> Option<i64> {
        devices_wanted(&self.claim)
    }

    /// The guarantee IDs the profile publishes, in the order of [`family::FAMILIES`].
    pub fn guarantee_ids(&self) -> Vec<&'static str> {
        family::FAMILIES.iter().flat_map(|f| f.published(&self.guarantees)).collect()
    }

    /// Whether the profile is for `driver_name` (the DRA driver name, `gpu.mock.dracheck.io`).
    pub fn check_driver(&self, driver_name: &str) -> Result<(), ProfileError> {
        if self.driver == driver_name {
            return Ok(());
        }
        let suggestion = match lookup::shipping_driver(&self.driver) {
            Some(short) => format!("--driver {short}"),
            None => format!("--driver-bin PATH --driver-name {}", self.driver),
        };
        Err(ProfileError::WrongDriver {
            profile: self.metadata.name.clone(),
            path: self.path.clone(),
            profile_driver: self.driver.clone(),
            driver: driver_name.to_string(),
            suggestion,
        })
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.metadata.name, self.path.display())
    }
}

/// See [`Profile::total_devices`].
pub(super) fn devices_wanted(spec: &ResourceClaimSpec) -> Option<i64> {
    let count = |mode: &Option<String>, count: Option<i64>| match mode.as_deref() {
        Some("All") => None,
        _ => Some(count.unwrap_or(1)),
    };
    let requests = spec.devices.as_ref().and_then(|d| d.requests.as_ref());
    requests.into_iter().flatten().try_fold(0, |sum, r| {
        let n = match (&r.exactly, &r.first_available) {
            (Some(e), _) => count(&e.allocation_mode, e.count)?,
            (None, Some(alternatives)) => alternatives
                .iter()
                .map(|a| count(&a.allocation_mode, a.count))
                .collect::<Option<Vec<i64>>>()?
                .into_iter()
                .max()
                .unwrap_or(0),
            (None, None) => 0,
        };
        Some(sum + n)
    })
}
