//! The matrix of many runs and the migration gate, on variations of a fixed result.

use std::path::{Path, PathBuf};

use dracheck_report::compare::{self, Options};
use dracheck_report::{load, matrix};
use dracheck_results::{RunResult, Verdict};

fn fixture() -> RunResult {
    load::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mock-run.json")).unwrap()
}

/// The fixture as run by `version` on Kubernetes `k8s`, with `verdict` for claim.compatible.allocated.
fn run(version: &str, k8s: &str, started: &str, verdict: Verdict) -> RunResult {
    let mut r = fixture();
    r.driver.version = version.into();
    r.cluster.kubernetes_version = k8s.into();
    r.started_at = started.into();
    r.profiles[0].guarantees[0].verdict = verdict;
    r
}

fn runs() -> Vec<(PathBuf, RunResult)> {
    let dir = PathBuf::from("/r");
    vec![
        (dir.join("c.json"), run("0.10.0", "v1.37.2", "2026-12-03T00:00:00Z", Verdict::Fail)),
        (dir.join("a.json"), run("0.9.0", "v1.37.2", "2026-12-01T00:00:00Z", Verdict::Pass)),
        (dir.join("b.json"), run("0.9.0", "v1.36.5", "2026-12-01T00:00:00Z", Verdict::Pass)),
        // A re-run of 0.9.0 on v1.37.2, older than `a`: `a` stands for the column.
        (dir.join("old.json"), run("0.9.0", "v1.37.2", "2026-11-01T00:00:00Z", Verdict::Fail)),
    ]
}

#[test]
fn columns_are_ordered_by_version_and_the_latest_run_stands_for_a_column() {
    let m = matrix::build(&runs(), Path::new("/r"));
    let labels: Vec<String> = m.columns.iter().map(|c| format!("{} {}", c.driver_version, c.kubernetes)).collect();
    assert_eq!(labels, ["0.9.0 v1.36.5", "0.9.0 v1.37.2", "0.10.0 v1.37.2"]);
    assert_eq!(m.columns[1].page, "a.html", "links are relative to the matrix");
    let row = m.rows.iter().find(|r| r.label == "standard-inference/claim.compatible.allocated").unwrap();
    let verdicts: Vec<Verdict> = row.cells.iter().map(|c| c.as_ref().unwrap().0).collect();
    assert_eq!(verdicts, [Verdict::Pass, Verdict::Pass, Verdict::Fail]);
}

#[test]
fn a_guarantee_that_held_on_the_previous_version_and_fails_now_is_a_regression() {
    let m = matrix::build(&runs(), Path::new("/r"));
    assert_eq!(m.regressions.len(), 1, "{:?}", m.regressions);
    let r = &m.regressions[0];
    assert_eq!((r.from.as_str(), r.to.as_str(), r.kubernetes.as_str()), ("0.9.0", "0.10.0", "v1.37.2"));
    assert_eq!(r.rows, ["standard-inference/claim.compatible.allocated"]);
    // Already failing before is not a regression.
    assert!(!r.rows.iter().any(|l| l.ends_with("claim.impossible.capacity")));
    let md = m.markdown();
    assert!(md.contains("**gpu.mock.dracheck.io 0.9.0 → 0.10.0**"), "{md}");
    assert!(m.html().contains("<tr class=\"regressed\">"));
}

#[test]
fn a_missing_guarantee_is_shown_as_not_checked() {
    let mut rs = runs();
    rs[0].1.profiles[0].guarantees.pop();
    let m = matrix::build(&rs, Path::new("/r"));
    let row = m.rows.iter().find(|r| r.label == "standard-inference/isolation.shared").unwrap();
    assert!(row.cells[2].is_none());
    assert!(m.html().contains("not checked in this run"));
}

#[test]
fn matrix_snapshots() {
    let m = matrix::build(&runs(), Path::new("/r"));
    insta::with_settings!({ snapshot_path => "../../snapshots/report", prepend_module_to_snapshot => false }, {
        insta::assert_snapshot!("matrix-md", m.markdown());
        insta::assert_snapshot!("matrix-html", m.html());
    });
}

#[test]
fn identical_runs_pass_the_gate() {
    let c = compare::compare(&fixture(), &fixture(), &Options::default());
    assert!(c.gate_passes(), "{c:?}");
    assert!(c.regressions.is_empty() && c.hardware.is_empty());
    assert_eq!(c.still_failing.len(), 2);
}

#[test]
fn regressions_new_passes_changed_skips_and_hardware_are_told_apart() {
    let a = fixture();
    let mut b = fixture();
    b.profiles[0].guarantees[0].verdict = Verdict::Fail; // held on A
    b.profiles[0].guarantees[1].verdict = Verdict::Pass; // failed on A
    b.profiles[0].guarantees[2].reason = "another reason".into(); // skipped on both
    b.driver_guarantees.remove(0); // held on A, not checked on B
    b.profiles[0].allocated_devices[0].attributes.insert("model".into(), "l4".into());
    b.profiles[0].allocated_devices[0].attributes.insert("index".into(), "7".into());
    b.profiles[0].allocated_devices[0].device = "gpu-7".into();

    let c = compare::compare(&a, &b, &Options::default());
    let labels = |v: &[compare::Change]| v.iter().map(|c| c.label.clone()).collect::<Vec<_>>();
    assert_eq!(
        labels(&c.regressions),
        ["driver/plugin.registration.info", "standard-inference/claim.compatible.allocated"]
    );
    assert_eq!(labels(&c.new_passes), ["standard-inference/claim.impossible.capacity"]);
    assert_eq!(labels(&c.changed_skips), ["standard-inference/isolation.shared"]);
    let hw: Vec<&str> = c.hardware.iter().map(|h| h.what.as_str()).collect();
    assert_eq!(hw, ["attribute model"], "an index or device name is identity, not hardware");
    assert!(!c.gate_passes());
    let text = compare::render(&a, &b, &c);
    assert!(text.contains("A {a100} B {l4}") && text.contains("Gate: FAIL"), "{text}");
    // The same for tools: the gate, and each list with both sides.
    let json = compare::json(&a, &b, &c);
    assert_eq!(json["gatePasses"], serde_json::json!(false));
    assert_eq!(json["regressions"][0]["label"], "driver/plugin.registration.info");
    assert_eq!(json["regressions"][0]["a"]["verdict"], "pass");
    assert_eq!(json["regressions"][0]["b"], serde_json::Value::Null, "not checked on B");
    assert_eq!(json["hardware"][0]["a"], serde_json::json!(["a100"]));
    assert_eq!(json["hardware"][0]["b"], serde_json::json!(["l4"]));

    let allowed = Options {
        allow: vec!["plugin.registration.*".into(), "standard-inference/claim.compatible.*".into()],
        allow_hardware: vec!["standard-*".into()],
    };
    let c = compare::compare(&a, &b, &allowed);
    assert!(c.gate_passes(), "every difference allowed: {c:?}");
    let c = compare::compare(&a, &b, &Options { allow: allowed.allow.clone(), allow_hardware: vec![] });
    assert!(!c.gate_passes(), "the hardware difference still gates");
}
