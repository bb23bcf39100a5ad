//! `conformance --install helm`: which chart installs which `--driver`, and installing it into
//! the run's cluster before the run (removed again after it, see `dracheck_clusters::helm`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use dracheck_clusters::ClusterError;
use dracheck_clusters::helm::{self, Helm, Installed, ReleaseSpec, Target};
use dracheck_clusters::local::Progress;
use dracheck_suites::engine::target::DriverPods;

use crate::exit;

/// A failure before any verdict: the exit code and the message.
pub type Early = (u8, String);

#[derive(Debug, Clone, Args)]
pub struct InstallArgs {
    /// `helm`: install the driver's chart before the run and uninstall it after, also on
    /// Ctrl-C or an error (with --cluster kubeconfig; kind and k3s clusters always get it).
    #[arg(long, value_name = "helm")]
    pub install: Option<String>,
    /// The chart to install instead of the driver's own: a directory, an archive or a
    /// reference such as oci://….
    #[arg(long, value_name = "PATH_OR_REF")]
    pub chart: Option<String>,
    /// A chart value for `helm install --set` (repeatable), e.g. --set kubeletPlugin.numDevices=4.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub values: Vec<String>,
    /// The helm binary (default: helm on PATH, else helm v4 built from its Go module).
    #[arg(long, value_name = "PATH")]
    pub helm: Option<PathBuf>,
    /// Seconds the driver's release may take to become ready (helm install --wait), and then
    /// to publish its ResourceSlices.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub install_timeout: u64,
    /// With --cluster local: an image archive (docker-archive or OCI, as `docker save` or
    /// `skopeo copy` write it) to import into every node before the chart is installed
    /// (repeatable); the local cluster's nodes pull nothing. --driver example's image is built
    /// from its Go module without it.
    #[arg(long, value_name = "PATH")]
    pub image_archive: Vec<PathBuf>,
}

/// Where a known driver's chart comes from.
enum Source {
    /// A directory of a Go module the driver's recipe pins: `(module@version, path in it)`.
    Module(fn() -> dracheck_clusters::gobuild::GoRecipe, &'static str, &'static str),
    /// A chart reference with its version.
    Reference(&'static str, &'static str),
}

/// How a known driver is installed, as its own documentation does it.
struct DriverChart {
    release: &'static str,
    namespace: &'static str,
    source: Source,
    values: &'static [&'static str],
    /// The labels the chart gives its kubelet-plugin pods (besides the release's instance
    /// label), so that driver restarts can find them; `None` where not verified.
    plugin_pods: Option<&'static str>,
    /// The image the chart runs, where dracheck builds it for the local cluster's nodes.
    local_image: Option<&'static str>,
}

fn known(driver: &str) -> Option<DriverChart> {
    match driver {
        // The chart of the release the suite builds the plugin from, out of the same module.
        "example" => Some(DriverChart {
            release: "dra-example-driver",
            namespace: "dra-example-driver",
            source: Source::Module(
                dracheck_example_driver::recipe,
                "sigs.k8s.io/dra-example-driver@v0.4.0",
                "deployments/helm/dra-example-driver",
            ),
            values: &[],
            // templates/kubeletplugin.yaml
            plugin_pods: Some("app.kubernetes.io/component=kubeletplugin"),
            // values.yaml's image.repository, tagged with the chart's appVersion.
            local_image: Some("registry.k8s.io/dra-example-driver/dra-example-driver:v0.4.0"),
        }),
        // Without the override the chart refuses to install next to the device plugin
        // (templates/validation.yaml), which a DRA-only cluster does not run.
        "nvidia" => Some(DriverChart {
            release: "dra-driver-nvidia-gpu",
            namespace: "dra-driver-nvidia-gpu",
            source: Source::Reference("oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu", "0.4.0"),
            values: &["gpuResourcesEnabledOverride=true"],
            plugin_pods: None,
            local_image: None,
        }),
        _ => None,
    }
}

impl InstallArgs {
    /// The kubelet-plugin pods of `driver`'s own chart installed as `spec`, for driver
    /// restarts; `None` for another chart or where the chart's labels are not known.
    pub fn plugin_pods(&self, driver: &str, spec: &ReleaseSpec) -> Option<DriverPods> {
        let labels = known(driver).filter(|_| self.chart.is_none())?.plugin_pods?;
        Some(DriverPods {
            namespace: Some(spec.namespace.clone()),
            selector: format!("app.kubernetes.io/instance={},{labels}", spec.name),
        })
    }

    /// `--install` as given: `Ok(true)` for helm.
    pub fn wanted(&self) -> Result<bool, Early> {
        match self.install.as_deref() {
            None if self.chart.is_some() || !self.values.is_empty() => Err((
                exit::BAD_INPUT,
                "--chart and --set choose what --install helm installs: add --install helm".into(),
            )),
            None => Ok(false),
            Some("helm") => Ok(true),
            Some(other) => Err((exit::BAD_INPUT, format!("--install {other}: the one installer is `helm`"))),
        }
    }

