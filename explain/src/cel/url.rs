//! Kubernetes' URL library (`k8s.io/apiserver/pkg/cel/library/urls.go`): `url()`, `isURL()`
//! and the `getScheme`, `getHost`, `getHostname`, `getPort`, `getEscapedPath` and `getQuery`
//! methods.
//!
//! Upstream checks a string with Go's `url.ParseRequestURI` (an absolute URI or an absolute
//! path) and keeps what `url.Parse` makes of it; both are ported here, for the parts the
//! methods read, rather than taken from a WHATWG parser, which accepts and normalizes other
//! strings (`https://a:b:c/` is an error upstream, `HTTP://x` keeps its host as written).

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use cel::extractors::This;
use cel::objects::{Key, Map, Opaque};
use cel::{Context, ExecutionError, ResolveResult, Value};

use super::type_name;

/// A parsed URL as a CEL value (`kubernetes.URL`): the components the methods and equality
/// read, as Go's `url.URL` holds them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Url {
    scheme: String,
    /// What follows `scheme:` when it does not start with `/` (`mailto:x@example.com`).
    opaque: String,
    user: Option<String>,
    /// `host` or `host:port`, unescaped; IPv6 literals keep their brackets.
    host: String,
    /// Unescaped.
    path: String,
    /// The path as written, when it is not the default escaping of `path`.
    raw_path: String,
    raw_query: String,
    force_query: bool,
    fragment: String,
}

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.URL"
    }
}

/// Why a string is not a URL, in Go's words (`parse "…": …`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parse {input:?}: {reason}")]
pub(crate) struct UrlError {
    input: String,
    reason: String,
}

/// The escaping contexts of Go's `net/url` that the library reaches.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    Zone,
    UserPassword,
    QueryComponent,
    Fragment,
}

/// RFC 3986's sub-delims, which Go's URL code lets stand in hosts and in encoded text.
fn sub_delim(c: u8) -> bool {
    matches!(c, b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=')
}

/// Go's `shouldEscape`: whether `c` is written as `%XX` in `mode`.
fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if matches!(mode, Mode::Host | Mode::Zone) && (sub_delim(c) || matches!(c, b':' | b'[' | b']' | b'<' | b'>' | b'"'))
    {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => return false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match mode {
            Mode::Path => return c == b'?',
            Mode::UserPassword => return matches!(c, b'@' | b'/' | b'?' | b':'),
            Mode::QueryComponent => return true,
            Mode::Fragment => return false,
            Mode::Host | Mode::Zone => {}
        },
        _ => {}
    }
    !(mode == Mode::Fragment && matches!(c, b'!' | b'(' | b')' | b'*'))
}

