//! `cargo xtask test` without arguments: the workspace's tests built once, then run in two
//! phases instead of `cargo test`'s one binary after the other. The fidelity table's tiered
//! check (every row targeted, a rotating slice of rows against the whole suite; see
//! `dracheck_suites::fidelity::tiers`) is the longest and mostly waits on timeouts with the
//! machine's CPU half idle, so every other test binary runs beside it; before that, the
//! binaries that compare the machine's own state run alone, since they compare it only while
//! no other run's nodes are up. Every test runs, as `cargo test --workspace` runs it (its
//! package's dir as the working dir), and a failing binary does not stop the others: the
//! summary names each binary with its time and outcome.
//!
//! `cargo xtask test --quick` is the tier without clusters: fmt, clippy, the unit tests and the
//! integration tests in [`QUICK`].

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::process::Command;

/// Integration tests that compare what only the machine has (kernel settings, host dirs), which
/// they skip while another run's nodes are up: run first, alone.
const ALONE: &[&str] = &["real_nodes"];
/// The long one, which everything else runs beside.
const BESIDE: &[&str] = &["fidelity"];
/// The integration tests of the quick tier: those that start no cluster and take a second or
/// less (the architecture, the profiles and their schema, reports, the fault table's docs).
const QUICK: &[&str] = &[
    "architecture",
    "profiles",
    "render",
    "record",
    "matrix_compare",
    "kind_config",
    "provider_args",
    "container_clusters",
    "compare",
    "bad_input",
    "roundtrip",
    "explain_cli",
];
/// The tests of the fidelity binary the quick tier runs: those that start no cluster.
const QUICK_FIDELITY: &str = "the_mock_readme_shows_the_fidelity_table";

/// One test executable of the workspace.
#[derive(Debug, Clone)]
pub(crate) struct TestBinary {
    /// `<package dir>: <kind> <target>`, for people.
    shown: String,
    target: String,
    kind: String,
    executable: PathBuf,
    dir: PathBuf,
}

/// How one binary (or the doc tests) went.
pub(crate) struct Ran {
    shown: String,
    took: Duration,
    pub(crate) ok: bool,
    /// The panic messages of its failed tests, repeated under the summary: a log that is cut
    /// in the middle (a CI system's excerpt) still shows why.
    panics: Vec<String>,
}

