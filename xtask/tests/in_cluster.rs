//! In-cluster mode end to end, on the local cluster's real nodes: the image `dist --image`
//! builds is loaded into the node (no registry), the RBAC `rbac` generates is applied, and the
//! Job `job` prints runs the suite in a pod under that ServiceAccount alone; `retrieve` takes
//! its results out of the pod's log. With one permission less the pod's run stops before any
//! scenario and names exactly that permission, with its own exit code.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{text, xtask_env};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::Value;

/// The exit code of a run whose credentials lack a permission (xtask's `exit::FORBIDDEN`).
const FORBIDDEN: i32 = 5;

/// Stops the cluster of the state dir when dropped, also when the test fails halfway.
struct Down(PathBuf);

impl Drop for Down {
    fn drop(&mut self) {
        if self.0.join("cluster.json").is_file() {
            let _ = dracheck_clusters::local::stop_recorded(&self.0);
        }
    }
}

fn run(args: &[&str], tmp: &Path) -> std::process::Output {
    xtask_env(args, &[("TMPDIR", tmp.to_str().unwrap())])
}

fn ok(out: std::process::Output, what: &str) -> String {
    assert!(out.status.success(), "{what} failed ({}):\n{}", out.status, text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Applies `rbac`'s objects (JSON) as an administrator, server-side, so that a second apply
/// replaces the role's rules.
async fn apply_rbac(client: &kube::Client, list: &str) {
    let list: Value = serde_json::from_str(list).expect("rbac -o json is a List");
    let pp = PatchParams::apply("dracheck-test").force();
    for item in list["items"].as_array().unwrap() {
        let name = item["metadata"]["name"].as_str().unwrap();
        let ns = item["metadata"]["namespace"].as_str();
        match item["kind"].as_str().unwrap() {
            "Namespace" => {
                drop(Api::<Namespace>::all(client.clone()).patch(name, &pp, &Patch::Apply(item)).await.unwrap())
            }
            "ServiceAccount" => drop(
                Api::<ServiceAccount>::namespaced(client.clone(), ns.unwrap())
                    .patch(name, &pp, &Patch::Apply(item))
                    .await
                    .unwrap(),
            ),
            "ClusterRole" => {
                drop(Api::<ClusterRole>::all(client.clone()).patch(name, &pp, &Patch::Apply(item)).await.unwrap())
            }
            "ClusterRoleBinding" => drop(
                Api::<ClusterRoleBinding>::all(client.clone()).patch(name, &pp, &Patch::Apply(item)).await.unwrap(),
            ),
            other => panic!("rbac printed a {other}"),
        }
    }
}

/// Creates the Job `job` prints for `conformance` (after `--`), as a user gets it: the pod
/// finds the API server through the `kubernetes` Service, which the real nodes serve inside
/// each pod's network namespace.
async fn start_job(client: &kube::Client, tmp: &Path, image: &str, name: &str, conformance: &[&str]) {
    let mut args = vec!["job", "--image", image, "--name", name, "-o", "json", "--"];
    args.extend(conformance);
    let list: Value = serde_json::from_str(&ok(run(&args, tmp), "job")).unwrap();
    let job: Job = serde_json::from_value(list["items"][0].clone()).unwrap();
    Api::<Job>::namespaced(client.clone(), "dracheck").create(&PostParams::default(), &job).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_suite_runs_as_a_job_with_exactly_the_generated_rbac() {
    if let Err(reason) = dracheck_clusters::local::real::host::check_support() {
        eprintln!("skipped: real nodes cannot run here ({reason})");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();

    // The image, as a release would ship it (dev profile: quick to build).
    let dist = tmp.join("dist");
    ok(run(&["dist", "--debug", "--image", "--out", dist.to_str().unwrap()], tmp), "dist --image");
    let archive = std::fs::read_dir(&dist)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with("-oci.tar"))
        .expect("dist --image writes *-oci.tar");
    let image = format!("dracheck.io/dracheck:{}", env!("CARGO_PKG_VERSION"));

    // One real node with the mock driver, the image loaded into it.
    let state = tmp.join("state");
    let _down = Down(state.clone());
    let state_arg = state.to_str().unwrap();
    ok(
        run(
            &["cluster", "up", "--nodes", "1", "--driver", "mock", "--node-kind", "real", "--state-dir", state_arg],
            tmp,
        ),
        "cluster up",
    );
    let loaded = run(&["cluster", "load-image", "--state-dir", state_arg, archive.to_str().unwrap()], tmp);
    assert!(text(&loaded).contains("node-1: imported"), "{}", text(&loaded));
    ok(loaded, "cluster load-image");

    let info = dracheck_clusters::local::ClusterInfo::load(&state).unwrap();
    let admin = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&info.kubeconfig).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    let client = kube::Client::try_from(admin).unwrap();
    let retrieve = |name: &str, out: &Path| {
        let kubeconfig = info.kubeconfig.to_str().unwrap();
        let out = out.to_str().unwrap();
        run(&["retrieve", "--kubeconfig", kubeconfig, "--name", name, "--wait", "600", "--out", out], tmp)
    };

    // A Job that is not there is bad input at once, not an hour's wait.
    let asked = std::time::Instant::now();
    let nosuch = retrieve("nosuch", &tmp.join("nosuch"));
    assert_eq!(nosuch.status.code(), Some(2), "{}", text(&nosuch));
    assert!(text(&nosuch).contains("there is no Job dracheck/nosuch"), "{}", text(&nosuch));
    assert!(asked.elapsed() < Duration::from_secs(30), "took {:?}", asked.elapsed());

    // One permission less: the pod's run names it and stops with its own code.
    let short =
        ok(run(&["rbac", "-o", "json", "--without", "delete resourceclaims.resource.k8s.io"], tmp), "rbac --without");
    apply_rbac(&client, &short).await;
    start_job(&client, tmp, &image, "refused", &["--driver", "mock", "--only", "claim.*"]).await;
    let refused = retrieve("refused", &tmp.join("refused"));
    let said = text(&refused);
    assert_eq!(refused.status.code(), Some(FORBIDDEN), "{said}");
    assert!(said.contains("lack 1 permission"), "{said}");
    assert!(said.contains("delete resourceclaims.resource.k8s.io"), "{said}");

    // Exactly the generated role: a run whose scenarios use every rule of it passes (the plugin
    // tier makes Nodes and slices and allocates claims itself; the compatible claims run pods
    // and read their logs; the taint scenarios make DeviceTaintRules).
    let full = ok(run(&["rbac", "-o", "json"], tmp), "rbac");
    apply_rbac(&client, &full).await;
    let only = ["plugin.*", "claim.*", "workload.*", "taints.*", "isolation.*"];
    let mut conformance = vec!["--driver", "mock"];
    for glob in &only {
        conformance.extend(["--only", glob]);
    }
    start_job(&client, tmp, &image, "dracheck", &conformance).await;
    let out = tmp.join("results");
    let retrieved = retrieve("dracheck", &out);
    let said = text(&retrieved);
    let json = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap_or_else(|| panic!("retrieve wrote no result: {said}"));
    let result: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let guarantees: Vec<&Value> = result["driver_guarantees"]
        .as_array()
        .unwrap()
        .iter()
        .chain(result["profiles"].as_array().unwrap().iter().flat_map(|p| p["guarantees"].as_array().unwrap()))
        .collect();
    let verdicts: Vec<&str> = guarantees.iter().map(|g| g["verdict"].as_str().unwrap()).collect();
    let failed: Vec<String> =
        guarantees.iter().filter(|g| g["verdict"] == "fail").map(|g| format!("{}: {}", g["id"], g["reason"])).collect();
    assert_eq!(retrieved.status.code(), Some(0), "{said}\nfailed: {failed:#?}");
    let passed = verdicts.iter().filter(|v| **v == "pass").count();
    eprintln!("the Job's run: {passed} of {} guarantees passed, the rest skipped", verdicts.len());
    assert!(passed >= 10, "only {passed} guarantees passed in the Job: {verdicts:?}\n{said}");
    assert!(!verdicts.contains(&"fail"), "{verdicts:?}\n{said}");
    for report in ["md", "html", "xml"] {
        assert!(
            std::fs::read_dir(&out).unwrap().flatten().any(|e| e.path().extension().is_some_and(|x| x == report)),
            "retrieve wrote no .{report} report: {said}"
        );
    }

    Api::<Namespace>::all(client.clone()).delete("dracheck", &DeleteParams::default()).await.unwrap();
}
