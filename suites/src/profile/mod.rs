//! Device profiles: what a platform publishes about a class of devices, and what the suite
//! checks. A profile is a DeviceClass (inline, created by the suite, or an existing one), the
//! claim shape workloads use, and the guarantees that must hold, each with its parameters.
//! The format is described in `profiles/README.md`; shipped profiles live in
//! `profiles/<driver>/<name>.yaml`.
//!
//! Parsing is strict: unknown fields, wrongly typed values and contradictions (a constraint
//! naming a request that does not exist, a limit below the claim's own size, …) are errors
//! that name the file, the line and the field.

pub mod ids;
mod located;
mod version;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, CapacityRequirements, DeviceClaim, DeviceClaimConfiguration, DeviceClass, DeviceClassSpec,
    DeviceConstraint, DeviceRequest, DeviceSelector, ExactDeviceRequest, OpaqueDeviceConfiguration, ResourceClaimSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use serde_saphyr::{Location, Spanned};

use located::Node;
pub use version::{Version, VersionReq};

pub const API_VERSION: &str = "dracheck.io/v1alpha1";
pub const KIND: &str = "DeviceProfile";
/// How long the kubelet waits after a plugin unregisters before it wipes the node's slices;
/// a driver restart guarantee is only about restarts shorter than this.
pub const KUBELET_SLICE_WIPE_DELAY_SECONDS: u64 = 30;
const FORMAT_DOC: &str = "profiles/README.md";

// ---------------------------------------------------------------------------------------------
// Errors

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error(
        "cannot read the profile file {path}: {source}. Pass an existing file or the name of a shipped profile with --profile."
    )]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "the profile file {path} is not UTF-8 text: line {line} has a byte sequence that is not UTF-8 (at byte \
         {offset} of the file). Profiles are YAML in UTF-8: save it as UTF-8 (e.g. `iconv -f latin1 -t utf-8 \
         {path} > fixed.yaml`) and pass that file with --profile."
    )]
    NotUtf8 { path: PathBuf, line: usize, offset: usize },

    #[error(
        "unknown profile {name:?} for driver {driver}: {}.{} Pass one of them, or the path of a profile file, with --profile.",
        available_text(.available, .driver),
        other_drivers_text(.elsewhere)
    )]
    NotFound {
        name: String,
        /// The driver's short name (`mock`).
        driver: String,
        /// The names of the driver's shipped profiles.
        available: Vec<String>,
        /// Other drivers that ship a profile of that name.
        elsewhere: Vec<String>,
    },

    #[error(
        "invalid profile {path}, line {line}, column {column}, field {field}: {message} (the format: {FORMAT_DOC})"
    )]
    Invalid { path: PathBuf, line: u64, column: u64, field: String, message: String },

    #[error(
        "profile {profile} ({path}) is for driver {profile_driver}, not {driver}: pass --profile with a profile for \
         {driver} or pick {suggestion}"
    )]
    WrongDriver {
        profile: String,
        path: PathBuf,
        profile_driver: String,
        driver: String,
        /// How to select the profile's driver instead: `--driver mock`, or for a driver without
        /// shipped profiles `--driver-bin PATH --driver-name NAME`.
        suggestion: String,
    },
}

fn available_text(available: &[String], driver: &str) -> String {
    if available.is_empty() {
        format!("dracheck ships no profiles for {driver} (profiles/{driver}/ is empty or missing)")
    } else {
        format!("the shipped profiles of {driver} are {}", available.join(", "))
    }
}

fn other_drivers_text(elsewhere: &[String]) -> String {
    if elsewhere.is_empty() {
        String::new()
    } else {
        format!(" A profile of that name ships for --driver {}.", elsewhere.join(", --driver "))
    }
}

impl ProfileError {
    /// Every profile error is bad input.
    pub fn exit_code(&self) -> i32 {
        2
    }
}

// ---------------------------------------------------------------------------------------------
// The profile, as the suite uses it

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
    #[serde(deserialize_with = "positive_seconds")]
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
    #[serde(deserialize_with = "positive_seconds")]
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
    #[serde(default = "default_downtime", deserialize_with = "downtime_seconds")]
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

