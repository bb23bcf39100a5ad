//! Plugin tier against the mock driver, acting as kubelet over its sockets: registration,
//! slices, prepare/unprepare, refusals and restarts. One local cluster serves every test; it
//! only holds the API objects (claims are allocated by hand, nothing is scheduled).

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::*;
use dracheck_kubelet_api::dra_v1beta1;
use dracheck_kubelet_api::registration::RegistrationStatus;
use dracheck_mock_driver::faults::Faults;
use dracheck_mock_driver::inventory::Inventory;
use dracheck_mock_driver::slices::{published_counter_sets, published_devices};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::api::{Api, DeleteParams};

fn main() -> std::process::ExitCode {
    run_with_cluster(vec![
        ("registration_names_the_dra_socket_and_both_service_versions", |e| Box::pin(registration(e))),
        ("slices_match_the_inventory_and_are_kept_published", |e| Box::pin(slices(e))),
        ("prepare_is_idempotent_and_every_cdi_id_resolves", |e| Box::pin(prepare_and_unprepare(e))),
        ("claims_the_node_cannot_serve_get_per_claim_errors", |e| Box::pin(refusals(e))),
        ("a_restarted_plugin_keeps_its_prepared_state", |e| Box::pin(restart(e))),
        ("a_socket_dir_that_cannot_be_created_is_bad_input", |e| Box::pin(bad_socket_dir(e))),
        ("health_is_streamed_and_follows_the_health_file", |e| Box::pin(health(e))),
    ])
}

