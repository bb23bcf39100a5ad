//! The profile as the suite uses it: parsed, validated and typed. What each guarantee family
//! publishes is declared once, in `family`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, CapacityRequirements, DeviceClaim, DeviceClaimConfiguration, DeviceClass, DeviceClassSpec,
    DeviceConstraint, DeviceRequest, DeviceSelector, ExactDeviceRequest, OpaqueDeviceConfiguration, ResourceClaimSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
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
    pub claim: ClaimShape,
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

/// The claim that workloads of this profile make.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimShape {
    pub requests: Vec<Request>,
    pub constraints: Vec<Constraint>,
    /// Opaque configuration for the driver, passed as the claim's `config[].opaque.parameters`.
    pub config: Option<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    pub name: String,
    pub count: i64,
    /// CEL expressions, all of which a device must satisfy (on top of the class's).
    pub selectors: Vec<String>,
    /// Minimum capacity per device (`memory: 20Gi`), as quantities.
    pub capacity: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Constraint {
    /// The requests it applies to; empty means all of them.
    pub requests: Vec<String>,
    /// A fully qualified attribute (`gpu.mock.dracheck.io/model`) all devices must share.
    pub match_attribute: String,
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
    pub driver_restart: Option<DriverRestart>,
    pub node_restart: Option<NodeRestart>,
    pub node_removal: Option<NodeRemoval>,
    pub versions: Option<Versions>,
}

/// A compatible claim is allocated and its pod runs within `within_seconds`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Allocation {
    #[serde(deserialize_with = "super::file::positive_seconds")]
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
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

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Isolation {
    pub mode: IsolationMode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum IsolationMode {
    /// Devices of one claim are never given to another claim.
    Exclusive,
    /// One claim is used by several containers or pods at once.
    Shared,
}

/// A claim for more than `max_devices_per_claim` devices is refused (never allocated).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    pub max_devices_per_claim: i64,
}

/// After the devices are exhausted and one claim is released, a waiting pod runs within
/// `within_seconds`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CapacityRecovery {
    #[serde(deserialize_with = "super::file::positive_seconds")]
    pub within_seconds: u64,
}

impl CapacityRecovery {
    pub fn within(&self) -> Duration {
        Duration::from_secs(self.within_seconds)
    }
}

/// Template claims are deleted with their pod; standalone claims are kept, `reservedFor`
/// emptied and the allocation cleared; prepared state is undone.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Retention {}

/// The driver is down for at most `max_downtime_seconds` (shorter than the kubelet's 30 s
/// slice wipe delay): running workloads keep their devices, new claims work afterwards, and
/// the slices are not wiped.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DriverRestart {
    #[serde(default = "super::file::default_downtime", deserialize_with = "super::file::downtime_seconds")]
    pub max_downtime_seconds: u64,
}

impl DriverRestart {
    pub fn max_downtime(&self) -> Duration {
        Duration::from_secs(self.max_downtime_seconds)
    }
}

/// A kubelet (node) restart, with containers and checkpoints kept: the driver publishes its
/// devices again after the kubelet's start-up wipe, running pods keep their claims, a claim
/// prepared before the restart is unprepared when its pod goes, and new claims are prepared.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NodeRestart {}

/// A removed node's slices and pods go away, its claims are deallocated, and capacity on
/// other nodes is used instead.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NodeRemoval {}

/// The Kubernetes and driver versions the profile is published for.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Versions {
    #[serde(default)]
    pub kubernetes: Option<VersionReq>,
    #[serde(default)]
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
        let requests = self
            .claim
            .requests
            .iter()
            .map(|r| DeviceRequest {
                name: r.name.clone(),
                exactly: Some(ExactDeviceRequest {
                    device_class_name: self.class_name().to_string(),
                    allocation_mode: Some("ExactCount".into()),
                    count: Some(r.count),
                    selectors: (!r.selectors.is_empty()).then(|| {
                        r.selectors
                            .iter()
                            .map(|e| DeviceSelector { cel: Some(CELDeviceSelector { expression: e.clone() }) })
                            .collect()
                    }),
                    capacity: (!r.capacity.is_empty()).then(|| CapacityRequirements {
                        requests: Some(r.capacity.iter().map(|(k, v)| (k.clone(), Quantity(v.clone()))).collect()),
                    }),
                    ..ExactDeviceRequest::default()
                }),
                first_available: None,
            })
            .collect();
        let constraints = self
            .claim
            .constraints
            .iter()
            .map(|c| DeviceConstraint {
                requests: (!c.requests.is_empty()).then(|| c.requests.clone()),
                match_attribute: Some(c.match_attribute.clone()),
                ..DeviceConstraint::default()
            })
            .collect::<Vec<_>>();
        let config = self.claim.config.as_ref().map(|parameters| {
            vec![DeviceClaimConfiguration {
                requests: None,
                opaque: Some(OpaqueDeviceConfiguration {
                    driver: self.driver.clone(),
                    parameters: RawExtension(parameters.clone()),
                }),
            }]
        });
        ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(requests),
                constraints: (!constraints.is_empty()).then_some(constraints),
                config,
            }),
        }
    }

    /// How many devices one claim of this profile takes.
    pub fn total_devices(&self) -> i64 {
        self.claim.requests.iter().map(|r| r.count).sum()
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
