//! `cargo xtask report | matrix | compare`: the renderers of `dracheck-report` on the command
//! line, with their exit codes.

use std::path::{Path, PathBuf};

use clap::Args;
use dracheck_report::compare::{self, Options};
use dracheck_report::load::{self, LoadError};
use dracheck_report::redact::Redactor;
use dracheck_report::{Format, matrix};

use crate::exit;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A JSON result of `conformance`.
    pub file: PathBuf,
    /// `junit`, `md` or `html`; repeatable. Without it, all three are written next to FILE.
    #[arg(long = "format", value_name = "FORMAT")]
    pub formats: Vec<String>,
    /// Write here instead of stdout (one --format only).
    #[arg(long, short, value_name = "PATH")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct MatrixArgs {
    /// A folder of JSON results (e.g. reports/).
    pub dir: PathBuf,
    /// Where matrix.html and matrix.md go (default: DIR).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The result of the cluster in use today.
    pub a: PathBuf,
    /// The result of the cluster that would replace it.
    pub b: PathBuf,
    /// A regression of a guarantee matching this glob (`claim.*`, `standard-inference/limits.*`)
    /// does not fail the gate; repeatable.
    #[arg(long, value_name = "ID-GLOB")]
    pub allow: Vec<String>,
    /// Devices of profiles matching this glob may differ between A and B; repeatable.
    #[arg(long, value_name = "PROFILE-GLOB")]
    pub allow_hardware: Vec<String>,
    /// `text` (for a person) or `json` (for tools: `gatePasses` and each list); the exit code
    /// is the gate's either way.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: CompareOutput,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CompareOutput {
    Text,
    Json,
}

/// The redactor of a run: the credentials of the kubeconfig in use (the flag, else every file
/// `$KUBECONFIG` lists, else `~/.kube/config`) plus the shape-based net.
pub fn redactor(kubeconfig: Option<&Path>) -> Redactor {
    redactor_in(kubeconfig, &crate::kubeconfig::Env::of_process())
}

/// Each file is read whole, not the merged configuration: a user that an earlier file shadows
/// still has a credential that may show up in a driver's log.
fn redactor_in(kubeconfig: Option<&Path>, env: &crate::kubeconfig::Env) -> Redactor {
    crate::kubeconfig::paths(kubeconfig, env).iter().fold(Redactor::default(), |r, p| r.with_kubeconfig(p))
}

fn load_err(e: LoadError) -> u8 {
    eprintln!("dracheck: {e}");
    exit::BAD_INPUT
}

pub fn report(args: ReportArgs) -> u8 {
    let formats: Result<Vec<Format>, String> = args
        .formats
        .iter()
        .map(|f| Format::parse(f).ok_or_else(|| format!("unknown --format {f:?}: pass junit, md or html")))
        .collect();
    let formats = match formats {
        Ok(f) => f,
        Err(e) => {
            eprintln!("dracheck: {e}");
            return exit::BAD_INPUT;
        }
    };
    if args.out.is_some() && formats.len() != 1 {
        eprintln!("dracheck: --out writes one format: pass exactly one --format with it");
        return exit::BAD_INPUT;
    }
    let result = match load::load(&args.file) {
        Ok(r) => r,
        Err(e) => return load_err(e),
    };
    let redactor = redactor(None);
    if formats.is_empty() {
        return match dracheck_report::render_beside(&args.file, &result, &redactor) {
            Ok(paths) => {
                paths.iter().for_each(|p| println!("{}", p.display()));
                exit::OK
            }
            Err(e) => {
                eprintln!("dracheck: writing the reports next to {}: {e}", args.file.display());
                exit::BAD_INPUT
            }
        };
    }
    for f in formats {
        let text = dracheck_report::render(&result, f, &redactor);
        match &args.out {
            Some(path) => {
                if let Err(e) = std::fs::write(path, text) {
                    eprintln!("dracheck: writing {}: {e}", path.display());
                    return exit::BAD_INPUT;
                }
                println!("{}", path.display());
            }
            None => print!("{text}"),
        }
    }
    exit::OK
}

pub fn matrix(args: MatrixArgs) -> u8 {
    let runs = match load::load_dir(&args.dir) {
        Ok(r) => r,
        Err(e) => return load_err(e),
    };
    let out = args.out.unwrap_or_else(|| args.dir.clone());
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("dracheck: cannot create {}: {e}", out.display());
        return exit::BAD_INPUT;
    }
    // Each run's page is what the matrix links to: render the ones that are missing.
    let redactor = redactor(None);
    for (path, r) in &runs {
        let page = Format::Html.beside(path);
        if !page.exists()
            && let Err(e) = std::fs::write(&page, dracheck_report::render(r, Format::Html, &redactor))
        {
            eprintln!("dracheck: writing {}: {e}", page.display());
            return exit::BAD_INPUT;
        }
    }
    let m = matrix::build(&runs, &out);
    for (name, text) in [("matrix.html", m.html()), ("matrix.md", m.markdown())] {
        let path = out.join(name);
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("dracheck: writing {}: {e}", path.display());
            return exit::BAD_INPUT;
        }
        println!("{}", path.display());
    }
    println!("{} runs, {} columns, {} guarantees", runs.len(), m.columns.len(), m.rows.len());
    for r in &m.regressions {
        println!(
            "regression {} {} → {} (Kubernetes {}, {}): {}",
            r.driver,
            r.from,
            r.to,
            r.kubernetes,
            r.cluster,
            r.rows.join(", ")
        );
    }
    exit::OK
}

pub fn compare(args: CompareArgs) -> u8 {
    let (a, b) = match (load::load(&args.a), load::load(&args.b)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return load_err(e),
    };
    let c = compare::compare(&a, &b, &Options { allow: args.allow, allow_hardware: args.allow_hardware });
    match args.output {
        CompareOutput::Text => print!("{}", compare::render(&a, &b, &c)),
        CompareOutput::Json => {
            println!("{}", serde_json::to_string_pretty(&compare::json(&a, &b, &c)).expect("the comparison serializes"))
        }
    }
    if c.gate_passes() { exit::OK } else { exit::FAILED }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_redactor_scrubs_the_credentials_of_every_listed_kubeconfig() {
        let dir = tempfile::tempdir().unwrap();
        let user = |name: &str, token: &str| {
            format!("apiVersion: v1\nkind: Config\nusers:\n- name: {name}\n  user:\n    token: {token}\n")
        };
        std::fs::write(dir.path().join("a"), user("u", "token-of-the-first-file-0123")).unwrap();
        // The same user name: merging shadows it, but its token is still a secret.
        std::fs::write(dir.path().join("b"), user("u", "token-only-in-the-second-file-0123")).unwrap();
        let list = std::env::join_paths([dir.path().join("a"), dir.path().join("missing"), dir.path().join("b")]);
        let env = crate::kubeconfig::Env { kubeconfig: Some(list.unwrap()), home: None, in_pod: false };
        let r = redactor_in(None, &env);
        let text = r.text("got token-of-the-first-file-0123 and token-only-in-the-second-file-0123 back");
        assert_eq!(text, "got <redacted> and <redacted> back");
        // `--kubeconfig` is the one file in use.
        let r = redactor_in(Some(&dir.path().join("a")), &env);
        assert!(r.text("token-only-in-the-second-file-0123").contains("second-file"));
    }
}
