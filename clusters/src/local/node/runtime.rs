//! The container runtime of an emulated node: each container's command runs as a host process
//! in its own process group, with the pod's env and the CDI env edits, its output in a log
//! file that the kubelet log endpoint serves. It outlives a kubelet restart, as containerd
//! does on a real node. Like containerd, it resolves a container's CDI devices each time it
//! creates the container, a restart included: a spec that is gone by then fails the restart.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;

use crate::local::process::{Lifetime, Supervised};

/// The `PATH` of a container whose pod sets none (containerd's default), and of a driver's
/// kubelet plugin, which a DaemonSet pod runs.
pub(crate) const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Running {
        started_at: Timestamp,
    },
    /// Not running and not created again yet (a restart whose creation failed), with the
    /// runtime's reason and message.
    Waiting {
        reason: String,
        message: String,
    },
    Terminated {
        exit_code: i32,
        started_at: Timestamp,
        finished_at: Timestamp,
    },
}

#[derive(Debug, Clone)]
pub struct ContainerStatus {
    pub name: String,
    pub state: State,
    pub restart_count: i32,
    /// Set when the container ran before and was restarted.
    pub last_exit_code: Option<i32>,
}

/// What to run: argv, env, the CDI devices whose env edits it gets.
#[derive(Debug, Clone)]
pub struct ContainerSpec {
    pub name: String,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Fully qualified CDI device IDs, resolved against the node's CDI dir at each creation.
    pub cdi_devices: Vec<String>,
}

struct Container {
    spec: ContainerSpec,
    process: Supervised,
    started_at: Timestamp,
    finished_at: Option<Timestamp>,
    /// When the runtime noticed the exit, for the restart back-off.
    exited_at: Option<Instant>,
    restart_count: i32,
    last_exit_code: Option<i32>,
    /// What the last poll saw.
    last_status: Option<ContainerStatus>,
}

impl Container {
    fn new(spec: ContainerSpec, process: Supervised) -> Container {
        Container {
            spec,
            process,
            started_at: dracheck_objects::now(),
            finished_at: None,
            exited_at: None,
            restart_count: 0,
            last_exit_code: None,
            last_status: None,
        }
    }

    /// The exit code once it ended for good (no restart follows), as the last poll saw it.
    fn exit(&self) -> Option<i32> {
        match self.last_status.as_ref()?.state {
            State::Terminated { exit_code, .. } => Some(exit_code),
            State::Running { .. } | State::Waiting { .. } => None,
        }
    }

    fn running(&self) -> ContainerStatus {
        ContainerStatus {
            name: self.spec.name.clone(),
            state: State::Running { started_at: self.started_at },
            restart_count: self.restart_count,
            last_exit_code: self.last_exit_code,
        }
    }
}

/// A pod's containers. Its init containers run one after the other, each to its successful
/// end, before the others start, as kubelet runs them.
struct PodRun {
    /// Init containers not created yet, in order.
    init_pending: VecDeque<ContainerSpec>,
    /// Init containers created: all but the last have completed.
    init: Vec<Container>,
    /// The other containers, created once every init container has completed.
    specs: Vec<ContainerSpec>,
    containers: Vec<Container>,
}

impl PodRun {
    /// The exit code of an init container that failed for good (the pod's `restartPolicy` is
    /// `Never`): nothing more runs.
    fn init_failed(&self) -> Option<i32> {
        self.init.last()?.exit().filter(|code| *code != 0)
    }
}

/// The reason a container waits while the pod's init containers run.
pub const POD_INITIALIZING: &str = "PodInitializing";

pub struct Runtime {
    pods_dir: PathBuf,
    cdi_dir: PathBuf,
    /// The second restart's delay, doubled for each one after it.
    restart_backoff: Duration,
    pods: Mutex<HashMap<String, PodRun>>,
}

/// Kubelet's restart delays of a container that exited: none the first time (its back-off
/// entry starts at that restart), then `backOffPeriod` (10 s with the
/// `ReduceDefaultCrashLoopBackOffDecay` gate off, as in 1.37), doubling up to
/// `MaxContainerBackOff`.
const RESTART_BACKOFF: Duration = Duration::from_secs(10);
const RESTART_BACKOFF_MAX: Duration = Duration::from_secs(300);

