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
    Ok(cached_or_build_all(std::slice::from_ref(recipe), progress).await?.remove(0))
}

/// [`cached_or_build`] for several recipes at once, their bin dirs in the order given. What is
/// missing is built with as few `go build` invocations as the recipes allow: the binaries of
/// one module (the same `go.mod` and `go.sum`, like the control plane and the kubelet) and the
/// same cgo and tags are one invocation, which compiles and links them side by side; the
/// invocations of different modules run at the same time. On two cores one binary at a time
/// left a core idle through every link and every module download.
pub async fn cached_or_build_all(recipes: &[GoRecipe], progress: &Progress) -> Result<Vec<PathBuf>> {
    let bins: Vec<PathBuf> = recipes.iter().map(|r| r.root().join("bin")).collect();
    let mut stale: Vec<&GoRecipe> = recipes.iter().filter(|r| !r.is_fresh()).collect();
    if stale.is_empty() {
        return Ok(bins);
    }
    // One order for every caller, so that two processes taking several locks cannot deadlock.
    stale.sort_by_key(|r| r.root());
    stale.dedup_by_key(|r| r.root());
    let mut locks = Vec::new();
    for recipe in &stale {
        let root = recipe.root();
        std::fs::create_dir_all(&root).map_err(GoBuildError::io(format!("creating {}", root.display())))?;
        locks.push(FileLock::acquire(root.join("lock"), progress).await?);
    }
    // Another process may have built some while this one waited for their locks.
    stale.retain(|r| !r.is_fresh());
    let go_version = if stale.is_empty() { String::new() } else { go_version(stale[0])? };
    let builds = invocations(&stale).into_iter().map(|inv| inv.run(&go_version, progress));
    futures::future::try_join_all(builds).await?;
    for recipe in &stale {
        std::fs::write(recipe.root().join("stamp"), recipe.stamp())
            .map_err(GoBuildError::io("writing the build stamp"))?;
    }
    drop(locks);
    Ok(bins)
}

impl GoRecipe {
    fn is_fresh(&self) -> bool {
        std::fs::read_to_string(self.root().join("stamp")).is_ok_and(|s| s == self.stamp())
    }
}

/// One `go build`: binaries of one module with the same cgo and tags, each moved into the bin
/// dir of its recipe once built.
struct Invocation<'a> {
    /// The recipe whose dir holds the module files and the build log.
    first: &'a GoRecipe,
    binaries: Vec<(&'a GoRecipe, &'a GoBinary)>,
}

/// The stale recipes' binaries grouped into as few invocations as their modules, cgo and tags
/// allow, in the order first seen.
fn invocations<'a>(recipes: &[&'a GoRecipe]) -> Vec<Invocation<'a>> {
    let mut out: Vec<Invocation<'a>> = Vec::new();
    for recipe in recipes {
        for binary in &recipe.binaries {
            let same = |inv: &&mut Invocation<'a>| {
                inv.first.go_mod == recipe.go_mod
                    && inv.first.go_sum == recipe.go_sum
                    && inv.binaries[0].1.cgo == binary.cgo
                    && inv.binaries[0].1.tags == binary.tags
            };
            match out.iter_mut().find(|inv| same(inv)) {
                Some(inv) => inv.binaries.push((recipe, binary)),
                None => out.push(Invocation { first: recipe, binaries: vec![(recipe, binary)] }),
            }
        }
    }
    out
}

impl Invocation<'_> {
    fn names(&self) -> String {
        self.binaries.iter().map(|(_, b)| b.name).collect::<Vec<_>>().join(", ")
    }

    /// What the message of a failure names: every recipe the invocation builds for.
    fn what(&self) -> String {
        let mut whats: Vec<&str> = self.binaries.iter().map(|(r, _)| r.what.as_str()).collect();
        whats.dedup();
        whats.join(" and ")
    }

    /// `go build`'s arguments: `-s -w` for all, each stamped binary's version flags for its
    /// package alone (a package pattern before `=` limits the flags to it; the last match wins).
    fn args(&self, out_dir: &Path) -> Vec<String> {
        let mut args: Vec<String> = vec!["build".into(), "-trimpath".into(), "-ldflags=-s -w".into()];
        for (recipe, binary) in &self.binaries {
            if binary.stamped {
                args.push(format!("-ldflags={}={}", binary.package, recipe.ldflags(binary)));
            }
        }
        let tags = self.binaries[0].1.tags;
        if !tags.is_empty() {
            args.extend(["-tags".into(), tags.into()]);
        }
        args.push("-o".into());
        // A dir (trailing slash): every main package's binary goes there under its default name.
        args.push(format!("{}/", out_dir.display()));
        args.extend(self.binaries.iter().map(|(_, b)| b.package.to_string()));
        args
    }

    async fn run(self, go_version: &str, progress: &Progress) -> Result<()> {
        let root = self.first.root();
        let src = root.join("recipe");
        std::fs::create_dir_all(&src).map_err(GoBuildError::io(format!("creating {}", src.display())))?;
        std::fs::write(src.join("go.mod"), self.first.go_mod).map_err(GoBuildError::io("writing go.mod"))?;
        std::fs::write(src.join("go.sum"), self.first.go_sum).map_err(GoBuildError::io("writing go.sum"))?;
        // Not bin/ itself: a binary appears there only once the whole invocation has succeeded.
        let partial = tempfile::Builder::new()
            .prefix("bin.partial")
            .tempdir_in(&root)
            .map_err(GoBuildError::io(format!("creating a build dir in {}", root.display())))?;
        let out_dir = partial.path().to_path_buf();
        let log_path = root.join("build.log");
        progress.line(format!(
            "building {} ({}) from Go modules with {go_version} (first run only; {}, log: {})",
            self.what(),
            self.names(),
            self.first.estimate,
            log_path.display()
        ));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(GoBuildError::io(format!("opening {}", log_path.display())))?;
        let log_err = log.try_clone().map_err(GoBuildError::io("duplicating the log handle"))?;
        let started = Instant::now();
        let mut child = tokio::process::Command::new(go_command())
            .args(self.args(&out_dir))
            .current_dir(&src)
            .env("CGO_ENABLED", if self.binaries[0].1.cgo { "1" } else { "0" })
            .env("GOFLAGS", "-mod=readonly")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| no_go(self.first, e.to_string()))?;
        let status = loop {
            tokio::select! {
                status = child.wait() => break status.map_err(GoBuildError::io("waiting for go build"))?,
                _ = tokio::time::sleep(Duration::from_secs(30)) => {
                    progress.line(format!("  building {}… {}", self.names(), fmt_elapsed(started.elapsed())));
                }
            }
        };
        if !status.success() {
            return Err(GoBuildError::BuildFailed {
                binary: self.names(),
                what: self.what(),
                elapsed_s: started.elapsed().as_secs(),
                log: log_path.clone(),
                tail: log_tail(&log_path, 15),
            });
        }
        for (recipe, binary) in &self.binaries {
            let bin = recipe.root().join("bin");
            std::fs::create_dir_all(&bin).map_err(GoBuildError::io(format!("creating {}", bin.display())))?;
            let built = out_dir.join(default_exec_name(binary.package));
            std::fs::rename(&built, bin.join(binary.name))
                .map_err(GoBuildError::io(format!("moving {} into place", built.display())))?;
        }
        progress.line(format!("  built {} in {}", self.names(), fmt_elapsed(started.elapsed())));
        Ok(())
    }
}

