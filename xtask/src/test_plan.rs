//! `cargo xtask test` without arguments: the workspace's tests built once, then run in two
//! phases instead of `cargo test`'s one binary after the other. The fidelity table is most of
//! the time and mostly waits on timeouts with the machine's CPU half idle, so every other test
//! binary runs beside it; before that, the binaries that compare the machine's own state run
//! alone, since they compare it only while no other run's nodes are up. Every test runs, as
//! `cargo test --workspace` runs it (its package's dir as the working dir), and a failing
//! binary does not stop the others: the summary names each binary with its time and outcome.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::process::Command;

/// Integration tests that compare what only the machine has (kernel settings, host dirs), which
/// they skip while another run's nodes are up: run first, alone.
const ALONE: &[&str] = &["real_nodes"];
/// The long one, which everything else runs beside.
const BESIDE: &[&str] = &["fidelity"];

/// One test executable of the workspace.
#[derive(Debug, Clone)]
struct TestBinary {
    /// `<package dir>: <kind> <target>`, for people.
    shown: String,
    target: String,
    kind: String,
    executable: PathBuf,
    dir: PathBuf,
}

/// How one binary (or the doc tests) went.
struct Ran {
    shown: String,
    took: Duration,
    ok: bool,
}

/// Builds every test binary, runs them in the two phases and prints the summary; the exit
/// code is 0 only if every binary passed.
pub async fn run(cargo: &str, root: &std::path::Path) -> u8 {
    let binaries = match build(cargo, root).await {
        Ok(b) => b,
        Err(e) => {
            eprintln!("dracheck: {e}");
            return crate::exit::FAILED;
        }
    };
    let integration = |names: &[&str], b: &TestBinary| b.kind == "test" && names.contains(&b.target.as_str());
    let (alone, rest): (Vec<TestBinary>, Vec<TestBinary>) = binaries.into_iter().partition(|b| integration(ALONE, b));
    let (beside, rest): (Vec<TestBinary>, Vec<TestBinary>) = rest.into_iter().partition(|b| integration(BESIDE, b));
    let started = Instant::now();

    let mut ran = sequence(&alone, "alone").await;
    let rest_then_doc = async {
        let mut ran = sequence(&rest, "beside the fidelity table").await;
        ran.push(doc_tests(cargo, root).await);
        ran
    };
    let (long, others) = tokio::join!(sequence(&beside, "beside the other tests"), rest_then_doc);
    ran.extend(long);
    ran.extend(others);

    eprintln!("\n==> test binaries ({:.1} min in all):", started.elapsed().as_secs_f64() / 60.0);
    for r in &ran {
        eprintln!("  {} {:>7.1} s  {}", if r.ok { "ok  " } else { "FAIL" }, r.took.as_secs_f64(), r.shown);
    }
    let failed: Vec<&str> = ran.iter().filter(|r| !r.ok).map(|r| r.shown.as_str()).collect();
    if failed.is_empty() {
        crate::exit::OK
    } else {
        eprintln!("==> {} failed: {}", failed.len(), failed.join(", "));
        crate::exit::FAILED
    }
}

/// `cargo test --workspace --no-run`, read from its JSON messages: every test executable.
async fn build(cargo: &str, root: &std::path::Path) -> Result<Vec<TestBinary>, String> {
    eprintln!("==> building the workspace's tests");
    let out = Command::new(cargo)
        .args(["test", "--workspace", "--no-run", "--message-format=json-render-diagnostics"])
        .current_dir(root)
        .stderr(std::process::Stdio::inherit())
        .output()
        .await
        .map_err(|e| format!("could not run `{cargo} test --no-run`: {e}"))?;
    if !out.status.success() {
        return Err(format!("building the tests failed ({})", out.status));
    }
    let mut found = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if msg["reason"] != "compiler-artifact" || msg["profile"]["test"] != true {
            continue;
        }
        let (Some(exe), Some(manifest)) = (msg["executable"].as_str(), msg["manifest_path"].as_str()) else {
            continue;
        };
        let dir = PathBuf::from(manifest).parent().map(PathBuf::from).unwrap_or_default();
        let target = msg["target"]["name"].as_str().unwrap_or_default().to_string();
        let kind = msg["target"]["kind"][0].as_str().unwrap_or_default().to_string();
        let shown = format!("{}: {kind} {target}", dir.strip_prefix(root).unwrap_or(&dir).display());
        found.push(TestBinary { shown, target, kind, executable: exe.into(), dir });
    }
    Ok(found)
}

/// Runs `binaries` one after the other.
async fn sequence(binaries: &[TestBinary], how: &str) -> Vec<Ran> {
    let mut ran = Vec::new();
    for b in binaries {
        eprintln!("==> {} ({how})", b.shown);
        let started = Instant::now();
        let status = Command::new(&b.executable).current_dir(&b.dir).env("CARGO_MANIFEST_DIR", &b.dir).status().await;
        let ok = match status {
            Ok(s) => s.success(),
            Err(e) => {
                eprintln!("dracheck: could not run {}: {e}", b.executable.display());
                false
            }
        };
        ran.push(Ran { shown: b.shown.clone(), took: started.elapsed(), ok });
    }
    ran
}

/// The doc tests, which `--no-run` does not build.
async fn doc_tests(cargo: &str, root: &std::path::Path) -> Ran {
    eprintln!("==> doc tests");
    let started = Instant::now();
    let status = Command::new(cargo).args(["test", "--workspace", "--doc"]).current_dir(root).status().await;
    Ran { shown: "doc tests".into(), took: started.elapsed(), ok: status.is_ok_and(|s| s.success()) }
}
