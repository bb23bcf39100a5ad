//! Programs dracheck builds from upstream Go modules: a recipe (`go.mod` + `go.sum` kept in the
//! repository) and the packages to build from it, cached under the user's cache dir until the
//! recipe changes. The control plane and Go-written drivers both come from here.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod error;
mod progress;

pub use error::{GoBuildError, log_tail, quoted_tail};
pub use progress::Progress;

type Result<T, E = GoBuildError> = std::result::Result<T, E>;

/// A Go module recipe and what to build from it.
#[derive(Debug, Clone)]
pub struct GoRecipe {
    /// What is built, for messages: `the Kubernetes v1.37.2 control plane`.
    pub what: String,
    /// Where under the cache root the build lives: `k8s/v1.37.2`.
    pub cache_subdir: PathBuf,
    /// The upstream version built, e.g. `v1.37.2`.
    pub version: &'static str,
    /// `-X` flags that stamp the version into the binaries that take it.
    pub version_ldflags: String,
    pub go_mod: &'static str,
    pub go_sum: &'static str,
    /// The minimum Go the recipe's `go` line asks for.
    pub min_go: &'static str,
    /// How long a cold build takes, for the first progress line.
    pub estimate: &'static str,
    /// What `--k8s-bin-dir`-like flag avoids the build, for the no-Go message.
    pub instead: &'static str,
    pub binaries: Vec<GoBinary>,
}

/// One binary of a recipe.
#[derive(Debug, Clone)]
pub struct GoBinary {
    pub name: &'static str,
    pub package: &'static str,
    /// Whether the recipe's `version_ldflags` apply (not to etcd, which has its own version).
    pub stamped: bool,
    /// Built with cgo (runc needs libseccomp); everything else is static Go.
    pub cgo: bool,
    /// `-tags`, comma-separated; empty for none.
    pub tags: &'static str,
}

impl GoBinary {
    /// A plain static Go binary; construct with `..GoBinary::PLAIN`.
    pub const PLAIN: GoBinary = GoBinary { name: "", package: "", stamped: false, cgo: false, tags: "" };
}

impl GoRecipe {
    /// The cache directory of this recipe; its binaries are in `bin/`.
    pub fn root(&self) -> PathBuf {
        cache_root().join(&self.cache_subdir)
    }

    /// What decides whether a cached build is still valid: the recipe and the flags.
    fn stamp(&self) -> String {
        format!("{}\n{}\n{}\n{}", self.version, self.version_ldflags, self.go_mod, self.go_sum)
    }

    fn ldflags(&self, binary: &GoBinary) -> String {
        if binary.stamped { format!("-s -w {}", self.version_ldflags) } else { "-s -w".to_string() }
    }
}

/// `$XDG_CACHE_HOME/dracheck`, else `~/.cache/dracheck`; `DRACHECK_CACHE_DIR` overrides both.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("DRACHECK_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("dracheck")
}

/// The directory holding the recipe's binaries, built into the cache on first use. Concurrent
/// callers (parallel tests, two terminals) wait on a file lock instead of building twice.
pub async fn cached_or_build(recipe: &GoRecipe, progress: &Progress) -> Result<PathBuf> {
    let root = recipe.root();
    let bin = root.join("bin");
    let stamp = root.join("stamp");
    let wanted_stamp = recipe.stamp();
    let is_fresh = |stamp: &Path| std::fs::read_to_string(stamp).is_ok_and(|s| s == wanted_stamp);
    if is_fresh(&stamp) {
        return Ok(bin);
    }
    std::fs::create_dir_all(&root).map_err(GoBuildError::io(format!("creating {}", root.display())))?;
    let _lock = FileLock::acquire(root.join("lock"), progress).await?;
    if !is_fresh(&stamp) {
        build(recipe, &root, &bin, progress).await?;
        std::fs::write(&stamp, &wanted_stamp).map_err(GoBuildError::io("writing the build stamp"))?;
    }
    Ok(bin)
}

