//! Plain timestamped lines on stderr. Emulated nodes and test harnesses show the driver's log
//! tail as evidence, so each line must stand on its own: one per RPC and per claim.

use std::fmt;
use std::io::Write as _;

pub fn line(args: fmt::Arguments<'_>) {
    let now = k8s_openapi::jiff::Timestamp::now();
    // One write per line, so that concurrent tasks never interleave within a line.
    let text = format!("{now:.3} dracheck-mock-driver: {args}\n");
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

#[macro_export]
macro_rules! log {
    ($($arg:tt)*) => { $crate::log::line(format_args!($($arg)*)) };
}
