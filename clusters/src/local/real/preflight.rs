//! What real nodes need of the machine, checked in milliseconds before anything is built: a
//! fresh machine once built for 13 minutes (cargo, the control plane, the kubelet, containerd)
//! and only then found that runc could not link libseccomp.

use std::process::{Command, Stdio};

use crate::error::ClusterError;

/// Every prerequisite of real nodes this machine lacks, each as the error that names its fix:
/// root and cgroups, libseccomp for building runc (unless runc is built already), a static
/// busybox for the workload image, gcc for the pause image. Empty where nothing is missing.
pub fn missing() -> Vec<ClusterError> {
    let mut out = Vec::new();
    if let Err(reason) = super::host::check_support() {
        out.push(ClusterError::MissingTool {
            tool: "root and a cgroup hierarchy".into(),
            detail: reason,
            fix: "run as root on a machine with cgroups mounted under /sys/fs/cgroup, or use --node-kind emulated"
                .into(),
        });
    }
    if let Err(e) = super::stack::check_runc_buildable() {
        out.push(e);
    }
    if let Err(e) = super::images::check_busybox() {
        out.push(e);
    }
    let gcc =
        Command::new("gcc").arg("--version").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status();
    if !gcc.is_ok_and(|s| s.success()) {
        out.push(ClusterError::MissingTool {
            tool: "gcc".into(),
            detail:
                "`gcc --version` did not run, and real nodes' pause image is compiled here (there is no registry to \
                     pull it from)"
                    .into(),
            fix: "apt-get install gcc libc6-dev, or use --node-kind emulated".into(),
        });
    }
    out
}

/// [`missing`] as one error: the first one where there is one, all of them in its detail where
/// there are several.
pub fn check() -> Result<(), ClusterError> {
    let mut missing = missing();
    match missing.len() {
        0 => Ok(()),
        1 => Err(missing.remove(0)),
        _ => Err(ClusterError::MissingPrerequisites(missing)),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_check_takes_milliseconds() {
        let started = std::time::Instant::now();
        let _ = super::missing();
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "took {:?}", started.elapsed());
    }

    #[test]
    fn several_missing_are_listed_each_with_its_fix() {
        let tool = |t: &str| super::ClusterError::MissingTool {
            tool: t.into(),
            detail: format!("{t} is gone"),
            fix: format!("install {t}"),
        };
        let said = super::ClusterError::MissingPrerequisites(vec![tool("gcc"), tool("busybox")]).to_string();
        assert_eq!(
            said,
            "real nodes need 2 things this machine lacks:\n  - gcc is not available: gcc is gone. To fix: install \
             gcc.\n  - busybox is not available: busybox is gone. To fix: install busybox.\nInstall each as it says \
             (`.ci/run` installs the Debian packages where missing), or use --node-kind emulated."
        );
    }
}
