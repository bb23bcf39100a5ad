//! `conformance --install helm` and `--cluster kind|k3s` as a user meets them: a release that
//! cannot become ready fails within its timeout with helm's output and the pods' state, and
//! leaves no release and no namespace; bad input and missing tools get one clear paragraph.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{conformance_on, text, xtask_env as xtask};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Api;
use kube::api::ListParams;

/// On emulated nodes containers are host processes, so the example chart's DaemonSet pod
/// never runs and `helm install --wait` gives up after `--install-timeout`.
#[test]
fn a_release_that_never_gets_ready_is_reported_and_removed() {
    // helm is built once into dracheck's cache (about 3 min on 2 cores the first time); doing
    // it here, with progress, keeps the timed run below about the install alone.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let started = Instant::now();
    let helm = rt
        .block_on(dracheck_clusters::helm::Helm::locate(None, &dracheck_clusters::local::Progress::stderr()))
        .expect("helm is on PATH or builds");
    eprintln!("helm {} ready after {:?}", helm.version, started.elapsed());
    // So is the example driver (its plugin, and its chart from the same Go module): on a fresh
    // machine its first build took the timed run past its bound.
    let example = rt.block_on(dracheck_example_driver::binary(&dracheck_clusters::local::Progress::stderr()));
    example.unwrap_or_else(|e| panic!("the example driver builds: {e}"));
    eprintln!("the example driver ready after {:?}", started.elapsed());

    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let up = xtask(&["cluster", "up", "--state-dir", state.to_str().unwrap(), "--nodes", "1"], &[]);
    assert!(up.status.success(), "{}", text(&up));
    let kubeconfig = state.join("admin.kubeconfig");
    let started = Instant::now();
    let run = conformance_on(
        &kubeconfig,
        &[
            "--driver",
            "example",
            "--install",
            "helm",
            "--helm",
            helm.program.to_str().unwrap(),
            "--install-timeout",
            "15",
            "--out",
            tmp.path().join("out").to_str().unwrap(),
        ],
    );
    let took = started.elapsed();
    let left = rt.block_on(left_over(&kubeconfig, "dra-example-driver"));
    let down = xtask(&["cluster", "down", "--state-dir", state.to_str().unwrap()], &[]);
    assert!(down.status.success(), "{}", text(&down));

    let said = text(&run);
    assert_eq!(run.status.code(), Some(4), "{said}");
    assert!(said.contains("helm could not install the release dra-example-driver"), "{said}");
    assert!(said.contains("waits up to 15s"), "{said}");
    assert!(said.contains("helm's last lines:") && said.contains("INSTALLATION FAILED"), "helm's output: {said}");
    assert!(said.contains("pod dra-example-driver-kubeletplugin-") && said.contains("on node-1: Pending"), "{said}");
    assert!(said.contains("log of plugin"), "the pod's log, or why there is none: {said}");
    assert!(said.contains("uninstalled helm release dra-example-driver and deleted namespace"), "{said}");
    assert!(!said.contains("PASS") && !said.contains("result:"), "no run after a failed install: {said}");
    // 15 s of waiting, the example driver's and helm's cached binaries, the uninstall and the
    // namespace's deletion.
    assert!(took < Duration::from_secs(15 + 90), "bounded: took {took:?}");
    assert_eq!(left, Vec::<String>::new(), "nothing of the install is left");
    eprintln!("the failed install took {took:?}");
}

/// What a release leaves in a cluster: its namespace, helm's release secrets.
async fn left_over(kubeconfig: &Path, namespace: &str) -> Vec<String> {
    let client = dracheck_clusters::local::client_for(kubeconfig, None).await.unwrap();
    let mut out = Vec::new();
    if Api::<Namespace>::all(client.clone()).get_opt(namespace).await.unwrap().is_some() {
        out.push(format!("namespace {namespace}"));
    }
    let releases = Api::<Secret>::all(client).list(&ListParams::default().labels("owner=helm")).await.unwrap();
    out.extend(releases.items.into_iter().map(|s| format!("release secret {}", s.metadata.name.unwrap_or_default())));
    out
}

/// A chart of one ConfigMap, ready at once anywhere. JSON is YAML, so the chart is written
/// from values rather than kept as text.
fn probe_chart(dir: &Path) {
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    let chart = serde_json::json!({ "apiVersion": "v2", "name": "dracheck-probe", "version": "0.1.0" });
    std::fs::write(dir.join("Chart.yaml"), chart.to_string()).unwrap();
    let config_map = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "probe" }, "data": { "a": "b" },
    });
    std::fs::write(dir.join("templates/configmap.yaml"), config_map.to_string()).unwrap();
}

