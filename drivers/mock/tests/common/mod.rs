//! Test harness shared by the integration tests: one local cluster per test binary (only for
//! the API objects; nothing is scheduled), the mock driver as a child process, and a client
//! that plays kubelet over the driver's sockets.
#![allow(dead_code)] // Each test binary uses its own part of the harness.

use dracheck_kubelet_api::health_v1;
use dracheck_kubelet_api::kubelet::{CALL_TIMEOUT, DraClient, Service};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use dracheck_kubelet_api::registration::registration_client::RegistrationClient;
use dracheck_kubelet_api::registration::{InfoRequest, PluginInfo};
use dracheck_kubelet_api::{connect_unix, connect_unix_as_plugin_watcher, dra_v1};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use tonic::transport::Channel;

pub const DRIVER: &str = "gpu.mock.dracheck.io";
pub const NS: &str = "default";

pub fn default_inventory() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory/default.yaml")
}

pub use dracheck_clusters::testing::{Env, TestFn};

/// Runs `tests` as named tests against one local cluster (API objects only: no nodes).
pub fn run_with_cluster(tests: Vec<(&'static str, TestFn)>) -> std::process::ExitCode {
    dracheck_clusters::testing::run_with_cluster(tests, dracheck_clusters::testing::Sharing::Parallel, async |_| {})
}

/// Registers a Ready Node, as a kubelet would; returns its UID.
pub async fn create_node(client: &kube::Client, name: &str) -> String {
    let nodes: Api<Node> = Api::all(client.clone());
    let created = nodes.create(&PostParams::default(), &dracheck_objects::node(name, "127.0.10.1")).await.unwrap();
    let status = serde_json::json!({ "status": dracheck_objects::node(name, "127.0.10.1").status });
    nodes.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    created.metadata.uid.unwrap()
}

/// A claim allocated as the scheduler would (e2e_node pattern): one result per device of
/// `pool`, all for request `req`, reserved for a pod. Returns its UID.
pub async fn allocated_claim(client: &kube::Client, name: &str, pool: &str, devices: &[&str]) -> String {
    let uid = unallocated_claim(client, name, devices.len()).await;
    let results: Vec<_> = devices
        .iter()
        .map(|d| serde_json::json!({ "request": "req", "driver": DRIVER, "pool": pool, "device": d }))
        .collect();
    let status = serde_json::json!({ "status": {
        "allocation": { "devices": { "results": results } },
        "reservedFor": [{ "resource": "pods", "name": format!("{name}-pod"), "uid": "0a1b2c3d-0000-4000-8000-000000000001" }],
    }});
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), NS);
    claims.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    uid
}

pub async fn unallocated_claim(client: &kube::Client, name: &str, count: usize) -> String {
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), NS);
    let claim = dracheck_objects::claim(NS, name, "gpu", count as i64, &[]);
    claims.create(&PostParams::default(), &claim).await.unwrap().metadata.uid.unwrap()
}

pub fn claim_ref(name: &str, uid: &str) -> dra_v1::Claim {
    dra_v1::Claim { namespace: NS.into(), uid: uid.into(), name: name.into() }
}

/// Slices of `driver` for `node`.
pub async fn slices_of(client: &kube::Client, node: &str) -> Vec<ResourceSlice> {
    let api: Api<ResourceSlice> = Api::all(client.clone());
    let fields = format!("spec.driver={DRIVER},spec.nodeName={node}");
    api.list(&ListParams::default().fields(&fields)).await.unwrap().items
}

/// Polls `check` until it returns `Some` or `timeout` passes.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The mock driver as a child process, with its directories in a short temp dir (socket
/// paths must fit sun_path).
pub struct Driver {
    pub dir: tempfile::TempDir,
    pub node: String,
    kubeconfig: PathBuf,
    inventory: PathBuf,
    extra: Vec<String>,
    child: Option<Child>,
    runs: usize,
}

