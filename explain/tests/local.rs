//! `explain` against the real scheduler on one local cluster: two emulated nodes with four
//! mock GPUs each (two a100 with 80Gi, two l4 with 24Gi; gpu-3 also has `special: "no"`).
//! Every case explains the claim before its pod exists, then lets the scheduler decide on the
//! same objects: the pod must be unschedulable exactly when explain says no device set fits,
//! and the explanation must name the cause.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::{Duration, Instant};

use dracheck_clusters::testing::{Env, Sharing, TestFn, run_with_cluster};
use dracheck_explain::{Cause, Explanation};
use dracheck_mock_driver::adapter as mock;
use dracheck_mock_driver::cli::DEFAULT_DRIVER as MOCK_DRIVER;
use dracheck_objects::{claim, device_class, pod};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::api::{Api, DeleteParams, PostParams};

const CLASS: &str = "mock-gpu";
const A100: &str = r#"device.attributes["gpu.mock.dracheck.io"].model == "a100""#;

fn inventory(dir: &Path) -> PathBuf {
    let gpu = |i: usize, model: &str, mem: &str, extra: &str| {
        format!(
            "      - name: gpu-{i}\n        attributes:\n          model: {{ string: {model} }}\n          index: {{ int: {i} }}\n{extra}        capacity:\n          memory: {mem}\n"
        )
    };
    let yaml = format!(
        "apiVersion: dracheck.io/v1alpha1\nkind: MockInventory\ngroups:\n  - nodes: [\"*\"]\n    devices:\n{}{}{}{}",
        gpu(0, "a100", "80Gi", ""),
        gpu(1, "a100", "80Gi", ""),
        gpu(2, "l4", "24Gi", ""),
        gpu(3, "l4", "24Gi", "          special: { string: \"no\" }\n"),
    );
    let path = dir.join("inventory.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

/// A namespace of its own for each case, deleted at the end.
struct Case {
    client: kube::Client,
    ns: String,
}

impl Case {
    async fn new(env: &Env, ns: &str) -> Case {
        let client = env.client().await;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        namespaces.create(&PostParams::default(), &dracheck_objects_namespace(ns)).await.unwrap();
        Case { client, ns: ns.to_string() }
    }

    async fn claim(&self, name: &str, class: &str, count: i64, selectors: &[&str]) {
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &self.ns);
        api.create(&PostParams::default(), &claim(&self.ns, name, class, count, selectors)).await.unwrap();
    }

    async fn pod(&self, name: &str, claim_name: &str) {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        let p = pod(&self.ns, name).claim("gpu", claim_name).command("sleep 3600").build();
        api.create(&PostParams::default(), &p).await.unwrap();
    }

    async fn explain(&self, name: &str) -> Explanation {
        dracheck_explain::explain(&self.client, &self.ns, name).await.expect("explain answers")
    }

    /// The scheduler's verdict: `Ok(node)` once bound, `Err("reason: message")` once refused:
    /// `Unschedulable`, or `SchedulerError` for a selector that fails at run time (the
    /// scheduler treats a CEL runtime error as an error, not as a non-matching device).
    async fn decision(&self, pod: &str) -> Result<String, String> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        let deadline = Instant::now() + Duration::from_secs(45);
        loop {
            let p = api.get(pod).await.unwrap();
            if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) {
                return Ok(node);
            }
            let refused = p.status.as_ref().and_then(|s| s.conditions.as_ref()).and_then(|c| {
                c.iter().find(|c| {
                    c.type_ == "PodScheduled"
                        && c.status == "False"
                        && matches!(c.reason.as_deref(), Some("Unschedulable" | "SchedulerError"))
                })
            });
            if let Some(c) = refused {
                return Err(format!("{}: {}", c.reason.as_deref().unwrap_or(""), c.message.as_deref().unwrap_or("")));
            }
            assert!(Instant::now() < deadline, "the scheduler decided nothing about {pod} in 45s: {:?}", p.status);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Explains the claim before its pod exists, creates the pod and checks that the
    /// scheduler agrees; returns the explanation of the pod when it was refused.
    async fn cross_check(&self, name: &str) -> (Explanation, Result<String, String>) {
        let before = self.explain(name).await;
        self.pod(name, name).await;
        let decision = self.decision(name).await;
        assert_eq!(
            before.fits,
            decision.is_ok(),
            "explain said fits={} but the scheduler decided {decision:?}:\n{}",
            before.fits,
            dracheck_explain::text(&before)
        );
        let after = if decision.is_err() { self.explain(name).await } else { before };
        if decision.is_err() {
            assert!(!after.fits, "explain of the refused pod says it fits:\n{}", dracheck_explain::text(&after));
        }
        (after, decision)
    }

    async fn finish(self) {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        let _ = pods
            .delete_collection(
                &DeleteParams { grace_period_seconds: Some(0), ..Default::default() },
                &Default::default(),
            )
            .await;
        let _ = namespaces.delete(&self.ns, &DeleteParams::default()).await;
    }
}

fn dracheck_objects_namespace(ns: &str) -> Namespace {
    Namespace { metadata: dracheck_objects::meta_for(ns, None), ..Namespace::default() }
}

fn causes(e: &Explanation) -> String {
    format!("{:?}\n{}", e.causes, dracheck_explain::text(e))
}

/// (a) all a100 are allocated; the free l4 do not match, and the attribute is named.
fn classic(env: Env) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let case = Case::new(&env, "classic").await;
        for h in ["hold-1", "hold-2"] {
            case.claim(h, CLASS, 2, &[A100]).await;
            case.pod(h, h).await;
        }
        for h in ["hold-1", "hold-2"] {
            assert!(case.decision(h).await.is_ok(), "{h} gets two a100");
        }
        case.claim("job", CLASS, 1, &[A100]).await;
        let (e, decision) = case.cross_check("job").await;
        assert!(decision.is_err());
        assert_eq!(
            dracheck_explain::summary_line(&e.summary),
            "8 devices, 4 free, 4 compatible, 0 free and compatible, needed 1"
        );
        let Some(Cause::AllocatedElsewhere { holders, free_misses, .. }) = e.causes.first() else {
            panic!("{}", causes(&e))
        };
        assert_eq!(holders, &["classic/hold-1", "classic/hold-2"], "{}", causes(&e));
        assert!(free_misses[0].actual.iter().any(|a| a.contains(r#"model="l4""#)), "{}", causes(&e));
        assert!(dracheck_explain::text(&e).contains(r#"model="l4""#));

        // Freeing the a100 makes explain and the scheduler change their minds together.
        let pods: Api<Pod> = Api::namespaced(case.client.clone(), "classic");
        for h in ["hold-1", "hold-2"] {
            pods.delete(h, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await.unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while !case.explain("job").await.fits {
            assert!(Instant::now() < deadline, "the holders' claims were not deallocated within 60s");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        assert!(case.decision("job").await.is_ok(), "the job schedules once the a100 are free");
        case.finish().await;
    })
}

/// (b) more devices than the cluster has.
fn count_above_inventory(env: Env) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let case = Case::new(&env, "count").await;
        case.claim("job", CLASS, 9, &[]).await;
        let (e, _) = case.cross_check("job").await;
        assert_eq!(
            e.causes.first(),
            Some(&Cause::CountAboveInventory { request: "req".into(), needed: 9, compatible: 8 }),
            "{}",
            causes(&e)
        );
        assert!(e.suggestions.iter().any(|s| s.contains("largest count that fits now is 4")), "{:?}", e.suggestions);
        case.finish().await;
    })
}

/// (c) more memory than any GPU has.
fn capacity_too_large(env: Env) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let case = Case::new(&env, "capacity").await;
        let big = r#"device.capacity["gpu.mock.dracheck.io"].memory.compareTo(quantity("160Gi")) >= 0"#;
        case.claim("job", CLASS, 1, &[big]).await;
        let (e, _) = case.cross_check("job").await;
        let Some(Cause::NoCompatibleDevice { misses, .. }) = e.causes.first() else { panic!("{}", causes(&e)) };
        assert_eq!((misses[0].expression.as_str(), misses[0].devices), (big, 8), "{}", causes(&e));
        assert!(misses[0].actual.contains(&"capacity memory=80Gi".to_string()), "{}", causes(&e));
        assert!(
            e.suggestions.iter().any(|s| s.contains("largest free memory") && s.contains("80Gi")),
            "{:?}",
            e.suggestions
        );
        case.finish().await;
    })
}

