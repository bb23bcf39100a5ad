//! What a selector refers to (`device.driver`, `device.attributes["d"].name`,
//! `device.capacity["d"].name`), so that a failing selector can be shown with the device's
//! actual values.

use k8s_openapi::api::resource::v1::{Device, DeviceAttribute};

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

/// `name=value` for each reference, as the device has it; `name missing` when it has none.
pub fn actual_values(refs: &[Ref], driver: &str, device: &Device) -> String {
    let lookup = |domain: &str, name: &str, capacity: bool| -> Option<String> {
        let qualified = format!("{domain}/{name}");
        let keys = if domain == driver { vec![name.to_string(), qualified] } else { vec![qualified] };
        if capacity {
            let caps = device.capacity.as_ref()?;
            keys.iter().find_map(|k| caps.get(k)).map(|c| c.value.0.clone())
        } else {
            let attrs = device.attributes.as_ref()?;
            keys.iter().find_map(|k| attrs.get(k)).map(attribute_text)
        }
    };
    refs.iter()
        .map(|r| match r {
            Ref::Driver => format!("driver={driver:?}"),
            Ref::Attribute { domain, name } => match lookup(domain, name, false) {
                Some(v) => format!("{name}={v}"),
                None => format!("{name} missing (domain {domain})"),
            },
            Ref::Capacity { domain, name } => match lookup(domain, name, true) {
                Some(v) => format!("capacity {name}={v}"),
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
