//! An installed driver restarted the way an operator or an upgrade restarts it: its plugin's
//! pod on the node is deleted and its DaemonSet makes a new one.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, LogParams};

use super::error::{ApiContext, DisruptionError};
use super::target::DriverPods;

/// How long a DaemonSet gets to bring the plugin back on the node.
const BACK_WITHIN: Duration = Duration::from_secs(120);

async fn on_node(client: &kube::Client, pods: &DriverPods, node: &str) -> Result<Vec<Pod>, DisruptionError> {
    let api: Api<Pod> = match &pods.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let lp = ListParams::default().labels(&pods.selector).fields(&format!("spec.nodeName={node}"));
    Ok(api.list(&lp).await.doing(|| format!("listing the driver's pods ({})", pods.selector))?.items)
}

fn ready(p: &Pod) -> bool {
    let status = p.status.as_ref();
    let running = status.and_then(|s| s.phase.as_deref()) == Some("Running");
    let not_unready = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_none_or(|c| c.status == "True");
    running && not_unready && p.metadata.deletion_timestamp.is_none()
}

/// A ready pod of the driver on one of `nodes`, in their order.
pub async fn any_ready(
    client: &kube::Client,
    pods: &DriverPods,
    nodes: &[String],
) -> Result<Option<Pod>, DisruptionError> {
    for node in nodes {
        if let Some(p) = on_node(client, pods, node).await?.into_iter().find(ready) {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

/// Deletes the driver's running pod on `node` and waits for its replacement to be ready; the
/// time in between is the downtime.
pub async fn restart(client: &kube::Client, pods: &DriverPods, node: &str) -> Result<Duration, DisruptionError> {
    let old = on_node(client, pods, node)
        .await?
        .into_iter()
        .find(ready)
        .ok_or_else(|| DisruptionError::NoDriverPod { selector: pods.selector.clone(), node: node.into() })?;
    let (name, ns) =
        (old.metadata.name.clone().unwrap_or_default(), old.metadata.namespace.clone().unwrap_or_default());
    let old_uid = old.metadata.uid.clone();
    let started = Instant::now();
    Api::<Pod>::namespaced(client.clone(), &ns)
        .delete(&name, &DeleteParams::default())
        .await
        .doing(|| format!("deleting the driver's pod {ns}/{name}"))?;
    while started.elapsed() < BACK_WITHIN {
        let now = on_node(client, pods, node).await?;
        if now.iter().any(|p| p.metadata.uid != old_uid && ready(p)) {
            return Ok(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(DisruptionError::NotBack {
        pod: format!("{ns}/{name}"),
        selector: pods.selector.clone(),
        node: node.into(),
        within: BACK_WITHIN,
    })
}

/// The log tail of the driver's pod on `node`.
pub async fn log_tail(client: &kube::Client, pods: &DriverPods, node: &str, lines: usize) -> Option<String> {
    let pod = on_node(client, pods, node).await.ok()?.into_iter().find(|p| p.metadata.deletion_timestamp.is_none())?;
    let api: Api<Pod> = Api::namespaced(client.clone(), pod.metadata.namespace.as_deref()?);
    let lp = LogParams { tail_lines: Some(lines as i64), ..LogParams::default() };
    api.logs(pod.metadata.name.as_deref()?, &lp).await.ok()
}
