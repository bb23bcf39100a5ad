//! One real kubelet per node: its configuration, its identities and its command line. The
//! kubelet's root dir is `/var/lib/kubelet`, as on every node, which the node's mount
//! namespace (`mountns`) binds to the node's root: the plugin dirs a host-process driver is
//! given (`<root>/plugins_registry`, `<root>/plugins/<driver>`) are the ones the kubelet
//! watches, and a chart's driver registers at the short, usual paths (a unix socket's path
//! has at most 107 bytes, which a kubelet root in a temp dir leaves too little of).

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::local::node::NodeConfig;
use crate::local::pki::Pki;

/// The files of one node's kubelet.
pub struct KubeletFiles {
    pub config: PathBuf,
    pub kubeconfig: PathBuf,
    pub log: PathBuf,
}

/// What the kubelet is told about its node.
pub struct KubeletSetup<'a> {
    pub node: &'a NodeConfig,
    pub server: &'a str,
    pub containerd_endpoint: String,
    /// The node's cgroup (`/<name>`): every pod of the node lives below it.
    pub cgroup_root: &'a str,
    pub port: u16,
    pub healthz_port: u16,
    /// `Name=bool,…` as the control plane has them.
    pub feature_gates: &'a str,
}

impl KubeletSetup<'_> {
    pub fn pod_logs_dir(&self) -> PathBuf {
        self.node.root.join("pod-logs")
    }

    /// The `KubeletConfiguration` (JSON is YAML, and needs no YAML writer).
    pub fn render(&self, pki: &Pki, serving_cert: &Path, serving_key: &Path) -> serde_json::Value {
        let root = &self.node.root;
        let ip = self.node.ip.to_string();
        let gates: serde_json::Map<String, serde_json::Value> = self
            .feature_gates
            .split(',')
            .filter_map(|e| e.split_once('='))
            .map(|(k, v)| (k.to_string(), serde_json::Value::Bool(v == "true")))
            .collect();
        serde_json::json!({
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": ip,
            "port": self.port,
            "healthzBindAddress": ip,
            "healthzPort": self.healthz_port,
            "readOnlyPort": 0,
            // The apiserver's requests (logs, exec) are authenticated by the cluster CA and
            // authorized through the API, as on any production node.
            "authentication": {
                "anonymous": { "enabled": false },
                "webhook": { "enabled": true },
                "x509": { "clientCAFile": pki.ca_file },
            },
            "authorization": { "mode": "Webhook" },
            "tlsCertFile": serving_cert,
            "tlsPrivateKeyFile": serving_key,
            "containerRuntimeEndpoint": self.containerd_endpoint,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root,
            "failCgroupV1": false,
            "failSwapOn": false,
            // The machine's resolver is not on loopback, and nothing may leave the machine.
            "resolvConf": root.join("resolv.conf"),
            "podLogsDir": self.pod_logs_dir(),
            "volumePluginDir": root.join("volume-plugins"),
            // Without CAP_SYS_RESOURCE a negative score cannot be set (see containerd's
            // restrict_oom_score_adj).
            "oomScoreAdj": 0,
            // The host's iptables are not the node's to change.
            "makeIPTablesUtilChains": false,
            // A busy shared disk must not evict the suite's pods.
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "nodefs.inodesFree": "1%",
                "imagefs.available": "1%",
            },
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": false,
            "featureGates": gates,
            "staticPodPath": "",
            "shutdownGracePeriod": "0s",
        })
    }

    /// Writes the config, the node's client identity and its kubeconfig.
    pub fn write(&self, pki: &Pki) -> Result<KubeletFiles> {
        let root = &self.node.root;
        let io =
            |what: &str| crate::error::ClusterError::io(format!("writing the kubelet's {what} for {}", self.node.name));
        // Its own `system:node:<name>` identity, so that the Node authorizer and
        // NodeRestriction judge what it does.
        let user = format!("system:node:{}", self.node.name);
        let client = pki.client(&user, Some("system:nodes"))?;
        let kubeconfig = root.join("kubelet.kubeconfig");
        pki.kubeconfig(&kubeconfig, self.server, &user, &client)?;
        let serving =
            pki.serving(&format!("kubelet-{}", self.node.name), &[&self.node.ip.to_string(), &self.node.name])?;
        let config = root.join("kubelet-config.yaml");
        let text = serde_json::to_string_pretty(&self.render(pki, &serving.cert, &serving.key))
            .map_err(|e| crate::error::ClusterError::io("rendering the kubelet config")(std::io::Error::other(e)))?;
        std::fs::write(&config, text).map_err(io("config"))?;
        std::fs::write(root.join("resolv.conf"), "nameserver 127.0.0.1\n").map_err(io("resolv.conf"))?;
        for dir in [self.pod_logs_dir(), root.join("volume-plugins")] {
            std::fs::create_dir_all(&dir).map_err(io("dirs"))?;
        }
        Ok(KubeletFiles { config, kubeconfig, log: root.join("kubelet.log") })
    }

    /// The command line; everything else is in the config file.
    pub fn args(&self, files: &KubeletFiles) -> Vec<String> {
        vec![
            format!("--config={}", files.config.display()),
            format!("--kubeconfig={}", files.kubeconfig.display()),
            format!("--root-dir={}", super::mountns::KUBELET_ROOT),
            format!("--hostname-override={}", self.node.name),
            format!("--node-ip={}", self.node.ip),
            // Registration, prepare and unprepare of DRA plugins are logged at 2 and below.
            "--v=2".into(),
        ]
    }
}

/// The node's cgroup names: the kubelet's root and containerd's (with its shims), both
/// starting with the cluster's prefix so that a later run finds them by name.
pub fn cgroup_names(cluster_prefix: &str, node: &str) -> (String, String) {
    (format!("{cluster_prefix}{node}"), format!("{cluster_prefix}{node}-runtime"))
}

/// A name unique to one cluster's state dir, for its cgroups: `dracheck-<hash>-`.
pub fn cluster_prefix(state_dir: &Path) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in state_dir.as_os_str().as_encoded_bytes() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("dracheck-{:08x}-", h as u32)
}

/// The Node's addresses. The kubelet refuses a loopback `--node-ip` ("nodeIP can't be
/// loopback address") and then reports none; written once with admin rights they stay.
pub async fn set_addresses(client: &kube::Client, name: &str, ip: Ipv4Addr) -> kube::Result<()> {
    use k8s_openapi::api::core::v1::Node;
    let nodes: kube::Api<Node> = kube::Api::all(client.clone());
    let patch = serde_json::json!({ "status": { "addresses": [
        { "type": "InternalIP", "address": ip.to_string() },
        { "type": "Hostname", "address": name },
    ]}});
    nodes.patch_status(name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_prefix_is_stable_and_differs_between_state_dirs() {
        let a = cluster_prefix(Path::new("/tmp/a"));
        assert_eq!(a, cluster_prefix(Path::new("/tmp/a")));
        assert_ne!(a, cluster_prefix(Path::new("/tmp/b")));
        assert!(a.starts_with("dracheck-") && a.ends_with('-') && a.len() == "dracheck-".len() + 9);
        let (kubelet, runtime) = cgroup_names(&a, "node-1");
        assert_eq!(runtime, format!("{kubelet}-runtime"));
    }
}
