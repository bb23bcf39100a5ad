//! Why a Go program could not be built, and the quoted log tails the messages show.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum GoBuildError {
    #[error(
        "no Go toolchain found ({detail}). dracheck builds {what} from Go modules; install Go \
         {min_go} or newer and put `go` on PATH, or {instead}."
    )]
    NoGo { detail: String, what: String, min_go: String, instead: String },

    #[error(
        "building {binary} of {what} failed after {elapsed_s}s; the full build \
         log is {log}. Its last lines:\n{tail}\nCheck that the Go module proxy is reachable \
         (GOPROXY) and that the disk has a few GiB free, then run the command again; the \
         cache resumes where it stopped."
    )]
    BuildFailed { binary: String, what: String, elapsed_s: u64, log: PathBuf, tail: String },

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl GoBuildError {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> GoBuildError {
        let context = context.into();
        move |source| GoBuildError::Io { context, source }
    }
}

/// The last `n` lines of the log at `path`, quoted (each indented with `  | `).
pub fn log_tail(path: &std::path::Path, n: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => quoted_tail(&String::from_utf8_lossy(&bytes).lines().collect::<Vec<_>>(), n),
        Err(e) => format!("  | (log unreadable: {e})"),
    }
}

/// The last `n` of `lines`, each indented with `  | ` as quoted output.
pub fn quoted_tail(lines: &[&str], n: usize) -> String {
    let start = lines.len().saturating_sub(n);
    lines[start..].iter().map(|l| format!("  | {l}")).collect::<Vec<_>>().join("\n")
}
