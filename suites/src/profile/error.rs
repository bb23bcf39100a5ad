//! What can be wrong with a `--profile`: every one is bad input, named with the file, the line
//! and the field where there is one. Being bad input is the type's, not each error's, so it has
//! no `failure()`: the command line gives every `ProfileError` its bad-input exit code.

use std::path::PathBuf;

use super::FORMAT_DOC;

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error(
        "cannot read the profile file {path}: {source}. Pass an existing file or the name of a shipped profile with --profile."
    )]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "the profile file {path} is not UTF-8 text: line {line} has a byte sequence that is not UTF-8 (at byte \
         {offset} of the file). Profiles are YAML in UTF-8: save it as UTF-8 (e.g. `iconv -f latin1 -t utf-8 \
         {path} > fixed.yaml`) and pass that file with --profile."
    )]
    NotUtf8 { path: PathBuf, line: usize, offset: usize },

    #[error(
        "unknown profile {name:?} for driver {driver}: {}.{} Pass one of them, or the path of a profile file, with --profile.",
        available_text(.available, .driver),
        other_drivers_text(.elsewhere)
    )]
    NotFound {
        name: String,
        /// The driver's short name (`mock`).
        driver: String,
        /// The names of the driver's shipped profiles.
        available: Vec<String>,
        /// Other drivers that ship a profile of that name.
        elsewhere: Vec<String>,
    },

    #[error(
        "invalid profile {path}, line {line}, column {column}, field {field}: {message} (the format: {FORMAT_DOC})"
    )]
    Invalid { path: PathBuf, line: u64, column: u64, field: String, message: String },

    #[error(
        "profile {profile} ({path}) is for driver {profile_driver}, not {driver}: pass --profile with a profile for \
         {driver} or pick {suggestion}"
    )]
    WrongDriver {
        profile: String,
        path: PathBuf,
        profile_driver: String,
        driver: String,
        /// How to select the profile's driver instead: `--driver mock`, or for a driver without
        /// shipped profiles `--driver-bin PATH --driver-name NAME`.
        suggestion: String,
    },
}

fn available_text(available: &[String], driver: &str) -> String {
    if available.is_empty() {
        format!("dracheck ships no profiles for {driver} (profiles/{driver}/ is empty or missing)")
    } else {
        format!("the shipped profiles of {driver} are {}", available.join(", "))
    }
}

fn other_drivers_text(elsewhere: &[String]) -> String {
    if elsewhere.is_empty() {
        String::new()
    } else {
        format!(" A profile of that name ships for --driver {}.", elsewhere.join(", --driver "))
    }
}
