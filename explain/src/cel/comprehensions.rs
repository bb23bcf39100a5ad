//! cel-go's two-variable comprehensions (`ext.TwoVarComprehensions`, in Kubernetes' base
//! environment since 1.32): `all`, `exists` and `existsOne` with an index or key and a value,
//! `transformList`, `transformMap` and `transformMapEntry`.
//!
//! cel-rust's interpreter has one iteration variable, so each macro iterates over
//! `@pairs(target)` (`[index, value]` for a list, `[key, value]` for a map) with the one
//! variable `@it`, and binds the two names to its elements as `cel.bind` does, around each
//! expression the user wrote. Accumulator, condition, step and result are cel-go's.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::ast::{CallExpr, ComprehensionExpr, Expr, IdedExpr, ListExpr, LiteralValue, MapExpr, operators};
use cel::objects::{Key, Map};
use cel::parser::{Macro, MacroExprHelper, ParseError};
use cel::{Context, DeclarationError, Env, ExecutionError, ResolveResult, Value};

use super::type_name;

/// The iteration variable over the pairs; `@` keeps it out of the user's names.
const PAIR: &str = "@it";
/// The accumulator, as cel-rust's own macros name it.
const ACCU: &str = "@result";
const PAIRS: &str = "@pairs";
const INSERT: &str = "@insert";
const MERGE: &str = "@merge";

#[derive(Clone, Copy)]
enum Kind {
    All,
    Exists,
    ExistsOne,
    TransformList,
    TransformMap,
    TransformMapEntry,
}

/// The macros, on the environment.
pub fn declare(env: &mut Env) -> Result<(), DeclarationError> {
    let macros = [
        ("all", Kind::All, 3),
        ("exists", Kind::Exists, 3),
        ("existsOne", Kind::ExistsOne, 3),
        ("exists_one", Kind::ExistsOne, 3),
        ("transformList", Kind::TransformList, 3),
        ("transformList", Kind::TransformList, 4),
        ("transformMap", Kind::TransformMap, 3),
        ("transformMap", Kind::TransformMap, 4),
        ("transformMapEntry", Kind::TransformMapEntry, 3),
        ("transformMapEntry", Kind::TransformMapEntry, 4),
    ];
    for (name, kind, args) in macros {
        env.add_macro(Macro::receiver(name, args, move |helper, target, args| expand(helper, target, args, kind)))?;
    }
    Ok(())
}

fn ident(h: &mut MacroExprHelper<'_>, name: &str) -> IdedExpr {
    h.next_expr(Expr::Ident(name.to_string()))
}

fn call(h: &mut MacroExprHelper<'_>, function: &str, args: Vec<IdedExpr>) -> IdedExpr {
    h.next_expr(Expr::Call(CallExpr { func_name: function.to_string(), target: None, args }))
}

fn literal(h: &mut MacroExprHelper<'_>, value: LiteralValue) -> IdedExpr {
    h.next_expr(Expr::Literal(value))
}

fn comprehension(
    h: &mut MacroExprHelper<'_>,
    range: IdedExpr,
    var: &str,
    accu: &str,
    [init, cond, step, result]: [IdedExpr; 4],
) -> IdedExpr {
    h.next_expr(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: range,
        iter_var: var.to_string(),
        iter_var2: None,
        accu_var: accu.to_string(),
        accu_init: init,
        loop_cond: cond,
        loop_step: step,
        result,
    })))
}

/// `body` with `var` bound to `init`: `cel.bind`'s comprehension over nothing.
fn bind(h: &mut MacroExprHelper<'_>, var: &str, init: IdedExpr, body: IdedExpr) -> IdedExpr {
    let range = h.next_expr(Expr::List(ListExpr::new(Vec::new())));
    let never = literal(h, LiteralValue::Boolean(false.into()));
    let step = ident(h, var);
    comprehension(h, range, "#unused", var, [init, never, step, body])
}