/// The name `go build -o DIR/` gives a main package's binary: the last element of its import
/// path, or the one before a major-version element (`go.etcd.io/etcd/server/v3` → `server`).
fn default_exec_name(package: &str) -> &str {
    let mut elems = package.rsplit('/');
    let last = elems.next().unwrap_or(package);
    let major = last.len() >= 2
        && last.starts_with('v')
        && last[1..].bytes().all(|b| b.is_ascii_digit())
        && !matches!(&last[1..], "0" | "1")
        && !last[1..].starts_with('0');
    match elems.next() {
        Some(before) if major => before,
        _ => last,
    }
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
    fn binaries_are_named_as_go_build_names_them_in_a_dir() {
        assert_eq!(default_exec_name("go.etcd.io/etcd/server/v3"), "server");
        assert_eq!(default_exec_name("k8s.io/kubernetes/cmd/kube-apiserver"), "kube-apiserver");
        assert_eq!(default_exec_name("github.com/containerd/containerd/v2/cmd/ctr"), "ctr");
        assert_eq!(default_exec_name("github.com/opencontainers/runc"), "runc");
        // Not major versions: v1, v0x, and a bare `v2` import path.
        assert_eq!(default_exec_name("example.com/tool/v1"), "v1");
        assert_eq!(default_exec_name("example.com/tool/v02"), "v02");
        assert_eq!(default_exec_name("example.com/tool/v10"), "tool");
        assert_eq!(default_exec_name("v2"), "v2");
    }

    #[test]
    fn one_invocation_per_module_cgo_and_tags_with_version_flags_per_package() {
        let mut plane = recipe("module k8s\n");
        plane.binaries = vec![
            GoBinary { name: "etcd", package: "go.etcd.io/etcd/server/v3", ..GoBinary::PLAIN },
            GoBinary {
                name: "kube-apiserver",
                package: "k8s.io/kubernetes/cmd/kube-apiserver",
                stamped: true,
                ..GoBinary::PLAIN
            },
        ];
        let mut node = recipe("module k8s\n");
        node.cache_subdir = "test/v1/node".into();
        node.binaries = vec![GoBinary {
            name: "kubelet",
            package: "k8s.io/kubernetes/cmd/kubelet",
            stamped: true,
            ..GoBinary::PLAIN
        }];
        let mut runc = recipe("module runc\n");
        runc.binaries =
            vec![GoBinary { name: "runc", package: "example.com/runc", cgo: true, tags: "seccomp", ..GoBinary::PLAIN }];
        let groups = invocations(&[&plane, &runc, &node]);
        assert_eq!(groups.iter().map(Invocation::names).collect::<Vec<_>>(), ["etcd, kube-apiserver, kubelet", "runc"]);
        let args = groups[0].args(Path::new("/c/bin.partial"));
        assert_eq!(
            args,
            [
                "build",
                "-trimpath",
                "-ldflags=-s -w",
                "-ldflags=k8s.io/kubernetes/cmd/kube-apiserver=-s -w -X main.version=v1",
                "-ldflags=k8s.io/kubernetes/cmd/kubelet=-s -w -X main.version=v1",
                "-o",
                "/c/bin.partial/",
                "go.etcd.io/etcd/server/v3",
                "k8s.io/kubernetes/cmd/kube-apiserver",
                "k8s.io/kubernetes/cmd/kubelet",
            ]
        );
        assert!(groups[1].args(Path::new("/r")).windows(2).any(|w| w == ["-tags", "seccomp"]));
        // Another module's binaries, or other tags, are never in the same invocation.
        let mut tagged = recipe("module k8s\n");
        tagged.binaries[0].tags = "other";
        assert_eq!(invocations(&[&plane, &tagged]).len(), 2);
    }

    #[test]
    fn no_go_names_what_needs_it_and_the_way_around() {
        let msg = no_go(&recipe("module a\n"), "not found".into()).to_string();
        assert!(msg.contains("a test program") && msg.contains("1.26.0") && msg.contains("nothing"), "{msg}");
    }
}
