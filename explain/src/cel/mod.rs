//! The DRA CEL environment: the `device` variable (`driver`, `attributes`, `capacity`) and the
//! functions Kubernetes adds to CEL for device selectors (quantities, semantic versions, the
//! list, regex, IP and CIDR libraries, the sets extension, `cel.bind`), on top of the standard
//! library and the strings extension. Not yet: the URL and `format` libraries, whose calls
//! are reported as selector errors.

mod functions;
mod net;
pub mod semver;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use cel::objects::{Key, Map, Opaque};
use cel::{Context, Env, Program, Value};
use k8s_openapi::api::resource::v1::{DeviceAttribute, DeviceCapacity};

pub use dracheck_objects::quantity::{self, Quantity};
pub use semver::Semver;

/// A quantity as a CEL value (the type is the objects crate's, the trait cel's: a wrapper
/// carries the impl).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CelQuantity(pub Quantity);

impl Opaque for CelQuantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

/// A compiled selector expression.
pub struct Selector {
    program: Program,
    /// Domains the expression indexes `device.attributes[...]` or `device.capacity[...]` with:
    /// upstream answers an unknown domain with an empty map (so only the attribute lookup
    /// fails), which is modelled by giving the device an empty map for each of them.
    domains: Vec<String>,
}

/// What a selector sees of one device.
pub struct DeviceInput<'a> {
    pub driver: &'a str,
    pub attributes: Option<&'a BTreeMap<String, DeviceAttribute>>,
    pub capacity: Option<&'a BTreeMap<String, DeviceCapacity>>,
}

/// The environment every selector is compiled and evaluated in.
pub struct Environment {
    env: Arc<Env>,
}

impl Default for Environment {
    fn default() -> Self {
        Self::new()
    }
}

impl Environment {
    pub fn new() -> Environment {
        let mut env = Env::stdlib();
        env.add_extension(cel::extensions::strings).expect("the strings extension registers");
        functions::declare(&mut env).expect("the DRA overloads register");
        net::declare(&mut env).expect("the IP library registers");
        Environment { env: Arc::new(env) }
    }

    /// Parses `expression`; a syntax error is what upstream calls a compile error.
    pub fn compile(&self, expression: &str) -> Result<Selector, String> {
        let program = self.env.compile(expression).map_err(|e| e.to_string().trim().to_string())?;
        Ok(Selector { program, domains: indexed_domains(expression) })
    }

    /// Whether the device matches; `Err` is a runtime error (a missing attribute, a type
    /// mismatch, a result that is not a bool), which the scheduler reports as such.
    pub fn matches(&self, selector: &Selector, device: &DeviceInput<'_>) -> Result<bool, String> {
        let mut ctx = Context::with_env(self.env.clone());
        functions::register(&mut ctx);
        net::register(&mut ctx);
        ctx.add_variable_from_value("device", device_value(device, &selector.domains)?);
        match selector.program.execute(&ctx) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!("the expression gives {}, not a bool", type_name(&other))),
            Err(e) => Err(runtime_message(&e)),
        }
    }
}

fn runtime_message(e: &cel::ExecutionError) -> String {
    match e {
        cel::ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        other => other.to_string(),
    }
}

pub(crate) fn type_name(v: &Value) -> String {
    match v {
        Value::Opaque(o) => o.runtime_type_name().to_string(),
        other => other.type_of().to_string(),
    }
}

/// The domains of `device.attributes["d"]` and `device.capacity["d"]` in `expression`.
fn indexed_domains(expression: &str) -> Vec<String> {
    let mut found = Vec::new();
    for key in ["attributes[", "capacity["] {
        for (at, _) in expression.match_indices(key) {
            let rest = expression[at + key.len()..].trim_start();
            let Some(quote) = rest.chars().next().filter(|c| *c == '"' || *c == '\'') else { continue };
            if let Some(end) = rest[1..].find(quote) {
                let domain = rest[1..1 + end].to_string();
                if !found.contains(&domain) {
                    found.push(domain);
                }
            }
        }
    }
    found
}

/// Splits a qualified name into domain and identifier; names without a domain belong to the
/// driver.
pub fn split_name<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    name.split_once('/').unwrap_or((driver, name))
}

/// The CEL value of one attribute.
pub fn attribute_value(a: &DeviceAttribute) -> Result<Value, String> {
    let version = |v: &String| Semver::parse(v, false).map(|s| Value::Opaque(Arc::new(s)));
    let list = |items: Vec<Value>| Value::List(Arc::new(items));
    Ok(match a {
        DeviceAttribute { int: Some(i), .. } => Value::Int(*i),
        DeviceAttribute { bool: Some(b), .. } => Value::Bool(*b),
        DeviceAttribute { string: Some(s), .. } => Value::String(Arc::new(s.clone())),
        DeviceAttribute { version: Some(v), .. } => version(v)?,
        DeviceAttribute { ints: Some(v), .. } => list(v.iter().map(|i| Value::Int(*i)).collect()),
        DeviceAttribute { bools: Some(v), .. } => list(v.iter().map(|b| Value::Bool(*b)).collect()),
        DeviceAttribute { strings: Some(v), .. } => {
            list(v.iter().map(|s| Value::String(Arc::new(s.clone()))).collect())
        }
        DeviceAttribute { versions: Some(v), .. } => list(v.iter().map(version).collect::<Result<_, _>>()?),
        _ => return Err("unsupported attribute value".into()),
    })
}

fn device_value(device: &DeviceInput<'_>, domains: &[String]) -> Result<Value, String> {
    let mut attributes: HashMap<String, HashMap<Key, Value>> = HashMap::new();
    let mut capacity: HashMap<String, HashMap<Key, Value>> = HashMap::new();
    for d in domains {
        attributes.entry(d.clone()).or_default();
        capacity.entry(d.clone()).or_default();
    }
    for (name, attr) in device.attributes.into_iter().flatten() {
        let (domain, id) = split_name(name, device.driver);
        let value = attribute_value(attr).map_err(|e| format!("attribute {name}: {e}"))?;
        attributes.entry(domain.to_string()).or_default().insert(Key::String(Arc::new(id.to_string())), value);
    }
    for (name, cap) in device.capacity.into_iter().flatten() {
        let (domain, id) = split_name(name, device.driver);
        let q = Quantity::parse(&cap.value.0).map_err(|e| format!("capacity {name}: {e}"))?;
        capacity
            .entry(domain.to_string())
            .or_default()
            .insert(Key::String(Arc::new(id.to_string())), Value::Opaque(Arc::new(CelQuantity(q))));
    }
    let nested = |m: HashMap<String, HashMap<Key, Value>>| -> Value {
        let outer: HashMap<Key, Value> =
            m.into_iter().map(|(k, v)| (Key::String(Arc::new(k)), Value::Map(Map { map: Arc::new(v) }))).collect();
        Value::Map(Map { map: Arc::new(outer) })
    };
    let mut fields: HashMap<Key, Value> = HashMap::new();
    fields.insert(Key::String(Arc::new("driver".into())), Value::String(Arc::new(device.driver.to_string())));
    fields.insert(Key::String(Arc::new("attributes".into())), nested(attributes));
    fields.insert(Key::String(Arc::new("capacity".into())), nested(capacity));
    Ok(Value::Map(Map { map: Arc::new(fields) }))
}

#[cfg(test)]
mod tests;
