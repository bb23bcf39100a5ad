//! Which upstream DRA tests a driver can pass or fail (Kubernetes v1.37.2: `test/e2e/dra`,
//! `test/e2e_node/dra_test.go`, `test/integration/dra`), and which guarantees here fail with
//! them. A scenario declares the rows it answers for beside itself, as `UPSTREAM` in its own
//! module, so that whoever changes what a scenario checks sees the claim made about it; the
//! rows no scenario answers for are in [`missing`]. [`rows`] gathers them all, and
//! `suites/README.md` shows them as [`markdown`] renders them, counts included, so the
//! percentages are computed from the rows, never written by hand; a test holds the README to it.
//!
//! A row is [`Verdict::Covered`] only if a driver bug that fails the upstream test also fails
//! some guarantee in the default run (`cargo xtask conformance --driver mock`); `Partial` when
//! the driver's part is checked in some shape but a plausible driver bug that upstream catches
//! would pass here; `Missing` otherwise. A failed `should` guarantee counts as failed: it is
//! reported, and fails a `--strict` run.

mod markdown;
mod missing;

pub use markdown::markdown;

use crate::scenarios::{cluster, plugin};

/// The groups the rows fall into: the core of the driver contract (A–D, G) and the features
/// behind feature gates that 1.37 turns on by default (E, F), counted apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Group {
    A,
    B,
    C,
    D,
    E,
    F,
    G,
}

impl Group {
    pub const ALL: [Group; 7] = [Group::A, Group::B, Group::C, Group::D, Group::E, Group::F, Group::G];

    pub fn letter(self) -> char {
        match self {
            Group::A => 'A',
            Group::B => 'B',
            Group::C => 'C',
            Group::D => 'D',
            Group::E => 'E',
            Group::F => 'F',
            Group::G => 'G',
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Group::A => "Registration and plugin API versions",
            Group::B => "Prepare and unprepare",
            Group::C => "Claims in pods: configuration, containers, sharing",
            Group::D => "ResourceSlices",
            Group::E => "Features behind feature gates, on by default in 1.37",
            Group::F => "Resource health: ResourceHealthStatus, beta and on by default",
            Group::G => "Device metadata: new in 1.37, no feature gate",
        }
    }

    /// Behind a feature gate: a driver may leave the feature out, so these rows are counted
    /// apart from the core.
    pub fn gated(self) -> bool {
        matches!(self, Group::E | Group::F)
    }
}

/// A row's ID: its group and its number in the group, `A1` as people write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowId {
    A(u8),
    B(u8),
    C(u8),
    D(u8),
    E(u8),
    F(u8),
    G(u8),
}

impl RowId {
    pub fn group(self) -> Group {
        match self {
            RowId::A(_) => Group::A,
            RowId::B(_) => Group::B,
            RowId::C(_) => Group::C,
            RowId::D(_) => Group::D,
            RowId::E(_) => Group::E,
            RowId::F(_) => Group::F,
            RowId::G(_) => Group::G,
        }
    }

    pub fn number(self) -> u8 {
        match self {
            RowId::A(n) | RowId::B(n) | RowId::C(n) | RowId::D(n) | RowId::E(n) | RowId::F(n) | RowId::G(n) => n,
        }
    }
}

impl std::fmt::Display for RowId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", self.group().letter(), self.number())
    }
}

/// Where an upstream test is defined: a file of the k8s.io/kubernetes v1.37.2 module and the
/// line of its `It`, `Entry` or subtest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct At {
    pub file: &'static str,
    pub line: u32,
}

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// A test of `test/e2e/dra/dra.go`.
pub const fn e2e(line: u32) -> At {
    At { file: "test/e2e/dra/dra.go", line }
}

/// A test of `test/e2e_node/dra_test.go`.
pub const fn e2e_node(line: u32) -> At {
    At { file: "test/e2e_node/dra_test.go", line }
}

