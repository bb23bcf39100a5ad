//! Where the control-plane binaries come from: a `--k8s-bin-dir` given by the user, or a build
//! of the embedded Go recipe, cached per version under the user's cache dir.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::versions::Release;
use super::{NodeKind, Progress};
use crate::error::{ClusterError, Result};
use crate::gobuild::{self, GoBinary, GoRecipe};

/// The four upstream binaries, in start order, with the Go package each is built from.
pub const BINARIES: [(&str, &str); 4] = [
    ("etcd", "go.etcd.io/etcd/server/v3"),
    ("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"),
    ("kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler"),
    ("kube-controller-manager", "k8s.io/kubernetes/cmd/kube-controller-manager"),
];

/// A directory holding all four binaries and the Kubernetes version they report.
#[derive(Debug, Clone)]
pub struct BinDir {
    pub dir: PathBuf,
    pub version: String,
}

impl BinDir {
    pub fn path(&self, binary: &str) -> PathBuf {
        self.dir.join(binary)
    }

    /// Checks a user-given directory: every binary present and executable, and the version
    /// `kube-apiserver --version` reports.
    pub fn existing(dir: &Path) -> Result<BinDir> {
        for (binary, _) in BINARIES {
            check_executable(dir, binary)?;
        }
        let version = apiserver_version(dir)?;
        Ok(BinDir { dir: dir.to_path_buf(), version })
    }
}

fn check_executable(dir: &Path, binary: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let missing = |problem: &str| ClusterError::MissingBinary {
        dir: dir.to_path_buf(),
        binary: binary.to_string(),
        problem: problem.to_string(),
    };
    let meta = std::fs::metadata(dir.join(binary)).map_err(|e| missing(&e.to_string()))?;
    if !meta.is_file() {
        return Err(missing("not a regular file"));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(missing("not executable"));
    }
    Ok(())
}

fn apiserver_version(dir: &Path) -> Result<String> {
    let out = Command::new(dir.join("kube-apiserver")).arg("--version").stdin(Stdio::null()).output().map_err(|e| {
        ClusterError::MissingBinary {
            dir: dir.to_path_buf(),
            binary: "kube-apiserver".into(),
            problem: format!("cannot run it: {e}"),
        }
    })?;
    // Prints `Kubernetes v1.37.2`.
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .find(|w| w.starts_with('v') && w[1..].starts_with(|c: char| c.is_ascii_digit()))
        .map(str::to_string)
        .ok_or_else(|| ClusterError::MissingBinary {
            dir: dir.to_path_buf(),
            binary: "kube-apiserver".into(),
            problem: format!("`kube-apiserver --version` printed {:?}, not a version", text.trim()),
        })
}

/// How the control plane of `release` is built: etcd and the three Kubernetes components from
/// the release's Go recipe, the components stamped with the release's version.
pub fn recipe(release: &Release) -> GoRecipe {
    GoRecipe {
        what: format!("the Kubernetes {} control plane", release.version),
        cache_subdir: Path::new("k8s").join(release.version),
        version: release.version,
        version_ldflags: release.version_ldflags(),
        go_mod: release.go_mod,
        go_sum: release.go_sum,
        min_go: release.min_go,
        estimate: "about 10 min on 2 cores with an empty Go cache",
        instead: "pass --k8s-bin-dir with prebuilt etcd, kube-apiserver, kube-scheduler and kube-controller-manager",
        binaries: BINARIES
            .iter()
            .map(|(name, package)| GoBinary { name, package, stamped: *name != "etcd", ..GoBinary::PLAIN })
            .collect(),
    }
}

/// The binaries of `release`, built into the cache on first use. For real nodes, where this
/// machine can run them, their programs are built in the same go: the kubelet in the control
/// plane's own `go build` (one module), containerd and runc beside it, instead of after the
/// control plane has started and sits idle.
pub async fn cached_or_build(release: &'static Release, nodes: NodeKind, progress: &Progress) -> Result<BinDir> {
    let mut recipes = vec![recipe(release)];
    if nodes == NodeKind::Real && super::real::host::check_support().is_ok() {
        let [kubelet, containerd, runc] = super::real::stack::recipes(release);
        recipes.extend([kubelet, containerd]);
        // Without libseccomp runc cannot build; the node start says so with the fix.
        if super::real::stack::runc_buildable() {
            recipes.push(runc);
        }
    }
    BinDir::existing(&gobuild::cached_or_build_all(&recipes, progress).await?.remove(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_bin(dir: &Path, name: &str, script: &str) {
        use std::os::unix::fs::PermissionsExt as _;
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_bin_dir_missing_a_binary_names_it() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["kube-apiserver", "kube-scheduler", "kube-controller-manager"] {
            fake_bin(dir.path(), name, "echo Kubernetes v1.37.2");
        }
        let err = BinDir::existing(dir.path()).unwrap_err();
        assert!(matches!(&err, ClusterError::MissingBinary { binary, .. } if binary == "etcd"), "{err}");
        assert_eq!(err.failure(), crate::error::Failure::BadInput);
    }

    #[test]
    fn a_bin_dir_reports_the_apiserver_version() {
        let dir = tempfile::tempdir().unwrap();
        for (name, _) in BINARIES {
            fake_bin(dir.path(), name, "echo Kubernetes v1.36.4");
        }
        assert_eq!(BinDir::existing(dir.path()).unwrap().version, "v1.36.4");
        std::fs::write(dir.path().join("etcd"), "not executable").unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir.path().join("etcd"), std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = BinDir::existing(dir.path()).unwrap_err();
        assert!(err.to_string().contains("not executable"), "{err}");
    }

    #[test]
    fn etcd_is_not_stamped_with_the_kubernetes_version() {
        let r = recipe(super::super::versions::default_release());
        let stamped: Vec<&str> = r.binaries.iter().filter(|b| b.stamped).map(|b| b.name).collect();
        assert_eq!(stamped, ["kube-apiserver", "kube-scheduler", "kube-controller-manager"]);
        assert!(r.cache_subdir.ends_with("k8s/v1.37.2"));
    }
}