/// Builds every test binary, runs them in the two phases and prints the summary; the exit
/// code is 0 only if every binary passed.
pub async fn run(cargo: &str, root: &std::path::Path) -> u8 {
    let binaries = match build(cargo, root, &[]).await {
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

    let mut ran = sequence(&alone, "alone", &[]).await;
    let rest_then_doc = async {
        let lanes = lanes(rest, lane_count());
        let runs = lanes.iter().map(|lane| sequence(lane, "beside the fidelity table", &[]));
        let mut ran: Vec<Ran> = futures::future::join_all(runs).await.into_iter().flatten().collect();
        ran.push(doc_tests(cargo, root).await);
        ran
    };
    let tiered = crate::fidelity::env(root, crate::fidelity::Tier::Tiered);
    let (long, others) = tokio::join!(sequence(&beside, "beside the other tests", &tiered), rest_then_doc);
    ran.extend(long);
    ran.extend(others);
    summary(&ran, started)
}

/// Lanes of binaries that run side by side beside the fidelity table: one after the other they
/// took 24 min, most of it waiting (on helm, on a Job, on timeouts), longer than the table.
/// `DRACHECK_TEST_LANES=N` sets how many (default 3).
fn lane_count() -> usize {
    std::env::var("DRACHECK_TEST_LANES").ok().and_then(|v| v.parse().ok()).filter(|n| *n > 0).unwrap_or(3)
}

/// Seconds the long integration tests took in a whole `cargo xtask test` on two cores (the
/// others take a few seconds): what [`lanes`] balances.
const TOOK: &[(&str, u32)] = &[
    ("install", 263),
    ("example_driver", 219),
    ("nvidia_installed", 213),
    ("in_cluster", 208),
    ("emulated_nodes", 122),
    ("cli", 82),
    ("dist", 79),
    ("faults", 70),
    ("plugin", 49),
    ("installed_driver_restart", 44),
    ("helm_release", 43),
    ("leftovers", 24),
    ("local_cluster", 18),
    ("reports", 16),
];

/// `binaries` dealt into `n` lanes, longest first, each to the lane with the least time so far.
fn lanes(mut binaries: Vec<TestBinary>, n: usize) -> Vec<Vec<TestBinary>> {
    let took = |b: &TestBinary| TOOK.iter().find(|(t, _)| b.kind == "test" && *t == b.target).map_or(2, |(_, s)| *s);
    binaries.sort_by_key(|b| std::cmp::Reverse(took(b)));
    let mut lanes: Vec<(u32, Vec<TestBinary>)> = (0..n.max(1)).map(|_| (0, Vec::new())).collect();
    for b in binaries {
        let lane = lanes.iter_mut().min_by_key(|(total, _)| *total).expect("one lane at least");
        lane.0 += took(&b);
        lane.1.push(b);
    }
    lanes.into_iter().map(|(_, l)| l).filter(|l| !l.is_empty()).collect()
}

/// The quick tier: fmt and clippy, then every unit test and the [`QUICK`] integration tests,
/// one after the other. No cluster starts.
pub async fn quick(cargo: &str, root: &std::path::Path) -> u8 {
    let started = Instant::now();
    let mut ran = Vec::new();
    for (shown, args) in [
        ("cargo fmt --check", &["fmt", "--all", "--", "--check"][..]),
        ("cargo clippy", &["clippy", "--workspace", "--all-targets", "--quiet", "--", "-D", "warnings"][..]),
    ] {
        eprintln!("==> {shown}");
        let t = Instant::now();
        let status = crate::cargo_command(cargo).args(args).current_dir(root).status().await;
        ran.push(Ran { shown: shown.into(), took: t.elapsed(), ok: status.is_ok_and(|s| s.success()), panics: vec![] });
    }
    let binaries = match build(cargo, root, &[]).await {
        Ok(b) => b,
        Err(e) => {
            eprintln!("dracheck: {e}");
            return crate::exit::FAILED;
        }
    };
    let (fidelity, quick): (Vec<TestBinary>, Vec<TestBinary>) = binaries
        .into_iter()
        .filter(|b| b.kind != "test" || QUICK.contains(&b.target.as_str()) || BESIDE.contains(&b.target.as_str()))
        .partition(|b| b.kind == "test" && BESIDE.contains(&b.target.as_str()));
    ran.extend(sequence(&quick, "quick", &[]).await);
    for b in &fidelity {
        ran.extend(sequence_with_args(std::slice::from_ref(b), "quick", &[], &[QUICK_FIDELITY, "--exact"]).await);
    }
    summary(&ran, started)
}

/// Prints each binary's time and outcome and why the failed ones failed; 0 only if all passed.
fn summary(ran: &[Ran], started: Instant) -> u8 {
    eprintln!("\n==> test binaries ({:.1} min in all):", started.elapsed().as_secs_f64() / 60.0);
    for r in ran {
        eprintln!("  {} {:>7.1} s  {}", if r.ok { "ok  " } else { "FAIL" }, r.took.as_secs_f64(), r.shown);
    }
    for r in ran.iter().filter(|r| !r.ok && !r.panics.is_empty()) {
        eprintln!("\n==> why {} failed:", r.shown);
        for p in &r.panics {
            eprintln!("{p}");
        }
    }
    let failed: Vec<&str> = ran.iter().filter(|r| !r.ok).map(|r| r.shown.as_str()).collect();
    if failed.is_empty() {
        crate::exit::OK
    } else {
        eprintln!("==> {} failed: {}", failed.len(), failed.join(", "));
        crate::exit::FAILED
    }
}

/// `cargo test --no-run` (the whole workspace, or what `select` names instead), read from its
/// JSON messages: every test executable.
pub(crate) async fn build(cargo: &str, root: &std::path::Path, select: &[&str]) -> Result<Vec<TestBinary>, String> {
    eprintln!("==> building the tests");
    let select: &[&str] = if select.is_empty() { &["--workspace"] } else { select };
    let out = crate::cargo_command(cargo)
        .args(["test", "--no-run", "--message-format=json-render-diagnostics"])
        .args(select)
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

/// Runs `binaries` one after the other, with `env` added to their environment.
async fn sequence(binaries: &[TestBinary], how: &str, env: &[(String, String)]) -> Vec<Ran> {
    sequence_with_args(binaries, how, env, &[]).await
}

/// [`sequence`], with `args` given to each binary (libtest's filters).
pub(crate) async fn sequence_with_args(
    binaries: &[TestBinary],
    how: &str,
    env: &[(String, String)],
    args: &[&str],
) -> Vec<Ran> {
    let mut ran = Vec::new();
    for b in binaries {
        eprintln!("==> {} ({how})", b.shown);
        let started = Instant::now();
        let mut cmd = Command::new(&b.executable);
        cmd.current_dir(&b.dir).env("CARGO_MANIFEST_DIR", &b.dir).envs(env.iter().cloned()).args(args);
        let (ok, panics) = match run_passing_through(cmd).await {
            Ok((status, panics)) => (status.success(), panics),
            Err(e) => {
                eprintln!("dracheck: could not run {}: {e}", b.executable.display());
                (false, Vec::new())
            }
        };
        ran.push(Ran { shown: b.shown.clone(), took: started.elapsed(), ok, panics });
    }
    ran
}

/// The doc tests, which `--no-run` does not build.
async fn doc_tests(cargo: &str, root: &std::path::Path) -> Ran {
    eprintln!("==> doc tests");
    let started = Instant::now();
    let status = crate::cargo_command(cargo).args(["test", "--workspace", "--doc"]).current_dir(root).status().await;
    Ran {
        shown: "doc tests".into(),
        took: started.elapsed(),
        ok: status.is_ok_and(|s| s.success()),
        panics: Vec::new(),
    }
}

/// Runs `cmd` with its stdout and stderr passed on line by line as they come, and returns its
/// status with the panic messages it printed.
async fn run_passing_through(mut cmd: Command) -> std::io::Result<(std::process::ExitStatus, Vec<String>)> {
    let mut child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn()?;
    let out = pass_lines(child.stdout.take(), tokio::io::stdout());
    let err = pass_lines(child.stderr.take(), tokio::io::stderr());
    let (out, err, status) = tokio::join!(out, err, child.wait());
    Ok((status?, out.into_messages().into_iter().chain(err.into_messages()).collect()))
}

/// Copies the lines of `from` to `to` and reads the panic messages among them.
async fn pass_lines(
    from: Option<impl tokio::io::AsyncRead + Unpin>,
    mut to: impl tokio::io::AsyncWrite + Unpin,
) -> Panics {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    let mut panics = Panics::default();
    let Some(from) = from else { return panics };
    let mut lines = tokio::io::BufReader::new(from).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        // A closed terminal is no reason to stop the tests: the line is dropped.
        let _ = to.write_all(format!("{line}\n").as_bytes()).await;
        panics.read(&line);
    }
    panics
}

/// Collects panic messages from a test binary's output: from libtest's `thread '…' panicked at`
/// line to the backtrace or the next section, at most [`Panics::LINES`] lines each.
#[derive(Default)]
struct Panics {
    current: Option<Vec<String>>,
    done: Vec<String>,
}

impl Panics {
    const LINES: usize = 40;
    const MOST: usize = 5;

    fn read(&mut self, line: &str) {
        if line.starts_with("thread '") && line.contains("' panicked at ") {
            self.finish();
            if self.done.len() < Self::MOST {
                self.current = Some(vec![format!("  {line}")]);
            }
            return;
        }
        let Some(current) = &mut self.current else { return };
        let ends = ["stack backtrace:", "note: run with", "---- ", "failures:", "test result:"];
        if ends.iter().any(|e| line.starts_with(e)) {
            self.finish();
        } else if current.len() < Self::LINES {
            current.push(format!("  {line}"));
        }
    }

    /// The messages, the last one ended by the end of the output.
    fn into_messages(mut self) -> Vec<String> {
        self.finish();
        self.done
    }

    fn finish(&mut self) {
        if let Some(lines) = self.current.take() {
            self.done.push(lines.join("\n").trim_end().to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Panics, TestBinary, lanes, run_passing_through};

    #[test]
    fn the_long_binaries_are_dealt_over_the_lanes_longest_first() {
        let bin = |target: &str| TestBinary {
            shown: target.into(),
            target: target.into(),
            kind: "test".into(),
            executable: target.into(),
            dir: ".".into(),
        };
        let all = ["reports", "install", "short", "example_driver", "nvidia_installed", "in_cluster"].map(bin);
        let dealt = lanes(all.to_vec(), 3);
        let names: Vec<Vec<&str>> = dealt.iter().map(|l| l.iter().map(|b| b.target.as_str()).collect()).collect();
        assert_eq!(
            names,
            [vec!["install"], vec!["example_driver", "reports", "short"], vec!["nvidia_installed", "in_cluster"]]
        );
        assert_eq!(lanes(all.to_vec(), 1).len(), 1);
        assert_eq!(lanes(vec![bin("one")], 3).len(), 1, "no empty lanes");
    }

    #[tokio::test]
    async fn a_binary_s_output_passes_through_and_its_panics_are_kept() {
        let mut cmd = tokio::process::Command::new("sh");
        cmd.args(["-c", "echo running; echo \"thread 'x' panicked at y.rs:1:1:\" >&2; echo boom >&2; exit 101"]);
        let (status, panics) = run_passing_through(cmd).await.expect("sh runs");
        assert_eq!(status.code(), Some(101));
        assert_eq!(panics, ["  thread 'x' panicked at y.rs:1:1:\n  boom"]);
    }

    #[test]
    fn a_panic_message_is_kept_up_to_the_backtrace() {
        let mut p = Panics::default();
        for line in [
            "running 1 test",
            "---- it stdout ----",
            "[x] progress",
            "thread 'it' panicked at suites/tests/x.rs:3:5:",
            "plugin.a is fail: no socket",
            "",
            "plugin.b is skip: why",
            "stack backtrace:",
            "   0: std::panicking",
            "thread 'other' panicked at a.rs:1:1:",
            "cut short",
        ] {
            p.read(line);
        }
        let messages = p.into_messages();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert_eq!(
            messages[0],
            "  thread 'it' panicked at suites/tests/x.rs:3:5:\n  plugin.a is fail: no socket\n  \n  plugin.b is skip: why"
        );
        assert_eq!(messages[1], "  thread 'other' panicked at a.rs:1:1:\n  cut short");
    }
}
