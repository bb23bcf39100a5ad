//! Rendered output of fixed results, reviewed through snapshots in the top-level `snapshots/`
//! (timings redacted), and the promises every format keeps: well-formed, complete, no secrets.

use std::path::Path;

use dracheck_report::redact::Redactor;
use dracheck_report::{Format, load, render};
use dracheck_results::{Evidence, RunResult, Verdict};
use quick_junit::Report;

fn fixture() -> RunResult {
    load::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mock-run.json")).expect("the fixture loads")
}

fn snapshot(name: &str, text: &str) {
    insta::with_settings!({
        snapshot_path => "../../snapshots/report",
        prepend_module_to_snapshot => false,
        filters => vec![
            (r#"time="[0-9.]+""#, r#"time="[time]""#),
            (r"\b[0-9]+\.[0-9]+s\b", "[time]s"),
            (r"\b20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z\b", "[timestamp]"),
        ],
    }, {
        insta::assert_snapshot!(name, text);
    });
}

#[test]
fn junit_snapshot() {
    snapshot("junit", &render(&fixture(), Format::Junit, &Redactor::default()));
}

#[test]
fn markdown_snapshot() {
    snapshot("markdown", &render(&fixture(), Format::Markdown, &Redactor::default()));
}

#[test]
fn html_snapshot() {
    snapshot("html", &render(&fixture(), Format::Html, &Redactor::default()));
}

#[test]
fn junit_has_one_case_per_guarantee_with_failures_and_skips_as_such() {
    let r = fixture();
    let xml = render(&r, Format::Junit, &Redactor::default());
    let report = Report::deserialize_from_str(&xml).expect("the JUnit XML parses back");
    let cases: Vec<_> = report.test_suites.iter().flat_map(|s| s.test_cases.iter()).collect();
    assert_eq!(cases.len(), r.all().count());
    let failures = cases.iter().filter(|c| matches!(c.status, quick_junit::TestCaseStatus::NonSuccess { .. })).count();
    let skips = cases.iter().filter(|c| matches!(c.status, quick_junit::TestCaseStatus::Skipped { .. })).count();
    assert_eq!(failures, r.all().filter(|g| g.verdict == Verdict::Fail).count());
    assert_eq!(skips, r.all().filter(|g| g.verdict == Verdict::Skip).count());
    assert_eq!(report.test_suites.len(), 2, "the driver contract and one profile");
    assert!(xml.contains("the profile promises no shared claims"), "a skip carries its reason");
}

/// CI systems key a case's history on its name, and show its time: a name is unique across
/// profiles, and a case with no measured step takes its scenario's time.
#[test]
fn junit_cases_are_named_per_section_and_timed_by_their_scenario() {
    let r = fixture();
    let xml = render(&r, Format::Junit, &Redactor::default());
    let report = Report::deserialize_from_str(&xml).unwrap();
    let names: Vec<String> =
        report.test_suites.iter().flat_map(|s| s.test_cases.iter()).map(|c| c.name.to_string()).collect();
    let unique: std::collections::BTreeSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    assert!(names.contains(&"driver/plugin.registration.info".to_string()), "{names:?}");
    let profile = &r.profiles[0];
    let compatible = report
        .test_suites
        .iter()
        .flat_map(|s| s.test_cases.iter())
        .find(|c| c.name.as_str() == format!("{}/claim.compatible.allocated", profile.name))
        .expect("the compatible case");
    let scenario = r.timings[&format!("scenario:{}/compatible", profile.name)];
    let own: f64 =
        profile.guarantees.iter().find(|g| g.id == "claim.compatible.allocated").unwrap().durations.values().sum();
    let expected = if own > 0.0 { own } else { scenario };
    assert!((compatible.time.unwrap().as_secs_f64() - expected).abs() < 0.01, "{:?}", compatible.time);
    assert!(report.test_suites.iter().all(|s| s.time.is_some()), "suites are timed");
}

/// A reader sees what failed, and how to rerun it, before anything else; the skips once per
/// reason; the facts folded away.
#[test]
fn reports_lead_with_the_failures_then_the_skips_by_reason() {
    let r = fixture();
    for (format, heading, facts) in [
        (Format::Markdown, "### Driver contract", "resource.k8s.io v1"),
        (Format::Html, "<h2>Driver contract", "<th>resource.k8s.io</th>"),
    ] {
        let text = render(&r, format, &Redactor::default());
        let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{format:?} lacks {s:?}:\n{text}"));
        assert!(at("What failed") < at("Skipped, by reason"), "{format:?}");
        assert!(at("Skipped, by reason") < at(heading), "{format:?}");
        assert!(at("What failed") < at(facts), "{format:?}: the facts come after the failures");
        for g in r.all().filter(|g| g.verdict == Verdict::Fail) {
            assert!(text.contains(&format!("--only {}", g.id)), "{format:?}: how to rerun {}", g.id);
        }
        assert!(text.contains("the profile promises no shared claims (1)"), "{format:?}: a skip reason with its count");
    }
}

/// A run of a driver broken on purpose, or a filtered one, says so before any verdict.
#[test]
fn a_shaped_run_says_how_at_the_top_of_every_report() {
    let mut r = fixture();
    r.shape = dracheck_results::RunShape {
        faults: vec!["hang-prepare".into()],
        only: vec!["plugin.*".into()],
        ..Default::default()
    };
    let md = render(&r, Format::Markdown, &Redactor::default());
    let first_table = md.find("| guarantee").unwrap();
    let note = md.find("> ⚠️ run with fault `hang-prepare`").expect("the fault note");
    assert!(note < first_table, "{md}");
    assert!(md.contains("> ⚠️ only the guarantees matching `plugin.*` ran."), "{md}");
    let html = render(&r, Format::Html, &Redactor::default());
    let note = html.find("<p class=\"note\">⚠️ run with fault hang-prepare").expect("the fault note in HTML");
    assert!(note < html.find("<table").unwrap(), "{html}");
    let xml = render(&r, Format::Junit, &Redactor::default());
    assert!(xml.contains("name=\"run.fault\" value=\"hang-prepare\""), "{xml}");
    // A whole run says nothing of it.
    assert!(!render(&fixture(), Format::Markdown, &Redactor::default()).contains("⚠️ run with"));
}

#[test]
fn html_is_one_self_contained_file_with_escaped_text() {
    let html = render(&fixture(), Format::Html, &Redactor::default());
    for external in ["<script", "<link", "src=\"http", "href=\"http", "@import", "url("] {
        assert!(!html.contains(external), "the page must not load anything: found {external}");
    }
    assert!(html.contains("pipes &amp; &lt;angles&gt;"), "evidence text is escaped");
    assert!(!html.contains("<angles>"));
    assert!(html.contains("<details open><summary>evidence (2)"), "a failure's evidence is open");
}

#[test]
fn markdown_tables_stay_tables() {
    let md = render(&fixture(), Format::Markdown, &Redactor::default());
    let table_rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| `")).collect();
    let failed = fixture().all().filter(|g| g.verdict == Verdict::Fail).count();
    assert_eq!(table_rows.len(), fixture().all().count() + failed, "a row per guarantee, and the failures again first");
    for row in table_rows {
        assert_eq!(row.matches(" | ").count() - row.matches("\\|").count(), 3, "four cells: {row}");
    }
    assert!(!md.contains("```\nfence inside"), "a fence in evidence must not end the block");
}

/// A kubeconfig with a bearer token and client key: none of it may reach any output, even when
/// a driver log in the evidence echoes it.
#[test]
fn no_format_leaks_kubeconfig_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let token = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0LXNlcnZpY2UtYWNjb3VudA.c2lnbmF0dXJlLWJ5dGVz";
    let key = "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVF";
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: {token}\n    client-key-data: {key}\n"
    );
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, &kubeconfig).unwrap();

    let mut r = fixture();
    r.profiles[0].guarantees[1].evidence.push(Evidence { title: "driver log".into(), body: kubeconfig.clone() });
    r.driver_guarantees[1].reason = format!("the driver logged its credentials: Authorization: Bearer {token}");
    r.driver_guarantees[0]
        .evidence
        .push(Evidence { title: "env".into(), body: format!("KUBE_TOKEN={token}\nKEY={key}") });

    let redactor = Redactor::default().with_kubeconfig(&path);
    let mut outputs: Vec<(String, String)> =
        Format::ALL.iter().map(|f| (format!("{f:?}"), render(&r, *f, &redactor))).collect();
    let mut scrubbed = r.clone();
    redactor.result(&mut scrubbed);
    outputs.push(("json".into(), serde_json::to_string_pretty(&scrubbed).unwrap()));
    for (format, text) in &outputs {
        for secret in [token, key, "c2VjcmV0LXNlcnZpY2UtYWNjb3VudA"] {
            assert!(!text.contains(secret), "{format} leaks {secret}");
        }
        assert!(text.contains("&lt;redacted&gt;") || text.contains("<redacted>"), "{format} shows where it scrubbed");
    }
    // The shape-based net alone, as for a result rendered on another machine.
    let alone = render(&r, Format::Markdown, &Redactor::default());
    assert!(!alone.contains(token), "a JWT-shaped token is scrubbed without the kubeconfig");
}

#[test]
fn files_beside_the_json() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("mock-v1.37.2-run1.json");
    let written = dracheck_report::render_beside(&json, &fixture(), &Redactor::default()).unwrap();
    let names: Vec<String> = written.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["junit_mock-v1.37.2-run1.xml", "mock-v1.37.2-run1.md", "mock-v1.37.2-run1.html"]);
    assert!(written.iter().all(|p| std::fs::metadata(p).unwrap().len() > 200));
}
