//! A static HTML page of one run: one file, no scripts, no network, no external assets, so it
//! opens from a CI artifact or a mail attachment as it is. It opens with what failed and how
//! to rerun each, then the skips by reason; the facts and evidence fold with `<details>`.

use dracheck_results::{RunResult, Verdict};

use crate::view::{self, Counts};

pub fn render(r: &RunResult) -> String {
    let counts = Counts::of(r.all());
    let mut body = format!("<h1>dracheck: {}</h1>\n", esc(&view::headline(r)));
    for note in r.shape.notes() {
        body.push_str(&format!("<p class=\"note\">⚠️ {}.</p>\n", esc(&note).replace('`', "")));
    }
    body.push_str(&format!(
        "<p class=\"counts\"><span class=\"v pass\">{} passed</span> <span class=\"v fail\">{} failed</span> <span class=\"v skip\">{} skipped</span></p>\n",
        counts.pass, counts.fail, counts.skip
    ));
    let sections = view::sections(r);
    let failures = view::failures(&sections);
    if !failures.is_empty() {
        body.push_str("<h2>What failed</h2>\n<table class=\"results\">\n<tr><th>guarantee</th><th>verdict</th><th>reason</th><th>rerun just this check</th></tr>\n");
        for f in &failures {
            let g = f.guarantee;
            body.push_str(&format!(
                "<tr><td class=\"id\"><a href=\"#{anchor}\"><code>{id}</code></a><br><small>{section}</small></td><td>{badge}</td><td>{reason}</td><td>add <code>{rerun}</code> to the run's command</td></tr>\n",
                anchor = esc(&format!("{}.{}", f.section.key, g.id)),
                id = esc(&g.id),
                section = esc(&f.section.title),
                badge = verdict_badge(g),
                reason = esc(&g.reason),
                rerun = esc(&view::rerun(g)),
            ));
        }
        body.push_str("</table>\n");
    }
    let skips = view::skips_by_reason(&sections);
    if !skips.is_empty() {
        body.push_str("<h2>Skipped, by reason</h2>\n<ul class=\"skips\">\n");
        for (reason, ids) in &skips {
            let ids: Vec<String> = ids.iter().map(|id| format!("<code>{}</code>", esc(id))).collect();
            body.push_str(&format!("<li>{} ({}): {}</li>\n", esc(reason), ids.len(), ids.join(", ")));
        }
        body.push_str("</ul>\n");
    }
    body.push_str("<details class=\"facts\"><summary>The run: driver, cluster, versions, gates</summary>\n<table class=\"facts\">\n");
    let facts = [
        ("driver", format!("{} {}", r.driver.name, r.driver.version)),
        ("driver artifact", r.driver.artifact.clone()),
        ("Kubernetes", r.cluster.kubernetes_version.clone()),
        ("resource.k8s.io", r.cluster.resource_api_versions.join(", ")),
        ("cluster", r.cluster.describe()),
        (
            "feature gates",
            if r.cluster.feature_gates.is_empty() { "(defaults)".into() } else { r.cluster.feature_gates.clone() },
        ),
        ("features served", r.cluster.served_features_line()),
        ("DRA gates (API server)", r.cluster.enabled_gates_line()),
        ("started", r.started_at.clone()),
        ("duration", format!("{:.1}s", r.duration_seconds)),
        ("dracheck", r.dracheck_version.clone()),
    ];
    for (k, v) in facts.into_iter().filter(|(_, v)| !v.is_empty()) {
        body.push_str(&format!("<tr><th>{}</th><td>{}</td></tr>\n", esc(k), esc(&v)));
    }
    body.push_str("</table>\n</details>\n");
    for section in &sections {
        body.push_str(&format!("<h2>{}</h2>\n", esc(&section.title)));
        body.push_str(
            "<table class=\"results\">\n<tr><th>guarantee</th><th>verdict</th><th>reason</th><th>time</th></tr>\n",
        );
        for g in section.guarantees {
            let evidence = if g.evidence.is_empty() {
                String::new()
            } else {
                let open = if g.verdict == Verdict::Fail { " open" } else { "" };
                let items: String = g
                    .evidence
                    .iter()
                    .map(|e| format!("<h4>{}</h4><pre>{}</pre>", esc(&e.title), esc(&e.body)))
                    .collect();
                format!("<details{open}><summary>evidence ({})</summary>{items}</details>", g.evidence.len())
            };
            body.push_str(&format!(
                "<tr id=\"{anchor}\"><td class=\"id\"><code>{id}</code><br><small>{scenario}</small></td><td>{badge}</td><td>{reason}{evidence}</td><td class=\"time\">{time}</td></tr>\n",
                anchor = esc(&format!("{}.{}", section.key, g.id)),
                id = esc(&g.id),
                scenario = esc(&g.scenario),
                badge = verdict_badge(g),
                reason = esc(&g.reason),
                time = esc(&view::durations(g)).replace(", ", "<br>"),
            ));
        }
        body.push_str("</table>\n");
    }
    for p in r.profiles.iter().filter(|p| !p.allocated_devices.is_empty()) {
        body.push_str(&format!(
            "<details><summary>What claims of {} got ({} devices)</summary><table class=\"results\"><tr><th>driver</th><th>pool/device</th><th>attributes</th><th>capacity</th></tr>\n",
            esc(&p.name),
            p.allocated_devices.len()
        ));
        for d in &p.allocated_devices {
            let kv = |m: &std::collections::BTreeMap<String, String>| {
                m.iter().map(|(k, v)| format!("{}={}", esc(k), esc(v))).collect::<Vec<_>>().join("<br>")
            };
            body.push_str(&format!(
                "<tr><td>{}</td><td>{}/{}</td><td>{}</td><td>{}</td></tr>\n",
                esc(&d.driver),
                esc(&d.pool),
                esc(&d.device),
                kv(&d.attributes),
                kv(&d.capacity)
            ));
        }
        body.push_str("</table></details>\n");
    }
    if !r.timings.is_empty() {
        body.push_str("<details><summary>Where the time went</summary><table class=\"results\">\n");
        for (k, v) in &r.timings {
            body.push_str(&format!("<tr><td>{}</td><td class=\"time\">{v:.1}s</td></tr>\n", esc(k)));
        }
        body.push_str("</table></details>\n");
    }
    page(&format!("dracheck: {}", view::headline(r)), &body)
}

