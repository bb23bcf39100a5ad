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

/// A failed guarantee with the section it failed in.
pub struct Failed<'a> {
    pub section: &'a Section<'a>,
    pub guarantee: &'a GuaranteeResult,
}

/// Every failed guarantee, the failed `must`s first (what fails the run), then the failed
/// `should`s, each in report order.
pub fn failures<'a>(sections: &'a [Section<'a>]) -> Vec<Failed<'a>> {
    let mut out: Vec<Failed<'a>> = sections
        .iter()
        .flat_map(|section| {
            section
                .guarantees
                .iter()
                .filter(|g| g.verdict == Verdict::Fail)
                .map(move |guarantee| Failed { section, guarantee })
        })
        .collect();
    out.sort_by_key(|f| f.guarantee.level == Level::Should);
    out
}

/// The skipped guarantees grouped by their reason, so that one missing ability reads as one
/// line, not as twenty: (reason, IDs), in the order the reasons first appear.
pub fn skips_by_reason<'a>(sections: &'a [Section<'a>]) -> Vec<(&'a str, Vec<&'a str>)> {
    let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
    for g in sections.iter().flat_map(|s| s.guarantees.iter()).filter(|g| g.verdict == Verdict::Skip) {
        match out.iter_mut().find(|(reason, _)| *reason == g.reason) {
            Some((_, ids)) if ids.contains(&g.id.as_str()) => {}
            Some((_, ids)) => ids.push(&g.id),
            None => out.push((&g.reason, vec![&g.id])),
        }
    }
    out
}

/// How to check one guarantee again: the run's own command with this added.
pub fn rerun(g: &GuaranteeResult) -> String {
    format!("--only {}", g.id)
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

/// The time a guarantee took: its check's own durations where it measured some, else the
/// time of the scenario that decided it (several guarantees share a scenario's time).
pub fn case_seconds(r: &RunResult, section: &Section<'_>, g: &GuaranteeResult) -> f64 {
    let own = seconds(g);
    let time = if own > 0.0 { own } else { scenario_seconds(r, section, &g.scenario) };
    time.max(0.0)
}

/// The time of scenario `name` of a section in the run's timings (`scenario:<section>/<name>`);
/// 0 where it has none (a skip).
fn scenario_seconds(r: &RunResult, section: &Section<'_>, name: &str) -> f64 {
    r.timings.get(&format!("scenario:{}/{name}", section.key)).copied().unwrap_or(0.0)
}

/// The time of a section's scenarios, each counted once, added up (they may have run side by
/// side, so this is work, not wall time).
pub fn section_seconds(r: &RunResult, section: &Section<'_>) -> f64 {
    let scenarios: std::collections::BTreeSet<&str> = section.guarantees.iter().map(|g| g.scenario.as_str()).collect();
    scenarios.into_iter().map(|s| scenario_seconds(r, section, s)).sum()
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
