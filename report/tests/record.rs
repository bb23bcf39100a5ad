//! The compatibility record in `reports/record/`: every result there loads, the table in
//! `reports/README.md` is the one those results give (so the README cannot claim a run that
//! is not kept), and the record's matrix is the one `cargo xtask matrix` makes of them.

use std::path::Path;

use dracheck_results::{RunResult, Verdict};

const RECORD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../reports/record");
const README: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../reports/README.md");

/// One row of the README's table: driver, its version, Kubernetes, what held.
fn row(r: &RunResult) -> String {
    let count = |v: Verdict| r.all().filter(|g| g.verdict == v).count();
    let mut failed: Vec<&str> = r.all().filter(|g| g.verdict == Verdict::Fail).map(|g| g.id.as_str()).collect();
    failed.sort();
    failed.dedup();
    let failed = if failed.is_empty() { String::new() } else { format!("; failed: `{}`", failed.join("`, `")) };
    format!(
        "| `{}` | {} | {} | {} passed, {} failed, {} skipped{failed} |",
        r.driver.name,
        r.driver.version,
        r.cluster.kubernetes_version,
        count(Verdict::Pass),
        count(Verdict::Fail),
        count(Verdict::Skip)
    )
}

#[test]
fn the_readme_table_is_the_one_the_kept_results_give() {
    let runs = dracheck_report::load::load_dir(Path::new(RECORD)).expect("the record's results load");
    assert!(!runs.is_empty(), "reports/record/ keeps at least one result");
    let mut rows: Vec<String> = runs.iter().map(|(_, r)| row(r)).collect();
    rows.sort();
    let readme = std::fs::read_to_string(README).unwrap();
    let table: Vec<String> = readme.lines().filter(|l| l.starts_with("| `")).map(str::to_string).collect::<Vec<_>>();
    let mut table_sorted = table.clone();
    table_sorted.sort();
    assert_eq!(
        table_sorted,
        rows,
        "reports/README.md's table must be exactly the record's results; its rows should be:\n{}",
        rows.join("\n")
    );
}

#[test]
fn the_record_matrix_is_current() {
    let runs = dracheck_report::load::load_dir(Path::new(RECORD)).expect("the record's results load");
    let matrix = dracheck_report::matrix::build(&runs, Path::new(RECORD));
    let kept = std::fs::read_to_string(Path::new(RECORD).join("matrix.md")).expect("reports/record/matrix.md");
    assert_eq!(kept, matrix.markdown(), "regenerate it with `cargo xtask matrix reports/record`");
}
