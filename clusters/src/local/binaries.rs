//! Where the control-plane binaries come from: a `--k8s-bin-dir` given by the user, or a build
//! of the embedded Go recipe, cached per version under the user's cache dir.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::progress::Progress;
use super::versions::Release;
use crate::error::{ClusterError, Result, log_tail};

/// The four upstream binaries, in start order, with the Go package each is built from.
pub const BINARIES: [(&str, &str); 4] = [
    ("etcd", "go.etcd.io/etcd/server/v3"),
    ("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"),
    ("kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler"),
    ("kube-controller-manager", "k8s.io/kubernetes/cmd/kube-controller-manager"),
];

/// A directory holding all four binaries and the Kubernetes version they report.
#[derive(Debug, Clone)]
pub struct BinDir {
    pub dir: PathBuf,
    pub version: String,
}

impl BinDir {
    pub fn path(&self, binary: &str) -> PathBuf {
        self.dir.join(binary)
    }

    /// Checks a user-given directory: every binary present and executable, and the version
    /// `kube-apiserver --version` reports.
    pub fn existing(dir: &Path) -> Result<BinDir> {
        for (binary, _) in BINARIES {
            check_executable(dir, binary)?;
        }
        let version = apiserver_version(dir)?;
        Ok(BinDir { dir: dir.to_path_buf(), version })
    }
}

fn check_executable(dir: &Path, binary: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let missing = |problem: &str| ClusterError::MissingBinary {
        dir: dir.to_path_buf(),
        binary: binary.to_string(),
        problem: problem.to_string(),
    };
    let meta = std::fs::metadata(dir.join(binary)).map_err(|e| missing(&e.to_string()))?;
    if !meta.is_file() {
        return Err(missing("not a regular file"));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(missing("not executable"));
    }
    Ok(())
}

fn apiserver_version(dir: &Path) -> Result<String> {
    let out = Command::new(dir.join("kube-apiserver")).arg("--version").stdin(Stdio::null()).output().map_err(|e| {
        ClusterError::MissingBinary {
            dir: dir.to_path_buf(),
            binary: "kube-apiserver".into(),
            problem: format!("cannot run it: {e}"),
        }
    })?;
    // Prints `Kubernetes v1.37.2`.
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .find(|w| w.starts_with('v') && w[1..].starts_with(|c: char| c.is_ascii_digit()))
        .map(str::to_string)
        .ok_or_else(|| ClusterError::MissingBinary {
            dir: dir.to_path_buf(),
            binary: "kube-apiserver".into(),
            problem: format!("`kube-apiserver --version` printed {:?}, not a version", text.trim()),
        })
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

/// The binaries of `release`, built into the cache on first use. Concurrent callers (parallel
/// tests, two terminals) wait on a file lock instead of building twice.
pub async fn cached_or_build(release: &'static Release, progress: &Progress) -> Result<BinDir> {
    let root = cache_root().join("k8s").join(release.version);
    let bin = root.join("bin");
    let stamp = root.join("stamp");
    let wanted_stamp = recipe_stamp(release);
    let is_fresh = |stamp: &Path| std::fs::read_to_string(stamp).is_ok_and(|s| s == wanted_stamp);
    if is_fresh(&stamp) {
        return BinDir::existing(&bin);
    }
    std::fs::create_dir_all(&root).map_err(ClusterError::io(format!("creating {}", root.display())))?;
    let _lock = FileLock::acquire(root.join("lock"), progress).await?;
    if !is_fresh(&stamp) {
        build(release, &root, &bin, progress).await?;
        std::fs::write(&stamp, &wanted_stamp).map_err(ClusterError::io("writing the build stamp"))?;
    }
    BinDir::existing(&bin)
}

/// What decides whether a cached build is still valid: the recipe and the flags.
fn recipe_stamp(release: &Release) -> String {
    format!("{}\n{}\n{}\n{}", release.version, release.version_ldflags(), release.go_mod, release.go_sum)
}

async fn build(release: &'static Release, root: &Path, bin: &Path, progress: &Progress) -> Result<()> {
    let go_version = go_version(release)?;
    let src = root.join("recipe");
    std::fs::create_dir_all(&src).map_err(ClusterError::io(format!("creating {}", src.display())))?;
    std::fs::create_dir_all(bin).map_err(ClusterError::io(format!("creating {}", bin.display())))?;
    std::fs::write(src.join("go.mod"), release.go_mod).map_err(ClusterError::io("writing go.mod"))?;
    std::fs::write(src.join("go.sum"), release.go_sum).map_err(ClusterError::io("writing go.sum"))?;
    let log_path = root.join("build.log");
    progress.line(format!(
        "building the Kubernetes {} control plane from Go modules with {go_version} (first run only; \
         about 10 min on 2 cores with an empty Go cache, log: {})",
        release.version,
        log_path.display()
    ));
    let total = Instant::now();
    for (binary, package) in BINARIES {
        let ldflags =
            if binary == "etcd" { "-s -w".to_string() } else { format!("-s -w {}", release.version_ldflags()) };
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(ClusterError::io(format!("opening {}", log_path.display())))?;
        let log_err = log.try_clone().map_err(ClusterError::io("duplicating the log handle"))?;
        let target = bin.join(format!("{binary}.partial"));
        let started = Instant::now();
        let mut child = tokio::process::Command::new(go_command())
            .args(["build", "-trimpath", "-ldflags", &ldflags, "-o"])
            .arg(&target)
            .arg(package)
            .current_dir(&src)
            .env("CGO_ENABLED", "0")
            .env("GOFLAGS", "-mod=readonly")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| ClusterError::NoGo { detail: e.to_string(), min_go: release.min_go.into() })?;
        let status = loop {
            tokio::select! {
                status = child.wait() => break status.map_err(ClusterError::io("waiting for go build"))?,
                _ = tokio::time::sleep(Duration::from_secs(30)) => {
                    progress.line(format!("  building {binary}… {}", fmt_elapsed(started.elapsed())));
                }
            }
        };
        if !status.success() {
            return Err(ClusterError::BuildFailed {
                binary: binary.into(),
                version: release.version.into(),
                elapsed_s: started.elapsed().as_secs(),
                log: log_path.clone(),
                tail: log_tail(&log_path, 15),
            });
        }
        std::fs::rename(&target, bin.join(binary)).map_err(ClusterError::io("moving the built binary into place"))?;
        progress.line(format!("  built {binary} in {}", fmt_elapsed(started.elapsed())));
    }
    progress.line(format!("control plane {} built in {}", release.version, fmt_elapsed(total.elapsed())));
    Ok(())
}

