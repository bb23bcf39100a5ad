//! Which guarantees the DRA contract requires and which are advice, in RFC 2119's words:
//! `must` where the kubelet, the API or the KEP needs it of a driver (a driver without it
//! breaks workloads or the cluster), `should` where it hardens a driver beyond what the
//! contract asks (upstream's own drivers may lack it). A run fails (exit 1) for a failed
//! `must`; a failed `should` is reported, and fails the run only with `--strict`.
//!
//! Every guarantee is `must` unless [`SHOULD`] names it with the upstream code that makes it
//! advice. The profile guarantees are a platform's documented promises: all `must`.

use serde::{Deserialize, Serialize};

use crate::ids::*;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// The contract requires it.
    #[default]
    Must,
    /// Hardening the contract does not require.
    Should,
}

impl Level {
    /// The level of the guarantee `id`.
    pub fn of(id: &str) -> Level {
        if SHOULD.iter().any(|(s, _)| *s == id) { Level::Should } else { Level::Must }
    }

    pub fn name(self) -> &'static str {
        match self {
            Level::Must => "must",
            Level::Should => "should",
        }
    }
}

/// The `should` guarantees, each with why the contract does not require it (the upstream code
/// that shows it).
pub const SHOULD: &[(&str, &str)] = &[
    (
        PLUGIN_REGISTRATION_V1,
        "the v1.37 kubelet takes a plugin that offers only v1beta1.DRAPlugin: servicesSupportedByKubelet in \
         pkg/kubelet/cm/dra/plugin/dra_plugin.go lists v1 and v1beta1, and dra_plugin_manager.go picks the first the \
         plugin offers; v1 is advice for the day v1beta1 goes",
    ),
    (
        PLUGIN_PREPARE_REFUSES_FOREIGN_NODE,
        "the kubelet sends NodePrepareResources only for claims of pods bound to its node, whose allocations the \
         scheduler made there (pkg/kubelet/cm/dra/manager.go prepares the pod's claims as allocated); upstream's own \
         e2e_node test driver prepares claims of any pool (test/e2e_node/dra_test.go uses pool some-pool)",
    ),
    (
        PLUGIN_SLICES_OWN_NODE_ONLY,
        "the API lets a plugin's account write any ResourceSlice its RBAC allows; limiting it to its own node's is \
         hardening that a chart adds as an admission policy (dra-example-driver v0.4.0's \
         deployments/helm/dra-example-driver/templates/validatingadmissionpolicy.yaml matches the service account \
         token's authentication.kubernetes.io/node-name), not something the kubelet or the scheduler needs",
    ),
    (
        PLUGIN_REGISTRATION_RECOVERS,
        "a plugin that exits when the kubelet refuses a registration is restarted by its DaemonSet and registers \
         then (the kubelet's plugin watcher registers every socket that appears, pkg/kubelet/pluginmanager); \
         staying up is advice that saves the restart",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_should_names_a_guarantee_once_with_its_reason() {
        for (i, (id, why)) in SHOULD.iter().enumerate() {
            assert!(crate::ids::meaning(id).is_some(), "{id} is no guarantee");
            assert!(
                why.contains(".go") || why.contains("pkg/") || why.contains(".yaml"),
                "{id}: cite the upstream code"
            );
            assert!(!SHOULD[..i].iter().any(|(other, _)| other == id), "{id} twice");
        }
        assert_eq!(Level::of(PLUGIN_REGISTRATION_V1), Level::Should);
        assert_eq!(Level::of(PLUGIN_REGISTRATION_INFO), Level::Must);
        assert_eq!(Level::of(CLAIM_COMPATIBLE_ALLOCATED), Level::Must);
    }

    /// A failed `should` fails a run only when it is strict; a failed `must` always.
    #[test]
    fn only_a_failed_must_fails_a_run_unless_strict() {
        let g = |id: &str, verdict| crate::GuaranteeResult {
            id: id.into(),
            scenario: "s".into(),
            verdict,
            level: Level::of(id),
            reason: String::new(),
            evidence: Vec::new(),
            durations: Default::default(),
        };
        let mut r: crate::RunResult = serde_json::from_value(serde_json::json!({
            "schema_version": 1, "dracheck_version": "0", "started_at": "", "duration_seconds": 0.0,
            "cluster": {"provider": "local", "kubernetes_version": "v1.37.2", "resource_api_versions": [], "feature_gates": "", "nodes": 0},
            "driver": {"name": "d", "version": "1", "artifact": ""},
            "driver_guarantees": [], "profiles": []
        }))
        .expect("a minimal result");
        r.driver_guarantees =
            vec![g(PLUGIN_REGISTRATION_INFO, crate::Verdict::Pass), g(PLUGIN_REGISTRATION_V1, crate::Verdict::Fail)];
        assert!(r.held(false) && !r.held(true));
        r.driver_guarantees.push(g(PLUGIN_PREPARE_IDEMPOTENT, crate::Verdict::Fail));
        assert!(!r.held(false));
    }
}
