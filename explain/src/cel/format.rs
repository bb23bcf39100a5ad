//! Kubernetes' format library (`k8s.io/apiserver/pkg/cel/library/format.go`): named string
//! validations, `format.<name>()` or `format.named("<name>")`, and
//! `<format>.validate(s)`, which gives `optional.none()` for a valid `s` and otherwise the
//! list of apimachinery's messages.
//!
//! The messages are upstream's word for word (a selector may compare them, though it is
//! unlikely to): the Kubernetes names from `k8s.io/apimachinery/pkg/util/validation` (which
//! says "characters") and `pkg/api/validate/content` (which says "bytes"), the CRD formats
//! from kube-openapi's `strfmt`.

use std::sync::{Arc, LazyLock};

use cel::extractors::This;
use cel::objects::{Opaque, OptionalValue};
use cel::{Context, ExecutionError, ResolveResult, Value};
use regex::Regex;

use super::type_name;
use super::url::Url;

/// A named format as a CEL value (`kubernetes.NamedFormat`); upstream compares formats by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Format(Named);

impl Opaque for Format {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.NamedFormat"
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Named {
    Dns1123Label,
    Dns1123Subdomain,
    Dns1035Label,
    QualifiedName,
    Dns1123LabelPrefix,
    Dns1123SubdomainPrefix,
    Dns1035LabelPrefix,
    LabelValue,
    Uri,
    Uuid,
    Byte,
    Date,
    Datetime,
}

/// The names `format.named()` knows, each also a function `format.<name>()`.
const NAMES: &[(&str, Named)] = &[
    ("dns1123Label", Named::Dns1123Label),
    ("dns1123Subdomain", Named::Dns1123Subdomain),
    ("dns1035Label", Named::Dns1035Label),
    ("qualifiedName", Named::QualifiedName),
    ("dns1123LabelPrefix", Named::Dns1123LabelPrefix),
    ("dns1123SubdomainPrefix", Named::Dns1123SubdomainPrefix),
    ("dns1035LabelPrefix", Named::Dns1035LabelPrefix),
    ("labelValue", Named::LabelValue),
    ("uri", Named::Uri),
    ("uuid", Named::Uuid),
    ("byte", Named::Byte),
    ("date", Named::Date),
    ("datetime", Named::Datetime),
];

const DNS1123_LABEL: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const LABEL_KEY: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_MSG: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
/// kube-openapi's `strfmt.UUIDPattern` (dashes optional, any case).
const UUID: &str = "(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$";
/// govalidator's `Base64`: padded standard base64, not empty.
const BASE64: &str = "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$";
/// `strfmt.DateTimePattern`, for what follows the `t` of a lower-cased date-time (its `.`
/// matches any character, as upstream's does).
const TIME: &str = "^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$";

/// `pattern` anchored as apimachinery anchors it.
fn whole(pattern: &str) -> Regex {
    Regex::new(&format!("^{pattern}$")).expect("a valid pattern")
}

static RES: LazyLock<[Regex; 8]> = LazyLock::new(|| {
    [
        whole(DNS1123_LABEL),
        whole(DNS1123_SUBDOMAIN),
        whole(DNS1035_LABEL),
        whole(LABEL_KEY),
        whole(LABEL_VALUE),
        Regex::new(UUID).expect("a valid pattern"),
        Regex::new(BASE64).expect("a valid pattern"),
        Regex::new(TIME).expect("a valid pattern"),
    ]
});

/// apimachinery's `RegexError`.
fn regex_error(msg: &str, pattern: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    // Go appends " or " after the previous example's ", ": two spaces, kept.
    format!("{msg} (e.g. {}regex used for validation is '{pattern}')", examples.join(" or "))
}

/// `validation.MaxLenError` ("characters"; `content`'s says "bytes").
fn max_len(n: usize, unit: &str) -> String {
    format!("must be no more than {n} {unit}")
}

fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push(max_len(63, "characters"));
    }
    if !RES[0].is_match(s) {
        if RES[1].is_match(s) {
            errs.push("must not contain dots".into());
        } else {
            errs.push(regex_error(DNS1123_LABEL_MSG, DNS1123_LABEL, &["my-name", "123-abc"]));
        }
    }
    errs
}

