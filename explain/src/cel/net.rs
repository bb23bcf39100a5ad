//! Kubernetes' IP and CIDR libraries (`k8s.io/apiserver/pkg/cel/library/{ip,cidr}.go`):
//! `ip()`, `isIP()`, `ip.isCanonical()`, `cidr()`, `isCIDR()`, their methods and `string()`, with
//! upstream's parsing rules: no zone (`%eth0`) and no IPv4-mapped IPv6 address (`::ffff:1.2.3.4`).

use std::net::{IpAddr, Ipv6Addr};
use std::sync::Arc;

use cel::common::types::{CelBool, CelString, Type};
use cel::common::value::CowVal;
use cel::extractors::This;
use cel::objects::Opaque;
use cel::{Context, DeclarationError, Env, ExecutionError, ResolveResult, Value};

use super::type_name;

/// An IP address as a CEL value (`net.IP`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ip(IpAddr);

/// A CIDR as a CEL value (`net.IPPrefix`): the address as written and the prefix length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Opaque for Ip {
    fn runtime_type_name(&self) -> &str {
        "net.IP"
    }
}

impl Opaque for Cidr {
    fn runtime_type_name(&self) -> &str {
        "net.IPPrefix"
    }
}

fn err(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

/// Upstream's `parseIPAddr`: what Go's `netip.ParseAddr` takes, without a zone and without an
/// IPv4-mapped IPv6 form.
fn parse_ip(s: &str) -> Result<IpAddr, String> {
    if s.contains('%') {
        return Err(format!("IP address with zone value is not allowed: {s}"));
    }
    let addr: IpAddr =
        s.parse().map_err(|e| format!("IP Address {s:?} parse error during conversion from string: {e}"))?;
    if let IpAddr::V6(v6) = addr
        && v6.to_ipv4_mapped().is_some()
    {
        return Err(format!("IPv4-mapped IPv6 address is not allowed: {s}"));
    }
    Ok(addr)
}

fn parse_cidr(s: &str) -> Result<Cidr, String> {
    let (addr, prefix) =
        s.split_once('/').ok_or_else(|| format!("network address parse error: {s:?} has no prefix length"))?;
    let addr = parse_ip(addr)?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix: u8 = prefix
        .parse()
        .ok()
        .filter(|p| *p <= max && !prefix.starts_with('+') && (prefix == "0" || !prefix.starts_with('0')))
        .ok_or_else(|| format!("network address parse error: bad prefix length in {s:?}"))?;
    Ok(Cidr { addr, prefix })
}

fn bits(addr: IpAddr) -> (u128, u8) {
    match addr {
        IpAddr::V4(v4) => (u32::from(v4) as u128, 32),
        IpAddr::V6(v6) => (u128::from(v6), 128),
    }
}

fn from_bits(value: u128, v4: bool) -> IpAddr {
    if v4 { IpAddr::V4((value as u32).into()) } else { IpAddr::V6(Ipv6Addr::from(value)) }
}

impl Cidr {
    fn mask(&self) -> u128 {
        let (_, width) = bits(self.addr);
        let host = u32::from(width - self.prefix);
        let all = if width == 32 { u128::from(u32::MAX) } else { u128::MAX };
        all.checked_shl(host).map_or(0, |m| m & all)
    }

    fn masked(&self) -> Cidr {
        let (value, _) = bits(self.addr);
        Cidr { addr: from_bits(value & self.mask(), self.addr.is_ipv4()), prefix: self.prefix }
    }

    fn contains_ip(&self, ip: IpAddr) -> bool {
        self.addr.is_ipv4() == ip.is_ipv4() && bits(ip).0 & self.mask() == bits(self.addr).0 & self.mask()
    }

    fn contains_cidr(&self, other: &Cidr) -> bool {
        other.prefix >= self.prefix && self.contains_ip(other.addr)
    }
}

fn ip_of<'a>(function: &str, v: &'a Value) -> Result<&'a Ip, ExecutionError> {
    match v {
        Value::Opaque(o) => (**o).downcast_ref::<Ip>().ok_or_else(|| err(function, "not an IP")),
        other => Err(ExecutionError::no_such_member_overload(function, vec![type_name(other)])),
    }
}

fn cidr_of<'a>(function: &str, v: &'a Value) -> Result<&'a Cidr, ExecutionError> {
    match v {
        Value::Opaque(o) => (**o).downcast_ref::<Cidr>().ok_or_else(|| err(function, "not a CIDR")),
        other => Err(ExecutionError::no_such_member_overload(function, vec![type_name(other)])),
    }
}

fn ip_value(addr: IpAddr) -> Value {
    Value::Opaque(Arc::new(Ip(addr)))
}

fn is_canonical(text: &CelString<'_>) -> Result<CelBool, ExecutionError> {
    let addr = parse_ip(text.inner()).map_err(|e| err("ip.isCanonical", e))?;
    Ok(CelBool::from(addr.to_string() == text.inner()))
}

