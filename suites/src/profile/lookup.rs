//! Finding profiles: the shipped ones (`profiles/<driver>/` of the source tree, embedded in the
//! binary by `build.rs`), and what a `--profile` argument names.

use std::path::{Path, PathBuf};

use super::error::ProfileError;
use super::file::load;
use super::model::Profile;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/shipped_profiles.rs"));
}

/// The folder of shipped profiles: the embedded `profiles/` written out into dracheck's cache
/// (`<cache>/share/profiles-<hash>/`), so that they are files a user can read and copy, and
/// results name. Where that cannot be written, the path it would have, which reading then
/// names.
pub fn profiles_dir() -> PathBuf {
    dracheck_adapter::share::materialize("profiles", embedded::SHIPPED).unwrap_or_else(|e| e.dir)
}

/// The short names of the shipped profiles of a driver (`standard-inference`, …) with their
/// paths under `profiles/`, sorted.
fn shipped_names(driver_short: &str) -> Vec<&'static str> {
    embedded::SHIPPED
        .iter()
        .filter_map(|(rel, _)| rel.strip_prefix(driver_short)?.strip_prefix('/'))
        .filter(|name| name.ends_with(".yaml"))
        .collect()
}

/// The shipped profiles of a driver (`profiles/<driver_short>/*.yaml`), sorted.
pub fn shipped(driver_short: &str) -> Vec<PathBuf> {
    let names = shipped_names(driver_short);
    if names.is_empty() {
        return Vec::new();
    }
    let dir = profiles_dir().join(driver_short);
    names.into_iter().map(|name| dir.join(name)).collect()
}

fn stem(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The short names of drivers with shipped profiles (`mock`, …), sorted.
fn shipping_drivers() -> Vec<String> {
    let mut out: Vec<String> =
        embedded::SHIPPED.iter().filter_map(|(rel, _)| Some(rel.split_once('/')?.0.to_string())).collect();
    out.dedup();
    out
}

/// The short name under which profiles for `driver_name` ship, if any.
pub(super) fn shipping_driver(driver_name: &str) -> Option<String> {
    shipping_drivers()
        .into_iter()
        .find(|short| shipped(short).iter().any(|p| load(p).is_ok_and(|profile| profile.driver == driver_name)))
}

/// A `--profile` argument: a path to a profile file, or the name of one of the driver's shipped
/// profiles (`standard-inference`).
pub fn resolve(arg: &str, driver_short: &str) -> Result<PathBuf, ProfileError> {
    let as_path = Path::new(arg);
    let looks_like_path = arg.contains(std::path::MAIN_SEPARATOR)
        || arg.contains('/')
        || as_path.extension().is_some_and(|e| e == "yaml" || e == "yml");
    if as_path.is_file() {
        return Ok(as_path.to_path_buf());
    }
    if looks_like_path {
        // Let the read say what is wrong with it.
        return match std::fs::metadata(as_path) {
            Err(source) => Err(ProfileError::Read { path: as_path.to_path_buf(), source }),
            Ok(_) => Err(ProfileError::Read {
                path: as_path.to_path_buf(),
                source: std::io::Error::other("not a regular file"),
            }),
        };
    }
    let available = shipped(driver_short);
    if let Some(found) = available.iter().find(|p| stem(p) == arg) {
        return Ok(found.clone());
    }
    let elsewhere = shipping_drivers()
        .into_iter()
        .filter(|short| short != driver_short && shipped(short).iter().any(|p| stem(p) == arg))
        .collect();
    Err(ProfileError::NotFound {
        name: arg.to_string(),
        driver: driver_short.to_string(),
        available: available.iter().map(|p| stem(p)).collect(),
        elsewhere,
    })
}

/// Resolves `arg` (see [`resolve`]), loads it and checks that it is for `driver_name`.
pub fn load_for(arg: &str, driver_short: &str, driver_name: &str) -> Result<Profile, ProfileError> {
    let profile = load(&resolve(arg, driver_short)?)?;
    profile.check_driver(driver_name)?;
    Ok(profile)
}