fn unhex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Go's `unescape`: `%XX` decoded (and `+` as a space in a query component), with the same
/// checks on hosts and zones.
fn unescape(s: &str, mode: Mode) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let (Some(hi), Some(lo)) = (b.get(i + 1).and_then(|c| unhex(*c)), b.get(i + 2).and_then(|c| unhex(*c)))
                else {
                    let bad = &s[i..s.len().min(i + 3)];
                    return Err(format!("invalid URL escape {bad:?}"));
                };
                let v = hi << 4 | lo;
                let escape = &s[i..i + 3];
                if mode == Mode::Host && hi < 8 && escape != "%25" {
                    return Err(format!("invalid URL escape {escape:?}"));
                }
                if mode == Mode::Zone && escape != "%25" && v != b' ' && should_escape(v, Mode::Host) {
                    return Err(format!("invalid URL escape {escape:?}"));
                }
                out.push(v);
                i += 3;
            }
            b'+' => {
                out.push(if mode == Mode::QueryComponent { b' ' } else { b'+' });
                i += 1;
            }
            c => {
                if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && should_escape(c, mode) {
                    return Err(format!("invalid character {:?} in host name", (c as char).to_string()));
                }
                out.push(c);
                i += 1;
            }
        }
    }
    // Go strings hold bytes; an escape that decodes to invalid UTF-8 is kept lossily.
    Ok(String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// Go's `escape` for `mode` (not a query component: nothing here needs `+` for spaces).
fn escape(s: &str, mode: Mode) -> String {
    let mut out = String::with_capacity(s.len());
    for &c in s.as_bytes() {
        if should_escape(c, mode) {
            out.push_str(&format!("%{c:02X}"));
        } else {
            out.push(c as char);
        }
    }
    out
}

/// Go's `validEncoded`: `s` only escapes what `mode` requires (sub-delims may stay as written).
fn valid_encoded(s: &str, mode: Mode) -> bool {
    s.bytes().all(|c| sub_delim(c) || matches!(c, b':' | b'@' | b'[' | b']' | b'%') || !should_escape(c, mode))
}

/// `""` or `:` and digits.
fn valid_optional_port(port: &str) -> bool {
    port.is_empty() || port.strip_prefix(':').is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

/// Go's `getScheme`: the scheme and the rest, or no scheme when the text does not start
/// with one.
fn split_scheme(raw: &str) -> Result<(&str, &str), String> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return Err("missing protocol scheme".into()),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

/// Go's `parseHost`: a bracketed IPv6 literal (with an optional zone and port), or a name or
/// IPv4 address with an optional numeric port.
fn parse_host(scheme: &str, host: &str) -> Result<String, String> {
    if let Some(open) = host.rfind('[') {
        if open > 0 {
            return Err("invalid IP-literal".into());
        }
        let close = host.rfind(']').ok_or("missing ']' in host")?;
        let colon_port = &host[close + 1..];
        if !valid_optional_port(colon_port) {
            return Err(format!("invalid port {colon_port:?} after host"));
        }
        let colon_port = unescape(colon_port, Mode::Host)?;
        let hostname = &host[1..close];
        let unescaped = match hostname.find("%25") {
            Some(z) => unescape(&hostname[..z], Mode::Host)? + &unescape(&hostname[z..], Mode::Zone)?,
            None => unescape(hostname, Mode::Host)?,
        };
        let addr = unescaped.split('%').next().unwrap_or_default();
        match addr.parse::<IpAddr>() {
            Ok(IpAddr::V6(_)) => {}
            Ok(IpAddr::V4(_)) => return Err("invalid IP-literal".into()),
            Err(e) => return Err(format!("invalid host: {e}")),
        }
        return Ok(format!("[{unescaped}]{colon_port}"));
    }
    if let Some(first) = host.find(':') {
        // Go 1.26 reads the port of an http(s) URL from the first colon, so that `a:b:c`
        // is an error there; other schemes take the last.
        let at = if scheme == "http" || scheme == "https" { first } else { host.rfind(':').unwrap_or(first) };
        let colon_port = &host[at..];
        if !valid_optional_port(colon_port) {
            return Err(format!("invalid port {colon_port:?} after host"));
        }
    }
    unescape(host, Mode::Host)
}

fn valid_userinfo(s: &str) -> bool {
    s.chars().all(|c| {
        c.is_ascii_alphanumeric()
            || matches!(
                c,
                '-' | '.'
                    | '_'
                    | ':'
                    | '~'
                    | '!'
                    | '$'
                    | '&'
                    | '\''
                    | '('
                    | ')'
                    | '*'
                    | '+'
                    | ','
                    | ';'
                    | '='
                    | '%'
                    | '@'
            )
    })
}

/// Go's `parseAuthority`: the user information before the last `@`, and the host.
fn parse_authority(scheme: &str, authority: &str) -> Result<(Option<String>, String), String> {
    let Some(at) = authority.rfind('@') else { return Ok((None, parse_host(scheme, authority)?)) };
    let host = parse_host(scheme, &authority[at + 1..])?;
    let userinfo = &authority[..at];
    if !valid_userinfo(userinfo) {
        return Err("net/url: invalid userinfo".into());
    }
    let user = match userinfo.split_once(':') {
        None => unescape(userinfo, Mode::UserPassword)?,
        Some((name, password)) => {
            format!("{}:{}", unescape(name, Mode::UserPassword)?, unescape(password, Mode::UserPassword)?)
        }
    };
    Ok((Some(user), host))
}

/// Go's `parse`, the part before a fragment; `via_request` is `ParseRequestURI`'s stricter
/// reading (an absolute URI or an absolute path, `//` always a path).
fn parse_part(raw: &str, via_request: bool) -> Result<Url, String> {
    if raw.bytes().any(|b| b < b' ' || b == 0x7f) {
        return Err("net/url: invalid control character in URL".into());
    }
    if raw.is_empty() && via_request {
        return Err("empty url".into());
    }
    let mut url = Url {
        scheme: String::new(),
        opaque: String::new(),
        user: None,
        host: String::new(),
        path: String::new(),
        raw_path: String::new(),
        raw_query: String::new(),
        force_query: false,
        fragment: String::new(),
    };
    if raw == "*" {
        url.path = "*".into();
        return Ok(url);
    }
    let (scheme, rest) = split_scheme(raw)?;
    url.scheme = scheme.to_ascii_lowercase();
    let mut rest = rest.to_string();
    if rest.ends_with('?') && rest.matches('?').count() == 1 {
        url.force_query = true;
        rest.pop();
    } else if let Some((before, query)) = rest.split_once('?') {
        url.raw_query = query.to_string();
        rest = before.to_string();
    }
    if !rest.starts_with('/') {
        if !url.scheme.is_empty() {
            url.opaque = rest;
            return Ok(url);
        }
        if via_request {
            return Err("invalid URI for request".into());
        }
        if rest.split('/').next().unwrap_or_default().contains(':') {
            return Err("first path segment in URL cannot contain colon".into());
        }
    }
    if (!url.scheme.is_empty() || !via_request && !rest.starts_with("///")) && rest.starts_with("//") {
        let (authority, path) = match rest[2..].find('/') {
            Some(i) => (&rest[2..2 + i], &rest[2 + i..]),
            None => (&rest[2..], ""),
        };
        (url.user, url.host) = parse_authority(&url.scheme, authority)?;
        rest = path.to_string();
    }
    url.path = unescape(&rest, Mode::Path)?;
    if escape(&url.path, Mode::Path) != rest {
        url.raw_path = rest;
    }
    Ok(url)
}

impl Url {
    /// `url(s)` upstream: `s` must pass `url.ParseRequestURI`; the value is what `url.Parse`
    /// makes of it (which splits off a fragment, where `ParseRequestURI` keeps it in the path
    /// or query).
    pub(crate) fn parse(s: &str) -> Result<Url, UrlError> {
        let error = |reason| UrlError { input: s.to_string(), reason };
        Url::check(s)?;
        let (part, fragment) = s.split_once('#').unwrap_or((s, ""));
        let mut url = parse_part(part, false).map_err(error)?;
        url.fragment = unescape(fragment, Mode::Fragment).map_err(error)?;
        Ok(url)
    }

    /// `url.ParseRequestURI(s)` succeeds: what `isURL` and the `uri` format accept.
    pub(crate) fn check(s: &str) -> Result<(), UrlError> {
        parse_part(s, true).map(drop).map_err(|reason| UrlError { input: s.to_string(), reason })
    }

    /// Go's `splitHostPort`: a numeric port after the last colon, brackets dropped.
    fn host_port(&self) -> (&str, &str) {
        let (mut host, mut port) = (self.host.as_str(), "");
        if let Some(colon) = host.rfind(':')
            && valid_optional_port(&host[colon..])
        {
            (host, port) = (&host[..colon], &host[colon + 1..]);
        }
        if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            host = inner;
        }
        (host, port)
    }

    /// Go's `EscapedPath`: the path as written where that is a valid encoding of it, else
    /// the default escaping.
    fn escaped_path(&self) -> String {
        if !self.raw_path.is_empty()
            && valid_encoded(&self.raw_path, Mode::Path)
            && unescape(&self.raw_path, Mode::Path).is_ok_and(|p| p == self.path)
        {
            return self.raw_path.clone();
        }
        if self.path == "*" {
            return "*".into();
        }
        escape(&self.path, Mode::Path)
    }

    /// Go's `Query()`: keys with their values in order; pairs that do not unescape, or
    /// hold a `;`, are skipped.
    fn query(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for pair in self.raw_query.split('&') {
            if pair.is_empty() || pair.contains(';') {
                continue;
            }
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if let (Ok(k), Ok(v)) = (unescape(k, Mode::QueryComponent), unescape(v, Mode::QueryComponent)) {
                out.entry(k).or_default().push(v);
            }
        }
        out
    }
}

fn err(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

fn url_of<'a>(function: &str, v: &'a Value) -> Result<&'a Url, ExecutionError> {
    match v {
        Value::Opaque(o) => (**o).downcast_ref::<Url>().ok_or_else(|| err(function, "not a URL")),
        other => Err(ExecutionError::no_such_member_overload(function, vec![type_name(other)])),
    }
}

