//! kind clusters ready for DRA: the cluster config (feature gates, the release's
//! `resource.k8s.io` versions through `runtimeConfig`, CDI in containerd) and the check that
//! a Docker daemon answers, which kind needs and which the local cluster does not.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::local::versions::Release;

/// kind's node image of `release`.
pub fn node_image(release: &Release) -> String {
    format!("kindest/node:{}", release.version)
}

/// The kind config of a DRA-ready cluster: one control plane and `workers` workers of
/// `release`, `feature_gates` (`A=true,B=false`, already validated) on every component, every
/// `resource.k8s.io` version the release has served, and CDI switched on in containerd (both
/// the 1.x and 2.x config paths, so that any kind node image takes it).
pub fn config(release: &Release, feature_gates: &str, workers: usize) -> String {
    let mut out = String::from("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\n");
    let gates: Vec<(&str, &str)> = feature_gates.split(',').filter_map(|g| g.split_once('=')).collect();
    if !gates.is_empty() {
        out.push_str("featureGates:\n");
        for (name, value) in gates {
            out.push_str(&format!("  {name}: {value}\n"));
        }
    }
    let runtime: Vec<&str> = release.resource_api_versions.iter().copied().filter(|v| *v != "v1").collect();
    if !runtime.is_empty() {
        out.push_str("runtimeConfig:\n");
        for v in runtime {
            out.push_str(&format!("  resource.k8s.io/{v}: \"true\"\n"));
        }
    }
    out.push_str(
        "containerdConfigPatches:\n\
         - |-\n  [plugins.\"io.containerd.grpc.v1.cri\"]\n    enable_cdi = true\n\
         - |-\n  [plugins.\"io.containerd.cri.v1.runtime\"]\n    enable_cdi = true\n\
         nodes:\n",
    );
    let image = node_image(release);
    out.push_str(&format!("- role: control-plane\n  image: {image}\n"));
    for _ in 0..workers {
        out.push_str(&format!("- role: worker\n  image: {image}\n"));
    }
    out
}

/// The Docker daemon's version, or why none answers (within 10 s).
pub fn docker_daemon() -> Result<String, String> {
    let mut child = Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("the docker command cannot run ({e})"))?;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if child.try_wait().map_err(|e| e.to_string())?.is_some() {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err("`docker info` did not answer within 10s".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if out.status.success() && !version.is_empty() {
        Ok(version)
    } else {
        let said = String::from_utf8_lossy(&out.stderr);
        let said = said.lines().find(|l| !l.trim().is_empty()).unwrap_or("no answer").trim();
        Err(format!("`docker info` found no daemon: {said}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::versions::default_release;

    #[test]
    fn the_config_parses_as_yaml_with_the_dra_settings() {
        let text = config(default_release(), "DRAAdminAccess=true,DRAConsumableCapacity=false", 2);
        let v: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(v["featureGates"]["DRAAdminAccess"], true);
        assert_eq!(v["featureGates"]["DRAConsumableCapacity"], false);
        assert_eq!(v["runtimeConfig"]["resource.k8s.io/v1beta2"], "true");
        assert!(v["runtimeConfig"].get("resource.k8s.io/v1").is_none(), "v1 is on by default");
        let patches = v["containerdConfigPatches"].as_array().unwrap();
        assert!(patches.iter().all(|p| p.as_str().unwrap().contains("enable_cdi = true")));
        let nodes = v["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), 3);
        assert!(nodes.iter().all(|n| n["image"] == "kindest/node:v1.37.2"));
    }
}