impl Driver {
    pub fn new(env: &Env, node: &str, inventory: &Path, extra: &[&str]) -> Driver {
        Driver {
            dir: tempfile::Builder::new().prefix("mk").tempdir_in("/tmp").unwrap(),
            node: node.into(),
            kubeconfig: env.kubeconfig.clone(),
            inventory: inventory.to_path_buf(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            child: None,
            runs: 0,
        }
    }

    pub fn registrar_dir(&self) -> PathBuf {
        self.dir.path().join("reg")
    }
    pub fn plugin_dir(&self) -> PathBuf {
        self.dir.path().join("plugin")
    }
    pub fn cdi_dir(&self) -> PathBuf {
        self.dir.path().join("cdi")
    }
    pub fn reg_socket(&self) -> PathBuf {
        self.registrar_dir().join(format!("{DRIVER}-reg.sock"))
    }
    pub fn dra_socket(&self) -> PathBuf {
        self.plugin_dir().join("dra.sock")
    }
    /// The node's health file, which the driver follows (see the mock's `health`).
    pub fn mark_unhealthy(&self, devices: &[&str]) {
        let devices: Vec<String> = devices.iter().map(|d| d.to_string()).collect();
        dracheck_mock_driver::health::write(
            &self.plugin_dir().join(dracheck_mock_driver::health::HEALTH_FILE),
            &devices,
        )
        .unwrap();
    }
    /// The driver's health stream, as a 1.37 kubelet opens it.
    pub async fn watch_health(&self) -> tonic::Streaming<health_v1::NodeWatchResourcesResponse> {
        let channel = dracheck_kubelet_api::connect_unix(self.dra_socket()).await.unwrap();
        let mut client = health_v1::dra_resource_health_client::DraResourceHealthClient::new(channel);
        client.node_watch_resources(health_v1::NodeWatchResourcesRequest {}).await.unwrap().into_inner()
    }
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join(format!("driver-{}.log", self.runs))
    }

    /// Everything the driver has logged so far, over all its runs.
    pub fn log(&self) -> String {
        (1..=self.runs)
            .map(|r| std::fs::read_to_string(self.dir.path().join(format!("driver-{r}.log"))).unwrap_or_default())
            .collect()
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dracheck-mock-driver"));
        cmd.arg("--node-name")
            .arg(&self.node)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--inventory")
            .arg(&self.inventory)
            .arg("--registrar-dir")
            .arg(self.registrar_dir())
            .arg("--plugin-dir")
            .arg(self.plugin_dir())
            .arg("--cdi-dir")
            .arg(self.cdi_dir())
            .args(&self.extra);
        cmd
    }

    /// Starts the driver and waits until both sockets accept connections (a crashed run
    /// leaves socket files that only a live process answers on).
    pub async fn start(&mut self) {
        self.start_serving(true).await;
    }

