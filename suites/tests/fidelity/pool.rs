//! Runs side by side as far as the machine's CPU allows. How many fit depends on which runs are
//! up, not on a fixed number: a faulty run mostly waits out timeouts with its cluster idle, a
//! good run keeps the CPU busy. A run starts when fewer than `cap` run, the machine's CPU had
//! idle time over the last seconds, and the previous run started a moment ago (a cluster's
//! start is a burst of CPU that the idle time does not show yet). The load counted is the
//! machine's, so the other tests that `cargo xtask test` runs beside the table count too.

use std::collections::VecDeque;
use std::future::Future;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use futures::stream::FuturesUnordered;

/// When the next run may start.
#[derive(Clone, Copy, Debug)]
pub struct Admission {
    /// Runs at most side by side (memory: a cluster and its nodes take about 400 MiB).
    pub cap: usize,
    /// The share of the machine's CPU that was idle over [`WINDOW`], at least.
    pub min_idle: f64,
    /// Since the previous start, at least.
    pub gap: Duration,
}

/// How far back the idle share is measured.
const WINDOW: Duration = Duration::from_secs(6);
const TICK: Duration = Duration::from_secs(1);

/// The machine's CPU time as `/proc/stat` counts it: `(idle, total)` in clock ticks; `None`
/// where there is no such file, and then the pool admits by `cap` alone.
fn cpu_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat.lines().next()?.split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal: waiting on the disk is idle CPU too.
    let total = fields.iter().take(8).sum();
    Some((fields.get(3)? + fields.get(4)?, total))
}

/// The idle share over the samples of the last [`WINDOW`].
struct IdleMeter {
    samples: VecDeque<(Instant, u64, u64)>,
}

impl IdleMeter {
    fn new() -> Self {
        let mut m = IdleMeter { samples: VecDeque::new() };
        m.sample();
        m
    }

    fn sample(&mut self) {
        if let Some((idle, total)) = cpu_ticks() {
            let now = Instant::now();
            self.samples.push_back((now, idle, total));
            while self.samples.len() > 2 && now.duration_since(self.samples[1].0) >= WINDOW {
                self.samples.pop_front();
            }
        }
    }

    /// 1.0 until two samples exist (nothing measured is no load).
    fn idle(&self) -> f64 {
        match (self.samples.front(), self.samples.back()) {
            (Some(a), Some(b)) if b.2 > a.2 => (b.1 - a.1) as f64 / (b.2 - a.2) as f64,
            _ => 1.0,
        }
    }
}

/// Runs `run` on every job, as the admission of its class (its index into `admissions`)
/// allows, and returns the outputs in the order the runs ended. The next run is the first
/// waiting job whose class has room and whose idle bound the machine meets: jobs start in
/// their order where they can, and a class with a lower idle bound goes on starting where
/// another's waits for the machine (two pools, one per class, starved the class with the
/// higher bound for as long as the other kept the machine that busy; holding every job behind
/// the first one starved the later class on a machine that other tests kept busy).
pub async fn run_all<J, F, Fut>(jobs: Vec<(usize, J)>, admissions: &[Admission], run: F) -> Vec<Fut::Output>
where
    F: Fn(J) -> Fut,
    Fut: Future,
{
    let mut waiting: VecDeque<(usize, J)> = jobs.into();
    let mut running = FuturesUnordered::new();
    let mut per_class = vec![0usize; admissions.len()];
    let mut done = Vec::new();
    let mut meter = IdleMeter::new();
    let mut last_start: Option<tokio::time::Instant> = None;
    while !waiting.is_empty() || !running.is_empty() {
        let idle = meter.idle();
        let admits = |class: usize| {
            let a = &admissions[class];
            per_class[class] < a.cap
                && (running.is_empty() || (last_start.is_none_or(|t| t.elapsed() >= a.gap) && idle >= a.min_idle))
        };
        if let Some(i) = waiting.iter().position(|(class, _)| admits(*class))
            && let Some((class, job)) = waiting.remove(i)
        {
            per_class[class] += 1;
            let run = &run;
            running.push(async move { (class, run(job).await) });
            last_start = Some(tokio::time::Instant::now());
            continue;
        }
        let gap = waiting.iter().map(|(class, _)| admissions[*class].gap).min().unwrap_or(Duration::ZERO);
        // Wake for the next sample, or sooner where only the gap holds the next run back.
        let gap_left = last_start.map_or(Duration::ZERO, |t| gap.saturating_sub(t.elapsed()));
        let wake = if gap_left.is_zero() { TICK } else { gap_left.min(TICK) };
        tokio::select! {
            Some((class, out)) = running.next(), if !running.is_empty() => {
                per_class[class] -= 1;
                done.push(out);
            }
            () = tokio::time::sleep(wake) => meter.sample(),
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn never_more_than_a_class_cap_and_a_full_class_lets_the_next_start() {
        let up = [AtomicUsize::new(0), AtomicUsize::new(0)];
        let highest = [AtomicUsize::new(0), AtomicUsize::new(0)];
        let admissions = [
            Admission { cap: 2, min_idle: 0.0, gap: Duration::from_millis(10) },
            Admission { cap: 3, min_idle: 0.0, gap: Duration::from_millis(10) },
        ];
        // The heavy class first: its third job waits for a place while the light ones start.
        let jobs: Vec<(usize, u32)> = (0..4).map(|i| (0, i)).chain((4..10).map(|i| (1, i))).collect();
        let out = run_all(jobs, &admissions, |i: u32| {
            let class = usize::from(i >= 4);
            let (up, highest) = (&up[class], &highest[class]);
            async move {
                let now = up.fetch_add(1, Ordering::SeqCst) + 1;
                highest.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(300)).await;
                up.fetch_sub(1, Ordering::SeqCst);
                i
            }
        })
        .await;
        let mut sorted = out.clone();
        sorted.sort();
        assert_eq!(sorted, (0..10).collect::<Vec<_>>());
        assert_eq!(highest.each_ref().map(|h| h.load(Ordering::SeqCst)), [2, 3]);
        // Both classes ran side by side: a light job ended before the last heavy one.
        let last_heavy = out.iter().rposition(|i| *i < 4).unwrap();
        assert!(out[..last_heavy].iter().any(|i| *i >= 4), "{out:?}");
    }
}
