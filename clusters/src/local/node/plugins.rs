//! Plugin registration, as the kubelet's plugin manager does it: watch the node's
//! `plugins_registry` dir, ask each new socket `GetInfo`, pick the newest DRA service the
//! plugin offers (v1, else v1beta1), confirm with `NotifyRegistrationStatus`. When a plugin's
//! socket goes away or stops answering, its node's slices are wiped after a delay unless it
//! registers again in time. An instance that offers the health service has its health stream
//! (`health::watch`) for as long as it stays registered.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dracheck_kubelet_api::kubelet::{self, DraClient};
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, DeleteParams, ListParams};
use tokio_util::sync::CancellationToken;

use super::config::NodeConfig;
use super::events::Log;
use super::health::HealthCache;
use super::health::watch::{self as health_watch, Watch};

/// A registration that failed, and when to try it again. The kubelet's plugin manager retries a
/// failed registration with exponential back-off (its operation executor's, from 500 ms to
/// about 2 min), so a plugin whose socket the watcher found a moment before the plugin served on
/// it registers at the next try; never retrying made that race fail a correct driver.
#[derive(Debug, Clone, Copy)]
struct Refused {
    mtime: std::time::SystemTime,
    retry_at: tokio::time::Instant,
    backoff: Duration,
}

/// The first and the longest wait before a failed registration is tried again, as the
/// kubelet's exponential back-off (`initialDurationBeforeRetry`, `maxDurationBeforeRetry`).
const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_MOST: Duration = Duration::from_secs(122);

impl Refused {
    /// Whether the socket is to be asked now: it changed, or its back-off is over.
    fn due(&self, mtime: std::time::SystemTime) -> bool {
        self.mtime != mtime || tokio::time::Instant::now() >= self.retry_at
    }

    /// The record after another failure at `mtime`: the back-off doubles for the same socket and
    /// starts again for a changed one.
    fn after(previous: Option<Refused>, mtime: std::time::SystemTime) -> Refused {
        let backoff = match previous {
            Some(p) if p.mtime == mtime => (p.backoff * 2).min(RETRY_MOST),
            _ => RETRY_FIRST,
        };
        Refused { mtime, retry_at: tokio::time::Instant::now() + backoff, backoff }
    }
}

#[derive(Debug, Clone)]
pub struct Plugin {
    pub driver: String,
    pub endpoint: PathBuf,
    pub client: DraClient,
    /// The health service it is watched through, if it offers one.
    pub health: Option<health_watch::Service>,
    reg_socket: PathBuf,
}

/// The registered plugins of one node, by driver name.
#[derive(Default)]
pub struct Registry {
    /// Each driver's instances in the order they registered: the last is the newest.
    plugins: Mutex<HashMap<String, Vec<Plugin>>>,
    /// Sockets that failed registration: asked again when they change, else after a back-off.
    refused: Mutex<HashMap<PathBuf, Refused>>,
    wipes: Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
    /// The health stream of each registered instance that offers one, by registration socket.
    health: Mutex<HashMap<PathBuf, Watch>>,
}

impl Registry {
    /// The instance calls for `driver` go to: the newest, as the kubelet picks it.
    pub fn get(&self, driver: &str) -> Option<Plugin> {
        self.plugins.lock().unwrap().get(driver).and_then(|instances| instances.last().cloned())
    }

    pub fn drivers(&self) -> Vec<String> {
        self.plugins.lock().unwrap().iter().filter(|(_, i)| !i.is_empty()).map(|(d, _)| d.clone()).collect()
    }

    /// The DRA service sockets of every registered instance, with their driver's name.
    pub fn endpoints(&self) -> Vec<(String, PathBuf)> {
        let plugins = self.plugins.lock().unwrap();
        plugins.values().flatten().map(|p| (p.driver.clone(), p.endpoint.clone())).collect()
    }

    fn all(&self) -> Vec<Plugin> {
        self.plugins.lock().unwrap().values().flatten().cloned().collect()
    }