/// Why a container could not be created: the runtime's message, as kubelet shows it in a
/// `CreateContainerError`.
const CREATE_FAILED: &str = "failed to create containerd container";

impl Runtime {
    pub fn new(pods_dir: &Path, cdi_dir: &Path) -> Runtime {
        Runtime {
            pods_dir: pods_dir.to_path_buf(),
            cdi_dir: cdi_dir.to_path_buf(),
            restart_backoff: RESTART_BACKOFF,
            pods: Mutex::new(HashMap::new()),
        }
    }

    /// With another delay of the second restart (tests).
    #[cfg(test)]
    fn with_restart_backoff(mut self, first: Duration) -> Runtime {
        self.restart_backoff = first;
        self
    }

    /// The delay before a container that has been restarted `restarts` times starts again.
    fn backoff(&self, restarts: i32) -> Duration {
        match restarts {
            ..=0 => Duration::ZERO,
            n => self.restart_backoff.saturating_mul(1 << (n - 1).min(16)).min(RESTART_BACKOFF_MAX),
        }
    }

    pub fn log_path(&self, pod_uid: &str, container: &str) -> PathBuf {
        self.pods_dir.join(pod_uid).join(format!("{container}.log"))
    }

    pub fn has_pod(&self, pod_uid: &str) -> bool {
        self.pods.lock().unwrap().contains_key(pod_uid)
    }

    /// Starts a pod: its first init container, or all its containers when it has none.
    pub fn start_pod(&self, pod_uid: &str, init: Vec<ContainerSpec>, specs: Vec<ContainerSpec>) -> Result<(), String> {
        let dir = self.pods_dir.join(pod_uid);
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let mut run = PodRun { init_pending: init.into(), init: Vec::new(), specs, containers: Vec::new() };
        self.advance(pod_uid, &mut run)?;
        self.pods.lock().unwrap().insert(pod_uid.to_string(), run);
        Ok(())
    }

    /// Creates what may run next: the next init container once the one before completed,
    /// then the other containers, all or none (those created before a failure are stopped
    /// again as they are dropped, and the next call tries them all anew).
    fn advance(&self, pod_uid: &str, run: &mut PodRun) -> Result<(), String> {
        let last_done = run.init.last().is_none_or(|c| c.exit() == Some(0));
        if !last_done || !run.containers.is_empty() {
            return Ok(());
        }
        if let Some(spec) = run.init_pending.front() {
            let process = self.spawn(pod_uid, spec, false)?;
            let spec = run.init_pending.pop_front().expect("its front was just read");
            run.init.push(Container::new(spec, process));
            return Ok(());
        }
        run.containers = run
            .specs
            .iter()
            .map(|spec| Ok(Container::new(spec.clone(), self.spawn(pod_uid, spec, false)?)))
            .collect::<Result<_, String>>()?;
        Ok(())
    }

    fn spawn(&self, pod_uid: &str, spec: &ContainerSpec, append: bool) -> Result<Supervised, String> {
        let (program, args) = spec.argv.split_first().ok_or("the container has no command")?;
        let edits =
            super::cdi::resolve(&self.cdi_dir, &spec.cdi_devices).map_err(|e| format!("{CREATE_FAILED}: {e}"))?;
        let env: Vec<(String, String)> = spec.env.iter().cloned().chain(edits).collect();
        let mut cmd = Command::new(program);
        cmd.args(args).env_clear().envs(env.iter().cloned()).current_dir(self.pods_dir.join(pod_uid));
        if !env.iter().any(|(k, _)| k == "PATH") {
            cmd.env("PATH", DEFAULT_PATH);
        }
        Supervised::spawn_command(&spec.name, cmd, &self.log_path(pod_uid, &spec.name), append, Lifetime::Attached)
            .map_err(|e| e.to_string())
    }

    /// The pod's init containers' states, in order: those completed, the one running, none of
    /// those not created yet.
    pub fn init_statuses(&self, pod_uid: &str) -> Vec<ContainerStatus> {
        let pods = self.pods.lock().unwrap();
        let Some(run) = pods.get(pod_uid) else { return Vec::new() };
        run.init.iter().map(|c| c.last_status.clone().unwrap_or_else(|| c.running())).collect()
    }

