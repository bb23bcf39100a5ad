//! Reports of conformance results. Every format is rendered from the JSON result alone, after
//! secrets were scrubbed from it, so a report can be made anywhere, later, from a kept file.

pub mod compare;
pub mod html;
pub mod junit;
pub mod load;
pub mod markdown;
pub mod matrix;
pub mod redact;
pub mod view;

use std::path::{Path, PathBuf};

use dracheck_results::RunResult;

/// The formats a single run renders to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Junit,
    Markdown,
    Html,
}

impl Format {
    pub const ALL: [Format; 3] = [Format::Junit, Format::Markdown, Format::Html];

    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "junit" | "xml" => Some(Format::Junit),
            "md" | "markdown" => Some(Format::Markdown),
            "html" => Some(Format::Html),
            _ => None,
        }
    }

    /// The file next to `result.json`: `junit_result.xml` (the name CI systems collect:
    /// Prow's `junit_*.xml` in `$ARTIFACTS`), `result.md`, `result.html`.
    pub fn beside(self, json: &Path) -> PathBuf {
        match self {
            Format::Junit => {
                let stem = json.file_stem().map(|s| s.to_string_lossy()).unwrap_or_default();
                json.with_file_name(format!("junit_{stem}.xml"))
            }
            Format::Markdown => json.with_extension("md"),
            Format::Html => json.with_extension("html"),
        }
    }
}

/// `r` in `format`, with secrets scrubbed by `redactor`.
pub fn render(r: &RunResult, format: Format, redactor: &redact::Redactor) -> String {
    let mut r = r.clone();
    redactor.result(&mut r);
    match format {
        Format::Junit => junit::render(&r),
        Format::Markdown => markdown::render(&r),
        Format::Html => html::render(&r),
    }
}

/// Every format, written next to the JSON result; the paths written.
pub fn render_beside(json: &Path, r: &RunResult, redactor: &redact::Redactor) -> std::io::Result<Vec<PathBuf>> {
    Format::ALL
        .iter()
        .map(|f| {
            let path = f.beside(json);
            std::fs::write(&path, render(r, *f, redactor)).map(|_| path)
        })
        .collect()
}
