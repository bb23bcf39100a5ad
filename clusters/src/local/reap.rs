//! Reaping, as testcontainers' Ryuk does it: the state dir of a local cluster whose owning run
//! is gone (killed by SIGKILL, or the machine rebooted since) is removed, after the processes
//! its `cluster.json` names are stopped and the machine's settings put back. A [`Reaper`] the
//! run starts beside itself, in a session of its own, does it within a moment of the kill;
//! where the reaper was killed too (a whole process tree SIGKILLed), the next run or `cluster
//! down --stale` does. Only a dir that holds our record with a process owner is ever touched;
//! a detached cluster (`cluster up`, a kept run) stays until `cluster down`.

use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::owner::OwnerProcess;
use super::state::{ClusterInfo, GIVEN_PREFIX, INFO_FILE, Stopped, remove_state_dir};
use crate::error::{ClusterError, Result};

/// How often the reaper looks whether its run still runs.
const WATCH_EVERY: Duration = Duration::from_millis(200);

/// The program a run starts to reap its cluster should the run be killed: `program` with
/// `args` and then `--state-dir DIR` (the command line's hidden `cluster reap-when-gone`,
/// which calls [`reap_when_gone`]). It runs in a session of its own, so that a signal to the
/// run's process group does not reach it, and is dismissed when the run ends on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reaper {
    pub program: PathBuf,
    pub args: Vec<String>,
}

impl Reaper {
    pub fn spawn(&self, state_dir: &Path) -> Result<std::process::Child> {
        use std::os::unix::process::CommandExt as _;
        let mut cmd = std::process::Command::new(&self.program);
        cmd.args(&self.args)
            .arg("--state-dir")
            .arg(state_dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // SAFETY: setsid is async-signal-safe and touches nothing of the parent's.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        cmd.spawn().map_err(ClusterError::io(format!("starting the reaper {}", self.program.display())))
    }
}

/// The reaper's work: waits while the run that owns `dir` runs; once that run is gone and its
/// dir is still there (it was killed), stops and removes what the dir records and puts back
/// the machine-wide settings, and says what it did. Returns at once, doing nothing, when the
/// dir is gone (the run ended and cleaned up) or becomes detached (kept for `cluster down`).
pub fn reap_when_gone(dir: &Path) -> Vec<String> {
    loop {
        if !dir.join(INFO_FILE).is_file() {
            return Vec::new();
        }
        // The record is replaced whole (written aside, then renamed): a failed read is a
        // record being replaced, looked at again next time.
        if let Ok(info) = ClusterInfo::load(dir) {
            match info.owner {
                super::owner::Owner::Detached => return Vec::new(),
                super::owner::Owner::Process(p) if !p.is_alive() => break,
                super::owner::Owner::Process(_) => {}
            }
        }
        std::thread::sleep(WATCH_EVERY);
    }
    let mut said = match reap_if_stale(dir) {
        Ok(Some(reaped)) => vec![reaped.to_string()],
        Ok(None) => Vec::new(),
        Err(e) => vec![format!("could not reap {}: {e}", dir.display())],
    };
    said.extend(reap_machine());
    said
}

/// How [`super::state::StateDir::temporary`] names the state dirs it makes in `$TMPDIR`.
pub const TEMP_PREFIX: &str = "dracheck-";

/// One removed state dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reaped {
    pub state_dir: PathBuf,
    pub owner: OwnerProcess,
    pub stopped: Stopped,
    /// What its real nodes left on the machine and was removed (see `real::scrub`).
    pub scrubbed: Vec<String>,
}

impl std::fmt::Display for Reaped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "removed the state dir {} of a run that is gone (pid {}): {}",
            self.state_dir.display(),
            self.owner.pid,
            self.stopped.summary()
        )?;
        if !self.scrubbed.is_empty() {
            write!(f, "; cleaned up {}", self.scrubbed.join(", "))?;
        }
        Ok(())
    }
}

