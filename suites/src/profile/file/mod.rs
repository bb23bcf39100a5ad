//! The profile file as written and its parsing; `validate` turns it into the model (strict,
//! every error names the file, the line and the field), `claim` validates its claim in the
//! API's shape or the short form.

mod claim;
pub(in crate::profile) mod schema;
mod validate;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use dracheck_objects::names;
use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, CapacityRequirements, DeviceClaim, DeviceClaimConfiguration, DeviceClassSpec, DeviceConstraint,
    DeviceRequest, DeviceSelector, ExactDeviceRequest, OpaqueDeviceConfiguration, ResourceClaimSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::{self, Deserializer};
use serde_saphyr::{Location, Spanned};

use super::error::ProfileError;
use super::located::{self, Node};
use super::model::*;
use super::{API_VERSION, KIND, KUBELET_SLICE_WIPE_DELAY_SECONDS, family};

const EXACT_COUNT: &str = "ExactCount";
const ALL: &str = "All";

/// A fully qualified attribute name: `domain/name`.
fn qualified(attribute: &str) -> bool {
    attribute.split_once('/').is_some_and(|(domain, id)| !domain.is_empty() && !id.is_empty() && !id.contains('/'))
}

/// "gpu: 2, nic: 1": the device count of each request, for messages.
fn request_sizes(claim: &ResourceClaimSpec) -> String {
    let requests = claim.devices.as_ref().and_then(|d| d.requests.as_ref());
    requests
        .into_iter()
        .flatten()
        .map(|r| {
            let count = r.exactly.as_ref().map(|e| e.count.unwrap_or(1)).unwrap_or(0);
            format!("{}: {count}", r.name)
        })
        .collect::<Vec<_>>()
        .join(", ")
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

pub(super) fn positive_seconds<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match whole_number(d, "a whole number of seconds")? {
        n if n < 1 => Err(de::Error::custom(format!("must be at least 1 (seconds), got {n}"))),
        n => Ok(n as u64),
    }
}

/// A quantity as written (`8Gi`, `4`).
pub(super) fn quantity<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    QuantityText::deserialize(d).map(|q| q.0)
}

/// A capacity's name as slices key it: a C identifier, optionally prefixed by a domain.
pub(super) fn capacity_name<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let name = String::deserialize(d)?;
    if dracheck_objects::names::is_qualified_name(&name) {
        Ok(name)
    } else {
        Err(de::Error::custom(format!(
            "{name:?} is not a capacity name (a C identifier of at most 32 characters, optionally prefixed by a \
             DNS domain and '/', such as memory)"
        )))
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

pub(super) fn default_downtime() -> u64 {
    10
}

pub(super) fn downtime_seconds<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
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

/// A device profile: what a platform publishes about a class of devices (a DeviceClass, the
/// claim its workloads make, the guarantees that hold), which dracheck checks. Format:
/// profiles/README.md.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(title = "DeviceProfile")]
struct ProfileFile {
    #[schemars(schema_with = "schema::api_version")]
    api_version: Spanned<String>,
    #[schemars(schema_with = "schema::kind")]
    kind: Spanned<String>,
    metadata: MetadataFile,
    /// The DRA driver name (gpu.mock.dracheck.io), as its ResourceSlices name it.
    #[schemars(schema_with = "schema::dns_subdomain")]
    driver: Spanned<String>,
    #[schemars(with = "DeviceClassFile")]
    device_class: Spanned<DeviceClassFile>,
    #[schemars(with = "ClaimFile")]
    claim: Spanned<ClaimFile>,
    #[schemars(with = "GuaranteesFile")]
    guarantees: Spanned<GuaranteesFile>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Metadata")]
struct MetadataFile {
    /// The profile's name (standard-inference), as reports show it.
    #[schemars(schema_with = "schema::dns_subdomain")]
    name: Spanned<String>,
    /// One line on what the profile is for.
    #[serde(default)]
    description: String,
}

/// The DeviceClass the profile's claims name: either `name` and `spec` (an inline class the
/// suite creates) or `existing` (a class installed with the driver).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    rename = "DeviceClass",
    extend("oneOf" = [
        { "required": ["name", "spec"], "properties": { "existing": false } },
        { "required": ["existing"], "properties": { "name": false, "spec": false } },
    ])
)]
struct DeviceClassFile {
    /// The name of the inline class the suite creates.
    #[serde(default)]
    #[schemars(schema_with = "schema::dns_subdomain")]
    name: Option<Spanned<String>>,
    /// The inline class's spec, as in the API (resource.k8s.io/v1 DeviceClassSpec).
    #[serde(default)]
    #[schemars(with = "Option<DeviceClassSpec>")]
    spec: Option<Spanned<Node>>,
    /// The name of a DeviceClass that already exists in the cluster.
    #[serde(default)]
    #[schemars(schema_with = "schema::dns_subdomain")]
    existing: Option<Spanned<String>>,
}