/// (d) a selector that fails at run time on the devices without the attribute, and one that
/// matches the first device the allocator reaches and so never meets the error.
fn runtime_error(env: Env) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let case = Case::new(&env, "celerror").await;
        case.claim("job", CLASS, 1, &[r#"device.attributes["gpu.mock.dracheck.io"].special == "yes""#]).await;
        let (e, decision) = case.cross_check("job").await;
        let Some(Cause::SelectorError { error, .. }) = e.causes.first() else { panic!("{}", causes(&e)) };
        assert!(error.contains("no such key: special"), "{}", causes(&e));
        let message = decision.unwrap_err();
        assert!(
            message.starts_with("SchedulerError: ") && message.contains("CEL runtime error"),
            "scheduler: {message}"
        );

        let first = r#"device.attributes["gpu.mock.dracheck.io"].index == 0 || device.attributes["gpu.mock.dracheck.io"].special == "yes""#;
        case.claim("lucky", CLASS, 1, &[first]).await;
        let (e, decision) = case.cross_check("lucky").await;
        assert!(e.fits && decision.is_ok(), "{}", causes(&e));
        case.finish().await;
    })
}

/// (e) a DeviceClass that does not exist.
fn unknown_class(env: Env) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let case = Case::new(&env, "noclass").await;
        case.claim("job", "no-such-class", 1, &[]).await;
        let (e, _) = case.cross_check("job").await;
        assert_eq!(
            e.causes.first(),
            Some(&Cause::UnknownClass { request: "req".into(), class: "no-such-class".into() }),
            "{}",
            causes(&e)
        );
        assert!(e.suggestions.iter().any(|s| s.contains("mock-gpu (")), "{:?}", e.suggestions);
        case.finish().await;
    })
}

