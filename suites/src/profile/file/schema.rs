//! The profile format's JSON Schema, generated from the file's types (`schemars`) and shipped
//! as `profiles/profile.schema.json` for editors (the `yaml-language-server` modeline of the
//! shipped profiles names it). The parser stays the authority: the schema describes the shape
//! (keys, types, patterns, bounds), not the checks between fields (a constraint naming a
//! request the claim lacks, a limit below the claim's size, CEL that does not compile).

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::Value;

use super::{ProfileFile, QuantityText, Whole};
use crate::profile::{API_VERSION, KIND, KUBELET_SLICE_WIPE_DELAY_SECONDS};

/// Where the schema is shipped, relative to the workspace root.
pub const SCHEMA_PATH: &str = "profiles/profile.schema.json";

/// An RFC 1123 DNS subdomain, as object and driver names are.
const DNS_SUBDOMAIN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// An RFC 1123 DNS label, as request names are.
const DNS_LABEL: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// A capacity or attribute name: a C identifier of at most 32 characters, optionally
/// prefixed by a DNS domain and `/`.
const QUALIFIED_NAME: &str =
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z_][A-Za-z0-9_]{0,31}$";
/// A fully qualified attribute name: `domain/name`.
const FULLY_QUALIFIED: &str = r"^[^/]+/[^/]+$";
/// Kubernetes' quantity grammar: a decimal number and an optional binary or decimal suffix or
/// exponent.
const QUANTITY: &str = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$";
/// One bound of a version requirement (`>=1.34`), for [`crate::profile::VersionReq`].
const VERSION_BOUND: &str = r"\s*(>=|<=|>|<|=)?\s*v?[0-9]+\.[0-9]+(\.[0-9]+)?\s*";

/// The JSON Schema (draft-07) of a profile file, as `profiles/profile.schema.json` ships it.
pub fn json_schema() -> Value {
    let schema = SchemaSettings::draft07().into_generator().into_root_schema_for::<ProfileFile>();
    let mut value = schema.to_value();
    without_null(&mut value);
    let root = value.as_object_mut().expect("a schema object");
    root.insert("title".into(), "dracheck device profile".into());
    if let Some(definitions) = root.get_mut("definitions").and_then(Value::as_object_mut) {
        for (name, definition) in definitions.iter_mut() {
            if name.starts_with("io.k8s.") {
                api_definition(name, definition);
            }
        }
    }
    value
}

/// The schema as the shipped file has it: pretty-printed, with a final newline.
pub fn json_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&json_schema()).expect("a schema serializes");
    text.push('\n');
    text
}

/// A key left out is what a profile means by "not given": the `null` that schemars allows for
/// each `Option` is no value to offer in an editor.
fn without_null(value: &mut Value) {
    match value {
        Value::Object(object) => {
            if let Some(Value::Array(types)) = object.get_mut("type") {
                types.retain(|t| t != "null");
                if let [single] = types.as_slice() {
                    let single = single.clone();
                    object.insert("type".into(), single);
                }
            }
            if let Some(Value::Array(alternatives)) = object.get_mut("anyOf") {
                alternatives
                    .retain(|a| a.as_object().is_none_or(|o| o.len() > 1 || o.get("type").is_none_or(|t| t != "null")));
            }
            if object.get("default").is_some_and(Value::is_null) {
                object.remove("default");
            }
            object.values_mut().for_each(without_null);
            // What is left of `anyOf: [T, null]` is T.
            if let Some(Value::Array(alternatives)) = object.get("anyOf")
                && let [only] = alternatives.as_slice()
                && object.len() == 1
            {
                *value = only.clone();
            }
        }
        Value::Array(items) => items.iter_mut().for_each(without_null),
        _ => {}
    }
}

