//! What a run leaves when it cannot clean up, and who removes it: a run killed with SIGKILL
//! is reaped by the next one; a kept cluster stays whole (nodes and drivers) until `cluster
//! down`; a failed start keeps the logs its message quotes; `cleanup` removes from a cluster
//! exactly the objects of runs that are gone. Every test gives its commands a `TMPDIR` of
//! its own, so that none of them reaps or leaves anything in the real temp dir.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{processes_mentioning, text, xtask_env as xtask};
use dracheck_clusters::local::ClusterInfo;
use dracheck_clusters::local::owner::{Owner, OwnerProcess, RunOwner};

/// The local state dirs (`dracheck-*` holding a `cluster.json`) directly under `tmp`.
fn state_dirs(tmp: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("dracheck-"))
        .filter(|p| p.join("cluster.json").is_file())
        .collect();
    dirs.sort();
    dirs
}

/// Whether a driver was started on a node of the cluster in `dir`.
fn has_driver_log(dir: &Path) -> bool {
    std::fs::read_dir(dir.join("nodes/node-1"))
        .is_ok_and(|entries| entries.flatten().any(|e| e.file_name().to_string_lossy().starts_with("driver-")))
}

/// Stops every local cluster recorded under `root` (a test's temp dir) when dropped, so that
/// a test that fails halfway leaves no processes behind either.
struct Teardown<'a>(&'a Path);

impl Drop for Teardown<'_> {
    fn drop(&mut self) {
        for dir in state_dirs(self.0).into_iter().chain([self.0.join("state")]) {
            if dir.join("cluster.json").is_file() {
                let _ = dracheck_clusters::local::stop_recorded(&dir);
            }
        }
    }
}

fn ended_process() -> OwnerProcess {
    let mut child = Command::new("/bin/true").spawn().unwrap();
    let pid = child.id();
    let start_ticks = dracheck_clusters::local::process::proc_stat(pid).map_or(1, |s| s.start_ticks);
    child.wait().unwrap();
    OwnerProcess { pid, start_ticks }
}

/// A run whose one scenario waits on a prepare that never answers (hang-prepare), so that it
/// is still going whenever it is stopped; returned once its cluster and driver are up, with
/// its state dir. Its stderr goes to `stderr` in `tmp`.
fn start_hanging_run(tmp: &Path) -> (std::process::Child, PathBuf) {
    let out_dir = tmp.join("out");
    let stderr = std::fs::File::create(tmp.join("stderr")).unwrap();
    let mut run = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["conformance", "--fault", "hang-prepare", "--only", "workload.sees-devices", "--nodes", "1"])
        .arg("--out")
        .arg(&out_dir)
        .env("TMPDIR", tmp)
        .env(dracheck_mock_driver::adapter::PROGRAM_ENV, common::mock_driver())
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    let dir = loop {
        if let Some(dir) = state_dirs(tmp).into_iter().find(|d| has_driver_log(d)) {
            break dir;
        }
        assert!(run.try_wait().unwrap().is_none(), "the run ended before it could be stopped");
        assert!(Instant::now() < deadline, "the run's cluster and driver never came up");
        std::thread::sleep(Duration::from_millis(200));
    };
    (run, dir)
}

/// The pid of the reaper a run started beside itself for its state dir `dir`.
fn reaper_of(dir: &Path) -> u32 {
    let found: Vec<String> = processes_mentioning(dir).into_iter().filter(|p| p.contains("reap-when-gone")).collect();
    let [line] = found.as_slice() else { panic!("one reaper for {}: {found:?}", dir.display()) };
    line.split(':').next().unwrap().parse().unwrap()
}

