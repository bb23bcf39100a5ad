//! Each fault switch makes the mock driver misbehave exactly as documented (README.md, and
//! the `Fault` enum), so that the guarantee it names can be seen failing. One local cluster
//! serves every test.

mod common;

use std::time::{Duration, Instant};

use common::*;
use dracheck_kubelet_api::dra_v1;

fn main() -> std::process::ExitCode {
    run_with_cluster(vec![
        ("fault_fail_prepare_fails_the_first_n_calls", |e| Box::pin(fail_prepare(e))),
        ("fault_hang_prepare_never_answers", |e| Box::pin(hang_prepare(e))),
        ("fault_exit_on_prepare_exits_when_a_prepare_arrives", |e| Box::pin(exit_on_prepare(e))),
        ("fault_non_idempotent_prepare_returns_new_cdi_ids", |e| Box::pin(non_idempotent(e))),
        ("fault_lose_checkpoint_forgets_claims_across_a_restart", |e| Box::pin(lose_checkpoint(e))),
        ("fault_stale_slices_on_exit_keeps_slices", |e| Box::pin(stale_slices(e))),
        ("fault_cdi_without_spec_returns_unresolvable_ids", |e| Box::pin(cdi_without_spec(e))),
        ("fault_wrong_attribute_publishes_a_wrong_value", |e| Box::pin(wrong_attribute(e))),
        ("fault_never_unprepare_fails_every_unprepare", |e| Box::pin(never_unprepare(e))),
        ("fault_foreign_slice_publishes_for_another_node", |e| Box::pin(foreign_slice(e))),
        ("faults_listed_in_the_inventory_apply", |e| Box::pin(inventory_faults(e))),
    ])
}

/// A node with a claim for gpu-0 allocated on it, and the driver running there with `faults`.
async fn setup(env: &Env, node: &str, faults: &[&str]) -> (Driver, dra_v1::Claim) {
    let client = env.client().await;
    create_node(&client, node).await;
    let uid = allocated_claim(&client, &format!("{node}-claim"), node, &["gpu-0"]).await;
    let args: Vec<String> = faults.iter().map(|f| format!("--fault={f}")).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut driver = Driver::new(env, node, &default_inventory(), &args);
    driver.start().await;
    (driver, claim_ref(&format!("{node}-claim"), &uid))
}

async fn fail_prepare(env: Env) {
    let (driver, claim) = setup(&env, "f-fail", &["fail-prepare=2"]).await;
    let mut kubelet = driver.kubelet().await;
    let request = || dra_v1::NodePrepareResourcesRequest { claims: vec![claim.clone()] };
    for call in 1..=2 {
        let e = kubelet.dra.node_prepare_resources(request()).await.expect_err("the first two calls fail");
        assert_eq!(e.code(), tonic::Code::Unavailable, "call {call}: {e:?}");
        assert!(e.message().contains("fail-prepare"), "{e:?}");
    }
    let third = kubelet.dra.node_prepare_resources(request()).await.expect("the third call succeeds").into_inner();
    assert_eq!(third.claims[&claim.uid].error, "");
}

async fn hang_prepare(env: Env) {
    let (driver, claim) = setup(&env, "f-hang", &["hang-prepare"]).await;
    let mut kubelet = driver.kubelet().await;
    let mut request = tonic::Request::new(dra_v1::NodePrepareResourcesRequest { claims: vec![claim.clone()] });
    request.set_timeout(Duration::from_secs(3));
    let started = Instant::now();
    let outcome = tokio::time::timeout(Duration::from_secs(15), kubelet.dra.node_prepare_resources(request)).await;
    let e = outcome.expect("the deadline ends the call, not the test's own timeout").expect_err("no answer in time");
    assert!(matches!(e.code(), tonic::Code::DeadlineExceeded | tonic::Code::Cancelled), "a deadline error: {e:?}");
    assert!(started.elapsed() >= Duration::from_secs(3), "the call hung until the deadline");
    // Only prepare hangs: the plugin is otherwise alive.
    let unprepared = kubelet.unprepare(&[claim]).await;
    assert!(unprepared.claims.values().all(|c| c.error.is_empty()));
    assert!(driver.log().contains("hang-prepare"), "{}", driver.log());
}

async fn exit_on_prepare(env: Env) {
    let (mut driver, claim) = setup(&env, "f-exit", &["exit-on-prepare"]).await;
    let mut kubelet = driver.kubelet().await;
    let request = dra_v1::NodePrepareResourcesRequest { claims: vec![claim] };
    let e = kubelet.dra.node_prepare_resources(request).await.expect_err("the connection breaks");
    assert!(matches!(e.code(), tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Internal), "{e:?}");
    let status = driver.wait(Duration::from_secs(10)).await.expect("the process exits");
    assert_eq!(status.code(), Some(1), "{}", driver.log());
}

async fn non_idempotent(env: Env) {
    let (driver, claim) = setup(&env, "f-nonidem", &["non-idempotent-prepare"]).await;
    let mut kubelet = driver.kubelet().await;
    let ids = |r: &dra_v1::NodePrepareResourcesResponse| r.claims[&claim.uid].devices[0].cdi_device_ids.clone();
    let first = kubelet.prepare(std::slice::from_ref(&claim)).await;
    let second = kubelet.prepare(std::slice::from_ref(&claim)).await;
    assert_eq!(first.claims[&claim.uid].error, "");
    assert_ne!(ids(&first), ids(&second), "plugin.prepare.idempotent is broken on purpose");
    // Only idempotency breaks: the latest IDs still resolve.
    let registry = cdi_registry(&driver.cdi_dir());
    assert!(ids(&second).iter().all(|id| registry.contains_key(id)), "{:?}", registry.keys());
}

