//! The command line as a user meets it: help on every command, exit codes and one-paragraph
//! errors for bad input, and `cluster up → status → kubeconfig → down` leaving nothing behind.

mod common;

use common::{conformance_on, processes_mentioning, text, xtask_env as xtask};
use rstest::rstest;
use std::path::Path;

#[rstest]
#[case::top(&["--help"])]
#[case::cluster(&["cluster", "--help"])]
#[case::cluster_up(&["cluster", "up", "--help"])]
#[case::cluster_down(&["cluster", "down", "--help"])]
#[case::cluster_status(&["cluster", "status", "--help"])]
#[case::cluster_kubeconfig(&["cluster", "kubeconfig", "--help"])]
#[case::cluster_build(&["cluster", "build", "--help"])]
#[case::cluster_kind_config(&["cluster", "kind-config", "--help"])]
#[case::conformance(&["conformance", "--help"])]
#[case::test_cmd(&["test", "--help"])]
#[case::cleanup(&["cleanup", "--help"])]
#[case::profile_validate(&["profile", "validate", "--help"])]
#[case::list(&["list", "--help"])]
fn every_command_has_help(#[case] args: &[&str]) {
    let out = xtask(args, &[]);
    assert!(out.status.success(), "{args:?}: {}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage:"), "{args:?}");
}

/// `args` with `@state` replaced by a state dir under a temp dir of its own, and the output
/// of running them; the state dir must not exist after a refused command.
fn refused_with_state(args: &[&str]) -> (std::process::Output, std::path::PathBuf, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let args: Vec<String> = args.iter().map(|a| a.replace("@state", state.to_str().unwrap())).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    (xtask(&args, &[]), state, tmp)
}

#[rstest]
#[case::unknown_version(&["cluster", "up", "--state-dir", "@state", "--k8s-version", "1.99"], 2, "has no build recipe")]
#[case::no_binaries(&["cluster", "up", "--state-dir", "@state", "--k8s-bin-dir", "/nonexistent"], 2, "has no usable etcd")]
#[case::bad_gate(&["cluster", "up", "--state-dir", "@state", "--feature-gates", "DRA"], 2, "invalid feature gate")]
#[case::status_without_cluster(&["cluster", "status", "--state-dir", "@state"], 2, "no local cluster state")]
#[case::down_without_cluster(&["cluster", "down", "--state-dir", "@state"], 2, "no local cluster state")]
#[case::kubeconfig_without_cluster(&["cluster", "kubeconfig", "--state-dir", "@state"], 2, "no local cluster state")]
fn bad_input_gets_a_clear_message_and_its_exit_code(#[case] args: &[&str], #[case] code: i32, #[case] needle: &str) {
    let (out, state, _tmp) = refused_with_state(args);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {}", text(&out));
    assert!(text(&out).contains(needle), "{args:?}: {}", text(&out));
    assert!(!state.exists(), "{args:?} left a state dir");
}

#[test]
fn a_missing_go_toolchain_is_named_with_the_fix() {
    let cache = tempfile::tempdir().unwrap();
    let out = xtask(
        &["cluster", "build"],
        &[("DRACHECK_CACHE_DIR", cache.path().to_str().unwrap()), ("DRACHECK_GO", "/nonexistent/go")],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("no Go toolchain found"), "{}", text(&out));
    assert!(text(&out).contains("--k8s-bin-dir"), "the message names the way out: {}", text(&out));
}