/// `--chart` with the mock running on the nodes: the release is installed, the run runs,
/// and the release and its namespace are gone afterwards.
#[test]
fn a_release_is_installed_for_the_run_and_removed_after_it() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let up = xtask(&["cluster", "up", "--state-dir", state.to_str().unwrap(), "--nodes", "1", "--driver", "mock"], &[]);
    assert!(up.status.success(), "{}", text(&up));
    let kubeconfig = state.join("admin.kubeconfig");
    let chart = tmp.path().join("dracheck-probe");
    probe_chart(&chart);
    let run = conformance_on(
        &kubeconfig,
        &[
            "--driver",
            "mock",
            "--install",
            "helm",
            "--chart",
            chart.to_str().unwrap(),
            "--profile",
            "standard-inference",
            "--only",
            "versions.*",
            "--out",
            tmp.path().join("out").to_str().unwrap(),
        ],
    );
    // A chart reference that leads nowhere (a closed port on loopback): helm's own words, exit 4.
    let nowhere = conformance_on(
        &kubeconfig,
        &[
            "--driver",
            "mock",
            "--install",
            "helm",
            "--chart",
            "oci://127.0.0.1:1/charts/nowhere",
            "--out",
            tmp.path().join("out").to_str().unwrap(),
        ],
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let left = rt.block_on(left_over(&kubeconfig, "dracheck-probe"));
    let left_nowhere = rt.block_on(left_over(&kubeconfig, "nowhere"));
    let down = xtask(&["cluster", "down", "--state-dir", state.to_str().unwrap()], &[]);
    assert!(down.status.success(), "{}", text(&down));

    let said = text(&run);
    assert!(run.status.success(), "{said}");
    assert!(said.contains("helm release dracheck-probe is ready"), "{said}");
    assert!(said.contains("PASS  standard-inference   versions.kubernetes"), "the run ran: {said}");
    let ready = said.find("is ready").unwrap();
    let removed = said.find("uninstalled helm release dracheck-probe and deleted namespace dracheck-probe");
    assert!(removed.is_some_and(|r| r > ready), "removed after the run: {said}");
    assert_eq!(left, Vec::<String>::new(), "nothing of the install is left");

    let said = text(&nowhere);
    assert_eq!(nowhere.status.code(), Some(4), "{said}");
    assert!(said.contains("helm could not install the release nowhere of oci://127.0.0.1:1/charts/nowhere"), "{said}");
    assert!(said.contains("connection refused"), "helm's reason: {said}");
    assert_eq!(left_nowhere, Vec::<String>::new(), "nothing of the failed install is left");
}

#[test]
fn install_input_is_checked_before_anything_is_installed() {
    let tmp = tempfile::tempdir().unwrap();
    // Never contacted: each case stops before the install.
    let kc = tmp.path().join("kubeconfig");
    std::fs::write(&kc, "apiVersion: v1\nkind: Config\n").unwrap();
    let kc = kc.to_str().unwrap();
    let out_dir = tmp.path().join("out");
    let existing = ["conformance", "--cluster", "kubeconfig", "--kubeconfig", kc, "--out", out_dir.to_str().unwrap()];
    let with = |more: &[&'static str]| existing.iter().copied().chain(more.iter().copied()).collect::<Vec<_>>();
    let local = |more: &[&'static str]| {
        ["conformance", "--out", out_dir.to_str().unwrap()].into_iter().chain(more.iter().copied()).collect::<Vec<_>>()
    };
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (local(&["--install", "helm", "--node-kind", "emulated"]), 2, "pods need real nodes"),
        (local(&["--install", "helm", "--node-kind", "real", "--driver", "mock"]), 2, "--chart PATH_OR_REF"),
        (local(&["--image-archive", "driver.tar"]), 2, "--image-archive loads a driver's image"),
        (with(&["--driver", "example", "--install", "helm", "--image-archive", "d.tar"]), 2, "with --cluster local"),
        (with(&["--driver", "nvidia", "--install", "kustomize"]), 2, "the one installer is `helm`"),
        (with(&["--driver", "mock", "--install", "helm"]), 2, "--chart PATH_OR_REF"),
        (with(&["--driver", "nvidia", "--install", "helm", "--chart", "./no/such/chart"]), 2, "chart not found"),
        (with(&["--driver", "nvidia", "--install", "helm", "--set", "novalue"]), 2, "expected KEY=VALUE"),
        (with(&["--driver", "nvidia", "--install", "helm", "--helm", "/nonexistent/helm"]), 2, "helm is not available"),
        (with(&["--driver", "nvidia", "--chart", "./c"]), 2, "add --install helm"),
    ];
    for (args, code, needle) in cases {
        let out = xtask(&args, &[]);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(needle), "{args:?}: {}", text(&out));
        assert!(!text(&out).contains("installing "), "{args:?} installed something: {}", text(&out));
    }
}