/// `go`, or the toolchain `DRACHECK_GO` names.
fn go_command() -> PathBuf {
    std::env::var_os("DRACHECK_GO").filter(|v| !v.is_empty()).map_or_else(|| PathBuf::from("go"), PathBuf::from)
}

fn go_version(release: &Release) -> Result<String> {
    let no_go = |detail: String| ClusterError::NoGo { detail, min_go: release.min_go.into() };
    let out = Command::new(go_command())
        .arg("version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| no_go(format!("`go version` could not run: {e}")))?;
    if !out.status.success() {
        return Err(no_go(format!("`go version` failed: {}", String::from_utf8_lossy(&out.stderr).trim())));
    }
    Ok(String::from_utf8_lossy(&out.stdout).split_whitespace().nth(2).unwrap_or("go").to_string())
}

pub fn fmt_elapsed(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 { format!("{}m{:02}s", s / 60, s % 60) } else { format!("{:.1}s", d.as_secs_f64()) }
}

/// An exclusive `flock` held for the life of the value.
struct FileLock {
    _file: std::fs::File,
}

impl FileLock {
    async fn acquire(path: PathBuf, progress: &Progress) -> Result<FileLock> {
        use std::os::fd::AsRawFd;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(ClusterError::io(format!("opening {}", path.display())))?;
        // SAFETY: flock on a descriptor we own; LOCK_NB never blocks.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(FileLock { _file: file });
        }
        progress.line(format!(
            "waiting for another dracheck process that is building into {}",
            path.parent().unwrap_or(&path).display()
        ));
        tokio::task::spawn_blocking(move || {
            // SAFETY: as above; this blocks a worker of the blocking pool only.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                Ok(FileLock { _file: file })
            } else {
                Err(ClusterError::Io {
                    context: format!("locking {}", path.display()),
                    source: std::io::Error::last_os_error(),
                })
            }
        })
        .await
        .expect("the lock task does not panic")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_bin(dir: &Path, name: &str, script: &str) {
        use std::os::unix::fs::PermissionsExt as _;
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_bin_dir_missing_a_binary_names_it() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["kube-apiserver", "kube-scheduler", "kube-controller-manager"] {
            fake_bin(dir.path(), name, "echo Kubernetes v1.37.2");
        }
        let err = BinDir::existing(dir.path()).unwrap_err();
        assert!(matches!(&err, ClusterError::MissingBinary { binary, .. } if binary == "etcd"), "{err}");
        assert_eq!(err.exit_code(), crate::error::EXIT_BAD_INPUT);
    }

    #[test]
    fn a_bin_dir_reports_the_apiserver_version() {
        let dir = tempfile::tempdir().unwrap();
        for (name, _) in BINARIES {
            fake_bin(dir.path(), name, "echo Kubernetes v1.36.4");
        }
        assert_eq!(BinDir::existing(dir.path()).unwrap().version, "v1.36.4");
        std::fs::write(dir.path().join("etcd"), "not executable").unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir.path().join("etcd"), std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = BinDir::existing(dir.path()).unwrap_err();
        assert!(err.to_string().contains("not executable"), "{err}");
    }

    #[test]
    fn the_stamp_changes_with_the_recipe() {
        let r = super::super::versions::default_release();
        let mut other = *r;
        other.go_sum = "changed";
        assert_ne!(recipe_stamp(r), recipe_stamp(&other));
    }
}
