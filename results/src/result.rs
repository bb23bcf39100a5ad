//! The result of a conformance run: one JSON document, schema-versioned, that every report,
//! `compare` and `matrix` reads. Field names are stable; new fields are added, never renamed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Bumped when a reader of an older version could misread a document.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    Skip,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Skip => "skip",
        })
    }
}

/// Something observed, kept so that a failure can be understood without re-running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub title: String,
    pub body: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuaranteeResult {
    /// Stable ID, e.g. `claim.impossible.explained`.
    pub id: String,
    /// The scenario that checked it.
    pub scenario: String,
    pub verdict: Verdict,
    /// Whether the contract requires it (`must`) or it is advice (`should`): a failed `should`
    /// fails the run only with `--strict`. Results written before levels read as `must`.
    #[serde(default)]
    pub level: crate::levels::Level,
    /// Why it passed, failed or was skipped, in one sentence.
    pub reason: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Evidence>,
    /// Measured durations in seconds, by name (e.g. `allocation`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub durations: BTreeMap<String, f64>,
}

/// What a claim of a profile actually got: compared across clusters, because the same
/// profile name does not prove the same hardware.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocatedDevice {
    pub driver: String,
    pub pool: String,
    pub device: String,
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
    #[serde(default)]
    pub capacity: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileResult {
    pub name: String,
    pub file: String,
    pub device_class: String,
    pub guarantees: Vec<GuaranteeResult>,
    #[serde(default)]
    pub allocated_devices: Vec<AllocatedDevice>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterFacts {
    /// `local`, `kubeconfig`, …
    pub provider: String,
    pub kubernetes_version: String,
    pub resource_api_versions: Vec<String>,
    pub feature_gates: String,
    pub nodes: usize,
    /// On the local cluster: `real` (the upstream kubelet, containerd and runc) or `emulated`
    /// nodes, since a verdict is only as real as the node that gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_kind: Option<String>,
    /// The feature gates the suite probed, and whether the API server serves their fields
    /// (`DRAPrioritizedList: true`): what the gated scenarios were skipped or run for.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub served_features: std::collections::BTreeMap<String, bool>,
    /// The DRA feature gates as the API server reports them (its `kubernetes_feature_enabled`
    /// metric), where the suite may read `/metrics`: what the cluster runs with, beside what
    /// the probes saw served.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub enabled_gates: std::collections::BTreeMap<String, bool>,
}

impl ClusterFacts {
    /// `local, 7 real nodes`; `kubeconfig, 3 nodes`.
    pub fn describe(&self) -> String {
        let kind = self.node_kind.as_deref().map_or(String::new(), |k| format!("{k} "));
        format!("{}, {} {kind}nodes", self.provider, self.nodes)
    }

    /// `DRAConsumableCapacity on, DRADeviceTaintRules off`; empty where `/metrics` was not read.
    pub fn enabled_gates_line(&self) -> String {
        self.enabled_gates
            .iter()
            .map(|(gate, on)| format!("{gate} {}", if *on { "on" } else { "off" }))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `DRAAdminAccess on, DRAPrioritizedList off`; empty where nothing was probed.
    pub fn served_features_line(&self) -> String {
        let on = |served: bool| if served { "on" } else { "off" };
        self.served_features
            .iter()
            .map(|(gate, served)| format!("{gate} {}", on(*served)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverFacts {
    pub name: String,
    pub version: String,
    /// The binary or image the driver ran from.
    pub artifact: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub schema_version: u32,
    pub dracheck_version: String,
    /// RFC 3339.
    pub started_at: String,
    pub duration_seconds: f64,
    pub cluster: ClusterFacts,
    pub driver: DriverFacts,
    /// Guarantees of the driver contract itself (plugin tier), independent of profiles.
    pub driver_guarantees: Vec<GuaranteeResult>,
    pub profiles: Vec<ProfileResult>,
    /// Where the time went, in seconds: `cluster-start`, `scenario:<name>`, `teardown`.
    #[serde(default)]
    pub timings: BTreeMap<String, f64>,
    /// The flags that shaped the run; absent for a whole run of an unbroken driver.
    #[serde(default, skip_serializing_if = "RunShape::is_whole")]
    pub shape: RunShape,
}

/// The flags that shape a run's verdicts, kept with them: a run of a driver broken on purpose
/// must not read like a real failure, nor a filtered run like a whole one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunShape {
    /// Faults switched on in the driver (the mock's `--fault NAME[=ARG]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<String>,
    /// `--only` globs: only the guarantees they match ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only: Vec<String>,
    /// `--skip` globs: the guarantees they match did not run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip: Vec<String>,
    /// `--strict`: a failed `should` fails the run too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub strict: bool,
}

impl RunShape {
    /// No fault, no filter, not strict: the run as a user runs it by default.
    pub fn is_whole(&self) -> bool {
        *self == RunShape::default()
    }

    /// What a reader must know before reading the verdicts, one sentence each; empty for a
    /// whole run.
    pub fn notes(&self) -> Vec<String> {
        let list = |v: &[String]| v.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ");
        let mut out = Vec::new();
        if !self.faults.is_empty() {
            out.push(format!(
                "run with fault {}: the driver was broken on purpose, so failures are expected",
                list(&self.faults)
            ));
        }
        if !self.only.is_empty() {
            out.push(format!("only the guarantees matching {} ran", list(&self.only)));
        }
        if !self.skip.is_empty() {
            out.push(format!("the guarantees matching {} were skipped on request", list(&self.skip)));
        }
        if self.strict {
            out.push("strict: a failed `should` fails the run".into());
        }
        out
    }
}

impl RunResult {
    /// Every guarantee result, driver-level first.
    pub fn all(&self) -> impl Iterator<Item = &GuaranteeResult> {
        self.driver_guarantees.iter().chain(self.profiles.iter().flat_map(|p| p.guarantees.iter()))
    }

    /// Whether every guarantee that ran held (skips do not count against it).
    pub fn all_held(&self) -> bool {
        self.all().all(|g| g.verdict != Verdict::Fail)
    }

    /// No `must` failed (and with `strict`, no `should` either): what decides the exit code.
    pub fn held(&self, strict: bool) -> bool {
        self.all().all(|g| g.verdict != Verdict::Fail || (!strict && g.level == crate::levels::Level::Should))
    }
}

#[cfg(test)]
mod tests {
    use super::RunShape;

    #[test]
    fn a_whole_run_says_nothing_and_a_shaped_one_says_each_flag() {
        assert!(RunShape::default().is_whole());
        assert!(RunShape::default().notes().is_empty());
        let shape = RunShape {
            faults: vec!["hang-prepare".into()],
            only: vec!["plugin.*".into()],
            skip: vec!["plugin.cdi.*".into()],
            strict: true,
        };
        assert_eq!(
            shape.notes(),
            [
                "run with fault `hang-prepare`: the driver was broken on purpose, so failures are expected",
                "only the guarantees matching `plugin.*` ran",
                "the guarantees matching `plugin.cdi.*` were skipped on request",
                "strict: a failed `should` fails the run",
            ]
        );
        // Kept in the JSON only where there is something to keep.
        let json = serde_json::to_value(&shape).unwrap();
        assert_eq!(json["faults"], serde_json::json!(["hang-prepare"]));
        assert_eq!(serde_json::to_value(RunShape::default()).unwrap(), serde_json::json!({}));
    }
}