/// The integration tests of the core API (`testPublishResourceSlices` and its kin).
pub const INTEGRATION_CORE: &str = "test/integration/dra/core.go";
/// The integration tests of device binding conditions.
pub const INTEGRATION_BINDING_CONDITIONS: &str = "test/integration/dra/binding_conditions.go";

/// A test of `file` under `test/integration/dra`.
pub const fn integration(file: &'static str, line: u32) -> At {
    At { file, line }
}

/// How far the guarantees here answer for an upstream test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A driver bug that fails the upstream test fails a guarantee here.
    Covered,
    /// The driver's part is checked in some shape; the text says, in one sentence, what a
    /// driver bug that upstream catches gets past here.
    Partial(&'static str),
    /// Nothing here checks the driver's part; the text says why, in one sentence.
    Missing(&'static str),
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Covered => "covered",
            Verdict::Partial(_) => "partial",
            Verdict::Missing(_) => "missing",
        }
    }

    /// What is not checked, for a partial or missing row.
    pub fn gap(self) -> Option<&'static str> {
        match self {
            Verdict::Covered => None,
            Verdict::Partial(gap) | Verdict::Missing(gap) => Some(gap),
        }
    }
}

/// One upstream test in which a driver can pass or fail, and what here fails with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamRow {
    pub id: RowId,
    /// The upstream test's name, its context first where the name alone is ambiguous.
    pub test: &'static str,
    pub at: At,
    /// What the upstream test asserts of the driver (not of the kubelet or the scheduler).
    pub asserts: &'static str,
    /// The guarantees that fail with a driver bug the upstream test catches.
    pub guarantees: &'static [&'static str],
    pub verdict: Verdict,
}

/// The rows declared beside the scenarios that answer for them, one list per module.
const BESIDE_SCENARIOS: &[&[UpstreamRow]] = &[
    plugin::registration::UPSTREAM,
    plugin::registration_retry::UPSTREAM,
    plugin::restart::UPSTREAM,
    plugin::prepare::UPSTREAM,
    plugin::prepare_retry::UPSTREAM,
    plugin::idempotent::UPSTREAM,
    plugin::unknown_unprepare::UPSTREAM,
    plugin::shares::UPSTREAM,
    plugin::slices::UPSTREAM,
    plugin::slices_kept::UPSTREAM,
    plugin::permissions::UPSTREAM,
    plugin::inventory_change::UPSTREAM,
    plugin::health::UPSTREAM,
    cluster::compatible::UPSTREAM,
    cluster::isolation::UPSTREAM,
    cluster::lifecycle::UPSTREAM,
    cluster::prepared_claim::UPSTREAM,
    cluster::force_delete::UPSTREAM,
    cluster::exhaustion::UPSTREAM,
    cluster::config::UPSTREAM,
    cluster::coexistence::UPSTREAM,
    cluster::prioritized_list::UPSTREAM,
    cluster::partitionable::UPSTREAM,
    cluster::consumable_capacity::UPSTREAM,
    cluster::binding_conditions::UPSTREAM,
    cluster::device_status::UPSTREAM,
    cluster::health::UPSTREAM,
    cluster::taints::UPSTREAM,
    cluster::extended_resource::UPSTREAM,
    cluster::admin_access::UPSTREAM,
    cluster::container_restart::UPSTREAM,
    cluster::driver_restart::UPSTREAM,
    cluster::driver_upgrade::UPSTREAM,
    cluster::node_restart::UPSTREAM,
    cluster::driver_outage::UPSTREAM,
];

/// Every row, in order of its ID.
pub fn rows() -> Vec<&'static UpstreamRow> {
    let mut all: Vec<&'static UpstreamRow> =
        BESIDE_SCENARIOS.iter().flat_map(|rows| rows.iter()).chain(missing::UPSTREAM).collect();
    all.sort_by_key(|r| (r.id.group(), r.id.number()));
    all
}

/// How many rows of a scope are covered, partial and missing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub rows: usize,
    pub covered: usize,
    pub partial: usize,
    pub missing: usize,
}

