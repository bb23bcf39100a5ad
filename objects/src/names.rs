//! The name formats Kubernetes validates, as apimachinery's `pkg/util/validation` and the DRA
//! API's validation define them.

/// An RFC 1123 DNS label (`IsDNS1123Label`): 1 to 63 characters of `a-z`, `0-9` and `-`,
/// starting and ending with a letter or digit. Device, request and pool-part names are labels.
pub fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && label_chars(s)
}

/// An RFC 1123 DNS subdomain (`IsDNS1123Subdomain`): at most 253 characters of labels joined by
/// dots. As apimachinery's pattern does, it bounds only the whole name, not each label.
/// Most object names and driver names are subdomains.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(label_chars)
}

/// A C identifier of at most 32 characters (`[A-Za-z_][A-Za-z0-9_]*`), as the DRA API requires
/// of the name part of attribute and capacity names.
pub fn is_c_identifier(s: &str) -> bool {
    s.len() <= 32
        && s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The domain of a qualified name (`gpu.example.com` in `gpu.example.com/memory`): a DNS
/// subdomain of at most 63 characters, lowercase only.
///
/// The apiserver validates driver names and these domains case-insensitively; dracheck keeps
/// them lowercase, the form drivers publish.
pub fn is_name_domain(s: &str) -> bool {
    s.len() <= 63 && is_dns_subdomain(s)
}

/// An attribute or capacity name (`QualifiedName`): a C identifier, optionally prefixed by a
/// domain and one `/` (`memory`, `gpu.example.com/memory`). Names with more than one `/` are
/// refused (the apiserver currently lets `a/b/c` through, a bug its code notes).
pub fn is_qualified_name(s: &str) -> bool {
    match s.split_once('/') {
        None => is_c_identifier(s),
        Some((domain, id)) => is_name_domain(domain) && is_c_identifier(id),
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, of any length.
fn label_chars(s: &str) -> bool {
    !s.is_empty()
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::simple("gpu-0", true)]
    #[case::digits_first("0abc", true)]
    #[case::one_char("a", true)]
    #[case::longest(&"a".repeat(63), true)]
    #[case::too_long(&"a".repeat(64), false)]
    #[case::empty("", false)]
    #[case::leading_dash("-a", false)]
    #[case::trailing_dash("a-", false)]
    #[case::uppercase("Gpu", false)]
    #[case::dot("a.b", false)]
    #[case::underscore("a_b", false)]
    fn dns_labels(#[case] s: &str, #[case] ok: bool) {
        assert_eq!(is_dns_label(s), ok, "{s:?}");
    }

    #[rstest]
    #[case::domain("gpu.example.com", true)]
    #[case::single_label("example", true)]
    #[case::long_label_allowed(&"a".repeat(64), true)]
    #[case::longest(&["a".repeat(63), "b".repeat(63), "c".repeat(63), "d".repeat(61)].join("."), true)]
    #[case::too_long(&["a".repeat(63), "b".repeat(63), "c".repeat(63), "d".repeat(62)].join("."), false)]
    #[case::empty("", false)]
    #[case::empty_label("a..b", false)]
    #[case::trailing_dot("a.", false)]
    #[case::leading_dot(".a", false)]
    #[case::dash_edge("a.-b", false)]
    #[case::uppercase("Example.com", false)]
    fn dns_subdomains(#[case] s: &str, #[case] ok: bool) {
        assert_eq!(is_dns_subdomain(s), ok, "{s:?}");
    }

    #[rstest]
    #[case::plain("memory", true)]
    #[case::underscore_first("_x1", true)]
    #[case::qualified("gpu.example.com/memory", true)]
    #[case::longest_id(&"a".repeat(32), true)]
    #[case::id_too_long(&"a".repeat(33), false)]
    #[case::digit_first("1x", false)]
    #[case::dash("a-b", false)]
    #[case::empty("", false)]
    #[case::empty_domain("/memory", false)]
    #[case::empty_id("gpu.example.com/", false)]
    #[case::two_slashes("a/b/c", false)]
    #[case::domain_too_long(&format!("{}/x", "a".repeat(64)), false)]
    #[case::bad_domain("Gpu.example.com/memory", false)]
    fn qualified_names(#[case] s: &str, #[case] ok: bool) {
        assert_eq!(is_qualified_name(s), ok, "{s:?}");
    }
}
