//! kubernetes-sigs/dra-example-driver, built from its Go module at the pinned release, under
//! the whole default suite on the local cluster: every guarantee holds except the findings
//! `dracheck_example_driver::FINDINGS` records, and those fail.

use dracheck_clusters::local::Progress;
use dracheck_example_driver::{DEVICES_PER_NODE, FINDINGS};
use dracheck_suites::engine::target::{NEEDS_PLUGIN_ACCOUNT, NO_HEALTH_HOOK, NO_SHAREABLE_DEVICE, NO_UNHEALTHY_HOOK};
use dracheck_suites::local_run::{self, LocalRun};
use dracheck_suites::profile::ids::{
    PLUGIN_HEALTH_REPORTED, PLUGIN_SHARES_INDEPENDENT, PLUGIN_SLICES_OWN_NODE_ONLY, PLUGIN_SLICES_TAINTS_UNHEALTHY,
};
use dracheck_suites::result::Verdict;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_driver_meets_every_guarantee_but_its_recorded_findings() {
    let progress = Progress::to(|l| eprintln!("[example] {l}"));
    let bin = dracheck_example_driver::binary(&progress).await.unwrap_or_else(|e| panic!("{e}"));
    let mut cfg =
        LocalRun::default_for(dracheck_example_driver::adapter(&bin, DEVICES_PER_NODE)).expect("the run is set up");
    // The mock beside it on one node, as `cargo xtask conformance` runs it.
    cfg.companion = Some(dracheck_mock_driver::adapter::companion().expect("the mock as the second driver"));
    let result = local_run::run(cfg, &local_run::run_id(), &progress)
        .await
        .map_err(|e| e.message)
        .expect("the run starts")
        .result;

    let mut problems = Vec::new();
    for g in result.all() {
        let finding = FINDINGS.iter().find(|f| f.id == g.id);
        match (finding, g.verdict) {
            (None, Verdict::Pass) | (Some(_), Verdict::Fail) => {}
            // Run as the suite's processes, the driver has no account of its own; its chart's
            // is checked where the chart is installed (`--install helm`, reports/record).
            (None, Verdict::Skip) if g.id == PLUGIN_SLICES_OWN_NODE_ONLY && g.reason == NEEDS_PLUGIN_ACCOUNT => {}
            // v0.4.0 has no health checks: nothing the suite could do makes a device unhealthy.
            (None, Verdict::Skip) if g.id == PLUGIN_SLICES_TAINTS_UNHEALTHY && g.reason == NO_UNHEALTHY_HOOK => {}
            (None, Verdict::Skip) if g.id == PLUGIN_HEALTH_REPORTED && g.reason == NO_HEALTH_HOOK => {}
            // Run with its default flags, v0.4.0 publishes no shareable GPU
            // (`--gpu-allow-multiple-allocations` off).
            (None, Verdict::Skip) if g.id == PLUGIN_SHARES_INDEPENDENT && g.reason == NO_SHAREABLE_DEVICE => {}
            (None, v) => problems.push(format!("{} is {v}: {}", g.id, g.reason)),
            (Some(f), v) => {
                problems.push(format!("{} is {v}, but the recorded finding says it fails: {}", g.id, f.why))
            }
        }
    }
    for f in FINDINGS {
        if !result.all().any(|g| g.id == f.id) {
            problems.push(format!("{} is a recorded finding but no scenario checked it", f.id));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