/// The claim workloads of this profile make: `devices` (in the API's shape) or the short form
/// (`requests`, `constraints`, `config`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    rename = "Claim",
    extend("oneOf" = [
        {
            "required": ["devices"],
            "properties": { "requests": false, "constraints": false, "config": false },
        },
        { "required": ["requests"], "properties": { "devices": false } },
    ])
)]
struct ClaimFile {
    /// The claim in the API's shape: a `resource.k8s.io/v1` ResourceClaimSpec's `devices`.
    /// A request's `deviceClassName` may be left out: it is the profile's class.
    #[serde(default)]
    #[schemars(with = "Option<DeviceClaim>")]
    devices: Option<Spanned<Node>>,
    /// The short form, mapped 1:1 onto the API's exact requests.
    #[serde(default)]
    #[schemars(with = "Option<Vec<RequestFile>>", length(min = 1))]
    requests: Option<Spanned<Vec<RequestFile>>>,
    /// The short form's constraints: the named requests' devices share the attribute's value.
    #[serde(default)]
    constraints: Vec<ConstraintFile>,
    /// The short form's opaque configuration: the driver's parameters, for every request.
    #[serde(default)]
    config: Option<serde_json::Value>,
}

/// A request of the short form: `count` devices of the profile's class.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "ShortRequest")]
struct RequestFile {
    /// The request's name (a DNS label).
    #[schemars(schema_with = "schema::dns_label")]
    name: Spanned<String>,
    /// How many devices (default 1).
    #[serde(default)]
    #[schemars(schema_with = "schema::positive_whole")]
    count: Option<Spanned<Whole>>,
    /// CEL expressions each device must satisfy.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    selectors: Vec<Spanned<String>>,
    /// The minimum of each capacity a device must have (memory: 40Gi).
    #[serde(default)]
    capacity: BTreeMap<String, QuantityText>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "ShortConstraint")]
struct ConstraintFile {
    /// The requests it applies to (all when left out).
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    requests: Vec<Spanned<String>>,
    /// A fully qualified attribute (domain/name) all their devices share.
    #[schemars(schema_with = "schema::fully_qualified")]
    match_attribute: Spanned<String>,
}

/// The class's devices are partitions of physical devices that share their counters
/// (`sharedCounters`, as MIG slices share a GPU): the scheduler never allocates partitions that
/// together take more than the device has, freeing one makes room for a waiting pod, and the
/// driver prepares exactly the allocated partition.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Partitionable")]
struct PartitionableFile {
    /// A CEL selector for the partitions that take a whole device; the others are its parts.
    #[schemars(schema_with = "schema::cel")]
    whole: Spanned<String>,
}

/// The guarantee families the profile publishes, each with its parameters; a family left out
/// is not checked. At least one.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "Guarantees", extend("minProperties" = 1))]
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
    config: Option<Config>,
    #[serde(default)]
    coexistence: Option<Coexistence>,
    #[serde(default)]
    prioritized_list: Option<PrioritizedList>,
    #[serde(default)]
    admin_access: Option<AdminAccess>,
    #[serde(default)]
    partitionable: Option<PartitionableFile>,
    #[serde(default)]
    device_status: Option<DeviceStatus>,
    #[serde(default)]
    device_taints: Option<DeviceTaints>,
    #[serde(default)]
    extended_resource: Option<ExtendedResource>,
    #[serde(default)]
    consumable_capacity: Option<ConsumableCapacity>,
    #[serde(default)]
    binding_conditions: Option<BindingConditions>,
    #[serde(default)]
    resource_health: Option<ResourceHealth>,
    #[serde(default)]
    driver_restart: Option<DriverRestart>,
    #[serde(default)]
    driver_outage: Option<DriverOutage>,
    #[serde(default)]
    node_restart: Option<NodeRestart>,
    #[serde(default)]
    node_reboot: Option<NodeReboot>,
    #[serde(default)]
    node_removal: Option<NodeRemoval>,
    #[serde(default)]
    #[schemars(with = "Option<Versions>")]
    versions: Option<Spanned<Versions>>,
}

/// Impossible claims stay pending, unallocated, with an actionable message.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Impossible")]
struct ImpossibleFile {
    /// The kinds of impossible claim to check, each once.
    #[serde(deserialize_with = "variants")]
    #[schemars(length(min = 1), extend("uniqueItems" = true))]
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

/// A claim for more than `maxDevicesPerClaim` devices is refused (never allocated).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "Limits")]
struct LimitsFile {
    /// At least the profile's own claim's device count.
    #[schemars(schema_with = "schema::positive_whole")]
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

/// Kubernetes' quantity grammar, as apimachinery parses it.
fn is_quantity(s: &str) -> bool {
    dracheck_objects::quantity::Quantity::parse(s).is_ok()
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
    validate::Validator { path, cel: dracheck_explain::cel::Environment::new() }.profile(file)
}

/// The error of a field of the profile at `path` that something past the file refused (the
/// API server's validation): the file, the line and column of `field` (dotted, as messages
/// write fields: `deviceClass.spec.selectors[1].cel.expression`), as far as the file has it.
pub fn invalid_field(path: &Path, field: &str, message: String) -> ProfileError {
    let location = std::fs::read_to_string(path)
        .ok()
        .and_then(|text| serde_saphyr::from_str::<Spanned<Node>>(&text).ok())
        .map_or(Location::UNKNOWN, |tree| located::locate_dotted(&tree, field));
    ProfileError::Invalid {
        path: path.to_path_buf(),
        line: location.line(),
        column: location.column(),
        field: field.to_string(),
        message,
    }
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
