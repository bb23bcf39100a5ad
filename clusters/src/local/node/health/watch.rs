//! One plugin instance's health stream, as the 1.37 kubelet keeps it
//! (`plugin/dra_plugin_manager.go` add/remove, `Manager.HandleWatchResourcesStream`): a plugin
//! whose `supported_versions` list a health service gets `NodeWatchResources` called on its
//! endpoint once it registers (v1 preferred over v1alpha1, `pickHealthService`). Each report
//! goes into the node's [`HealthCache`]. A stream that ends or fails is opened again 5 s
//! later (`wait.UntilWithContext`), for as long as the instance stays registered; a plugin
//! that answers Unimplemented is not asked again. Whenever a stream ends, the driver's health
//! is forgotten, as upstream's handler does on its way out. A stopped kubelet forgets nothing:
//! its process just ends, and the checkpoint keeps what it knew.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use dracheck_kubelet_api::{
    HEALTH_V1_SERVICE, HEALTH_V1ALPHA1_SERVICE, SocketError, connect_unix, health_v1, health_v1alpha1, rewire,
};
use futures::StreamExt as _;
use futures::stream::BoxStream;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{DeviceHealth, HealthCache};
use crate::local::node::events::Log;

/// The period of upstream's `wait.UntilWithContext`: the next attempt starts this long after
/// a stream ended or could not be opened.
const RETRY: Duration = Duration::from_secs(5);

/// The health service a plugin is watched through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    V1,
    V1alpha1,
}

impl Service {
    /// The `supported_versions` entry that names it.
    pub fn name(self) -> &'static str {
        match self {
            Service::V1 => HEALTH_V1_SERVICE,
            Service::V1alpha1 => HEALTH_V1ALPHA1_SERVICE,
        }
    }
}

/// `pickHealthService`: the newest health service both the plugin and the kubelet know, or
/// none (the service is optional).
pub fn pick_service(supported: &[String]) -> Option<Service> {
    [Service::V1, Service::V1alpha1].into_iter().find(|s| supported.iter().any(|v| v == s.name()))
}

