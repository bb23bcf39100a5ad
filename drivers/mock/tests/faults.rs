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
        ("fault_no_slice_reconcile_leaves_deleted_slices_gone", |e| Box::pin(no_slice_reconcile(e))),
        ("fault_foreign_slice_publishes_for_another_node", |e| Box::pin(foreign_slice(e))),
        ("fault_wrong_capacity_publishes_a_wrong_quantity", |e| Box::pin(wrong_capacity(e))),
        ("fault_phantom_devices_are_published_but_not_prepared", |e| Box::pin(phantom_devices(e))),
        ("fault_counters_larger_doubles_the_shared_counters", |e| Box::pin(counters_larger(e))),
        ("fault_partition_consumes_nothing_drops_the_consumption", |e| Box::pin(partition_consumes_nothing(e))),
        ("fault_no_owner_reference_leaves_slices_unowned", |e| Box::pin(no_owner_reference(e))),
        ("fault_wipe_slices_on_start_replaces_the_slices", |e| Box::pin(wipe_slices_on_start(e))),
        ("fault_prepare_wrong_device_sets_up_the_first_device", |e| Box::pin(prepare_wrong_device(e))),
        ("fault_prepare_first_device_only_repeats_the_first_device", |e| Box::pin(prepare_first_device_only(e))),
        ("fault_prepare_foreign_claims_prepares_another_nodes_claim", |e| Box::pin(prepare_foreign_claims(e))),
        ("fault_reset_devices_on_start_kills_their_users", |e| Box::pin(reset_devices_on_start(e))),
        ("fault_register_first_start_only_skips_registration_on_restart", |e| Box::pin(register_first_start_only(e))),
        ("fault_register_v1beta1_only_offers_the_beta_service", |e| Box::pin(register_v1beta1_only(e))),
        ("fault_wrong_version_bends_the_version", |e| Box::pin(wrong_version(e))),
        ("fault_strict_authority_refuses_the_plugin_watchers_calls", |e| Box::pin(strict_authority(e))),
        ("faults_listed_in_the_inventory_apply", |e| Box::pin(inventory_faults(e))),
        ("fault_no_health_neither_offers_nor_serves_health", |e| Box::pin(no_health(e))),
        ("fault_health_wrong_device_reports_the_neighbours_health", |e| Box::pin(health_wrong_device(e))),
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
    assert_eq!(slices_of(&client, "f-stale").await.len(), 2, "slices.removed-on-exit is broken: the slices stay");
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
    let slice = slice(&client, "f-wrongattr").await;
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
    assert_eq!(slices_of(&client, "f-foreign").await.len(), 2, "its own slices are published too");
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

/// The slice of `node`'s devices (not the one of its counter sets), once published.
async fn slice(client: &kube::Client, node: &str) -> k8s_openapi::api::resource::v1::ResourceSlice {
    eventually("the slice", Duration::from_secs(20), || async {
        slices_of(client, node).await.into_iter().find(|s| s.spec.devices.is_some())
    })
    .await
}

async fn wrong_capacity(env: Env) {
    let client = env.client().await;
    let (_driver, _) = setup(&env, "f-wrongcap", &["wrong-capacity=memory=1Ti"]).await;
    for device in slice(&client, "f-wrongcap").await.spec.devices.unwrap() {
        let capacity = device.capacity.unwrap();
        assert_eq!(capacity["memory"].value.0, "1Ti", "plugin.slices.match-inventory is broken on {}", device.name);
    }
}

async fn phantom_devices(env: Env) {
    let client = env.client().await;
    let (driver, _) = setup(&env, "f-phantom", &["phantom-devices=3"]).await;
    let devices = slice(&client, "f-phantom").await.spec.devices.unwrap();
    let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
    let partitions = ["gpu-4-whole", "gpu-4-half-0", "gpu-4-half-1"];
    assert_eq!(
        names,
        [&["gpu-0", "gpu-1", "gpu-2", "gpu-3"][..], &partitions, &["gpu-5"], &["phantom-0", "phantom-1", "phantom-2"]]
            .concat()
    );
    assert_eq!(
        devices[8].attributes, devices[3].attributes,
        "a phantom looks like the last device that is neither a partition nor shared"
    );
    assert_eq!(devices[8].consumes_counters, None, "a phantom shares no counters");
    assert_eq!(devices[8].allow_multiple_allocations, None, "a phantom is not shared");
    let uid = allocated_claim(&client, "f-phantom-ghost", "f-phantom", &["phantom-1"]).await;
    let answer = driver.kubelet().await.prepare(&[claim_ref("f-phantom-ghost", &uid)]).await;
    assert!(answer.claims[&uid].error.contains("does not have"), "prepare refuses a phantom: {answer:?}");
}