async fn lose_checkpoint(env: Env) {
    let (mut driver, claim) = setup(&env, "f-losecp", &["lose-checkpoint"]).await;
    let first = driver.kubelet().await.prepare(std::slice::from_ref(&claim)).await;
    assert_eq!(first.claims[&claim.uid].error, "");
    let spec = driver.cdi_dir().join(format!("mock.dracheck.io-gpu_{}.json", claim.uid));
    assert!(spec.exists());
    assert!(driver.terminate().await.success());
    driver.start().await;
    let undone = driver.kubelet().await.unprepare(std::slice::from_ref(&claim)).await;
    assert_eq!(undone.claims[&claim.uid].error, "", "the forgotten claim counts as unknown");
    assert!(spec.exists(), "plugin.restart.keeps-state is broken: the spec of the forgotten claim stays");
    assert!(driver.log().contains("fault lose-checkpoint"), "{}", driver.log());
}

async fn stale_slices(env: Env) {
    let client = env.client().await;
    let (mut driver, _) = setup(&env, "f-stale", &["stale-slices-on-exit"]).await;
    let mut driver_with_flag = {
        // Restart with --remove-slices-on-exit, which the fault must defeat.
        assert!(driver.terminate().await.success());
        Driver::new(&env, "f-stale", &default_inventory(), &["--remove-slices-on-exit", "--fault=stale-slices-on-exit"])
    };
    driver_with_flag.start().await;
    eventually("the slice", Duration::from_secs(20), || async {
        (!slices_of(&client, "f-stale").await.is_empty()).then_some(())
    })
    .await;
    assert!(driver_with_flag.terminate().await.success());
    assert_eq!(slices_of(&client, "f-stale").await.len(), 1, "slices.removed-on-exit is broken: the slice stays");
}

async fn cdi_without_spec(env: Env) {
    let (driver, claim) = setup(&env, "f-nospec", &["cdi-without-spec"]).await;
    let answer = driver.kubelet().await.prepare(std::slice::from_ref(&claim)).await;
    let ids = &answer.claims[&claim.uid].devices[0].cdi_device_ids;
    assert_eq!(ids.len(), 1, "CDI IDs are returned");
    let registry = cdi_registry(&driver.cdi_dir());
    assert!(!registry.contains_key(&ids[0]), "plugin.cdi.resolvable is broken: {} resolves to nothing", ids[0]);
}

async fn wrong_attribute(env: Env) {
    let client = env.client().await;
    let (_driver, _) = setup(&env, "f-wrongattr", &["wrong-attribute=model=h100", "wrong-attribute=index=7"]).await;
    let slice = eventually("the slice", Duration::from_secs(20), || async {
        slices_of(&client, "f-wrongattr").await.into_iter().next()
    })
    .await;
    for device in slice.spec.devices.unwrap() {
        let attrs = device.attributes.unwrap();
        assert_eq!(
            attrs["model"].string.as_deref(),
            Some("h100"),
            "slices.match-inventory is broken on {}",
            device.name
        );
        assert_eq!(attrs["index"].int, Some(7), "an int attribute stays an int, with a wrong value");
    }
}

async fn never_unprepare(env: Env) {
    let (driver, claim) = setup(&env, "f-neverun", &["never-unprepare"]).await;
    let mut kubelet = driver.kubelet().await;
    assert_eq!(kubelet.prepare(std::slice::from_ref(&claim)).await.claims[&claim.uid].error, "");
    let unknown = claim_ref("unknown", "abcdefab-0000-4000-8000-000000000000");
    let undone = kubelet.unprepare(&[claim.clone(), unknown]).await;
    assert_eq!(undone.claims.len(), 2);
    assert!(
        undone.claims.values().all(|c| c.error.contains("never-unprepare")),
        "lifecycle.unprepare is broken: {undone:?}"
    );
    assert!(driver.cdi_dir().join(format!("mock.dracheck.io-gpu_{}.json", claim.uid)).exists());
}

async fn foreign_slice(env: Env) {
    let client = env.client().await;
    let (_driver, _) = setup(&env, "f-foreign", &["foreign-slice=f-victim"]).await;
    let foreign = eventually("a slice for the other node", Duration::from_secs(20), || async {
        slices_of(&client, "f-victim").await.into_iter().next()
    })
    .await;
    assert_eq!(foreign.spec.pool.name, "f-victim", "slices.owned-by-node is broken: a pool of another node");
    assert_eq!(slices_of(&client, "f-foreign").await.len(), 1, "its own slice is published too");
}

async fn inventory_faults(env: Env) {
    let client = env.client().await;
    create_node(&client, "f-file").await;
    let uid = allocated_claim(&client, "f-file-claim", "f-file", &["gpu-0"]).await;
    let dir = tempfile::Builder::new().prefix("mk").tempdir_in("/tmp").unwrap();
    let path = dir.path().join("inventory.yaml");
    let text = std::fs::read_to_string(default_inventory()).unwrap();
    std::fs::write(&path, text.replace("kind: MockInventory\n", "kind: MockInventory\nfaults: [\"fail-prepare=1\"]\n"))
        .unwrap();
    let mut driver = Driver::new(&env, "f-file", &path, &[]);
    driver.start().await;
    let mut kubelet = driver.kubelet().await;
    let request = || dra_v1::NodePrepareResourcesRequest { claims: vec![claim_ref("f-file-claim", &uid)] };
    assert!(kubelet.dra.node_prepare_resources(request()).await.is_err(), "the file's fail-prepare=1 applies");
    assert!(kubelet.dra.node_prepare_resources(request()).await.is_ok());
}