/// A whole number, with a message that says what was written instead.
fn whole_number<'de, D: Deserializer<'de>>(d: D, what: &str) -> Result<i64, D::Error> {
    let unexpected = match Node::deserialize(d)? {
        Node::Int(n) => return Ok(n),
        Node::UInt(n) => return i64::try_from(n).map_err(|_| de::Error::custom(format!("{n} is too large"))),
        Node::Str(s) => format!("string {s:?}"),
        Node::Float(f) => format!("floating point {f}"),
        Node::Bool(b) => format!("boolean {b}"),
        Node::Null => "null".into(),
        Node::Seq(_) => "sequence".into(),
        Node::Map(_) => "map".into(),
    };
    Err(de::Error::custom(format!("invalid type: {unexpected}, expected {what}")))
}

fn positive_seconds<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match whole_number(d, "a whole number of seconds")? {
        n if n < 1 => Err(de::Error::custom(format!("must be at least 1 (seconds), got {n}"))),
        n => Ok(n as u64),
    }
}

/// A whole number in the file (counts, limits).
#[derive(Debug, Clone, Copy)]
struct Whole(i64);

impl<'de> Deserialize<'de> for Whole {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        whole_number(d, "a whole number").map(Whole)
    }
}

fn default_downtime() -> u64 {
    10
}

fn downtime_seconds<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let n = whole_number(d, "a whole number of seconds")?;
    if (1..KUBELET_SLICE_WIPE_DELAY_SECONDS as i64).contains(&n) {
        Ok(n as u64)
    } else {
        Err(de::Error::custom(format!(
            "must be between 1 and {} seconds: a quick restart is one shorter than the kubelet's \
             {KUBELET_SLICE_WIPE_DELAY_SECONDS} s slice wipe delay",
            KUBELET_SLICE_WIPE_DELAY_SECONDS - 1
        )))
    }
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

    /// The guarantee IDs the profile publishes, in the order of `ids::ALL`.
    pub fn guarantee_ids(&self) -> Vec<&'static str> {
        let g = &self.guarantees;
        let mut out = Vec::new();
        if g.allocation.is_some() {
            out.extend([ids::CLAIM_COMPATIBLE_ALLOCATED, ids::WORKLOAD_SEES_DEVICES]);
        }
        if let Some(impossible) = &g.impossible {
            for variant in ImpossibleVariant::ALL {
                if impossible.variants.contains(&variant) {
                    out.push(variant.id());
                }
            }
            out.push(ids::CLAIM_IMPOSSIBLE_EXPLAINED);
        }
        if let Some(isolation) = &g.isolation {
            out.push(match isolation.mode {
                IsolationMode::Exclusive => ids::ISOLATION_EXCLUSIVE,
                IsolationMode::Shared => ids::ISOLATION_SHARED,
            });
        }
        if g.limits.is_some() {
            out.push(ids::LIMITS_MAX_DEVICES_PER_CLAIM);
        }
        if g.capacity_recovery.is_some() {
            out.push(ids::CAPACITY_RECOVERED);
        }
        if g.retention.is_some() {
            out.extend([
                ids::RETENTION_TEMPLATE_CLAIM_DELETED,
                ids::RETENTION_STANDALONE_CLAIM_DEALLOCATED,
                ids::LIFECYCLE_UNPREPARED,
            ]);
        }
        if g.driver_restart.is_some() {
            out.extend([
                ids::DRIVER_RESTART_WORKLOAD_KEEPS_DEVICES,
                ids::DRIVER_RESTART_NEW_CLAIMS_WORK,
                ids::DRIVER_RESTART_SLICES_KEPT,
            ]);
        }
        if g.node_restart.is_some() {
            out.push(ids::NODE_RESTART_DRIVER_RECOVERS);
        }
        if g.node_removal.is_some() {
            out.extend([
                ids::NODE_REMOVAL_SLICES_GONE,
                ids::NODE_REMOVAL_PODS_GONE,
                ids::NODE_REMOVAL_CLAIMS_DEALLOCATED,
                ids::NODE_REMOVAL_CAPACITY_ELSEWHERE,
            ]);
        }
        if let Some(versions) = &g.versions {
            if versions.kubernetes.is_some() {
                out.push(ids::VERSIONS_KUBERNETES);
            }
            if versions.driver.is_some() {
                out.push(ids::VERSIONS_DRIVER);
            }
        }
        out
    }

    /// Whether the profile is for `driver_name` (the DRA driver name, `gpu.mock.dracheck.io`).
    pub fn check_driver(&self, driver_name: &str) -> Result<(), ProfileError> {
        if self.driver == driver_name {
            return Ok(());
        }
        let suggestion = match shipping_driver(&self.driver) {
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

// ---------------------------------------------------------------------------------------------
// Finding profiles

/// The folder of shipped profiles: `profiles/` at the workspace root.
pub fn profiles_dir() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).join("profiles")
}