async fn build(recipe: &GoRecipe, root: &Path, bin: &Path, progress: &Progress) -> Result<()> {
    let go_version = go_version(recipe)?;
    let src = root.join("recipe");
    std::fs::create_dir_all(&src).map_err(GoBuildError::io(format!("creating {}", src.display())))?;
    std::fs::create_dir_all(bin).map_err(GoBuildError::io(format!("creating {}", bin.display())))?;
    std::fs::write(src.join("go.mod"), recipe.go_mod).map_err(GoBuildError::io("writing go.mod"))?;
    std::fs::write(src.join("go.sum"), recipe.go_sum).map_err(GoBuildError::io("writing go.sum"))?;
    let log_path = root.join("build.log");
    progress.line(format!(
        "building {} from Go modules with {go_version} (first run only; {}, log: {})",
        recipe.what,
        recipe.estimate,
        log_path.display()
    ));
    let total = Instant::now();
    for binary in &recipe.binaries {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(GoBuildError::io(format!("opening {}", log_path.display())))?;
        let log_err = log.try_clone().map_err(GoBuildError::io("duplicating the log handle"))?;
        let target = bin.join(format!("{}.partial", binary.name));
        let started = Instant::now();
        let mut child = tokio::process::Command::new(go_command())
            .args(["build", "-trimpath", "-ldflags", &recipe.ldflags(binary)])
            .args(if binary.tags.is_empty() { vec![] } else { vec!["-tags", binary.tags] })
            .arg("-o")
            .arg(&target)
            .arg(binary.package)
            .current_dir(&src)
            .env("CGO_ENABLED", if binary.cgo { "1" } else { "0" })
            .env("GOFLAGS", "-mod=readonly")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| no_go(recipe, e.to_string()))?;
        let status = loop {
            tokio::select! {
                status = child.wait() => break status.map_err(GoBuildError::io("waiting for go build"))?,
                _ = tokio::time::sleep(Duration::from_secs(30)) => {
                    progress.line(format!("  building {}… {}", binary.name, fmt_elapsed(started.elapsed())));
                }
            }
        };
        if !status.success() {
            return Err(GoBuildError::BuildFailed {
                binary: binary.name.into(),
                what: recipe.what.clone(),
                elapsed_s: started.elapsed().as_secs(),
                log: log_path.clone(),
                tail: log_tail(&log_path, 15),
            });
        }
        std::fs::rename(&target, bin.join(binary.name))
            .map_err(GoBuildError::io("moving the built binary into place"))?;
        progress.line(format!("  built {} in {}", binary.name, fmt_elapsed(started.elapsed())));
    }
    progress.line(format!("{} built in {}", recipe.what, fmt_elapsed(total.elapsed())));
    Ok(())
}

/// Where the module cache holds the source of `module` (`path@version`) as `recipe` pins it:
/// `go mod download` checks it against the recipe's go.sum, so files taken from it (a chart)
/// are the release's own.
pub async fn module_dir(recipe: &GoRecipe, module: &str) -> Result<PathBuf> {
    let dir = tempfile::Builder::new()
        .prefix("dracheck-mod")
        .tempdir()
        .map_err(GoBuildError::io("creating a temp dir for go mod download"))?;
    std::fs::write(dir.path().join("go.mod"), recipe.go_mod).map_err(GoBuildError::io("writing go.mod"))?;
    std::fs::write(dir.path().join("go.sum"), recipe.go_sum).map_err(GoBuildError::io("writing go.sum"))?;
    let out = tokio::process::Command::new(go_command())
        .args(["mod", "download", "-json", module])
        .current_dir(dir.path())
        .env("GOFLAGS", "-mod=readonly")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| no_go(recipe, e.to_string()))?;
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    match info["Dir"].as_str() {
        Some(found) if out.status.success() => Ok(PathBuf::from(found)),
        _ => {
            let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            Err(GoBuildError::Io {
                context: format!(
                    "`go mod download {module}` for {} failed; check that the Go module proxy (GOPROXY) is reachable",
                    recipe.what
                ),
                source: std::io::Error::other(said.trim().to_string()),
            })
        }
    }
}

fn no_go(recipe: &GoRecipe, detail: String) -> GoBuildError {
    GoBuildError::NoGo {
        detail,
        what: recipe.what.clone(),
        min_go: recipe.min_go.into(),
        instead: recipe.instead.into(),
    }
}

