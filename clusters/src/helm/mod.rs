//! helm, for installing a driver's chart into a real cluster: the program (a `--helm` path,
//! one on `PATH`, or helm v4 built from its Go module), the release it installs and removes
//! again, and what the release's pods say when it fails.

mod pods;
mod release;

use std::path::{Path, PathBuf};

use crate::error::{ClusterError, Result};
use crate::gobuild::{GoBinary, GoRecipe};
use crate::local::Progress;
use crate::tools::{self, Origin};

pub use pods::describe_pods;
pub use release::{Installed, ReleaseSpec, Target, install, install_args, uninstall_args};

/// The helm release built when none is found.
pub const VERSION: &str = "v4.3.2";

/// helm's own module at [`VERSION`], pinned by go.sum; `go build` of its command.
pub fn recipe() -> GoRecipe {
    GoRecipe {
        what: format!("helm {VERSION}"),
        cache_subdir: Path::new("tools/helm").join(VERSION),
        version: VERSION,
        // What helm's Makefile stamps, so that `helm version` tells the release.
        version_ldflags: format!("-X helm.sh/helm/v4/internal/version.version={VERSION}"),
        go_mod: include_str!("../../recipes/tools/helm/go.mod"),
        go_sum: include_str!("../../recipes/tools/helm/go.sum"),
        min_go: "1.26.0",
        estimate: "about 3 min on 2 cores with an empty Go cache",
        instead: "put a helm binary on PATH or pass --helm PATH",
        binaries: vec![GoBinary {
            name: "helm",
            package: "helm.sh/helm/v4/cmd/helm",
            stamped: true,
            ..GoBinary::PLAIN
        }],
    }
}

/// A helm program and its major version, which decides how `--wait` is spelled.
#[derive(Debug, Clone)]
pub struct Helm {
    pub program: PathBuf,
    pub major: u32,
    pub version: String,
}

impl Helm {
    /// `explicit` (`--helm`), else helm on `PATH`, else helm built from [`recipe`].
    pub async fn locate(explicit: Option<&Path>, progress: &Progress) -> Result<Helm> {
        let found = tools::locate("helm", "--helm", explicit, &recipe(), progress).await?;
        let out = tokio::process::Command::new(&found.program)
            .args(["version", "--short"])
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| missing(&found.program, e.to_string()))?;
        let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let major = major_version(&version)
            .filter(|m| out.status.success() && *m >= 3)
            .ok_or_else(|| missing(&found.program, format!("`helm version --short` said {version:?}")))?;
        let from = match found.origin {
            Origin::Flag => "from --helm",
            Origin::Path => "from PATH",
            Origin::Built => "built by dracheck",
        };
        progress.line(format!("helm {version} ({from}: {})", found.program.display()));
        Ok(Helm { program: found.program, major, version })
    }
}

fn missing(program: &Path, detail: String) -> ClusterError {
    ClusterError::MissingTool {
        tool: "helm".into(),
        detail: format!("{} does not run as helm 3 or newer ({detail})", program.display()),
        fix: "pass --helm with a working helm, or take it off PATH so that dracheck builds its own".into(),
    }
}

/// `v4.3.2+g1a2b3c` → 4.
fn major_version(short: &str) -> Option<u32> {
    short.trim().trim_start_matches('v').split('.').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_major_version_comes_from_the_short_form() {
        assert_eq!(major_version("v4.3.2"), Some(4));
        assert_eq!(major_version("v3.17.1+g980d8ac"), Some(3));
        assert_eq!(major_version("garbage"), None);
    }
}