impl Counts {
    pub fn of<'a>(rows: impl IntoIterator<Item = &'a UpstreamRow>) -> Counts {
        let mut c = Counts::default();
        for r in rows {
            c.rows += 1;
            match r.verdict {
                Verdict::Covered => c.covered += 1,
                Verdict::Partial(_) => c.partial += 1,
                Verdict::Missing(_) => c.missing += 1,
            }
        }
        c
    }

    /// The covered share in percent; 0 for no rows.
    pub fn covered_percent(&self) -> f64 {
        if self.rows == 0 { 0.0 } else { 100.0 * self.covered as f64 / self.rows as f64 }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// The rows by group: upstream's driver-relevant tests of 1.37 with their features on by
    /// default. A row added or dropped changes this list, on purpose.
    const SIZES: [(Group, u8); 7] =
        [(Group::A, 9), (Group::B, 18), (Group::C, 15), (Group::D, 14), (Group::E, 21), (Group::F, 8), (Group::G, 4)];

    #[test]
    fn the_rows_are_a1_to_g4_each_once() {
        let want: Vec<String> =
            SIZES.iter().flat_map(|&(group, n)| (1..=n).map(move |i| format!("{}{i}", group.letter()))).collect();
        let got: Vec<String> = rows().iter().map(|r| r.id.to_string()).collect();
        let mut seen = BTreeSet::new();
        let twice: Vec<&String> = got.iter().filter(|id| !seen.insert(*id)).collect();
        assert!(twice.is_empty(), "rows declared twice: {twice:?}");
        assert_eq!(got, want);
        assert_eq!(got.len(), 89);
    }

    #[test]
    fn covered_and_partial_rows_name_guarantees_the_suite_checks() {
        let known: BTreeSet<&str> = crate::catalogue::entries().iter().map(|e| e.id).collect();
        for r in rows() {
            match r.verdict {
                Verdict::Covered | Verdict::Partial(_) => {
                    assert!(!r.guarantees.is_empty(), "{} is {} but names no guarantee", r.id, r.verdict.name())
                }
                Verdict::Missing(_) => {
                    assert!(r.guarantees.is_empty(), "{} is missing yet names {:?}", r.id, r.guarantees)
                }
            }
            for id in r.guarantees {
                assert!(known.contains(id), "{} names {id}, which no scenario checks", r.id);
            }
            if let Some(gap) = r.verdict.gap() {
                assert!(!gap.trim().is_empty(), "{} is {} without saying what is not checked", r.id, r.verdict.name());
            }
        }
    }

    /// A row answered for in some shape sits beside its scenario; the others in one place.
    #[test]
    fn missing_rows_are_central_and_the_others_beside_their_scenarios() {
        for r in BESIDE_SCENARIOS.iter().flat_map(|rows| rows.iter()) {
            assert!(
                !matches!(r.verdict, Verdict::Missing(_)),
                "{} is missing: declare it in coverage/missing.rs",
                r.id
            );
        }
        for r in missing::UPSTREAM {
            assert!(
                matches!(r.verdict, Verdict::Missing(_)),
                "{} is {}: declare it beside its scenario",
                r.id,
                r.verdict.name()
            );
        }
    }

    #[test]
    fn every_text_fits_a_table_cell() {
        for r in rows() {
            let texts = [r.test, r.asserts, r.verdict.gap().unwrap_or_default(), r.at.file];
            for text in texts {
                assert!(!text.contains('\n') && !text.contains('|'), "{}: {text:?} would break its table row", r.id);
            }
            assert!(r.at.line > 0, "{}: no line", r.id);
        }
    }

    #[test]
    fn the_counts_add_up() {
        let all = Counts::of(rows());
        assert_eq!(all.rows, all.covered + all.partial + all.missing);
        let by_group: usize =
            Group::ALL.iter().map(|g| Counts::of(rows().into_iter().filter(|r| r.id.group() == *g)).rows).sum();
        assert_eq!(by_group, all.rows);
    }
}
