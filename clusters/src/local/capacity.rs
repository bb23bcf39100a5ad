//! How many emulated nodes this machine can hold. Each node runs its own driver process and
//! adds watches and objects to the apiserver; past the machine's memory a run would swap or
//! be killed halfway, so a count beyond it is refused before anything starts.

use crate::error::{ClusterError, Result};

/// Memory an emulated node costs, with headroom. Measured with `cluster up --nodes 6 --driver
/// mock` on 2 cores: a mock driver process 34 MiB resident, the node agent 45 MiB for all six,
/// the apiserver within 1% of its size without nodes (300 MiB); so about 40 MiB a node, and
/// workloads (host processes) on top.
pub const PER_NODE_MIB: u64 = 64;
/// Memory kept for etcd, kube-apiserver, kube-scheduler, kube-controller-manager and the run.
pub const RESERVED_MIB: u64 = 2048;

/// The limit and the facts it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLimit {
    pub available_mib: u64,
    pub limit: usize,
}

impl NodeLimit {
    pub fn from_available(available_mib: u64) -> NodeLimit {
        let limit = (available_mib.saturating_sub(RESERVED_MIB) / PER_NODE_MIB) as usize;
        NodeLimit { available_mib, limit }
    }

    /// `Err` with the limit and why, when `requested` nodes do not fit.
    pub fn check(&self, requested: usize) -> Result<()> {
        if requested <= self.limit {
            return Ok(());
        }
        Err(ClusterError::TooManyNodes {
            requested,
            limit: self.limit,
            available_mib: self.available_mib,
            per_node_mib: PER_NODE_MIB,
            reserved_mib: RESERVED_MIB,
        })
    }
}

/// The limit on this machine now, from `MemAvailable` in `/proc/meminfo`. Where that cannot
/// be read nothing is refused: the count is then the user's to choose.
pub fn node_limit() -> NodeLimit {
    let available = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| mem_available_mib(&m));
    match available {
        Some(mib) => NodeLimit::from_available(mib),
        None => NodeLimit { available_mib: 0, limit: usize::MAX },
    }
}

fn mem_available_mib(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_what_memory_holds_after_the_control_plane() {
        let limit = NodeLimit::from_available(RESERVED_MIB + 10 * PER_NODE_MIB);
        assert_eq!(limit.limit, 10);
        assert!(limit.check(10).is_ok());
        let err = limit.check(10_000).unwrap_err();
        assert_eq!(err.exit_code(), crate::EXIT_BAD_INPUT);
        let text = err.to_string();
        assert!(text.contains("at most 10 emulated nodes") && text.contains("smaller --nodes"), "{text}");
    }

    #[test]
    fn a_machine_with_less_than_the_control_plane_needs_holds_no_node() {
        assert_eq!(NodeLimit::from_available(100).limit, 0);
    }

    #[test]
    fn mem_available_is_read_in_mib() {
        let meminfo = "MemTotal:       24576000 kB\nMemFree:  1 kB\nMemAvailable:   23068672 kB\n";
        assert_eq!(mem_available_mib(meminfo), Some(22528));
        assert_eq!(mem_available_mib("MemTotal: 1 kB\n"), None);
    }
}
