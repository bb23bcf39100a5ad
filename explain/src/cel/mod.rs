//! The DRA CEL environment: the `device` variable (`driver`, `attributes`, `capacity`,
//! `allowMultipleAllocations`) and the libraries Kubernetes' DRA selector environment has
//! (`k8s.io/apiserver/pkg/cel/environment/base.go` and
//! `k8s.io/dynamic-resource-allocation/cel/compile.go`, as of 1.37):
//!
//! - cel-rust's standard library, with optional types (`optional.of`, `.?`, `orValue`, ...),
//!   and in `optional` what cel-go's optional library adds (`first`, `last`,
//!   `optional.unwrap`, `unwrapOpt`);
//! - cel-go's strings extension (`charAt`, `indexOf`, `lastIndexOf`, `lowerAscii`,
//!   `upperAscii`, `replace`, `split`, `substring`, `trim`, `join`, `format`, `strings.quote`)
//!   and lists extension (`slice`, `flatten`, `distinct`, `reverse`, `sort`, `sortBy`,
//!   `lists.range`), both from cel-rust;
//! - in `functions`: Kubernetes' quantity, semver, list (`isSorted`, `sum`, `min`, `max`,
//!   `indexOf`, `lastIndexOf`, `includes`) and regex (`find`, `findAll`) libraries, cel-go's
//!   sets extension and `cel.bind`;
//! - in `net`: the IP and CIDR libraries; in `url`: the URL library; in `format`: the format
//!   library (`format.named`, `format.dns1123Label()`, ..., `validate`);
//! - in `comprehensions`: cel-go's two-variable comprehensions (`all`, `exists`, `existsOne`
//!   with two names, `transformList`, `transformMap`, `transformMapEntry`).
//!
//! Kubernetes does not enable cel-go's math or encoders extensions for selectors, so neither is
//! here: the apiserver rejects `math.greatest(...)` or `base64.decode(...)` in a selector.
//!
//! A call of what Kubernetes has and this environment lacks ([`UNSUPPORTED`], empty for 1.37)
//! makes a selector [`CelError::Unsupported`]: dracheck has no verdict on it, rather than
//! calling it wrong.

mod comprehensions;
mod format;
mod functions;
mod net;
mod optional;
pub mod semver;
mod url;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::objects::{Key, Map, Opaque};
use cel::{Context, Env, ExecutionError, Program, Value};
use k8s_openapi::api::resource::v1::{Device, DeviceAttribute, DeviceCapacity};

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
    /// `device.allowMultipleAllocations`, false when unset (upstream's `ptr.Deref(…, false)`).
    pub allow_multiple_allocations: bool,
}

impl<'a> DeviceInput<'a> {
    /// `device` of a slice of `driver`.
    pub fn of(driver: &'a str, device: &'a Device) -> DeviceInput<'a> {
        DeviceInput {
            driver,
            attributes: device.attributes.as_ref(),
            capacity: device.capacity.as_ref(),
            allow_multiple_allocations: device.allow_multiple_allocations.unwrap_or(false),
        }
    }
}

/// The environment every selector is compiled and evaluated in.
pub struct Environment {
    env: Arc<Env>,
    /// What calls make a selector unsupported: [`UNSUPPORTED`] but in tests.
    lacking: Lacking,
}

/// Function names, as a call has them in an expression, with what they belong to.
type Lacking = &'static [(&'static str, &'static str)];

impl Default for Environment {
    fn default() -> Self {
        Self::new()
    }
}

impl Environment {
    pub fn new() -> Environment {
        let mut env = Env::stdlib();
        env.add_extension(cel::extensions::strings).expect("the strings extension registers");
        env.add_extension(cel::extensions::lists).expect("the lists extension registers");
        functions::declare(&mut env).expect("the DRA overloads register");
        comprehensions::declare(&mut env).expect("the two-variable comprehensions register");
        net::declare(&mut env).expect("the IP library registers");
        Environment { env: Arc::new(env), lacking: UNSUPPORTED }
    }

    /// The environment as if it lacked `lacking`: what a Kubernetes release that adds a
    /// function before dracheck has it looks like.
    #[cfg(test)]
    pub(crate) fn lacking(lacking: Lacking) -> Environment {
        Environment { lacking, ..Environment::new() }
    }

    /// Parses `expression`; a syntax error is what upstream calls a compile error, and a
    /// call of something Kubernetes has but dracheck lacks is [`CelError::Unsupported`].
    pub fn compile(&self, expression: &str) -> Result<Selector, CelError> {
        // The parser takes what upstream's does (optional syntax included; backquoted
        // identifiers, which Kubernetes does not enable, rejected): its errors are upstream's.
        let program = self.env.compile(expression).map_err(|e| CelError::Compile(e.to_string().trim().to_string()))?;
        if let Some(feature) = unsupported_call(program.expression(), self.lacking) {
            return Err(CelError::Unsupported { feature });
        }
        Ok(Selector { program, domains: indexed_domains(expression) })
    }

