//! The emulated nodes tell the same truth as real ones: on real nodes (the upstream kubelet,
//! containerd and runc) the good mock passes everything and each fault whose verdict hangs on
//! what a node does (`dracheck_suites::fidelity::NODE_DEPENDENT`) breaks exactly the
//! guarantees of the fidelity table, the table that the emulated nodes are held to. Where the
//! machine cannot run real nodes the log says why and nothing is checked on them.

use std::time::Duration;

use super::pool::Admission;

/// Real nodes cost more CPU than emulated ones (a kubelet and a containerd each), and their
/// timeouts are the kubelet's own, which a starved node misses sooner: three at most. Their
/// runs take the longest, so their idle bound is below the emulated runs': where the machine
/// has room for one more run, a real-node run takes it.
pub const ADMISSION: Admission = Admission { cap: 3, min_idle: 0.3, gap: Duration::from_secs(8) };

/// Whether real nodes can run here; where not, the log says why.
pub fn supported() -> bool {
    match dracheck_clusters::local::real::host::check_support() {
        Ok(_) => true,
        Err(reason) => {
            eprintln!("skipped: the table on real nodes, since real nodes cannot run here ({reason})");
            false
        }
    }
}
