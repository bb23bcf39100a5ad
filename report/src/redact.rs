//! Secrets never leave a run: bearer tokens, client keys and certificate data are removed from
//! every string of a result before it is written or rendered. Two nets: the exact secret values
//! of the kubeconfig the run used (whatever text they appear in), and the shapes secrets take
//! in logs and YAML (PEM blocks, `token:` lines, `Bearer …`, JWTs) for results written elsewhere.

use std::path::Path;

use dracheck_results::RunResult;

pub const REDACTED: &str = "<redacted>";

/// Kubeconfig keys whose values are credentials.
const SECRET_KEYS: &[&str] = &[
    "token",
    "client-key-data",
    "client-certificate-data",
    "certificate-authority-data",
    "password",
    "id-token",
    "refresh-token",
    "access-token",
];

#[derive(Debug, Default, Clone)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// Also scrubs the credentials of this kubeconfig. An unreadable kubeconfig adds nothing:
    /// the run itself reports that; the shape-based net still applies.
    pub fn with_kubeconfig(mut self, path: &Path) -> Redactor {
        if let Ok(text) = std::fs::read_to_string(path) {
            self.add_kubeconfig_text(&text);
        }
        self
    }

    pub fn add_kubeconfig_text(&mut self, text: &str) {
        if let Ok(value) = serde_saphyr::from_str::<serde_json::Value>(text) {
            collect(&value, &mut self.secrets);
        }
        // Short values would scrub ordinary words; a credential is never this short.
        self.secrets.retain(|s| s.len() >= 8);
        self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        self.secrets.dedup();
    }

    pub fn text(&self, s: &str) -> String {
        let mut out = s.to_string();
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), REDACTED);
            }
        }
        scrub_shapes(&out)
    }

    /// Every free-text field of a result.
    pub fn result(&self, r: &mut RunResult) {
        let guarantees =
            r.driver_guarantees.iter_mut().chain(r.profiles.iter_mut().flat_map(|p| p.guarantees.iter_mut()));
        for g in guarantees {
            g.reason = self.text(&g.reason);
            for e in &mut g.evidence {
                e.title = self.text(&e.title);
                e.body = self.text(&e.body);
            }
        }
        r.driver.artifact = self.text(&r.driver.artifact);
        r.cluster.feature_gates = self.text(&r.cluster.feature_gates);
    }
}

fn collect(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                match v.as_str() {
                    Some(s) if SECRET_KEYS.contains(&k.as_str()) => out.push(s.to_string()),
                    _ => collect(v, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
        _ => {}
    }
}

fn scrub_shapes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_pem = false;
    for line in s.split_inclusive('\n') {
        let (body, nl) = line.strip_suffix('\n').map_or((line, ""), |b| (b, "\n"));
        if in_pem {
            if body.contains("-----END ") {
                in_pem = false;
                out.push_str(REDACTED);
                out.push_str(nl);
            }
            continue;
        }
        if let Some(start) = body.find("-----BEGIN ") {
            out.push_str(&body[..start]);
            in_pem = !body[start..].contains("-----END ");
            if !in_pem {
                out.push_str(REDACTED);
                out.push_str(nl);
            }
            continue;
        }
        out.push_str(&scrub_line(body));
        out.push_str(nl);
    }
    if in_pem {
        out.push_str(REDACTED);
    }
    out
}

fn scrub_line(line: &str) -> String {
    let mut line = line.to_string();
    for key in SECRET_KEYS {
        for sep in ["\": \"", ": ", "=", ":"] {
            let needle = format!("{key}{sep}");
            let mut from = 0;
            while let Some(found) = line.to_ascii_lowercase()[from..].find(&needle) {
                let at = from + found;
                let value_at = at + needle.len();
                let before = line.as_bytes().get(at.wrapping_sub(1)).copied();
                let boundary = before.is_none_or(|b| !b.is_ascii_alphanumeric() && b != b'-');
                let end = line[value_at..].find(['"', ',', ' ', '}']).map_or(line.len(), |e| value_at + e);
                if boundary && end > value_at && &line[value_at..end] != REDACTED {
                    line.replace_range(value_at..end, REDACTED);
                }
                from = value_at;
            }
        }
    }
    let line = line.as_str();
    let mut words: Vec<String> = Vec::new();
    let mut after_bearer = false;
    for word in line.split(' ') {
        let jwt = word.starts_with("eyJ") && word.matches('.').count() >= 2;
        words.push(if (after_bearer && !word.is_empty()) || jwt { REDACTED.to_string() } else { word.to_string() });
        after_bearer = word.eq_ignore_ascii_case("bearer");
    }
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    token: sekrit-token-1234567890\n    client-key-data: S0VZREFUQUtFWURBVEE=\n";

    #[test]
    fn scrubs_the_kubeconfig_values_wherever_they_appear() {
        let mut r = Redactor::default();
        r.add_kubeconfig_text(KUBECONFIG);
        let out = r.text("driver log: using sekrit-token-1234567890 and S0VZREFUQUtFWURBVEE= ok");
        assert!(!out.contains("sekrit") && !out.contains("S0VZREFU"), "{out}");
        assert!(out.contains("driver log") && out.contains(" ok"), "{out}");
    }

    #[test]
    fn scrubs_secret_shapes_without_a_kubeconfig() {
        let r = Redactor::default();
        let text = "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY-----\nb\n    token: abcdef0123\nAuthorization: Bearer xyz.abc\n{\"client-key-data\": \"QUJD\"}\nid eyJhbGc.eyJzdWIi.sig end";
        let out = r.text(text);
        for secret in ["MIIE", "abcdef0123", "xyz.abc", "QUJD", "eyJhbGc"] {
            assert!(!out.contains(secret), "{secret} survived: {out}");
        }
        assert!(out.starts_with("a\n<redacted>\nb\n"), "{out}");
        assert!(out.ends_with("id <redacted> end"), "{out}");
    }

    #[test]
    fn leaves_ordinary_text_alone() {
        let r = Redactor::default();
        let text = "Pending, Unschedulable: 0/3 nodes are available: cannot allocate all claims\ntokens: 3";
        assert_eq!(r.text(text), text);
    }
}