/// A name that does not exist and a pod without claims are bad input.
fn bad_input(env: Env) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let case = Case::new(&env, "badinput").await;
        let missing = dracheck_explain::explain(&case.client, "badinput", "nope").await.unwrap_err();
        assert!(
            matches!(&missing, dracheck_explain::Error::BadInput(m) if m.contains("no pod and no ResourceClaim badinput/nope")),
            "{missing}"
        );
        let api: Api<Pod> = Api::namespaced(case.client.clone(), "badinput");
        api.create(&PostParams::default(), &pod("badinput", "plain").command("sleep 3600").build()).await.unwrap();
        let plain = dracheck_explain::explain(&case.client, "badinput", "plain").await.unwrap_err();
        assert!(
            matches!(&plain, dracheck_explain::Error::BadInput(m) if m.contains("has no resource claims")),
            "{plain}"
        );
        case.finish().await;
    })
}

fn main() -> std::process::ExitCode {
    let dir = tempfile::tempdir().unwrap();
    let tests: Vec<(&str, TestFn)> = vec![
        ("classic_other_model_free", classic),
        ("count_above_inventory", count_above_inventory),
        ("capacity_too_large", capacity_too_large),
        ("selector_runtime_error", runtime_error),
        ("unknown_device_class", unknown_class),
        ("bad_input", bad_input),
    ];
    // The cases share the cluster's devices: one at a time keeps each one's view its own.
    run_with_cluster(tests, Sharing::Serial, async |cluster| {
        let started = Instant::now();
        cluster.add_nodes(2).await.expect("two emulated nodes");
        let bin = mock::binary().expect("the mock driver builds");
        cluster.start_driver(&mock::spec(&bin, &inventory(dir.path()), &[])).expect("the driver starts");
        let classes: Api<DeviceClass> = Api::all(cluster.client());
        classes.create(&PostParams::default(), &device_class(CLASS, MOCK_DRIVER, &[])).await.unwrap();
        let slices: Api<ResourceSlice> = Api::all(cluster.client());
        let deadline = Instant::now() + Duration::from_secs(60);
        while slices.list(&Default::default()).await.map(|l| l.items.len()).unwrap_or(0) < 2 {
            assert!(Instant::now() < deadline, "the mock driver published no slices on both nodes in 60s");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        eprintln!("cluster with 2 nodes and the mock driver up in {:.1}s", started.elapsed().as_secs_f64());
    })
}
