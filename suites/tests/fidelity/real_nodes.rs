//! The emulated nodes tell the same truth as real ones: on real nodes (the upstream kubelet,
//! containerd and runc) the good mock passes everything and each fault whose verdict hangs on
//! what a node does breaks exactly the guarantees of the fidelity table, the table that the
//! `fidelity` test holds the emulated nodes to. The faults are those where the two could
//! disagree: how the kubelet dials registration, how containerd resolves CDI, when the
//! kubelet unprepares (also a force-deleted pod's claim), what a kubelet restart and a reboot
//! do, a driver restart that touches running containers, which request's devices each
//! container gets, how the kubelet asks two drivers to prepare one claim, which of two
//! instances of a driver it calls. Where the machine cannot run real nodes the test says why and checks nothing.

use dracheck_clusters::local::NodeKind;

use std::time::Duration;

use super::common;
use super::pool::Admission;
use dracheck_suites::fidelity::{FAULTS, FaultCase};

/// Faults whose verdict depends on the node's kubelet or runtime, by their `--fault` name:
/// registration as the kubelet dials it, CDI as containerd resolves it, unprepare as the
/// kubelet calls it, a kubelet restart, a reboot, the kubelet's slice wipe after an outage, a
/// driver restart under running containers, the devices of which request a container gets,
/// the prepare of a claim that two drivers share, which claims of a pod the kubelet asks a
/// driver to prepare (not those prepared on the node already), when the kubelet unprepares the
/// claim of a force-deleted pod (after its object is gone), which instance of a driver it
/// calls when one of two loses its sockets, how the kubelet matches a container's request to the
/// request names a prepare answers (an alternative's), how the kubelet watches a plugin's
/// health and writes it into the pod's status (or writes `Unknown` where nothing is streamed). Faults that only keep workloads from running (a hanging prepare) give the same verdicts anywhere
/// and stay with the emulated table.
const NODE_DEPENDENT: &[&str] = &[
    "strict-authority",
    "cdi-without-spec",
    "never-unprepare",
    "no-slice-reconcile",
    "register-first-start-only",
    "reset-devices-on-start",
    "trust-checkpoint",
    "trust-published",
    "expire-cdi-spec=10",
    "config-to-every-request",
    "prepare-every-result",
    "drop-unlisted-claims",
    "unprepare-needs-claim",
    "upgrade-removes-sockets",
    "subrequest-request-names",
    "no-health",
    "health-wrong-device",
    "first-request-names",
];

/// Real nodes cost more CPU than emulated ones (a kubelet and a containerd each), and their
/// timeouts are the kubelet's own, which a starved node misses sooner.
const ADMISSION: Admission = Admission { cap: 3, min_idle: 0.4, gap: Duration::from_secs(8) };

fn node_dependent() -> Vec<&'static FaultCase> {
    FAULTS.iter().filter(|c| NODE_DEPENDENT.contains(&c.fault)).collect()
}

/// The node-dependent faults among those `DRACHECK_FIDELITY_ONLY` selects.
fn selected() -> Vec<&'static FaultCase> {
    let picked = common::selected().unwrap_or_else(|e| panic!("{e}"));
    node_dependent().into_iter().filter(|c| picked.iter().any(|p| p.fault == c.fault)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_nodes_give_the_verdicts_of_the_fidelity_table() {
    if let Err(reason) = dracheck_clusters::local::real::host::check_support() {
        eprintln!("skipped: real nodes cannot run here ({reason})");
        return;
    }
    common::check_table(selected(), 1, ADMISSION, NodeKind::Real).await;
}

#[test]
fn the_node_dependent_faults_are_in_the_table() {
    let names: Vec<&str> = node_dependent().iter().map(|c| c.fault).collect();
    for want in NODE_DEPENDENT {
        assert!(names.contains(want), "{want} is not a fault of fidelity::FAULTS: {names:?}");
    }
    // The kubelet restart is the node's own disruption: a fault that breaks it is among them.
    let restart = node_dependent().iter().any(|c| c.breaks().iter().any(|id| id.starts_with("node.restart.")));
    assert!(restart, "no node-dependent fault breaks a node.restart.* guarantee: {names:?}");
}
