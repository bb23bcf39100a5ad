//! The functions Kubernetes' CEL libraries add and DRA selectors use: `quantity()` and its
//! methods, `semver()` and its methods, the list library (`isSorted`, `sum`, `min`, `max`,
//! `indexOf`, `lastIndexOf`, `includes`), the regex library (`find`, `findAll`), the sets extension
//! (`sets.contains`, `sets.equivalent`, `sets.intersects`) and the `cel.bind` macro.

use std::cmp::Ordering;
use std::sync::Arc;

use cel::common::ast::{ComprehensionExpr, Expr, IdedExpr, ListExpr, LiteralValue};
use cel::common::types::{CelBool, CelInt, DYN_TYPE, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::extractors::{Arguments, This};
use cel::objects::Opaque;
use cel::parser::{Macro, MacroExprHelper, ParseError};
use cel::{Context, DeclarationError, Env, ExecutionError, ResolveResult, Value};

use super::{CelQuantity, Quantity, Semver, type_name};

/// What must be declared on the environment: macros, and overloads of names that the
/// strings extension already declares.
pub fn declare(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_macro(Macro::receiver("bind", 3, bind_macro))?;
    env.add_member_overload("indexOf", "list.indexOf(dyn)", LIST_TYPE, vec![DYN_TYPE], list_index_of)?;
    env.add_member_overload("lastIndexOf", "list.lastIndexOf(dyn)", LIST_TYPE, vec![DYN_TYPE], list_last_index_of)?;
    env.add_member_overload("includes", "dyn.includes(dyn)", DYN_TYPE, vec![DYN_TYPE], includes)?;
    let lists = || vec![LIST_TYPE, LIST_TYPE];
    env.add_overload("sets.contains", "sets.contains(list,list)", lists(), sets_contains)?;
    env.add_overload("sets.equivalent", "sets.equivalent(list,list)", lists(), sets_equivalent)?;
    env.add_overload("sets.intersects", "sets.intersects(list,list)", lists(), sets_intersects)?;
    Ok(())
}

/// The elements of the two list arguments of the sets function `function`.
fn two_lists<'a, 'b, 'v>(
    function: &str,
    args: &'a [CowVal<'b, 'v>],
) -> Result<[Vec<&'a (dyn Val + 'v)>; 2], ExecutionError> {
    let [a, b] = args else { return Err(ExecutionError::invalid_argument_count(2, args.len())) };
    let items = |l: &'a CowVal<'b, 'v>| {
        let iterable = l.as_ref().as_iterable().ok_or_else(|| err(function, "an argument is not a list"))?;
        let (mut it, mut out) = (iterable.iter(), Vec::new());
        while let Some(x) = it.next() {
            out.push(x);
        }
        Ok::<_, ExecutionError>(out)
    };
    Ok([items(a)?, items(b)?])
}

/// Every element of `of` is in `within`, by CEL equality (so `1 == 1.0`, as cel-go's sets).
fn all_in(of: &[&dyn Val], within: &[&dyn Val]) -> bool {
    of.iter().all(|x| within.iter().any(|y| y.equals(*x)))
}

fn sets_contains<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [a, b] = two_lists("sets.contains", &args)?;
    Ok(CowVal::owned(CelBool::from(all_in(&b, &a))))
}

fn sets_equivalent<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [a, b] = two_lists("sets.equivalent", &args)?;
    Ok(CowVal::owned(CelBool::from(all_in(&a, &b) && all_in(&b, &a))))
}

fn sets_intersects<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [a, b] = two_lists("sets.intersects", &args)?;
    Ok(CowVal::owned(CelBool::from(a.iter().any(|x| b.iter().any(|y| y.equals(*x))))))
}

/// Expands `cel.bind(v, init, expr)` into a comprehension over nothing whose accumulator is
/// `v`, as cel-go's bindings extension does.
fn bind_macro(
    helper: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    if !matches!(target.as_ref().map(|t| &t.expr), Some(Expr::Ident(name)) if name == "cel") {
        return Ok(None);
    }
    let Expr::Ident(var) = &args[0].expr else {
        return Err(helper.new_error(args[0].id, "cel.bind() variable name must be a simple identifier"));
    };
    let var = var.clone();
    let result = args.pop().expect("three arguments");
    let init = args.pop().expect("three arguments");
    let bind = ComprehensionExpr {
        iter_range: helper.next_expr(Expr::List(ListExpr::new(Vec::new()))),
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: var.clone(),
        accu_init: init,
        loop_cond: helper.next_expr(Expr::Literal(LiteralValue::Boolean(false.into()))),
        loop_step: helper.next_expr(Expr::Ident(var)),
        result,
    };
    Ok(Some(helper.next_expr(Expr::Comprehension(Box::new(bind)))))
}