async fn registration(env: Env) {
    let mut driver = Driver::new(&env, "reg-node", &default_inventory(), &[]);
    driver.start().await;
    // With the `:authority` the kubelet's plugin watcher sends, which plain h2 servers refuse.
    let mut kubelet = driver.kubelet().await;
    assert_eq!(kubelet.info.r#type, "DRAPlugin");
    assert_eq!(kubelet.info.name, DRIVER);
    assert_eq!(kubelet.info.endpoint, driver.dra_socket().display().to_string());
    assert_eq!(
        kubelet.info.supported_versions,
        ["v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"]
    );
    let notify =
        |ok: bool| RegistrationStatus { plugin_registered: ok, error: if ok { "" } else { "version mismatch" }.into() };
    kubelet.registration.notify_registration_status(notify(true)).await.unwrap();
    kubelet.registration.notify_registration_status(notify(false)).await.unwrap();
    let log = driver.log();
    assert!(log.contains("registered with kubelet"), "{log}");
    assert!(log.contains("error: kubelet did not register the plugin: version mismatch"), "{log}");
    assert!(log.lines().all(|l| l.starts_with("20")), "every line starts with a timestamp:\n{log}");

    let status = driver.terminate().await;
    assert!(status.success(), "a clean shutdown exits 0: {status}\n{}", driver.log());
    assert!(!driver.reg_socket().exists() && !driver.dra_socket().exists(), "SIGTERM removes both sockets");
}

/// Name, attributes and capacities of each device, for comparing slices with the inventory.
fn device_set(devices: &[k8s_openapi::api::resource::v1::Device]) -> Vec<String> {
    let mut out: Vec<String> = devices
        .iter()
        .map(|d| {
            format!(
                "{} {:?} {:?}",
                d.name,
                d.attributes,
                d.capacity.as_ref().map(|c| c.iter().map(|(k, v)| (k.clone(), v.value.0.clone())).collect::<Vec<_>>())
            )
        })
        .collect();
    out.sort();
    out
}

async fn slices(env: Env) {
    let client = env.client().await;
    let node = "slice-node";
    let dir = tempfile::Builder::new().prefix("mk").tempdir_in("/tmp").unwrap();
    let inventory_path = dir.path().join("inventory.yaml");
    std::fs::copy(default_inventory(), &inventory_path).unwrap();
    let mut driver = Driver::new(&env, node, &inventory_path, &[]);
    // Started before its Node exists: it must wait for the Node rather than publish a slice
    // without an owner.
    driver.start().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(slices_of(&client, node).await.is_empty(), "no slice before the Node exists");
    let node_uid = create_node(&client, node).await;

    // The default inventory's pool: its devices, and the counters its partitions share in a
    // slice of their own.
    let pool = eventually("the node's two slices", Duration::from_secs(20), || async {
        let s = slices_of(&client, node).await;
        (s.len() == 2).then_some(s)
    })
    .await;
    let (with_devices, counters): (Vec<ResourceSlice>, Vec<ResourceSlice>) =
        pool.into_iter().partition(|s| s.spec.shared_counters.is_none());
    let (published, counters) = (with_devices[0].clone(), &counters[0]);
    let inventory = Inventory::load(&inventory_path).unwrap().pool_for(node).unwrap();
    let expected = published_devices(&inventory.devices, &Faults::default());
    assert_eq!(device_set(published.spec.devices.as_deref().unwrap()), device_set(&expected), "slices.match-inventory");
    assert_eq!(
        counters.spec.shared_counters.as_deref().unwrap(),
        published_counter_sets(&inventory, &Faults::default()),
        "the counter sets as in the inventory"
    );
    assert_eq!(counters.spec.devices.as_deref().unwrap_or_default(), [], "no device beside counter sets");
    assert_eq!(published.spec.driver, DRIVER);
    assert_eq!(published.spec.node_name.as_deref(), Some(node));
    assert_eq!(published.spec.pool.name, node);
    assert_eq!((published.spec.pool.generation, published.spec.pool.resource_slice_count), (1, 2));
    assert!(published.spec.node_selector.is_none() && published.spec.all_nodes.is_none());
    let owners = published.metadata.owner_references.clone().unwrap();
    assert_eq!(owners.len(), 1);
    let o = &owners[0];
    assert_eq!(
        (o.api_version.as_str(), o.kind.as_str(), o.name.as_str(), o.uid.as_str()),
        ("v1", "Node", node, node_uid.as_str())
    );
    assert_eq!((o.controller, o.block_owner_deletion), (Some(true), None), "slices.owned-by-node");

    // Kubelet wipes slices at start-up and after unregistration: the driver publishes again,
    // with a new generation.
    let name = published.metadata.name.clone().unwrap();
    let api: Api<ResourceSlice> = Api::all(client.clone());
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    let recreated = eventually("the slice to be re-created", Duration::from_secs(20), || async {
        slices_of(&client, node)
            .await
            .into_iter()
            .find(|s| s.metadata.name == published.metadata.name && s.metadata.uid != published.metadata.uid)
    })
    .await;
    assert_eq!(recreated.spec.pool.generation, 2, "a re-published pool has a higher generation");
    assert_eq!(device_set(recreated.spec.devices.as_deref().unwrap()), device_set(&expected));

    // An edited inventory is published with a bumped generation.
    let text = std::fs::read_to_string(&inventory_path).unwrap();
    let edited = text.replacen("model: { string: l4 }", "model: { string: l40s }", 1);
    assert_ne!(text, edited);
    std::fs::write(&inventory_path, &edited).unwrap();
    let updated = eventually("the edited inventory to be published", Duration::from_secs(20), || async {
        slices_of(&client, node).await.into_iter().find(|s| s.spec.pool.generation == 3 && s.spec.devices.is_some())
    })
    .await;
    let models: BTreeSet<String> = updated
        .spec
        .devices
        .unwrap()
        .iter()
        .filter_map(|d| d.attributes.as_ref()?.get("model")?.string.clone())
        .collect();
    assert_eq!(models, ["a10", "a100", "a30", "l4", "l40s"].map(String::from).into());
    // A broken edit is ignored: the last good devices stay published.
    std::fs::write(&inventory_path, "apiVersion: dracheck.io/v1alpha1\nkind: MockInventory\ngroups: [oops\n").unwrap();
    eventually("the broken inventory to be reported", Duration::from_secs(10), || async {
        driver.log().contains("the changed inventory is not used").then_some(())
    })
    .await;
    let kept = slices_of(&client, node).await;
    assert_eq!((kept.len(), kept[0].spec.pool.generation), (2, 3), "the last good inventory stays published");
    std::fs::write(&inventory_path, &edited).unwrap();

    // Without --remove-slices-on-exit a clean exit keeps the slices, and a restart that
    // finds them as it would publish them leaves them untouched (driver.restart.slices-kept).
    assert!(driver.terminate().await.success());
    let before = slices_of(&client, node).await;
    assert_eq!(before.len(), 2, "the slices survive a clean exit by default");
    let mut again = Driver::new(&env, node, &inventory_path, &["--remove-slices-on-exit"]);
    again.start().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = slices_of(&client, node).await;
    assert_eq!(after.len(), 2);
    let versions = |slices: &[ResourceSlice]| {
        slices.iter().map(|s| (s.metadata.name.clone(), s.metadata.resource_version.clone())).collect::<BTreeSet<_>>()
    };
    assert_eq!(
        versions(&after),
        versions(&before),
        "a restarted driver does not rewrite slices that are already right:\n{}",
        again.log()
    );
    assert!(again.terminate().await.success());
    assert!(slices_of(&client, node).await.is_empty(), "--remove-slices-on-exit removes them on SIGTERM");
}

/// Asserts that every CDI ID of the answer resolves to a device of a spec in the CDI dir, and
/// returns the IDs.
fn assert_resolvable(
    driver: &Driver,
    answer: &dracheck_kubelet_api::dra_v1::NodePrepareResourceResponse,
) -> Vec<String> {
    let registry = cdi_registry(&driver.cdi_dir());
    let ids: Vec<String> = answer.devices.iter().flat_map(|d| d.cdi_device_ids.clone()).collect();
    assert!(!ids.is_empty());
    for id in &ids {
        let spec =
            registry.get(id).unwrap_or_else(|| panic!("CDI ID {id} resolves to no spec in {:?}", registry.keys()));
        assert_eq!(spec["cdiVersion"], "0.6.0");
    }
    ids
}

async fn prepare_and_unprepare(env: Env) {
    let client = env.client().await;
    let node = "prep-node";
    create_node(&client, node).await;
    let uid = allocated_claim(&client, "two-gpus", node, &["gpu-0", "gpu-2"]).await;
    let mut driver = Driver::new(&env, node, &default_inventory(), &[]);
    driver.start().await;
    let mut kubelet = driver.kubelet().await;
    let claim = claim_ref("two-gpus", &uid);

    let first = kubelet.prepare(std::slice::from_ref(&claim)).await;
    assert_eq!(first.claims.len(), 1);
    let answer = &first.claims[&uid];
    assert_eq!(answer.error, "", "{}", driver.log());
    let names: Vec<&str> = answer.devices.iter().map(|d| d.device_name.as_str()).collect();
    assert_eq!(names, ["gpu-0", "gpu-2"]);
    for d in &answer.devices {
        assert_eq!((d.pool_name.as_str(), d.request_names.as_slice()), (node, ["req".to_string()].as_slice()));
        assert_eq!(d.cdi_device_ids, [format!("mock.dracheck.io/gpu={uid}-{}", d.device_name)]);
    }
    assert_resolvable(&driver, answer);
    let spec_path = driver.cdi_dir().join(format!("mock.dracheck.io-gpu_{uid}.json"));
    let spec: serde_json::Value = serde_json::from_slice(&std::fs::read(&spec_path).unwrap()).unwrap();
    assert_eq!(spec["kind"], "mock.dracheck.io/gpu");
    let env_vars: Vec<String> = serde_json::from_value(spec["containerEdits"]["env"].clone()).unwrap();
    assert!(env_vars.contains(&"DRACHECK_MOCK_DEVICES=gpu-0,gpu-2".to_string()), "{env_vars:?}");
    assert!(env_vars.contains(&format!("DRACHECK_MOCK_CLAIM_UID={uid}")), "{env_vars:?}");
    assert_eq!(spec["devices"][1]["containerEdits"]["env"][0], "DRACHECK_MOCK_DEVICE_2=gpu-2");

    // plugin.prepare.idempotent: the same answer again, on v1 and on v1beta1.
    let second = kubelet.prepare(std::slice::from_ref(&claim)).await;
    assert_eq!(second, first);
    let mut beta = dra_v1beta1::dra_plugin_client::DraPluginClient::new(kubelet.channel.clone());
    let beta_answer = beta
        .node_prepare_resources(dra_v1beta1::NodePrepareResourcesRequest {
            claims: vec![dra_v1beta1::Claim { namespace: NS.into(), uid: uid.clone(), name: "two-gpus".into() }],
        })
        .await
        .unwrap()
        .into_inner();
    let beta_ids: Vec<&String> = beta_answer.claims[&uid].devices.iter().flat_map(|d| &d.cdi_device_ids).collect();
    let v1_ids: Vec<&String> = answer.devices.iter().flat_map(|d| &d.cdi_device_ids).collect();
    assert_eq!(beta_ids, v1_ids, "v1beta1 gives the same answer");

    // lifecycle.unprepare: the spec goes; again, and for an unknown claim, is no error.
    let done = kubelet.unprepare(std::slice::from_ref(&claim)).await;
    assert_eq!(done.claims[&uid].error, "");
    assert!(!spec_path.exists(), "unprepare removes the claim's CDI spec");
    let again = kubelet.unprepare(std::slice::from_ref(&claim)).await;
    assert_eq!(again.claims[&uid].error, "");
    let unknown = claim_ref("never-seen", "11111111-2222-4333-8444-555555555555");
    let unknown_answer = kubelet.unprepare(&[unknown]).await;
    assert_eq!(unknown_answer.claims["11111111-2222-4333-8444-555555555555"].error, "");
    let log = driver.log();
    assert!(log.contains(&format!("NodePrepareResources default/two-gpus ({uid}): prepared")), "{log}");
    assert!(log.contains("not prepared here, nothing to do"), "{log}");
}

async fn refusals(env: Env) {
    let client = env.client().await;
    let node = "refuse-node";
    create_node(&client, node).await;
    let good = allocated_claim(&client, "fine", node, &["gpu-1"]).await;
    let elsewhere = allocated_claim(&client, "elsewhere", "other-node", &["gpu-1"]).await;
    let pending = unallocated_claim(&client, "pending", 1).await;
    let missing_device = allocated_claim(&client, "no-such-gpu", node, &["gpu-9"]).await;
    let mut driver = Driver::new(&env, node, &default_inventory(), &[]);
    driver.start().await;
    let mut kubelet = driver.kubelet().await;

    let stale_uid = "99999999-8888-4777-8666-555555555555";
    let gone_uid = "12345678-1234-4234-8234-123456789abc";
    let batch = [
        claim_ref("fine", &good),
        claim_ref("elsewhere", &elsewhere),
        claim_ref("pending", &pending),
        claim_ref("no-such-gpu", &missing_device),
        claim_ref("fine", stale_uid),
        claim_ref("gone", gone_uid),
    ];
    let answer = kubelet.prepare(&batch).await;
    assert_eq!(answer.claims.len(), batch.len(), "every claim of the request is answered");
    assert_eq!(answer.claims[&good].error, "", "a good claim in a batch with bad ones is still prepared");
    let error = |uid: &str| answer.claims[uid].error.clone();
    let e = error(&elsewhere);
    assert!(e.contains("other-node") && e.contains(node), "names both nodes: {e}");
    assert!(answer.claims[&elsewhere].devices.is_empty());
    assert!(error(&pending).contains("not allocated"), "{}", error(&pending));
    assert!(error(&missing_device).contains("gpu-9"), "{}", error(&missing_device));
    assert!(error(stale_uid).contains("UID"), "{}", error(stale_uid));
    assert!(error(gone_uid).contains("does not exist"), "{}", error(gone_uid));
    let registry = cdi_registry(&driver.cdi_dir());
    assert!(registry.keys().all(|id| id.contains(&good)), "only the good claim has a spec: {:?}", registry.keys());
}

async fn restart(env: Env) {
    let client = env.client().await;
    let node = "restart-node";
    create_node(&client, node).await;
    let kept = allocated_claim(&client, "kept", node, &["gpu-3"]).await;
    let deleted = allocated_claim(&client, "deleted", node, &["gpu-0", "gpu-1"]).await;
    let mut driver = Driver::new(&env, node, &default_inventory(), &[]);
    driver.start().await;
    let claims = [claim_ref("kept", &kept), claim_ref("deleted", &deleted)];
    let before = driver.kubelet().await.prepare(&claims).await;
    assert!(before.claims.values().all(|c| c.error.is_empty()), "{before:?}");

    // A crash, then the claim object goes away while the plugin is down.
    driver.kill().await;
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), NS);
    api.delete("deleted", &DeleteParams::default()).await.unwrap();
    eventually("the claim to be gone", Duration::from_secs(10), || async {
        api.get_opt("deleted").await.unwrap().is_none().then_some(())
    })
    .await;
    driver.start().await;
    let mut kubelet = driver.kubelet().await;
    let after = kubelet.prepare(&claims).await;
    assert_eq!(after, before, "plugin.restart.keeps-state: the same answer after a restart\n{}", driver.log());
    for answer in after.claims.values() {
        assert_resolvable(&driver, answer);
    }
    let undone = kubelet.unprepare(&claims).await;
    assert!(undone.claims.values().all(|c| c.error.is_empty()), "{undone:?}");
    assert!(cdi_registry(&driver.cdi_dir()).is_empty(), "claims prepared before the restart are unprepared");
}