    /// The containers' current states, after restarting those whose policy says so
    /// (`Always`, or `OnFailure` after a non-zero exit; a failed init container unless
    /// `Never`), and creating the next init container or, once they all completed, the
    /// others. While init containers run the others wait in [`POD_INITIALIZING`]; after an
    /// init container failed for good they are reported ended with its exit code.
    pub fn poll(&self, pod_uid: &str, restart_policy: &str) -> Vec<ContainerStatus> {
        let mut pods = self.pods.lock().unwrap();
        let Some(run) = pods.get_mut(pod_uid) else { return Vec::new() };
        if let Some(c) = run.init.last_mut() {
            self.observe(pod_uid, c, |code| restart_policy != "Never" && code != 0);
        }
        if let Err(message) = self.advance(pod_uid, run) {
            // Tried again at the next poll, as a restart whose creation failed is.
            let waiting = |s: &ContainerSpec| ContainerStatus {
                name: s.name.clone(),
                state: State::Waiting { reason: "CreateContainerError".into(), message: message.clone() },
                restart_count: 0,
                last_exit_code: None,
            };
            return run.specs.iter().map(waiting).collect();
        }
        if run.containers.is_empty() {
            let now = dracheck_objects::now();
            let state = |_: &ContainerSpec| match run.init_failed() {
                Some(exit_code) => State::Terminated { exit_code, started_at: now, finished_at: now },
                None => State::Waiting { reason: POD_INITIALIZING.into(), message: String::new() },
            };
            return run
                .specs
                .iter()
                .map(|s| ContainerStatus {
                    name: s.name.clone(),
                    state: state(s),
                    restart_count: 0,
                    last_exit_code: None,
                })
                .collect();
        }
        let restart = |code: i32| match restart_policy {
            "Always" => true,
            "OnFailure" => code != 0,
            _ => false,
        };
        run.containers.iter_mut().map(|c| self.observe(pod_uid, c, restart)).collect()
    }

    /// A container's state, after restarting it if it exited and `restart` says so for its
    /// exit code (with kubelet's back-off).
    fn observe(&self, pod_uid: &str, c: &mut Container, restart: impl Fn(i32) -> bool) -> ContainerStatus {
        let status = self.observed(pod_uid, c, restart);
        c.last_status = Some(status.clone());
        status
    }

    fn observed(&self, pod_uid: &str, c: &mut Container, restart: impl Fn(i32) -> bool) -> ContainerStatus {
        let Some(status) = c.process.exited() else { return c.running() };
        let code = exit_code_of(status);
        let finished_at = *c.finished_at.get_or_insert_with(dracheck_objects::now);
        if !restart(code) {
            return ContainerStatus {
                name: c.spec.name.clone(),
                state: State::Terminated { exit_code: code, started_at: c.started_at, finished_at },
                restart_count: c.restart_count,
                last_exit_code: c.last_exit_code,
            };
        }
        let waiting = |reason: &str, message: String| ContainerStatus {
            name: c.spec.name.clone(),
            state: State::Waiting { reason: reason.into(), message },
            restart_count: c.restart_count,
            last_exit_code: Some(code),
        };
        let exited = *c.exited_at.get_or_insert_with(Instant::now);
        let backoff = self.backoff(c.restart_count);
        if exited.elapsed() < backoff {
            let message = format!("back-off {}s restarting failed container={}", backoff.as_secs(), c.spec.name);
            return waiting("CrashLoopBackOff", message);
        }
        match self.spawn(pod_uid, &c.spec, true) {
            Ok(p) => {
                c.process = p;
                c.restart_count += 1;
                c.last_exit_code = Some(code);
                c.started_at = dracheck_objects::now();
                c.finished_at = None;
                c.exited_at = None;
                c.running()
            }
            // Tried again at the next poll; the restart count counts containers created, so
            // it stays.
            Err(message) => waiting("CreateContainerError", message),
        }
    }

