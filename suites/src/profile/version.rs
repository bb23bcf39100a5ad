//! Version requirements of a profile (`>=1.34`, `>=0.1, <2`): a small comparator for
//! `major.minor[.patch]` versions, enough for Kubernetes and driver versions.
//!
//! - Operators: `>=`, `>`, `<`, `<=`, `=` (a bare version means `=`); a comma means AND.
//! - A requirement without a patch compares whole minor releases: `=1.34` is any 1.34.x,
//!   `>1.34` starts at 1.35.0, `<=1.34` ends before 1.35.0, `>=1.34` and `<1.34` compare with
//!   1.34.0.
//! - Actual versions may carry a `v` prefix and a pre-release or build suffix
//!   (`v1.37.2-rc.1+k3s1`); the suffix is ignored, so a pre-release counts as its release.

use std::cmp::Ordering;
use std::fmt;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};

/// Why a version or a version requirement does not parse; the message names the form to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error("{0:?} is not a version (major.minor or major.minor.patch, e.g. 1.34 or 1.34.2)")]
    NotAVersion(String),
    #[error("{0:?} is not a version requirement: an empty part (write e.g. \">=1.34\" or \">=1.34, <2.0\")")]
    EmptyPart(String),
    #[error(
        "{text:?} is not a version requirement{}: write an operator (>=, >, <, <=, =) and a version \
         major.minor[.patch], e.g. \">=1.34\"; join several with commas",
        part.as_ref().map(|p| format!(" (in {p:?})")).unwrap_or_default()
    )]
    NotARequirement { text: String, part: Option<String> },
}

/// A released version: `major.minor.patch` (a missing patch reads as 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
}

impl Version {
    /// Parses `1.37`, `1.37.2`, `v1.37.2`, `1.38.0-beta.0`, `550.54.15+build`.
    pub fn parse(text: &str) -> Result<Version, VersionError> {
        let (major, minor, patch) = parse_numbers(text, true)?;
        Ok(Version { major, minor, patch: patch.unwrap_or(0) })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// `major.minor[.patch]` with an optional `v` prefix; the suffix after `-` or `+` is dropped
/// when `suffix_ok`.
fn parse_numbers(text: &str, suffix_ok: bool) -> Result<(u64, u64, Option<u64>), VersionError> {
    let bad = || VersionError::NotAVersion(text.to_string());
    let trimmed = text.trim();
    let unprefixed = trimmed.strip_prefix('v').unwrap_or(trimmed);
    let core = match unprefixed.find(['-', '+']) {
        Some(i) if suffix_ok && i + 1 < unprefixed.len() => &unprefixed[..i],
        Some(_) => return Err(bad()),
        None => unprefixed,
    };
    let parts: Vec<&str> = core.split('.').collect();
    if !(2..=3).contains(&parts.len()) {
        return Err(bad());
    }
    let mut numbers = Vec::with_capacity(3);
    for part in &parts {
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        numbers.push(part.parse::<u64>().map_err(|_| bad())?);
    }
    Ok((numbers[0], numbers[1], numbers.get(2).copied()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ge,
    Gt,
    Lt,
    Le,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ge => ">=",
            Op::Gt => ">",
            Op::Lt => "<",
            Op::Le => "<=",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bound {
    op: Op,
    major: u64,
    minor: u64,
    patch: Option<u64>,
}

impl Bound {
    fn matches(&self, v: &Version) -> bool {
        let low = Version { major: self.major, minor: self.minor, patch: self.patch.unwrap_or(0) };
        let next_minor = Version { major: self.major, minor: self.minor + 1, patch: 0 };
        match (self.op, self.patch) {
            (Op::Eq, Some(_)) => *v == low,
            (Op::Eq, None) => v.major == self.major && v.minor == self.minor,
            (Op::Ge, _) => *v >= low,
            (Op::Lt, _) => *v < low,
            (Op::Gt, Some(_)) => *v > low,
            (Op::Gt, None) => *v >= next_minor,
            (Op::Le, Some(_)) => v.cmp(&low) != Ordering::Greater,
            (Op::Le, None) => *v < next_minor,
        }
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}.{}", self.op.as_str(), self.major, self.minor)?;
        if let Some(p) = self.patch {
            write!(f, ".{p}")?;
        }
        Ok(())
    }
}

/// A version requirement: bounds that must all hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionReq {
    bounds: Vec<Bound>,
}

impl VersionReq {
    pub fn parse(text: &str) -> Result<VersionReq, VersionError> {
        let mut bounds = Vec::new();
        for raw in text.split(',') {
            let part = raw.trim();
            if part.is_empty() {
                return Err(VersionError::EmptyPart(text.to_string()));
            }
            let (op, rest) = [(">=", Op::Ge), ("<=", Op::Le), (">", Op::Gt), ("<", Op::Lt), ("=", Op::Eq)]
                .iter()
                .find_map(|(prefix, op)| part.strip_prefix(prefix).map(|rest| (*op, rest)))
                .unwrap_or((Op::Eq, part));
            let (major, minor, patch) = parse_numbers(rest, false).map_err(|_| VersionError::NotARequirement {
                text: text.to_string(),
                part: (part != text.trim()).then(|| part.to_string()),
            })?;
            bounds.push(Bound { op, major, minor, patch });
        }
        Ok(VersionReq { bounds })
    }

    pub fn matches_version(&self, version: &Version) -> bool {
        self.bounds.iter().all(|b| b.matches(version))
    }

    /// Whether `version` (`v1.37.2`, `0.1.0`) satisfies the requirement; a version that does
    /// not parse satisfies none.
    pub fn matches(&self, version: &str) -> bool {
        self.try_matches(version).unwrap_or(false)
    }

    /// Like [`VersionReq::matches`], but says why a version does not parse.
    pub fn try_matches(&self, version: &str) -> Result<bool, VersionError> {
        Ok(self.matches_version(&Version::parse(version)?))
    }
}

impl fmt::Display for VersionReq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.bounds.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{b}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for VersionReq {
    type Err = VersionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        VersionReq::parse(s)
    }
}

impl<'de> Deserialize<'de> for VersionReq {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        VersionReq::parse(&text).map_err(de::Error::custom)
    }
}

impl Serialize for VersionReq {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_without_a_patch_compare_minor_releases() {
        let m = |req: &str, v: &str| VersionReq::parse(req).unwrap().try_matches(v).unwrap();
        assert!(m("=1.34", "1.34.9"));
        assert!(!m("=1.34", "1.35.0"));
        assert!(m(">1.34", "1.35.0"));
        assert!(!m(">1.34", "1.34.5"));
        assert!(m("<=1.34", "1.34.5"));
        assert!(!m("<=1.34", "1.35.0"));
        assert!(m("1.37.2", "v1.37.2"));
    }
}