#[test]
fn cluster_up_status_kubeconfig_down() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let state_s = state.to_str().unwrap();

    let up = xtask(&["cluster", "up", "--state-dir", state_s, "--nodes", "1", "--driver", "mock"], &[]);
    assert!(up.status.success(), "{}", text(&up));
    let kubeconfig = String::from_utf8_lossy(&up.stdout).lines().last().unwrap_or_default().to_string();
    assert!(Path::new(&kubeconfig).is_file(), "the last line of `up` is the kubeconfig: {kubeconfig:?}");
    let info = dracheck_clusters::local::ClusterInfo::load(&state).unwrap();

    // A second `up` on the same state dir refuses instead of clobbering the running cluster.
    let again = xtask(&["cluster", "up", "--state-dir", state_s], &[]);
    assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    assert!(text(&again).contains("already running"), "{}", text(&again));

    let status = xtask(&["cluster", "status", "--state-dir", state_s], &[]);
    assert!(status.status.success(), "{}", text(&status));
    assert!(text(&status).contains("/readyz ok"), "{}", text(&status));
    assert!(text(&status).contains("node-agent"), "{}", text(&status));
    assert!(!processes_mentioning(&state).is_empty(), "the mock driver runs with the node's dirs");

    let kc = xtask(&["cluster", "kubeconfig", "--state-dir", state_s], &[]);
    assert!(kc.status.success(), "{}", text(&kc));
    assert_eq!(String::from_utf8_lossy(&kc.stdout).lines().last(), Some(kubeconfig.as_str()));

    // A dead etcd shows up in `status` as a cluster that is not running.
    let etcd = info.processes.iter().find(|p| p.name == "etcd").unwrap();
    // SAFETY: a pid we started and verified by start time just above.
    assert!(etcd.is_alive());
    unsafe { libc::kill(etcd.pid as i32, libc::SIGKILL) };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while etcd.is_alive() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let status = xtask(&["cluster", "status", "--state-dir", state_s], &[]);
    assert_eq!(status.status.code(), Some(3), "{}", text(&status));
    assert!(text(&status).contains("etcd") && text(&status).contains("NOT RUNNING"), "{}", text(&status));

    let down = xtask(&["cluster", "down", "--state-dir", state_s], &[]);
    assert!(down.status.success(), "{}", text(&down));
    assert!(!state.exists(), "down removes the state dir");
    for p in &info.processes {
        assert!(!p.is_alive(), "{} (pid {}) survived `down`", p.name, p.pid);
    }
    for (name, port) in &info.ports {
        // Another cluster (a parallel test) may get the freed port; only ours would be a leak.
        let ours: Vec<_> = dracheck_clusters::local::ports::listeners(*port)
            .into_iter()
            .filter(|(_, cmd)| cmd.contains(state_s))
            .collect();
        assert!(ours.is_empty(), "{name}'s port {port} is still held by {ours:?}");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !processes_mentioning(&state).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(processes_mentioning(&state), Vec::<String>::new(), "no driver or container survives `down`");
}