/// `string(ip)` and `string(cidr)`: Go's `netip.Addr.String()` (IPv6 in RFC 5952 form, as
/// Rust writes it) and `netip.Prefix.String()` (the address as written, not masked).
fn to_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [arg] = args.as_slice() else { return Err(ExecutionError::invalid_argument_count(1, args.len())) };
    let value = Value::try_from(arg.as_ref())?;
    let text = match &value {
        Value::Opaque(o) => match ((**o).downcast_ref::<Ip>(), (**o).downcast_ref::<Cidr>()) {
            (Some(ip), _) => ip.0.to_string(),
            (_, Some(c)) => format!("{}/{}", c.addr, c.prefix),
            _ => return Err(ExecutionError::no_such_overload("string", vec![type_name(&value)])),
        },
        other => return Err(ExecutionError::no_such_overload("string", vec![type_name(other)])),
    };
    Ok(CowVal::owned(CelString::from(text)))
}

/// What the environment resolves: the qualified name, and the overloads of `string`.
pub fn declare(env: &mut Env) -> Result<(), DeclarationError> {
    cel::add_overload!(env, fn is_canonical: (CelString) -> Result<CelBool>, name = "ip.isCanonical")?;
    env.add_overload("string", "ip_to_string", vec![Type::new_opaque_type("net.IP")], to_string)?;
    env.add_overload("string", "cidr_to_string", vec![Type::new_opaque_type("net.IPPrefix")], to_string)
}

/// The functions and methods, in the context.
pub fn register(ctx: &mut Context<'_, '_>) {
    let added = [
        // `ip(string)` and `cidr.ip()` share the name: a string parses, a CIDR gives its address.
        ctx.add_function("ip", |This(this): This<Value>| -> ResolveResult {
            match &this {
                Value::String(s) => parse_ip(s).map(ip_value).map_err(|e| err("ip", e)),
                other => Ok(ip_value(cidr_of("ip", other)?.addr)),
            }
        }),
        ctx.add_function("isIP", |s: Arc<String>| parse_ip(&s).is_ok()),
        ctx.add_function("cidr", |s: Arc<String>| -> ResolveResult {
            parse_cidr(&s).map(|c| Value::Opaque(Arc::new(c))).map_err(|e| err("cidr", e))
        }),
        ctx.add_function("isCIDR", |s: Arc<String>| parse_cidr(&s).is_ok()),
        ctx.add_function("family", |This(this): This<Value>| -> ResolveResult {
            Ok(Value::Int(if ip_of("family", &this)?.0.is_ipv4() { 4 } else { 6 }))
        }),
        ctx.add_function("isUnspecified", |This(this): This<Value>| -> ResolveResult {
            Ok(Value::Bool(ip_of("isUnspecified", &this)?.0.is_unspecified()))
        }),
        ctx.add_function("isLoopback", |This(this): This<Value>| -> ResolveResult {
            Ok(Value::Bool(ip_of("isLoopback", &this)?.0.is_loopback()))
        }),
        ctx.add_function("isLinkLocalMulticast", |This(this): This<Value>| -> ResolveResult {
            Ok(Value::Bool(match ip_of("isLinkLocalMulticast", &this)?.0 {
                IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
                IpAddr::V6(v6) => v6.segments()[0] & 0xff0f == 0xff02,
            }))
        }),
        ctx.add_function("isLinkLocalUnicast", |This(this): This<Value>| -> ResolveResult {
            Ok(Value::Bool(match ip_of("isLinkLocalUnicast", &this)?.0 {
                IpAddr::V4(v4) => v4.is_link_local(),
                IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
            }))
        }),
        // Go's `netip.Addr.IsGlobalUnicast`: not unspecified, loopback, multicast, link-local or
        // the IPv4 broadcast address (private ranges count as global).
        ctx.add_function("isGlobalUnicast", |This(this): This<Value>| -> ResolveResult {
            Ok(Value::Bool(match ip_of("isGlobalUnicast", &this)?.0 {
                IpAddr::V4(v4) => {
                    !(v4.is_unspecified()
                        || v4.is_loopback()
                        || v4.is_multicast()
                        || v4.is_link_local()
                        || v4.is_broadcast())
                }
                IpAddr::V6(v6) => {
                    !(v6.is_unspecified()
                        || v6.is_loopback()
                        || v6.is_multicast()
                        || v6.segments()[0] & 0xffc0 == 0xfe80)
                }
            }))
        }),
        ctx.add_function("containsIP", |This(this): This<Value>, other: Value| -> ResolveResult {
            let cidr = cidr_of("containsIP", &this)?;
            let ip = match &other {
                Value::String(s) => parse_ip(s).map_err(|e| err("containsIP", e))?,
                v => ip_of("containsIP", v)?.0,
            };
            Ok(Value::Bool(cidr.contains_ip(ip)))
        }),
        ctx.add_function("containsCIDR", |This(this): This<Value>, other: Value| -> ResolveResult {
            let cidr = cidr_of("containsCIDR", &this)?;
            let inner = match &other {
                Value::String(s) => parse_cidr(s).map_err(|e| err("containsCIDR", e))?,
                v => cidr_of("containsCIDR", v)?.clone(),
            };
            Ok(Value::Bool(cidr.contains_cidr(&inner)))
        }),
        ctx.add_function("masked", |This(this): This<Value>| -> ResolveResult {
            Ok(Value::Opaque(Arc::new(cidr_of("masked", &this)?.masked())))
        }),
        ctx.add_function("prefixLength", |This(this): This<Value>| -> ResolveResult {
            Ok(Value::Int(i64::from(cidr_of("prefixLength", &this)?.prefix)))
        }),
    ];
    for a in added {
        a.expect("no IP function shadows an overload of the environment");
    }
}
