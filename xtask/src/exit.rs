//! Exit codes of every `cargo xtask` command, in one place so that scripts and docs agree.

/// Success: the command did what it was asked (for checks: every guarantee held).
pub const OK: u8 = 0;
/// A check failed (a guarantee did not hold, a test failed).
pub const FAILED: u8 = 1;
// 2, bad input (a wrong flag, an unknown version, a missing file), and 3, a cluster that could
// not be brought up or is not running, come from `ClusterError::exit_code`.
/// The command exists but this version cannot do it yet.
pub const NOT_AVAILABLE: u8 = 4;
/// Interrupted (Ctrl-C); everything started was stopped.
pub const INTERRUPTED: u8 = 130;
