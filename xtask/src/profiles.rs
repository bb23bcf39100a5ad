//! `cargo xtask profile validate FILE…`: what a platform team runs on a profile before it
//! publishes it, without a cluster. A profile is valid when it loads as `conformance` loads
//! it: YAML and types, semantics (names, counts, references between requests) and every CEL
//! selector compiled with the environment `explain` evaluates with.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use dracheck_suites::profile;

use crate::exit;

#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    /// Check profiles without a cluster: types, semantics and CEL. Exit 0: all valid; 2: one is
    /// not (each error names its file, line and field).
    Validate(ValidateArgs),
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Profile files (YAML).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

pub fn run(cmd: ProfileCommand) -> u8 {
    match cmd {
        ProfileCommand::Validate(args) => validate(&args.files),
    }
}

fn validate(files: &[PathBuf]) -> u8 {
    let mut invalid = 0;
    for file in files {
        match profile::load(file) {
            Ok(p) => println!(
                "valid   {}: profile {} for driver {}, {} guarantee(s): {}",
                file.display(),
                p.metadata.name,
                p.driver,
                p.guarantee_ids().len(),
                p.guarantee_ids().join(", ")
            ),
            Err(e) => {
                invalid += 1;
                println!("invalid {}: {e}", file.display());
            }
        }
    }
    if invalid == 0 {
        exit::OK
    } else {
        eprintln!("dracheck: {invalid} of {} profile(s) invalid", files.len());
        exit::BAD_INPUT
    }
}