/// `IsDNS1123Subdomain`, with the length unit of the package it comes from.
fn dns1123_subdomain(s: &str, unit: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push(max_len(253, unit));
    }
    if !RES[1].is_match(s) {
        errs.push(regex_error(DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN, &["example.com"]));
    }
    errs
}

fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push(max_len(63, "characters"));
    }
    if !RES[2].is_match(s) {
        errs.push(regex_error(DNS1035_LABEL_MSG, DNS1035_LABEL, &["my-name", "abc-123"]));
    }
    errs
}

/// `content.IsLabelKey`: an optional DNS subdomain prefix and `/`, and a name.
fn qualified_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let examples = ["MyName", "my.name", "123-abc"];
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".into());
            } else {
                errs.extend(dns1123_subdomain(prefix, "bytes").into_iter().map(|m| format!("prefix part {m}")));
            }
            *name
        }
        _ => {
            return vec![format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_MSG, LABEL_KEY, &examples)
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len(63, "bytes")));
    }
    if !RES[3].is_match(name) {
        errs.push(format!("name part {}", regex_error(LABEL_KEY_MSG, LABEL_KEY, &examples)));
    }
    errs
}

fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push(max_len(63, "bytes"));
    }
    if !RES[4].is_match(s) {
        errs.push(regex_error(LABEL_VALUE_MSG, LABEL_VALUE, &["MyValue", "my_value", "12345"]));
    }
    errs
}

/// apimachinery's `maskTrailingDash`, for the `…Prefix` formats (names to which a random
/// suffix is appended): a trailing `-` is allowed.
fn mask_trailing_dash(s: &str) -> String {
    match s.strip_suffix('-') {
        Some(_) if s.len() > 1 => format!("{}a", &s[..s.len() - 2]),
        _ => s.to_string(),
    }
}

/// Go's `time.Parse("2006-01-02", s)`: four-digit year, two-digit month and day, the day
/// within its month.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' || !digits(0..4) || !digits(5..7) || !digits(8..10) {
        return false;
    }
    let (year, month, day): (u32, u32, u32) =
        (s[0..4].parse().unwrap_or(0), s[5..7].parse().unwrap_or(0), s[8..10].parse().unwrap_or(0));
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// `strfmt.IsDateTime`: a date, `t`, and a time with a zone, lower-cased first.
fn is_datetime(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    RES[7].captures(parts[1]).is_some_and(|m| &m[1] <= "23" && &m[2] <= "59" && &m[3] <= "59")
}

impl Named {
    fn validate(self, s: &str) -> Vec<String> {
        let single = |ok: bool, message: &str| if ok { Vec::new() } else { vec![message.to_string()] };
        match self {
            Named::Dns1123Label => dns1123_label(s),
            Named::Dns1123Subdomain => dns1123_subdomain(s, "characters"),
            Named::Dns1035Label => dns1035_label(s),
            Named::QualifiedName => qualified_name(s),
            Named::Dns1123LabelPrefix => dns1123_label(&mask_trailing_dash(s)),
            Named::Dns1123SubdomainPrefix => dns1123_subdomain(&mask_trailing_dash(s), "characters"),
            Named::Dns1035LabelPrefix => dns1035_label(&mask_trailing_dash(s)),
            Named::LabelValue => label_value(s),
            Named::Uri => Url::check(s).err().map(|e| e.to_string()).into_iter().collect(),
            Named::Uuid => single(RES[5].is_match(s), "does not match the UUID format"),
            Named::Byte => single(RES[6].is_match(s), "invalid base64"),
            Named::Date => single(is_date(s), "invalid date"),
            Named::Datetime => single(is_datetime(s), "invalid datetime"),
        }
    }
}

fn optional(v: Option<Value>) -> Value {
    Value::Opaque(Arc::new(v.map_or_else(OptionalValue::none, OptionalValue::of)))
}

fn format_value(named: Named) -> Value {
    Value::Opaque(Arc::new(Format(named)))
}

