//! How many nodes of each kind this machine can hold. Each node runs its own driver process and
//! adds watches and objects to the apiserver; past the machine's memory a run would swap or
//! be killed halfway, so a count beyond it is refused before anything starts.

use super::real::NodeKind;
use crate::error::{ClusterError, Result};

/// Memory an emulated node costs, with headroom. Measured with `cluster up --nodes 6 --driver
/// mock` on 2 cores: a mock driver process 34 MiB resident, the node agent 45 MiB for all six,
/// the apiserver within 1% of its size without nodes (300 MiB); so about 40 MiB a node, and
/// workloads (host processes) on top.
pub const PER_NODE_MIB: u64 = 64;
/// Memory a real node costs, with headroom. Measured with `cargo xtask bench nodes` (3 nodes,
/// the mock on each, one pod running): 178 MiB a node for its kubelet, containerd, shims,
/// containers and driver (the kubelet about 90 of it).
pub const PER_REAL_NODE_MIB: u64 = 256;
/// Memory kept for etcd, kube-apiserver, kube-scheduler, kube-controller-manager and the run.
pub const RESERVED_MIB: u64 = 2048;

/// The limit and the facts it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLimit {
    pub available_mib: u64,
    pub limit: usize,
    pub per_node_mib: u64,
    pub kind: NodeKind,
}

impl NodeLimit {
    pub fn from_available(available_mib: u64, kind: NodeKind) -> NodeLimit {
        let per_node_mib = match kind {
            NodeKind::Real => PER_REAL_NODE_MIB,
            NodeKind::Emulated => PER_NODE_MIB,
        };
        let limit = (available_mib.saturating_sub(RESERVED_MIB) / per_node_mib) as usize;
        NodeLimit { available_mib, limit, per_node_mib, kind }
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
            per_node_mib: self.per_node_mib,
            kind: self.kind.name().to_string(),
            reserved_mib: RESERVED_MIB,
        })
    }
}

/// The limit on this machine now, from `MemAvailable` in `/proc/meminfo`. Where that cannot
/// be read nothing is refused: the count is then the user's to choose.
pub fn node_limit(kind: NodeKind) -> NodeLimit {
    let available = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| mem_available_mib(&m));
    match available {
        Some(mib) => NodeLimit::from_available(mib, kind),
        None => NodeLimit { available_mib: 0, limit: usize::MAX, per_node_mib: 0, kind },
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
        let limit = NodeLimit::from_available(RESERVED_MIB + 10 * PER_NODE_MIB, NodeKind::Emulated);
        assert_eq!(limit.limit, 10);
        assert!(limit.check(10).is_ok());
        let err = limit.check(10_000).unwrap_err();
        assert_eq!(err.failure(), crate::Failure::BadInput);
        let text = err.to_string();
        assert!(text.contains("at most 10 emulated nodes") && text.contains("smaller --nodes"), "{text}");
    }

    #[test]
    fn a_machine_with_less_than_the_control_plane_needs_holds_no_node() {
        assert_eq!(NodeLimit::from_available(100, NodeKind::Real).limit, 0);
        let real = NodeLimit::from_available(RESERVED_MIB + 10 * PER_REAL_NODE_MIB, NodeKind::Real);
        assert_eq!(real.limit, 10);
        assert!(real.check(11).unwrap_err().to_string().contains("at most 10 real nodes"));
    }

    #[test]
    fn mem_available_is_read_in_mib() {
        let meminfo = "MemTotal:       24576000 kB\nMemFree:  1 kB\nMemAvailable:   23068672 kB\n";
        assert_eq!(mem_available_mib(meminfo), Some(22528));
        assert_eq!(mem_available_mib("MemTotal: 1 kB\n"), None);
    }
}
