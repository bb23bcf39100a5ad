//! The command lines dracheck generates for the cluster providers and helm, reviewed through
//! snapshots in the top-level `snapshots/`: a change to how a K3s server is started or a
//! driver's chart installed shows in review.

use std::path::Path;
use std::time::Duration;

use dracheck_clusters::helm::{self, ReleaseSpec, Target};
use dracheck_clusters::local::versions::default_release;
use dracheck_clusters::{k3s, kind};

fn snapshot(name: &str, lines: Vec<String>) {
    insta::with_settings!({ snapshot_path => "../../snapshots/clusters", prepend_module_to_snapshot => false }, {
        insta::assert_snapshot!(name, lines.join("\n"));
    });
}

#[test]
fn k3s_server_args() {
    let release = default_release();
    let mut lines = vec![format!("image: {}:{}", k3s::IMAGE, k3s::image_tag(release))];
    lines.extend(k3s::server_args("DRAAdminAccess=true,DRAConsumableCapacity=true"));
    snapshot("k3s-server-args", lines);
}

#[test]
fn kind_create_args() {
    let args = kind::create_args(
        "dracheck-1a2b3c",
        Path::new("/tmp/dracheck-kind/kind.yaml"),
        Path::new("/tmp/dracheck-kind/kubeconfig"),
        Duration::from_secs(300),
    );
    snapshot("kind-create-args", args);
}

#[test]
fn helm_install_and_uninstall_args() {
    let spec = ReleaseSpec {
        name: "dra-driver-nvidia-gpu".into(),
        namespace: "dra-driver-nvidia-gpu".into(),
        chart: "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu".into(),
        version: Some("0.4.0".into()),
        values: vec!["gpuResourcesEnabledOverride=true".into()],
        timeout: Duration::from_secs(300),
    };
    let target = Target { kubeconfig: "/home/me/.kube/config".into(), context: Some("gpu-cluster".into()) };
    let mut lines = vec!["# helm 4".to_string(), helm::install_args(4, &spec, &target).join(" ")];
    lines.push(helm::uninstall_args(4, &spec, &target).join(" "));
    lines.push("# helm 3".into());
    lines.push(helm::install_args(3, &spec, &target).join(" "));
    snapshot("helm-args", lines);
}