/// `go`, or the toolchain `DRACHECK_GO` names.
fn go_command() -> PathBuf {
    std::env::var_os("DRACHECK_GO").filter(|v| !v.is_empty()).map_or_else(|| PathBuf::from("go"), PathBuf::from)
}

fn go_version(recipe: &GoRecipe) -> Result<String> {
    let out = Command::new(go_command())
        .arg("version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| no_go(recipe, format!("`go version` could not run: {e}")))?;
    if !out.status.success() {
        return Err(no_go(recipe, format!("`go version` failed: {}", String::from_utf8_lossy(&out.stderr).trim())));
    }
    Ok(String::from_utf8_lossy(&out.stdout).split_whitespace().nth(2).unwrap_or("go").to_string())
}

pub fn fmt_elapsed(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 { format!("{}m{:02}s", s / 60, s % 60) } else { format!("{:.1}s", d.as_secs_f64()) }
}

/// An exclusive `flock` held for the life of the value.
pub struct FileLock {
    _file: std::fs::File,
}

impl FileLock {
    pub async fn acquire(path: PathBuf, progress: &Progress) -> Result<FileLock> {
        let file = Self::open(&path)?;
        if Self::try_lock(&file) {
            return Ok(FileLock { _file: file });
        }
        Self::say_waiting(&path, progress);
        tokio::task::spawn_blocking(move || Self::lock(file, &path)).await.expect("the lock task does not panic")
    }

    /// [`FileLock::acquire`] for callers outside async code: blocks this thread while another
    /// process holds the lock.
    pub fn acquire_blocking(path: &Path, progress: &Progress) -> Result<FileLock> {
        let file = Self::open(path)?;
        if Self::try_lock(&file) {
            return Ok(FileLock { _file: file });
        }
        Self::say_waiting(path, progress);
        Self::lock(file, path)
    }

    fn open(path: &Path) -> Result<std::fs::File> {
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(GoBuildError::io(format!("opening {}", path.display())))
    }

    fn try_lock(file: &std::fs::File) -> bool {
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor we own; LOCK_NB never blocks.
        unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
    }

    fn say_waiting(path: &Path, progress: &Progress) {
        progress.line(format!(
            "waiting for another dracheck process that is building into {}",
            path.parent().unwrap_or(path).display()
        ));
    }

    /// Waits for the lock: blocking, so async callers run it on the blocking pool.
    fn lock(file: std::fs::File, path: &Path) -> Result<FileLock> {
        use std::os::fd::AsRawFd;
        // SAFETY: as in `try_lock`, without LOCK_NB.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            Ok(FileLock { _file: file })
        } else {
            Err(GoBuildError::Io {
                context: format!("locking {}", path.display()),
                source: std::io::Error::last_os_error(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recipe(go_mod: &'static str) -> GoRecipe {
        GoRecipe {
            what: "a test program".into(),
            cache_subdir: "test/v1".into(),
            version: "v1",
            version_ldflags: "-X main.version=v1".into(),
            go_mod,
            go_sum: "",
            min_go: "1.26.0",
            estimate: "a moment",
            instead: "nothing",
            binaries: vec![GoBinary { name: "p", package: "example.com/p", stamped: true, ..GoBinary::PLAIN }],
        }
    }

    #[test]
    fn the_stamp_changes_with_the_recipe_and_the_flags() {
        let a = recipe("module a\n");
        assert_ne!(a.stamp(), recipe("module b\n").stamp());
        let mut flags = recipe("module a\n");
        flags.version_ldflags = "-X main.version=v2".into();
        assert_ne!(a.stamp(), flags.stamp());
        assert_eq!(a.ldflags(&a.binaries[0]), "-s -w -X main.version=v1");
    }

    #[test]
    fn no_go_names_what_needs_it_and_the_way_around() {
        let msg = no_go(&recipe("module a\n"), "not found".into()).to_string();
        assert!(msg.contains("a test program") && msg.contains("1.26.0") && msg.contains("nothing"), "{msg}");
    }
}