fn position<'b, 'v>(args: Vec<CowVal<'b, 'v>>, last: bool) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list, needle] = <[CowVal<'b, 'v>; 2]>::try_from(args)
        .map_err(|a: Vec<_>| ExecutionError::invalid_argument_count(2, a.len()))?;
    let Some(iterable) = list.as_ref().as_iterable() else {
        return Err(ExecutionError::function_error("indexOf", "receiver is not a list"));
    };
    let mut items = iterable.iter();
    let (mut i, mut found) = (0i64, -1i64);
    while let Some(item) = items.next() {
        if item.equals(needle.as_ref()) {
            found = i;
            if !last {
                break;
            }
        }
        i += 1;
    }
    Ok(CowVal::owned(CelInt::from(found)))
}

/// `x.includes(y)`, the list library's version 1 (Kubernetes 1.37; 1.36 with
/// `DRAListTypeAttributes`): whether the list `x` has an element equal to `y`, or, when `x`
/// is not a list, whether `x == y`, so that one selector reads a scalar and a list attribute.
fn includes<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [this, other] = <[CowVal<'b, 'v>; 2]>::try_from(args)
        .map_err(|a: Vec<_>| ExecutionError::invalid_argument_count(2, a.len()))?;
    let (this, other) = (this.as_ref(), other.as_ref());
    let found = match this.as_iterable().filter(|_| this.get_type() == &LIST_TYPE) {
        Some(list) => {
            let mut items = list.iter();
            let mut found = false;
            while let Some(item) = items.next() {
                if item.equals(other) {
                    found = true;
                    break;
                }
            }
            found
        }
        None => this.equals(other),
    };
    Ok(CowVal::owned(CelBool::from(found)))
}

fn list_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position(args, false)
}

fn list_last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position(args, true)
}

