//! The profile file as written, its parsing and its validation: strict, and every error names
//! the file, the line and the field.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use k8s_openapi::api::resource::v1::DeviceClassSpec;
use serde::Deserialize;
use serde::de::{self, Deserializer};
use serde_saphyr::{Location, Spanned};

use super::error::ProfileError;
use super::located::{self, Node};
use super::model::*;
use super::{API_VERSION, KIND, KUBELET_SLICE_WIPE_DELAY_SECONDS, family};

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