/// The state dirs among `temp_dir`'s `dracheck-*` entries whose owner is gone: dirs, and the
/// dirs named elsewhere that a `dracheck-given-*` link points to (a link whose dir is gone is
/// removed).
pub fn stale_in(temp_dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(temp_dir) else { return Vec::new() };
    let mut stale: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(TEMP_PREFIX))
        .filter_map(|e| {
            let kind = e.file_type().ok()?;
            if kind.is_dir() {
                return Some(e.path());
            }
            let name = e.file_name();
            if !kind.is_symlink() || !name.to_string_lossy().starts_with(GIVEN_PREFIX) {
                return None;
            }
            match std::fs::read_link(e.path()) {
                Ok(target) if target.is_dir() => Some(target),
                _ => {
                    let _ = std::fs::remove_file(e.path());
                    None
                }
            }
        })
        .filter(|dir| stale_owner(dir).is_some())
        .collect();
    stale.sort();
    stale
}

/// The owner of the cluster recorded in `dir`, if there is such a record and its owner is gone.
pub fn stale_owner(dir: &Path) -> Option<OwnerProcess> {
    if !dir.join(INFO_FILE).is_file() {
        return None;
    }
    ClusterInfo::load(dir).ok()?.owner.gone()
}

/// Stops and removes every stale state dir in `temp_dir`; one result per dir.
pub fn reap_stale_in(temp_dir: &Path) -> Vec<Result<Reaped>> {
    stale_in(temp_dir).iter().filter_map(|dir| reap_if_stale(dir).transpose()).collect()
}

/// [`reap_stale_in`] the temp dir that [`super::state::StateDir::temporary`] uses.
pub fn reap_stale() -> Vec<Result<Reaped>> {
    reap_stale_in(&std::env::temp_dir())
}

/// Puts back the machine-wide settings that real nodes of runs that are all gone changed and
/// no state dir's reap restored (see `real::host::SysctlsBefore::restore_if_abandoned`); says
/// what it changed.
pub fn reap_machine() -> Vec<String> {
    super::real::host::SysctlsBefore::restore_if_abandoned()
}

