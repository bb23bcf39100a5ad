//! The Kubernetes releases the local cluster knows how to build, each a Go module recipe kept
//! under `clusters/recipes/<version>/` and embedded here so the built CLI works from any
//! directory.

use crate::error::{ClusterError, Result};

/// One buildable release: its Go recipe and the facts about it that start-up needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    /// `vX.Y.Z`, as `/version` reports it.
    pub version: &'static str,
    /// The etcd release Kubernetes' own test harness pins for this version (`hack/lib/etcd.sh`).
    pub etcd_version: &'static str,
    pub go_mod: &'static str,
    pub go_sum: &'static str,
    /// The minimum Go the recipe's `go` line asks for.
    pub min_go: &'static str,
    /// Every `resource.k8s.io` version this release can serve; those beyond
    /// [`Release::default_resource_api_versions`] only when asked for (`--runtime-config`).
    pub resource_api_versions: &'static [&'static str],
    /// The `resource.k8s.io` versions a kube-apiserver of this release serves with its
    /// defaults, which is what a cluster has unless its admin turned more on: the local
    /// cluster serves exactly these unless a run asks for more, so that a driver still on a
    /// beta client fails here as it would on a default cluster (pkg/controlplane/instance.go:
    /// `stableAPIGroupVersionsEnabledByDefault` has resource v1, the betas are in
    /// `betaAPIGroupVersionsDisabledByDefault`, v1alpha3 in `alphaAPIGroupVersionsDisabledByDefault`).
    pub default_resource_api_versions: &'static [&'static str],
}

/// Newest first; the first one is the default.
pub const RELEASES: &[Release] = &[
    Release {
        version: "v1.37.2",
        etcd_version: "v3.7.0",
        go_mod: include_str!("../../recipes/v1.37.2/go.mod"),
        go_sum: include_str!("../../recipes/v1.37.2/go.sum"),
        min_go: "1.26.0",
        resource_api_versions: &["v1", "v1beta2", "v1beta1", "v1alpha3"],
        default_resource_api_versions: &["v1"],
    },
    // The previous minor, for compatibility records across Kubernetes versions.
    Release {
        version: "v1.36.3",
        etcd_version: "v3.6.8",
        go_mod: include_str!("../../recipes/v1.36.3/go.mod"),
        go_sum: include_str!("../../recipes/v1.36.3/go.sum"),
        min_go: "1.26.0",
        resource_api_versions: &["v1", "v1beta2", "v1beta1", "v1alpha3"],
        default_resource_api_versions: &["v1"],
    },
];

pub fn default_release() -> &'static Release {
    &RELEASES[0]
}

/// Finds a release by `1.37.2`, `v1.37.2` or a minor `1.37` (the newest patch of it).
pub fn find_release(requested: &str) -> Result<&'static Release> {
    let wanted = requested.trim().trim_start_matches('v');
    RELEASES
        .iter()
        .find(|r| {
            let v = r.version.trim_start_matches('v');
            v == wanted || v.strip_prefix(wanted).is_some_and(|rest| rest.starts_with('.'))
        })
        .ok_or_else(|| ClusterError::UnknownVersion {
            requested: requested.to_string(),
            known: RELEASES.iter().map(|r| r.version).collect::<Vec<_>>().join(", "),
        })
}

impl Release {
    /// `1.37` of `v1.37.2`.
    pub fn minor(&self) -> &'static str {
        let v = self.version.trim_start_matches('v');
        let end = v.match_indices('.').nth(1).map_or(v.len(), |(i, _)| i);
        &v[..end]
    }

    /// The `-X` flags that make `/version` report this release instead of a development build.
    pub fn version_ldflags(&self) -> String {
        let minor = self.minor().split('.').nth(1).unwrap_or("0");
        format!(
            "-X k8s.io/component-base/version.gitVersion={v} \
             -X k8s.io/component-base/version.gitMajor=1 \
             -X k8s.io/component-base/version.gitMinor={minor} \
             -X k8s.io/component-base/version.gitTreeState=clean",
            v = self.version
        )
    }

    /// `resource.k8s.io/vX=true,…` for each of `more` (versions to serve beyond the default)
    /// that is off by default; empty where there is none.
    pub fn runtime_config(&self, more: &[String]) -> String {
        more.iter()
            .filter(|v| !self.default_resource_api_versions.contains(&v.as_str()))
            .map(|v| format!("resource.k8s.io/{v}=true"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `more` names only versions this release can serve.
    pub fn check_resource_versions(&self, more: &[String]) -> Result<()> {
        match more.iter().find(|v| !self.resource_api_versions.contains(&v.as_str())) {
            None => Ok(()),
            Some(unknown) => Err(ClusterError::BadResourceVersion {
                version: unknown.clone(),
                release: self.version.to_string(),
                known: self.resource_api_versions.join(", "),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_releases_by_full_or_minor_version() {
        assert_eq!(find_release("v1.37.2").unwrap().version, "v1.37.2");
        assert_eq!(find_release("1.37.2").unwrap().version, "v1.37.2");
        assert_eq!(find_release("1.37").unwrap().version, "v1.37.2");
        assert_eq!(find_release("1.36").unwrap().version, "v1.36.3");
        assert!(find_release("1.3").is_err(), "a prefix of a minor must not match");
        let err = find_release("1.99.0").unwrap_err();
        assert!(err.to_string().contains("Known versions: v1.37.2"), "{err}");
        assert_eq!(err.failure(), crate::error::Failure::BadInput);
    }

    #[test]
    fn recipes_pin_the_release_and_its_staging_modules() {
        for r in RELEASES {
            assert!(r.go_mod.contains(&format!("k8s.io/kubernetes {}", r.version)));
            let staging = format!("v0.{}", &r.version[3..]);
            let replaces = r.go_mod.lines().filter(|l| l.contains(" => k8s.io/")).count();
            assert!(replaces >= 30, "{}: only {replaces} staging replaces", r.version);
            for line in r.go_mod.lines().filter(|l| l.contains(" => k8s.io/")) {
                assert!(line.ends_with(&staging), "{}: {line}", r.version);
            }
            assert!(r.go_mod.contains(&format!("go.etcd.io/etcd/server/v3 {}", r.etcd_version)));
        }
    }

    #[test]
    fn ldflags_and_runtime_config() {
        let r = default_release();
        assert_eq!(r.minor(), "1.37");
        assert!(r.version_ldflags().contains("gitMinor=37"));
        assert_eq!(r.runtime_config(&[]), "", "a default API server's versions need no flag");
        assert_eq!(
            r.runtime_config(&["v1".into(), "v1beta2".into(), "v1alpha3".into()]),
            "resource.k8s.io/v1beta2=true,resource.k8s.io/v1alpha3=true"
        );
        assert!(r.check_resource_versions(&["v1beta1".into()]).is_ok());
        let err = r.check_resource_versions(&["v2".into()]).unwrap_err();
        assert!(err.to_string().contains("v1, v1beta2, v1beta1, v1alpha3"), "{err}");
        assert_eq!(err.failure(), crate::error::Failure::BadInput);
    }
}
