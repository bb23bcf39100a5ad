//! Feature detection tells a gate that is off from one that is on: on a local cluster whose
//! API server has three of the DRA gates switched off, the probes that fill a result's
//! `served_features` report exactly those three as off, and every other gate they know as on
//! (the release's defaults), the API server's `kubernetes_feature_enabled` metric says the
//! same, and the reason a scenario is skipped with names the gate.

use dracheck_clusters::{LocalCluster, LocalClusterOptions};
use dracheck_suites::engine::served;

/// Beta gates of the default release that may be switched off (the GA ones are locked on).
const OFF: &[&str] = &["DRAConsumableCapacity", "DRADeviceBindingConditions", "DRAPartitionableDevices"];

#[tokio::test]
async fn gates_switched_off_are_reported_off_and_the_others_on() {
    let gates = OFF.iter().map(|g| format!("{g}=false")).collect::<Vec<_>>().join(",");
    let opts = LocalClusterOptions { feature_gates: gates, ..LocalClusterOptions::from_env() };
    let cluster = LocalCluster::start(opts).await.expect("the local cluster starts");
    let client = cluster.client();

    let found = served::probe(&client).await;
    for gate in OFF {
        assert_eq!(found.get(*gate), Some(&false), "{gate} is off, the probes found {found:?}");
    }
    for gate in ["DRAAdminAccess", "DRAPrioritizedList", "DRADeviceTaints", "DRAExtendedResource"] {
        assert_eq!(found.get(gate), Some(&true), "{gate} is on by default, the probes found {found:?}");
    }
    assert_eq!(found.len(), OFF.len() + 4, "a probe did not answer: {found:?}");

    // The API server's own account of its gates (its metrics) agrees with the probes.
    let enabled = served::gates_enabled(&client).await;
    for gate in OFF {
        assert_eq!(enabled.get(*gate), Some(&false), "{gate} is off, the metrics say {enabled:?}");
    }
    for gate in ["DynamicResourceAllocation", "DRAPrioritizedList", "DRADeviceTaints"] {
        assert_eq!(enabled.get(gate), Some(&true), "{gate} is on, the metrics say {enabled:?}");
    }

    let why = served::slice_dropped(&client, "gpu.mock.dracheck.io", &served::SHARED_COUNTERS)
        .await
        .expect("the dry run answers")
        .expect("shared counters are dropped with the gate off");
    assert!(why.contains("DRAPartitionableDevices") && why.contains("spec.sharedCounters"), "{why}");
    let kept = served::slice_dropped(&client, "gpu.mock.dracheck.io", &served::DEVICE_TAINTS).await;
    assert!(matches!(kept, Ok(None)), "device taints are served: {kept:?}");
}
