//! Emulated nodes: each one plays the kubelet's DRA role against the real control plane
//! (Node object and Lease, plugin registration, Prepare/Unprepare with a checkpoint, the claims
//! of extended resources backed by DRA, CDI resolution, containers as host processes, device
//! health in the pods' status, the log endpoint). README.md lists where the
//! emulation differs from a real kubelet.

pub mod cdi;
pub mod config;
mod dra;
mod env;
mod events;
mod extended;
mod health;
mod heartbeat;
mod logs;
pub mod plugins;
mod pods;
mod runtime;

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use self::config::NodeConfig;
use self::dra::DraManager;
use self::events::Log;
use self::health::HealthCache;
use self::logs::PodIndex;
use self::plugins::Registry;
pub(crate) use self::runtime::DEFAULT_PATH;
use self::runtime::Runtime;
use super::pki::Pki;
use crate::error::{ClusterError, Result};

pub struct EmulatedNode {
    cfg: NodeConfig,
    client: kube::Client,
    uid: String,
    port: u16,
    log: Log,
    runtime: Arc<Runtime>,
    index: PodIndex,
    registry: Arc<Registry>,
    /// The kubelet's loops; cancelled and started again by a kubelet restart.
    kubelet: CancellationToken,
    kubelet_tasks: Vec<JoinHandle<()>>,
    /// The log endpoint, like the container runtime, survives a kubelet restart.
    server: CancellationToken,
}

impl EmulatedNode {
    pub async fn start(client: kube::Client, pki: &Pki, cfg: NodeConfig) -> Result<EmulatedNode> {
        cfg.create_dirs().map_err(ClusterError::io(format!(
            "creating the dirs of {} under {}",
            cfg.name,
            cfg.root.display()
        )))?;
        let log =
            Log::open(&cfg.name, &cfg.root.join("kubelet.log")).map_err(ClusterError::io("opening the node log"))?;
        let listener = tokio::net::TcpListener::bind((cfg.ip, 0))
            .await
            .map_err(ClusterError::io(format!("listening on {} for {}", cfg.ip, cfg.name)))?;
        let port = listener.local_addr().map_err(ClusterError::io("reading the kubelet port"))?.port();
        let cert = pki.serving(&format!("kubelet-{}", cfg.name), &[&cfg.ip.to_string(), &cfg.name])?;
        let tls = logs::tls_config(&pki.ca_pem, &cert.cert_pem, &cert.key_pem).map_err(|e| ClusterError::Io {
            context: "configuring the kubelet's TLS".into(),
            source: std::io::Error::other(e),
        })?;
        let runtime = Arc::new(Runtime::new(&cfg.pods_dir(), &cfg.cdi_dir()));
        let index = PodIndex::default();
        let server = CancellationToken::new();
        tokio::spawn(logs::serve(listener, tls, runtime.clone(), index.clone(), server.clone()));
        let uid = heartbeat::register(&client, &cfg, port)
            .await
            .map_err(ClusterError::kube(format!("registering node {}", cfg.name)))?;
        let mut node = EmulatedNode {
            cfg,
            client,
            uid,
            port,
            log,
            runtime,
            index,
            registry: Arc::new(Registry::default()),
            kubelet: CancellationToken::new(),
            kubelet_tasks: Vec::new(),
            server,
        };
        node.start_kubelet().await?;
        Ok(node)
    }

