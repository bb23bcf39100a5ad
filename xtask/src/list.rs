//! `cargo xtask list`: every guarantee the suite can record, with what it holds, its profile
//! family (or the driver contract) and what its scenario needs of the target, so that a
//! platform team writing a profile sees what it may promise and where it will be skipped.

use clap::{Args, ValueEnum};
use dracheck_suites::catalogue::{self, Entry};

use crate::exit;

#[derive(Debug, Args)]
pub struct ListArgs {
    /// How to print: a table for people, or JSON (one object per guarantee).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Output {
    Table,
    Json,
}

pub fn run(args: ListArgs) -> u8 {
    let entries = catalogue::entries();
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&entries).expect("entries serialize")),
        Output::Table => print!("{}", table(&entries)),
    }
    exit::OK
}

fn table(entries: &[Entry]) -> String {
    let width = entries.iter().map(|e| e.id.len()).max().unwrap_or(0);
    let family_width = entries.iter().map(|e| family(e).len()).max().unwrap_or(0);
    let mut out = format!("{:width$}  {:family_width$}  LEVEL   MEANING\n", "GUARANTEE", "FAMILY");
    for e in entries {
        out.push_str(&format!("{:width$}  {:family_width$}  {:6}  {}\n", e.id, family(e), e.level.name(), e.meaning));
        if !e.needs.is_empty() {
            out.push_str(&format!("{:width$}  {:family_width$}          needs: {}\n", "", "", e.needs.join("; ")));
        }
    }
    out.push_str(
        "\nFAMILY: the key under `guarantees:` that publishes the ID in a profile; `(driver)`: the driver\n\
         contract, checked once per driver whatever its profiles. LEVEL: `must` where the DRA contract\n\
         requires it, `should` where it is hardening the contract does not require (a failed `should`\n\
         fails a run only with `--strict`). Where a need is not met the guarantee\n\
         is skipped with that reason; a run also names the skips it finds only on the target (a CDI dir\n\
         it cannot read, a driver without a configuration probe).\n",
    );
    out
}

fn family(e: &Entry) -> &'static str {
    e.family.unwrap_or("(driver)")
}
