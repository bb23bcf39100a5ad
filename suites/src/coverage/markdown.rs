//! The coverage as `suites/README.md` shows it: a table per group, then the counts, each
//! computed from the rows, so that no percentage is written by hand.

use std::fmt::Write as _;

use super::{Counts, Group, UpstreamRow, Verdict, rows};

/// The tables and the counts, as they stand in `suites/README.md`.
pub fn markdown() -> String {
    let rows = rows();
    let mut out = String::new();
    for group in Group::ALL {
        let mine: Vec<&UpstreamRow> = rows.iter().copied().filter(|r| r.id.group() == group).collect();
        let _ = writeln!(out, "### {}. {} ({} rows)\n", group.letter(), group.title(), mine.len());
        out.push_str("| # | upstream test | where | what upstream asserts of the driver | guarantees | verdict |\n");
        out.push_str("|---|---|---|---|---|---|\n");
        for r in mine {
            let _ = writeln!(
                out,
                "| {} | {} | `{}` | {} | {} | {} |",
                r.id,
                r.test,
                r.at,
                r.asserts,
                guarantees(r.guarantees),
                verdict(r.verdict)
            );
        }
        out.push('\n');
    }
    out.push_str("### Counts\n\n");
    out.push_str("| scope | rows | covered | partial | missing | covered % |\n|---|---|---|---|---|---|\n");
    let scope = |out: &mut String, name: &str, counts: Counts| {
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {} | {:.1}% |",
            counts.rows,
            counts.covered,
            counts.partial,
            counts.missing,
            counts.covered_percent()
        );
    };
    for group in Group::ALL {
        let counts = Counts::of(rows.iter().copied().filter(|r| r.id.group() == group));
        scope(&mut out, &format!("{}. {}", group.letter(), group.title()), counts);
    }
    scope(&mut out, "**core** (A–D, G)", Counts::of(rows.iter().copied().filter(|r| !r.id.group().gated())));
    scope(
        &mut out,
        "**gated**, on by default (E, F)",
        Counts::of(rows.iter().copied().filter(|r| r.id.group().gated())),
    );
    scope(&mut out, "**all**", Counts::of(rows.iter().copied()));
    out
}

fn guarantees(ids: &[&str]) -> String {
    if ids.is_empty() {
        return "—".into();
    }
    ids.iter().map(|id| format!("`{id}`")).collect::<Vec<_>>().join(", ")
}

fn verdict(v: Verdict) -> String {
    match v.gap() {
        None => v.name().into(),
        Some(gap) => format!("**{}**: {gap}", v.name()),
    }
}