    /// Stops a pod's containers (SIGTERM, SIGKILL after `grace`) and forgets them; their logs
    /// stay until the pod dir is removed.
    pub fn kill_pod(&self, pod_uid: &str, grace: Duration) {
        let run = self.pods.lock().unwrap().remove(pod_uid);
        for mut c in run.into_iter().flat_map(|r| r.init.into_iter().chain(r.containers)) {
            c.process.stop(grace);
        }
    }

    pub fn remove_pod_dir(&self, pod_uid: &str) {
        let _ = std::fs::remove_dir_all(self.pods_dir.join(pod_uid));
    }

    /// Every pod it runs, for a node that goes away.
    pub fn kill_all(&self, grace: Duration) {
        let uids: Vec<String> = self.pods.lock().unwrap().keys().cloned().collect();
        for uid in uids {
            self.kill_pod(&uid, grace);
        }
    }
}

/// The exit code a container runtime reports: the process's, or 128 + signal.
fn exit_code_of(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt as _;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, script: &str) -> ContainerSpec {
        ContainerSpec {
            name: name.into(),
            argv: vec!["sh".into(), "-c".into(), script.into()],
            env: vec![("GREETING".into(), "hello".into())],
            cdi_devices: Vec::new(),
        }
    }

    fn wait_terminated(rt: &Runtime, uid: &str, policy: &str) -> Vec<ContainerStatus> {
        for _ in 0..200 {
            let s = rt.poll(uid, policy);
            if s.iter().all(|c| matches!(c.state, State::Terminated { .. })) {
                return s;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("containers did not finish");
    }

    #[test]
    fn runs_commands_with_their_env_and_reports_exit_codes() {
        let dir = tempfile::tempdir().unwrap();
        let rt = Runtime::new(dir.path(), &dir.path().join("cdi"));
        rt.start_pod("u1", Vec::new(), vec![spec("ok", "echo $GREETING; exit 0"), spec("bad", "exit 3")]).unwrap();
        let s = wait_terminated(&rt, "u1", "Never");
        let codes: Vec<i32> = s
            .iter()
            .map(|c| match c.state {
                State::Terminated { exit_code, .. } => exit_code,
                State::Running { .. } | State::Waiting { .. } => -1,
            })
            .collect();
        assert_eq!(codes, vec![0, 3]);
        assert_eq!(std::fs::read_to_string(rt.log_path("u1", "ok")).unwrap(), "hello\n");
    }

    #[test]
    fn a_container_gets_its_pods_env_and_a_path_not_the_callers() {
        let dir = tempfile::tempdir().unwrap();
        let rt = Runtime::new(dir.path(), &dir.path().join("cdi"));
        let env = ContainerSpec { argv: vec!["/usr/bin/env".into()], ..spec("env", "") };
        rt.start_pod("u4", Vec::new(), vec![env]).unwrap();
        wait_terminated(&rt, "u4", "Never");
        let seen = std::fs::read_to_string(rt.log_path("u4", "env")).unwrap();
        let mut seen: Vec<&str> = seen.lines().collect();
        seen.sort_unstable();
        assert_eq!(seen, ["GREETING=hello".to_string(), format!("PATH={DEFAULT_PATH}")]);
    }

    #[test]
    fn on_failure_restarts_until_success() {
        let dir = tempfile::tempdir().unwrap();
        let rt = Runtime::new(dir.path(), &dir.path().join("cdi")).with_restart_backoff(Duration::from_millis(50));
        // Fails on the first run, succeeds on the second: the marker file survives restarts.
        rt.start_pod("u2", Vec::new(), vec![spec("flaky", "if [ -e marker ]; then exit 0; fi; touch marker; exit 1")])
            .unwrap();
        let s = wait_terminated(&rt, "u2", "OnFailure");
        assert_eq!(s[0].restart_count, 1);
        assert_eq!(s[0].last_exit_code, Some(1));
        assert!(matches!(s[0].state, State::Terminated { exit_code: 0, .. }));
    }

    /// What containerd does: a restarted container is a new one, whose CDI devices are
    /// resolved again; a spec removed in between fails the creation, and the restart count
    /// stays.
    #[test]
    fn a_restart_resolves_cdi_devices_again() {
        let dir = tempfile::tempdir().unwrap();
        let cdi = dir.path().join("cdi");
        std::fs::create_dir_all(&cdi).unwrap();
        let spec_file = cdi.join("claim.json");
        std::fs::write(
            &spec_file,
            r#"{"cdiVersion":"0.6.0","kind":"mock.dracheck.io/gpu","devices":[{"name":"gpu-0","containerEdits":{"env":["DEV=gpu-0"]}}]}"#,
        )
        .unwrap();
        let rt = Runtime::new(dir.path(), &cdi).with_restart_backoff(Duration::from_millis(300));
        let crashing = ContainerSpec {
            cdi_devices: vec!["mock.dracheck.io/gpu=gpu-0".into()],
            ..spec("crashing", "echo $DEV; exit 1")
        };
        rt.start_pod("u5", Vec::new(), vec![crashing]).unwrap();
        let mut seen = Vec::new();
        for _ in 0..200 {
            let s = rt.poll("u5", "Always");
            if let State::Waiting { reason, .. } = &s[0].state {
                seen.push((reason.clone(), s[0].restart_count));
            }
            if s[0].restart_count == 1 {
                std::fs::remove_file(&spec_file).ok();
            }
            if seen.last().is_some_and(|(r, _)| r == "CreateContainerError") {
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        assert_eq!(
            seen.first(),
            Some(&("CrashLoopBackOff".to_string(), 1)),
            "the second restart waits out the back-off"
        );
        assert_eq!(seen.last(), Some(&("CreateContainerError".to_string(), 1)), "{seen:?}");
        assert_eq!(std::fs::read_to_string(rt.log_path("u5", "crashing")).unwrap(), "gpu-0\ngpu-0\n");
    }

    /// Kubelet's order: each init container to its successful end, one after the other, then
    /// the others; a failed one is retried unless the policy is `Never`, which ends the pod.
    #[test]
    fn init_containers_run_in_order_before_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let rt = Runtime::new(dir.path(), &dir.path().join("cdi")).with_restart_backoff(Duration::from_millis(50));
        let init = vec![
            spec("first", "sleep 0.3; echo first >> order"),
            spec("second", "if [ ! -e retried ]; then touch retried; exit 1; fi; echo second >> order"),
        ];
        rt.start_pod("u6", init, vec![spec("app", "echo app >> order; sleep 60")]).unwrap();
        let waiting = rt.poll("u6", "OnFailure");
        assert!(
            matches!(&waiting[0].state, State::Waiting { reason, .. } if reason == POD_INITIALIZING),
            "{waiting:?}"
        );
        let mut running = false;
        for _ in 0..200 {
            running = matches!(rt.poll("u6", "OnFailure")[0].state, State::Running { .. });
            if running {
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        assert!(running, "the app container starts once the init containers completed");
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(std::fs::read_to_string(dir.path().join("u6/order")).unwrap(), "first\nsecond\napp\n");
        let init = rt.init_statuses("u6");
        assert!(init.iter().all(|s| matches!(s.state, State::Terminated { exit_code: 0, .. })), "{init:?}");
        assert_eq!(init[1].restart_count, 1, "the failed init container was retried");
        rt.kill_pod("u6", Duration::from_secs(2));

        rt.start_pod("u7", vec![spec("fails", "exit 4")], vec![spec("app", "sleep 60")]).unwrap();
        let s = wait_terminated(&rt, "u7", "Never");
        assert!(matches!(s[0].state, State::Terminated { exit_code: 4, .. }), "{s:?}");
        assert!(!dir.path().join("u7/app.log").exists(), "the app container never ran");
    }

    #[test]
    fn kill_pod_stops_running_containers() {
        let dir = tempfile::tempdir().unwrap();
        let rt = Runtime::new(dir.path(), &dir.path().join("cdi"));
        rt.start_pod("u3", Vec::new(), vec![spec("sleeper", "sleep 60")]).unwrap();
        assert!(matches!(rt.poll("u3", "Never")[0].state, State::Running { .. }));
        rt.kill_pod("u3", Duration::from_secs(2));
        assert!(!rt.has_pod("u3"));
    }
}
