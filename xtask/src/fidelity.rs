//! `cargo xtask fidelity [--full] [FAULT…]`: the fidelity table on its own. Without `--full`,
//! each row targeted (its fault with only the scenarios of the guarantees it names): the
//! quick sensitivity check after changing a fault or a row. With `--full`, each row against the
//! whole suite on the node kinds it names (the release gate), merged into the record in
//! `reports/fidelity/`, which a test holds to the current table. Both run the `fidelity` test
//! binary (`suites/tests/fidelity`), which does the work and says what it does.

use std::path::{Path, PathBuf};

use dracheck_suites::fidelity::FAULTS;
use dracheck_suites::fidelity::record;

use crate::exit;

#[derive(Debug, clap::Args)]
pub struct FidelityArgs {
    #[command(flatten)]
    pub bins: crate::cluster::BinArgs,
    /// Every row against the whole suite, on every node kind it names, and the good mock three
    /// times (with FAULTs, those rows and the good mock once); the runs are merged into the
    /// record (`--record`).
    #[arg(long)]
    pub full: bool,
    /// Only on this node kind: `emulated` or `real`.
    #[arg(long, value_name = "KIND")]
    pub node_kind: Option<dracheck_clusters::local::NodeKind>,
    /// Where `--full` merges its runs into the record (`record.json` and `record.md`).
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// Only these rows: faults as the table spells them (`fail-prepare=2`) or their names
    /// before `=` (`fail-prepare`), as drivers/mock/README.md lists them.
    #[arg(value_name = "FAULT")]
    pub faults: Vec<String>,
}

/// Which tier's environment [`env`] gives the `fidelity` test binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// `cargo xtask test`'s: every row targeted, a rotating slice against the whole suite.
    Tiered,
    /// Every row targeted, nothing else.
    Targeted,
    /// Every row against the whole suite.
    Full,
}

/// The environment of the `fidelity` test binary for `tier`, run from the checkout at `root`:
/// the tier, the rotation's seed (the commit's number on its branch, so that commits that
/// follow each other cross-check slices that follow each other) and the commit's name for the
/// record. Variables the caller has set already win.
pub fn env(root: &Path, tier: Tier) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut set = |name: &str, value: String| {
        if std::env::var_os(name).is_none() {
            out.push((name.to_string(), value));
        }
    };
    set("DRACHECK_FIDELITY", if tier == Tier::Full { "full" } else { "tiered" }.into());
    if tier == Tier::Targeted {
        set("DRACHECK_FIDELITY_CROSS_CHECK", "0".into());
    }
    if let Some(count) = git(root, &["rev-list", "--count", "HEAD"]) {
        set("DRACHECK_FIDELITY_SEED", count);
    }
    set("DRACHECK_COMMIT", git(root, &["describe", "--always", "--dirty", "--abbrev=12"]).unwrap_or("unknown".into()));
    out
}

/// `git ARGS`' one line of output in `root`, `None` where git or the repository is missing.
fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git").args(args).current_dir(root).output().ok()?;
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !line.is_empty()).then_some(line)
}

/// The rows `faults` names, checked against the table before anything builds.
fn check_faults(faults: &[String]) -> Result<(), String> {
    for want in faults {
        if dracheck_suites::fidelity::named(want).is_empty() {
            let known: Vec<&str> = FAULTS.iter().map(|c| c.fault).collect();
            return Err(format!(
                "{want:?} is no row of the fidelity table; give a fault as the table spells it or its name before \
                 `=`, one of: {}",
                known.join(", ")
            ));
        }
    }
    Ok(())
}

pub async fn run(args: FidelityArgs) -> u8 {
    if let Err(msg) = check_faults(&args.faults) {
        eprintln!("dracheck: {msg}");
        return exit::BAD_INPUT;
    }
    if args.record.is_some() && !args.full {
        eprintln!("dracheck: --record is where --full writes its record; a targeted run writes none: add --full");
        return exit::BAD_INPUT;
    }
    let root = match crate::checkout("fidelity") {
        Ok(root) => root,
        Err(msg) => {
            eprintln!("dracheck: {msg}");
            return exit::BAD_INPUT;
        }
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let bins = &args.bins;
    if let Err(code) = crate::cluster::ensure_binaries(bins).await {
        return code;
    }
    if args.node_kind != Some(dracheck_clusters::local::NodeKind::Emulated)
        && let Err(code) = crate::cluster::ensure_real_node_programs(bins).await
    {
        return code;
    }
    let binaries =
        match crate::test_plan::build(&cargo, &root, &["--package", "dracheck-suites", "--test", "fidelity"]).await {
            Ok(b) => b,
            Err(e) => {
                eprintln!("dracheck: {e}");
                return exit::FAILED;
            }
        };
    let mut env = self::env(&root, if args.full { Tier::Full } else { Tier::Targeted });
    if !args.faults.is_empty() {
        env.push(("DRACHECK_FIDELITY_ONLY".into(), args.faults.join(",")));
    }
    if let Some(kind) = args.node_kind {
        env.push(("DRACHECK_FIDELITY_NODE_KIND".into(), kind.name().into()));
    }
    let record_dir = args.record.clone().unwrap_or_else(|| root.join(record::DIR));
    if args.full {
        env.push(("DRACHECK_FIDELITY_RECORD".into(), record_dir.display().to_string()));
    }
    let test = "the_good_mock_passes_everything_and_each_fault_breaks_exactly_its_guarantees";
    let ran =
        crate::test_plan::sequence_with_args(&binaries, "the fidelity table", &env, &[test, "--exact", "--nocapture"])
            .await;
    let ok = !ran.is_empty() && ran.iter().all(|r| r.ok);
    if args.full {
        match record::Record::load(&record_dir) {
            Ok(r) => {
                let problems = r.problems();
                if problems.is_empty() {
                    eprintln!("==> the record in {} shows the whole table", record_dir.display());
                } else {
                    eprintln!("==> the record in {} does not show the whole table yet:", record_dir.display());
                    for p in problems {
                        eprintln!("  {p}");
                    }
                }
            }
            Err(e) => eprintln!("dracheck: {e}"),
        }
    }
    if ok { exit::OK } else { exit::FAILED }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_the_table_does_not_have_is_refused_with_the_known_ones() {
        assert!(check_faults(&["hang-prepare".into(), "fail-prepare".into(), "fail-prepare=2".into()]).is_ok());
        let msg = check_faults(&["hang".into()]).unwrap_err();
        assert!(msg.contains("\"hang\" is no row") && msg.contains("hang-prepare"), "{msg}");
    }

    #[test]
    fn the_tier_and_the_commit_reach_the_test_binary() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let env = env(root, Tier::Targeted);
        let get = |n: &str| env.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
        if std::env::var_os("DRACHECK_FIDELITY").is_none() {
            assert_eq!(get("DRACHECK_FIDELITY"), Some("tiered"));
        }
        if std::env::var_os("DRACHECK_FIDELITY_CROSS_CHECK").is_none() {
            assert_eq!(get("DRACHECK_FIDELITY_CROSS_CHECK"), Some("0"), "targeted: no rows against the whole suite");
        }
        assert!(env.iter().any(|(k, _)| k == "DRACHECK_COMMIT") || std::env::var_os("DRACHECK_COMMIT").is_some());
    }
}
