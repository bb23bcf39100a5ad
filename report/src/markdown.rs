//! A Markdown summary for pull-request comments and CI step summaries: the headline, what the
//! run's flags made of it, the counts, what failed (the failed `must`s first, each with how to
//! rerun it alone), the skips grouped by reason, the run's facts folded, then one table per
//! section with the evidence of failures folded under `<details>`.

use dracheck_results::{RunResult, Verdict};

use crate::view::{self, Counts};

/// Evidence bodies beyond this many lines are cut in a comment; the HTML page has them all.
const EVIDENCE_LINES: usize = 40;

pub fn render(r: &RunResult) -> String {
    let counts = Counts::of(r.all());
    let mut out = format!("## dracheck: {}\n\n", view::headline(r));
    for note in r.shape.notes() {
        out.push_str(&format!("> ⚠️ {note}.\n\n"));
    }
    let status = if counts.fail == 0 { "every checked guarantee held" } else { "some guarantees did not hold" };
    out.push_str(&format!("**{counts}** — {status}.\n\n"));
    let sections = view::sections(r);
    let failures = view::failures(&sections);
    if !failures.is_empty() {
        out.push_str("### What failed\n\n| guarantee | where | reason | rerun just this check |\n|---|---|---|---|\n");
        for f in &failures {
            out.push_str(&format!(
                "| `{}` | {} | {}: {} | add `{}` to the run's command |\n",
                f.guarantee.id,
                cell(&f.section.title),
                view::symbol(f.guarantee),
                cell(&f.guarantee.reason),
                view::rerun(f.guarantee)
            ));
        }
        out.push('\n');
    }
    let skips = view::skips_by_reason(&sections);
    if !skips.is_empty() {
        out.push_str("### Skipped, by reason\n\n");
        for (reason, ids) in &skips {
            let ids: Vec<String> = ids.iter().map(|id| format!("`{id}`")).collect();
            out.push_str(&format!("- {} ({}): {}\n", cell(reason), ids.len(), ids.join(", ")));
        }
        out.push('\n');
    }
    out.push_str("<details><summary>The run</summary>\n\n");
    let features = r.cluster.served_features_line();
    let features = if features.is_empty() { features } else { format!(" · {features}") };
    out.push_str(&format!(
        "resource.k8s.io {}{features} · started {} · {:.0}s\n\n",
        r.cluster.resource_api_versions.join(", "),
        r.started_at,
        r.duration_seconds
    ));
    let gates = r.cluster.enabled_gates_line();
    if !gates.is_empty() {
        out.push_str(&format!("DRA gates (API server): {gates}\n\n"));
    }
    out.push_str("</details>\n\n");
    for section in &sections {
        out.push_str(&format!("### {}\n\n| guarantee | verdict | reason | time |\n|---|---|---|---|\n", section.title));
        for g in section.guarantees {
            out.push_str(&format!(
                "| `{}` | {} | {} | {} |\n",
                g.id,
                view::symbol(g),
                cell(&g.reason),
                cell(&view::durations(g))
            ));
        }
        out.push('\n');
        for g in section.guarantees.iter().filter(|g| g.verdict == Verdict::Fail && !g.evidence.is_empty()) {
            out.push_str(&format!("<details><summary>Evidence for <code>{}</code></summary>\n\n", g.id));
            for e in &g.evidence {
                out.push_str(&format!("**{}**\n\n```text\n{}\n```\n\n", e.title, fence_safe(&cut(&e.body))));
            }
            out.push_str("</details>\n\n");
        }
    }
    out
}

/// A table cell: one line, pipes escaped, and no `<…>` a renderer could take for a tag.
pub fn cell(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('|', "\\|")
        .replace('\r', "")
        .replace('\n', "<br>")
}

fn cut(body: &str) -> String {
    let lines: Vec<&str> = body.trim_end().lines().collect();
    if lines.len() <= EVIDENCE_LINES {
        return lines.join("\n");
    }
    format!(
        "{}\n… ({} more lines in the JSON result)",
        lines[..EVIDENCE_LINES].join("\n"),
        lines.len() - EVIDENCE_LINES
    )
}

/// A body that holds a fence would end the code block early.
fn fence_safe(s: &str) -> String {
    s.replace("```", "ˋˋˋ")
}