#[rstest]
#[case::unknown_driver(&["cluster", "up", "--state-dir", "@state", "--nodes", "1", "--driver", "nope"], "unknown driver \"nope\"")]
#[case::driver_without_nodes(&["cluster", "up", "--state-dir", "@state", "--driver", "mock"], "pass --nodes N")]
#[case::missing_inventory(
    &["cluster", "up", "--state-dir", "@state", "--nodes", "1", "--driver", "mock", "--inventory", "/nonexistent.yaml"],
    "does not exist"
)]
#[case::installed_only(
    &["cluster", "up", "--state-dir", "@state", "--nodes", "1", "--driver", "nvidia"],
    "runs only installed in a real cluster"
)]
fn up_refuses_an_unknown_driver_or_a_driver_without_nodes(#[case] args: &[&str], #[case] needle: &str) {
    let (out, state, _tmp) = refused_with_state(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
    assert!(text(&out).contains(needle), "{args:?}: {}", text(&out));
    assert!(!state.exists(), "{args:?} started something");
}

#[rstest]
#[case::unknown_driver(&["conformance", "--driver", "nope"], "unknown driver")]
#[case::unknown_profile(&["conformance", "--profile", "no-such-profile"], "no-such-profile")]
#[case::profile_of_another_driver(&["conformance", "--profile", "@other"], "is for driver gpu.example.com")]
#[case::invalid_profile(&["conformance", "--profile", "@broken"], "line")]
#[case::bad_gate(&["conformance", "--feature-gates", "Nope"], "invalid feature gate")]
#[case::fault_of_another_driver(&["conformance", "--driver", "example", "--fault", "hang-prepare"], "switch of the mock driver")]
#[case::missing_binary(
    &["conformance", "--driver-bin", "/nonexistent/plugin", "--driver-name", "x.example.com"],
    "not an executable"
)]
#[case::binary_without_name(&["conformance", "--driver-bin", "/bin/true"], "--driver-name")]
#[case::unknown_placeholder(
    &["conformance", "--driver-bin", "/bin/true", "--driver-name", "x.example.com", "--driver-arg=--dir={state}"],
    "unknown placeholder"
)]
#[case::binary_without_profiles(
    &["conformance", "--driver-bin", "/bin/true", "--driver-name", "x.example.com"],
    "ships no profiles"
)]
#[case::installed_only(&["conformance", "--driver", "nvidia"], "runs only installed in a real cluster")]
#[case::driver_pods_locally(&["conformance", "--driver-pods", "app=x"], "the local cluster runs the driver itself")]
#[case::recording_of_another_driver(&["conformance", "--nvml-recording", "rec.json"], "switch of the nvidia driver")]
#[case::version_of_the_mock(&["conformance", "--driver", "mock", "--driver-version", "1.0"], "--driver-version states")]
#[case::missing_recording(
    &["conformance", "--driver", "nvidia", "--nvml-recording", "/nonexistent.json"],
    "does not exist"
)]
#[case::no_nodes(&["conformance", "--nodes", "0"], "needs at least 2 node(s)")]
#[case::the_default_named_right(&["conformance", "--nodes", "0"], "(the default, 10, runs")]
#[case::unknown_node_kind(&["conformance", "--node-kind", "virtual"], "[possible values: real, emulated]")]
#[case::too_many_real_nodes(&["conformance", "--nodes", "100000"], "--node-kind emulated")]
#[case::only_as_a_list(&["conformance", "--only", "claim.*,plugin.*"], "no guarantee ID matches")]
#[case::skip_typo(&["conformance", "--skip", "plugin.slice.*"], "no guarantee ID matches")]
#[case::too_few_for_removal(&["conformance", "--nodes", "1"], "one more for each profile whose node-removal scenario")]
#[case::too_many_for_the_machine(&["conformance", "--nodes", "100000"], "this machine can hold at most")]
#[case::unknown_resource_version(&["conformance", "--resource-api-versions", "v1beta1,v2"], "does not serve")]
#[case::resource_versions_elsewhere(
    &["conformance", "--cluster", "kubeconfig", "--resource-api-versions", "v1beta1"],
    "sets what the local cluster serves"
)]
#[case::skip_everything(&["conformance", "--skip", "*"], "leaves no guarantee of the driver or of the profiles")]
#[case::only_what_no_profile_checks(
    &["conformance", "--profile", "shared-by-memory", "--only", "limits.max-devices-per-claim"],
    "would check nothing and pass"
)]
#[case::unwritable_out(&["conformance", "--out", "/proc/dracheck-cannot-write-here"], "cannot write there")]
#[case::out_is_a_file(&["conformance", "--out", "/proc/self/status"], "cannot write there")]
fn conformance_refuses_bad_input_before_starting_anything(#[case] args: &[&str], #[case] needle: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let other = tmp.path().join("other.yaml");
    let shipped =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../profiles/mock/standard-inference.yaml"))
            .unwrap();
    std::fs::write(&other, shipped.replace("driver: gpu.mock.dracheck.io", "driver: gpu.example.com")).unwrap();
    let broken = tmp.path().join("broken.yaml");
    std::fs::write(&broken, shipped.replace("withinSeconds: 30", "withinSeconds: soon")).unwrap();
    let args: Vec<String> = args
        .iter()
        .map(|a| a.replace("@other", other.to_str().unwrap()).replace("@broken", broken.to_str().unwrap()))
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = xtask(&args, &[]);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
    assert!(text(&out).contains(needle), "{args:?}: {}", text(&out));
    assert!(!text(&out).contains("starting etcd"), "{args:?} started a cluster: {}", text(&out));
}

/// A profile whose CEL the API server refuses is the profile's error, named with its file,
/// line and field, not a failure of every guarantee counted against the driver.
#[test]
fn a_profile_the_api_server_refuses_is_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let profile = tmp.path().join("untyped.yaml");
    let shipped =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../profiles/mock/standard-inference.yaml"))
            .unwrap();
    let class_selector = "expression: device.driver == \"gpu.mock.dracheck.io\"";
    assert!(shipped.contains(class_selector), "the shipped profile selects by driver: {shipped}");
    let line = shipped.lines().position(|l| l.contains(class_selector)).unwrap() + 1;
    std::fs::write(&profile, shipped.replacen(class_selector, "expression: device.driver > 3", 1)).unwrap();
    let out = xtask(
        &["conformance", "--profile", profile.to_str().unwrap(), "--only", "versions.*", "--nodes", "1"],
        &[("ARTIFACTS", tmp.path().to_str().unwrap()), ("TMPDIR", tmp.path().to_str().unwrap())],
    );
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    let at = format!("line {line}, column");
    assert!(said.contains(profile.to_str().unwrap()) && said.contains(&at), "names the file and line: {said}");
    assert!(said.contains("deviceClass.spec.selectors[0].cel.expression"), "names the field: {said}");
    assert!(said.contains("refuses its DeviceClass as invalid"), "{said}");
    assert!(!said.contains("FAIL"), "no guarantee is judged: {said}");
}