/// `body` with the two names bound to the current pair's elements.
fn bound(h: &mut MacroExprHelper<'_>, [first, second]: &[String; 2], body: IdedExpr) -> IdedExpr {
    let element = |h: &mut MacroExprHelper<'_>, i: i64| {
        let pair = ident(h, PAIR);
        let at = literal(h, LiteralValue::Int(i.into()));
        call(h, operators::INDEX, vec![pair, at])
    };
    let value = element(h, 1);
    let inner = bind(h, second, value, body);
    let key = element(h, 0);
    bind(h, first, key, inner)
}

/// cel-go's `extractIterVars`: two distinct simple names, neither the accumulator.
fn names(h: &mut MacroExprHelper<'_>, args: &[IdedExpr]) -> Result<[String; 2], ParseError> {
    let name = |h: &mut MacroExprHelper<'_>, a: &IdedExpr| match &a.expr {
        Expr::Ident(n) if n == ACCU || n == "__result__" => {
            Err(h.new_error(a.id, "iteration variable overwrites accumulator variable"))
        }
        Expr::Ident(n) => Ok(n.clone()),
        _ => Err(h.new_error(a.id, "argument must be a simple name")),
    };
    let (first, second) = (name(h, &args[0])?, name(h, &args[1])?);
    if first == second {
        return Err(h.new_error(args[1].id, format!("duplicate variable name: {first}")));
    }
    Ok([first, second])
}

fn expand(
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
    kind: Kind,
) -> Result<Option<IdedExpr>, ParseError> {
    let Some(target) = target.take() else { return Ok(None) };
    let vars = names(h, args)?;
    let mut exprs: Vec<IdedExpr> = args.drain(2..).collect();
    let last = exprs.pop().expect("a macro of three or four arguments");
    let transform = bound(h, &vars, last);
    let filter = exprs.pop().map(|f| bound(h, &vars, f));
    let range = call(h, PAIRS, vec![target]);
    let accu = |h: &mut MacroExprHelper<'_>| ident(h, ACCU);
    let [init, cond, step, result] = match kind {
        Kind::All => {
            let a = accu(h);
            let cond = call(h, operators::NOT_STRICTLY_FALSE, vec![a]);
            let a = accu(h);
            [
                literal(h, LiteralValue::Boolean(true.into())),
                cond,
                call(h, operators::LOGICAL_AND, vec![a, transform]),
                accu(h),
            ]
        }
        Kind::Exists => {
            let a = accu(h);
            let not = call(h, operators::LOGICAL_NOT, vec![a]);
            let cond = call(h, operators::NOT_STRICTLY_FALSE, vec![not]);
            let a = accu(h);
            [
                literal(h, LiteralValue::Boolean(false.into())),
                cond,
                call(h, operators::LOGICAL_OR, vec![a, transform]),
                accu(h),
            ]
        }
        Kind::ExistsOne => {
            let (a, one) = (accu(h), literal(h, LiteralValue::Int(1.into())));
            let plus = call(h, operators::ADD, vec![a, one]);
            let a = accu(h);
            let step = call(h, operators::CONDITIONAL, vec![transform, plus, a]);
            let (a, one) = (accu(h), literal(h, LiteralValue::Int(1.into())));
            let result = call(h, operators::EQUALS, vec![a, one]);
            [literal(h, LiteralValue::Int(0.into())), literal(h, LiteralValue::Boolean(true.into())), step, result]
        }
        Kind::TransformList | Kind::TransformMap | Kind::TransformMapEntry => {
            let a = accu(h);
            let grown = match kind {
                Kind::TransformList => {
                    let item = h.next_expr(Expr::List(ListExpr::new(vec![transform])));
                    call(h, operators::ADD, vec![a, item])
                }
                Kind::TransformMap => {
                    let pair = ident(h, PAIR);
                    let at = literal(h, LiteralValue::Int(0.into()));
                    let key = call(h, operators::INDEX, vec![pair, at]);
                    call(h, INSERT, vec![a, key, transform])
                }
                _ => call(h, MERGE, vec![a, transform]),
            };
            let step = match filter {
                Some(f) => {
                    let a = accu(h);
                    call(h, operators::CONDITIONAL, vec![f, grown, a])
                }
                None => grown,
            };
            let init = match kind {
                Kind::TransformList => h.next_expr(Expr::List(ListExpr::new(Vec::new()))),
                _ => h.next_expr(Expr::Map(MapExpr { entries: Vec::new() })),
            };
            [init, literal(h, LiteralValue::Boolean(true.into())), step, accu(h)]
        }
    };
    Ok(Some(comprehension(h, range, PAIR, ACCU, [init, cond, step, result])))
}

