//! Many runs in one table: rows are guarantees (per profile), columns are driver × driver
//! version × Kubernetes version × cluster, cells the verdict linking to that run's page. Along
//! consecutive versions of one driver, guarantees that held before and fail now are regressions.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use dracheck_results::{RunResult, Verdict};

use crate::html::{badge, esc, page};
use crate::markdown::cell as md_cell;
use crate::view;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub driver: String,
    pub driver_version: String,
    pub kubernetes: String,
    pub cluster: String,
    /// The run's HTML page, relative to where the matrix is written when it lies below it.
    pub page: String,
    pub started_at: String,
}

impl Column {
    pub fn label(&self) -> String {
        format!("{} {} · k8s {} · {}", self.driver, self.driver_version, self.kubernetes, self.cluster)
    }

    fn key(&self) -> (String, String, String, String) {
        (self.driver.clone(), self.driver_version.clone(), self.kubernetes.clone(), self.cluster.clone())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `driver/plugin.registration.info`, `standard-inference/claim.compatible.allocated`.
    pub label: String,
    pub cells: Vec<Option<(Verdict, String)>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Regression {
    pub driver: String,
    pub from: String,
    pub to: String,
    pub kubernetes: String,
    pub cluster: String,
    pub rows: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub columns: Vec<Column>,
    pub rows: Vec<Row>,
    pub regressions: Vec<Regression>,
}

/// The matrix of `runs` (path of each JSON result, result); pages are linked relative to
/// `out_dir`.
pub fn build(runs: &[(PathBuf, RunResult)], out_dir: &Path) -> Matrix {
    // The latest run of each column stands for it: a re-run replaces a flaky one.
    let mut latest: BTreeMap<(String, String, String, String), (Column, &RunResult)> = BTreeMap::new();
    for (path, r) in runs {
        let column = Column {
            driver: r.driver.name.clone(),
            driver_version: r.driver.version.clone(),
            kubernetes: r.cluster.kubernetes_version.clone(),
            cluster: match &r.cluster.node_kind {
                Some(kind) => format!("{} ({kind} nodes)", r.cluster.provider),
                None => r.cluster.provider.clone(),
            },
            page: link(&path.with_extension("html"), out_dir),
            started_at: r.started_at.clone(),
        };
        match latest.get(&column.key()) {
            Some((c, _)) if c.started_at >= column.started_at => {}
            _ => {
                latest.insert(column.key(), (column, r));
            }
        }
    }
    let mut picked: Vec<(Column, &RunResult)> = latest.into_values().collect();
    picked.sort_by(|(a, _), (b, _)| {
        a.driver
            .cmp(&b.driver)
            .then_with(|| version_cmp(&a.driver_version, &b.driver_version))
            .then_with(|| version_cmp(&a.kubernetes, &b.kubernetes))
            .then_with(|| a.cluster.cmp(&b.cluster))
    });

    let mut labels: Vec<String> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut verdicts: Vec<BTreeMap<String, (Verdict, String)>> = Vec::new();
    for (_, r) in &picked {
        let mut by_row = BTreeMap::new();
        for section in view::sections(r) {
            for g in section.guarantees {
                let label = format!("{}/{}", section.key, g.id);
                if seen.insert(label.clone()) {
                    labels.push(label.clone());
                }
                by_row.insert(label, (g.verdict, g.reason.clone()));
            }
        }
        verdicts.push(by_row);
    }
    let rows: Vec<Row> = labels
        .iter()
        .map(|label| Row { label: label.clone(), cells: verdicts.iter().map(|v| v.get(label).cloned()).collect() })
        .collect();

    let mut regressions = Vec::new();
    for i in 1..picked.len() {
        let (prev, next) = (&picked[i - 1].0, &picked[i].0);
        if prev.driver != next.driver || prev.driver_version == next.driver_version {
            continue;
        }
        // The same Kubernetes and cluster on both sides, else it is not the driver that changed.
        let Some(j) = (0..i).rev().find(|&j| {
            let c = &picked[j].0;
            c.driver == next.driver
                && c.kubernetes == next.kubernetes
                && c.cluster == next.cluster
                && c.driver_version != next.driver_version
        }) else {
            continue;
        };
        let before = &picked[j].0;
        let regressed: Vec<String> = rows
            .iter()
            .filter(|row| {
                matches!(row.cells[j], Some((Verdict::Pass, _))) && matches!(row.cells[i], Some((Verdict::Fail, _)))
            })
            .map(|row| row.label.clone())
            .collect();
        if !regressed.is_empty() {
            regressions.push(Regression {
                driver: next.driver.clone(),
                from: before.driver_version.clone(),
                to: next.driver_version.clone(),
                kubernetes: next.kubernetes.clone(),
                cluster: next.cluster.clone(),
                rows: regressed,
            });
        }
    }
    Matrix { columns: picked.into_iter().map(|(c, _)| c).collect(), rows, regressions }
}

impl Matrix {
    fn regressed(&self, label: &str) -> bool {
        self.regressions.iter().any(|r| r.rows.iter().any(|l| l == label))
    }

    pub fn markdown(&self) -> String {
        let mut out = format!("## dracheck matrix: {} runs, {} guarantees\n\n", self.columns.len(), self.rows.len());
        out.push_str("| # | driver | driver version | Kubernetes | cluster |\n|---|---|---|---|---|\n");
        for (i, c) in self.columns.iter().enumerate() {
            out.push_str(&format!(
                "| [{}]({}) | {} | {} | {} | {} |\n",
                i + 1,
                c.page,
                md_cell(&c.driver),
                md_cell(&c.driver_version),
                md_cell(&c.kubernetes),
                md_cell(&c.cluster)
            ));
        }
        out.push_str("\n| guarantee |");
        for i in 0..self.columns.len() {
            out.push_str(&format!(" {} |", i + 1));
        }
        out.push_str("\n|---|");
        out.push_str(&"---|".repeat(self.columns.len()));
        out.push('\n');
        for row in &self.rows {
            let mark = if self.regressed(&row.label) { " ⚠️" } else { "" };
            out.push_str(&format!("| `{}`{mark} |", row.label));
            for c in &row.cells {
                out.push_str(match c {
                    Some((Verdict::Pass, _)) => " ✅ |",
                    Some((Verdict::Fail, _)) => " ❌ |",
                    Some((Verdict::Skip, _)) => " ⏭️ |",
                    None => " · |",
                });
            }
            out.push('\n');
        }
        out.push_str("\n✅ held · ❌ did not hold · ⏭️ skipped · `·` not checked in that run\n");
        out.push_str(&self.regressions_markdown());
        out
    }

    fn regressions_markdown(&self) -> String {
        if self.regressions.is_empty() {
            return "\nNo regressions between consecutive driver versions.\n".into();
        }
        let mut out = String::from("\n### Regressions between consecutive driver versions\n\n");
        for r in &self.regressions {
            out.push_str(&format!(
                "- **{} {} → {}** (Kubernetes {}, {}): {}\n",
                r.driver,
                r.from,
                r.to,
                r.kubernetes,
                r.cluster,
                r.rows.iter().map(|l| format!("`{l}`")).collect::<Vec<_>>().join(", ")
            ));
        }
        out
    }

    pub fn html(&self) -> String {
        let mut body = format!(
            "<h1>dracheck matrix</h1>\n<p>{} runs, {} guarantees. Each cell links to its run's page; hover for the reason.</p>\n",
            self.columns.len(),
            self.rows.len()
        );
        if self.regressions.is_empty() {
            body.push_str("<p>No regressions between consecutive driver versions.</p>\n");
        } else {
            body.push_str("<h2>Regressions between consecutive driver versions</h2>\n<ul>\n");
            for r in &self.regressions {
                body.push_str(&format!(
                    "<li><b>{} {} → {}</b> (Kubernetes {}, {}): {}</li>\n",
                    esc(&r.driver),
                    esc(&r.from),
                    esc(&r.to),
                    esc(&r.kubernetes),
                    esc(&r.cluster),
                    r.rows.iter().map(|l| format!("<code>{}</code>", esc(l))).collect::<Vec<_>>().join(", ")
                ));
            }
            body.push_str("</ul>\n");
        }
        body.push_str("<div class=\"scroll\"><table class=\"matrix\">\n<tr><th>guarantee</th>");
        for c in &self.columns {
            body.push_str(&format!(
                "<th class=\"col\" title=\"{}\"><a href=\"{}\">{}</a></th>",
                esc(&format!("{} (started {})", c.label(), c.started_at)),
                esc(&c.page),
                esc(&c.label())
            ));
        }
        body.push_str("</tr>\n");
        for row in &self.rows {
            let class = if self.regressed(&row.label) { " class=\"regressed\"" } else { "" };
            body.push_str(&format!("<tr{class}><td class=\"row\">{}</td>", esc(&row.label)));
            for (c, column) in row.cells.iter().zip(&self.columns) {
                match c {
                    Some((v, reason)) => body.push_str(&format!(
                        "<td class=\"cell\"><a href=\"{}#{}\" title=\"{}\">{}</a></td>",
                        esc(&column.page),
                        esc(&row.label.replacen('/', ".", 1)),
                        esc(reason),
                        badge(*v)
                    )),
                    None => body.push_str(
                        "<td class=\"cell\"><span class=\"v none\" title=\"not checked in this run\">·</span></td>",
                    ),
                }
            }
            body.push_str("</tr>\n");
        }
        body.push_str("</table></div>\n");
        page("dracheck matrix", &body)
    }
}

fn link(page: &Path, out_dir: &Path) -> String {
    let rel = page.strip_prefix(out_dir).unwrap_or(page);
    rel.to_string_lossy().into_owned()
}

/// Versions by their numbers: `v1.9` < `v1.10`, `0.1.0` < `0.1.0-2`.
pub fn version_cmp(a: &str, b: &str) -> Ordering {
    fn parts(s: &str) -> Vec<Result<u64, String>> {
        let mut out = Vec::new();
        let mut cur = String::new();
        let mut digits = false;
        for c in s.chars() {
            if !cur.is_empty() && c.is_ascii_digit() != digits {
                out.push(if digits { Ok(cur.parse().unwrap_or(u64::MAX)) } else { Err(cur.clone()) });
                cur.clear();
            }
            digits = c.is_ascii_digit();
            cur.push(c);
        }
        if !cur.is_empty() {
            out.push(if digits { Ok(cur.parse().unwrap_or(u64::MAX)) } else { Err(cur) });
        }
        out
    }
    let (pa, pb) = (parts(a), parts(b));
    for (x, y) in pa.iter().zip(&pb) {
        let o = match (x, y) {
            (Ok(x), Ok(y)) => x.cmp(y),
            (Err(x), Err(y)) => x.cmp(y),
            (Ok(_), Err(_)) => Ordering::Greater,
            (Err(_), Ok(_)) => Ordering::Less,
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    pa.len().cmp(&pb.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_by_their_numbers() {
        assert_eq!(version_cmp("v1.9.0", "v1.10.0"), Ordering::Less);
        assert_eq!(version_cmp("0.4.0", "0.4.0"), Ordering::Equal);
        assert_eq!(version_cmp("25.12.0", "0.4.0"), Ordering::Greater);
        assert_eq!(version_cmp("1.0", "1.0.1"), Ordering::Less);
    }
}
