//! What an emulated node says: its own log file (kept as evidence) and Kubernetes Events on
//! pods, with the reasons a kubelet uses.

use std::io::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, PostParams};

#[derive(Clone)]
pub struct Log {
    node: String,
    file: Arc<Mutex<std::fs::File>>,
}

impl Log {
    pub fn open(node: &str, path: &Path) -> std::io::Result<Log> {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Log { node: node.to_string(), file: Arc::new(Mutex::new(file)) })
    }

    pub fn info(&self, msg: impl AsRef<str>) {
        self.write("I", msg.as_ref());
    }

    pub fn warn(&self, reason: &str, msg: impl AsRef<str>) {
        self.write("W", &format!("{reason}: {}", msg.as_ref()));
    }

    fn write(&self, level: &str, msg: &str) {
        // The same line for `-v`/`RUST_LOG` (target `dracheck::node`), where the file is not read.
        match level {
            "W" => tracing::warn!(target: "dracheck::node", node = %self.node, "{msg}"),
            _ => tracing::info!(target: "dracheck::node", node = %self.node, "{msg}"),
        }
        let line = format!("{} {level} [{}] {msg}\n", dracheck_objects::now(), self.node);
        let _ = self.file.lock().unwrap().write_all(line.as_bytes());
    }

    /// Records `reason` in the node log and as an Event on `pod`.
    pub async fn pod_event(&self, client: &kube::Client, pod: &Pod, warning: bool, reason: &str, message: &str) {
        let (ns, name) =
            (pod.metadata.namespace.clone().unwrap_or_default(), pod.metadata.name.clone().unwrap_or_default());
        if warning {
            self.warn(reason, format!("{ns}/{name}: {message}"));
        } else {
            self.info(format!("{reason}: {ns}/{name}: {message}"));
        }
        let now = Time(dracheck_objects::now());
        let event = Event {
            metadata: ObjectMeta {
                generate_name: Some(format!("{name}.")),
                namespace: Some(ns.clone()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(name),
                namespace: Some(ns.clone()),
                uid: pod.metadata.uid.clone(),
                ..ObjectReference::default()
            },
            reason: Some(reason.into()),
            message: Some(message.into()),
            type_: Some(if warning { "Warning" } else { "Normal" }.into()),
            source: Some(EventSource { component: Some("kubelet".into()), host: Some(self.node.clone()) }),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            count: Some(1),
            ..Event::default()
        };
        let events: Api<Event> = Api::namespaced(client.clone(), &ns);
        if let Err(e) = events.create(&PostParams::default(), &event).await {
            self.warn("EventNotRecorded", format!("{reason}: {e}"));
        }
    }
}
