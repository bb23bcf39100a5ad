//! The `reset-devices-on-start` fault: a driver that resets the devices it finds prepared
//! when it starts, as a GPU reset during initialisation does, ends the workloads that use
//! them. The mock's devices are environment variables, so their users are the processes
//! whose environment carries `<prefix>_CLAIM_UID` (`cdi::claim_uid_env`) of a claim in the checkpoint.

use std::collections::BTreeSet;

use crate::checkpoint::Checkpoint;
use crate::log;

/// Sends SIGKILL to every process that uses a claim of `checkpoint`; returns how many.
pub fn kill_users(checkpoint: &Checkpoint) -> usize {
    let marks: BTreeSet<String> = checkpoint.claims.keys().map(|uid| crate::cdi::claim_uid_env(uid)).collect();
    if marks.is_empty() {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    let mut killed = 0;
    for pid in entries.flatten().filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok()) {
        // Processes of other users or gone meanwhile cannot be read, and are not ours.
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else { continue };
        let uses = environ.split(|b| *b == 0).any(|var| std::str::from_utf8(var).is_ok_and(|v| marks.contains(v)));
        if uses && pid != std::process::id() as i32 {
            // SAFETY: kill(2) takes plain integers and touches no memory of this process.
            if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
                log!("fault reset-devices-on-start: killed process {pid}, which used a prepared device");
                killed += 1;
            }
        }
    }
    killed
}
