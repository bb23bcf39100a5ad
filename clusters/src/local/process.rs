//! Processes the local cluster starts, and how they are stopped: exactly the ones we started
//! (pid plus kernel start time, so a recycled pid is never hit), each in its own process
//! group so that anything it forks goes with it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{ClusterError, Result};

/// What survives in the state dir so that another process (`cluster down`) can find and stop
/// exactly what was started.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProcessRecord {
    pub name: String,
    pub pid: u32,
    /// Field 22 of `/proc/<pid>/stat`: tells our process from a later one with the same pid.
    pub start_ticks: u64,
    pub log: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime {
    /// Dies with the process that started it (tests, `conformance`): the kernel kills it if we
    /// are killed, and `Drop` stops it otherwise.
    Attached,
    /// Outlives the starter in a session of its own (`cluster up`), until `cluster down`.
    Detached,
}

/// A started child we are responsible for.
#[derive(Debug)]
pub struct Supervised {
    child: Child,
    record: ProcessRecord,
    released: bool,
}

impl Supervised {
    pub fn spawn(name: &str, program: &Path, args: &[String], log: &Path, lifetime: Lifetime) -> Result<Supervised> {
        let mut cmd = Command::new(program);
        cmd.args(args);
        Supervised::spawn_command(name, cmd, log, false, lifetime)
    }

    /// Starts `cmd` (with whatever env and dir the caller set) with stdout and stderr going
    /// to `log`, appended to when `append` (a restarted container keeps its earlier output).
    pub fn spawn_command(
        name: &str,
        mut cmd: Command,
        log: &Path,
        append: bool,
        lifetime: Lifetime,
    ) -> Result<Supervised> {
        use std::os::unix::process::CommandExt as _;
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(append)
            .write(true)
            .truncate(!append)
            .open(log)
            .map_err(ClusterError::io(format!("creating {}", log.display())))?;
        let err = out.try_clone().map_err(ClusterError::io("duplicating a log handle"))?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        // SAFETY: only async-signal-safe calls (setsid, setpgid, prctl) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                match lifetime {
                    Lifetime::Detached => {
                        if libc::setsid() < 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    Lifetime::Attached => {
                        if libc::setpgid(0, 0) < 0 || libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) < 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                }
                Ok(())
            });
        }
        let program = cmd.get_program().to_string_lossy().into_owned();
        let child = cmd.spawn().map_err(ClusterError::io(format!("starting {program}")))?;
        let pid = child.id();
        let start_ticks = proc_stat(pid).map(|s| s.start_ticks).unwrap_or(0);
        Ok(Supervised {
            child,
            record: ProcessRecord { name: name.to_string(), pid, start_ticks, log: log.to_path_buf() },
            released: false,
        })
    }

    pub fn record(&self) -> &ProcessRecord {
        &self.record
    }

    /// `Some(status)` once the process has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Stops the process group: SIGTERM, then SIGKILL after `grace`; reaps the child.
    pub fn stop(&mut self, grace: Duration) {
        if self.released {
            return;
        }
        self.released = true;
        if self.exited().is_some() {
            signal_group(self.record.pid, libc::SIGKILL);
            return;
        }
        signal_group(self.record.pid, libc::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.exited().is_some() {
                // Leftover members of the group, if the main process forked any.
                signal_group(self.record.pid, libc::SIGKILL);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        signal_group(self.record.pid, libc::SIGKILL);
        let _ = self.child.wait();
    }

    /// Gives up responsibility: the process keeps running and only its record remains.
    pub fn release(mut self) -> ProcessRecord {
        self.released = true;
        self.record.clone()
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}

fn signal_group(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) on a negative pid signals that process group; the group was created
    // for this child alone (setsid or setpgid at spawn).
    unsafe {
        libc::kill(-(pid as libc::pid_t), sig);
    }
}

/// A memory field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`, …) in MiB; 0 once the process
/// is gone.
pub fn status_mib(pid: u32, field: &str) -> f64 {
    let prefix = format!("{field}:");
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(&prefix))?.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

/// The fields of `/proc/<pid>/stat` that we need.
#[derive(Debug, Clone, Copy)]
pub struct ProcStat {
    pub state: char,
    pub pgrp: i64,
    pub start_ticks: u64,
    /// User and system CPU time so far, in clock ticks.
    pub cpu_ticks: u64,
}

pub fn proc_stat(pid: u32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_ticks: fields.get(19)?.parse().ok()?,
        cpu_ticks: fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?,
    })
}