    /// Drops one instance; `true` when it was its driver's last.
    fn remove(&self, gone: &Plugin) -> bool {
        let mut plugins = self.plugins.lock().unwrap();
        let Some(instances) = plugins.get_mut(&gone.driver) else { return false };
        instances.retain(|p| p.reg_socket != gone.reg_socket);
        let last = instances.is_empty();
        if last {
            plugins.remove(&gone.driver);
        }
        last
    }

    /// Adds an instance as the driver's newest; one that took over an instance's endpoint
    /// (a restart on the same sockets) replaces it. Returns the replaced instances.
    fn add(&self, plugin: Plugin) -> Vec<Plugin> {
        let mut plugins = self.plugins.lock().unwrap();
        let instances = plugins.entry(plugin.driver.clone()).or_default();
        let (replaced, kept) = std::mem::take(instances).into_iter().partition(|p| p.endpoint == plugin.endpoint);
        *instances = kept;
        instances.push(plugin);
        replaced
    }

    /// Ends the health stream of an instance that is no longer registered, if it had one.
    async fn stop_health(&self, gone: &Plugin) {
        let watch = self.health.lock().unwrap().remove(&gone.reg_socket);
        if let Some(w) = watch {
            w.stop().await;
        }
    }
}

/// Deletes every ResourceSlice of `node` (of `driver`, if given), as kubelet does at start-up
/// and after a plugin is gone for the wipe delay.
pub async fn wipe_slices(client: &kube::Client, node: &str, driver: Option<&str>) -> kube::Result<()> {
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    let mut selector = format!("spec.nodeName={node}");
    if let Some(d) = driver {
        selector.push_str(&format!(",spec.driver={d}"));
    }
    slices.delete_collection(&DeleteParams::default(), &ListParams::default().fields(&selector)).await.map(|_| ())
}

