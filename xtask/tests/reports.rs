//! `report`, `matrix` and `compare` as a user meets them: on results of real local runs, and
//! on files that are not results.

mod common;

use common::{text, xtask};
use std::path::{Path, PathBuf};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn default_inventory() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../drivers/mock/inventory/default.yaml")
}

/// A compatible-claim run of the inference profile on a local cluster with `inventory`; the
/// JSON result it wrote.
fn local_run(inventory: &Path, out: &Path) -> PathBuf {
    let run = xtask(&[
        "conformance",
        "--profile",
        "standard-inference",
        "--only",
        "claim.compatible.*",
        "--nodes",
        "1",
        "--inventory",
        s(inventory),
        "--out",
        s(out),
    ]);
    assert!(run.status.success(), "{}", text(&run));
    let jsons: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    assert_eq!(jsons.len(), 1, "{jsons:?}");
    jsons[0].clone()
}

/// Two clusters that both satisfy the inference profile, on different hardware: cluster B's
/// L4s have twice the memory and another driver version. The gate must say so.
#[test]
fn compare_two_local_runs_with_different_inventories() {
    let tmp = tempfile::tempdir().unwrap();
    let inventory_b = tmp.path().join("bigger-l4.yaml");
    let text_a = std::fs::read_to_string(default_inventory()).unwrap();
    std::fs::write(&inventory_b, text_a.replace("24Gi", "48Gi").replace("550.54.15", "560.35.3")).unwrap();
    let a = local_run(&default_inventory(), &tmp.path().join("a"));
    let b = local_run(&inventory_b, &tmp.path().join("b"));

    for json in [&a, &b] {
        for f in dracheck_report::Format::ALL {
            assert!(f.beside(json).is_file(), "the run renders {f:?} next to {}", json.display());
        }
    }

    let same = xtask(&["compare", s(&a), s(&a)]);
    assert_eq!(same.status.code(), Some(0), "{}", text(&same));
    assert!(text(&same).contains("Gate: PASS"));

    let gate = xtask(&["compare", s(&a), s(&b)]);
    let out = text(&gate);
    assert_eq!(gate.status.code(), Some(1), "{out}");
    assert!(out.contains("standard-inference capacity memory: A {24Gi} B {48Gi}"), "{out}");
    assert!(out.contains("attribute driverVersion"), "{out}");
    assert!(!out.contains("Regressions"), "both clusters meet the profile: {out}");

    let allowed = xtask(&["compare", s(&a), s(&b), "--allow-hardware", "standard-*"]);
    assert_eq!(allowed.status.code(), Some(0), "{}", text(&allowed));

    // Both runs in one folder: a matrix with one column per run (same driver version, so
    // the Kubernetes version and cluster match and the later run stands for the column).
    let all = tmp.path().join("all");
    std::fs::create_dir_all(&all).unwrap();
    for json in [&a, &b] {
        std::fs::copy(json, all.join(json.file_name().unwrap())).unwrap();
    }
    let m = xtask(&["matrix", s(&all)]);
    assert!(m.status.success(), "{}", text(&m));
    let md = std::fs::read_to_string(all.join("matrix.md")).unwrap();
    assert!(md.contains("standard-inference/claim.compatible.allocated"), "{md}");
    assert!(all.join("matrix.html").is_file());
}

#[test]
fn report_renders_each_format_to_stdout_or_a_file() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/tests/fixtures/mock-run.json");
    let junit = xtask(&["report", s(&fixture), "--format", "junit"]);
    assert!(junit.status.success(), "{}", text(&junit));
    assert!(String::from_utf8_lossy(&junit.stdout).starts_with("<?xml"));
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("run.html");
    let html = xtask(&["report", s(&fixture), "--format", "html", "--out", s(&page)]);
    assert!(html.status.success(), "{}", text(&html));
    assert!(std::fs::read_to_string(&page).unwrap().starts_with("<!DOCTYPE html>"));
}

#[test]
fn files_that_are_not_results_are_refused_with_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let not_json = tmp.path().join("notes.json");
    std::fs::write(&not_json, "hello").unwrap();
    let newer = tmp.path().join("newer.json");
    std::fs::write(&newer, r#"{"schema_version": 7, "dracheck_version": "3.0.0"}"#).unwrap();
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();

    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["report", s(&not_json)], "is not a dracheck result"),
        (vec!["report", s(&newer), "--format", "md"], "newer than this dracheck reads"),
        (vec!["report", s(&not_json), "--format", "pdf"], "unknown --format"),
        (vec!["report", "/no/such/result.json"], "cannot read"),
        (vec!["compare", s(&not_json), s(&newer)], "is not a dracheck result"),
        (vec!["matrix", s(&empty)], "holds no dracheck results"),
        (vec!["matrix", s(tmp.path())], "newer.json has result schema version 7"),
    ];
    for (args, want) in cases {
        let out = xtask(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(want), "{args:?}: {}", text(&out));
    }
}
