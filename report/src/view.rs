//! What every format shows of a result, computed once: its sections (the driver contract, then
//! one per profile), verdict counts, headline and durations.

use dracheck_results::levels::Level;
use dracheck_results::{GuaranteeResult, RunResult, Verdict};

pub struct Section<'a> {
    /// `driver` or the profile's name: the JUnit suite, the heading, the matrix row prefix.
    pub key: String,
    pub title: String,
    pub guarantees: &'a [GuaranteeResult],
}

pub fn sections(r: &RunResult) -> Vec<Section<'_>> {
    let mut out = vec![Section {
        key: "driver".into(),
        title: format!("Driver contract ({})", r.driver.name),
        guarantees: &r.driver_guarantees,
    }];
    out.extend(r.profiles.iter().map(|p| Section {
        key: p.name.clone(),
        title: format!("Profile {} (DeviceClass {})", p.name, p.device_class),
        guarantees: &p.guarantees,
    }));
    out.retain(|s| !s.guarantees.is_empty());
    out
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub pass: usize,
    pub fail: usize,
    pub skip: usize,
}

impl Counts {
    pub fn of<'a>(gs: impl IntoIterator<Item = &'a GuaranteeResult>) -> Counts {
        gs.into_iter().fold(Counts::default(), |mut c, g| {
            match g.verdict {
                Verdict::Pass => c.pass += 1,
                Verdict::Fail => c.fail += 1,
                Verdict::Skip => c.skip += 1,
            }
            c
        })
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} passed, {} failed, {} skipped", self.pass, self.fail, self.skip)
    }
}

/// One line that says what was checked where.
pub fn headline(r: &RunResult) -> String {
    format!(
        "{} {} on Kubernetes {} ({})",
        r.driver.name,
        r.driver.version,
        r.cluster.kubernetes_version,
        r.cluster.describe()
    )
}

/// The time a guarantee's check measured, in seconds (the sum of its named durations).
pub fn seconds(g: &GuaranteeResult) -> f64 {
    g.durations.values().sum()
}

/// `allocation 1.2s, prepare 0.3s`.
pub fn durations(g: &GuaranteeResult) -> String {
    g.durations.iter().map(|(k, v)| format!("{k} {v:.1}s")).collect::<Vec<_>>().join(", ")
}

/// The verdict as a report cell; a failed `should` is advice the driver does not follow, not
/// a failure of the contract.
pub fn symbol(g: &GuaranteeResult) -> &'static str {
    match (g.verdict, g.level) {
        (Verdict::Pass, _) => "✅ pass",
        (Verdict::Fail, Level::Must) => "❌ fail",
        (Verdict::Fail, Level::Should) => "⚠️ fail (should)",
        (Verdict::Skip, _) => "⏭️ skip",
    }
}