    /// The release of `driver`'s chart, or of `--chart`; checked before anything starts.
    pub async fn release(&self, driver: &str, progress: &Progress) -> Result<ReleaseSpec, Early> {
        for kv in &self.values {
            if !kv.contains('=') {
                return Err((
                    exit::BAD_INPUT,
                    format!("--set {kv}: expected KEY=VALUE, e.g. --set kubeletPlugin.numDevices=4"),
                ));
            }
        }
        let timeout = Duration::from_secs(self.install_timeout);
        if let Some(chart) = &self.chart {
            check_chart_path(chart)?;
            let (release, namespace) = match known(driver) {
                Some(k) => (k.release.to_string(), k.namespace.to_string()),
                None => (release_name(chart), release_name(chart)),
            };
            return Ok(ReleaseSpec {
                name: release,
                namespace,
                chart: chart.clone(),
                version: None,
                values: self.values.clone(),
                timeout,
            });
        }
        let Some(k) = known(driver) else {
            return Err((
                exit::BAD_INPUT,
                format!(
                    "--install helm knows the charts of --driver example and --driver nvidia; {} has none{}. \
                     Pass the chart to install with --chart PATH_OR_REF",
                    if driver.is_empty() { "a --driver-bin plugin".to_string() } else { format!("--driver {driver}") },
                    if driver == "mock" {
                        format!(
                            " (the mock runs on the local cluster's emulated nodes: --cluster local, or `{} cluster up \
                             --nodes N --driver mock`)",
                            crate::program()
                        )
                    } else {
                        String::new()
                    }
                ),
            ));
        };
        let (chart, version) = match k.source {
            Source::Module(recipe, module, dir) => {
                let root =
                    dracheck_clusters::gobuild::module_dir(&recipe(), module).await.map_err(|e| cluster(e.into()))?;
                let chart = root.join(dir);
                if !chart.join("Chart.yaml").is_file() {
                    return Err((exit::CLUSTER_DOWN, format!("the chart {} is not in {module}", chart.display())));
                }
                progress.line(format!("chart of {module}: {}", chart.display()));
                (chart.display().to_string(), None)
            }
            Source::Reference(reference, version) => (reference.to_string(), Some(version.to_string())),
        };
        let mut values: Vec<String> = k.values.iter().map(|v| v.to_string()).collect();
        values.extend(self.values.iter().cloned());
        Ok(ReleaseSpec { name: k.release.into(), namespace: k.namespace.into(), chart, version, values, timeout })
    }
}

/// Chart values the local cluster's nodes need, after the driver's own and before `--set`.
/// The kubelet probes a pod's IP from the node, and a pod's address on a local node is
/// reachable only inside the pod (real nodes add nothing to the host's network), so the
/// example chart's gRPC liveness probe would restart a healthy plugin every 30 s: its port
/// is switched off, which the chart offers for this.
pub fn local_values(driver: &str, args: &InstallArgs) -> Vec<String> {
    match driver {
        "example" if args.chart.is_none() => vec!["kubeletPlugin.containers.plugin.healthcheckPort=-1".into()],
        _ => Vec::new(),
    }
}

/// The image archives to import into the local cluster's nodes: `--image-archive`, and the
/// image of a known chart that dracheck builds (the driver's Go binary in a minimal image).
pub async fn local_images(args: &InstallArgs, driver: &str, progress: &Progress) -> Result<Vec<PathBuf>, Early> {
    for archive in &args.image_archive {
        if !archive.is_file() {
            return Err((
                exit::BAD_INPUT,
                format!(
                    "--image-archive {}: no such file; pass an image archive written by `docker save`, `podman \
                     save` or `skopeo copy … docker-archive:FILE`",
                    archive.display()
                ),
            ));
        }
    }
    let mut archives = args.image_archive.clone();
    let built = known(driver).filter(|_| args.chart.is_none()).and_then(|k| k.local_image);
    match (built, driver) {
        (Some(tag), "example") => {
            let program = dracheck_example_driver::binary(progress).await.map_err(|e| cluster(e.into()))?;
            let archive = dracheck_clusters::local::real::images::program_image(tag, &program).map_err(cluster)?;
            progress.line(format!("image {tag}: {}", archive.display()));
            archives.push(archive);
        }
        _ if archives.is_empty() => {
            return Err((
                exit::BAD_INPUT,
                format!(
                    "the local cluster's nodes pull no images, and dracheck builds the image of --driver example's \
                     chart only; {}. Pass --image-archive with the driver's image (`docker save IMAGE -o FILE`)",
                    if args.chart.is_some() {
                        "this is another chart".to_string()
                    } else {
                        format!("{driver} has none built here")
                    }
                ),
            ));
        }
        _ => {}
    }
    Ok(archives)
}