/// Why no stream could be opened: the endpoint did not take a connection (tried again), or
/// the call was answered with an error (as upstream, where grpc-go returns it from the first
/// `Recv`, this ends a stream).
#[derive(Debug, thiserror::Error)]
enum OpenError {
    #[error(transparent)]
    Dial(#[from] SocketError),
    #[error("NodeWatchResources: {0}")]
    Call(#[source] tonic::Status),
}

/// How a stream ended.
#[derive(Debug)]
enum End {
    /// The plugin closed it.
    Eof,
    /// The instance unregistered or was replaced.
    Stopped,
    Failed(tonic::Status),
}

type Reports = BoxStream<'static, Result<health_v1::NodeWatchResourcesResponse, tonic::Status>>;

/// The health stream of one registered plugin instance.
pub struct Watch {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Watch {
    pub fn start(cache: Arc<HealthCache>, log: Log, driver: String, endpoint: PathBuf, service: Service) -> Watch {
        let stop = CancellationToken::new();
        let task = tokio::spawn(run(cache, log, driver, endpoint, service, stop.clone()));
        Watch { stop, task }
    }

    /// The instance unregistered or was replaced: its stream ends and the driver's health is
    /// forgotten, as upstream's deregistration cancels the stream. Returns once that is done,
    /// so a successor's first report cannot be forgotten with it.
    pub async fn stop(mut self) {
        self.stop.cancel();
        let _ = (&mut self.task).await;
    }

    /// The kubelet stops: the stream goes without anything on its way out, as with a kubelet
    /// process that ends.
    pub async fn abort(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run(
    cache: Arc<HealthCache>,
    log: Log,
    driver: String,
    endpoint: PathBuf,
    service: Service,
    stop: CancellationToken,
) {
    let at = format!("plugin {driver} at {} ({})", endpoint.display(), service.name());
    // A plugin that stays down fails every attempt alike; said once per distinct failure.
    let mut last_failure: Option<String> = None;
    loop {
        let opened = tokio::select! {
            _ = stop.cancelled() => return,
            opened = open(&endpoint, service) => opened,
        };
        let end = match opened {
            Ok(reports) => {
                log.info(format!("health stream of {at} opened"));
                last_failure = None;
                receive(&cache, &driver, reports, &stop).await
            }
            Err(OpenError::Call(status)) => End::Failed(status),
            Err(e @ OpenError::Dial(_)) => {
                let failure = e.to_string();
                if last_failure.as_ref() != Some(&failure) {
                    log.info(format!("health stream of {at} not opened, trying again every {RETRY:?}: {failure}"));
                    last_failure = Some(failure);
                }
                if sleep_or_stop(&stop).await {
                    return;
                }
                continue;
            }
        };
        cache.clear_driver(&driver);
        match end {
            End::Stopped => {
                log.info(format!(
                    "health stream of {at} closed: the plugin unregistered; its devices' health is forgotten"
                ));
                return;
            }
            End::Failed(status) if status.code() == tonic::Code::Unimplemented => {
                // Upstream stops watching; a plugin that gains support registers again.
                log.info(format!(
                    "{at} lists the health service but does not implement NodeWatchResources ({}); its health is not watched",
                    status.message()
                ));
                return;
            }
            End::Eof => {
                log.info(format!(
                    "health stream of {at} ended by the plugin; its devices' health is forgotten; opening it again in {RETRY:?}"
                ));
            }
            End::Failed(status) => {
                let failure = format!("{:?}: {}", status.code(), status.message());
                if last_failure.as_ref() != Some(&failure) {
                    log.warn(
                        "HealthStreamFailed",
                        format!("{at}: {failure}; its devices' health is forgotten; opening it again in {RETRY:?}"),
                    );
                    last_failure = Some(failure);
                }
            }
        }
        if sleep_or_stop(&stop).await {
            return;
        }
    }
}

/// Waits [`RETRY`]; `true` if the watch was stopped meanwhile.
async fn sleep_or_stop(stop: &CancellationToken) -> bool {
    tokio::select! {
        _ = stop.cancelled() => true,
        _ = tokio::time::sleep(RETRY) => false,
    }
}

/// Calls `NodeWatchResources` on a connection of its own (upstream shares the plugin's; the
/// plugin sees the same call). v1alpha1 reports are wire-identical to v1 ones.
async fn open(endpoint: &std::path::Path, service: Service) -> Result<Reports, OpenError> {
    let channel = connect_unix(endpoint).await?;
    let reports: Reports = match service {
        Service::V1 => {
            use health_v1::dra_resource_health_client::DraResourceHealthClient;
            let mut client = DraResourceHealthClient::new(channel);
            let call = client.node_watch_resources(health_v1::NodeWatchResourcesRequest {});
            call.await.map_err(OpenError::Call)?.into_inner().boxed()
        }
        Service::V1alpha1 => {
            use health_v1alpha1::dra_resource_health_client::DraResourceHealthClient;
            let mut client = DraResourceHealthClient::new(channel);
            let call = client.node_watch_resources(health_v1alpha1::NodeWatchResourcesRequest {});
            let stream = call.await.map_err(OpenError::Call)?.into_inner();
            let take = |m: health_v1alpha1::NodeWatchResourcesResponse| {
                rewire(&m).map_err(|e| tonic::Status::internal(format!("decoding a v1alpha1 report: {e}")))
            };
            stream.map(move |r| r.and_then(take)).boxed()
        }
    };
    Ok(reports)
}

/// Takes reports into the cache until the stream ends or the watch is stopped.
async fn receive(cache: &HealthCache, driver: &str, mut reports: Reports, stop: &CancellationToken) -> End {
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => return End::Stopped,
            next = reports.next() => next,
        };
        match next {
            None => return End::Eof,
            Some(Err(status)) => return End::Failed(status),
            Some(Ok(report)) => {
                let received = SystemTime::now();
                cache.update(driver, report.devices.iter().map(|d| DeviceHealth::from_report(d, received)).collect());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use dracheck_kubelet_api::UnixSocket;
    use health_v1::dra_resource_health_server::{DraResourceHealth as V1, DraResourceHealthServer as V1Server};
    use health_v1alpha1::dra_resource_health_server::{
        DraResourceHealth as V1alpha1, DraResourceHealthServer as V1alpha1Server,
    };
    use tokio::sync::mpsc;

    use super::super::{Health, Reading};
    use super::*;

    /// A plugin's health service: each call streams what the test sends, until the test
    /// drops its sender (the plugin ends the stream).
    struct Plugin {
        calls: AtomicUsize,
        reports: tokio::sync::Mutex<Option<mpsc::Receiver<health_v1::NodeWatchResourcesResponse>>>,
    }

    impl Plugin {
        fn new() -> (Arc<Plugin>, mpsc::Sender<health_v1::NodeWatchResourcesResponse>) {
            let (tx, rx) = mpsc::channel(4);
            (Arc::new(Plugin { calls: AtomicUsize::new(0), reports: tokio::sync::Mutex::new(Some(rx)) }), tx)
        }

        async fn stream<T: Send + 'static>(
            &self,
            convert: fn(health_v1::NodeWatchResourcesResponse) -> T,
        ) -> BoxStream<'static, Result<T, tonic::Status>> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let rx = self.reports.lock().await.take();
            futures::stream::unfold(rx, move |rx| async move {
                let mut rx = rx?;
                let next = rx.recv().await?;
                Some((Ok(convert(next)), Some(rx)))
            })
            .boxed()
        }
    }

    #[tonic::async_trait]
    impl V1 for Plugin {
        type NodeWatchResourcesStream = Reports;
        async fn node_watch_resources(
            &self,
            _: tonic::Request<health_v1::NodeWatchResourcesRequest>,
        ) -> Result<tonic::Response<Reports>, tonic::Status> {
            Ok(tonic::Response::new(self.stream(|r| r).await))
        }
    }

    #[tonic::async_trait]
    impl V1alpha1 for Plugin {
        type NodeWatchResourcesStream =
            BoxStream<'static, Result<health_v1alpha1::NodeWatchResourcesResponse, tonic::Status>>;
        async fn node_watch_resources(
            &self,
            _: tonic::Request<health_v1alpha1::NodeWatchResourcesRequest>,
        ) -> Result<tonic::Response<Self::NodeWatchResourcesStream>, tonic::Status> {
            Ok(tonic::Response::new(self.stream(|r| rewire(&r).expect("wire-identical")).await))
        }
    }

    fn unhealthy(device: &str) -> health_v1::NodeWatchResourcesResponse {
        health_v1::NodeWatchResourcesResponse {
            devices: vec![health_v1::DeviceHealth {
                device: Some(health_v1::DeviceIdentifier { pool_name: "node-1".into(), device_name: device.into() }),
                health: health_v1::HealthStatus::Unhealthy as i32,
                last_updated_time: 0,
                health_check_timeout_seconds: 0,
                message: "ECC errors".into(),
            }],
        }
    }

    struct Node {
        _dir: tempfile::TempDir,
        endpoint: PathBuf,
        cache: Arc<HealthCache>,
        log: Log,
        log_path: PathBuf,
        shutdown: CancellationToken,
    }

    /// A node's cache and a plugin serving `router` on its endpoint.
    async fn node(router: tonic::transport::server::Router) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let endpoint = dir.path().join("dra.sock");
        let log_path = dir.path().join("kubelet.log");
        let log = Log::open("node-1", &log_path).unwrap();
        let cache = Arc::new(HealthCache::load(dir.path().join("dra_health_state"), log.clone()));
        let shutdown = CancellationToken::new();
        let socket = UnixSocket::bind(&endpoint).unwrap();
        let until = shutdown.clone();
        tokio::spawn(async move { socket.serve(router, until.cancelled_owned()).await });
        Node { _dir: dir, endpoint, cache, log, log_path, shutdown }
    }

    async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
        for _ in 0..100 {
            if done() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("not within 5 s: {what}");
    }

    const DRIVER: &str = "gpu.example.com";

    #[tokio::test]
    async fn reports_reach_the_cache_and_an_unregistered_plugins_health_is_forgotten() {
        let (plugin, reports) = Plugin::new();
        let n = node(tonic::transport::Server::builder().add_service(V1Server::from_arc(plugin.clone()))).await;
        let watch = Watch::start(n.cache.clone(), n.log.clone(), DRIVER.into(), n.endpoint.clone(), Service::V1);
        reports.send(unhealthy("gpu-0")).await.unwrap();
        eventually("the report is in the cache", || {
            n.cache.read(DRIVER, "node-1", "gpu-0").health == Health::Unhealthy
        })
        .await;
        assert_eq!(n.cache.read(DRIVER, "node-1", "gpu-0").message, "ECC errors");
        assert_eq!(n.cache.take_changed().len(), 1, "the change is queued for the pod worker");

        watch.stop().await;
        assert_eq!(n.cache.read(DRIVER, "node-1", "gpu-0"), Reading::UNKNOWN);
        assert_eq!(plugin.calls.load(Ordering::SeqCst), 1);
        let log = std::fs::read_to_string(&n.log_path).unwrap();
        assert!(log.contains("health stream of plugin gpu.example.com") && log.contains("opened"), "{log}");
        assert!(log.contains("the plugin unregistered"), "{log}");
        n.shutdown.cancel();
    }

    #[tokio::test]
    async fn a_stopped_kubelet_keeps_what_it_knew_and_v1alpha1_reports_read_as_v1() {
        let (plugin, reports) = Plugin::new();
        let n = node(tonic::transport::Server::builder().add_service(V1alpha1Server::from_arc(plugin))).await;
        let watch = Watch::start(n.cache.clone(), n.log.clone(), DRIVER.into(), n.endpoint.clone(), Service::V1alpha1);
        reports.send(unhealthy("gpu-1")).await.unwrap();
        eventually("the report is in the cache", || {
            n.cache.read(DRIVER, "node-1", "gpu-1").health == Health::Unhealthy
        })
        .await;
        watch.abort().await;
        assert_eq!(n.cache.read(DRIVER, "node-1", "gpu-1").health, Health::Unhealthy);
        n.shutdown.cancel();
    }

    #[tokio::test]
    async fn a_stream_the_plugin_ends_forgets_the_drivers_health() {
        let (plugin, reports) = Plugin::new();
        let n = node(tonic::transport::Server::builder().add_service(V1Server::from_arc(plugin))).await;
        let watch = Watch::start(n.cache.clone(), n.log.clone(), DRIVER.into(), n.endpoint.clone(), Service::V1);
        reports.send(unhealthy("gpu-0")).await.unwrap();
        eventually("the report is in the cache", || {
            n.cache.read(DRIVER, "node-1", "gpu-0").health == Health::Unhealthy
        })
        .await;
        drop(reports);
        eventually("the health is forgotten", || n.cache.read(DRIVER, "node-1", "gpu-0") == Reading::UNKNOWN).await;
        assert!(!watch.task.is_finished(), "it opens the stream again after {RETRY:?}");
        watch.stop().await;
        n.shutdown.cancel();
    }

    #[tokio::test]
    async fn a_plugin_without_the_service_it_lists_is_not_asked_again() {
        // It serves v1alpha1 only, but is watched through v1: Unimplemented.
        let (plugin, _reports) = Plugin::new();
        let n = node(tonic::transport::Server::builder().add_service(V1alpha1Server::from_arc(plugin.clone()))).await;
        let watch = Watch::start(n.cache.clone(), n.log.clone(), DRIVER.into(), n.endpoint.clone(), Service::V1);
        eventually("the watch gives up", || watch.task.is_finished()).await;
        assert_eq!(plugin.calls.load(Ordering::SeqCst), 0);
        let log = std::fs::read_to_string(&n.log_path).unwrap();
        assert!(log.contains("does not implement NodeWatchResources"), "{log}");
        n.shutdown.cancel();
    }

    #[test]
    fn the_newest_health_service_both_know_is_picked_and_none_is_fine() {
        let v = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let both = v(&["v1.DRAPlugin", "v1alpha1.DRAResourceHealth", "v1.DRAResourceHealth"]);
        assert_eq!(pick_service(&both), Some(Service::V1));
        assert_eq!(pick_service(&v(&["v1.DRAPlugin", "v1alpha1.DRAResourceHealth"])), Some(Service::V1alpha1));
        assert_eq!(pick_service(&v(&["v1.DRAPlugin", "v1beta1.DRAPlugin"])), None);
        assert_eq!(pick_service(&v(&["v2.DRAResourceHealth"])), None);
    }
}