/// The CPU time (user and system) the process `pid` has used so far, in seconds; 0 where it
/// is gone.
pub fn cpu_seconds(pid: u32) -> f64 {
    // SAFETY: sysconf only reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    proc_stat(pid).map_or(0.0, |s| s.cpu_ticks as f64 / hz)
}

/// Whether the process `pid` that started at `start_ticks` (not a later one with a recycled
/// pid) is still running.
pub fn is_running(pid: u32, start_ticks: u64) -> bool {
    proc_stat(pid).is_some_and(|s| s.start_ticks == start_ticks && s.state != 'Z' && s.state != 'X')
}

impl ProcessRecord {
    /// Whether this very process (not a later one with a recycled pid) is still running.
    pub fn is_alive(&self) -> bool {
        is_running(self.pid, self.start_ticks)
    }

    /// Stops a recorded process that is not our child (it was started by an earlier
    /// `cluster up`): SIGTERM to its group, SIGKILL after `grace`. Returns whether it is gone.
    pub fn stop(&self, grace: Duration) -> bool {
        if !self.is_alive() {
            return true;
        }
        let own_group = proc_stat(self.pid).is_some_and(|s| s.pgrp == self.pid as i64);
        let signal = |sig| {
            if own_group {
                signal_group(self.pid, sig);
            } else {
                // SAFETY: kill(2) of a single pid that we verified by start time.
                unsafe {
                    libc::kill(self.pid as libc::pid_t, sig);
                }
            }
        };
        signal(libc::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if !self.is_alive() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        signal(libc::SIGKILL);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if !self.is_alive() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sleeper(dir: &Path, lifetime: Lifetime) -> Supervised {
        Supervised::spawn(
            "sleeper",
            Path::new("/bin/sh"),
            &["-c".into(), "sleep 30 & sleep 30".into()],
            &dir.join("s.log"),
            lifetime,
        )
        .unwrap()
    }

    #[test]
    fn stop_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = sleeper(dir.path(), Lifetime::Attached);
        let record = p.record().clone();
        std::thread::sleep(Duration::from_millis(100));
        assert!(record.is_alive());
        let pgid = record.pid as i64;
        p.stop(Duration::from_secs(2));
        assert!(!record.is_alive());
        std::thread::sleep(Duration::from_millis(100));
        let members: Vec<u32> = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .filter(|pid| proc_stat(*pid).is_some_and(|s| s.pgrp == pgid && s.state != 'Z'))
            .collect();
        assert!(members.is_empty(), "group members left running: {members:?}");
    }

    #[test]
    fn a_record_tells_a_recycled_pid_apart() {
        let dir = tempfile::tempdir().unwrap();
        let p = sleeper(dir.path(), Lifetime::Attached);
        let mut record = p.record().clone();
        assert!(record.is_alive());
        record.start_ticks += 1;
        assert!(!record.is_alive(), "a different start time means a different process");
        assert!(record.stop(Duration::from_millis(100)), "stopping a stranger is a no-op");
        drop(p);
    }

    #[test]
    fn released_processes_are_stopped_through_their_record() {
        let dir = tempfile::tempdir().unwrap();
        let record = sleeper(dir.path(), Lifetime::Detached).release();
        assert!(record.is_alive());
        assert!(record.stop(Duration::from_secs(2)));
        assert!(!record.is_alive());
    }
}
