//! The xtask binary as the command-line tests run it.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use std::process::{Command, Output};

pub fn xtask(args: &[&str]) -> Output {
    xtask_env(args, &[])
}

/// With `envs` set, and without the caller's KUBECONFIG, so that no test reaches a cluster it
/// did not name, nor the CI's `$ARTIFACTS` and `$GITHUB_STEP_SUMMARY`, which a run writes to.
/// The mock is the one `cargo test` built beside xtask: no run builds it again.
pub fn xtask_env(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    cmd.args(args).env_remove("KUBECONFIG").env_remove("ARTIFACTS").env_remove("GITHUB_STEP_SUMMARY");
    if mock_driver().is_file() {
        cmd.env(dracheck_mock_driver::adapter::PROGRAM_ENV, mock_driver());
    }
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().expect("xtask runs")
}

/// The mock driver `cargo test` built next to xtask.
pub fn mock_driver() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_BIN_EXE_xtask")).with_file_name("dracheck-mock-driver")
}

/// `conformance --cluster kubeconfig --kubeconfig KUBECONFIG` and then `args`.
pub fn conformance_on(kubeconfig: &std::path::Path, args: &[&str]) -> Output {
    let kc = kubeconfig.to_str().expect("a UTF-8 path");
    let mut all = vec!["conformance", "--cluster", "kubeconfig", "--kubeconfig", kc];
    all.extend(args);
    xtask(&all)
}

/// Standard output and standard error together.
pub fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Live processes whose command line names `dir` (drivers started with a node's dirs, the
/// control plane with its state dir).
pub fn processes_mentioning(dir: &std::path::Path) -> Vec<String> {
    let needle = dir.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = dracheck_clusters::local::process::proc_stat(pid)?;
            if stat.state == 'Z' {
                return None;
            }
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            cmdline.contains(&needle).then_some(format!("{pid}: {cmdline}"))
        })
        .collect()
}
