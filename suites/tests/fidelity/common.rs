//! The verdict-fidelity check shared by the tiers and node kinds: each fault's run must fail
//! exactly the guarantees `dracheck_suites::fidelity::FAULTS` says it breaks (of those it
//! checks), and the good mock must pass everything, with identical verdicts when run more than
//! once. A run that disagrees is run once more with fewer beside it; every such rerun is
//! printed with the first run's evidence, counted, and kept in the record.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use dracheck_clusters::local::{NodeKind, Progress};
use dracheck_suites::fidelity::record::{Record, RowRecord};
use dracheck_suites::fidelity::tiers::{Job, Scope};
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
    let mut picked = Vec::new();
    for want in only.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let matching = dracheck_suites::fidelity::named(want);
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

/// More reruns than this in one check fail it: a disagreement a rerun overturns is a verdict
/// that flips with load, and more than a couple of them say the table or the suite is flaky.
pub const MOST_RERUNS: usize = 2;

/// Emulated runs have nodes beyond the default run's, which deal the busiest roles' scenarios
/// over more nodes: a fault that keeps workloads from running has each of them wait out its
/// timeout, and one after the other on one node that took a run 11.5 min where 16 emulated
/// nodes take 5.6 (with the same verdicts, and a third less CPU, since a cluster waiting is not
/// free). Real nodes cost more each (a kubelet and a containerd, 0.7 CPU-s a minute idle): three
/// real-node runs on 14 nodes each kept two cores at a load of 75, so they keep the default.
fn nodes(kind: NodeKind) -> usize {
    match kind {
        NodeKind::Emulated => local_run::DEFAULT_NODES + 6,
        NodeKind::Real => local_run::DEFAULT_NODES,
    }
}

/// The most nodes a targeted run gets. Emulated nodes are cheap (a mock process each, 0.5 CPU-s
/// to start): a row whose fault has every scenario wait out its timeout names nearly every
/// guarantee, and on a node per scenario it ends with its longest scenario (209 s for
/// `strict-authority` alone on 32 nodes, 292 s on 16, with 67 and 62 CPU-s). Real nodes keep a
/// whole run's.
fn most_targeted(kind: NodeKind) -> usize {
    match kind {
        NodeKind::Emulated => 32,
        NodeKind::Real => nodes(kind),
    }
}

/// One run of the suite against the mock as `job` says.
pub async fn run_suite(job: Job) -> RunResult {
    let faults: Vec<String> = job.case.map(|c| vec![c.fault.to_string()]).unwrap_or_default();
    let adapter = dracheck_mock_driver::adapter::default(&faults).expect("the mock's adapter");
    let mut cfg = LocalRun::default_for(adapter).expect("the default mock run is set up");
    cfg.cluster.node_kind = job.kind;
    cfg.filter.only = job.only();
    // A targeted run starts a node for each of its scenarios, up to a whole run's nodes: most
    // rows need one or two, and every node is a kubelet and a driver process more; but a row
    // whose fault has each scenario wait out its timeout took 9-10 min on the nodes of its
    // roles alone (one scenario after the other), longer than the whole suite on 16 nodes.
    cfg.nodes = match job.scope {
        Scope::Whole => nodes(job.kind),
        Scope::Targeted => local_run::nodes_each_alone(&cfg.profiles, &cfg.filter).clamp(1, most_targeted(job.kind)),
    };
    cfg.companion = Some(dracheck_mock_driver::adapter::companion().expect("the mock as the second driver"));
    let scope = if job.scope == Scope::Targeted { ",targeted" } else { "" };
    let label = format!("{}:{}{scope}", job.kind.name(), job.case.map_or("good", |c| c.fault));
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

/// How `r`, the run of `case` (`None`: the good mock), disagrees with the table, if it does.
fn disagreement(case: Option<&FaultCase>, r: &RunResult) -> Option<String> {
    match case {
        Some(c) => mismatch(c, r),
        None => (!r.all().all(|g| g.verdict == Verdict::Pass)).then(|| failures(r)),
    }
}

/// A line for the log as it happens, past libtest's capture (which keeps a passing test's
/// output to itself and a failing one's until the whole binary ends): a run that a time limit
/// cuts short still shows which runs agreed and how the others disagreed.
pub fn live(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "fidelity: {line}");
}