async fn health(env: Env) {
    use dracheck_kubelet_api::health_v1alpha1;
    let client = env.client().await;
    let node = "health-node";
    create_node(&client, node).await;
    let mut driver = Driver::new(&env, node, &default_inventory(), &[]);
    driver.start().await;
    let mut stream = driver.watch_health().await;
    let first = next_health(&mut stream, Duration::from_secs(2), |_| true).await;
    assert!(first.contains_key("gpu-0") && first.values().all(|h| h == "Healthy"), "at once, every device: {first:?}");

    driver.mark_unhealthy(&["gpu-0"]);
    let sick = next_health(&mut stream, Duration::from_secs(5), |h| h["gpu-0"] == "Unhealthy").await;
    assert!(sick.iter().all(|(d, h)| d == "gpu-0" || h == "Healthy"), "only gpu-0: {sick:?}");
    // The unhealthy device is also published with its taint.
    eventually("gpu-0 published with the unhealthy taint", Duration::from_secs(10), || async {
        let slices = slices_of(&client, node).await;
        let tainted: Vec<String> = slices
            .iter()
            .flat_map(|s| s.spec.devices.iter().flatten())
            .filter(|d| d.taints.as_ref().is_some_and(|t| !t.is_empty()))
            .map(|d| d.name.clone())
            .collect();
        (tainted == ["gpu-0"]).then_some(())
    })
    .await;

    // 1.36's kubelet calls the v1alpha1 package: the same report.
    let channel = dracheck_kubelet_api::connect_unix(driver.dra_socket()).await.unwrap();
    let mut alpha = health_v1alpha1::dra_resource_health_client::DraResourceHealthClient::new(channel)
        .node_watch_resources(health_v1alpha1::NodeWatchResourcesRequest {})
        .await
        .unwrap()
        .into_inner();
    let report = alpha.message().await.unwrap().expect("a v1alpha1 report");
    let report: dracheck_kubelet_api::health_v1::NodeWatchResourcesResponse =
        dracheck_kubelet_api::rewire(&report).unwrap();
    assert_eq!(health_of(&report), sick);

    driver.mark_unhealthy(&[]);
    next_health(&mut stream, Duration::from_secs(5), |h| h.values().all(|h| h == "Healthy")).await;
    // Unchanged, the report comes again before the kubelet's 30 s timeout runs out.
    let started = Instant::now();
    next_health(&mut stream, Duration::from_secs(15), |_| true).await;
    assert!(started.elapsed() < Duration::from_secs(30));
}

async fn bad_socket_dir(env: Env) {
    let dir = tempfile::Builder::new().prefix("mk").tempdir_in("/tmp").unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "a file where a directory should be").unwrap();
    let plugin_dir = dir.path().join("plugin");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_dracheck-mock-driver"))
        .args(["--node-name", "bad-dir-node", "--kubeconfig"])
        .arg(&env.kubeconfig)
        .arg("--inventory")
        .arg(default_inventory())
        .arg("--plugin-dir")
        .arg(&plugin_dir)
        .arg("--registrar-dir")
        .arg(blocker.join("registry"))
        .arg("--cdi-dir")
        .arg(dir.path().join("cdi"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("registration socket") && stderr.contains("--registrar-dir"), "{stderr}");
    assert!(stderr.contains(&blocker.join("registry").display().to_string()), "{stderr}");
    assert!(!plugin_dir.join("dra.sock").exists(), "the DRA socket bound first is removed again");
    assert!(
        !plugin_dir.join(dracheck_mock_driver::checkpoint::FILE_NAME).exists(),
        "no checkpoint is written by a failed start"
    );
}