/// A driver that dies mid-run is named in the verdicts it fails, with its exit status and its
/// log, and on stderr: not left for the reader to guess from a wait that ran out.
#[test]
fn a_driver_that_dies_is_named_in_its_verdicts() {
    let tmp = tempfile::tempdir().unwrap();
    let out = xtask(
        &[
            "conformance",
            "--fault",
            "exit-on-prepare",
            "--profile",
            "shared-by-memory",
            "--only",
            "workload.sees-devices",
            "--nodes",
            "1",
            "--node-kind",
            "emulated",
            "--out",
            tmp.path().to_str().unwrap(),
        ],
        &[("TMPDIR", tmp.path().to_str().unwrap())],
    );
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("the driver process on node-1 exited on its own (exit status: 1)"), "{said}");
    let file = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("a result");
    let result: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let g = &result["profiles"][0]["guarantees"][0];
    assert_eq!((g["id"].as_str(), g["verdict"].as_str()), (Some("workload.sees-devices"), Some("fail")), "{g}");
    assert!(g["reason"].as_str().unwrap().contains("exited on its own"), "{g}");
    let logs: Vec<&str> = g["evidence"].as_array().unwrap().iter().filter_map(|e| e["body"].as_str()).collect();
    assert!(logs.iter().any(|b| b.contains("fault exit-on-prepare, exiting")), "the driver's last words: {logs:?}");
}

/// A driver that offers only v1beta1.DRAPlugin registers with the v1.37 kubelet: it passes
/// `plugin.registration.info`, fails only the advice to offer v1 (`should`), and the run exits
/// 0, or 1 with `--strict`.
#[test]
fn a_failed_should_is_advice_unless_strict() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |strict: bool| {
        let mut args = vec!["conformance", "--fault", "register-v1beta1-only", "--only", "plugin.registration.*"];
        args.extend(["--nodes", "1", "--node-kind", "emulated", "--out", tmp.path().to_str().unwrap()]);
        if strict {
            args.push("--strict");
        }
        xtask(&args, &[("TMPDIR", tmp.path().to_str().unwrap())])
    };
    let lenient = run(false);
    let said = text(&lenient);
    assert_eq!(lenient.status.code(), Some(0), "{said}");
    assert!(said.contains("PASS  driver               plugin.registration.info"), "{said}");
    assert!(said.contains("WARN  driver               plugin.registration.v1"), "{said}");
    assert!(said.contains("1 of them should-level advice"), "{said}");
    let strict = run(true);
    assert_eq!(strict.status.code(), Some(1), "{}", text(&strict));
}

