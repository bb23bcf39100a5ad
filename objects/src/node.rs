use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// Marks nodes that dracheck registered itself (as opposed to real kubelets' nodes).
pub const NODE_LABEL: &str = "dracheck.io/emulated-node";

/// A Ready, untainted Node with room for pods, addressed at `ip` (a 127.0.0.0/8 address).
pub fn node(name: &str, ip: &str) -> Node {
    let mut meta = crate::meta(name, None);
    let labels = meta.labels.get_or_insert_default();
    labels.insert("kubernetes.io/hostname".into(), name.into());
    labels.insert(NODE_LABEL.into(), "true".into());
    let resources = [("cpu", "8"), ("memory", "32Gi"), ("pods", "110")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect::<std::collections::BTreeMap<_, _>>();
    Node {
        metadata: meta,
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            capacity: Some(resources.clone()),
            allocatable: Some(resources),
            // No Hostname address: nothing may try to resolve an emulated node's name.
            addresses: Some(vec![NodeAddress { type_: "InternalIP".into(), address: ip.into() }]),
            conditions: Some(vec![ready_condition()]),
            ..NodeStatus::default()
        }),
    }
}

/// The current time as the API's timestamps hold it.
pub fn now() -> Timestamp {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Timestamp::new(since.as_secs() as i64, since.subsec_nanos() as i32).expect("a timestamp within jiff's range")
}

/// `Ready=True`, heartbeat now.
pub fn ready_condition() -> NodeCondition {
    let now = Time(now());
    NodeCondition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: Some("KubeletReady".into()),
        message: Some("dracheck emulated node is ready".into()),
        last_heartbeat_time: Some(now.clone()),
        last_transition_time: Some(now),
    }
}