/// Watches the registry dir until `stop`. Wipes still pending then are dropped: they are
/// timers of this kubelet, and a stopped kubelet (a removed or restarting node) wipes nothing.
/// The health streams end too, without forgetting anything (`Watch::abort`).
pub async fn watch(
    client: kube::Client,
    cfg: NodeConfig,
    registry: Arc<Registry>,
    health: Arc<HealthCache>,
    log: Log,
    stop: CancellationToken,
) {
    // The kubelet's plugin watcher learns of a new socket through inotify, at once; a scan
    // every 100 ms comes close. Whether a known plugin still answers is probed less often.
    let mut tick = 0u64;
    loop {
        scan(&client, &cfg, &registry, &health, &log, tick.is_multiple_of(20)).await;
        tick += 1;
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
    for (_, pending) in registry.wipes.lock().unwrap().drain() {
        pending.abort();
    }
    let streams: Vec<Watch> = registry.health.lock().unwrap().drain().map(|(_, w)| w).collect();
    for w in streams {
        w.abort().await;
    }
}

async fn scan(
    client: &kube::Client,
    cfg: &NodeConfig,
    registry: &Arc<Registry>,
    health: &Arc<HealthCache>,
    log: &Log,
    probe: bool,
) {
    let sockets = list_sockets(&cfg.registry_dir());
    // Plugins whose registration socket is gone, or whose service no longer accepts
    // connections (a crashed plugin leaves its socket files behind).
    for p in registry.all() {
        let gone = !sockets.contains(&p.reg_socket) || (probe && !accepts(&p.endpoint).await);
        if !gone {
            continue;
        }
        let last = registry.remove(&p);
        registry.stop_health(&p).await;
        if last {
            log.info(format!(
                "plugin {} unregistered; wiping its slices in {:?} unless it returns",
                p.driver, cfg.wipe_delay
            ));
            schedule_wipe(client, cfg, registry, log, &p.driver);
        } else {
            log.info(format!(
                "an instance of plugin {} at {} unregistered; the driver's other instances serve on",
                p.driver,
                p.endpoint.display()
            ));
        }
    }
    for socket in sockets {
        let registered = registry.all().iter().any(|p| p.reg_socket == socket);
        let mtime = std::fs::metadata(&socket).and_then(|m| m.modified()).ok();
        let waiting = match (mtime, registry.refused.lock().unwrap().get(&socket)) {
            (Some(m), Some(r)) => !r.due(m),
            _ => false,
        };
        if registered || waiting {
            continue;
        }
        match register(&socket, cfg.call_timeout).await {
            Ok(plugin) => {
                let health_service = plugin.health.map_or(String::new(), |s| format!(", health {}", s.name()));
                log.info(format!(
                    "registered DRA plugin {} ({:?}{health_service}) at {}",
                    plugin.driver,
                    plugin.client.service(),
                    plugin.endpoint.display()
                ));
                if let Some(w) = registry.wipes.lock().unwrap().remove(&plugin.driver) {
                    w.abort();
                }
                registry.refused.lock().unwrap().remove(&socket);
                let watched = plugin.health.map(|service| (plugin.driver.clone(), plugin.endpoint.clone(), service));
                // A replaced instance's stream ends (and forgets the driver's health) before the
                // new one's starts, so the newcomer's first report is kept.
                for old in registry.add(plugin) {
                    registry.stop_health(&old).await;
                }
                if let Some((driver, endpoint, service)) = watched {
                    let w = Watch::start(health.clone(), log.clone(), driver, endpoint, service);
                    registry.health.lock().unwrap().insert(socket.clone(), w);
                }
            }
            Err(e) => {
                log.warn("FailedRegistration", format!("plugin socket {}: {e}", socket.display()));
                if let Some(m) = mtime {
                    let mut refused = registry.refused.lock().unwrap();
                    let next = Refused::after(refused.get(&socket).copied(), m);
                    refused.insert(socket, next);
                }
            }
        }
    }
}

fn schedule_wipe(client: &kube::Client, cfg: &NodeConfig, registry: &Arc<Registry>, log: &Log, driver: &str) {
    let (client, node, driver_s, delay, log2) =
        (client.clone(), cfg.name.clone(), driver.to_string(), cfg.wipe_delay, log.clone());
    let task = tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        match wipe_slices(&client, &node, Some(&driver_s)).await {
            Ok(()) => log2.info(format!("wiped the slices of {driver_s} on {node}")),
            Err(e) => log2.info(format!("wiping the slices of {driver_s} failed: {e}")),
        }
    });
    if let Some(old) = registry.wipes.lock().unwrap().insert(driver.to_string(), task) {
        old.abort();
    }
}

fn list_sockets(dir: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt as _;
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

async fn accepts(path: &Path) -> bool {
    tokio::net::UnixStream::connect(path).await.is_ok()
}

async fn register(socket: &Path, call_timeout: Duration) -> Result<Plugin, kubelet::RegisterError> {
    let registered = kubelet::register(socket, call_timeout).await?;
    Ok(Plugin {
        health: health_watch::pick_service(&registered.info.supported_versions),
        driver: registered.info.name,
        endpoint: PathBuf::from(registered.info.endpoint),
        client: registered.client,
        reg_socket: socket.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_registration_is_tried_again_after_a_growing_back_off() {
        let t0 = std::time::SystemTime::UNIX_EPOCH;
        let first = Refused::after(None, t0);
        assert_eq!(first.backoff, RETRY_FIRST);
        assert!(!first.due(t0), "not at once");
        let over = Refused { retry_at: tokio::time::Instant::now(), ..first };
        assert!(over.due(t0), "after the back-off");
        let mut r = first;
        for _ in 0..20 {
            r = Refused::after(Some(r), t0);
        }
        assert_eq!(r.backoff, RETRY_MOST, "bounded as the kubelet's");
        // A changed socket (a restarted plugin) is asked at once, and its back-off starts again.
        let t1 = t0 + Duration::from_secs(1);
        assert!(r.due(t1));
        assert_eq!(Refused::after(Some(r), t1).backoff, RETRY_FIRST);
    }
}
