//! The fidelity record: what the full cross-check (`cargo xtask fidelity --full`) saw, row by
//! row, kept in `reports/fidelity/` as JSON and as a Markdown table. A test checks that it
//! covers exactly the current table (every row, with the row's current expectation, agreeing),
//! so a new or changed fault row cannot land without a full run having seen it.

use std::collections::BTreeSet;
use std::path::Path;

use dracheck_clusters::local::NodeKind;
use serde::{Deserialize, Serialize};

use super::tiers::{Row, all_rows};
use super::{FaultCase, mismatch};
use crate::result::{RunResult, Verdict};

/// Where the committed record lies, relative to the workspace root.
pub const DIR: &str = "reports/fidelity";
/// The record's JSON, in [`DIR`].
pub const JSON: &str = "record.json";
/// The record's table, in [`DIR`].
pub const MARKDOWN: &str = "record.md";

/// Every row the full cross-check ran, and the good mock's runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub rows: Vec<RowRecord>,
}

/// One run of the whole suite against the mock and how it compared with the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RowRecord {
    /// The `--fault` switch; `None` for the good mock.
    pub fault: Option<String>,
    /// `emulated` or `real`.
    pub node_kind: String,
    pub expected: Expected,
    pub observed: Observed,
    /// The run's verdicts matched the expectation.
    pub agrees: bool,
    /// Runs that disagreed before the one recorded, each with how it disagreed: a run that
    /// disagrees is run once more with fewer beside it, and the second verdict counts.
    pub reruns: Vec<String>,
    /// The recorded run's wall time.
    pub seconds: f64,
    /// The commit that ran it (`git describe --always --dirty`).
    pub commit: String,
}

/// What the table says of a row; for the good mock, that nothing fails.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expected {
    pub breaks: Vec<String>,
    pub may_break: Vec<String>,
    pub skips: Vec<String>,
}

impl Expected {
    pub fn of(case: Option<&FaultCase>) -> Expected {
        let sorted = |ids: Vec<&str>| {
            let set: BTreeSet<String> = ids.into_iter().map(String::from).collect();
            set.into_iter().collect()
        };
        match case {
            None => Expected::default(),
            Some(c) => Expected {
                breaks: sorted(c.breaks()),
                may_break: sorted(c.may_break()),
                skips: sorted(c.skips.to_vec()),
            },
        }
    }
}

/// The guarantees the run failed and skipped (in any profile).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observed {
    pub failed: Vec<String>,
    pub skipped: Vec<String>,
}

impl Observed {
    pub fn of(result: &RunResult) -> Observed {
        let ids = |v: Verdict| {
            let set: BTreeSet<String> = result.all().filter(|g| g.verdict == v).map(|g| g.id.clone()).collect();
            set.into_iter().collect()
        };
        Observed { failed: ids(Verdict::Fail), skipped: ids(Verdict::Skip) }
    }
}

impl RowRecord {
    /// The record of `result`, the whole suite run against `case` (`None`: the good mock) on
    /// `kind` nodes.
    pub fn of(
        case: Option<&FaultCase>,
        kind: NodeKind,
        result: &RunResult,
        reruns: Vec<String>,
        seconds: f64,
        commit: &str,
    ) -> RowRecord {
        let agrees = match case {
            Some(c) => mismatch(c, result).is_none(),
            None => result.all().all(|g| g.verdict == Verdict::Pass),
        };
        RowRecord {
            fault: case.map(|c| c.fault.to_string()),
            node_kind: kind.name().to_string(),
            expected: Expected::of(case),
            observed: Observed::of(result),
            agrees,
            reruns,
            seconds,
            commit: commit.to_string(),
        }
    }

    fn key(&self) -> (Option<&str>, &str) {
        (self.fault.as_deref(), self.node_kind.as_str())
    }
}

impl Record {
    /// The record in `dir`, empty where there is none yet.
    pub fn load(dir: &Path) -> Result<Record, String> {
        let path = dir.join(JSON);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                serde_json::from_str(&text).map_err(|e| format!("{} is not a fidelity record: {e}", path.display()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Record::default()),
            Err(e) => Err(format!("reading {}: {e}", path.display())),
        }
    }

