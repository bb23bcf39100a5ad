//! What the pods of a failed release say, read through the kube API (no kubectl): phase,
//! conditions and container states, the pod's last warnings, and the tail of its log where
//! the node can serve one.

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::api::{ListParams, LogParams};

/// At most this many pods are described, so that a DaemonSet on many nodes keeps the message
/// readable; they tend to fail alike.
const MAX_PODS: usize = 3;
const LOG_LINES: i64 = 8;

/// The pods of `namespace`, one indented block each.
pub async fn describe_pods(client: &kube::Client, namespace: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = match pods.list(&ListParams::default()).await {
        Ok(l) => l.items,
        Err(e) => return format!("  | (the pods of namespace {namespace} could not be read: {e})"),
    };
    if list.is_empty() {
        return format!("  | (namespace {namespace} has no pods: the release created none, or none was made yet)");
    }
    let mut out = Vec::new();
    for pod in list.iter().take(MAX_PODS) {
        out.extend(describe(client, &pods, pod).await);
    }
    if list.len() > MAX_PODS {
        out.push(format!("  | … and {} more pod(s)", list.len() - MAX_PODS));
    }
    out.join("\n")
}

async fn describe(client: &kube::Client, pods: &Api<Pod>, pod: &Pod) -> Vec<String> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    let status = pod.status.clone().unwrap_or_default();
    let node = spec.node_name.clone().unwrap_or_else(|| "no node".into());
    let mut out = vec![format!("  | pod {name} on {node}: {}", status.phase.clone().unwrap_or_else(|| "?".into()))];
    for c in status.conditions.iter().flatten().filter(|c| c.status != "True") {
        let why = [c.reason.clone(), c.message.clone()].into_iter().flatten().collect::<Vec<_>>().join(": ");
        out.push(format!(
            "  |   {} {}{}",
            c.type_,
            c.status,
            if why.is_empty() { String::new() } else { format!(" ({why})") }
        ));
    }
    for cs in status.container_statuses.iter().flatten() {
        let state = cs.state.clone().unwrap_or_default();
        let said = if let Some(w) = state.waiting {
            format!("waiting: {} {}", w.reason.unwrap_or_default(), w.message.unwrap_or_default())
        } else if let Some(t) = state.terminated {
            format!("terminated: {} (exit {})", t.reason.unwrap_or_default(), t.exit_code)
        } else {
            "running".into()
        };
        out.push(format!(
            "  |   container {}: {}, ready {}, restarts {}",
            cs.name,
            said.trim(),
            cs.ready,
            cs.restart_count
        ));
    }
    let events: Api<Event> = Api::namespaced(client.clone(), pod.metadata.namespace.as_deref().unwrap_or_default());
    let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
    match events.list(&lp).await {
        Ok(list) => {
            let mut warnings: Vec<&Event> =
                list.items.iter().filter(|e| e.type_.as_deref() == Some("Warning")).collect();
            warnings.sort_by_key(|e| e.last_timestamp.clone().map(|t| t.0));
            for e in warnings.iter().rev().take(2).rev() {
                out.push(format!(
                    "  |   event {}: {} (×{})",
                    e.reason.clone().unwrap_or_default(),
                    e.message.clone().unwrap_or_default().trim(),
                    e.count.unwrap_or(1)
                ));
            }
        }
        Err(e) => out.push(format!("  |   (events unavailable: {e})")),
    }
    for c in &spec.containers {
        let lp = LogParams { container: Some(c.name.clone()), tail_lines: Some(LOG_LINES), ..LogParams::default() };
        match pods.logs(&name, &lp).await {
            Ok(log) if log.trim().is_empty() => out.push(format!("  |   log of {}: empty", c.name)),
            Ok(log) => {
                out.push(format!("  |   log of {} (last lines):", c.name));
                out.extend(log.lines().filter(|l| !l.trim().is_empty()).map(|l| format!("  |     {l}")));
            }
            Err(e) => out.push(format!("  |   log of {} unavailable: {}", c.name, short(&e))),
        }
    }
    out
}

/// An API error as its message, without kube's wrapping.
fn short(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}