    /// Starts the driver and waits until its DRA socket, and the registration socket where
    /// `registration` says it must come, accept connections.
    pub async fn start_serving(&mut self, registration: bool) {
        assert!(self.child.is_none(), "the driver is already running");
        self.runs += 1;
        let log = std::fs::File::create(self.log_path()).unwrap();
        let child = self.command().stdin(Stdio::null()).stdout(log.try_clone().unwrap()).stderr(log).spawn().unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        let listening = |p: PathBuf| std::os::unix::net::UnixStream::connect(p).is_ok();
        while !((!registration || listening(self.reg_socket())) && listening(self.dra_socket())) {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("the driver exited during start-up ({status}):\n{}", self.log());
            }
            assert!(Instant::now() < deadline, "the driver did not create its sockets within 30s:\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM, and the exit status.
    pub async fn terminate(&mut self) -> ExitStatus {
        let child = self.child.as_ref().expect("the driver is running");
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        self.wait(Duration::from_secs(20)).await.expect("the driver exits within 20s of SIGTERM")
    }

    /// SIGKILL: a crash, nothing cleaned up.
    pub async fn kill(&mut self) {
        let mut child = self.child.take().expect("the driver is running");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Waits for the driver to exit on its own.
    pub async fn wait(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.as_mut()?.try_wait().unwrap() {
                self.child = None;
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Plays kubelet: reads the registration (with the `:authority` the kubelet's plugin
    /// watcher sends), then connects to the endpoint it names.
    pub async fn kubelet(&self) -> Kubelet {
        let mut reg = RegistrationClient::new(connect_unix_as_plugin_watcher(self.reg_socket()).await.unwrap());
        let info = reg.get_info(InfoRequest {}).await.unwrap().into_inner();
        let dra = connect_unix(&info.endpoint).await.unwrap();
        Kubelet {
            info,
            registration: reg,
            dra: dra_v1::dra_plugin_client::DraPluginClient::new(dra.clone()),
            client: DraClient::new(dra.clone(), Service::V1, CALL_TIMEOUT),
            channel: dra,
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub struct Kubelet {
    pub info: PluginInfo,
    pub registration: RegistrationClient<Channel>,
    pub dra: dra_v1::dra_plugin_client::DraPluginClient<Channel>,
    /// The kubelet-side client the emulated node and the plugin tier use too.
    pub client: DraClient,
    pub channel: Channel,
}

impl Kubelet {
    pub async fn prepare(&mut self, claims: &[dra_v1::Claim]) -> dra_v1::NodePrepareResourcesResponse {
        let request = dra_v1::NodePrepareResourcesRequest { claims: claims.to_vec() };
        self.client.prepare_raw(request).await.expect("NodePrepareResources answers")
    }

    pub async fn unprepare(&mut self, claims: &[dra_v1::Claim]) -> dra_v1::NodeUnprepareResourcesResponse {
        let request = dra_v1::NodeUnprepareResourcesRequest { claims: claims.to_vec() };
        self.client.unprepare_raw(request).await.expect("NodeUnprepareResources answers")
    }
}

/// Every CDI device in the spec files of `dir`, as `kind=name` → the spec's JSON, the way a
/// container runtime indexes them.
pub fn cdi_registry(dir: &Path) -> std::collections::HashMap<String, serde_json::Value> {
    let mut devices = std::collections::HashMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return devices };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let spec: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap())
            .unwrap_or_else(|e| panic!("{} is not valid JSON: {e}", path.display()));
        let kind = spec["kind"].as_str().unwrap_or_else(|| panic!("{} has no kind", path.display())).to_string();
        for device in spec["devices"].as_array().into_iter().flatten() {
            devices.insert(format!("{kind}={}", device["name"].as_str().unwrap()), spec.clone());
        }
    }
    devices
}

/// Each device of a health report with its health (`Healthy`, `Unhealthy`, `Unknown`).
pub fn health_of(report: &health_v1::NodeWatchResourcesResponse) -> std::collections::BTreeMap<String, String> {
    report
        .devices
        .iter()
        .map(|d| {
            let name = d.device.as_ref().map(|d| d.device_name.clone()).unwrap_or_default();
            (name, format!("{:?}", d.health()))
        })
        .collect()
}

/// The next report of `stream` that `wanted` accepts, within `timeout`.
pub async fn next_health(
    stream: &mut tonic::Streaming<health_v1::NodeWatchResourcesResponse>,
    timeout: Duration,
    wanted: impl Fn(&std::collections::BTreeMap<String, String>) -> bool,
) -> std::collections::BTreeMap<String, String> {
    let deadline = Instant::now() + timeout;
    let mut last = None;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match tokio::time::timeout(left, stream.message()).await {
            Ok(Ok(Some(report))) => {
                let health = health_of(&report);
                if wanted(&health) {
                    return health;
                }
                last = Some(health);
            }
            Ok(other) => panic!("the health stream ended: {other:?}"),
            Err(_) => break,
        }
    }
    panic!("no wanted health report within {timeout:?}; the last: {last:?}")
}
