//! The state dir of a local cluster: certificates, kubeconfigs, data, logs, and
//! `cluster.json`, the record another process needs to find and stop the cluster.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::owner::Owner;
use super::process::ProcessRecord;
use crate::error::{ClusterError, Result};

pub const INFO_FILE: &str = "cluster.json";

/// Written as soon as the first process starts and after every further one, so that even a
/// `cluster up` killed halfway leaves what `cluster down` needs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClusterInfo {
    pub kubernetes_version: String,
    pub server: String,
    pub kubeconfig: PathBuf,
    pub feature_gates: String,
    /// Filled once the apiserver answers discovery.
    pub resource_api_versions: Vec<String>,
    pub ready: bool,
    /// Component name → its port on 127.0.0.1.
    pub ports: std::collections::BTreeMap<String, u16>,
    /// In start order.
    pub processes: Vec<ProcessRecord>,
    /// Whose the cluster is: a run's (reaped by any later run once that run is gone) or
    /// nobody's (`cluster up`, a kept run: until `cluster down`).
    #[serde(default)]
    pub owner: Owner,
}

impl ClusterInfo {
    pub fn load(state_dir: &Path) -> Result<ClusterInfo> {
        let path = state_dir.join(INFO_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| ClusterError::NoState {
            state_dir: state_dir.to_path_buf(),
            detail: format!("{}: {e}", path.display()),
        })?;
        serde_json::from_str(&text).map_err(|e| ClusterError::NoState {
            state_dir: state_dir.to_path_buf(),
            detail: format!("{} is not a cluster record: {e}", path.display()),
        })
    }

    pub fn save(&self, state_dir: &Path) -> Result<()> {
        let path = state_dir.join(INFO_FILE);
        let tmp = state_dir.join(format!("{INFO_FILE}.tmp"));
        let text = serde_json::to_string_pretty(self).expect("cluster info serializes");
        std::fs::write(&tmp, text).map_err(ClusterError::io(format!("writing {}", tmp.display())))?;
        std::fs::rename(&tmp, &path).map_err(ClusterError::io(format!("writing {}", path.display())))
    }

    /// The first recorded process that is still running.
    pub fn first_alive(&self) -> Option<&ProcessRecord> {
        self.processes.iter().find(|p| p.is_alive())
    }

    /// Stops every recorded process, newest first, and says which of them were still
    /// running. `Err` names one that would not die.
    pub fn stop_all(&self, grace: Duration) -> Result<Stopped> {
        let mut stopped = Vec::new();
        let mut not_running = Vec::new();
        for p in self.processes.iter().rev() {
            if !p.is_alive() {
                not_running.push(p.name.clone());
            } else if p.stop(grace) {
                stopped.push(p.name.clone());
            } else {
                return Err(ClusterError::Io {
                    context: format!("{} (pid {}) did not exit after SIGKILL", p.name, p.pid),
                    source: std::io::Error::from(std::io::ErrorKind::TimedOut),
                });
            }
        }
        // Reported in start order, as `cluster status` lists them.
        stopped.reverse();
        not_running.reverse();
        Ok(Stopped { kubernetes_version: self.kubernetes_version.clone(), stopped, not_running })
    }
}

/// What stopping a recorded cluster found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    pub kubernetes_version: String,
    /// Recorded processes that were running and have been stopped.
    pub stopped: Vec<String>,
    /// Recorded processes that had already ended.
    pub not_running: Vec<String>,
}

impl Stopped {
    /// What was found and done, e.g. `found 4 recorded processes, none alive`.
    pub fn summary(&self) -> String {
        let total = self.stopped.len() + self.not_running.len();
        let processes = |n: usize| if n == 1 { "process" } else { "processes" };
        match (self.stopped.len(), self.not_running.len()) {
            (0, 0) => "no processes were recorded".into(),
            (n, 0) => format!("stopped its {n} {} ({})", processes(n), self.stopped.join(", ")),
            (0, n) => format!("found {n} recorded {}, none alive", processes(n)),
            (n, _) => format!(
                "stopped {n} of its {total} recorded processes ({}); {} had already ended",
                self.stopped.join(", "),
                self.not_running.join(", ")
            ),
        }
    }
}

