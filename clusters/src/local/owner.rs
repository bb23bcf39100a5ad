//! Who a run's leftovers belong to, so that a later run can tell a live run's state from a
//! dead one's, as testcontainers' Ryuk does: a local state dir records its owning process in
//! `cluster.json`, and the namespaces and DeviceClasses a run makes on any cluster carry the
//! owner as annotations. A process is its pid plus its kernel start time, so that a recycled
//! pid never passes for the owner.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::process::is_running;

/// One process of this machine's current boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerProcess {
    pub pid: u32,
    /// Field 22 of `/proc/<pid>/stat`.
    pub start_ticks: u64,
}

impl OwnerProcess {
    pub fn current() -> OwnerProcess {
        let pid = std::process::id();
        OwnerProcess { pid, start_ticks: super::process::proc_stat(pid).map_or(0, |s| s.start_ticks) }
    }

    pub fn is_alive(&self) -> bool {
        is_running(self.pid, self.start_ticks)
    }
}

/// The owner of a local cluster's state dir.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Owner {
    /// Runs until `cluster down` (`cluster up`, `conformance --keep-cluster`) and is never
    /// reaped. Also what a record written before owners were recorded means: such a dir is
    /// not ours to judge.
    #[default]
    Detached,
    /// Belongs to this process (a conformance run, a test): stale once it is gone.
    Process(OwnerProcess),
}

impl Owner {
    /// The owning process, if there is one and it no longer runs.
    pub fn gone(&self) -> Option<OwnerProcess> {
        match self {
            Owner::Process(p) if !p.is_alive() => Some(*p),
            _ => None,
        }
    }
}

/// Annotations of a run's namespaces and DeviceClasses.
pub const OWNER_HOST: &str = "dracheck.io/owner-host";
pub const OWNER_BOOT_ID: &str = "dracheck.io/owner-boot-id";
pub const OWNER_PID: &str = "dracheck.io/owner-pid";
pub const OWNER_START_TICKS: &str = "dracheck.io/owner-start-ticks";

/// The run that made an object in a cluster, which any machine may reach: the pid only means
/// something on the machine (host name) and boot (boot ID) that recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOwner {
    pub host: String,
    pub boot_id: String,
    pub process: OwnerProcess,
}

/// Whether a [`RunOwner`] still runs, as far as this machine can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerState {
    Running,
    /// Ended here, or this machine has rebooted since.
    Gone,
    /// Recorded on another machine: nothing here can tell.
    Elsewhere,
}

impl RunOwner {
    pub fn current() -> RunOwner {
        let (host, boot_id) = machine();
        RunOwner { host, boot_id, process: OwnerProcess::current() }
    }

    pub fn annotations(&self) -> BTreeMap<String, String> {
        [
            (OWNER_HOST, self.host.clone()),
            (OWNER_BOOT_ID, self.boot_id.clone()),
            (OWNER_PID, self.process.pid.to_string()),
            (OWNER_START_TICKS, self.process.start_ticks.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// `None` where any of the annotations is missing or malformed (an object of an older
    /// dracheck, or edited by hand).
    pub fn from_annotations(annotations: &BTreeMap<String, String>) -> Option<RunOwner> {
        let get = |k: &str| annotations.get(k).filter(|v| !v.is_empty());
        Some(RunOwner {
            host: get(OWNER_HOST)?.clone(),
            boot_id: get(OWNER_BOOT_ID)?.clone(),
            process: OwnerProcess {
                pid: get(OWNER_PID)?.parse().ok()?,
                start_ticks: get(OWNER_START_TICKS)?.parse().ok()?,
            },
        })
    }

    pub fn state(&self) -> OwnerState {
        let (host, boot_id) = machine();
        self.state_seen_from(&host, &boot_id)
    }

    fn state_seen_from(&self, host: &str, boot_id: &str) -> OwnerState {
        if self.host != host {
            OwnerState::Elsewhere
        } else if self.boot_id != boot_id {
            // Same machine, later boot: every process of that boot has ended.
            OwnerState::Gone
        } else if self.process.is_alive() {
            OwnerState::Running
        } else {
            OwnerState::Gone
        }
    }
}

impl std::fmt::Display for RunOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {} on {}", self.process.pid, self.host)
    }
}

/// This machine's host name and boot ID (both from the kernel; empty if unreadable).
fn machine() -> (String, String) {
    let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_default();
    (read("/proc/sys/kernel/hostname"), read("/proc/sys/kernel/random/boot_id"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A process that has exited and been reaped: its pid + start time names no process.
    pub(crate) fn ended_process() -> OwnerProcess {
        let mut child = std::process::Command::new("/bin/true").spawn().unwrap();
        let pid = child.id();
        let start_ticks = super::super::process::proc_stat(pid).map_or(1, |s| s.start_ticks);
        child.wait().unwrap();
        OwnerProcess { pid, start_ticks }
    }

    #[test]
    fn the_current_process_is_alive_and_an_ended_one_is_gone() {
        assert!(OwnerProcess::current().is_alive());
        assert!(!ended_process().is_alive());
    }

    #[test]
    fn a_recycled_pid_is_not_the_owner() {
        let mut me = OwnerProcess::current();
        me.start_ticks += 1;
        assert!(!me.is_alive(), "same pid, other start time: another process");
    }

    #[test]
    fn only_a_process_owner_can_be_gone() {
        assert_eq!(Owner::Process(OwnerProcess::current()).gone(), None);
        let ended = ended_process();
        assert_eq!(Owner::Process(ended).gone(), Some(ended));
        assert_eq!(Owner::Detached.gone(), None, "a detached cluster runs until `cluster down`");
    }

    #[test]
    fn a_record_without_an_owner_reads_as_detached() {
        #[derive(Deserialize)]
        struct Record {
            #[serde(default)]
            owner: Owner,
        }
        let old: Record = serde_json::from_str("{}").unwrap();
        assert_eq!(old.owner, Owner::Detached);
        let owner = Owner::Process(OwnerProcess { pid: 7, start_ticks: 9 });
        let text = serde_json::to_string(&owner).unwrap();
        assert_eq!(text, r#"{"kind":"process","pid":7,"start_ticks":9}"#);
        assert_eq!(serde_json::from_str::<Owner>(&text).unwrap(), owner);
    }

    #[test]
    fn annotations_round_trip_and_incomplete_ones_name_no_owner() {
        let me = RunOwner::current();
        let mut a = me.annotations();
        assert_eq!(RunOwner::from_annotations(&a), Some(me));
        a.insert(OWNER_PID.into(), "not-a-pid".into());
        assert_eq!(RunOwner::from_annotations(&a), None);
        assert_eq!(RunOwner::from_annotations(&BTreeMap::new()), None);
    }

    #[test]
    fn an_owner_is_judged_only_on_its_own_machine() {
        let me = RunOwner::current();
        let (host, boot) = (me.host.clone(), me.boot_id.clone());
        assert_eq!(me.state_seen_from(&host, &boot), OwnerState::Running);
        assert_eq!(me.state_seen_from("another-host", &boot), OwnerState::Elsewhere);
        assert_eq!(me.state_seen_from(&host, "a-later-boot"), OwnerState::Gone, "a reboot ended every run");
        let ended = RunOwner { process: ended_process(), ..me };
        assert_eq!(ended.state_seen_from(&host, &boot), OwnerState::Gone);
    }
}
