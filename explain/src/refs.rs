//! What a selector refers to (`device.driver`, `device.attributes["d"].name`,
//! `device.capacity["d"].name`), so that a failing selector can be shown with the device's
//! actual values.

use k8s_openapi::api::resource::v1::{Device, DeviceAttribute, DeviceCapacity};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ref {
    Driver,
    Attribute { domain: String, name: String },
    Capacity { domain: String, name: String },
}

fn quoted(s: &str) -> Option<(String, &str)> {
    let s = s.trim_start();
    let q = s.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let end = s[1..].find(q)?;
    Some((s[1..1 + end].to_string(), &s[2 + end..]))
}

fn field(s: &str) -> Option<String> {
    let s = s.trim_start();
    if let Some(rest) = s.strip_prefix('.') {
        let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        return (!name.is_empty()).then_some(name);
    }
    let rest = s.strip_prefix('[')?;
    quoted(rest).map(|(name, _)| name)
}

pub fn references(expression: &str) -> Vec<Ref> {
    let mut out = Vec::new();
    if expression.contains("device.driver") {
        out.push(Ref::Driver);
    }
    for (key, capacity) in [("attributes[", false), ("capacity[", true)] {
        for (at, _) in expression.match_indices(key) {
            let Some((domain, rest)) = quoted(&expression[at + key.len()..]) else { continue };
            let Some(rest) = rest.trim_start().strip_prefix(']') else { continue };
            let Some(name) = field(rest) else { continue };
            let r = if capacity { Ref::Capacity { domain, name } } else { Ref::Attribute { domain, name } };
            if !out.contains(&r) {
                out.push(r);
            }
        }
    }
    out
}

pub fn attribute_text(a: &DeviceAttribute) -> String {
    let list = |v: Vec<String>| format!("[{}]", v.join(", "));
    match a {
        DeviceAttribute { string: Some(s), .. } => format!("{s:?}"),
        DeviceAttribute { int: Some(i), .. } => i.to_string(),
        DeviceAttribute { bool: Some(b), .. } => b.to_string(),
        DeviceAttribute { version: Some(v), .. } => format!("semver {v}"),
        DeviceAttribute { strings: Some(v), .. } => list(v.iter().map(|s| format!("{s:?}")).collect()),
        DeviceAttribute { ints: Some(v), .. } => list(v.iter().map(i64::to_string).collect()),
        DeviceAttribute { bools: Some(v), .. } => list(v.iter().map(bool::to_string).collect()),
        DeviceAttribute { versions: Some(v), .. } => list(v.clone()),
        _ => "?".into(),
    }
}

/// The keys a device may store `domain/name` under: names of the driver's own domain may be
/// stored without it.
fn keys(driver: &str, domain: &str, name: &str) -> Vec<String> {
    let qualified = format!("{domain}/{name}");
    if domain == driver { vec![name.to_string(), qualified] } else { vec![qualified] }
}

/// The device's attribute `domain/name`, if it has it.
pub fn find_attribute<'d>(driver: &str, device: &'d Device, domain: &str, name: &str) -> Option<&'d DeviceAttribute> {
    let attrs = device.attributes.as_ref()?;
    keys(driver, domain, name).iter().find_map(|k| attrs.get(k))
}

/// The device's capacity `domain/name`, if it has it.
pub fn find_capacity<'d>(driver: &str, device: &'d Device, domain: &str, name: &str) -> Option<&'d DeviceCapacity> {
    let caps = device.capacity.as_ref()?;
    keys(driver, domain, name).iter().find_map(|k| caps.get(k))
}

impl Ref {
    /// Whether the device has what the reference looks up (a lookup of what it lacks is a CEL
    /// runtime error, "no such key").
    pub fn present(&self, driver: &str, device: &Device) -> bool {
        match self {
            Ref::Driver => true,
            Ref::Attribute { domain, name } => find_attribute(driver, device, domain, name).is_some(),
            Ref::Capacity { domain, name } => find_capacity(driver, device, domain, name).is_some(),
        }
    }

    /// The lookup as a selector writes it, e.g. `device.attributes["d"].name`.
    pub fn lookup(&self) -> String {
        match self {
            Ref::Driver => "device.driver".into(),
            Ref::Attribute { domain, name } => format!("device.attributes[\"{domain}\"].{name}"),
            Ref::Capacity { domain, name } => format!("device.capacity[\"{domain}\"].{name}"),
        }
    }

    /// The lookup with optional chaining, `default` where the device lacks it.
    pub fn optional(&self, default: &str) -> String {
        match self {
            Ref::Driver => "device.driver".into(),
            Ref::Attribute { domain, name } => format!("device.attributes[\"{domain}\"].?{name}.orValue({default})"),
            Ref::Capacity { domain, name } => format!("device.capacity[\"{domain}\"].?{name}.orValue({default})"),
        }
    }

    /// `domain/name` (or `driver`).
    pub fn qualified(&self) -> String {
        match self {
            Ref::Driver => "driver".into(),
            Ref::Attribute { domain, name } => format!("attribute {domain}/{name}"),
            Ref::Capacity { domain, name } => format!("capacity {domain}/{name}"),
        }
    }
}

/// A CEL literal of the type of `a`, for `orValue(...)`.
pub fn zero_literal(a: &DeviceAttribute) -> &'static str {
    match a {
        DeviceAttribute { string: Some(_), .. } => "\"\"",
        DeviceAttribute { int: Some(_), .. } => "0",
        DeviceAttribute { bool: Some(_), .. } => "false",
        DeviceAttribute { version: Some(_), .. } => "semver(\"0.0.0\")",
        _ => "[]",
    }
}

/// `name=value` for each reference, as the device has it; `name missing` when it has none.
pub fn actual_values(refs: &[Ref], driver: &str, device: &Device) -> String {
    refs.iter()
        .map(|r| match r {
            Ref::Driver => format!("driver={driver:?}"),
            Ref::Attribute { domain, name } => match find_attribute(driver, device, domain, name) {
                Some(v) => format!("{name}={}", attribute_text(v)),
                None => format!("{name} missing (domain {domain})"),
            },
            Ref::Capacity { domain, name } => match find_capacity(driver, device, domain, name) {
                Some(v) => format!("capacity {name}={}", v.value.0),
                None => format!("capacity {name} missing (domain {domain})"),
            },
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_driver_attribute_and_capacity_references() {
        let refs = references(
            r#"device.driver == "x" && device.attributes["gpu.example.com"].model == "a" && device.capacity['gpu.example.com']["memory"].compareTo(quantity("1")) > 0"#,
        );
        assert_eq!(
            refs,
            vec![
                Ref::Driver,
                Ref::Attribute { domain: "gpu.example.com".into(), name: "model".into() },
                Ref::Capacity { domain: "gpu.example.com".into(), name: "memory".into() },
            ]
        );
        let d = dracheck_objects::device("gpu-0").string("model", "l4").capacity("memory", "24Gi").build();
        assert_eq!(actual_values(&refs[1..], "gpu.example.com", &d), r#"model="l4", capacity memory=24Gi"#);
        assert_eq!(actual_values(&refs[1..2], "other.example.com", &d), "model missing (domain gpu.example.com)");
    }
}