    async fn start_kubelet(&mut self) -> Result<()> {
        // A starting kubelet wipes its node's slices; drivers publish them again.
        plugins::wipe_slices(&self.client, &self.cfg.name, None)
            .await
            .map_err(ClusterError::kube(format!("wiping the slices of {}", self.cfg.name)))?;
        self.log.info(format!("kubelet started on {} ({}:{})", self.cfg.name, self.cfg.ip, self.port));
        self.kubelet = CancellationToken::new();
        self.registry = Arc::new(Registry::default());
        let dra = Arc::new(DraManager::load(self.client.clone(), self.registry.clone(), self.checkpoint_path()));
        let health = Arc::new(HealthCache::load(self.cfg.state_dir().join("dra_health_state"), self.log.clone()));
        let worker = pods::PodWorker {
            client: self.client.clone(),
            cfg: self.cfg.clone(),
            runtime: self.runtime.clone(),
            dra,
            health: health.clone(),
            log: self.log.clone(),
            index: self.index.clone(),
        };
        self.kubelet_tasks = vec![
            tokio::spawn(heartbeat::run(
                self.client.clone(),
                self.cfg.clone(),
                self.uid.clone(),
                self.port,
                self.kubelet.clone(),
            )),
            tokio::spawn(plugins::watch(
                self.client.clone(),
                self.cfg.clone(),
                self.registry.clone(),
                health,
                self.log.clone(),
                self.kubelet.clone(),
            )),
            tokio::spawn(worker.run(self.kubelet.clone())),
        ];
        Ok(())
    }

    async fn stop_kubelet(&mut self) {
        self.kubelet.cancel();
        for t in self.kubelet_tasks.drain(..) {
            let _ = t.await;
        }
    }

    /// Stops the kubelet and starts it again from its checkpoint; running containers keep
    /// running, and their pods' claims are taken from the checkpoint without a new Prepare,
    /// as kubelet does.
    pub async fn restart_kubelet(&mut self) -> Result<()> {
        self.stop_kubelet().await;
        self.log.info("kubelet restarting");
        self.start_kubelet().await
    }

    /// A node reboot: the kubelet and every container stop at once, the CDI spec dir (tmpfs
    /// on a real machine) is emptied, and the kubelet starts again from its checkpoint. Its
    /// pods have no containers any more, so it prepares their claims again (the checkpoint's
    /// entries are not prepared after a restart) and starts them, as kubelet does with pods
    /// whose sandbox is gone.
    pub async fn reboot(&mut self) -> Result<()> {
        self.stop_kubelet().await;
        let rt = self.runtime.clone();
        let _ = tokio::task::spawn_blocking(move || rt.kill_all(Duration::ZERO)).await;
        let cdi = self.cfg.cdi_dir();
        config::empty_dir(&cdi).map_err(ClusterError::io(format!("emptying {} for the reboot", cdi.display())))?;
        self.log.info("node rebooting");
        self.start_kubelet().await
    }

    /// Node removal: the node stops (its containers too) and its Node object is deleted; the
    /// garbage collector then removes the node's slices.
    pub async fn remove(mut self) -> Result<()> {
        self.shutdown().await;
        super::nodes::delete_node(&self.client, &self.cfg.name).await
    }

    async fn shutdown(&mut self) {
        self.stop_kubelet().await;
        self.server.cancel();
        let rt = self.runtime.clone();
        let _ = tokio::task::spawn_blocking(move || rt.kill_all(Duration::from_secs(2))).await;
    }

    pub fn config(&self) -> &NodeConfig {
        &self.cfg
    }

    pub fn name(&self) -> &str {
        &self.cfg.name
    }

    /// The drivers registered on this node right now.
    pub fn registered_drivers(&self) -> Vec<String> {
        self.registry.drivers()
    }

    /// The DRA sockets of the registered plugin instances, by driver.
    pub fn registered_endpoints(&self) -> Vec<(String, std::path::PathBuf)> {
        self.registry.endpoints()
    }

    fn checkpoint_path(&self) -> std::path::PathBuf {
        self.cfg.state_dir().join("dra_manager_state")
    }

    /// The DRA checkpoint: claim UID → the CDI device IDs the driver returned for it.
    pub fn prepared_claims(&self) -> Vec<(String, Vec<String>)> {
        dra::read_checkpoint(&self.checkpoint_path())
    }

    /// The node's own log: registrations, prepare/unprepare outcomes, events.
    pub fn log_path(&self) -> std::path::PathBuf {
        self.cfg.root.join("kubelet.log")
    }
}

impl Drop for EmulatedNode {
    fn drop(&mut self) {
        self.kubelet.cancel();
        self.server.cancel();
        self.runtime.kill_all(Duration::from_secs(2));
    }
}
