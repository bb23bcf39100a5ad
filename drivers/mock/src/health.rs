//! Device health (ResourceHealthStatus, beta and on in Kubernetes 1.36 and 1.37): the mock serves
//! the kubelet's optional `DRAResourceHealth` service, which the kubelet watches where the
//! plugin lists it at registration and shows in the pods' `allocatedResourcesStatus`.
//!
//! What the mock's "health checks" find is its inventory (`healthy: false`) plus the node's
//! health file, `<state dir>/unhealthy` (a device name a line), which it reads every second as
//! it reads the inventory: a vendor's driver would poll its hardware (NVML's XID events, …);
//! the file lets the suite turn a device unhealthy while the driver runs. An unhealthy device
//! is also published with the unhealthy taint, as a device the inventory marks so.
//!
//! The stream sends every device of the pool at once, again on each change, and again every
//! [`RESEND`]: the kubelet takes a device whose report is older than its timeout (30 s by
//! default) to be of unknown health.

use std::collections::BTreeSet;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use dracheck_kubelet_api::{health_v1, health_v1alpha1, rewire};
use futures::Stream;
use tokio::sync::watch;
use tonic::{Request, Response, Status};

use crate::faults::{Fault, Faults};
use crate::inventory::Pool;
use crate::log;

/// The node's health file, in the driver's state dir.
pub const HEALTH_FILE: &str = "unhealthy";

/// How often the full report is sent again without a change: well within the kubelet's
/// default timeout of 30 s.
pub const RESEND: Duration = Duration::from_secs(10);

/// The device names the health file at `path` lists (none where it does not exist).
pub fn read(path: &Path) -> BTreeSet<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// Writes the health file at `path` so that it lists exactly `unhealthy`: what [`read`] reads.
pub fn write(path: &Path, unhealthy: &[String]) -> std::io::Result<()> {
    std::fs::write(path, unhealthy.iter().map(|d| format!("{d}\n")).collect::<String>())
}

/// `pool` with the devices `unhealthy` names marked unhealthy (the others as the inventory has
/// them). Names the pool lacks are logged: a file naming no device of the node changes nothing.
pub fn apply(mut pool: Pool, unhealthy: &BTreeSet<String>) -> Pool {
    for name in unhealthy {
        match pool.devices.iter_mut().find(|d| d.name() == name) {
            Some(device) => device.mark_unhealthy(),
            None => log!("the health file names {name}, which is no device of this node; ignored"),
        }
    }
    pool
}

/// The service, over the pool the driver publishes (health included).
#[derive(Clone)]
pub struct Health {
    pub node: String,
    pub devices: watch::Receiver<Arc<Pool>>,
    pub faults: Arc<Faults>,
}

/// One report of every device of `pool`, pool name `node`.
fn report(node: &str, pool: &Pool, faults: &Faults) -> health_v1::NodeWatchResourcesResponse {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let mut healthy: Vec<bool> = pool.devices.iter().map(|d| d.healthy()).collect();
    if faults.has(&Fault::HealthWrongDevice) && !healthy.is_empty() {
        // Each device reported with its neighbour's health: an off-by-one in the driver's
        // mapping from its hardware's index to the published device.
        healthy.rotate_right(1);
    }
    let devices = pool
        .devices
        .iter()
        .zip(healthy)
        .map(|(d, healthy)| health_v1::DeviceHealth {
            device: Some(health_v1::DeviceIdentifier {
                pool_name: node.to_string(),
                device_name: d.name().to_string(),
            }),
            health: if healthy { health_v1::HealthStatus::Healthy } else { health_v1::HealthStatus::Unhealthy }.into(),
            last_updated_time: now,
            health_check_timeout_seconds: 0,
            message: if healthy { String::new() } else { "the mock's health check finds the device faulty".into() },
        })
        .collect();
    health_v1::NodeWatchResourcesResponse { devices }
}

type Reports<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

impl Health {
    /// The stream of reports: one now, then one per change of the pool or per [`RESEND`].
    fn watch(&self) -> Reports<health_v1::NodeWatchResourcesResponse> {
        let (node, faults) = (self.node.clone(), self.faults.clone());
        let mut devices = self.devices.clone();
        devices.mark_changed();
        let resend = tokio::time::interval_at(tokio::time::Instant::now() + RESEND, RESEND);
        log!("NodeWatchResources: the kubelet watches the health of {node}'s devices");
        Box::pin(futures::stream::unfold((devices, resend), move |(mut devices, mut resend)| {
            let (node, faults) = (node.clone(), faults.clone());
            async move {
                tokio::select! {
                    changed = devices.changed() => changed.ok()?,
                    _ = resend.tick() => {}
                }
                let pool = Arc::clone(&devices.borrow_and_update());
                let sent = report(&node, &pool, &faults);
                let sick: Vec<&str> = sent
                    .devices
                    .iter()
                    .filter(|d| d.health == i32::from(health_v1::HealthStatus::Unhealthy))
                    .filter_map(|d| d.device.as_ref().map(|d| d.device_name.as_str()))
                    .collect();
                if !sick.is_empty() {
                    log!("health: {} device(s), unhealthy: {}", sent.devices.len(), sick.join(", "));
                }
                Some((Ok(sent), (devices, resend)))
            }
        }))
    }

    pub fn v1(self) -> health_v1::dra_resource_health_server::DraResourceHealthServer<V1> {
        health_v1::dra_resource_health_server::DraResourceHealthServer::new(V1(self))
    }

    pub fn v1alpha1(self) -> health_v1alpha1::dra_resource_health_server::DraResourceHealthServer<V1alpha1> {
        health_v1alpha1::dra_resource_health_server::DraResourceHealthServer::new(V1alpha1(self))
    }
}

pub struct V1(Health);

#[tonic::async_trait]
impl health_v1::dra_resource_health_server::DraResourceHealth for V1 {
    type NodeWatchResourcesStream = Reports<health_v1::NodeWatchResourcesResponse>;

    async fn node_watch_resources(
        &self,
        _: Request<health_v1::NodeWatchResourcesRequest>,
    ) -> Result<Response<Self::NodeWatchResourcesStream>, Status> {
        Ok(Response::new(self.0.watch()))
    }
}

/// The same reports under the package 1.36's kubelet calls.
pub struct V1alpha1(Health);

#[tonic::async_trait]
impl health_v1alpha1::dra_resource_health_server::DraResourceHealth for V1alpha1 {
    type NodeWatchResourcesStream = Reports<health_v1alpha1::NodeWatchResourcesResponse>;

    async fn node_watch_resources(
        &self,
        _: Request<health_v1alpha1::NodeWatchResourcesRequest>,
    ) -> Result<Response<Self::NodeWatchResourcesStream>, Status> {
        use futures::StreamExt;
        Ok(Response::new(Box::pin(self.0.watch().map(|r| {
            r.and_then(|r| rewire(&r).map_err(|e| Status::internal(format!("re-encoding a health report: {e}"))))
        }))))
    }
}
