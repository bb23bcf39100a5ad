//! `cargo xtask bench …`: timings measured over several runs and reported as medians, since
//! a 2-core shared machine is too noisy for single numbers.

use std::collections::BTreeMap;

use clap::Subcommand;
use dracheck_clusters::local::Progress;
use dracheck_clusters::{LocalCluster, LocalClusterOptions};
use dracheck_suites::local_run::{self, LocalRun};

use crate::exit;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// `LocalCluster::start` with cached binaries: median start-up and the control plane's
    /// peak memory.
    ClusterUp {
        #[arg(long, default_value_t = 5)]
        runs: usize,
    },
    /// The default mock conformance run: median wall time, split into cluster start,
    /// scenarios and teardown.
    Conformance {
        #[arg(long, default_value_t = 3)]
        runs: usize,
    },
}

pub async fn run(cmd: BenchCommand) -> u8 {
    match cmd {
        BenchCommand::ClusterUp { runs } => cluster_up(runs).await,
        BenchCommand::Conformance { runs } => conformance(runs).await,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

/// Peak resident memory (VmHWM) of a process, in MiB.
fn peak_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0)
}

async fn cluster_up(runs: usize) -> u8 {
    let mut starts = Vec::new();
    let mut peaks = Vec::new();
    for i in 0..runs {
        let cluster = match LocalCluster::start(LocalClusterOptions::from_env()).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("dracheck: {e}");
                return e.exit_code() as u8;
            }
        };
        let per: Vec<(String, f64)> =
            cluster.info().processes.iter().map(|p| (p.name.clone(), peak_mib(p.pid))).collect();
        let total: f64 = per.iter().map(|(_, m)| m).sum();
        eprintln!(
            "run {}: ready in {:.2}s; peak memory {total:.0} MiB ({per:?})",
            i + 1,
            cluster.startup.as_secs_f64()
        );
        starts.push(cluster.startup.as_secs_f64());
        peaks.push(total);
        cluster.stop();
    }
    println!(
        "cluster up: median {:.2}s over {runs} runs (min {:.2}s, max {:.2}s); control plane peak memory median {:.0} MiB",
        median(starts.clone()),
        starts.iter().cloned().fold(f64::MAX, f64::min),
        starts.iter().cloned().fold(0.0, f64::max),
        median(peaks)
    );
    exit::OK
}

async fn conformance(runs: usize) -> u8 {
    let mut totals = Vec::new();
    let mut parts: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for i in 0..runs {
        let cfg = match LocalRun::default_mock(&[]) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("dracheck: {e}");
                return exit::CLUSTER_DOWN;
            }
        };
        let progress = Progress::quiet();
        let result = match local_run::run(cfg, &local_run::run_id(), &progress).await {
            Ok(f) => f.result,
            Err(e) => {
                eprintln!("dracheck: {}", e.message);
                return e.exit_code as u8;
            }
        };
        eprintln!("run {}: {:.1}s, all held: {}", i + 1, result.duration_seconds, result.all_held());
        totals.push(result.duration_seconds);
        for (k, v) in result.timings {
            parts.entry(k).or_default().push(v);
        }
    }
    println!("conformance (mock, 2 profiles, 7 nodes): median {:.1}s over {runs} runs", median(totals));
    let mut rows: Vec<(String, f64)> = parts.into_iter().map(|(k, v)| (k, median(v))).collect();
    rows.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (k, v) in rows {
        println!("  {v:7.1}s  {k}");
    }
    exit::OK
}