async fn counters_larger(env: Env) {
    let client = env.client().await;
    let (_driver, _) = setup(&env, "f-counters", &["counters-larger"]).await;
    let counters = eventually("the counters slice", Duration::from_secs(20), || async {
        slices_of(&client, "f-counters").await.into_iter().find_map(|s| s.spec.shared_counters)
    })
    .await;
    let memory = &counters[0].counters["memory"].value.0;
    let gi: u64 = 1 << 30;
    assert_eq!(memory, &(48 * gi).to_string(), "plugin.slices.match-inventory is broken: twice the inventory's 24Gi");
    let devices = slice(&client, "f-counters").await.spec.devices.unwrap();
    let partition = devices.into_iter().find(|d| d.name == "gpu-4-half-1").expect("the partition is published");
    let consumed = &partition.consumes_counters.unwrap()[0].counters["memory"].value.0;
    assert_eq!(consumed, "12Gi", "the partitions stay as they are");
}

async fn partition_consumes_nothing(env: Env) {
    let client = env.client().await;
    let (_driver, _) = setup(&env, "f-consumes", &["partition-consumes-nothing"]).await;
    let devices = slice(&client, "f-consumes").await.spec.devices.unwrap();
    assert!(devices.iter().any(|d| d.name == "gpu-4-half-0"), "the partitions are published");
    assert!(
        devices.iter().all(|d| d.consumes_counters.is_none()),
        "plugin.slices.match-inventory is broken: no partition consumes counters"
    );
}

async fn no_owner_reference(env: Env) {
    let client = env.client().await;
    let (_driver, _) = setup(&env, "f-noowner", &["no-owner-reference"]).await;
    let owners = slice(&client, "f-noowner").await.metadata.owner_references.unwrap_or_default();
    assert!(owners.is_empty(), "plugin.slices.owned-by-node is broken: {owners:?}");
}