/// No helm on PATH and no Go to build one: the message names both ways out.
#[test]
fn a_missing_helm_that_cannot_be_built_is_named_with_the_fix() {
    let cache = tempfile::tempdir().unwrap();
    let kc = cache.path().join("kubeconfig");
    std::fs::write(&kc, "apiVersion: v1\nkind: Config\n").unwrap();
    let empty_path = cache.path().join("bin");
    std::fs::create_dir(&empty_path).unwrap();
    let out = xtask(
        &[
            "conformance",
            "--cluster",
            "kubeconfig",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--driver",
            "nvidia",
            "--install",
            "helm",
            "--out",
            cache.path().join("out").to_str().unwrap(),
        ],
        &[
            ("DRACHECK_CACHE_DIR", cache.path().to_str().unwrap()),
            ("DRACHECK_GO", "/nonexistent/go"),
            ("PATH", empty_path.to_str().unwrap()),
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("no Go toolchain found") && text(&out).contains("helm"), "{}", text(&out));
    assert!(text(&out).contains("put a helm binary on PATH or pass --helm PATH"), "{}", text(&out));
}

/// kind and K3s say first whether Docker answers, before any build; with Docker, the mock
/// (a host program of emulated nodes) is refused.
#[test]
fn kind_and_k3s_check_docker_first_and_refuse_the_mock() {
    let docker = dracheck_clusters::kind::docker_daemon();
    for provider in ["kind", "k3s"] {
        let cache = tempfile::tempdir().unwrap();
        let example = xtask(
            &["conformance", "--cluster", provider, "--driver", "example"],
            &[("DRACHECK_CACHE_DIR", cache.path().to_str().unwrap()), ("DRACHECK_GO", "/nonexistent/go")],
        );
        let mock = xtask(&["conformance", "--cluster", provider, "--driver", "mock"], &[]);
        match &docker {
            Err(why) => {
                eprintln!("no Docker daemon ({why}): checking that --cluster {provider} stops first");
                for out in [&example, &mock] {
                    assert_eq!(out.status.code(), Some(3), "{provider}: {}", text(out));
                    assert!(text(out).contains("Docker") && text(out).contains("--cluster local"), "{}", text(out));
                    assert!(!text(out).contains("building"), "nothing is built before: {}", text(out));
                }
            }
            Ok(_) => {
                assert_eq!(mock.status.code(), Some(2), "{provider}: {}", text(&mock));
                assert!(text(&mock).contains("cannot run the mock driver"), "{}", text(&mock));
            }
        }
    }
}

/// The whole `--cluster kind` flow without Docker: stand-ins for `docker` (a daemon that
/// answers) and `kind` (whose cluster is a local one with the mock on its node) put on PATH.
/// The cluster is created, the chart installed, the run made, the release removed and the
/// cluster deleted, in that order.
#[test]
fn the_kind_flow_creates_installs_runs_and_deletes_in_order() {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let state = tmp.path().join("state");
    let log = tmp.path().join("kind-calls");
    let xtask_bin = env!("CARGO_BIN_EXE_xtask");
    let kind = format!(
        "#!/bin/sh\necho \"$@\" >> {log}\ncase \"$1\" in\ncreate)\n  while [ $# -gt 0 ]; do [ \"$1\" = --kubeconfig ] && kc=\"$2\"; shift; done\n  \
         {xtask_bin} cluster up --state-dir {state} --nodes 1 --driver mock >/dev/null 2>&1 || exit 1\n  \
         cp {state}/admin.kubeconfig \"$kc\";;\ndelete)\n  {xtask_bin} cluster down --state-dir {state} >/dev/null 2>&1;;\nesac\n",
        log = log.display(),
        state = state.display(),
    );
    let docker = "#!/bin/sh\necho 27.0.0-stand-in\n";
    for (name, script) in [("kind", kind.as_str()), ("docker", docker)] {
        std::fs::write(bin.join(name), script).unwrap();
        std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let chart = tmp.path().join("dracheck-probe");
    probe_chart(&chart);
    let mock = common::mock_driver();
    let inventory = concat!(env!("CARGO_MANIFEST_DIR"), "/../drivers/mock/inventory/default.yaml");
    let profile = concat!(env!("CARGO_MANIFEST_DIR"), "/../profiles/mock/standard-inference.yaml");
    let out_dir = tmp.path().join("out");
    let run = xtask(
        &[
            "conformance",
            "--cluster",
            "kind",
            "--driver-bin",
            mock.to_str().unwrap(),
            "--driver-name",
            "gpu.mock.dracheck.io",
            "--driver-arg=--driver-name=gpu.mock.dracheck.io",
            "--driver-arg=--node-name={node}",
            "--driver-arg=--kubeconfig={kubeconfig}",
            &format!("--driver-arg=--inventory={inventory}"),
            "--driver-arg=--registrar-dir={registrar-dir}",
            "--driver-arg=--plugin-dir={plugin-dir}",
            "--driver-arg=--cdi-dir={cdi-dir}",
            "--chart",
            chart.to_str().unwrap(),
            "--profile",
            profile,
            "--only",
            "versions.kubernetes",
            "--out",
            out_dir.to_str().unwrap(),
        ],
        &[("PATH", &path)],
    );
    let said = text(&run);
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    if state.exists() {
        xtask(&["cluster", "down", "--state-dir", state.to_str().unwrap()], &[]);
    }
    assert!(run.status.success(), "{said}");
    let order = [
        "creating kind cluster dracheck-",
        "helm release dracheck-probe is ready",
        "uninstalled helm release dracheck-probe and deleted namespace dracheck-probe",
        "deleting kind cluster dracheck-",
    ];
    let stderr = String::from_utf8_lossy(&run.stderr);
    let at: Vec<Option<usize>> = order.iter().map(|s| stderr.find(s)).collect();
    assert!(at.iter().all(Option::is_some) && at.windows(2).all(|w| w[0] < w[1]), "in this order {order:?}: {said}");
    assert!(said.contains("PASS  standard-inference   versions.kubernetes"), "the run ran: {said}");
    let lines: Vec<&str> = calls.lines().collect();
    assert_eq!(lines.len(), 2, "one create, one delete: {calls}");
    assert!(
        lines[0].starts_with("create cluster --name dracheck-") && lines[1].starts_with("delete cluster"),
        "{calls}"
    );
    assert!(!state.exists(), "the stand-in cluster was deleted");
    let result = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .unwrap();
    let result: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(result).unwrap()).unwrap();
    assert_eq!(result["cluster"]["provider"], "kind");
}

/// `--cluster local --install helm`: the vendor's release path on real nodes. The example
/// driver's image is built from its Go module and imported into each node (nothing is
/// pulled), its own chart is installed, its DaemonSet's pods reach the API server through the
/// `kubernetes` Service and register with the real kubelets at the chart's paths; pods with
/// claims run and see their devices, driver restarts go through the DaemonSet, and after the
/// run nothing of the driver runs.
#[test]
fn the_example_chart_runs_on_the_local_clusters_real_nodes() {
    if let Err(reason) = dracheck_clusters::local::real::host::check_support() {
        eprintln!("skipped: real nodes cannot run here ({reason})");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("out");
    let started = Instant::now();
    let run = xtask(
        &[
            "conformance",
            "--driver",
            "example",
            "--cluster",
            "local",
            "--install",
            "helm",
            "--node-kind",
            "real",
            "--nodes",
            "2",
            "--profile",
            "standard-inference",
            "--only",
            "claim.compatible.*",
            "--only",
            "workload.*",
            "--only",
            "isolation.*",
            "--only",
            "driver.restart.*",
            // The suite controls the local cluster's nodes also where the chart runs the driver.
            "--only",
            "node.restart.*",
            "--only",
            "lifecycle.*",
            "--out",
            out_dir.to_str().unwrap(),
        ],
        &[],
    );
    let said = text(&run);
    assert!(run.status.success(), "{said}");
    for needle in [
        "importing ",
        "helm release dra-example-driver is ready",
        "PASS  standard-inference   claim.compatible.allocated",
        "PASS  standard-inference   workload.sees-devices",
        "PASS  standard-inference   isolation.exclusive",
        "PASS  standard-inference   driver.restart.workload-keeps-devices",
        "PASS  standard-inference   driver.restart.new-claims-work",
        "PASS  standard-inference   node.restart.driver-recovers",
        "PASS  standard-inference   lifecycle.unprepared",
        "uninstalled helm release dra-example-driver",
    ] {
        assert!(said.contains(needle), "{needle:?} missing: {said}");
    }
    let result: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::fs::read_dir(&out_dir)
                .unwrap()
                .flatten()
                .find(|e| e.path().extension().is_some_and(|x| x == "json"))
                .unwrap()
                .path(),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(result["cluster"]["provider"], "local");
    let chart_plugins: Vec<String> = (0..50)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(100));
            chart_plugin_processes()
        })
        .find(Vec::is_empty)
        .unwrap_or_else(chart_plugin_processes);
    assert_eq!(chart_plugins, Vec::<String>::new(), "the chart's plugin containers are gone with the cluster");
    eprintln!("the chart run took {:?}", started.elapsed());
}

/// Processes run the way the chart runs the plugin: by its bare name, from the image's PATH
/// (a host-process plugin runs by its cache path).
fn chart_plugin_processes() -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let first = cmdline.split(|b| *b == 0).next()?;
            (first == b"dra-example-kubeletplugin").then(|| format!("{pid}"))
        })
        .collect()
}