/// k8s-openapi's schema of an API type, as a profile takes it: unknown fields are refused (the
/// parser refuses them too), a request's `deviceClassName` may be left out (it is the
/// profile's class), its `allocationMode` is one of the API's and its `count` at least 1.
fn api_definition(name: &str, definition: &mut Value) {
    let Some(object) = definition.as_object_mut() else { return };
    if object.contains_key("properties") && !object.contains_key("additionalProperties") {
        object.insert("additionalProperties".into(), false.into());
    }
    if name.ends_with(".ExactDeviceRequest") || name.ends_with(".DeviceSubRequest") {
        if let Some(required) = object.get_mut("required").and_then(Value::as_array_mut) {
            required.retain(|r| r != "deviceClassName");
            if required.is_empty() {
                object.remove("required");
            }
        }
        if let Some(class) = definition.pointer_mut("/properties/deviceClassName").and_then(Value::as_object_mut) {
            class.insert(
                "description".into(),
                "In a profile: the profile's class, which is also the default; naming another class is refused.".into(),
            );
        }
        // The modes the API knows, and the count the apiserver requires; the parser refuses
        // the others.
        if let Some(mode) = definition.pointer_mut("/properties/allocationMode").and_then(Value::as_object_mut) {
            mode.insert("enum".into(), serde_json::json!(["ExactCount", "All"]));
        }
        if let Some(count) = definition.pointer_mut("/properties/count").and_then(Value::as_object_mut) {
            count.insert("minimum".into(), 1.into());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The schemas of fields the parser reads with its own deserializers.

pub(super) fn api_version(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "The format's version.",
        "type": "string",
        "const": API_VERSION,
    })
}

pub(super) fn kind(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "const": KIND })
}

pub(super) fn dns_subdomain(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "pattern": DNS_SUBDOMAIN, "maxLength": 253 })
}

pub(super) fn dns_label(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "pattern": DNS_LABEL, "maxLength": 63 })
}

pub(super) fn fully_qualified(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "pattern": FULLY_QUALIFIED })
}

pub(super) fn cel(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "minLength": 1, "pattern": r"\S" })
}

/// A whole number of at least 1 (counts, limits).
pub(super) fn positive_whole(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "integer", "minimum": 1 })
}

/// A whole number of seconds, at least 1.
pub(crate) fn positive_seconds(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "integer", "minimum": 1 })
}

/// A driver restart's downtime: shorter than the kubelet's slice wipe delay.
pub(crate) fn downtime_seconds(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "integer",
        "minimum": 1,
        "maximum": KUBELET_SLICE_WIPE_DELAY_SECONDS - 1,
    })
}

pub(crate) fn capacity_name(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "A capacity's name as slices key it: a C identifier of at most 32 characters, optionally \
                        prefixed by a DNS domain and '/' (memory).",
        "type": "string",
        "pattern": QUALIFIED_NAME,
    })
}

pub(crate) fn quantity(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<QuantityText>()
}

pub(crate) fn version_requirement(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "A version requirement: bounds joined by commas, each an operator (>=, >, <, <=, =; none \
                        means =) and major.minor[.patch] (\">=1.34\", \">=0.1, <2\").",
        "type": "string",
        "pattern": format!("^{VERSION_BOUND}(,{VERSION_BOUND})*$"),
    })
}

impl JsonSchema for Whole {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "WholeNumber".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "integer" })
    }
}

impl JsonSchema for QuantityText {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Quantity".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A resource quantity (24Gi, 500m, 4): a number with an optional suffix (Ki, Mi, Gi, Ti, \
                            Pi, Ei, m, k, M, G, T, P, E) or an exponent (e3).",
            "anyOf": [
                { "type": "string", "pattern": QUANTITY },
                { "type": "integer", "minimum": 0 },
            ],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, text: &str) -> bool {
        let schema = serde_json::json!({ "type": "string", "pattern": pattern });
        jsonschema::is_valid(&schema, &Value::from(text))
    }

    #[test]
    fn the_quantity_pattern_agrees_with_the_parser() {
        for q in [
            "1", "24Gi", "500m", "1.5", "1e3", "-2", ".5Ki", "3E-2", "1.", "+1", "1Ki2", "", "Gi", "40GB", "1..2",
            "1e", "x1", ".",
        ] {
            assert_eq!(matches(QUANTITY, q), super::super::is_quantity(q), "{q:?}");
        }
    }

    #[test]
    fn the_capacity_name_pattern_agrees_with_the_parser() {
        let long = "a".repeat(33);
        for name in ["memory", "gpu.example.com/memory", "_x1", "1x", "a/b/c", "Gpu.com/memory", "a-b", &long, "/x"] {
            assert_eq!(matches(QUALIFIED_NAME, name), dracheck_objects::names::is_qualified_name(name), "{name:?}");
        }
    }

    #[test]
    fn the_version_pattern_agrees_with_the_parser() {
        let pattern = format!("^{VERSION_BOUND}(,{VERSION_BOUND})*$");
        for req in [">=1.34", ">=0.1, <2.0", "1.37.2", "= 1.34", ">=1", "", ">=1.34,", "~1.2", ">=1.34.2.1", "v1.2"] {
            assert_eq!(matches(&pattern, req), crate::profile::VersionReq::parse(req).is_ok(), "{req:?}");
        }
    }
}
