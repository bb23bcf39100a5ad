//! Verdict fidelity: the whole default suite against the good mock driver passes every
//! guarantee, three times in a row with identical verdicts; against the mock with each fault
//! switch, exactly the guarantees that `dracheck_suites::fidelity::FAULTS` says the fault
//! breaks fail, and every other guarantee passes. Runs share the machine four at a time; a run
//! that disagrees is run once more alone, and the verdict is that second run's.
//!
//! `DRACHECK_FIDELITY_ONLY=fault1,fault2` limits the run to those faults (their `--fault`
//! switches as the table spells them, or just their names before `=`, which picks every row
//! of that name) and one run of the good mock; unset, everything runs.

use std::collections::BTreeMap;

use dracheck_clusters::local::Progress;
use dracheck_suites::fidelity::{FAULTS, FaultCase, mismatch};
use dracheck_suites::local_run::{self, LocalRun};
use dracheck_suites::result::{RunResult, Verdict};
use futures::StreamExt as _;

/// Runs whose clusters live side by side; most of a faulty run is waiting on timeouts.
const CONCURRENT_RUNS: usize = 4;

/// The faults `DRACHECK_FIDELITY_ONLY` asks for, all of them when unset; a name the table
/// does not know is an error that lists the known ones.
fn selected() -> Result<Vec<&'static FaultCase>, String> {
    let Some(only) = std::env::var("DRACHECK_FIDELITY_ONLY").ok().filter(|v| !v.trim().is_empty()) else {
        return Ok(FAULTS.iter().collect());
    };
    let name = |f: &str| f.split_once('=').map_or(f, |(n, _)| n).to_string();
    let mut picked = Vec::new();
    for want in only.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let matching: Vec<&'static FaultCase> =
            FAULTS.iter().filter(|c| c.fault == want || name(c.fault) == want).collect();
        if matching.is_empty() {
            let known: Vec<&str> = FAULTS.iter().map(|c| c.fault).collect();
            return Err(format!(
                "DRACHECK_FIDELITY_ONLY names {want:?}, which is not in fidelity::FAULTS; known: {known:?}"
            ));
        }
        for case in matching {
            if !picked.iter().any(|c: &&FaultCase| c.fault == case.fault) {
                picked.push(case);
            }
        }
    }
    Ok(picked)
}

/// Longest first, so that the slow runs do not start last: a fault that keeps workloads from
/// running waits out timeouts in every scenario, so the number of guarantees it may break
/// stands for its length.
fn longest_first(mut cases: Vec<&'static FaultCase>) -> Vec<&'static FaultCase> {
    cases.sort_by_key(|c| std::cmp::Reverse(c.breaks().len() + c.may_break().len()));
    cases
}

async fn run_suite(faults: &[String]) -> RunResult {
    let cfg = LocalRun::default_mock(faults).expect("the default mock run is set up");
    let label = if faults.is_empty() { "good".to_string() } else { faults.join(",") };
    let progress = Progress::to(move |l| eprintln!("[{label}] {l}"));
    local_run::run(cfg, &local_run::run_id(), &progress).await.map_err(|e| e.message).expect("the run starts").result
}

/// `(scope/id) → verdict`, where the scope is `driver` or the profile's name.
fn verdicts(r: &RunResult) -> BTreeMap<String, Verdict> {
    let mut out: BTreeMap<String, Verdict> =
        r.driver_guarantees.iter().map(|g| (format!("driver/{}", g.id), g.verdict)).collect();
    for p in &r.profiles {
        out.extend(p.guarantees.iter().map(|g| (format!("{}/{}", p.name, g.id), g.verdict)));
    }
    out
}

fn failures(r: &RunResult) -> String {
    r.all()
        .filter(|g| g.verdict != Verdict::Pass)
        .map(|g| format!("  {} {}: {}\n", g.verdict, g.id, g.reason))
        .collect()
}

/// The evidence (events, kubelet and driver logs) of the guarantees that did not pass though
/// the case does not break them: all that is left of a flaky run once its cluster is gone.
fn unexpected_evidence(case: Option<&FaultCase>, r: &RunResult) -> String {
    let expected = |id: &str| case.is_some_and(|c| c.breaks().contains(&id) || c.may_break().contains(&id));
    r.all()
        .filter(|g| g.verdict != Verdict::Pass && !expected(&g.id))
        .flat_map(|g| {
            g.evidence.iter().map(move |e| format!("--- {} ({}): {}\n{}\n", g.id, g.verdict, e.title, e.body))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_good_mock_passes_everything_and_each_fault_breaks_exactly_its_guarantees() {
    let cases = selected().unwrap_or_else(|e| panic!("{e}"));
    let good_runs = if cases.len() == FAULTS.len() { 3 } else { 1 };
    let mut jobs: Vec<Option<&'static FaultCase>> = longest_first(cases).into_iter().map(Some).collect();
    jobs.extend(std::iter::repeat_n(None, good_runs));
    let results: Vec<(Option<&FaultCase>, RunResult)> = futures::stream::iter(jobs)
        .map(|case| async move {
            let faults: Vec<String> = case.map(|c| vec![c.fault.to_string()]).unwrap_or_default();
            (case, run_suite(&faults).await)
        })
        .buffer_unordered(CONCURRENT_RUNS)
        .collect()
        .await;

    // Four clusters on two cores: a run can miss a timeout for want of CPU. A run that
    // disagrees with the table is run once more alone, and that run must agree; the first
    // one's disagreement stays in the log.
    let mut settled = Vec::new();
    for (case, r) in results {
        let wrong = match case {
            Some(c) => mismatch(c, &r),
            None => (!r.all().all(|g| g.verdict == Verdict::Pass)).then(|| failures(&r)),
        };
        match wrong {
            None => settled.push((case, r)),
            Some(m) => {
                let name = case.map_or("the good mock", |c| c.fault);
                eprintln!("{name} disagreed with the table among {CONCURRENT_RUNS} runs; running it again alone:\n{m}");
                eprintln!("{}", unexpected_evidence(case, &r));
                let faults: Vec<String> = case.map(|c| vec![c.fault.to_string()]).unwrap_or_default();
                settled.push((case, run_suite(&faults).await));
            }
        }
    }
    let results = settled;

    let mut problems = Vec::new();
    let good: Vec<&RunResult> = results.iter().filter(|(c, _)| c.is_none()).map(|(_, r)| r).collect();
    for r in &good {
        if !r.all().all(|g| g.verdict == Verdict::Pass) {
            problems.push(format!("the good mock did not pass everything:\n{}", failures(r)));
        }
    }
    if good.windows(2).any(|w| verdicts(w[0]) != verdicts(w[1])) {
        problems.push(format!(
            "the runs of the good mock disagree: {:?}",
            good.iter().map(|r| verdicts(r)).collect::<Vec<_>>()
        ));
    }
    for (case, r) in results.iter().filter_map(|(c, r)| c.map(|c| (c, r))) {
        if let Some(m) = mismatch(case, r) {
            problems.push(format!("fault {}: {m}\n{}", case.fault, failures(r)));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
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