/// Installs `spec` into the cluster of `kubeconfig` (and `context`) with the chosen helm, and
/// waits a while for `driver`'s ResourceSlices.
pub async fn install(
    args: &InstallArgs,
    helm: Helm,
    spec: ReleaseSpec,
    kubeconfig: &Path,
    context: Option<&str>,
    driver: &str,
    progress: &Progress,
) -> Result<Installed, Early> {
    let target = Target { kubeconfig: kubeconfig.to_path_buf(), context: context.map(str::to_string) };
    let installed = helm::install(&helm, spec, target.clone(), progress).await.map_err(|e| match e {
        ClusterError::InstallFailed(_) => (exit::INSTALL_FAILED, e.to_string()),
        other => cluster(other),
    })?;
    await_slices(&target, driver, Duration::from_secs(args.install_timeout), progress).await;
    Ok(installed)
}

/// A ready kubelet-plugin pod may not have published yet, and the run begins by reading what
/// the driver published. Without slices after the wait the run goes on and says so itself.
async fn await_slices(target: &Target, driver: &str, wait: Duration, progress: &Progress) {
    use k8s_openapi::api::resource::v1::ResourceSlice;
    let Ok(client) = target.client().await else { return };
    let slices: kube::Api<ResourceSlice> = kube::Api::all(client);
    let deadline = std::time::Instant::now() + wait;
    progress.line(format!("waiting for the ResourceSlices of {driver}"));
    while std::time::Instant::now() < deadline {
        if let Ok(list) = slices.list(&Default::default()).await
            && list.items.iter().any(|s| s.spec.driver == driver)
        {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Removes a release after the run, saying what was done or what is left.
pub async fn remove(installed: Option<Installed>, progress: &Progress) {
    if let Some(mut release) = installed {
        match release.remove().await {
            Ok(done) => progress.line(done),
            Err(left) => eprintln!("dracheck: cleaning up after the run failed: {left}"),
        }
    }
}

pub fn cluster(e: ClusterError) -> Early {
    (exit::of(e.failure()), e.to_string())
}

/// A `--chart` that names a file or directory must exist; references are helm's to resolve.
fn check_chart_path(chart: &str) -> Result<(), Early> {
    let is_reference = chart.contains("://");
    let is_path = chart.starts_with(['/', '.', '~']) || chart.ends_with(".tgz") || Path::new(chart).exists();
    if !is_reference && is_path && !Path::new(chart).exists() {
        return Err((
            exit::BAD_INPUT,
            format!(
                "chart not found: --chart {chart} is neither a chart directory nor an archive; pass a chart's path, or a \
                 reference such as oci://registry/charts/name"
            ),
        ));
    }
    Ok(())
}

/// A release name from a chart's path or reference: its last part, without archive suffix,
/// version or tag, as a DNS label within helm's 53 characters.
fn release_name(chart: &str) -> String {
    let last = chart.trim_end_matches('/').rsplit('/').next().unwrap_or(chart);
    let last = last.trim_end_matches(".tgz");
    let last = last.split(':').next().unwrap_or(last);
    // `name-1.2.3.tgz`: the version goes.
    let name = match last.rsplit_once('-') {
        Some((head, tail)) if tail.starts_with(|c: char| c.is_ascii_digit()) && tail.contains('.') => head,
        _ => last,
    };
    let label: String =
        name.to_ascii_lowercase().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).take(53).collect();
    let label = label.trim_matches('-').to_string();
    if label.is_empty() { "dracheck-driver".into() } else { label }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> InstallArgs {
        InstallArgs {
            install: Some("helm".into()),
            chart: None,
            values: vec![],
            helm: None,
            install_timeout: 120,
            image_archive: vec![],
        }
    }

    #[test]
    fn the_example_charts_plugin_pods_are_found_by_their_labels() {
        let spec = ReleaseSpec {
            name: "dra-example-driver".into(),
            namespace: "dra-example-driver".into(),
            chart: "/charts/dra-example-driver".into(),
            version: None,
            values: vec![],
            timeout: Duration::from_secs(60),
        };
        let pods = args().plugin_pods("example", &spec).expect("the example chart's labels are known");
        assert_eq!(pods.namespace.as_deref(), Some("dra-example-driver"));
        assert_eq!(
            pods.selector,
            "app.kubernetes.io/instance=dra-example-driver,app.kubernetes.io/component=kubeletplugin"
        );
        assert!(args().plugin_pods("nvidia", &spec).is_none(), "not verified for the nvidia chart");
        let other = InstallArgs { chart: Some("/my/chart".into()), ..args() };
        assert!(other.plugin_pods("example", &spec).is_none(), "another chart's labels are unknown");
    }

    #[tokio::test]
    async fn nvidia_gets_its_oci_chart_version_and_override() {
        let mut a = args();
        a.values.push("nvidiaDriverRoot=/run/nvidia/driver".into());
        let spec = a.release("nvidia", &Progress::quiet()).await.unwrap();
        let target = Target { kubeconfig: "/tmp/kc".into(), context: Some("gpu".into()) };
        assert_eq!(
            helm::install_args(4, &spec, &target).join(" "),
            "install dra-driver-nvidia-gpu oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu \
             --version 0.4.0 --namespace dra-driver-nvidia-gpu --create-namespace --wait=watcher --timeout 120s \
             --set gpuResourcesEnabledOverride=true --set nvidiaDriverRoot=/run/nvidia/driver --kubeconfig /tmp/kc \
             --kube-context gpu"
        );
        assert_eq!(
            helm::uninstall_args(4, &spec, &target).join(" "),
            "uninstall dra-driver-nvidia-gpu --namespace dra-driver-nvidia-gpu --wait=watcher --timeout 90s \
             --kubeconfig /tmp/kc --kube-context gpu"
        );
    }

    #[tokio::test]
    async fn drivers_without_a_chart_and_missing_charts_are_bad_input() {
        for driver in ["mock", ""] {
            let (code, msg) = args().release(driver, &Progress::quiet()).await.unwrap_err();
            assert_eq!(code, exit::BAD_INPUT);
            assert!(msg.contains("--chart PATH_OR_REF"), "{msg}");
        }
        let (_, msg) = args().release("mock", &Progress::quiet()).await.unwrap_err();
        assert!(msg.contains("--cluster local"), "the mock's way: {msg}");
        let mut a = args();
        a.chart = Some("./no/such/chart".into());
        let (code, msg) = a.release("example", &Progress::quiet()).await.unwrap_err();
        assert_eq!(code, exit::BAD_INPUT);
        assert!(msg.starts_with("chart not found"), "{msg}");
        let mut a = args();
        a.values.push("novalue".into());
        assert_eq!(a.release("nvidia", &Progress::quiet()).await.unwrap_err().0, exit::BAD_INPUT);
        let mut a = args();
        a.install = Some("kustomize".into());
        assert_eq!(a.wanted().unwrap_err().0, exit::BAD_INPUT);
    }

    #[tokio::test]
    async fn the_local_cluster_gets_images_it_can_import_and_the_probe_off_for_the_example_chart() {
        assert_eq!(local_values("example", &args()), ["kubeletPlugin.containers.plugin.healthcheckPort=-1"]);
        let own_chart = InstallArgs { chart: Some("/my/chart".into()), ..args() };
        assert!(local_values("example", &own_chart).is_empty(), "another chart's values are its own");

        let missing = InstallArgs { image_archive: vec!["/no/such/image.tar".into()], ..args() };
        let (code, msg) = local_images(&missing, "example", &Progress::quiet()).await.unwrap_err();
        assert_eq!(code, exit::BAD_INPUT);
        assert!(msg.contains("/no/such/image.tar") && msg.contains("docker save"), "{msg}");
        for (a, driver) in [(args(), "nvidia"), (own_chart, "example")] {
            let (code, msg) = local_images(&a, driver, &Progress::quiet()).await.unwrap_err();
            assert_eq!(code, exit::BAD_INPUT);
            assert!(msg.contains("--image-archive"), "{msg}");
        }
        let tmp = tempfile::tempdir().unwrap();
        let archive = tmp.path().join("driver.tar");
        std::fs::write(&archive, "").unwrap();
        let given = InstallArgs { chart: Some("/my/chart".into()), image_archive: vec![archive.clone()], ..args() };
        assert_eq!(local_images(&given, "", &Progress::quiet()).await.unwrap(), [archive]);
    }

    #[tokio::test]
    async fn an_own_chart_of_an_unknown_driver_is_named_after_the_chart() {
        let mut a = args();
        a.chart = Some("oci://registry.example/charts/acme-dra-driver".into());
        let spec = a.release("", &Progress::quiet()).await.unwrap();
        assert_eq!(
            (spec.name.as_str(), spec.namespace.as_str(), spec.version),
            ("acme-dra-driver", "acme-dra-driver", None)
        );
        assert_eq!(release_name("/charts/acme_gpu-1.2.3.tgz"), "acme-gpu");
        assert_eq!(release_name("oci://r/charts/gpu:0.4.0"), "gpu");
        for chart in ["/charts/acme_gpu-1.2.3.tgz", "--Weird__Chart--", &"x".repeat(80), "/charts/-/", "_"] {
            let name = release_name(chart);
            assert!(dracheck_objects::names::is_dns_label(&name) && name.len() <= 53, "{chart}: {name}");
        }
    }
}