async fn no_slice_reconcile(env: Env) {
    let client = env.client().await;
    let (mut driver, _) = setup(&env, "f-noreconcile", &["no-slice-reconcile"]).await;
    let name = slice(&client, "f-noreconcile").await.metadata.name.unwrap();
    // What a starting kubelet does to its node's slices; the good driver re-creates them
    // within a second (tests/plugin.rs).
    let api: kube::Api<k8s_openapi::api::resource::v1::ResourceSlice> = kube::Api::all(client.clone());
    api.delete(&name, &Default::default()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let left = slices_of(&client, "f-noreconcile").await;
    assert!(
        left.iter().all(|s| s.metadata.name.as_ref() != Some(&name)),
        "node.restart.driver-recovers is broken on purpose"
    );
    assert!(driver.log().contains("fault no-slice-reconcile"), "{}", driver.log());
    // Only a start of the driver publishes again.
    assert!(driver.terminate().await.success());
    driver.start().await;
    slice(&client, "f-noreconcile").await;
}

async fn wipe_slices_on_start(env: Env) {
    let client = env.client().await;
    let (mut driver, _) = setup(&env, "f-wipe", &["wipe-slices-on-start"]).await;
    let before = slice(&client, "f-wipe").await.metadata.uid;
    assert!(driver.terminate().await.success());
    driver.start().await;
    let after = eventually("a new slice", Duration::from_secs(20), || async {
        let devices = slices_of(&client, "f-wipe").await.into_iter().filter(|s| s.spec.devices.is_some());
        devices.map(|s| s.metadata.uid).find(|u| *u != before)
    })
    .await;
    assert_ne!(after, before, "driver.restart.slices-kept is broken: the restart replaced the slice");
    assert!(driver.log().contains("fault wipe-slices-on-start: deleted 2 slice(s)"), "{}", driver.log());
}

/// Prepares a claim for `devices` on `node` with `fault`; returns the response's device
/// names and the `DRACHECK_MOCK_DEVICE_<n>` edits of the claim's spec, which must resolve.
async fn prepared_edits(env: &Env, node: &str, fault: &str, devices: &[&str]) -> (Vec<String>, Vec<String>) {
    let client = env.client().await;
    let (driver, _) = setup(env, node, &[fault]).await;
    let uid = allocated_claim(&client, &format!("{node}-multi"), node, devices).await;
    let answer = driver.kubelet().await.prepare(&[claim_ref(&format!("{node}-multi"), &uid)]).await;
    let claim = &answer.claims[&uid];
    assert_eq!(claim.error, "");
    let registry = cdi_registry(&driver.cdi_dir());
    let mut edits = Vec::new();
    for id in claim.devices.iter().flat_map(|d| &d.cdi_device_ids) {
        let spec = registry.get(id).unwrap_or_else(|| panic!("{id} resolves"));
        let name = id.rsplit_once('=').unwrap().1;
        let device = spec["devices"].as_array().unwrap().iter().find(|d| d["name"] == name).unwrap();
        edits.extend(
            device["containerEdits"]["env"].as_array().unwrap().iter().map(|e| e.as_str().unwrap().to_string()),
        );
    }
    (claim.devices.iter().map(|d| d.device_name.clone()).collect(), edits)
}

async fn prepare_wrong_device(env: Env) {
    let (names, edits) = prepared_edits(&env, "f-wrongdev", "prepare-wrong-device", &["gpu-2", "gpu-3"]).await;
    assert_eq!(names, ["gpu-2", "gpu-3"], "the response names the allocated devices");
    assert_eq!(edits, ["DRACHECK_MOCK_DEVICE_0=gpu-0"; 2], "workload.sees-devices is broken: the first device instead");
}

async fn prepare_first_device_only(env: Env) {
    let (names, edits) = prepared_edits(&env, "f-firstonly", "prepare-first-device-only", &["gpu-1", "gpu-2"]).await;
    assert_eq!(names, ["gpu-1", "gpu-2"]);
    assert_eq!(edits, ["DRACHECK_MOCK_DEVICE_1=gpu-1"; 2], "limits.max-devices-per-claim is broken: one device set up");
}

async fn prepare_foreign_claims(env: Env) {
    let client = env.client().await;
    let (driver, _) = setup(&env, "f-foreignclaim", &["prepare-foreign-claims"]).await;
    let uid = allocated_claim(&client, "f-foreignclaim-other", "f-elsewhere", &["gpu-0"]).await;
    let answer = driver.kubelet().await.prepare(&[claim_ref("f-foreignclaim-other", &uid)]).await;
    let claim = &answer.claims[&uid];
    assert_eq!(claim.error, "", "plugin.prepare.refuses-foreign-node is broken: prepared for another node");
    assert_eq!(claim.devices[0].pool_name, "f-elsewhere");
}

async fn reset_devices_on_start(env: Env) {
    let (mut driver, claim) = setup(&env, "f-reset", &["reset-devices-on-start"]).await;
    assert_eq!(driver.kubelet().await.prepare(std::slice::from_ref(&claim)).await.claims[&claim.uid].error, "");
    // A workload of the claim, and one of another claim that must survive.
    let workload =
        |uid: &str| std::process::Command::new("sleep").arg("60").env("DRACHECK_MOCK_CLAIM_UID", uid).spawn().unwrap();
    let (mut user, mut bystander) = (workload(&claim.uid), workload("not-a-prepared-claim"));
    assert!(driver.terminate().await.success());
    driver.start().await;
    let status =
        eventually("the workload's end", Duration::from_secs(10), || std::future::ready(user.try_wait().unwrap()))
            .await;
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(status.signal(), Some(libc::SIGKILL), "driver.restart.workload-keeps-devices is broken on purpose");
    assert!(bystander.try_wait().unwrap().is_none(), "a process of no prepared claim is left alone");
    bystander.kill().unwrap();
    bystander.wait().unwrap();
}

async fn register_first_start_only(env: Env) {
    let (mut driver, claim) = setup(&env, "f-firstreg", &["register-first-start-only"]).await;
    assert!(driver.terminate().await.success());
    driver.start_serving(false).await;
    assert!(!driver.reg_socket().exists(), "driver.restart.new-claims-work is broken: no registration after a restart");
    // DRA itself is still served, for a kubelet that would find it.
    let dra = dracheck_kubelet_api::connect_unix(driver.dra_socket()).await.unwrap();
    let mut dra = dra_v1::dra_plugin_client::DraPluginClient::new(dra);
    let request = dra_v1::NodePrepareResourcesRequest { claims: vec![claim.clone()] };
    let answer = dra.node_prepare_resources(request).await.unwrap().into_inner();
    assert_eq!(answer.claims[&claim.uid].error, "");
}

async fn register_v1beta1_only(env: Env) {
    let (driver, _) = setup(&env, "f-beta", &["register-v1beta1-only"]).await;
    let info = driver.kubelet().await.info;
    assert_eq!(
        info.supported_versions,
        ["v1beta1.DRAPlugin", "v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"],
        "plugin.registration.info is broken on purpose"
    );
}

async fn strict_authority(env: Env) {
    use dracheck_kubelet_api::registration::InfoRequest;
    use dracheck_kubelet_api::registration::registration_client::RegistrationClient;
    use dracheck_kubelet_api::{connect_unix, connect_unix_as_plugin_watcher};

    let (driver, claim) = setup(&env, "f-strict", &["strict-authority"]).await;
    let kubelet = connect_unix_as_plugin_watcher(driver.reg_socket()).await.unwrap();
    let e = RegistrationClient::new(kubelet)
        .get_info(InfoRequest {})
        .await
        .expect_err("plugin.registration.info is broken on purpose");
    assert_eq!(e.code(), tonic::Code::Internal, "the kubelet's RST_STREAM with PROTOCOL_ERROR: {e:?}");
    assert!(format!("{e:?}").contains("PROTOCOL_ERROR"), "{e:?}");
    assert!(driver.log().contains("fault strict-authority"), "{}", driver.log());

    // Only the authority is refused: with `localhost` the registration answers, and the DRA
    // socket, which the kubelet dials that way, serves as usual.
    let local = connect_unix(driver.reg_socket()).await.unwrap();
    let info = RegistrationClient::new(local).get_info(InfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.endpoint, driver.dra_socket().display().to_string());
    let dra = dra_v1::dra_plugin_client::DraPluginClient::new(connect_unix(&info.endpoint).await.unwrap());
    let request = dra_v1::NodePrepareResourcesRequest { claims: vec![claim.clone()] };
    let answer = dra.clone().node_prepare_resources(request).await.unwrap().into_inner();
    assert_eq!(answer.claims[&claim.uid].error, "");
}

async fn wrong_version(_: Env) {
    let version = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_dracheck-mock-driver")).args(args).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(version(&["--version"]), format!("dracheck-mock-driver {}\n", env!("CARGO_PKG_VERSION")));
    assert_eq!(version(&["--fault=wrong-version=0.0.1", "--version"]), "dracheck-mock-driver 0.0.1\n");
}

async fn no_health(env: Env) {
    use dracheck_kubelet_api::health_v1;
    let (driver, _) = setup(&env, "f-nohealth", &["no-health"]).await;
    assert_eq!(driver.kubelet().await.info.supported_versions, ["v1.DRAPlugin", "v1beta1.DRAPlugin"]);
    let channel = dracheck_kubelet_api::connect_unix(driver.dra_socket()).await.unwrap();
    let refused = health_v1::dra_resource_health_client::DraResourceHealthClient::new(channel)
        .node_watch_resources(health_v1::NodeWatchResourcesRequest {})
        .await
        .expect_err("not served");
    assert_eq!(refused.code(), tonic::Code::Unimplemented);
}

async fn health_wrong_device(env: Env) {
    let (driver, _) = setup(&env, "f-healthwrong", &["health-wrong-device"]).await;
    let mut stream = driver.watch_health().await;
    driver.mark_unhealthy(&["gpu-0"]);
    let report = next_health(&mut stream, Duration::from_secs(5), |h| h.values().any(|h| h == "Unhealthy")).await;
    assert_eq!(report["gpu-0"], "Healthy", "plugin.health.reported is broken on purpose: {report:?}");
}
