//! The signals that end a run early and cleanly: SIGINT (Ctrl-C) and SIGTERM, which CI
//! cancellation, `timeout` and a Job's deletion send. Either drops the run's future, whose
//! handles stop every process the run started and remove what it made; left to its default,
//! SIGTERM killed the run with no teardown and no word.

use tokio::signal::unix::{SignalKind, signal};

/// Resolves with the signal's name on the first SIGINT or SIGTERM. Where a handler cannot be
/// installed it never resolves for that signal (the default action then still ends the run).
pub async fn interrupted() -> &'static str {
    let wait = |kind: SignalKind, name: &'static str| async move {
        match signal(kind) {
            Ok(mut s) => {
                s.recv().await;
                name
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        name = wait(SignalKind::interrupt(), "SIGINT") => name,
        name = wait(SignalKind::terminate(), "SIGTERM") => name,
    }
}