fn err(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

fn quantity_of(v: &Value) -> Option<&Quantity> {
    match v {
        Value::Opaque(o) => (**o).downcast_ref::<CelQuantity>().map(|q| &q.0),
        _ => None,
    }
}

fn semver_of(v: &Value) -> Option<&Semver> {
    match v {
        Value::Opaque(o) => (**o).downcast_ref::<Semver>(),
        _ => None,
    }
}

fn opaque<T: Opaque>(v: T) -> Value {
    Value::Opaque(Arc::new(v))
}

fn opaque_quantity(q: Quantity) -> Value {
    opaque(CelQuantity(q))
}

/// Both sides as one comparable kind, or the error upstream gives for mixed types.
fn compare(function: &str, this: &Value, other: &Value) -> Result<Ordering, ExecutionError> {
    if let (Some(a), Some(b)) = (quantity_of(this), quantity_of(other)) {
        return Ok(a.cmp(b));
    }
    if let (Some(a), Some(b)) = (semver_of(this), semver_of(other)) {
        return Ok(a.cmp(b));
    }
    Err(ExecutionError::no_such_member_overload(function, vec![type_name(this), type_name(other)]))
}

fn ordering_int(o: Ordering) -> i64 {
    match o {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }
}

fn semver_parse(Arguments(args): Arguments) -> Result<Option<Semver>, String> {
    let (text, normalize) = match args.as_slice() {
        [Value::String(s)] => (s.as_str(), false),
        [Value::String(s), Value::Bool(n)] => (s.as_str(), *n),
        _ => return Err("semver() takes a string and an optional bool".into()),
    };
    Ok(Semver::parse(text, normalize).ok())
}

fn quantity_arg(function: &str, v: &Value) -> Result<Quantity, ExecutionError> {
    match v {
        Value::Int(i) => Ok(Quantity::from_int(*i)),
        other => quantity_of(other)
            .cloned()
            .ok_or_else(|| ExecutionError::no_such_member_overload(function, vec![type_name(other)])),
    }
}

fn list_items(function: &str, v: &Value) -> Result<Arc<Vec<Value>>, ExecutionError> {
    match v {
        Value::List(l) => Ok(l.clone()),
        other => Err(ExecutionError::no_such_member_overload(function, vec![type_name(other)])),
    }
}

/// `a < b` for the element types the list library orders: numbers, strings, bools, and the
/// Kubernetes types with `compareTo`.
fn order(function: &str, a: &Value, b: &Value) -> Result<Ordering, ExecutionError> {
    if let Ok(o) = compare(function, a, b) {
        return Ok(o);
    }
    a.partial_cmp(b).ok_or_else(|| ExecutionError::ValuesNotComparable(a.clone(), b.clone()))
}

fn extreme(function: &'static str, this: &Value, want: Ordering) -> ResolveResult {
    let items = list_items(function, this)?;
    let mut best = items.first().cloned().ok_or_else(|| err(function, format!("{function} of an empty list")))?;
    for item in items.iter().skip(1) {
        if order(function, item, &best)? == want {
            best = item.clone();
        }
    }
    Ok(best)
}

/// `pattern` compiled for the regex function `function` (RE2 syntax, which the regex crate
/// follows: no backreferences or lookaround).
fn regex(function: &str, pattern: &str) -> Result<regex::Regex, ExecutionError> {
    regex::Regex::new(pattern).map_err(|e| err(function, format!("invalid regex {pattern:?}: {e}")))
}

/// `s.findAll(re)` / `s.findAll(re, n)`: the matches, at most `n` of them where `n` is not
/// negative (upstream's `lib.Regex`).
fn find_all(this: &str, args: &[Value]) -> ResolveResult {
    let (pattern, limit) = match args {
        [Value::String(p)] => (p, -1),
        [Value::String(p), Value::Int(n)] => (p, *n),
        _ => return Err(err("findAll", "expects a regex and an optional count")),
    };
    let re = regex("findAll", pattern)?;
    let found = re.find_iter(this).map(|m| Value::String(Arc::new(m.as_str().to_string())));
    let found: Vec<Value> = match usize::try_from(limit) {
        Ok(n) => found.take(n).collect(),
        Err(_) => found.collect(),
    };
    Ok(Value::List(Arc::new(found)))
}

/// Functions that live in the context: their names are not declared by the environment.
pub fn register(ctx: &mut Context<'_, '_>) {
    let added = [
        ctx.add_function("find", |This(this): This<Arc<String>>, pattern: Arc<String>| -> ResolveResult {
            let re = regex("find", &pattern)?;
            Ok(Value::String(Arc::new(re.find(&this).map_or("", |m| m.as_str()).to_string())))
        }),
        ctx.add_function("findAll", |This(this): This<Arc<String>>, Arguments(args): Arguments| -> ResolveResult {
            find_all(&this, &args)
        }),
        ctx.add_function("quantity", |s: Arc<String>| -> ResolveResult {
            Quantity::parse(&s).map(opaque_quantity).map_err(|e| err("quantity", e))
        }),
        ctx.add_function("isQuantity", |s: Arc<String>| Quantity::parse(&s).is_ok()),
        ctx.add_function("semver", |args: Arguments| -> ResolveResult {
            let text = args.0.first().cloned();
            match semver_parse(args) {
                Ok(Some(v)) => Ok(opaque(v)),
                Ok(None) => Err(err("semver", format!("{text:?} is not a valid semantic version"))),
                Err(e) => Err(err("semver", e)),
            }
        }),
        ctx.add_function("isSemver", |args: Arguments| -> ResolveResult {
            semver_parse(args).map(|v| Value::Bool(v.is_some())).map_err(|e| err("isSemver", e))
        }),
        ctx.add_function("compareTo", |This(this): This<Value>, other: Value| -> ResolveResult {
            compare("compareTo", &this, &other).map(|o| Value::Int(ordering_int(o)))
        }),
        ctx.add_function("isGreaterThan", |This(this): This<Value>, other: Value| -> ResolveResult {
            compare("isGreaterThan", &this, &other).map(|o| Value::Bool(o == Ordering::Greater))
        }),
        ctx.add_function("isLessThan", |This(this): This<Value>, other: Value| -> ResolveResult {
            compare("isLessThan", &this, &other).map(|o| Value::Bool(o == Ordering::Less))
        }),
        ctx.add_function("major", |This(this): This<Value>| -> ResolveResult {
            semver_of(&this).map(|v| Value::Int(v.major as i64)).ok_or_else(|| err("major", "receiver is not a semver"))
        }),
        ctx.add_function("minor", |This(this): This<Value>| -> ResolveResult {
            semver_of(&this).map(|v| Value::Int(v.minor as i64)).ok_or_else(|| err("minor", "receiver is not a semver"))
        }),
        ctx.add_function("patch", |This(this): This<Value>| -> ResolveResult {
            semver_of(&this).map(|v| Value::Int(v.patch as i64)).ok_or_else(|| err("patch", "receiver is not a semver"))
        }),
        ctx.add_function("sign", |This(this): This<Value>| -> ResolveResult {
            quantity_of(&this).map(|q| Value::Int(q.sign())).ok_or_else(|| err("sign", "receiver is not a quantity"))
        }),
        ctx.add_function("isInteger", |This(this): This<Value>| -> ResolveResult {
            quantity_of(&this)
                .map(|q| Value::Bool(q.is_integer()))
                .ok_or_else(|| err("isInteger", "receiver is not a quantity"))
        }),
        ctx.add_function("asInteger", |This(this): This<Value>| -> ResolveResult {
            let q = quantity_of(&this).ok_or_else(|| err("asInteger", "receiver is not a quantity"))?;
            q.as_integer().map(Value::Int).map_err(|e| err("asInteger", e))
        }),
        ctx.add_function("asApproximateFloat", |This(this): This<Value>| -> ResolveResult {
            quantity_of(&this)
                .map(|q| Value::Float(q.as_float()))
                .ok_or_else(|| err("asApproximateFloat", "receiver is not a quantity"))
        }),
        ctx.add_function("add", |This(this): This<Value>, other: Value| -> ResolveResult {
            let a = quantity_arg("add", &this)?;
            a.add(&quantity_arg("add", &other)?).map(opaque_quantity).map_err(|e| err("add", e))
        }),
        ctx.add_function("sub", |This(this): This<Value>, other: Value| -> ResolveResult {
            let a = quantity_arg("sub", &this)?;
            a.sub(&quantity_arg("sub", &other)?).map(opaque_quantity).map_err(|e| err("sub", e))
        }),
        ctx.add_function("isSorted", |This(this): This<Value>| -> ResolveResult {
            let items = list_items("isSorted", &this)?;
            for pair in items.windows(2) {
                if order("isSorted", &pair[0], &pair[1])? == Ordering::Greater {
                    return Ok(Value::Bool(false));
                }
            }
            Ok(Value::Bool(true))
        }),
        ctx.add_function("sum", |This(this): This<Value>| -> ResolveResult {
            let items = list_items("sum", &this)?;
            let mut total = Value::Int(0);
            for (i, item) in items.iter().enumerate() {
                total = match (&total, item) {
                    (_, v) if i == 0 => v.clone(),
                    (Value::Int(a), Value::Int(b)) => {
                        Value::Int(a.checked_add(*b).ok_or_else(|| err("sum", "overflow"))?)
                    }
                    (Value::UInt(a), Value::UInt(b)) => {
                        Value::UInt(a.checked_add(*b).ok_or_else(|| err("sum", "overflow"))?)
                    }
                    (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
                    (a, b) => match (quantity_of(a), quantity_of(b)) {
                        (Some(x), Some(y)) => opaque_quantity(x.add(y).map_err(|e| err("sum", e))?),
                        _ => {
                            return Err(ExecutionError::no_such_member_overload(
                                "sum",
                                vec![type_name(a), type_name(b)],
                            ));
                        }
                    },
                };
            }
            Ok(total)
        }),
        ctx.add_function("min", |This(this): This<Value>| extreme("min", &this, Ordering::Less)),
        ctx.add_function("max", |This(this): This<Value>| extreme("max", &this, Ordering::Greater)),
    ];
    for a in added {
        a.expect("no DRA function shadows an overload of the environment");
    }
}
