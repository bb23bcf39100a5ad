//! Exit codes of every `cargo xtask` command, in one place so that scripts and docs agree.

/// Success: the command did what it was asked (for checks: every guarantee held).
pub const OK: u8 = 0;
/// A check failed (a guarantee did not hold, a test failed).
pub const FAILED: u8 = 1;
/// Bad input: a wrong flag, an unknown version or driver, a missing file (also what
/// `ClusterError::exit_code` gives such errors).
pub const BAD_INPUT: u8 = dracheck_clusters::EXIT_BAD_INPUT as u8;
/// The cluster or the driver could not be brought up, or is not running.
pub const CLUSTER_DOWN: u8 = dracheck_clusters::EXIT_CLUSTER_DOWN as u8;
/// The driver's install (its helm release) failed; what it had made was removed.
pub const INSTALL_FAILED: u8 = dracheck_clusters::EXIT_INSTALL_FAILED as u8;
/// Interrupted (Ctrl-C); everything started was stopped.
pub const INTERRUPTED: u8 = 130;
