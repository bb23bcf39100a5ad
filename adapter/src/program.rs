//! The name of the command line that runs: `dracheck`, or `cargo xtask` in a checkout. Messages
//! of the libraries that tell the user a command to run name it; the command line sets it once,
//! as it starts.

use std::sync::OnceLock;

static NAME: OnceLock<&'static str> = OnceLock::new();

/// Sets the name; the first call wins.
pub fn set(name: &'static str) {
    let _ = NAME.set(name);
}

/// The name the command line runs under; `dracheck` where none was set (a library used by
/// itself, tests).
pub fn name() -> &'static str {
    NAME.get().copied().unwrap_or("dracheck")
}
