//! Exit codes of every `cargo xtask` command, in one place so that scripts and docs agree.
//! Only the command line chooses them: the libraries say what kind of failure an error is
//! (`dracheck_clusters::Failure`), and [`of`] gives each kind its number here.

use dracheck_clusters::Failure;

/// Success: the command did what it was asked (for checks: every guarantee held).
pub const OK: u8 = 0;
/// A check failed (a guarantee did not hold, a test failed).
pub const FAILED: u8 = 1;
/// Bad input: a wrong flag, an unknown version or driver, a missing file, any profile error.
pub const BAD_INPUT: u8 = 2;
/// The cluster or the driver could not be brought up, or is not running.
pub const CLUSTER_DOWN: u8 = 3;
/// The driver's install (its helm release) failed; what it had made was removed.
pub const INSTALL_FAILED: u8 = 4;
/// The credentials lack a permission the suite needs; the message names each one, and
/// `rbac` prints the role that has them all.
pub const FORBIDDEN: u8 = 5;
/// Interrupted (Ctrl-C); everything started was stopped.
pub const INTERRUPTED: u8 = 130;

/// A command's code: its own on success, else the failure's, with the message on stderr
/// after `who: ` (`dracheck`, `dracheck explain`).
pub fn report(result: Result<u8, (u8, String)>, who: &str) -> u8 {
    result.unwrap_or_else(|(code, message)| {
        eprintln!("{who}: {message}");
        code
    })
}

/// The exit code of a kind of failure.
pub fn of(f: Failure) -> u8 {
    match f {
        Failure::BadInput => BAD_INPUT,
        Failure::ClusterDown => CLUSTER_DOWN,
        Failure::InstallFailed => INSTALL_FAILED,
        Failure::Forbidden => FORBIDDEN,
    }
}
