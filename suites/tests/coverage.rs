//! The suite's README shows which upstream DRA tests the guarantees answer for exactly as
//! `dracheck_suites::coverage` declares them beside the scenarios, counts included. No
//! cluster needed.

#[test]
fn the_readme_shows_the_generated_coverage() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let generated = dracheck_suites::coverage::markdown();
    assert!(
        readme.contains(&generated),
        "suites/README.md must contain the coverage generated from dracheck_suites::coverage (the UPSTREAM rows beside \
         the scenarios and coverage/missing.rs): replace its tables and counts, from the first group's heading to the \
         end of the counts table, with:\n{generated}"
    );
}

/// Each row points at the line that defines its upstream test (an `It`, an `Entry`, a
/// subtest, a test function or the context that runs one), read where the Kubernetes module is
/// in the Go module cache (every build of the control plane puts it there).
#[test]
fn every_row_points_at_its_upstream_definition() {
    let Some(home) = std::env::var_os("HOME") else { return };
    let module = std::path::Path::new(&home).join("go/pkg/mod/k8s.io/kubernetes@v1.37.2");
    if !module.is_dir() {
        eprintln!("skipped: {} is not in the Go module cache", module.display());
        return;
    }
    const DEFINITIONS: [&str; 8] =
        ["It(", "Entry(", "runSubTest(", "func test", "Context(", "DescribeTable(", "tCtx.Run(", "ConformanceIt("];
    let mut wrong = Vec::new();
    for row in dracheck_suites::coverage::rows() {
        let file = module.join(row.at.file);
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let line = text.lines().nth(row.at.line as usize - 1).unwrap_or("");
        if !DEFINITIONS.iter().any(|d| line.contains(d)) {
            wrong.push(format!("{} ({}) at {}: {:?}", row.id, row.test, row.at, line.trim()));
        }
    }
    assert!(wrong.is_empty(), "rows that do not point at a test's definition:\n{}", wrong.join("\n"));
}
