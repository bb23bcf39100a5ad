//! What cel-go's optional types library (version 2, the latest, which `cel.OptionalTypes()`
//! gives Kubernetes) has beyond cel-rust's: `list.first()`, `list.last()`,
//! `optional.unwrap(list)` and `list.unwrapOpt()`. The rest (`optional.of`, `.?`, `orValue`,
//! `optMap`, ...) is cel-rust's standard library.

use std::sync::Arc;

use cel::extractors::This;
use cel::objects::OptionalValue;
use cel::{Context, ExecutionError, ResolveResult, Value};

use super::type_name;

fn optional(v: Option<Value>) -> Value {
    Value::Opaque(Arc::new(v.map_or_else(OptionalValue::none, OptionalValue::of)))
}

fn list<'a>(function: &str, v: &'a Value) -> Result<&'a [Value], ExecutionError> {
    match v {
        Value::List(l) => Ok(l),
        other => Err(ExecutionError::no_such_member_overload(function, vec![type_name(other)])),
    }
}

/// The values of the present optionals of a list, in order.
fn unwrap(function: &str, v: &Value) -> ResolveResult {
    let mut out = Vec::new();
    for item in list(function, v)? {
        let opt: &OptionalValue = item.try_into()?;
        out.extend(opt.value().cloned());
    }
    Ok(Value::List(Arc::new(out)))
}

/// The functions, in the context.
pub fn register(ctx: &mut Context<'_, '_>) {
    let added = [
        ctx.add_function("first", |This(this): This<Value>| -> ResolveResult {
            Ok(optional(list("first", &this)?.first().cloned()))
        }),
        ctx.add_function("last", |This(this): This<Value>| -> ResolveResult {
            Ok(optional(list("last", &this)?.last().cloned()))
        }),
        ctx.add_function("optional.unwrap", |l: Value| unwrap("optional.unwrap", &l)),
        ctx.add_function("unwrapOpt", |This(this): This<Value>| unwrap("unwrapOpt", &this)),
    ];
    for a in added {
        a.expect("no optional function shadows an overload of the environment");
    }
}