/// The functions and the `validate` method, in the context.
pub fn register(ctx: &mut Context<'_, '_>) {
    let mut added = vec![
        ctx.add_function("format.named", |name: Arc<String>| -> Value {
            optional(NAMES.iter().find(|(n, _)| **n == **name).map(|(_, f)| format_value(*f)))
        }),
        ctx.add_function("validate", |This(this): This<Value>, s: Arc<String>| -> ResolveResult {
            let Value::Opaque(o) = &this else {
                return Err(ExecutionError::no_such_member_overload(
                    "validate",
                    vec![type_name(&this), "string".into()],
                ));
            };
            let Some(Format(named)) = (**o).downcast_ref::<Format>() else {
                return Err(ExecutionError::no_such_member_overload(
                    "validate",
                    vec![type_name(&this), "string".into()],
                ));
            };
            let errors = named.validate(&s);
            Ok(optional(
                (!errors.is_empty())
                    .then(|| Value::List(Arc::new(errors.into_iter().map(|e| Value::String(Arc::new(e))).collect()))),
            ))
        }),
    ];
    for (name, named) in NAMES {
        let named = *named;
        added.push(ctx.add_function(&format!("format.{name}"), move || format_value(named)));
    }
    for a in added {
        a.expect("no format function shadows an overload of the environment");
    }
}

#[cfg(test)]
mod tests {
    use super::{Named, is_date, is_datetime};

    /// apimachinery's and strfmt's verdicts on the cases of their tests.
    #[test]
    fn validations_follow_apimachinery_and_strfmt() {
        assert!(Named::Dns1123Label.validate("my-label-name").is_empty());
        assert_eq!(Named::Dns1123Label.validate("a.b"), ["must not contain dots"]);
        assert_eq!(
            Named::Dns1123Label.validate("A"),
            [
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert_eq!(Named::Dns1123Label.validate(&"a".repeat(64)), ["must be no more than 63 characters"]);
        assert!(Named::Dns1123LabelPrefix.validate("my-label-prefix-").is_empty());
        assert!(!Named::Dns1123Label.validate("my-label-prefix-").is_empty());
        assert!(Named::Dns1123Subdomain.validate("apiextensions.k8s.io").is_empty());
        assert!(Named::Dns1123SubdomainPrefix.validate("mysubdomain.prefix.-").is_empty());
        assert!(Named::Dns1035Label.validate("my-label-name").is_empty());
        assert!(!Named::Dns1035Label.validate("1abc").is_empty());
        assert!(Named::QualifiedName.validate("apiextensions.k8s.io/v1beta1").is_empty());
        assert_eq!(Named::QualifiedName.validate("/x"), ["prefix part must be non-empty"]);
        assert_eq!(Named::QualifiedName.validate("a/b/c").len(), 1);
        assert!(Named::LabelValue.validate("").is_empty() && Named::LabelValue.validate("my_value").is_empty());
        assert_eq!(Named::LabelValue.validate(&"a".repeat(64)), ["must be no more than 63 bytes"]);
        assert!(Named::Uri.validate("http://example.com").is_empty());
        assert_eq!(Named::Uri.validate("../x"), [r#"parse "../x": invalid URI for request"#]);
        assert!(Named::Uuid.validate("123e4567-e89b-12d3-a456-426614174000").is_empty());
        assert!(Named::Uuid.validate("123E4567E89B12D3A456426614174000").is_empty());
        assert_eq!(Named::Uuid.validate("not-a-uuid"), ["does not match the UUID format"]);
        assert!(Named::Byte.validate("aGVsbG8=").is_empty());
        assert_eq!(Named::Byte.validate("ZWxpemFiZXRocG9zZXk"), ["invalid base64"]);
        assert!(is_date("2021-01-01") && is_date("2024-02-29") && !is_date("2023-02-29") && !is_date("2021-1-01"));
        assert!(is_datetime("2021-01-01T00:00:00Z") && is_datetime("2021-01-01t23:59:59.5+01:00"));
        assert!(
            !is_datetime("2021-01-01T24:00:00Z") && !is_datetime("2021-01-01") && !is_datetime("2021-01-01T00:00:00")
        );
    }
}
