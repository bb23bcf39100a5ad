//! Which kubeconfig a command uses when `--kubeconfig` is not given: `$KUBECONFIG`, else
//! `~/.kube/config`. `$KUBECONFIG` is taken as one path; kubectl merges a list of several,
//! which dracheck does not yet.

use std::path::{Path, PathBuf};

/// `flag`, else `$KUBECONFIG`, else `~/.kube/config`; `None` without a home dir.
pub fn chosen(flag: Option<&Path>) -> Option<PathBuf> {
    flag.map(Path::to_path_buf)
        .or_else(|| std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()).map(PathBuf::from))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube/config")))
}

/// The message of a command that found no kubeconfig at all.
pub const NONE: &str = "no kubeconfig: pass --kubeconfig PATH (or set KUBECONFIG)";