/// SIGKILL leaves the run no way to clean up; its reaper, in a session of its own, stops
/// everything the run started and removes its state dir within seconds, with no further run.
#[test]
fn a_sigkilled_run_is_reaped_by_its_reaper_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let _teardown = Teardown(tmp.path());
    let (mut run, dir) = start_hanging_run(tmp.path());
    let info = ClusterInfo::load(&dir).unwrap();
    reaper_of(&dir); // There is one, watching.
    run.kill().unwrap(); // SIGKILL: no teardown runs.
    run.wait().unwrap();
    let killed = Instant::now();
    while (dir.exists() || !processes_mentioning(tmp.path()).is_empty()) && killed.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = killed.elapsed();
    eprintln!("the reaper cleaned up {:.1} s after the SIGKILL", took.as_secs_f64());
    assert!(!dir.exists(), "the reaper removed the state dir within 30 s");
    for p in &info.processes {
        assert!(!p.is_alive(), "{} (pid {}) of the killed run still runs", p.name, p.pid);
    }
    assert_eq!(processes_mentioning(tmp.path()), Vec::<String>::new(), "no driver, and no reaper, is left");
    assert!(took < Duration::from_secs(15), "took {took:?}");
}

/// A whole process tree SIGKILLed takes the reaper along: the next run reaps what is left.
#[test]
fn a_run_killed_with_its_reaper_is_reaped_by_the_next_run() {
    let tmp = tempfile::tempdir().unwrap();
    let _teardown = Teardown(tmp.path());
    let tmpdir = tmp.path().to_str().unwrap();
    let out_dir = tmp.path().join("out");
    let out_dir = out_dir.to_str().unwrap();
    let (mut first, dir) = start_hanging_run(tmp.path());
    let info = ClusterInfo::load(&dir).unwrap();
    assert!(matches!(info.owner, Owner::Process(p) if p.pid == first.id()), "the run owns its state: {info:?}");
    // SAFETY: a pid read from /proc a moment ago, of a process this test's run started.
    assert_eq!(unsafe { libc::kill(reaper_of(&dir) as i32, libc::SIGKILL) }, 0);
    first.kill().unwrap(); // SIGKILL: no teardown runs.
    first.wait().unwrap();
    assert!(dir.exists(), "a killed run cannot remove its own state dir");

    let second = xtask(
        &["conformance", "--only", "versions.kubernetes", "--nodes", "1", "--out", out_dir],
        &[("TMPDIR", tmpdir)],
    );

    assert!(second.status.success(), "{}", text(&second));
    let said = format!("removed the state dir {} of a run that is gone (pid {})", dir.display(), first.id());
    assert!(text(&second).contains(&said), "the second run says what it removed: {}", text(&second));
    assert!(!dir.exists(), "the first run's state dir is gone");
    for p in &info.processes {
        assert!(!p.is_alive(), "{} (pid {}) of the killed run still runs", p.name, p.pid);
    }
    assert_eq!(state_dirs(tmp.path()), Vec::<PathBuf>::new(), "neither run left a state dir");
    assert_eq!(processes_mentioning(tmp.path()), Vec::<String>::new(), "no driver of either run survives");
}

/// SIGTERM, what CI cancellation, `timeout` and a Job's deletion send, ends a run as Ctrl-C
/// does: it says so, stops every process it started and removes its state dir, at once.
#[test]
fn a_sigtermed_run_stops_everything_it_started() {
    let tmp = tempfile::tempdir().unwrap();
    let _teardown = Teardown(tmp.path());
    let (mut run, dir) = start_hanging_run(tmp.path());
    let info = ClusterInfo::load(&dir).unwrap();
    // SAFETY: the pid of a child this test started and has not waited for.
    assert_eq!(unsafe { libc::kill(run.id() as i32, libc::SIGTERM) }, 0);
    let sent = Instant::now();
    let status = loop {
        if let Some(status) = run.try_wait().unwrap() {
            break status;
        }
        assert!(sent.elapsed() < Duration::from_secs(60), "the run still runs 60 s after SIGTERM");
        std::thread::sleep(Duration::from_millis(100));
    };
    let said = std::fs::read_to_string(tmp.path().join("stderr")).unwrap();
    assert_eq!(status.code(), Some(130), "{said}");
    assert!(said.contains("interrupted (SIGTERM)"), "the run says why it ended: {said}");
    assert!(!dir.exists(), "the run removed its state dir");
    for p in &info.processes {
        assert!(!p.is_alive(), "{} (pid {}) outlived the run", p.name, p.pid);
    }
    assert_eq!(processes_mentioning(tmp.path()), Vec::<String>::new(), "no driver outlives the run");
}