    /// Whether the device matches; `Err` is a runtime error (a missing attribute, a type
    /// mismatch, a result that is not a bool), which the scheduler reports as such, or an
    /// overload Kubernetes has and dracheck lacks.
    pub fn matches(&self, selector: &Selector, device: &DeviceInput<'_>) -> Result<bool, CelError> {
        let mut ctx = Context::with_env(self.env.clone());
        functions::register(&mut ctx);
        net::register(&mut ctx);
        url::register(&mut ctx);
        format::register(&mut ctx);
        optional::register(&mut ctx);
        comprehensions::register(&mut ctx);
        ctx.add_variable_from_value("device", device_value(device, &selector.domains).map_err(CelError::Runtime)?);
        match selector.program.execute(&ctx) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(CelError::Runtime(format!("the expression gives {}, not a bool", type_name(&other)))),
            Err(e) => Err(runtime_error(&e, self.lacking)),
        }
    }
}

/// Why a selector has no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CelError {
    /// The expression does not compile, for the apiserver either: a wrong selector.
    #[error("{0}")]
    Compile(String),
    /// Evaluation fails on this device as it does in the scheduler (a missing attribute, a
    /// type mismatch, a result that is not a bool): a wrong selector for this device.
    #[error("{0}")]
    Runtime(String),
    /// Kubernetes' DRA environment has `feature`, dracheck does not: no verdict either way.
    #[error("dracheck cannot evaluate this selector: {feature} is not implemented by dracheck")]
    Unsupported { feature: String },
}

/// What Kubernetes' DRA environment has and this one lacks, by the name a call has in the
/// expression, with the library it belongs to. Empty: every function of the 1.37 environment
/// is implemented; one that a later release adds goes here until it is.
pub const UNSUPPORTED: Lacking = &[];

/// A call in `expr` of a function of `lacking`, named; the innermost one, which the others
/// take as argument or receiver.
fn unsupported_call(expr: &IdedExpr, lacking: Lacking) -> Option<String> {
    let (children, own): (Vec<&IdedExpr>, Option<String>) = match &expr.expr {
        Expr::Call(call) => {
            let qualified = call
                .target
                .as_ref()
                .and_then(|t| namespace(&t.expr))
                .map_or_else(|| call.func_name.clone(), |ns| format!("{ns}.{}", call.func_name));
            let own = [qualified.as_str(), call.func_name.as_str()].into_iter().find_map(|name| {
                lacking.iter().find(|(n, _)| *n == name).map(|(_, library)| format!("`{name}` ({library})"))
            });
            (call.target.iter().map(|t| &**t).chain(&call.args).collect(), own)
        }
        Expr::Comprehension(c) => (vec![&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result], None),
        Expr::List(l) => (l.elements.iter().collect(), None),
        Expr::Map(m) => (
            m.entries
                .iter()
                .flat_map(|e| match &e.expr {
                    EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
                    EntryExpr::StructField(f) => vec![&f.value],
                })
                .collect(),
            None,
        ),
        Expr::Struct(s) => (
            s.entries
                .iter()
                .filter_map(|e| match &e.expr {
                    EntryExpr::StructField(f) => Some(&f.value),
                    EntryExpr::MapEntry(_) => None,
                })
                .collect(),
            None,
        ),
        Expr::Select(s) => (vec![&*s.operand], None),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => (Vec::new(), None),
    };
    children.into_iter().find_map(|c| unsupported_call(c, lacking)).or(own)
}

/// `a.b` of a call `a.b.f(...)`: the namespace a qualified function name would have.
fn namespace(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Ident(name) => Some(name.clone()),
        Expr::Select(s) if !s.test => namespace(&s.operand.expr).map(|ns| format!("{ns}.{}", s.field)),
        _ => None,
    }
}

/// An evaluation error as the scheduler's, or as unsupported where it is a function of
/// Kubernetes' that is missing here (a call the static check in `compile` did not see).
fn runtime_error(e: &ExecutionError, lacking: Lacking) -> CelError {
    match e {
        ExecutionError::NoSuchKey(k) => CelError::Runtime(format!("no such key: {k}")),
        ExecutionError::UndeclaredReference(name) if lacking.iter().any(|(n, _)| **n == ***name) => {
            CelError::Unsupported { feature: format!("`{name}`") }
        }
        other => CelError::Runtime(other.to_string()),
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
    // Declared upstream with the consumable capacity feature (1.34 on); without it the
    // apiserver rejects a selector that reads it, so having it here decides nothing wrongly.
    fields.insert(
        Key::String(Arc::new("allowMultipleAllocations".into())),
        Value::Bool(device.allow_multiple_allocations),
    );
    Ok(Value::Map(Map { map: Arc::new(fields) }))
}

#[cfg(test)]
mod tests;
