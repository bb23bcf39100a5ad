//! Plugin registration, as the kubelet's plugin manager does it: watch the node's
//! `plugins_registry` dir, ask each new socket `GetInfo`, pick the newest DRA service the
//! plugin offers (v1, else v1beta1), confirm with `NotifyRegistrationStatus`. When a plugin's
//! socket goes away or stops answering, its node's slices are wiped after a delay unless it
//! registers again in time.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dracheck_kubelet_api::registration::registration_client::RegistrationClient;
use dracheck_kubelet_api::registration::{InfoRequest, RegistrationStatus};
use dracheck_kubelet_api::{
    DRA_PLUGIN_TYPE, DRA_V1_SERVICE, DRA_V1BETA1_SERVICE, connect_unix, connect_unix_as_plugin_watcher,
};
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, DeleteParams, ListParams};
use tokio_util::sync::CancellationToken;

use super::config::NodeConfig;
use super::events::Log;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    V1,
    V1beta1,
}

#[derive(Debug, Clone)]
pub struct Plugin {
    pub driver: String,
    pub endpoint: PathBuf,
    pub service: Service,
    pub channel: tonic::transport::Channel,
    reg_socket: PathBuf,
}

/// The registered plugins of one node, by driver name.
#[derive(Default)]
pub struct Registry {
    plugins: Mutex<HashMap<String, Plugin>>,
    /// Sockets that failed registration, so they are not asked again until they change.
    refused: Mutex<HashMap<PathBuf, std::time::SystemTime>>,
    wipes: Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
}

impl Registry {
    pub fn get(&self, driver: &str) -> Option<Plugin> {
        self.plugins.lock().unwrap().get(driver).cloned()
    }

    pub fn drivers(&self) -> Vec<String> {
        self.plugins.lock().unwrap().keys().cloned().collect()
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
pub async fn watch(client: kube::Client, cfg: NodeConfig, registry: Arc<Registry>, log: Log, stop: CancellationToken) {
    let mut tick = 0u64;
    loop {
        scan(&client, &cfg, &registry, &log, tick.is_multiple_of(4)).await;
        tick += 1;
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
    for (_, pending) in registry.wipes.lock().unwrap().drain() {
        pending.abort();
    }
}

async fn scan(client: &kube::Client, cfg: &NodeConfig, registry: &Arc<Registry>, log: &Log, probe: bool) {
    let sockets = list_sockets(&cfg.registry_dir());
    // Plugins whose registration socket is gone, or whose service no longer accepts
    // connections (a crashed plugin leaves its socket files behind).
    let known: Vec<Plugin> = registry.plugins.lock().unwrap().values().cloned().collect();
    for p in known {
        let gone = !sockets.contains(&p.reg_socket) || (probe && !accepts(&p.endpoint).await);
        if gone {
            registry.plugins.lock().unwrap().remove(&p.driver);
            log.info(format!(
                "plugin {} unregistered; wiping its slices in {:?} unless it returns",
                p.driver, cfg.wipe_delay
            ));
            schedule_wipe(client, cfg, registry, log, &p.driver);
        }
    }
    for socket in sockets {
        let registered = registry.plugins.lock().unwrap().values().any(|p| p.reg_socket == socket);
        let mtime = std::fs::metadata(&socket).and_then(|m| m.modified()).ok();
        let refused_same = mtime.is_some() && registry.refused.lock().unwrap().get(&socket) == mtime.as_ref();
        if registered || refused_same {
            continue;
        }
        match register(&socket).await {
            Ok(plugin) => {
                log.info(format!(
                    "registered DRA plugin {} ({:?}) at {}",
                    plugin.driver,
                    plugin.service,
                    plugin.endpoint.display()
                ));
                if let Some(w) = registry.wipes.lock().unwrap().remove(&plugin.driver) {
                    w.abort();
                }
                registry.refused.lock().unwrap().remove(&socket);
                registry.plugins.lock().unwrap().insert(plugin.driver.clone(), plugin);
            }
            Err(e) => {
                log.warn("FailedRegistration", format!("plugin socket {}: {e}", socket.display()));
                if let Some(m) = mtime {
                    registry.refused.lock().unwrap().insert(socket, m);
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

async fn register(socket: &Path) -> Result<Plugin, String> {
    // With the `:authority` the kubelet's plugin watcher sends, which plain h2 servers refuse;
    // the endpoint below is dialled as `unix:`, with `localhost`, as the kubelet does.
    let channel = connect_unix_as_plugin_watcher(socket).await.map_err(|e| e.to_string())?;
    let mut client = RegistrationClient::new(channel);
    let info = tokio::time::timeout(Duration::from_secs(10), client.get_info(InfoRequest {}))
        .await
        .map_err(|_| "GetInfo timed out after 10s".to_string())?
        .map_err(|e| format!("GetInfo failed: {e}"))?
        .into_inner();
    let verdict = choose(&info.r#type, &info.supported_versions);
    let notify = |registered: bool, error: String| RegistrationStatus { plugin_registered: registered, error };
    let service = match verdict {
        Ok(s) => s,
        Err(e) => {
            let _ = client.notify_registration_status(notify(false, e.clone())).await;
            return Err(e);
        }
    };
    let endpoint = PathBuf::from(&info.endpoint);
    let plugin_channel = match connect_unix(&endpoint).await {
        Ok(c) => c,
        Err(e) => {
            let msg = format!("cannot connect to the plugin endpoint {}: {e}", endpoint.display());
            let _ = client.notify_registration_status(notify(false, msg.clone())).await;
            return Err(msg);
        }
    };
    client
        .notify_registration_status(notify(true, String::new()))
        .await
        .map_err(|e| format!("NotifyRegistrationStatus failed: {e}"))?;
    Ok(Plugin { driver: info.name, endpoint, service, channel: plugin_channel, reg_socket: socket.to_path_buf() })
}

/// The kubelet accepts `DRAPlugin` plugins and prefers the v1 service over v1beta1.
fn choose(plugin_type: &str, versions: &[String]) -> Result<Service, String> {
    if plugin_type != DRA_PLUGIN_TYPE {
        return Err(format!("plugin type {plugin_type:?} is not {DRA_PLUGIN_TYPE:?}"));
    }
    if versions.iter().any(|v| v == DRA_V1_SERVICE) {
        Ok(Service::V1)
    } else if versions.iter().any(|v| v == DRA_V1BETA1_SERVICE) {
        Ok(Service::V1beta1)
    } else {
        Err(format!("none of the supported versions {versions:?} is {DRA_V1_SERVICE} or {DRA_V1BETA1_SERVICE}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefers_v1_and_falls_back_to_v1beta1() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(choose("DRAPlugin", &v(&["v1beta1.DRAPlugin", "v1.DRAPlugin"])), Ok(Service::V1));
        assert_eq!(choose("DRAPlugin", &v(&["v1beta1.DRAPlugin"])), Ok(Service::V1beta1));
        assert!(choose("DRAPlugin", &v(&["v1alpha4.DRAPlugin"])).is_err());
        assert!(choose("CSIPlugin", &v(&["v1.DRAPlugin"])).is_err());
    }
}