#[test]
fn a_kept_run_keeps_its_nodes_and_drivers_until_down() {
    let tmp = tempfile::tempdir().unwrap();
    let _teardown = Teardown(tmp.path());
    let tmpdir = tmp.path().to_str().unwrap();
    let out_dir = tmp.path().join("out");
    let out = xtask(
        &[
            "conformance",
            "--keep-cluster",
            "--only",
            "versions.kubernetes",
            "--nodes",
            "1",
            "--out",
            out_dir.to_str().unwrap(),
        ],
        &[("TMPDIR", tmpdir)],
    );
    assert!(out.status.success(), "{}", text(&out));
    let [dir] = state_dirs(tmp.path())
        .try_into()
        .unwrap_or_else(|found| panic!("one kept state dir, found {found:?}; the run said:\n{}", text(&out)));
    let down_cmd = format!("stop it with `cargo xtask cluster down --state-dir {}`", dir.display());
    assert!(text(&out).contains(&down_cmd), "the run says how to stop the cluster: {}", text(&out));

    let info = ClusterInfo::load(&dir).unwrap();
    assert_eq!(info.owner, Owner::Detached, "a kept cluster is nobody's run: no later run reaps it");
    let agent = info.processes.iter().find(|p| p.name == "node-agent").expect("a node agent runs the nodes");
    assert!(agent.is_alive(), "the node agent outlives the run");
    assert!(!processes_mentioning(&dir.join("nodes/node-1")).is_empty(), "node-1's driver runs on");
    let slices = tokio::runtime::Runtime::new().unwrap().block_on(async {
        use k8s_openapi::api::resource::v1::ResourceSlice;
        let client = dracheck_clusters::local::client_for(&info.kubeconfig, None).await.unwrap();
        let api: kube::Api<ResourceSlice> = kube::Api::all(client);
        let lp = kube::api::ListParams::default().fields("spec.nodeName=node-1");
        api.list(&lp).await.unwrap().items.len()
    });
    assert!(slices > 0, "node-1's driver publishes its devices");

    let stale = xtask(&["cluster", "down", "--stale"], &[("TMPDIR", tmpdir)]);
    assert!(stale.status.success(), "{}", text(&stale));
    assert!(dir.exists(), "the kept cluster is not stale: {}", text(&stale));

    let down = xtask(&["cluster", "down", "--state-dir", dir.to_str().unwrap()], &[("TMPDIR", tmpdir)]);
    assert!(down.status.success(), "{}", text(&down));
    assert!(text(&down).contains("stopped its 5 processes"), "{}", text(&down));
    assert!(!dir.exists());
    for p in &info.processes {
        assert!(!p.is_alive(), "{} (pid {}) survived `down`", p.name, p.pid);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_mentioning(tmp.path()).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(processes_mentioning(tmp.path()), Vec::<String>::new(), "no driver survives `down`");
}

#[test]
fn a_failed_start_names_logs_that_outlive_its_state_dir() {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = tempfile::tempdir().unwrap();
    let bins = tmp.path().join("bins");
    std::fs::create_dir(&bins).unwrap();
    for (name, script) in [
        ("etcd", "echo 'etcd: the data dir is on fire' >&2; exit 1"),
        ("kube-apiserver", "echo Kubernetes v1.37.2"),
        ("kube-scheduler", "exit 1"),
        ("kube-controller-manager", "exit 1"),
    ] {
        let path = bins.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let state = tmp.path().join("state");
    let out = xtask(
        &["cluster", "up", "--state-dir", state.to_str().unwrap(), "--k8s-bin-dir", bins.to_str().unwrap()],
        &[("TMPDIR", tmp.path().to_str().unwrap())],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("etcd exited during start-up"), "{}", text(&out));
    assert!(!state.exists(), "the failed start removed its state dir");
    let log =
        text(&out).split("its log is ").nth(1).and_then(|r| r.split(". Its last lines").next()).map(PathBuf::from);
    let log = log.unwrap_or_else(|| panic!("the message names the log: {}", text(&out)));
    let kept = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    assert!(kept.contains("the data dir is on fire"), "the named log is etcd's: {kept}");
    assert!(log.starts_with(tmp.path()), "kept in the temp dir: {}", log.display());
}

#[test]
fn cleanup_removes_only_the_objects_of_runs_that_are_gone() {
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::api::resource::v1::DeviceClass;
    use kube::api::{Api, ObjectMeta, PostParams};

    let tmp = tempfile::tempdir().unwrap();
    let _teardown = Teardown(tmp.path());
    let tmpdir = tmp.path().to_str().unwrap();
    let state = tmp.path().join("state");
    let state_s = state.to_str().unwrap();
    let up = xtask(&["cluster", "up", "--state-dir", state_s], &[("TMPDIR", tmpdir)]);
    assert!(up.status.success(), "{}", text(&up));
    let kubeconfig = String::from_utf8_lossy(&up.stdout).lines().last().unwrap_or_default().to_string();

    let live = RunOwner::current();
    let gone = RunOwner { process: ended_process(), ..live.clone() };
    let meta = |name: &str, run: &str, owner: Option<&RunOwner>| ObjectMeta {
        name: Some(name.into()),
        labels: Some([("dracheck.io/run".to_string(), run.to_string())].into()),
        annotations: owner.map(RunOwner::annotations),
        ..ObjectMeta::default()
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(async {
        let client = dracheck_clusters::local::client_for(Path::new(&kubeconfig), None).await.unwrap();
        let nss: Api<Namespace> = Api::all(client.clone());
        for (name, run, owner) in [
            ("dracheck-gone-aaaaaa", "aaaaaa", Some(&gone)),
            ("dracheck-live-bbbbbb", "bbbbbb", Some(&live)),
            ("dracheck-old-cccccc", "cccccc", None),
        ] {
            let ns = Namespace { metadata: meta(name, run, owner), ..Namespace::default() };
            nss.create(&PostParams::default(), &ns).await.unwrap();
        }
        let classes: Api<DeviceClass> = Api::all(client.clone());
        let class = DeviceClass { metadata: meta("gone.dracheck.io", "aaaaaa", Some(&gone)), ..DeviceClass::default() };
        classes.create(&PostParams::default(), &class).await.unwrap();
        client
    });

    let out = xtask(&["cleanup", "--kubeconfig", &kubeconfig], &[("TMPDIR", tmpdir)]);

    assert!(out.status.success(), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains(&format!("removed Namespace dracheck-gone-aaaaaa (run aaaaaa): its run ({gone}) is gone")),
        "{t}"
    );
    assert!(t.contains(&format!("removed DeviceClass gone.dracheck.io (run aaaaaa): its run ({gone}) is gone")), "{t}");
    assert!(
        t.contains(&format!("Namespace dracheck-live-bbbbbb (run bbbbbb): kept: its run ({live}) is still running")),
        "{t}"
    );
    assert!(t.contains("Namespace dracheck-old-cccccc (run cccccc): kept: no owner on record"), "{t}");
    let (gone_ns, live_ns, class) = rt.block_on(async {
        let nss: Api<Namespace> = Api::all(client.clone());
        let classes: Api<DeviceClass> = Api::all(client.clone());
        (
            nss.get_opt("dracheck-gone-aaaaaa").await.unwrap(),
            nss.get_opt("dracheck-live-bbbbbb").await.unwrap(),
            classes.get_opt("gone.dracheck.io").await.unwrap(),
        )
    });
    assert!(gone_ns.is_none_or(|n| n.metadata.deletion_timestamp.is_some()), "the dead run's namespace goes");
    assert!(live_ns.unwrap().metadata.deletion_timestamp.is_none(), "the live run's namespace stays");
    assert!(class.is_none(), "the dead run's DeviceClass is gone");

    let down = xtask(&["cluster", "down", "--state-dir", state_s], &[("TMPDIR", tmpdir)]);
    assert!(down.status.success(), "{}", text(&down));
}