/// The shipped profiles of a driver (`profiles/<driver_short>/*.yaml`), sorted.
pub fn shipped(driver_short: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(profiles_dir().join(driver_short)) else { return Vec::new() };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    out.sort();
    out
}

fn stem(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The short names of drivers with shipped profiles (`mock`, …), sorted.
fn shipping_drivers() -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(profiles_dir()) else { return Vec::new() };
    let mut out: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// The short name under which profiles for `driver_name` ship, if any.
fn shipping_driver(driver_name: &str) -> Option<String> {
    shipping_drivers()
        .into_iter()
        .find(|short| shipped(short).iter().any(|p| load(p).is_ok_and(|profile| profile.driver == driver_name)))
}

/// A `--profile` argument: a path to a profile file, or the name of one of the driver's shipped
/// profiles (`standard-inference`).
pub fn resolve(arg: &str, driver_short: &str) -> Result<PathBuf, ProfileError> {
    let as_path = Path::new(arg);
    let looks_like_path = arg.contains(std::path::MAIN_SEPARATOR)
        || arg.contains('/')
        || as_path.extension().is_some_and(|e| e == "yaml" || e == "yml");
    if as_path.is_file() {
        return Ok(as_path.to_path_buf());
    }
    if looks_like_path {
        // Let the read say what is wrong with it.
        return match std::fs::metadata(as_path) {
            Err(source) => Err(ProfileError::Read { path: as_path.to_path_buf(), source }),
            Ok(_) => Err(ProfileError::Read {
                path: as_path.to_path_buf(),
                source: std::io::Error::other("not a regular file"),
            }),
        };
    }
    let available = shipped(driver_short);
    if let Some(found) = available.iter().find(|p| stem(p) == arg) {
        return Ok(found.clone());
    }
    let elsewhere = shipping_drivers()
        .into_iter()
        .filter(|short| short != driver_short && shipped(short).iter().any(|p| stem(p) == arg))
        .collect();
    Err(ProfileError::NotFound {
        name: arg.to_string(),
        driver: driver_short.to_string(),
        available: available.iter().map(|p| stem(p)).collect(),
        elsewhere,
    })
}

/// Resolves `arg` (see [`resolve`]), loads it and checks that it is for `driver_name`.
pub fn load_for(arg: &str, driver_short: &str, driver_name: &str) -> Result<Profile, ProfileError> {
    let profile = load(&resolve(arg, driver_short)?)?;
    profile.check_driver(driver_name)?;
    Ok(profile)
}

// ---------------------------------------------------------------------------------------------
// The file, as written

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ProfileFile {
    api_version: Spanned<String>,
    kind: Spanned<String>,
    metadata: MetadataFile,
    driver: Spanned<String>,
    device_class: Spanned<DeviceClassFile>,
    claim: ClaimFile,
    guarantees: Spanned<GuaranteesFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MetadataFile {
    name: Spanned<String>,
    #[serde(default)]
    description: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeviceClassFile {
    #[serde(default)]
    name: Option<Spanned<String>>,
    #[serde(default)]
    spec: Option<Spanned<Node>>,
    #[serde(default)]
    existing: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaimFile {
    requests: Spanned<Vec<RequestFile>>,
    #[serde(default)]
    constraints: Vec<ConstraintFile>,
    #[serde(default)]
    config: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestFile {
    name: Spanned<String>,
    #[serde(default)]
    count: Option<Spanned<Whole>>,
    #[serde(default)]
    selectors: Vec<Spanned<String>>,
    #[serde(default)]
    capacity: BTreeMap<String, QuantityText>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ConstraintFile {
    #[serde(default)]
    requests: Vec<Spanned<String>>,
    match_attribute: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct GuaranteesFile {
    #[serde(default)]
    allocation: Option<Allocation>,
    #[serde(default)]
    impossible: Option<ImpossibleFile>,
    #[serde(default)]
    isolation: Option<Isolation>,
    #[serde(default)]
    limits: Option<LimitsFile>,
    #[serde(default)]
    capacity_recovery: Option<CapacityRecovery>,
    #[serde(default)]
    retention: Option<Retention>,
    #[serde(default)]
    driver_restart: Option<DriverRestart>,
    #[serde(default)]
    node_restart: Option<NodeRestart>,
    #[serde(default)]
    node_removal: Option<NodeRemoval>,
    #[serde(default)]
    versions: Option<Spanned<Versions>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ImpossibleFile {
    #[serde(deserialize_with = "variants")]
    variants: Vec<ImpossibleVariant>,
}

fn variants<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ImpossibleVariant>, D::Error> {
    let list = Vec::<ImpossibleVariant>::deserialize(d)?;
    if list.is_empty() {
        return Err(de::Error::custom(
            "names no variant: list at least one of unknownClass, selectorMatchesNothing, countAboveInventory, \
             capacityTooLarge (or leave out `impossible`)",
        ));
    }
    let unique: BTreeSet<_> = list.iter().collect();
    if unique.len() != list.len() {
        return Err(de::Error::custom("lists a variant twice"));
    }
    Ok(list)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct LimitsFile {
    max_devices_per_claim: Spanned<Whole>,
}

/// A resource quantity (`24Gi`, `500m`, `4`), kept as written.
#[derive(Debug, Clone)]
struct QuantityText(String);

impl<'de> Deserialize<'de> for QuantityText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // YAML reads `4` as a number; a quantity may be written either way.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Text(String),
        }
        let text = match Raw::deserialize(d)? {
            Raw::Int(n) => n.to_string(),
            Raw::Text(s) => s,
        };
        if is_quantity(&text) {
            Ok(QuantityText(text))
        } else {
            Err(de::Error::custom(format!(
                "{text:?} is not a quantity (a number with an optional suffix: Ki, Mi, Gi, Ti, Pi, Ei, m, k, M, G, T, P, \
                 E or an exponent like e3)"
            )))
        }
    }
}

/// Kubernetes' quantity grammar: sign? digits (. digits)? (binary SI | decimal SI | exponent)?
fn is_quantity(s: &str) -> bool {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let end = body.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(body.len());
    let (number, suffix) = body.split_at(end);
    let mut halves = number.splitn(2, '.');
    let whole = halves.next().unwrap_or("");
    let fraction = halves.next();
    let number_ok =
        !fraction.is_some_and(|f| f.contains('.')) && (!whole.is_empty() || fraction.is_some_and(|f| !f.is_empty()));
    let exponent_ok = |e: &str| {
        let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
        !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
    };
    let suffix_ok = matches!(
        suffix,
        "" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" | "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P" | "E"
    ) || suffix.strip_prefix(['e', 'E']).is_some_and(exponent_ok);
    number_ok && suffix_ok
}

// ---------------------------------------------------------------------------------------------
// Loading and validation

/// Reads and validates a profile file.
pub fn load(path: &Path) -> Result<Profile, ProfileError> {
    let bytes = std::fs::read(path).map_err(|source| ProfileError::Read { path: path.to_path_buf(), source })?;
    // An encoding problem is not a missing file: say where the first bad byte is.
    let text = String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..offset].iter().filter(|b| **b == b'\n').count() + 1;
        ProfileError::NotUtf8 { path: path.to_path_buf(), line, offset }
    })?;
    parse(path, &text)
}

/// Parses and validates `text`; `path` is only used in messages and kept in the profile.
pub fn parse(path: &Path, text: &str) -> Result<Profile, ProfileError> {
    let mut error_path = None;
    let parsed = serde_saphyr::with_deserializer_from_str(text, |de| {
        serde_path_to_error::deserialize::<_, ProfileFile>(de).map_err(|e| {
            error_path = Some(e.path().clone());
            e.into_inner()
        })
    });
    let file = parsed.map_err(|e| {
        let mut location = e.location().unwrap_or(Location::UNKNOWN);
        let message = first_line(&e.without_snippet().to_string());
        let mut field = error_path.as_ref().map_or_else(|| "(document)".to_string(), |p| clean_field(&p.to_string()));
        // serde reports a missing field where the mapping ended; point at the mapping that
        // lacks it instead, and name the missing field itself.
        if let Some(missing) = message.strip_prefix("missing field `").and_then(|m| m.split('`').next()) {
            field = if field == "(document)" { missing.to_string() } else { format!("{field}.{missing}") };
            let tree = serde_saphyr::from_str::<Spanned<Node>>(text);
            if let (Ok(tree), Some(p)) = (tree, error_path.as_ref()) {
                location = located::locate(&tree, p);
            }
        }
        // A duplicate key stops the parser before serde knows the key's name (`?` in the
        // path): name the field, and say the fix in the profile's terms rather than the
        // library's (its hint is about its own options).
        let message = match duplicate_key(&message) {
            Some(key) => {
                field = match field.strip_suffix('?') {
                    Some(parent) => format!("{parent}{key}"),
                    None if field == "(document)" => key.to_string(),
                    None => format!("{field}.{key}"),
                };
                format!("duplicate key {key:?}: a key may appear once in a mapping; merge the two or remove one")
            }
            None => message,
        };
        ProfileError::Invalid {
            path: path.to_path_buf(),
            line: location.line(),
            column: location.column(),
            field,
            message,
        }
    })?;
    Validator { path }.profile(file)
}

/// `Spanned` adds a `value` step to serde_path_to_error's paths that is no field of the file
/// (no field of a profile is called `value`).
fn clean_field(raw: &str) -> String {
    let mut out = raw.to_string();
    while let Some(i) = out.find(".value").filter(|i| {
        let rest = &out[i + ".value".len()..];
        rest.is_empty() || rest.starts_with(['.', '['])
    }) {
        out.replace_range(i..i + ".value".len(), "");
    }
    let out = out
        .strip_prefix("value")
        .filter(|r| r.is_empty() || r.starts_with(['.', '[']))
        .map_or(out.clone(), str::to_string);
    let out = out.strip_prefix('.').unwrap_or(&out).to_string();
    if out.is_empty() || out == "?" { "(document)".into() } else { out }
}

/// serde-saphyr appends the location (reported as fields of the error) and a snippet on later
/// lines; one line of message is what fits.
/// The key of the YAML library's duplicate-key error.
fn duplicate_key(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("duplicate mapping key: ")?;
    Some(rest.split(", set DuplicateKeyPolicy").next().unwrap_or(rest).trim())
}

fn first_line(message: &str) -> String {
    let line = message.lines().next().unwrap_or(message).trim();
    line.split(" at line ").next().unwrap_or(line).to_string()
}

struct Validator<'a> {
    path: &'a Path,
}

impl Validator<'_> {
    fn err(&self, at: Location, field: impl Into<String>, message: impl Into<String>) -> ProfileError {
        ProfileError::Invalid {
            path: self.path.to_path_buf(),
            line: at.line(),
            column: at.column(),
            field: field.into(),
            message: message.into(),
        }
    }

    fn profile(&self, file: ProfileFile) -> Result<Profile, ProfileError> {
        if file.api_version.value != API_VERSION {
            return Err(self.err(
                file.api_version.referenced,
                "apiVersion",
                format!(
                    "unsupported apiVersion {:?}; the supported apiVersion is {API_VERSION}",
                    file.api_version.value
                ),
            ));
        }
        if file.kind.value != KIND {
            return Err(self.err(
                file.kind.referenced,
                "kind",
                format!("unsupported kind {:?}; the supported kind is {KIND}", file.kind.value),
            ));
        }
        self.dns_name(&file.metadata.name, "metadata.name", "a profile name")?;
        self.dns_name(&file.driver, "driver", "a DRA driver name (e.g. gpu.mock.dracheck.io)")?;
        let device_class = self.device_class(file.device_class)?;
        let claim = self.claim(file.claim)?;
        let guarantees = self.guarantees(file.guarantees, &claim)?;
        Ok(Profile {
            path: self.path.to_path_buf(),
            metadata: Metadata { name: file.metadata.name.value, description: file.metadata.description },
            driver: file.driver.value,
            device_class,
            claim,
            guarantees,
        })
    }

    /// Lowercase DNS subdomain, as Kubernetes requires of object and driver names.
    fn dns_name(&self, name: &Spanned<String>, field: &str, what: &str) -> Result<(), ProfileError> {
        let s = &name.value;
        let ok = !s.is_empty()
            && s.len() <= 253
            && s.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            });
        if ok {
            Ok(())
        } else {
            Err(self.err(
                name.referenced,
                field,
                format!("{s:?} is not valid as {what}: use lowercase letters, digits, '-' and '.'"),
            ))
        }
    }

    fn device_class(&self, class: Spanned<DeviceClassFile>) -> Result<ClassSource, ProfileError> {
        let at = class.referenced;
        let DeviceClassFile { name, spec, existing } = class.value;
        match (spec, existing) {
            (None, None) => Err(self.err(
                at,
                "deviceClass",
                "names no class: give either `name` and `spec` (an inline class the suite creates) or `existing: \
                 <name>` (a class installed with the driver)",
            )),
            (Some(_), Some(existing)) => Err(self.err(
                existing.referenced,
                "deviceClass.existing",
                "`spec` and `existing` exclude each other: keep `spec` (with `name`) for an inline class, or only \
                 `existing` for a class that is already installed",
            )),
            (None, Some(existing)) => {
                if let Some(name) = name {
                    return Err(self.err(
                        name.referenced,
                        "deviceClass.name",
                        "`name` belongs to an inline class (with `spec`); an existing class is named by `existing`",
                    ));
                }
                self.dns_name(&existing, "deviceClass.existing", "a DeviceClass name")?;
                Ok(ClassSource::Existing { name: existing.value })
            }
            (Some(spec), None) => {
                let Some(name) = name else {
                    return Err(self.err(
                        at,
                        "deviceClass.name",
                        "an inline class needs a `name` (the DeviceClass the suite creates)",
                    ));
                };
                self.dns_name(&name, "deviceClass.name", "a DeviceClass name")?;
                let spec = self.inline_spec(&spec)?;
                Ok(ClassSource::Inline { name: name.value, spec })
            }
        }
    }

    /// The inline spec, typed as the API's DeviceClassSpec, with unknown fields refused.
    fn inline_spec(&self, raw: &Spanned<Node>) -> Result<DeviceClassSpec, ProfileError> {
        const PREFIX: &str = "deviceClass.spec";
        let json = raw.value.to_json();
        let spec: DeviceClassSpec = serde_path_to_error::deserialize(&json).map_err(|e| {
            let at = located::locate(raw, e.path());
            let inner = e.path().to_string();
            let field = if inner == "." { PREFIX.to_string() } else { format!("{PREFIX}.{inner}") };
            self.err(at, field, e.into_inner().to_string())
        })?;
        let typed = serde_json::to_value(&spec).unwrap_or_default();
        if let Some((field, at, key)) = located::first_unknown_key(raw, &typed, PREFIX) {
            return Err(self.err(
                at,
                field,
                format!("unknown field `{key}`: not a field of the DeviceClass spec (resource.k8s.io/v1)"),
            ));
        }
        Ok(spec)
    }

    fn claim(&self, claim: ClaimFile) -> Result<ClaimShape, ProfileError> {
        if claim.requests.value.is_empty() {
            return Err(self.err(
                claim.requests.referenced,
                "claim.requests",
                "the claim requests nothing: add at least one request (name and count)",
            ));
        }
        let mut requests = Vec::new();
        let mut seen: BTreeMap<String, u64> = BTreeMap::new();
        for (i, r) in claim.requests.value.into_iter().enumerate() {
            let field = |f: &str| format!("claim.requests[{i}].{f}");
            let name = &r.name;
            let label_ok = !name.value.is_empty()
                && name.value.len() <= 63
                && name.value.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !name.value.starts_with('-')
                && !name.value.ends_with('-');
            if !label_ok {
                return Err(self.err(
                    name.referenced,
                    field("name"),
                    format!("{:?} is not a valid request name (a DNS label: a-z, 0-9 and '-')", name.value),
                ));
            }
            if let Some(first) = seen.insert(name.value.clone(), name.referenced.line()) {
                return Err(self.err(
                    name.referenced,
                    field("name"),
                    format!("request name {:?} is used twice (first on line {first}); rename one of them", name.value),
                ));
            }
            let count = match &r.count {
                Some(c) if c.value.0 < 1 => {
                    return Err(self.err(
                        c.referenced,
                        field("count"),
                        format!("count must be at least 1, got {}", c.value.0),
                    ));
                }
                Some(c) => c.value.0,
                None => 1,
            };
            let mut selectors = Vec::new();
            for (s, sel) in r.selectors.iter().enumerate() {
                if sel.value.trim().is_empty() {
                    return Err(self.err(
                        sel.referenced,
                        field(&format!("selectors[{s}]")),
                        "an empty CEL expression; write one such as device.attributes[\"gpu.example.com\"].model == \"x\"",
                    ));
                }
                selectors.push(sel.value.clone());
            }
            requests.push(Request {
                name: r.name.value,
                count,
                selectors,
                capacity: r.capacity.into_iter().map(|(k, v)| (k, v.0)).collect(),
            });
        }
        let mut constraints = Vec::new();
        for (i, c) in claim.constraints.into_iter().enumerate() {
            for (j, req) in c.requests.iter().enumerate() {
                if !seen.contains_key(&req.value) {
                    return Err(self.err(
                        req.referenced,
                        format!("claim.constraints[{i}].requests[{j}]"),
                        format!(
                            "the constraint names request {:?}, which the claim does not have (its requests: {})",
                            req.value,
                            seen.keys().cloned().collect::<Vec<_>>().join(", ")
                        ),
                    ));
                }
            }
            let attr = &c.match_attribute;
            let qualified = attr
                .value
                .split_once('/')
                .is_some_and(|(domain, id)| !domain.is_empty() && !id.is_empty() && !id.contains('/'));
            if !qualified {
                return Err(self.err(
                    attr.referenced,
                    format!("claim.constraints[{i}].matchAttribute"),
                    format!(
                        "{:?} is not a fully qualified attribute name: write domain/name, e.g. gpu.mock.dracheck.io/model",
                        attr.value
                    ),
                ));
            }
            constraints.push(Constraint {
                requests: c.requests.into_iter().map(|r| r.value).collect(),
                match_attribute: c.match_attribute.value,
            });
        }
        Ok(ClaimShape { requests, constraints, config: claim.config })
    }

    fn guarantees(&self, g: Spanned<GuaranteesFile>, claim: &ClaimShape) -> Result<Guarantees, ProfileError> {
        let at = g.referenced;
        let g = g.value;
        let limits = match g.limits {
            None => None,
            Some(l) => {
                let max = &l.max_devices_per_claim;
                let total: i64 = claim.requests.iter().map(|r| r.count).sum();
                if max.value.0 < 1 {
                    return Err(self.err(
                        max.referenced,
                        "guarantees.limits.maxDevicesPerClaim",
                        format!("must be at least 1, got {}", max.value.0),
                    ));
                }
                if max.value.0 < total {
                    return Err(self.err(
                        max.referenced,
                        "guarantees.limits.maxDevicesPerClaim",
                        format!(
                            "{} is smaller than the profile's own claim, which asks for {total} device(s) ({}); \
                             raise the limit or make the claim smaller",
                            max.value.0,
                            claim
                                .requests
                                .iter()
                                .map(|r| format!("{}: {}", r.name, r.count))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ));
                }
                Some(Limits { max_devices_per_claim: max.value.0 })
            }
        };
        let versions = match g.versions {
            Some(v) if v.value.kubernetes.is_none() && v.value.driver.is_none() => {
                return Err(self.err(
                    v.referenced,
                    "guarantees.versions",
                    "names no version: give `kubernetes` and/or `driver` requirements (e.g. \">=1.34\"), or leave out \
                     `versions`",
                ));
            }
            v => v.map(|v| v.value),
        };
        let out = Guarantees {
            allocation: g.allocation,
            impossible: g.impossible.map(|i| Impossible { variants: i.variants }),
            isolation: g.isolation,
            limits,
            capacity_recovery: g.capacity_recovery,
            retention: g.retention,
            driver_restart: g.driver_restart,
            node_restart: g.node_restart,
            node_removal: g.node_removal,
            versions,
        };
        if out == Guarantees::default() {
            return Err(self.err(
                at,
                "guarantees",
                "the profile publishes no guarantee: add at least one of allocation, impossible, isolation, limits, \
                 capacityRecovery, retention, driverRestart, nodeRestart, nodeRemoval, versions",
            ));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        for ok in ["1", "24Gi", "500m", "1.5", "1e3", "-2", ".5Ki", "3E-2"] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in ["", "Gi", "40GB", "1..2", "1e", "x1", "."] {
            assert!(!is_quantity(bad), "{bad}");
        }
    }

    #[test]
    fn field_paths_lose_the_spanned_steps() {
        assert_eq!(clean_field("deviceClass.value.spec"), "deviceClass.spec");
        assert_eq!(clean_field("claim.requests.value[0].count.value"), "claim.requests[0].count");
        assert_eq!(clean_field("."), "(document)");
    }
}