pub fn badge(v: Verdict) -> String {
    format!("<span class=\"v {v}\">{v}</span>")
}

/// A guarantee's verdict; a failed `should` is advice not followed, not a failed contract.
fn verdict_badge(g: &dracheck_results::GuaranteeResult) -> String {
    match (g.verdict, g.level) {
        (Verdict::Fail, dracheck_results::levels::Level::Should) => {
            "<span class=\"v warn\">fail (should)</span>".into()
        }
        (v, _) => badge(v),
    }
}

/// The page around a body: the one stylesheet, inline. Wide tables scroll inside their box
/// instead of pushing the page wider than a laptop screen.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}</body>\n</html>\n",
        esc(title)
    )
}

const STYLE: &str = "
body { font: 14px/1.45 system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 1.5rem; color: #1d232a; max-width: 100%; }
h1 { font-size: 1.4rem; margin: 0 0 .5rem; } h2 { font-size: 1.15rem; margin: 1.6rem 0 .5rem; }
table { border-collapse: collapse; margin: .4rem 0; }
th, td { border: 1px solid #d0d7de; padding: .3rem .5rem; text-align: left; vertical-align: top; }
th { background: #f3f5f7; font-weight: 600; }
table.facts th { width: 10rem; }
table.results td { max-width: 60rem; overflow-wrap: anywhere; }
td.time { white-space: nowrap; color: #57606a; font-size: .9em; }
table.results td.id { white-space: nowrap; overflow-wrap: normal; } td.id code { font-weight: 600; }
small { color: #57606a; }
.v { display: inline-block; min-width: 3.2em; text-align: center; padding: .05rem .4rem; border-radius: .3rem; font-weight: 600; font-size: .85em; text-decoration: none; }
.v.pass { background: #dafbe1; color: #116329; } .v.fail { background: #ffebe9; color: #a40e26; } .v.skip { background: #eef1f4; color: #57606a; }
.v.none { color: #8c959f; } .v.warn { background: #fff8c5; color: #7d4e00; }
p.counts .v { margin-right: .4rem; }
p.note { background: #fff8c5; border: 1px solid #d4a72c; border-radius: .3rem; padding: .4rem .6rem; font-weight: 600; }
details { margin: .3rem 0; } summary { cursor: pointer; color: #0969da; }
pre { background: #f6f8fa; padding: .5rem; overflow-x: auto; max-height: 24rem; font-size: 12px; white-space: pre-wrap; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; max-width: 100%; border: 1px solid #d0d7de; }
.scroll table { margin: 0; }
table.matrix th.col { writing-mode: vertical-rl; transform: rotate(180deg); white-space: nowrap; font-weight: 500; font-size: .85em; }
table.matrix td.row { position: sticky; left: 0; background: #fff; white-space: nowrap; font-family: ui-monospace, monospace; font-size: .85em; }
table.matrix td.cell { text-align: center; padding: .2rem; }
tr.regressed td.row { background: #fff8c5; }
";

/// Text as HTML: everything a browser could read as markup is escaped.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
