//! `cargo xtask profile validate FILE…`: what a platform team runs on a profile before it
//! publishes it, without a cluster. A profile is valid when it loads as `conformance` loads
//! it: YAML and types, semantics (names, counts, references between requests) and every CEL
//! selector compiled with the environment `explain` evaluates with.
//!
//! `cargo xtask profile schema [--out FILE]`: the format's JSON Schema, generated from the
//! profile file's types; `profiles/profile.schema.json` is its output, for editors.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use dracheck_suites::profile;

use crate::exit;

#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    /// Check profiles without a cluster: types, semantics and CEL. Exit 0: all valid; 2: one is
    /// not (each error names its file, line and field).
    Validate(ValidateArgs),
    /// Print the JSON Schema of the profile format (generated from the parser's types), or write
    /// it to a file. Editors check profiles against it as they are typed; the shipped
    /// profiles name profiles/profile.schema.json in their first line.
    Schema(SchemaArgs),
}

#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Write the schema to FILE instead of standard output (the shipped one:
    /// profiles/profile.schema.json).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
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
        ProfileCommand::Schema(args) => schema(args.out.as_deref()),
    }
}

fn schema(out: Option<&Path>) -> u8 {
    let text = profile::json_schema_text();
    let Some(out) = out else {
        print!("{text}");
        return exit::OK;
    };
    match std::fs::write(out, text) {
        Ok(()) => {
            eprintln!("wrote {}", out.display());
            exit::OK
        }
        Err(e) => {
            eprintln!("dracheck: cannot write {}: {e}", out.display());
            exit::BAD_INPUT
        }
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
