//! The programs of a real node, built from their upstream Go modules like the control plane
//! and cached per version: the kubelet of the cluster's release (from the release's recipe),
//! containerd 2.x with its runc shim and `ctr`, and runc.

use std::path::{Path, PathBuf};

use crate::error::{ClusterError, Result};
use crate::gobuild::{self, GoBinary, GoRecipe};
use crate::local::Progress;
use crate::local::versions::Release;

pub const CONTAINERD_VERSION: &str = "v2.4.2";
pub const RUNC_VERSION: &str = "v1.5.3";

/// Where each program of a real node is.
#[derive(Debug, Clone)]
pub struct NodeStack {
    pub kubelet: PathBuf,
    pub containerd: PathBuf,
    /// `containerd-shim-runc-v2`; containerd finds it on its PATH.
    pub shim_dir: PathBuf,
    pub ctr: PathBuf,
    pub runc: PathBuf,
}

/// The kubelet of `release`: the release's own recipe (the control plane's `go.mod`), built
/// into a cache dir of its own so that the control plane's cache stays valid without it.
pub fn kubelet_recipe(release: &Release) -> GoRecipe {
    GoRecipe {
        what: format!("the Kubernetes {} kubelet", release.version),
        cache_subdir: Path::new("k8s").join(release.version).join("node"),
        version: release.version,
        version_ldflags: release.version_ldflags(),
        go_mod: release.go_mod,
        go_sum: release.go_sum,
        min_go: release.min_go,
        estimate: "about 1 min on 2 cores after the control plane, 6 min with an empty Go cache",
        instead: "run with --node-kind emulated",
        binaries: vec![GoBinary {
            name: "kubelet",
            package: "k8s.io/kubernetes/cmd/kubelet",
            stamped: true,
            ..GoBinary::PLAIN
        }],
    }
}

/// containerd, its runc shim and `ctr`: static Go without the snapshotters this machine
/// does not use (btrfs, devmapper, zfs need C libraries).
pub fn containerd_recipe() -> GoRecipe {
    let bin = |name, package| GoBinary {
        name,
        package,
        stamped: true,
        tags: "no_btrfs,no_devmapper,no_zfs,urfave_cli_no_docs",
        ..GoBinary::PLAIN
    };
    GoRecipe {
        what: format!("containerd {CONTAINERD_VERSION}"),
        cache_subdir: Path::new("tools/containerd").join(CONTAINERD_VERSION),
        version: CONTAINERD_VERSION,
        version_ldflags: format!("-X github.com/containerd/containerd/v2/version.Version={CONTAINERD_VERSION}"),
        go_mod: include_str!("../../../recipes/tools/containerd/go.mod"),
        go_sum: include_str!("../../../recipes/tools/containerd/go.sum"),
        min_go: "1.26.6",
        estimate: "about 4 min on 2 cores",
        instead: "run with --node-kind emulated",
        binaries: vec![
            bin("containerd", "github.com/containerd/containerd/v2/cmd/containerd"),
            bin("containerd-shim-runc-v2", "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"),
            bin("ctr", "github.com/containerd/containerd/v2/cmd/ctr"),
        ],
    }
}

/// runc needs cgo for seccomp: Debian's `libseccomp-dev` and `pkg-config`.
pub fn runc_recipe() -> GoRecipe {
    GoRecipe {
        what: format!("runc {RUNC_VERSION}"),
        cache_subdir: Path::new("tools/runc").join(RUNC_VERSION),
        version: RUNC_VERSION,
        version_ldflags: format!("-X main.version={}", RUNC_VERSION.trim_start_matches('v')),
        go_mod: include_str!("../../../recipes/tools/runc/go.mod"),
        go_sum: include_str!("../../../recipes/tools/runc/go.sum"),
        min_go: "1.26.0",
        estimate: "about 80 s on 2 cores",
        instead: "run with --node-kind emulated",
        binaries: vec![GoBinary {
            name: "runc",
            package: "github.com/opencontainers/runc",
            stamped: true,
            cgo: true,
            tags: "seccomp,urfave_cli_no_docs",
        }],
    }
}

/// The recipes of the node programs for `release`: the kubelet, containerd and runc.
pub fn recipes(release: &Release) -> [GoRecipe; 3] {
    [kubelet_recipe(release), containerd_recipe(), runc_recipe()]
}

/// The node programs for `release`, built into the cache on first use (all three at once).
pub async fn ensure(release: &Release, progress: &Progress) -> Result<NodeStack> {
    let recipes = recipes(release);
    if !recipes[2].root().join("stamp").exists() {
        check_seccomp()?;
    }
    let [kubelet, containerd, runc] = <[PathBuf; 3]>::try_from(gobuild::cached_or_build_all(&recipes, progress).await?)
        .expect("one bin dir per recipe");
    Ok(NodeStack {
        kubelet: kubelet.join("kubelet"),
        containerd: containerd.join("containerd"),
        shim_dir: containerd.clone(),
        ctr: containerd.join("ctr"),
        runc: runc.join("runc"),
    })
}

/// Whether runc could be built here (or is built): what [`ensure`] checks first.
pub fn runc_buildable() -> bool {
    check_runc_buildable().is_ok()
}

/// Why runc cannot be built here, unless it is built already.
pub fn check_runc_buildable() -> Result<()> {
    if runc_recipe().root().join("stamp").exists() { Ok(()) } else { check_seccomp() }
}

/// runc's seccomp support links libseccomp through pkg-config; without them its build fails
/// deep in cgo, so say up front what to install.
fn check_seccomp() -> Result<()> {
    let found = std::process::Command::new("pkg-config")
        .args(["--exists", "libseccomp"])
        .stdin(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return Ok(());
    }
    Err(ClusterError::MissingTool {
        tool: "libseccomp (for building runc)".into(),
        detail: "`pkg-config --exists libseccomp` failed".into(),
        fix:
            "install Debian's `libseccomp-dev` and `pkg-config` (`apt-get install libseccomp-dev pkg-config`), or run \
              with --node-kind emulated"
                .into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_runc_needs_cgo_and_every_recipe_builds_what_the_node_runs() {
        let runc = runc_recipe();
        assert!(runc.binaries.iter().all(|b| b.cgo && b.tags.contains("seccomp")));
        let containerd = containerd_recipe();
        assert!(containerd.binaries.iter().all(|b| !b.cgo));
        let names: Vec<&str> = containerd.binaries.iter().map(|b| b.name).collect();
        assert_eq!(names, ["containerd", "containerd-shim-runc-v2", "ctr"]);
        let kubelet = kubelet_recipe(crate::local::versions::default_release());
        assert!(kubelet.cache_subdir.ends_with("k8s/v1.37.2/node"));
        for recipe in [runc, containerd] {
            assert!(
                recipe.go_mod.contains(&format!("tool {}", recipe.binaries[0].package))
                    || recipe.go_mod.contains(recipe.binaries[0].package)
            );
        }
    }
}
