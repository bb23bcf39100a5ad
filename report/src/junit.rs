//! JUnit XML: one suite per section, one test case per guarantee. Skips carry their reason;
//! failures their reason as the message and the evidence as the description, which CI systems
//! show on the failure's page.

use std::time::Duration;

use dracheck_results::{RunResult, Verdict};
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use crate::view;

/// Evidence beyond this is cut: CI systems choke on megabytes in one attribute.
const EVIDENCE_LIMIT: usize = 16 * 1024;

pub fn render(r: &RunResult) -> String {
    let mut report = Report::new(format!("dracheck: {}", view::headline(r)));
    report.set_time(Duration::from_secs_f64(r.duration_seconds.max(0.0)));
    let started = chrono::DateTime::parse_from_rfc3339(&r.started_at).ok();
    if let Some(t) = started {
        report.set_timestamp(t);
    }
    for section in view::sections(r) {
        let mut suite = TestSuite::new(format!("dracheck.{}", section.key));
        // JUnit has no place for the run's facts but each suite's properties, which CI
        // systems show beside the cases: what the verdicts are of.
        suite.add_properties(properties(r));
        if let Some(t) = started {
            suite.set_timestamp(t);
        }
        suite.set_time(Duration::from_secs_f64(view::section_seconds(r, &section)));
        for g in section.guarantees {
            let mut status = match g.verdict {
                Verdict::Pass => TestCaseStatus::success(),
                Verdict::Fail => TestCaseStatus::non_success(NonSuccessKind::Failure),
                Verdict::Skip => TestCaseStatus::skipped(),
            };
            if g.verdict != Verdict::Pass {
                // A failed `should` is advice the driver does not follow: it stays a failure in
                // the report, marked as such, while the run's exit code ignores it.
                match (g.verdict, g.level) {
                    (Verdict::Fail, dracheck_results::levels::Level::Should) => {
                        status.set_message(format!("[should] {}", g.reason))
                    }
                    _ => status.set_message(g.reason.as_str()),
                };
            }
            if g.verdict == Verdict::Fail && !g.evidence.is_empty() {
                status.set_description(evidence_summary(g));
            }
            // CI systems key a case's history on its name: the same ID under two profiles
            // is two cases.
            let mut case = TestCase::new(format!("{}/{}", section.key, g.id), status);
            case.set_classname(format!("dracheck.{}.{}", section.key, g.scenario));
            case.set_time(Duration::from_secs_f64(view::case_seconds(r, &section, g)));
            if g.verdict == Verdict::Pass {
                case.set_system_out(g.reason.as_str());
            }
            suite.add_test_case(case);
        }
        report.add_test_suite(suite);
    }
    report.to_string().expect("a JUnit report of plain strings serializes")
}

/// The facts a verdict holds for: the driver and its version, the Kubernetes version and the
/// cluster it ran on.
fn properties(r: &RunResult) -> Vec<Property> {
    let mut out = vec![
        Property::new("dracheck.version", r.dracheck_version.as_str()),
        Property::new("driver", r.driver.name.as_str()),
        Property::new("driver.version", r.driver.version.as_str()),
        Property::new("kubernetes.version", r.cluster.kubernetes_version.as_str()),
        Property::new("cluster", r.cluster.provider.as_str()),
        Property::new("cluster.nodes", r.cluster.nodes.to_string()),
    ];
    if let Some(kind) = &r.cluster.node_kind {
        out.push(Property::new("cluster.node-kind", kind.as_str()));
    }
    for fault in &r.shape.faults {
        out.push(Property::new("run.fault", fault.as_str()));
    }
    for glob in &r.shape.only {
        out.push(Property::new("run.only", glob.as_str()));
    }
    for glob in &r.shape.skip {
        out.push(Property::new("run.skip", glob.as_str()));
    }
    out
}

fn evidence_summary(g: &dracheck_results::GuaranteeResult) -> String {
    let mut out = String::new();
    for e in &g.evidence {
        out.push_str(&format!("== {} ==\n{}\n", e.title, e.body.trim_end()));
    }
    if out.len() > EVIDENCE_LIMIT {
        let cut = (0..=EVIDENCE_LIMIT).rev().find(|i| out.is_char_boundary(*i)).unwrap_or(0);
        out.truncate(cut);
        out.push_str("\n… (cut; the JSON result holds all of it)");
    }
    out
}