fn key_of(function: &str, v: &Value) -> Result<Key, ExecutionError> {
    Ok(match v {
        Value::Int(i) => Key::Int(*i),
        Value::UInt(u) => Key::Uint(*u),
        Value::Bool(b) => Key::Bool(*b),
        Value::String(s) => Key::String(s.clone()),
        other => {
            return Err(ExecutionError::function_error(function, format!("{} is not a map key", type_name(other))));
        }
    })
}

/// A key equal to `k` by CEL's numeric equality (`1 == 1u`), when one is in `map`.
fn collides(map: &HashMap<Key, Value>, k: &Key) -> bool {
    map.contains_key(k)
        || match k {
            Key::Int(i) => u64::try_from(*i).is_ok_and(|u| map.contains_key(&Key::Uint(u))),
            Key::Uint(u) => i64::try_from(*u).is_ok_and(|i| map.contains_key(&Key::Int(i))),
            _ => false,
        }
}

fn map_of(function: &str, v: &Value) -> Result<HashMap<Key, Value>, ExecutionError> {
    match v {
        Value::Map(m) => Ok((*m.map).clone()),
        other => Err(ExecutionError::no_such_overload(function, vec![type_name(other)])),
    }
}

fn map_value(map: HashMap<Key, Value>) -> Value {
    Value::Map(Map { map: Arc::new(map) })
}

/// The runtime helpers the expansions call.
pub fn register(ctx: &mut Context<'_, '_>) {
    let added = [
        ctx.add_function(PAIRS, |target: Value| -> ResolveResult {
            let pair = |k: Value, v: &Value| Value::List(Arc::new(vec![k, v.clone()]));
            let pairs: Vec<Value> = match &target {
                Value::List(l) => l.iter().enumerate().map(|(i, v)| pair(Value::Int(i as i64), v)).collect(),
                Value::Map(m) => m.map.iter().map(|(k, v)| pair(Value::from(k), v)).collect(),
                other => return Err(ExecutionError::no_such_overload("comprehension", vec![type_name(other)])),
            };
            Ok(Value::List(Arc::new(pairs)))
        }),
        ctx.add_function(INSERT, |map: Value, key: Value, value: Value| -> ResolveResult {
            let mut map = map_of("transformMap", &map)?;
            map.insert(key_of("transformMap", &key)?, value);
            Ok(map_value(map))
        }),
        ctx.add_function(MERGE, |map: Value, entries: Value| -> ResolveResult {
            let mut map = map_of("transformMapEntry", &map)?;
            for (k, v) in map_of("transformMapEntry", &entries)? {
                if collides(&map, &k) {
                    // Go's `%v`: strings unquoted.
                    let shown = match &k {
                        Key::Int(i) => i.to_string(),
                        Key::Uint(u) => u.to_string(),
                        Key::Bool(b) => b.to_string(),
                        Key::String(s) => s.to_string(),
                    };
                    return Err(ExecutionError::function_error(
                        "transformMapEntry",
                        format!("insert failed: key {shown} already exists"),
                    ));
                }
                map.insert(k, v);
            }
            Ok(map_value(map))
        }),
    ];
    for a in added {
        a.expect("no comprehension helper shadows an overload of the environment");
    }
}
