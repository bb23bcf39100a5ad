//! Progress lines for long work (builds, start-up). Plain lines rather than bars, so that they
//! read the same in a terminal, a CI log and a captured test output.

use std::sync::Arc;
use std::time::Instant;

type Sink = Arc<dyn Fn(&str) + Send + Sync>;

#[derive(Clone)]
pub struct Progress {
    sink: Option<Sink>,
    started: Instant,
}

impl Progress {
    /// Lines go to stderr, each stamped with the seconds since the start.
    pub fn stderr() -> Progress {
        Progress { sink: Some(Arc::new(|l: &str| eprintln!("{l}"))), started: Instant::now() }
    }

    pub fn quiet() -> Progress {
        Progress { sink: None, started: Instant::now() }
    }

    pub fn to(f: impl Fn(&str) + Send + Sync + 'static) -> Progress {
        Progress { sink: Some(Arc::new(f)), started: Instant::now() }
    }

    pub fn line(&self, msg: impl AsRef<str>) {
        if let Some(sink) = &self.sink {
            sink(&format!("[{:>6.1}s] {}", self.started.elapsed().as_secs_f64(), msg.as_ref()));
        }
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.sink.is_some() { "Progress(on)" } else { "Progress(quiet)" })
    }
}
