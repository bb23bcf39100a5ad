//! Semantic versions as the DRA CEL library's `semver()` reads them (semver 2.0.0, strict).

use std::cmp::Ordering;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Semver {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    pre: Vec<String>,
    text: String,
}

impl fmt::Display for Semver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn number(part: &str, what: &str, text: &str) -> Result<u64, String> {
    if part.is_empty() || (part.len() > 1 && part.starts_with('0')) || !part.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{text:?} is not a semantic version: invalid {what} {part:?}"));
    }
    part.parse().map_err(|_| format!("{text:?} is not a semantic version: {what} too large"))
}

impl Semver {
    /// Strict semver 2.0.0; with `normalize`, a leading `v` and missing minor/patch are
    /// accepted and leading zeros dropped (the library's `semver(s, true)`).
    pub fn parse(text: &str, normalize: bool) -> Result<Semver, String> {
        let mut s = text.to_string();
        if normalize {
            s = s.trim_start_matches('v').to_string();
        }
        let (core, build) = s.split_once('+').map_or((s.as_str(), None), |(c, b)| (c, Some(b)));
        let (core, pre) = core.split_once('-').map_or((core, None), |(c, p)| (c, Some(p)));
        let mut parts: Vec<String> = core.split('.').map(str::to_string).collect();
        if normalize {
            while parts.len() < 3 {
                parts.push("0".into());
            }
            for p in parts.iter_mut() {
                let trimmed = p.trim_start_matches('0');
                *p = if trimmed.is_empty() { "0".into() } else { trimmed.into() };
            }
        }
        if parts.len() != 3 {
            return Err(format!("{text:?} is not a semantic version: expected MAJOR.MINOR.PATCH"));
        }
        let pre: Vec<String> = match pre {
            Some(p) => p.split('.').map(str::to_string).collect(),
            None => Vec::new(),
        };
        for id in pre.iter().map(String::as_str).chain(build.into_iter().flat_map(|b| b.split('.'))) {
            if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                return Err(format!("{text:?} is not a semantic version: invalid identifier {id:?}"));
            }
        }
        for id in &pre {
            if id.len() > 1 && id.starts_with('0') && id.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("{text:?} is not a semantic version: leading zero in {id:?}"));
            }
        }
        Ok(Semver {
            major: number(&parts[0], "major", text)?,
            minor: number(&parts[1], "minor", text)?,
            patch: number(&parts[2], "patch", text)?,
            pre,
            text: text.to_string(),
        })
    }
}

impl PartialOrd for Semver {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Semver {
    fn cmp(&self, other: &Self) -> Ordering {
        let core = (self.major, self.minor, self.patch).cmp(&(other.major, other.minor, other.patch));
        if core != Ordering::Equal {
            return core;
        }
        // A pre-release is lower than the release; identifiers compare numerically when both
        // are numbers, numbers sort before words, and a longer list wins a tie.
        match (self.pre.is_empty(), other.pre.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Greater,
            (false, true) => return Ordering::Less,
            _ => {}
        }
        for (a, b) in self.pre.iter().zip(&other.pre) {
            let ord = match (a.parse::<u64>(), b.parse::<u64>()) {
                (Ok(x), Ok(y)) => x.cmp(&y),
                (Ok(_), Err(_)) => Ordering::Less,
                (Err(_), Ok(_)) => Ordering::Greater,
                _ => a.cmp(b),
            };
            if ord != Ordering::Equal {
                return ord;
            }
        }
        self.pre.len().cmp(&other.pre.len())
    }
}

#[cfg(test)]
mod tests {
    use super::Semver;

    fn v(s: &str) -> Semver {
        Semver::parse(s, false).unwrap()
    }

    #[test]
    fn ordering_follows_semver() {
        assert!(v("550.54.15") > v("550.9.99"));
        assert!(v("1.0.0-alpha") < v("1.0.0"));
        assert!(v("1.0.0-alpha.1") < v("1.0.0-alpha.beta"));
        assert!(v("1.0.0-2") < v("1.0.0-11"));
        assert_eq!(v("1.2.3+build.5").cmp(&v("1.2.3")), std::cmp::Ordering::Equal);
        assert_eq!(Semver::parse("v1.2", true).unwrap().cmp(&v("1.2.0")), std::cmp::Ordering::Equal);
    }

    #[test]
    fn strict_parsing() {
        for s in ["1.2", "01.2.3", "1.2.3-", "1.2.3-01", "a.b.c", "v1.2.3"] {
            assert!(Semver::parse(s, false).is_err(), "{s}");
        }
    }
}
