//! `cargo xtask` as a contributor runs it, twice: the second compiles nothing. A nested cargo
//! that inherited `cargo run`'s variables (the mock driver's build inside a run) made ring's
//! build script dirty for the next outer cargo and the other way round, so every `cargo xtask`
//! recompiled 22 crates and a refusal that takes milliseconds took 40 s.

use std::path::Path;
use std::process::{Command, Output};

fn cargo_xtask(args: &[&str]) -> Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask sits in the workspace");
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    // As from a shell: without the variables `cargo test` gave this test.
    for var in dracheck_adapter::cargo_run_vars() {
        cmd.env_remove(var);
    }
    cmd.arg("xtask").args(args).current_dir(root).env_remove("KUBECONFIG");
    cmd.output().expect("cargo runs")
}

#[test]
fn a_second_cargo_xtask_compiles_nothing() {
    let refused = ["conformance", "--driver", "mock", "--nodes", "0", "--node-kind", "emulated"];
    let first = cargo_xtask(&refused);
    let said = String::from_utf8_lossy(&first.stderr).to_string();
    assert_eq!(first.status.code(), Some(2), "--nodes 0 is bad input: {said}");
    let second = cargo_xtask(&refused);
    let said = String::from_utf8_lossy(&second.stderr).to_string();
    assert_eq!(second.status.code(), Some(2), "{said}");
    let compiled: Vec<&str> = said.lines().filter(|l| l.trim_start().starts_with("Compiling")).collect();
    assert!(compiled.is_empty(), "the second `cargo xtask` compiled again: {compiled:?}\n{said}");
}