/// Where a full check writes its record (`DRACHECK_FIDELITY_RECORD`), and the commit it names
/// (`DRACHECK_COMMIT`, which `cargo xtask fidelity` sets).
pub struct RecordTo {
    pub dir: PathBuf,
    pub commit: String,
}

/// One run's outcome: the job, its result, its time, and the disagreements of the runs before
/// it that a rerun overturned (or confirmed).
struct Done {
    job: Job,
    result: RunResult,
    seconds: f64,
    reruns: Vec<String>,
}

/// Runs `jobs` in one pool, each node kind as `admission` admits it (the earlier kind's runs
/// start first where both have room), and panics with every disagreement with the table and
/// when more than [`MOST_RERUNS`] runs needed a rerun. With `record`, the whole-suite runs are
/// merged into the record there, whatever their outcome.
pub async fn check(jobs: Vec<Job>, admission: impl Fn(NodeKind) -> Admission, record: Option<RecordTo>) {
    let started = Instant::now();
    let total = jobs.len();
    let kinds: Vec<NodeKind> =
        [NodeKind::Real, NodeKind::Emulated].into_iter().filter(|k| jobs.iter().any(|j| j.kind == *k)).collect();
    let admissions: Vec<Admission> = kinds.iter().map(|k| admission(*k)).collect();
    let class = |j: &Job| kinds.iter().position(|k| *k == j.kind).expect("a kind of the jobs");
    live(&format!("{total} runs: {}", summary_of(&jobs)));
    let finished = std::sync::atomic::AtomicUsize::new(0);
    let run = |job: Job| {
        let finished = &finished;
        async move {
            let t = Instant::now();
            let result = run_suite(job).await;
            let seconds = t.elapsed().as_secs_f64();
            let agrees = disagreement(job.case, &result).map_or("agrees", |_| "DISAGREES");
            let n = finished.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            let at = if n <= total { format!("{n}/{total}") } else { format!("rerun {}", n - total) };
            live(&format!("[{at}] {}: {agrees} ({seconds:.0} s: {})", job.shown(), where_the_time_went(&result)));
            Done { job, result, seconds, reruns: Vec::new() }
        }
    };
    let results = pool::run_all(jobs.iter().map(|j| (class(j), *j)).collect(), &admissions, &run).await;

    let mut settled = Vec::new();
    let mut again = Vec::new();
    for done in results {
        match disagreement(done.job.case, &done.result) {
            None => settled.push(done),
            Some(m) => {
                let first = format!("{}: {m}", done.job.shown());
                live(&format!("RERUN: {first}; running it again with fewer beside it"));
                eprintln!("{}", unexpected_evidence(done.job.case, &done.result));
                again.push((0, (done.job, first)));
            }
        }
    }
    let reruns = again.len();
    let rerun = |(job, first): (Job, String)| {
        let run = &run;
        async move {
            let mut done = run(job).await;
            done.reruns.push(first);
            done
        }
    };
    settled.extend(pool::run_all(again, &[RERUN], rerun).await);

    let mut problems = Vec::new();
    for kind in &kinds {
        problems.extend(judge(*kind, &settled.iter().filter(|d| d.job.kind == *kind).collect::<Vec<_>>()));
    }
    let overturned: Vec<&str> = settled
        .iter()
        .filter(|d| !d.reruns.is_empty() && disagreement(d.job.case, &d.result).is_none())
        .flat_map(|d| d.reruns.iter().map(String::as_str))
        .collect();
    live(&format!(
        "{total} runs in {:.1} min, {reruns} rerun, {} overturned by the rerun, {} disagreements left",
        started.elapsed().as_secs_f64() / 60.0,
        overturned.len(),
        problems.len()
    ));
    for o in &overturned {
        live(&format!("overturned by its rerun: {o}"));
    }
    if reruns > MOST_RERUNS {
        problems.push(format!(
            "{reruns} runs disagreed with the table and were run again (at most {MOST_RERUNS} may): a verdict that \
             flips with load; the first runs' evidence is in the log above"
        ));
    }
    if let Some(to) = record {
        let newer = Record {
            rows: settled
                .iter()
                .filter(|d| d.job.scope == Scope::Whole)
                .map(|d| RowRecord::of(d.job.case, d.job.kind, &d.result, d.reruns.clone(), d.seconds, &to.commit))
                .collect(),
        };
        let merged = Record::load(&to.dir).unwrap_or_else(|e| panic!("{e}")).merged(newer);
        merged.save(&to.dir).unwrap_or_else(|e| panic!("{e}"));
        live(&format!("record written to {}", to.dir.display()));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// The cluster's start and teardown and the longest scenarios of `r`: where a slow run spent
/// its time, in the log line of every run.
fn where_the_time_went(r: &RunResult) -> String {
    let t = |k: &str| r.timings.get(k).copied().unwrap_or(0.0);
    let mut scenarios: Vec<(&str, f64)> =
        r.timings.iter().filter_map(|(k, v)| k.strip_prefix("scenario:").map(|name| (name, *v))).collect();
    scenarios.sort_by(|a, b| b.1.total_cmp(&a.1));
    let longest: Vec<String> = scenarios.iter().take(3).map(|(name, s)| format!("{name} {s:.0} s")).collect();
    format!(
        "cluster start {:.0} s, teardown {:.0} s, {} scenarios, longest {}",
        t("cluster-start"),
        t("teardown"),
        scenarios.len(),
        if longest.is_empty() { "none".into() } else { longest.join(", ") }
    )
}

/// `N good, N targeted, N whole` over `jobs`, per node kind.
fn summary_of(jobs: &[Job]) -> String {
    let mut out = Vec::new();
    for kind in [NodeKind::Emulated, NodeKind::Real] {
        let of = |f: &dyn Fn(&Job) -> bool| jobs.iter().filter(|j| j.kind == kind && f(j)).count();
        let good = of(&|j| j.case.is_none());
        let targeted = of(&|j| j.case.is_some() && j.scope == Scope::Targeted);
        let whole = of(&|j| j.case.is_some() && j.scope == Scope::Whole);
        if good + targeted + whole > 0 {
            out.push(format!(
                "on {} nodes {good} of the good mock, {targeted} faults targeted, {whole} against the whole suite",
                kind.name()
            ));
        }
    }
    out.join("; ")
}

/// Every disagreement of one node kind's runs with the table, each also written to the log.
fn judge(kind: NodeKind, done: &[&Done]) -> Vec<String> {
    let on = kind.name();
    let mut problems = Vec::new();
    let good: Vec<&RunResult> = done.iter().filter(|d| d.job.case.is_none()).map(|d| &d.result).collect();
    for r in &good {
        if !r.all().all(|g| g.verdict == Verdict::Pass) {
            problems.push(format!("on {on} nodes, the good mock did not pass everything:\n{}", failures(r)));
        }
    }
    if good.windows(2).any(|w| verdicts(w[0]) != verdicts(w[1])) {
        problems.push(format!(
            "on {on} nodes, the runs of the good mock disagree: {:?}",
            good.iter().map(|r| verdicts(r)).collect::<Vec<_>>()
        ));
    }
    for d in done {
        if let Some(case) = d.job.case
            && let Some(m) = mismatch(case, &d.result)
        {
            problems.push(format!("{}: {m}\n{}", d.job.shown(), failures(&d.result)));
        }
    }
    for p in &problems {
        live(p);
    }
    problems
}
