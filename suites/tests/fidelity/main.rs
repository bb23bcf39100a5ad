//! Verdict fidelity: the default suite against the good mock driver passes every guarantee,
//! with identical verdicts run after run; against the mock with each fault switch, exactly the
//! guarantees that `dracheck_suites::fidelity::FAULTS` says the fault breaks fail. Which runs
//! check that is the tier's (`dracheck_suites::fidelity::tiers`):
//!
//! - `DRACHECK_FIDELITY=tiered` (the default; `cargo xtask test`): the good mock twice on
//!   emulated nodes and once on real ones, every row *targeted* (its fault with only the
//!   scenarios of the guarantees it names, which must fail or be skipped as it says), and a
//!   rotating slice of `DRACHECK_FIDELITY_CROSS_CHECK` rows (default 4) against the whole suite,
//!   chosen by `DRACHECK_FIDELITY_SEED` (the commit's number; `cargo xtask test` sets it).
//! - `DRACHECK_FIDELITY=full` (`cargo xtask fidelity --full`): every row against the whole suite
//!   on the node kinds it names, the good mock three times; with `DRACHECK_FIDELITY_RECORD=DIR`
//!   the runs are merged into the record there.
//!
//! `DRACHECK_FIDELITY_ONLY=fault1,fault2` limits either tier to those faults (their `--fault`
//! switches as the table spells them, or just their names before `=`, which picks every row of
//! that name) and one run of the good mock; `DRACHECK_FIDELITY_NODE_KIND=emulated|real` to one node kind.
//! Runs share the machine as far as its idle CPU allows (`pool`), real-node runs first.

mod common;
mod pool;
mod real_nodes;

use std::time::Duration;

use dracheck_clusters::local::NodeKind;
use dracheck_suites::fidelity::tiers::{self, Job, Scope, Tier};
use dracheck_suites::fidelity::{FAULTS, FaultCase};
use dracheck_suites::profile::ids::{PLUGIN_PREPARE_IDEMPOTENT, PLUGIN_PREPARE_KEYED_BY_UID};
use pool::Admission;

/// Emulated runs whose clusters live side by side: as many as keep 35 % of the machine's CPU
/// idle (much of a faulty run is waiting on timeouts), ten at most. Twelve at a third
/// overloaded two cores once runs no longer wait one scenario after the other (load 15, and
/// 17 of 58 faults failed a further check for want of CPU and ran again). The real-node runs'
/// bound is their own (`real_nodes::ADMISSION`). `DRACHECK_FIDELITY_RUNS` sets the most.
fn admission(kind: NodeKind) -> Admission {
    if kind == NodeKind::Real {
        return real_nodes::ADMISSION;
    }
    let cap = env_number("DRACHECK_FIDELITY_RUNS").filter(|n| *n > 0).unwrap_or(10) as usize;
    Admission { cap, min_idle: 0.35, gap: Duration::from_secs(4) }
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// The tier the environment asks for.
fn tier() -> Tier {
    match std::env::var("DRACHECK_FIDELITY").as_deref() {
        Ok("full") => Tier::Full,
        Ok("tiered") | Err(_) => Tier::Tiered {
            cross_check: env_number("DRACHECK_FIDELITY_CROSS_CHECK").unwrap_or(4) as usize,
            seed: env_number("DRACHECK_FIDELITY_SEED").unwrap_or(0),
        },
        Ok(other) => panic!("DRACHECK_FIDELITY={other:?}: use tiered or full"),
    }
}

/// The node kinds to run on: both, or the one `DRACHECK_FIDELITY_NODE_KIND` names (not
/// `DRACHECK_NODE_KIND`, which `cargo xtask test` sets to `emulated` for the other tests); real nodes only
/// where the machine can run them (else the log says why).
fn kinds() -> Vec<NodeKind> {
    let only: Option<NodeKind> =
        std::env::var("DRACHECK_FIDELITY_NODE_KIND").ok().map(|k| k.parse().unwrap_or_else(|e| panic!("{e}")));
    let mut kinds: Vec<NodeKind> =
        [NodeKind::Emulated, NodeKind::Real].into_iter().filter(|k| only.is_none_or(|o| o == *k)).collect();
    if kinds.contains(&NodeKind::Real) && !real_nodes::supported() {
        kinds.retain(|k| *k != NodeKind::Real);
    }
    kinds
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_good_mock_passes_everything_and_each_fault_breaks_exactly_its_guarantees() {
    let cases = common::selected().unwrap_or_else(|e| panic!("{e}"));
    let tier = tier();
    let every = cases.len() == FAULTS.len();
    let good_runs = match tier {
        Tier::Full if every => 3,
        Tier::Tiered { .. } if every => 2,
        _ => 1,
    };
    let jobs = tiers::plan(tier, &cases, &kinds(), good_runs);
    let record = match (tier, std::env::var_os("DRACHECK_FIDELITY_RECORD")) {
        (Tier::Full, Some(dir)) => Some(common::RecordTo {
            dir: dir.into(),
            commit: std::env::var("DRACHECK_COMMIT").unwrap_or_else(|_| "unknown".into()),
        }),
        (_, Some(_)) => {
            panic!("DRACHECK_FIDELITY_RECORD is for DRACHECK_FIDELITY=full: a record holds whole-suite runs")
        }
        _ => None,
    };
    common::check(jobs, admission, record).await;
}

/// A row that says its fault breaks a guarantee it does not: `non-idempotent-prepare` breaks
/// idempotence, not the keying of prepares by claim UID.
static OVERCLAIMING_ROW: FaultCase = FaultCase {
    fault: "non-idempotent-prepare",
    misbehaviour: "each prepare of the same claim returns new CDI IDs",
    breaks: &[&[PLUGIN_PREPARE_IDEMPOTENT, PLUGIN_PREPARE_KEYED_BY_UID]],
    may_break: &[],
    skips: &[],
};

/// The targeted tier is not a formality: a row naming a guarantee its fault does not break
/// disagrees with the targeted run, and the guarantee it names is the one missed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_naming_a_guarantee_its_fault_does_not_break_fails_the_targeted_tier() {
    let job = Job { kind: NodeKind::Emulated, case: Some(&OVERCLAIMING_ROW), scope: Scope::Targeted };
    let result = common::run_suite(job).await;
    let wrong =
        dracheck_suites::fidelity::mismatch(&OVERCLAIMING_ROW, &result).expect("the overclaiming row disagrees");
    assert!(wrong.starts_with(&format!("expected to fail but did not: [{PLUGIN_PREPARE_KEYED_BY_UID:?}]")), "{wrong}");
    // And only the row's guarantees were checked: the targeted run is the row, not the suite.
    let checked: Vec<&str> = result.all().map(|g| g.id.as_str()).collect();
    assert!(
        !checked.is_empty()
            && checked.iter().all(|id| [PLUGIN_PREPARE_IDEMPOTENT, PLUGIN_PREPARE_KEYED_BY_UID].contains(id)),
        "{checked:?}"
    );
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
