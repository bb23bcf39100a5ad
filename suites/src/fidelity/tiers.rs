//! Which runs check which rows of the fidelity table, in the two tiers that run it.
//!
//! A row is a fault on a node kind. Two kinds of run check rows:
//! - **targeted**: the row's fault with only the scenarios of the guarantees the row says it
//!   fails or skips ([`FaultCase::targeted`]). It shows *sensitivity*: the suite catches the
//!   fault where the row says. It takes seconds where the whole suite takes minutes, since a
//!   fault that keeps workloads from running has every other scenario wait out its timeout.
//! - **whole**: the row's fault against the whole suite. It shows *specificity* too: every
//!   guarantee the row does not name still passes, so the fault breaks exactly its row.
//!
//! The tiered check (`cargo xtask test`) runs every row targeted and a rotating slice of the
//! rows whole ([`rotation`]); the full check (`cargo xtask fidelity --full`) runs every row
//! whole. Both run the good mock against the whole suite on every node kind.

use dracheck_clusters::local::NodeKind;

use super::{FAULTS, FaultCase};

/// A fault on a node kind: one row of the table as a run checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub case: &'static FaultCase,
    pub kind: NodeKind,
}

impl Row {
    /// `fault on kind nodes`, for people.
    pub fn shown(&self) -> String {
        format!("{} on {} nodes", self.case.fault, self.kind.name())
    }
}

/// Every row of `cases` on the node kinds among `kinds` that its row names, emulated rows
/// first, each kind in the table's order.
pub fn rows(cases: &[&'static FaultCase], kinds: &[NodeKind]) -> Vec<Row> {
    let mut out = Vec::new();
    for kind in [NodeKind::Emulated, NodeKind::Real].into_iter().filter(|k| kinds.contains(k)) {
        out.extend(cases.iter().filter(|c| c.node_kinds().contains(&kind)).map(|&case| Row { case, kind }));
    }
    out
}

/// Every row of the whole table on both node kinds: what a full record covers.
pub fn all_rows() -> Vec<Row> {
    rows(&FAULTS.iter().collect::<Vec<_>>(), &[NodeKind::Emulated, NodeKind::Real])
}

/// How much of the suite a run checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Only the scenarios of the guarantees the row names.
    Targeted,
    /// Every scenario.
    Whole,
}

/// One run of the suite against the mock: the good mock (`case` is `None`) or a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    pub kind: NodeKind,
    pub case: Option<&'static FaultCase>,
    pub scope: Scope,
}

impl Job {
    /// The `--only` globs of the run: the row's guarantees for a targeted run, none (the whole
    /// suite) otherwise.
    pub fn only(&self) -> Vec<String> {
        match (self.scope, self.case.and_then(FaultCase::targeted)) {
            (Scope::Targeted, Some(ids)) => ids.into_iter().map(String::from).collect(),
            _ => Vec::new(),
        }
    }

    /// `fault` or `the good mock`, `targeted` or `whole`, and the node kind, for people.
    pub fn shown(&self) -> String {
        let what = self.case.map_or("the good mock", |c| c.fault);
        let scope = match self.scope {
            Scope::Targeted => "targeted",
            Scope::Whole => "whole suite",
        };
        format!("{what} ({scope}) on {} nodes", self.kind.name())
    }
}

/// Which tier a fidelity run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Every row targeted, and `cross_check` rows whole from the rotation at `seed`.
    Tiered { cross_check: usize, seed: u64 },
    /// Every row whole: the release gate, whose outcome the record keeps.
    Full,
}

/// The indexes into `rows` of the rows the tiered check at `seed` runs whole: `k` consecutive
/// rows from `seed × k` on, wrapping round. Seeds that follow each other (a branch's commit
/// count) take slices that follow each other, so every row is cross-checked within
/// ⌈rows / k⌉ commits.
pub fn rotation(rows: usize, seed: u64, k: usize) -> Vec<usize> {
    if rows == 0 {
        return Vec::new();
    }
    let k = k.min(rows);
    let start = (seed % rows as u64) as usize * k % rows;
    (0..k).map(|i| (start + i) % rows).collect()
}

