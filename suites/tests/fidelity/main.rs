//! Verdict fidelity: the whole default suite against the good mock driver passes every
//! guarantee, three times in a row with identical verdicts; against the mock with each fault
//! switch, exactly the guarantees that `dracheck_suites::fidelity::FAULTS` says the fault
//! breaks fail, and every other guarantee passes. Runs share the machine as far as its idle CPU
//! allows (`pool`); a run that disagrees is run once more with fewer beside it, and the
//! verdict is that second run's.
//!
//! `DRACHECK_FIDELITY_ONLY=fault1,fault2` limits the run to those faults (their `--fault`
//! switches as the table spells them, or just their names before `=`, which picks every row
//! of that name) and one run of the good mock, on both node kinds; unset, everything runs.
//!
//! The same table on real nodes (`real_nodes`) is a test of this binary, not one of its own:
//! both are mostly waiting on timeouts, so they run side by side on libtest's threads instead of one after
//! the other.

mod common;
mod pool;
mod real_nodes;

use std::time::Duration;

use dracheck_clusters::local::NodeKind;
use dracheck_suites::fidelity::FAULTS;
use pool::Admission;

/// Runs whose clusters live side by side: as many as keep a third of the machine's CPU idle
/// (most of a faulty run is waiting on timeouts), twelve at most. `DRACHECK_FIDELITY_RUNS`
/// sets the most (measurements of the machine's load).
fn admission() -> Admission {
    let cap =
        std::env::var("DRACHECK_FIDELITY_RUNS").ok().and_then(|v| v.parse().ok()).filter(|n| *n > 0).unwrap_or(12);
    Admission { cap, min_idle: 0.33, gap: Duration::from_secs(4) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_good_mock_passes_everything_and_each_fault_breaks_exactly_its_guarantees() {
    let cases = common::selected().unwrap_or_else(|e| panic!("{e}"));
    let good_runs = if cases.len() == FAULTS.len() { 3 } else { 1 };
    // The whole table on emulated nodes, which `cargo xtask test` selects (DRACHECK_NODE_KIND);
    // `real_nodes` checks the faults whose verdict a real node could change.
    let kind = std::env::var("DRACHECK_NODE_KIND").ok().and_then(|k| k.parse().ok()).unwrap_or(NodeKind::Emulated);
    common::check_table(cases, good_runs, admission(), kind).await;
}

#[test]
fn the_mock_readme_shows_the_fidelity_table() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../drivers/mock/README.md")).unwrap();
    let table = dracheck_suites::fidelity::markdown_table();
    assert!(
        readme.contains(&table),
        "drivers/mock/README.md must contain the table generated from fidelity::FAULTS:\n{table}"
    );
    let undriven = dracheck_suites::fidelity::not_driver_properties_table();
    assert!(
        readme.contains(&undriven),
        "drivers/mock/README.md must contain the table generated from fidelity::NOT_DRIVER_PROPERTIES:\n{undriven}"
    );
}