    /// Writes the JSON and the Markdown table into `dir`.
    pub fn save(&self, dir: &Path) -> Result<(), String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let json = serde_json::to_string_pretty(self).expect("a record serialises") + "\n";
        for (name, text) in [(JSON, json), (MARKDOWN, self.markdown())] {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        }
        Ok(())
    }

    /// This record with `newer`'s rows in place of its own of the same fault and node kind
    /// (all good-mock rows of a kind when `newer` has one), in the table's order.
    pub fn merged(mut self, newer: Record) -> Record {
        let good_kinds: BTreeSet<String> =
            newer.rows.iter().filter(|r| r.fault.is_none()).map(|r| r.node_kind.clone()).collect();
        let replaced = |old: &RowRecord| match old.fault {
            Some(_) => newer.rows.iter().any(|n| n.key() == old.key()),
            None => good_kinds.contains(&old.node_kind),
        };
        self.rows.retain(|old| !replaced(old));
        self.rows.extend(newer.rows);
        self.sort();
        self
    }

    /// The good mock first, then the table's order, emulated before real.
    pub fn sort(&mut self) {
        let order = |r: &RowRecord| {
            let fault = r
                .fault
                .as_deref()
                .map_or(0, |f| 1 + super::FAULTS.iter().position(|c| c.fault == f).unwrap_or(super::FAULTS.len()));
            (fault, r.node_kind != NodeKind::Emulated.name())
        };
        self.rows.sort_by_key(order);
    }

    /// Why this record does not show the current table, row by row: a row it lacks, a row the
    /// table no longer has, a row recorded under another expectation, a row that disagreed, a
    /// node kind without a run of the good mock. Empty when it shows exactly the table.
    pub fn problems(&self) -> Vec<String> {
        self.problems_against(&all_rows())
    }

    fn problems_against(&self, rows: &[Row]) -> Vec<String> {
        let fix = "run `cargo xtask fidelity --full FAULT` and commit reports/fidelity/";
        let mut out = Vec::new();
        for row in rows {
            let found = self.rows.iter().find(|r| r.key() == (Some(row.case.fault), row.kind.name()));
            match found {
                None => out.push(format!("{}: not in the record ({fix})", row.shown())),
                Some(r) if r.expected != Expected::of(Some(row.case)) => out.push(format!(
                    "{}: recorded as {:?}, the table now says {:?} ({fix})",
                    row.shown(),
                    r.expected,
                    Expected::of(Some(row.case))
                )),
                Some(r) if !r.agrees => {
                    out.push(format!("{}: the recorded run disagreed with the table: {:?}", row.shown(), r.observed))
                }
                Some(_) => {}
            }
        }
        for r in self.rows.iter().filter(|r| r.fault.is_some()) {
            if !rows.iter().any(|row| r.key() == (Some(row.case.fault), row.kind.name())) {
                out.push(format!(
                    "{} on {} nodes: recorded, but no such row is in the table (run `cargo xtask fidelity --full` to record the table as it is)",
                    r.fault.as_deref().unwrap_or_default(),
                    r.node_kind
                ));
            }
        }
        let kinds: BTreeSet<&str> = rows.iter().map(|r| r.kind.name()).collect();
        for kind in kinds {
            let goods: Vec<&RowRecord> =
                self.rows.iter().filter(|r| r.fault.is_none() && r.node_kind == kind).collect();
            if goods.is_empty() {
                out.push(format!("the good mock on {kind} nodes: not in the record ({fix})"));
            }
            for g in goods.iter().filter(|g| !g.agrees) {
                out.push(format!("the good mock on {kind} nodes did not pass everything: {:?}", g.observed));
            }
        }
        out
    }

    /// The record as a Markdown table: fault, node kind, expected, observed, reruns, time, commit.
    pub fn markdown(&self) -> String {
        let list = |ids: &[String]| {
            if ids.is_empty() {
                "none".to_string()
            } else {
                ids.iter().map(|i| format!("`{i}`")).collect::<Vec<_>>().join(", ")
            }
        };
        let mut out = String::from(
            "# Fidelity record\n\nWritten by `cargo xtask fidelity --full`: each fault against the whole suite on the \
             node kinds its row names, and the good mock. Expected: the guarantees the row must fail (and may fail, \
             by timing; must skip). Observed: what the run failed and skipped.\n\n",
        );
        let (runs, reruns) = (self.rows.len(), self.rows.iter().map(|r| r.reruns.len()).sum::<usize>());
        let seconds: f64 = self.rows.iter().map(|r| r.seconds).sum();
        out.push_str(&format!(
            "{runs} runs, {} agree, {reruns} reruns; {:.0} run-minutes.\n\n",
            self.rows.iter().filter(|r| r.agrees).count(),
            seconds / 60.0
        ));
        out.push_str("| fault | nodes | expected to fail | may fail | observed failing | observed skipped | agrees | reruns | time | commit |\n");
        out.push_str("|---|---|---|---|---|---|---|---|---|---|\n");
        for r in &self.rows {
            let expected = match r.expected.skips.as_slice() {
                [] => list(&r.expected.breaks),
                skips => format!("{}; skipped: {}", list(&r.expected.breaks), list(skips)),
            };
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {:.0} s | `{}` |\n",
                r.fault.as_deref().map_or("(the good mock)".to_string(), |f| format!("`{f}`")),
                r.node_kind,
                expected,
                list(&r.expected.may_break),
                list(&r.observed.failed),
                list(&r.observed.skipped),
                if r.agrees { "yes" } else { "**no**" },
                r.reruns.len(),
                r.seconds,
                r.commit
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fidelity::FAULTS;

    fn row(case: &FaultCase, kind: NodeKind) -> RowRecord {
        RowRecord {
            fault: Some(case.fault.to_string()),
            node_kind: kind.name().into(),
            expected: Expected::of(Some(case)),
            observed: Observed { failed: case.breaks().into_iter().map(String::from).collect(), skipped: vec![] },
            agrees: true,
            reruns: vec![],
            seconds: 1.0,
            commit: "abc".into(),
        }
    }

    fn good(kind: NodeKind) -> RowRecord {
        RowRecord {
            fault: None,
            node_kind: kind.name().into(),
            expected: Expected::default(),
            observed: Observed::default(),
            agrees: true,
            reruns: vec![],
            seconds: 1.0,
            commit: "abc".into(),
        }
    }

    fn complete() -> Record {
        let mut rows: Vec<RowRecord> = all_rows().iter().map(|r| row(r.case, r.kind)).collect();
        rows.extend([good(NodeKind::Emulated), good(NodeKind::Real)]);
        Record { rows }
    }

    #[test]
    fn a_record_of_every_row_as_the_table_says_has_no_problems() {
        assert_eq!(complete().problems(), Vec::<String>::new());
    }

    #[test]
    fn a_row_missing_from_the_record_is_a_problem_that_names_the_fix() {
        let mut record = complete();
        record.rows.retain(|r| r.fault.as_deref() != Some("hang-prepare"));
        let problems = record.problems();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("hang-prepare on emulated nodes: not in the record"), "{problems:?}");
        assert!(problems[0].contains("cargo xtask fidelity --full"), "{problems:?}");
    }

    #[test]
    fn a_changed_row_an_unknown_row_a_disagreement_and_a_missing_good_run_are_problems() {
        let mut record = complete();
        record.rows[0].expected.breaks.push("made.up".into());
        let mut extra = record.rows[1].clone();
        extra.fault = Some("no-such-fault".into());
        record.rows.push(extra);
        record.rows[2].agrees = false;
        record.rows.retain(|r| !(r.fault.is_none() && r.node_kind == "real"));
        let problems = record.problems();
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems[0].contains("the table now says"), "{problems:?}");
        assert!(problems[1].contains("disagreed"), "{problems:?}");
        assert!(problems[2].starts_with("no-such-fault on emulated nodes: recorded, but no such row"), "{problems:?}");
        assert!(problems[3].starts_with("the good mock on real nodes: not in the record"), "{problems:?}");
    }

    #[test]
    fn newer_rows_replace_their_own_and_keep_the_rest() {
        let base = complete();
        let case = &FAULTS[1];
        let mut newer = row(case, NodeKind::Emulated);
        newer.commit = "def".into();
        let mut good_again = good(NodeKind::Emulated);
        good_again.commit = "def".into();
        let merged = base.clone().merged(Record { rows: vec![newer.clone(), good_again] });
        assert_eq!(merged.rows.len(), base.rows.len());
        assert!(merged.rows.contains(&newer));
        assert_eq!(merged.rows[0].fault, None, "the good mock first");
        assert_eq!(merged.problems(), Vec::<String>::new());
        let md = merged.markdown();
        assert!(md.contains(&format!("| `{}` | emulated |", case.fault)), "{md}");
        assert!(md.contains("| (the good mock) | emulated |"), "{md}");
    }

    #[test]
    fn the_committed_record_covers_exactly_the_current_table() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(DIR);
        let record = Record::load(&dir).unwrap();
        let problems = record.problems();
        assert!(
            problems.is_empty(),
            "{} does not show the current fault table:\n{}",
            dir.display(),
            problems.join("\n")
        );
        let md = std::fs::read_to_string(dir.join(MARKDOWN)).unwrap_or_default();
        assert_eq!(md, record.markdown(), "{} is not the table of {JSON}: run `cargo xtask fidelity --full`", MARKDOWN);
    }
}
