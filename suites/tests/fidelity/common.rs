//! The verdict-fidelity check shared by the node kinds: each selected fault's run must fail
//! exactly the guarantees `dracheck_suites::fidelity::FAULTS` says it breaks, and the good
//! mock must pass everything, with identical verdicts when run more than once.

use std::collections::BTreeMap;

use dracheck_clusters::local::{NodeKind, Progress};
use dracheck_suites::fidelity::{FAULTS, FaultCase, mismatch};
use dracheck_suites::local_run::{self, LocalRun};
use dracheck_suites::result::{RunResult, Verdict};

use super::pool::{self, Admission};

/// The faults `DRACHECK_FIDELITY_ONLY` asks for, all of them when unset; a name the table
/// does not know is an error that lists the known ones.
pub fn selected() -> Result<Vec<&'static FaultCase>, String> {
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

/// Reruns of disagreeing runs: two at most side by side, and only onto an idle machine.
const RERUN: Admission = Admission { cap: 2, min_idle: 0.5, gap: std::time::Duration::from_secs(10) };

/// Longest first, so that the slow runs do not start last: a fault that keeps workloads from
/// running waits out timeouts in every scenario, so the number of guarantees it may break
/// stands for its length.
fn longest_first(mut cases: Vec<&'static FaultCase>) -> Vec<&'static FaultCase> {
    cases.sort_by_key(|c| std::cmp::Reverse(c.breaks().len() + c.may_break().len()));
    cases
}

async fn run_suite(faults: &[String], kind: NodeKind) -> RunResult {
    let adapter = dracheck_mock_driver::adapter::default(faults).expect("the mock's adapter");
    let mut cfg = LocalRun::default_for(adapter).expect("the default mock run is set up");
    cfg.cluster.node_kind = kind;
    cfg.companion = Some(dracheck_mock_driver::adapter::companion().expect("the mock as the second driver"));
    let label = format!("{}:{}", kind.name(), if faults.is_empty() { "good".to_string() } else { faults.join(",") });
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
    let expected = |id: &str| {
        case.is_some_and(|c| c.breaks().contains(&id) || c.may_break().contains(&id) || c.skips.contains(&id))
    };
    r.all()
        .filter(|g| g.verdict != Verdict::Pass && !expected(&g.id))
        .flat_map(|g| {
            g.evidence.iter().map(move |e| format!("--- {} ({}): {}\n{}\n", g.id, g.verdict, e.title, e.body))
        })
        .collect()
}

/// Runs `cases` and `good_runs` runs of the good mock on nodes of `kind`, side by side as
/// `admission` allows, and panics with every disagreement with the table. A run that disagrees
/// is run once more with fewer beside it (clusters side by side on two cores can miss a
/// timeout for want of CPU), and the verdict is that second run's; the first one's evidence
/// stays in the log.
pub async fn check_table(cases: Vec<&'static FaultCase>, good_runs: usize, admission: Admission, kind: NodeKind) {
    let mut jobs: Vec<Option<&'static FaultCase>> = longest_first(cases).into_iter().map(Some).collect();
    jobs.extend(std::iter::repeat_n(None, good_runs));
    let run = |case: Option<&'static FaultCase>| async move {
        let faults: Vec<String> = case.map(|c| vec![c.fault.to_string()]).unwrap_or_default();
        (case, run_suite(&faults, kind).await)
    };
    let results = pool::run_all(jobs, admission, run).await;

    let mut settled = Vec::new();
    let mut again = Vec::new();
    for (case, r) in results {
        let wrong = match case {
            Some(c) => mismatch(c, &r),
            None => (!r.all().all(|g| g.verdict == Verdict::Pass)).then(|| failures(&r)),
        };
        match wrong {
            None => settled.push((case, r)),
            Some(m) => {
                let name = case.map_or("the good mock", |c| c.fault);
                let on = kind.name();
                eprintln!("{name} disagreed with the table among other runs on {on} nodes; running it again:\n{m}");
                eprintln!("{}", unexpected_evidence(case, &r));
                again.push(case);
            }
        }
    }
    settled.extend(pool::run_all(again, RERUN, run).await);
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
