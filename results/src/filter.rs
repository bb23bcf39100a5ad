//! `--only` and `--skip`: globs over guarantee IDs.

/// Which guarantees a run checks: those matching one of `only` (all when empty) and none of
/// `skip`.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub only: Vec<String>,
    pub skip: Vec<String>,
}

impl Filter {
    pub fn selects(&self, id: &str) -> bool {
        (self.only.is_empty() || self.only.iter().any(|g| glob(g, id))) && !self.skip.iter().any(|g| glob(g, id))
    }

    /// The globs of `only` and `skip` that match none of `ids`: a typo, or a list given as one
    /// glob (`a,b`), which would otherwise select nothing without a word.
    pub fn matching_none<'a>(&'a self, ids: &[&str]) -> Vec<&'a str> {
        self.only.iter().chain(&self.skip).filter(|g| !ids.iter().any(|id| glob(g, id))).map(String::as_str).collect()
    }
}

/// `*` matches any run of characters; everything else matches itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, tail)) => {
            let Some(rest) = text.strip_prefix(head) else { return false };
            (0..=rest.len()).any(|i| rest.is_char_boundary(i) && glob(tail, &rest[i..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_and_filters() {
        assert!(glob("claim.*", "claim.impossible.count"));
        assert!(glob("*.count", "claim.impossible.count"));
        assert!(glob("claim.*.count", "claim.impossible.count"));
        assert!(!glob("claim.*", "plugin.cdi.valid"));
        assert!(glob("plugin.cdi.valid", "plugin.cdi.valid"));
        assert!(glob("exact", "exact") && !glob("exact", "exactly"));
        let f = Filter { only: vec!["claim.*".into()], skip: vec!["*.count".into()] };
        assert!(f.selects("claim.compatible.allocated"));
        assert!(!f.selects("claim.impossible.count"));
        assert!(!f.selects("plugin.cdi.valid"));
        assert!(Filter::default().selects("anything"));
        let f = Filter { only: vec!["claim.*".into(), "a,b".into()], skip: vec!["nope".into()] };
        assert_eq!(f.matching_none(&["claim.impossible.count", "a"]), ["a,b", "nope"]);
    }
}