/// The runs of `tier` over `cases` on the node kinds in `kinds`, with `good_runs` runs of the
/// good mock on emulated nodes and one on real nodes. Whole runs come before targeted ones of
/// the same kind: they take the longest.
pub fn plan(tier: Tier, cases: &[&'static FaultCase], kinds: &[NodeKind], good_runs: usize) -> Vec<Job> {
    let rows = rows(cases, kinds);
    let whole: Vec<bool> = match tier {
        Tier::Full => vec![true; rows.len()],
        Tier::Tiered { cross_check, seed } => {
            let picked = rotation(rows.len(), seed, cross_check);
            // A row that names no guarantee can only be shown by the whole suite.
            (0..rows.len()).map(|i| picked.contains(&i) || rows[i].case.targeted().is_none()).collect()
        }
    };
    let mut jobs = Vec::new();
    for kind in [NodeKind::Real, NodeKind::Emulated].into_iter().filter(|k| kinds.contains(k)) {
        let goods = if kind == NodeKind::Real { good_runs.min(1) } else { good_runs };
        jobs.extend(std::iter::repeat_n(Job { kind, case: None, scope: Scope::Whole }, goods));
        for want in [true, false] {
            let mut of_kind: Vec<Job> = rows
                .iter()
                .zip(&whole)
                .filter(|(r, w)| r.kind == kind && **w == want)
                .map(|(r, w)| Job { kind, case: Some(r.case), scope: if *w { Scope::Whole } else { Scope::Targeted } })
                .collect();
            // Longest first: a row that keeps workloads from running names most guarantees and
            // has each of their scenarios wait out its timeout (10 min for the widest), so it
            // must not start last.
            of_kind.sort_by_key(|j| std::cmp::Reverse(j.case.map_or(0, |c| c.breaks().len() + c.may_break().len())));
            jobs.extend(of_kind);
        }
    }
    jobs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_seeds_cross_check_every_row_within_a_handful_of_commits() {
        let (n, k): (usize, usize) = (76, 8);
        let commits = n.div_ceil(k);
        for first in [0u64, 5, 1234] {
            let mut seen = vec![false; n];
            for seed in first..first + commits as u64 {
                let slice = rotation(n, seed, k);
                assert_eq!(slice.len(), k);
                for i in slice {
                    seen[i] = true;
                }
            }
            assert!(seen.iter().all(|s| *s), "seeds from {first}: {seen:?}");
        }
        assert_eq!(rotation(3, 7, 10).len(), 3, "never more than the rows");
        assert!(rotation(0, 7, 3).is_empty());
    }

    #[test]
    fn the_tiered_plan_runs_every_row_once_and_the_rotation_whole() {
        let cases: Vec<&'static FaultCase> = FAULTS.iter().collect();
        let both = [NodeKind::Emulated, NodeKind::Real];
        let jobs = plan(Tier::Tiered { cross_check: 4, seed: 3 }, &cases, &both, 2);
        let all = rows(&cases, &both);
        let faulty: Vec<&Job> = jobs.iter().filter(|j| j.case.is_some()).collect();
        assert_eq!(faulty.len(), all.len(), "one run per row");
        for row in &all {
            assert!(faulty.iter().any(|j| j.kind == row.kind && j.case == Some(row.case)), "{}", row.shown());
        }
        let whole: Vec<&&Job> = faulty.iter().filter(|j| j.scope == Scope::Whole).collect();
        let must_be_whole = cases.iter().filter(|c| c.targeted().is_none()).count();
        assert!(whole.len() <= 4 + must_be_whole && whole.len() >= 4, "{whole:?}");
        assert_eq!(jobs.iter().filter(|j| j.case.is_none() && j.kind == NodeKind::Emulated).count(), 2);
        assert_eq!(jobs.iter().filter(|j| j.case.is_none() && j.kind == NodeKind::Real).count(), 1);
        // Without real nodes, no real-node run.
        let emulated = plan(Tier::Full, &cases, &[NodeKind::Emulated], 3);
        assert!(emulated.iter().all(|j| j.kind == NodeKind::Emulated && j.scope == Scope::Whole));
        assert_eq!(emulated.len(), FAULTS.len() + 3);
    }

    #[test]
    fn a_targeted_run_selects_the_row_s_guarantees_and_a_whole_one_everything() {
        let case = FAULTS.iter().find(|c| c.fault == "non-idempotent-prepare").unwrap();
        let job = Job { kind: NodeKind::Emulated, case: Some(case), scope: Scope::Targeted };
        assert_eq!(job.only(), ["plugin.prepare.idempotent"]);
        assert!(Job { scope: Scope::Whole, ..job }.only().is_empty());
        assert!(Job { case: None, ..job }.only().is_empty());
    }
}