/// Stops what `dir` records and removes it, if its owner is gone; `Ok(None)` otherwise (no
/// record of ours, a live or detached owner, or another reaper got there first).
pub fn reap_if_stale(dir: &Path) -> Result<Option<Reaped>> {
    let info_path = dir.join(INFO_FILE);
    let Ok(record) = std::fs::File::open(&info_path) else { return Ok(None) };
    // Two runs that start together must not both stop and remove the same dir: whoever holds
    // the lock on its record does it, and the other finds the record gone afterwards.
    // SAFETY: flock on a descriptor we own; LOCK_NB never blocks.
    if unsafe { libc::flock(record.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 || !info_path.is_file() {
        return Ok(None);
    }
    let Ok(info) = ClusterInfo::load(dir) else { return Ok(None) };
    let Some(owner) = info.owner.gone() else { return Ok(None) };
    let stopped = info.stop_all(Duration::from_secs(10))?;
    let scrubbed = super::real::scrub(dir);
    remove_state_dir(dir).map_err(ClusterError::io(format!("removing the stale state dir {}", dir.display())))?;
    Ok(Some(Reaped { state_dir: dir.to_path_buf(), owner, stopped, scrubbed }))
}

#[cfg(test)]
mod tests {
    use super::super::owner::Owner;
    use super::super::owner::tests::ended_process;
    use super::super::process::{Lifetime, ProcessRecord, Supervised};
    use super::*;

    fn state_dir(tmp: &Path, name: &str, owner: Owner, processes: Vec<ProcessRecord>) -> PathBuf {
        let dir = tmp.join(name);
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        let info = ClusterInfo { kubernetes_version: "v1.37.2".into(), owner, processes, ..ClusterInfo::default() };
        info.save(&dir).unwrap();
        dir
    }

    #[test]
    fn the_reaper_reaps_only_a_dir_whose_owner_is_gone() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        let gone = state_dir(t, "dracheck-gone", Owner::Process(ended_process()), Vec::new());
        let said = reap_when_gone(&gone);
        assert!(said.iter().any(|l| l.starts_with("removed the state dir")), "{said:?}");
        assert!(!gone.exists());
        // Kept for `cluster down`, or already cleaned up by its run: nothing to do, at once.
        let kept = state_dir(t, "dracheck-kept", Owner::Detached, Vec::new());
        assert_eq!(reap_when_gone(&kept), Vec::<String>::new());
        assert!(kept.exists());
        assert_eq!(reap_when_gone(&t.join("dracheck-never-was")), Vec::<String>::new());
    }

    #[test]
    fn only_dirs_of_ours_whose_owner_is_gone_are_stale() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        let gone = state_dir(t, "dracheck-gone", Owner::Process(ended_process()), Vec::new());
        state_dir(t, "dracheck-live", Owner::Process(OwnerProcess::current()), Vec::new());
        state_dir(t, "dracheck-up", Owner::Detached, Vec::new());
        state_dir(t, "not-ours", Owner::Process(ended_process()), Vec::new());
        std::fs::create_dir_all(t.join("dracheck-norecord/logs")).unwrap();
        std::fs::create_dir_all(t.join("dracheck-broken")).unwrap();
        std::fs::write(t.join("dracheck-broken").join(INFO_FILE), "{ not json").unwrap();
        std::fs::write(t.join("dracheck-file"), "").unwrap();
        assert_eq!(stale_in(t), vec![gone]);
    }

    #[test]
    fn a_dir_named_elsewhere_is_found_through_its_link_and_a_dangling_link_goes() {
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let gone = state_dir(elsewhere.path(), "gone", Owner::Process(ended_process()), Vec::new());
        let up = state_dir(elsewhere.path(), "up", Owner::Detached, Vec::new());
        let link = |target: &Path, name: &str| {
            std::os::unix::fs::symlink(target, tmp.path().join(format!("{GIVEN_PREFIX}{name}"))).unwrap()
        };
        link(&gone, "1");
        link(&up, "2");
        link(&elsewhere.path().join("removed"), "3");
        assert_eq!(stale_in(tmp.path()), vec![gone]);
        assert!(!tmp.path().join(format!("{GIVEN_PREFIX}3")).exists(), "the dangling link is removed");
        assert!(std::fs::read_link(tmp.path().join(format!("{GIVEN_PREFIX}2"))).is_ok(), "a live cluster's link stays");
    }

    #[test]
    fn reaping_stops_what_the_record_names_then_removes_the_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let logs = tempfile::tempdir().unwrap();
        // Detached: it outlives its starter, as the processes of a killed `cluster up` or of a
        // kept run that was killed during the handover do.
        let survivor = Supervised::spawn(
            "kube-apiserver",
            Path::new("/bin/sleep"),
            &["30".into()],
            &logs.path().join("s.log"),
            Lifetime::Detached,
        )
        .unwrap()
        .release();
        let dead = ended_process();
        let ended =
            ProcessRecord { name: "etcd".into(), pid: dead.pid, start_ticks: dead.start_ticks, log: "x".into() };
        let owner = ended_process();
        let gone = state_dir(tmp.path(), "dracheck-gone", Owner::Process(owner), vec![ended, survivor.clone()]);
        let live = state_dir(tmp.path(), "dracheck-live", Owner::Process(OwnerProcess::current()), Vec::new());

        let reaped: Vec<Reaped> = reap_stale_in(tmp.path()).into_iter().map(Result::unwrap).collect();

        assert_eq!(reaped.len(), 1, "{reaped:?}");
        assert!(!survivor.is_alive(), "the recorded process was stopped");
        assert!(!gone.exists(), "the stale dir was removed");
        assert!(live.exists(), "a live run's dir is left alone");
        assert_eq!(
            reaped[0].to_string(),
            format!(
                "removed the state dir {} of a run that is gone (pid {}): stopped 1 of its 2 recorded processes \
                 (kube-apiserver); etcd had already ended",
                gone.display(),
                owner.pid
            )
        );
        assert!(reap_stale_in(tmp.path()).is_empty(), "nothing is left to reap");
    }

    #[test]
    fn a_given_state_dir_is_reaped_only_when_its_owner_is_gone() {
        let tmp = tempfile::tempdir().unwrap();
        let live = state_dir(tmp.path(), "mine", Owner::Process(OwnerProcess::current()), Vec::new());
        assert_eq!(reap_if_stale(&live).unwrap(), None);
        let up = state_dir(tmp.path(), "up", Owner::Detached, Vec::new());
        assert_eq!(reap_if_stale(&up).unwrap(), None);
        let gone = state_dir(tmp.path(), "gone", Owner::Process(ended_process()), Vec::new());
        assert!(reap_if_stale(&gone).unwrap().is_some());
        assert!(!gone.exists() && live.exists() && up.exists());
    }
}