/// Where the state lives and whether we made the directory.
#[derive(Debug)]
pub struct StateDir {
    path: PathBuf,
}

impl StateDir {
    /// A fresh temporary directory, removed at teardown.
    pub fn temporary() -> Result<StateDir> {
        let dir = tempfile::Builder::new()
            .prefix("dracheck-")
            .tempdir()
            .map_err(ClusterError::io("creating a temporary state dir"))?;
        Ok(StateDir { path: dir.keep() })
    }

    /// A directory the user named. It must be new, empty, or the state of a local cluster
    /// that is no longer running; anything else is refused, because teardown removes it.
    pub fn given(path: &Path) -> Result<StateDir> {
        let path = if path.is_absolute() {
            path.to_path_buf()
        } else {
            std::env::current_dir().map_err(ClusterError::io("reading the current dir"))?.join(path)
        };
        if path.exists() {
            let empty = std::fs::read_dir(&path)
                .map_err(ClusterError::io(format!("reading {}", path.display())))?
                .next()
                .is_none();
            if !empty {
                match ClusterInfo::load(&path) {
                    Ok(info) => {
                        // The state of a run that is gone: whatever it left running goes too.
                        if info.owner.gone().is_some() {
                            info.stop_all(Duration::from_secs(10))?;
                        } else if let Some(p) = info.first_alive() {
                            return Err(ClusterError::AlreadyRunning { state_dir: path, pid: p.pid });
                        }
                        // Its real nodes' containers, mounts and cgroups, before the dir goes.
                        super::real::scrub(&path);
                        remove_state_dir(&path)
                            .map_err(ClusterError::io(format!("clearing the stale state in {}", path.display())))?;
                    }
                    Err(_) => return Err(ClusterError::StateDirNotOurs { state_dir: path }),
                }
            }
        }
        std::fs::create_dir_all(&path).map_err(ClusterError::io(format!("creating {}", path.display())))?;
        // The reaper looks in `$TMPDIR` only: a link there finds this dir if its run is killed.
        let link = given_link(&path);
        let _ = std::fs::remove_file(&link);
        let _ = std::os::unix::fs::symlink(&path, &link);
        Ok(StateDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn remove(&self) {
        let _ = remove_state_dir(&self.path);
    }
}

/// How a state dir named outside `$TMPDIR` (`--state-dir`) is found by the reaper, which
/// looks only there: a link `$TMPDIR/dracheck-given-<hash of the path>` to it, made with the
/// dir and removed with it.
pub const GIVEN_PREFIX: &str = "dracheck-given-";

pub fn given_link(dir: &Path) -> PathBuf {
    let hash = dracheck_adapter::share::stable_hash(dir.as_os_str().as_encoded_bytes());
    std::env::temp_dir().join(format!("{GIVEN_PREFIX}{hash:016x}"))
}

/// Removes a state dir and, where it was named by the user, its link in `$TMPDIR`.
pub fn remove_state_dir(dir: &Path) -> std::io::Result<()> {
    let link = given_link(dir);
    if std::fs::read_link(&link).is_ok_and(|target| target == dir) {
        let _ = std::fs::remove_file(&link);
    }
    std::fs::remove_dir_all(dir)
}

/// Where the logs of a failed start go, so that the message quoting them can name a path that
/// outlives the state dir's removal: `$TMPDIR/dracheck-failed-<random>/logs`.
pub const FAILED_PREFIX: &str = "dracheck-failed-";

/// Moves `<state_dir>/logs` out of the state dir (which teardown removes) and returns where it
/// went; `None` if there were no logs or they could not be kept. Processes still writing to
/// them keep writing to the moved files.
pub fn keep_logs(state_dir: &Path) -> Option<PathBuf> {
    let logs = state_dir.join("logs");
    std::fs::read_dir(&logs).ok()?.next()?.ok()?;
    let kept = tempfile::Builder::new().prefix(FAILED_PREFIX).tempdir().ok()?.keep().join("logs");
    if std::fs::rename(&logs, &kept).is_err() {
        // Another file system (a --state-dir elsewhere): copy what there is.
        std::fs::create_dir_all(&kept).ok()?;
        for entry in std::fs::read_dir(&logs).ok()?.flatten() {
            let _ = std::fs::copy(entry.path(), kept.join(entry.file_name()));
        }
    }
    Some(kept)
}

/// `path` as it is after [`keep_logs`] moved `logs` (a log's path under the state dir) to `kept`.
pub fn moved_log(path: &Path, logs: &Path, kept: &Path) -> PathBuf {
    path.strip_prefix(logs).map_or_else(|_| path.to_path_buf(), |rest| kept.join(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stopped(stopped: &[&str], not_running: &[&str]) -> Stopped {
        Stopped {
            kubernetes_version: "v1.37.2".into(),
            stopped: stopped.iter().map(|s| s.to_string()).collect(),
            not_running: not_running.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn the_summary_says_what_was_found_running() {
        assert_eq!(
            stopped(&["etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager"], &[]).summary(),
            "stopped its 4 processes (etcd, kube-apiserver, kube-scheduler, kube-controller-manager)"
        );
        assert_eq!(
            stopped(&[], &["etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager"]).summary(),
            "found 4 recorded processes, none alive"
        );
        assert_eq!(
            stopped(&["kube-apiserver"], &["etcd"]).summary(),
            "stopped 1 of its 2 recorded processes (kube-apiserver); etcd had already ended"
        );
        assert_eq!(stopped(&[], &["etcd"]).summary(), "found 1 recorded process, none alive");
        assert_eq!(stopped(&[], &[]).summary(), "no processes were recorded");
    }

    #[test]
    fn stopping_reports_which_recorded_processes_were_running() {
        use super::super::process::{Lifetime, Supervised};
        let dir = tempfile::tempdir().unwrap();
        let running = Supervised::spawn(
            "sleeper",
            Path::new("/bin/sleep"),
            &["30".into()],
            &dir.path().join("s.log"),
            Lifetime::Attached,
        )
        .unwrap();
        let ended = ProcessRecord { name: "ended".into(), pid: running.record().pid, start_ticks: 1, log: "x".into() };
        let info = ClusterInfo {
            kubernetes_version: "v1.37.2".into(),
            processes: vec![ended, running.record().clone()],
            ..ClusterInfo::default()
        };
        let report = info.stop_all(Duration::from_secs(2)).unwrap();
        assert_eq!(report, stopped(&["sleeper"], &["ended"]));
        assert!(!running.record().is_alive());
        drop(running);
    }

    #[test]
    fn a_failed_start_keeps_its_logs_outside_the_state_dir() {
        let state = tempfile::tempdir().unwrap();
        let logs = state.path().join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        std::fs::write(logs.join("etcd.log"), "etcd said why\n").unwrap();
        let kept = keep_logs(state.path()).expect("logs are kept");
        let moved = moved_log(&logs.join("etcd.log"), &logs, &kept);
        std::fs::remove_dir_all(state.path()).unwrap();
        assert_eq!(std::fs::read_to_string(&moved).unwrap(), "etcd said why\n");
        assert!(kept.parent().unwrap().file_name().unwrap().to_string_lossy().starts_with(FAILED_PREFIX));
        std::fs::remove_dir_all(kept.parent().unwrap()).unwrap();
        assert_eq!(keep_logs(state.path()), None, "no logs, nothing kept");
    }
}