fn string(s: impl Into<String>) -> Value {
    Value::String(Arc::new(s.into()))
}

/// The functions and methods, in the context.
pub fn register(ctx: &mut Context<'_, '_>) {
    let added = [
        ctx.add_function("url", |s: Arc<String>| -> ResolveResult {
            Url::parse(&s)
                .map(|u| Value::Opaque(Arc::new(u)))
                .map_err(|e| err("url", format!("URL parse error during conversion from string: {e}")))
        }),
        ctx.add_function("isURL", |s: Arc<String>| Url::check(&s).is_ok()),
        ctx.add_function("getScheme", |This(this): This<Value>| -> ResolveResult {
            Ok(string(url_of("getScheme", &this)?.scheme.clone()))
        }),
        ctx.add_function("getHost", |This(this): This<Value>| -> ResolveResult {
            Ok(string(url_of("getHost", &this)?.host.clone()))
        }),
        ctx.add_function("getHostname", |This(this): This<Value>| -> ResolveResult {
            Ok(string(url_of("getHostname", &this)?.host_port().0))
        }),
        ctx.add_function("getPort", |This(this): This<Value>| -> ResolveResult {
            Ok(string(url_of("getPort", &this)?.host_port().1))
        }),
        ctx.add_function("getEscapedPath", |This(this): This<Value>| -> ResolveResult {
            Ok(string(url_of("getEscapedPath", &this)?.escaped_path()))
        }),
        ctx.add_function("getQuery", |This(this): This<Value>| -> ResolveResult {
            let query: HashMap<Key, Value> = url_of("getQuery", &this)?
                .query()
                .into_iter()
                .map(|(k, v)| (Key::String(Arc::new(k)), Value::List(Arc::new(v.into_iter().map(string).collect()))))
                .collect();
            Ok(Value::Map(Map { map: Arc::new(query) }))
        }),
    ];
    for a in added {
        a.expect("no URL function shadows an overload of the environment");
    }
}

#[cfg(test)]
mod tests {
    use super::Url;

    /// Go's `url.ParseRequestURI`, which `isURL` is, on the cases of `net/url`'s tests that
    /// matter here.
    #[test]
    fn request_uris_are_absolute() {
        for ok in ["https://a.example/", "/absolute-path", "*", "mailto:x@example.com", "http://[::1]:80/", "http://x?"]
        {
            assert!(Url::check(ok).is_ok(), "{ok}");
        }
        for bad in
            ["", "../relative-path", "a.example/p", "https://a:b:c/", "http://[::1", "http://x:8a/", "http://a b/"]
        {
            assert!(Url::check(bad).is_err(), "{bad}");
        }
    }
}