#[test]
fn conformance_writes_a_result_and_a_summary() {
    // As a CI job runs it: no --out, the results go to $ARTIFACTS, the Markdown summary is
    // appended to what earlier steps left in $GITHUB_STEP_SUMMARY.
    let out_dir = tempfile::tempdir().unwrap();
    let summary = out_dir.path().join("step-summary.md");
    std::fs::write(&summary, "## an earlier step\n").unwrap();
    let out = xtask(
        &["conformance", "--only", "plugin.registration.*", "--only", "versions.*", "--nodes", "1"],
        &[("ARTIFACTS", out_dir.path().to_str().unwrap()), ("GITHUB_STEP_SUMMARY", summary.to_str().unwrap())],
    );
    assert!(out.status.success(), "{}", text(&out));
    let summary = std::fs::read_to_string(&summary).unwrap();
    assert!(summary.starts_with("## an earlier step\n"), "the summary is appended to: {summary}");
    assert!(summary.contains("plugin.registration.info") && summary.contains("versions.kubernetes"), "{summary}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("PASS  driver               plugin.registration.info"), "{stdout}");
    assert!(stdout.contains("versions.kubernetes"), "{stdout}");
    let files: Vec<_> = std::fs::read_dir(out_dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    assert_eq!(files.len(), 1, "one JSON result: {files:?}");
    for f in dracheck_report::Format::ALL {
        assert!(f.beside(&files[0]).is_file(), "{f:?} is rendered next to the result");
    }
    let junit = dracheck_report::Format::Junit.beside(&files[0]);
    let name = junit.file_name().unwrap().to_string_lossy();
    assert!(name.starts_with("junit_") && name.ends_with(".xml"), "CI systems collect junit_*.xml: {name}");
    let result: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    assert_eq!(result["schema_version"], 1);
    assert_eq!(result["cluster"]["provider"], "local");
    assert_eq!(result["driver"]["name"], "gpu.mock.dracheck.io");
    let ids: Vec<&str> =
        result["profiles"][0]["guarantees"].as_array().unwrap().iter().map(|g| g["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["versions.kubernetes", "versions.driver"], "--only selects the guarantees");
}

#[test]
fn conformance_against_an_existing_cluster_skips_what_needs_node_control() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let state_s = state.to_str().unwrap();
    let up = xtask(&["cluster", "up", "--state-dir", state_s, "--nodes", "2", "--driver", "mock"], &[]);
    assert!(up.status.success(), "{}", text(&up));
    let kubeconfig = state.join("admin.kubeconfig");
    let out_dir = tmp.path().join("out");
    let run = conformance_on(
        &kubeconfig,
        &[
            "--context",
            "dracheck-local",
            "--profile",
            "standard-inference",
            "--only",
            "claim.compatible.*",
            "--only",
            "driver.restart.*",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    // An unreachable apiserver: the same kubeconfig aimed at a closed port.
    let dead = tmp.path().join("dead.kubeconfig");
    let text_kc = std::fs::read_to_string(&kubeconfig).unwrap();
    let server = text_kc
        .lines()
        .find(|l| l.trim_start().starts_with("server:"))
        .unwrap()
        .trim()
        .trim_start_matches("server:")
        .trim()
        .to_string();
    std::fs::write(&dead, text_kc.replace(&server, "https://127.0.0.1:1")).unwrap();
    let unreachable = xtask(&["conformance", "--cluster", "kubeconfig", "--kubeconfig", dead.to_str().unwrap()], &[]);
    // No NVIDIA driver is installed there.
    let no_nvidia = xtask(
        &["conformance", "--driver", "nvidia", "--cluster", "kubeconfig", "--kubeconfig", kubeconfig.to_str().unwrap()],
        &[],
    );
    let down = xtask(&["cluster", "down", "--state-dir", state_s], &[]);
    assert!(down.status.success(), "{}", text(&down));

    assert!(run.status.success(), "{}", text(&run));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(stdout.contains("PASS  standard-inference   claim.compatible.allocated"), "{stdout}");
    assert!(
        stdout.contains("skip  standard-inference   driver.restart.slices-kept")
            && stdout.contains("--driver-pods LABEL-SELECTOR"),
        "{stdout}"
    );
    assert_eq!(unreachable.status.code(), Some(3), "{}", text(&unreachable));
    assert!(text(&unreachable).contains("cannot be reached"), "{}", text(&unreachable));
    assert_eq!(no_nvidia.status.code(), Some(3), "{}", text(&no_nvidia));
    assert!(text(&no_nvidia).contains("gpu.nvidia.com publishes no ResourceSlices"), "{}", text(&no_nvidia));
}

#[test]
fn kind_and_k3s_need_a_docker_daemon() {
    if let Ok(version) = dracheck_clusters::kind::docker_daemon() {
        eprintln!("skipped: a Docker daemon ({version}) answers here, so --cluster kind does not stop for its absence");
        return;
    }
    for provider in ["kind", "k3s"] {
        let out = xtask(&["conformance", "--cluster", provider], &[]);
        assert_eq!(out.status.code(), Some(3), "{provider}: {}", text(&out));
        assert!(text(&out).contains("Docker") && text(&out).contains("--cluster local"), "{}", text(&out));
    }
}

#[test]
fn kind_config_is_dra_ready() {
    let out = xtask(&["cluster", "kind-config", "--feature-gates", "DRAAdminAccess=true", "--workers", "1"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let config = String::from_utf8_lossy(&out.stdout);
    assert!(config.contains("DRAAdminAccess: true") && config.contains("enable_cdi = true"), "{config}");
    let bad = xtask(&["cluster", "kind-config", "--k8s-version", "1.99"], &[]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
}

/// The mock's own flags for a node, as `--driver-arg`s (its inventory and name aside).
const MOCK_ARGS: [&str; 5] = [
    "--driver-arg=--node-name={node}",
    "--driver-arg=--kubeconfig={kubeconfig}",
    "--driver-arg=--registrar-dir={registrar-dir}",
    "--driver-arg=--plugin-dir={plugin-dir}",
    "--driver-arg=--cdi-dir={cdi-dir}",
];

/// `--driver-bin` runs any plugin binary with the command line its `--driver-arg`s give, here
/// the mock's own flags: the plugin tier works without an oracle, which it says.
#[test]
fn a_driver_binary_runs_with_its_own_command_line() {
    let out_dir = tempfile::tempdir().unwrap();
    let bin = common::mock_driver();
    assert!(bin.is_file(), "the mock driver is built next to xtask: {}", bin.display());
    let inventory = concat!(env!("CARGO_MANIFEST_DIR"), "/../drivers/mock/inventory/default.yaml");
    let profile = concat!(env!("CARGO_MANIFEST_DIR"), "/../profiles/mock/standard-inference.yaml");
    let inventory_arg = format!("--driver-arg=--inventory={inventory}");
    let out = xtask(
        &[
            "conformance",
            "--driver-bin",
            bin.to_str().unwrap(),
            "--driver-name",
            "gpu.mock.dracheck.io",
            "--driver-arg=--driver-name=gpu.mock.dracheck.io",
            MOCK_ARGS[0],
            MOCK_ARGS[1],
            &inventory_arg,
            MOCK_ARGS[2],
            MOCK_ARGS[3],
            MOCK_ARGS[4],
            "--profile",
            profile,
            "--only",
            "plugin.slices.*",
            "--only",
            "plugin.prepare.allocated-claim",
            "--only",
            "versions.driver",
            "--nodes",
            "1",
            "--out",
            out_dir.path().to_str().unwrap(),
        ],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", text(&out));
    assert!(stdout.contains("PASS  driver               plugin.prepare.allocated-claim"), "{stdout}");
    assert!(stdout.contains("PASS  driver               plugin.slices.owned-by-node"), "{stdout}");
    assert!(stdout.contains("skip  driver               plugin.slices.match-inventory"), "{stdout}");
    assert!(stdout.contains("no inventory oracle"), "{stdout}");
    assert!(stdout.contains("--driver-version"), "versions.driver is skipped without a version: {stdout}");
}

/// A plugin that registers under another name than `--driver-name` says is named at once, and
/// one that never registers within the bounded wait; both with the driver's log and nothing
/// left running.
#[test]
fn a_misnamed_or_silent_plugin_is_named_within_a_bounded_time() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = common::mock_driver();
    let inventory = tmp.path().join("inventory.yaml");
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/../drivers/mock/inventory/default.yaml"), &inventory).unwrap();
    let shipped =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../profiles/mock/standard-inference.yaml"))
            .unwrap();
    let profile = tmp.path().join("acme.yaml");
    std::fs::write(&profile, shipped.replace("gpu.mock.dracheck.io", "gpu.acme.com")).unwrap();
    let (profile, out_dir) = (profile.to_str().unwrap(), tmp.path().to_str().unwrap());
    let inventory_arg = format!("--driver-arg=--inventory={}", inventory.display());
    // One node is enough to be refused: node removal (which needs a second) is left out.
    let common = [
        "--driver-name",
        "gpu.acme.com",
        "--profile",
        profile,
        "--nodes",
        "1",
        "--skip",
        "node.removal.*",
        "--out",
        out_dir,
    ];

    // The mock registers as gpu.mock.dracheck.io whatever --driver-name says.
    let mut misnamed = vec!["conformance", "--driver-bin", bin.to_str().unwrap()];
    misnamed.extend(MOCK_ARGS);
    misnamed.push(&inventory_arg);
    misnamed.extend(common);
    let begun = std::time::Instant::now();
    let out = xtask(&misnamed, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains(r#"as ["gpu.mock.dracheck.io"], not as gpu.acme.com"#), "{}", text(&out));
    assert!(text(&out).contains("--driver-name"), "the message names the fix: {}", text(&out));
    assert!(begun.elapsed() < std::time::Duration::from_secs(50), "named before the slice wait ends");
    assert_eq!(processes_mentioning(tmp.path()), Vec::<String>::new(), "nothing survives the refusal");

    // A program that is no kubelet plugin and exits is named at once.
    let mut exits = vec!["conformance", "--driver-bin", "/bin/false"];
    exits.extend(common);
    let out = xtask(&exits, &[]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("exited (exit status: 1) before it published"), "{}", text(&out));

    // One that stays up but never registers: the wait for its slices ends, the shell and its
    // sleep are stopped.
    let marker = format!("--driver-arg={}/never-a-plugin", tmp.path().display());
    let mut silent =
        vec!["conformance", "--driver-bin", "/bin/sh", "--driver-arg=-c", "--driver-arg=sleep 3600", &marker];
    silent.extend(common);
    let out = xtask(&silent, &[]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("published no ResourceSlice"), "{}", text(&out));
    assert!(text(&out).contains("within 60s"), "{}", text(&out));
    // It says where the kubelet looked, that the shell wrote nothing, and what to fix.
    assert!(text(&out).contains("no registration socket appeared in "), "{}", text(&out));
    assert!(text(&out).contains("/nodes/node-1/plugins_registry"), "{}", text(&out));
    assert!(text(&out).contains("no dra.sock appeared in "), "{}", text(&out));
    assert!(text(&out).contains(".log is empty"), "{}", text(&out));
    assert!(text(&out).contains("--driver-arg points it at the node's dirs"), "{}", text(&out));
    assert_eq!(processes_mentioning(tmp.path()), Vec::<String>::new(), "the silent plugin was stopped");
}

/// `cluster up` with real nodes: the upstream kubelet and containerd run the node, the mock
/// registers with that kubelet and publishes, and `down` leaves no process, cgroup or mount.
#[test]
fn cluster_up_with_real_nodes_and_down_leaves_nothing() {
    if let Err(reason) = dracheck_clusters::local::real::host::check_support() {
        eprintln!("skipped: real nodes cannot run here ({reason})");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let state_s = state.to_str().unwrap();
    // `cluster up` detaches its cluster, so no reap would ever take it: a failed assertion
    // below still brings it down.
    struct DownOnDrop<'a>(&'a str);
    impl Drop for DownOnDrop<'_> {
        fn drop(&mut self) {
            if std::thread::panicking() {
                xtask(&["cluster", "down", "--state-dir", self.0], &[]);
            }
        }
    }
    let _down = DownOnDrop(state_s);
    let up = xtask(
        &["cluster", "up", "--state-dir", state_s, "--nodes", "1", "--driver", "mock", "--node-kind", "real"],
        &[],
    );
    assert!(up.status.success(), "{}", text(&up));
    assert!(text(&up).contains("starting 1 real node(s)"), "{}", text(&up));
    let kubeconfig = String::from_utf8_lossy(&up.stdout).lines().last().unwrap_or_default().to_string();
    let ours = |name: &str| processes_mentioning(&state).iter().any(|p| p.contains(name));
    assert!(ours("bin/kubelet") && ours("bin/containerd"), "{:?}", processes_mentioning(&state));

    let rt = tokio::runtime::Runtime::new().unwrap();
    let (runtime_version, slices) = rt.block_on(async {
        let client = dracheck_clusters::local::client_for(Path::new(&kubeconfig), None).await.unwrap();
        let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
        let node = nodes.get("node-1").await.unwrap();
        let version = node.status.and_then(|s| s.node_info).map(|i| i.container_runtime_version).unwrap_or_default();
        let slices: kube::Api<k8s_openapi::api::resource::v1::ResourceSlice> = kube::Api::all(client);
        (version, slices.list(&Default::default()).await.unwrap().items.len())
    });
    assert!(runtime_version.starts_with("containerd://2."), "the node runs containerd: {runtime_version:?}");
    assert_eq!(slices, 2, "the mock registered with the real kubelet and published its pool: devices and counters");

    let prefix = dracheck_clusters::local::real::kubelet::cluster_prefix(&state);
    let down = xtask(&["cluster", "down", "--state-dir", state_s], &[]);
    assert!(down.status.success(), "{}", text(&down));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !processes_mentioning(&state).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(processes_mentioning(&state), Vec::<String>::new(), "nothing of the node survives `down`");
    let cgroups = dracheck_clusters::local::real::host::Cgroups::detect().unwrap();
    assert_eq!(cgroups.named_with_prefix(&prefix), Vec::<String>::new(), "the node's cgroups are removed");
    assert!(dracheck_clusters::local::real::host::mounts_under(&state).is_empty(), "no mount is left");
}

#[test]
fn profile_validate_checks_types_semantics_and_cel_without_a_cluster() {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles/mock/standard-inference.yaml");
    let good = xtask(&["profile", "validate", shipped.to_str().unwrap()], &[]);
    assert_eq!(good.status.code(), Some(0), "{}", text(&good));
    assert!(text(&good).contains("valid") && text(&good).contains("drivers.coexist"), "{}", text(&good));

    // A selector that does not compile: a platform team learns it before any cluster does.
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.yaml");
    let yaml = std::fs::read_to_string(&shipped).unwrap().replace(r#"model == "l4""#, r#"model == "l4" &&"#);
    std::fs::write(&broken, yaml).unwrap();
    let bad = xtask(&["profile", "validate", shipped.to_str().unwrap(), broken.to_str().unwrap()], &[]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    let out = text(&bad);
    assert!(out.contains("invalid") && out.contains("broken.yaml") && out.contains("cel.expression"), "{out}");
    assert!(out.contains("1 of 2 profile(s) invalid"), "{out}");
    assert!(!out.contains("starting etcd"), "validate started a cluster: {out}");
}

/// `list` names every guarantee a profile can publish and the driver contract's, each once,
/// with its family, meaning and needs; `-o json` holds the same.
#[test]
fn list_shows_every_guarantee_with_its_family_and_needs() {
    let out = xtask(&["list"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    let row = |id: &str| table.lines().find(|l| l.split_whitespace().next() == Some(id)).map(str::to_string);
    for id in dracheck_suites::profile::family::all_ids() {
        let family = dracheck_suites::profile::family::of(id).unwrap().key;
        let line = row(id).unwrap_or_else(|| panic!("{id} is not listed: {table}"));
        assert_eq!(line.split_whitespace().nth(1), Some(family), "{line}");
    }
    let plugin = row("plugin.prepare.keyed-by-uid").expect("the driver contract is listed");
    assert!(plugin.contains("(driver)"), "{plugin}");
    assert!(table.contains("needs: control over the nodes"), "node scenarios name their need: {table}");

    let out = xtask(&["list", "-o", "json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let entries: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("JSON");
    let ids: Vec<&str> = entries.iter().map(|e| e["id"].as_str().unwrap()).collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "each guarantee once: {ids:?}");
    assert!(entries.iter().all(|e| !e["meaning"].as_str().unwrap().is_empty()));
    let reboot = entries.iter().find(|e| e["id"] == "node.reboot.workloads-resume").unwrap();
    assert_eq!(reboot["family"], "nodeReboot");
    assert_eq!(reboot["scenario"], "node-reboot");
}

/// `--dry-run` checks the input as a run does and prints the plan, starting nothing: on the
/// local cluster every scenario runs; on an existing cluster with an installed driver the
/// plugin tier (but its slice checks) and the node disruptions are skipped, each with its
/// reason; bad input is refused with its exit code.
#[test]
fn a_dry_run_prints_the_plan_and_starts_nothing() {
    let begun = std::time::Instant::now();
    let out = xtask(&["conformance", "--dry-run", "--skip", "node.removal.*"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(plan.contains("profile standard-inference"), "{plan}");
    assert!(plan.contains("run   node-reboot"), "{plan}");
    assert!(!plan.contains("skip  "), "the local cluster allows every scenario: {plan}");
    assert!(!plan.contains("node-removal"), "--skip is applied: {plan}");
    assert!(begun.elapsed() < std::time::Duration::from_secs(20), "no cluster starts");

    let out = xtask(&["conformance", "--dry-run", "--driver", "nvidia", "--cluster", "kubeconfig"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(plan.contains("run   plugin-slices"), "an installed driver's slices are read: {plan}");
    assert!(plan.contains("skip  plugin-prepare"), "{plan}");
    assert!(plan.contains(dracheck_suites::engine::target::NEEDS_DRIVER_PODS), "{plan}");

    let out = xtask(&["conformance", "--dry-run", "--cluster", "elsewhere"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("known are `local`"), "{}", text(&out));
}
