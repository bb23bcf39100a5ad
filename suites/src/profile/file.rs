//! The profile file as written, its parsing and its validation: strict, and every error names
//! the file, the line and the field.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use dracheck_objects::names;
use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, CapacityRequirements, DeviceClaim, DeviceClaimConfiguration, DeviceClassSpec, DeviceConstraint,
    DeviceRequest, DeviceSelector, ExactDeviceRequest, OpaqueDeviceConfiguration, ResourceClaimSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ProfileFile {
    api_version: Spanned<String>,
    kind: Spanned<String>,
    metadata: MetadataFile,
    driver: Spanned<String>,
    device_class: Spanned<DeviceClassFile>,
    claim: Spanned<ClaimFile>,
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
    /// The claim in the API's shape: a `resource.k8s.io/v1` ResourceClaimSpec's `devices`.
    #[serde(default)]
    devices: Option<Spanned<Node>>,
    /// The short form, mapped 1:1 onto the API's exact requests.
    #[serde(default)]
    requests: Option<Spanned<Vec<RequestFile>>>,
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
    Validator { path, cel: dracheck_explain::cel::Environment::new() }.profile(file)
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
    /// The CEL environment of `explain`, the scheduler's DRA library.
    cel: dracheck_explain::cel::Environment,
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
        let class = match &device_class {
            ClassSource::Inline { name, .. } | ClassSource::Existing { name } => name.clone(),
        };
        let claim = self.claim(file.claim, &class, &file.driver.value)?;
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
        // Kubernetes' subdomain rule, and labels of at most 63 as DNS itself has them.
        let ok = names::is_dns_subdomain(s) && s.split('.').all(|l| l.len() <= 63);
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

    /// The inline spec, typed as the API's DeviceClassSpec, with unknown fields refused and
    /// its CEL compiled.
    fn inline_spec(&self, raw: &Spanned<Node>) -> Result<DeviceClassSpec, ProfileError> {
        const PREFIX: &str = "deviceClass.spec";
        let spec: DeviceClassSpec = self.typed(raw, PREFIX, "the DeviceClass spec")?;
        for (i, selector) in spec.selectors.iter().flatten().enumerate() {
            if let Some(cel) = &selector.cel {
                self.compiles(raw, PREFIX, &format!("selectors[{i}].cel.expression"), &cel.expression)?;
            }
        }
        Ok(spec)
    }

    /// `raw` as the API type `T` (`what`, for messages), with type errors and unknown fields
    /// refused at their line: k8s-openapi's types ignore unknown fields themselves.
    fn typed<T: serde::de::DeserializeOwned + serde::Serialize>(
        &self,
        raw: &Spanned<Node>,
        prefix: &str,
        what: &str,
    ) -> Result<T, ProfileError> {
        let json = raw.value.to_json();
        let value: T = serde_path_to_error::deserialize(&json).map_err(|e| {
            let at = located::locate(raw, e.path());
            let inner = e.path().to_string();
            let field = if inner == "." { prefix.to_string() } else { format!("{prefix}.{inner}") };
            self.err(at, field, e.into_inner().to_string())
        })?;
        let typed = serde_json::to_value(&value).unwrap_or_default();
        if let Some((field, at, key)) = located::first_unknown_key(raw, &typed, prefix) {
            return Err(self.err(
                at,
                field,
                format!("unknown field `{key}`: not a field of {what} (resource.k8s.io/v1)"),
            ));
        }
        Ok(value)
    }

    /// Compiles a CEL selector in the environment `explain` evaluates selectors in (the
    /// scheduler's DRA library); `path` is below `prefix` inside `raw`, for the location.
    fn compiles(&self, raw: &Spanned<Node>, prefix: &str, path: &str, expression: &str) -> Result<(), ProfileError> {
        let field = format!("{prefix}.{path}");
        let at = located::locate_dotted(raw, path);
        if expression.trim().is_empty() {
            return Err(self.err(
                at,
                field,
                "an empty CEL expression; write one such as device.attributes[\"gpu.example.com\"].model == \"x\"",
            ));
        }
        match self.cel.compile(expression) {
            Ok(_) => Ok(()),
            Err(e) => Err(self.err(at, field, format!("the CEL expression does not compile: {e}"))),
        }
    }

    /// The claim, in the API's shape or in the short form, as a ResourceClaimSpec.
    fn claim(&self, claim: Spanned<ClaimFile>, class: &str, driver: &str) -> Result<ResourceClaimSpec, ProfileError> {
        let at = claim.referenced;
        let ClaimFile { devices, requests, constraints, config } = claim.value;
        match (devices, requests) {
            (Some(devices), None) if constraints.is_empty() && config.is_none() => self.api_claim(&devices, class),
            (Some(devices), _) => Err(self.err(
                devices.referenced,
                "claim.devices",
                "`devices` (the claim in the API's shape) and the short form's `requests`, `constraints` and `config` \
                 exclude each other: write the claim one way",
            )),
            (None, Some(requests)) => self.short_claim(requests, constraints, config, class, driver),
            (None, None) => Err(self.err(
                at,
                "claim",
                "the claim requests nothing: give `devices` (a ResourceClaimSpec's, as in the API) or `requests` (the \
                 short form)",
            )),
        }
    }

    /// The claim in the API's shape: typed as the API's DeviceClaim, then checked as the
    /// apiserver would (names, one of `exactly`/`firstAvailable`, counts and allocation
    /// modes, references between requests, constraints and config) and defaulted as it would
    /// (`allocationMode: ExactCount`, `count: 1`). A request's `deviceClassName` may be left
    /// out: it is the profile's class, and naming another class is refused.
    fn api_claim(&self, raw: &Spanned<Node>, class: &str) -> Result<ResourceClaimSpec, ProfileError> {
        const PREFIX: &str = "claim.devices";
        let mut devices: DeviceClaim = self.typed(raw, PREFIX, "a ResourceClaimSpec's devices")?;
        let at = |path: &str, message: String| {
            self.err(located::locate_dotted(raw, path), format!("{PREFIX}.{path}"), message)
        };
        let requests = devices.requests.get_or_insert_default();
        if requests.is_empty() {
            return Err(at("requests", "the claim requests nothing: add at least one request".into()));
        }
        // Request names, and `request/alternative` names, that constraints and config may name.
        let mut known: Vec<String> = Vec::new();
        for (i, request) in requests.iter_mut().enumerate() {
            let here = format!("requests[{i}]");
            self.label(raw, &format!("{here}.name"), &request.name, "request name")?;
            if known.contains(&request.name) {
                return Err(at(&format!("{here}.name"), format!("request name {:?} is used twice", request.name)));
            }
            known.push(request.name.clone());
            match (request.exactly.as_mut(), request.first_available.as_mut()) {
                (Some(e), None) => {
                    let path = format!("{here}.exactly");
                    self.exact(raw, &path, &mut e.device_class_name, &mut e.allocation_mode, &mut e.count, class)?;
                    self.selectors_compile(raw, &path, e.selectors.as_deref())?;
                    self.capacity_quantities(raw, &path, e.capacity.as_ref())?;
                }
                (None, Some(alternatives)) if !alternatives.is_empty() => {
                    let mut names: Vec<String> = Vec::new();
                    for (j, a) in alternatives.iter_mut().enumerate() {
                        let path = format!("{here}.firstAvailable[{j}]");
                        self.label(raw, &format!("{path}.name"), &a.name, "alternative name")?;
                        if names.contains(&a.name) {
                            return Err(at(
                                &format!("{path}.name"),
                                format!("alternative name {:?} is used twice", a.name),
                            ));
                        }
                        names.push(a.name.clone());
                        known.push(format!("{}/{}", request.name, a.name));
                        self.exact(raw, &path, &mut a.device_class_name, &mut a.allocation_mode, &mut a.count, class)?;
                        self.selectors_compile(raw, &path, a.selectors.as_deref())?;
                        self.capacity_quantities(raw, &path, a.capacity.as_ref())?;
                    }
                }
                (None, Some(_)) => {
                    return Err(at(
                        &format!("{here}.firstAvailable"),
                        "lists no alternative: give at least one".into(),
                    ));
                }
                _ => {
                    return Err(at(
                        &here,
                        "a request has exactly one of `exactly` (one kind of device) and `firstAvailable` (alternatives \
                         in order of preference)"
                            .into(),
                    ));
                }
            }
        }
        let names_known = |path: &str, names: Option<&Vec<String>>| -> Result<(), ProfileError> {
            for (j, name) in names.into_iter().flatten().enumerate() {
                let bare = name.split('/').next().unwrap_or(name);
                if !known.contains(name) && !known.iter().any(|k| k == bare) {
                    return Err(at(
                        &format!("{path}.requests[{j}]"),
                        format!(
                            "names request {name:?}, which the claim does not have (its requests: {})",
                            known.join(", ")
                        ),
                    ));
                }
            }
            Ok(())
        };
        for (i, c) in devices.constraints.iter().flatten().enumerate() {
            let path = format!("constraints[{i}]");
            names_known(&path, c.requests.as_ref())?;
            let (field, attribute) = match (&c.match_attribute, &c.distinct_attribute) {
                (Some(a), None) => ("matchAttribute", a),
                (None, Some(a)) => ("distinctAttribute", a),
                _ => {
                    return Err(at(
                        &path,
                        "a constraint has exactly one of `matchAttribute` and `distinctAttribute`".into(),
                    ));
                }
            };
            if !qualified(attribute) {
                return Err(at(
                    &format!("{path}.{field}"),
                    format!(
                        "{attribute:?} is not a fully qualified attribute name: write domain/name, e.g. gpu.mock.dracheck.io/model"
                    ),
                ));
            }
        }
        for (i, c) in devices.config.iter().flatten().enumerate() {
            names_known(&format!("config[{i}]"), c.requests.as_ref())?;
        }
        Ok(ResourceClaimSpec { devices: Some(devices) })
    }

    /// A DNS label, as request names are.
    fn label(&self, raw: &Spanned<Node>, path: &str, name: &str, what: &str) -> Result<(), ProfileError> {
        let ok = names::is_dns_label(name);
        if ok {
            return Ok(());
        }
        Err(self.err(
            located::locate_dotted(raw, path),
            format!("claim.devices.{path}"),
            format!("{name:?} is not a valid {what} (a DNS label: a-z, 0-9 and '-')"),
        ))
    }

    /// The class, allocation mode and count of an exact request or alternative, defaulted
    /// as the apiserver defaults them.
    fn exact(
        &self,
        raw: &Spanned<Node>,
        path: &str,
        device_class_name: &mut String,
        allocation_mode: &mut Option<String>,
        count: &mut Option<i64>,
        class: &str,
    ) -> Result<(), ProfileError> {
        let at = |field: &str, message: String| {
            let path = if field.is_empty() { path.to_string() } else { format!("{path}.{field}") };
            self.err(located::locate_dotted(raw, &path), format!("claim.devices.{path}"), message)
        };
        if device_class_name.is_empty() {
            *device_class_name = class.to_string();
        } else if device_class_name != class {
            return Err(at(
                "deviceClassName",
                format!(
                    "names class {device_class_name:?}, but the profile's class is {class:?}: leave deviceClassName out \
                     or write {class}"
                ),
            ));
        }
        match allocation_mode.get_or_insert_with(|| EXACT_COUNT.into()).as_str() {
            EXACT_COUNT => match *count.get_or_insert(1) {
                n if n < 1 => Err(at("count", format!("count must be at least 1, got {n}"))),
                _ => Ok(()),
            },
            ALL if count.is_some() => {
                Err(at("count", "`allocationMode: All` takes every matching device: leave out `count`".into()))
            }
            ALL => Ok(()),
            other => Err(at("allocationMode", format!("{other:?} is no allocation mode: write ExactCount or All"))),
        }
    }

    fn selectors_compile(
        &self,
        raw: &Spanned<Node>,
        path: &str,
        selectors: Option<&[DeviceSelector]>,
    ) -> Result<(), ProfileError> {
        for (i, s) in selectors.into_iter().flatten().enumerate() {
            if let Some(cel) = &s.cel {
                self.compiles(raw, "claim.devices", &format!("{path}.selectors[{i}].cel.expression"), &cel.expression)?;
            }
        }
        Ok(())
    }

    fn capacity_quantities(
        &self,
        raw: &Spanned<Node>,
        path: &str,
        capacity: Option<&CapacityRequirements>,
    ) -> Result<(), ProfileError> {
        for (name, q) in capacity.and_then(|c| c.requests.as_ref()).into_iter().flatten() {
            if !is_quantity(&q.0) {
                let path = format!("{path}.capacity.requests.{name}");
                return Err(self.err(
                    located::locate_dotted(raw, &path),
                    format!("claim.devices.{path}"),
                    format!("{:?} is not a quantity (a number with an optional suffix such as Gi, M or m)", q.0),
                ));
            }
        }
        Ok(())
    }

    /// The short form: exact requests of the profile's class.
    fn short_claim(
        &self,
        requests_file: Spanned<Vec<RequestFile>>,
        constraints_file: Vec<ConstraintFile>,
        config: Option<serde_json::Value>,
        class: &str,
        driver: &str,
    ) -> Result<ResourceClaimSpec, ProfileError> {
        if requests_file.value.is_empty() {
            return Err(self.err(
                requests_file.referenced,
                "claim.requests",
                "the claim requests nothing: add at least one request (name and count)",
            ));
        }
        let mut requests = Vec::new();
        let mut seen: BTreeMap<String, u64> = BTreeMap::new();
        for (i, r) in requests_file.value.into_iter().enumerate() {
            let field = |f: &str| format!("claim.requests[{i}].{f}");
            let name = &r.name;
            let label_ok = names::is_dns_label(&name.value);
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
                let at = |message: String| self.err(sel.referenced, field(&format!("selectors[{s}]")), message);
                if sel.value.trim().is_empty() {
                    return Err(at(
                        "an empty CEL expression; write one such as device.attributes[\"gpu.example.com\"].model == \"x\""
                            .into(),
                    ));
                }
                if let Err(e) = self.cel.compile(&sel.value) {
                    return Err(at(format!("the CEL expression does not compile: {e}")));
                }
                selectors.push(DeviceSelector { cel: Some(CELDeviceSelector { expression: sel.value.clone() }) });
            }
            let capacity: BTreeMap<String, Quantity> =
                r.capacity.into_iter().map(|(k, v)| (k, Quantity(v.0))).collect();
            requests.push(DeviceRequest {
                name: r.name.value,
                exactly: Some(ExactDeviceRequest {
                    device_class_name: class.to_string(),
                    allocation_mode: Some(EXACT_COUNT.into()),
                    count: Some(count),
                    selectors: (!selectors.is_empty()).then_some(selectors),
                    capacity: (!capacity.is_empty()).then_some(CapacityRequirements { requests: Some(capacity) }),
                    ..ExactDeviceRequest::default()
                }),
                first_available: None,
            });
        }
        let mut constraints = Vec::new();
        for (i, c) in constraints_file.into_iter().enumerate() {
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
            if !qualified(&attr.value) {
                return Err(self.err(
                    attr.referenced,
                    format!("claim.constraints[{i}].matchAttribute"),
                    format!(
                        "{:?} is not a fully qualified attribute name: write domain/name, e.g. gpu.mock.dracheck.io/model",
                        attr.value
                    ),
                ));
            }
            let requests: Vec<String> = c.requests.into_iter().map(|r| r.value).collect();
            constraints.push(DeviceConstraint {
                requests: (!requests.is_empty()).then_some(requests),
                match_attribute: Some(c.match_attribute.value),
                ..DeviceConstraint::default()
            });
        }
        let config = config.map(|parameters| {
            vec![DeviceClaimConfiguration {
                requests: None,
                opaque: Some(OpaqueDeviceConfiguration {
                    driver: driver.to_string(),
                    parameters: RawExtension(parameters),
                }),
            }]
        });
        Ok(ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(requests),
                constraints: (!constraints.is_empty()).then_some(constraints),
                config,
            }),
        })
    }

    fn guarantees(&self, g: Spanned<GuaranteesFile>, claim: &ResourceClaimSpec) -> Result<Guarantees, ProfileError> {
        let at = g.referenced;
        let g = g.value;
        let limits = match g.limits {
            None => None,
            Some(l) => {
                let max = &l.max_devices_per_claim;
                // A request for all matching devices has no size of its own to compare.
                let total = super::model::devices_wanted(claim).unwrap_or(0);
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
                            request_sizes(claim)
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
                format!("the profile publishes no guarantee: add at least one of {}", family::keys()),
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
