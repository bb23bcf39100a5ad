//! One helm release of a driver's chart: installed with `--wait` within a bounded time, and
//! removed again (the release, then the namespace if the install created it) after the run,
//! after a failed install, and, through [`Installed`]'s `Drop`, on Ctrl-C and panics.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

use super::Helm;
use super::pods::describe_pods;
use crate::error::{ClusterError, InstallFailure, Result};
use crate::local::Progress;
use crate::tools::output_tail;

/// The cluster helm acts on.
#[derive(Debug, Clone)]
pub struct Target {
    pub kubeconfig: PathBuf,
    pub context: Option<String>,
}

/// What to install.
#[derive(Debug, Clone)]
pub struct ReleaseSpec {
    pub name: String,
    pub namespace: String,
    /// A chart directory, archive or reference (`oci://…`, `repo/name`).
    pub chart: String,
    /// The chart version to take from a repository; `None` for a directory.
    pub version: Option<String>,
    /// `--set` values, `key=value` each.
    pub values: Vec<String>,
    /// How long helm may wait for the release's resources to become ready.
    pub timeout: Duration,
}

/// helm 4 names its wait strategy; helm 3's `--wait` is a switch.
fn wait_flag(major: u32) -> &'static str {
    if major >= 4 { "--wait=watcher" } else { "--wait" }
}

fn target_args(target: &Target) -> Vec<String> {
    let mut out = vec!["--kubeconfig".to_string(), target.kubeconfig.display().to_string()];
    if let Some(ctx) = &target.context {
        out.extend(["--kube-context".to_string(), ctx.clone()]);
    }
    out
}

/// `helm install …` of `spec` into `target`, for helm of major version `major`.
pub fn install_args(major: u32, spec: &ReleaseSpec, target: &Target) -> Vec<String> {
    let mut out: Vec<String> = vec!["install".into(), spec.name.clone(), spec.chart.clone()];
    if let Some(v) = &spec.version {
        out.extend(["--version".into(), v.clone()]);
    }
    out.extend([
        "--namespace".into(),
        spec.namespace.clone(),
        "--create-namespace".into(),
        wait_flag(major).into(),
        "--timeout".into(),
        format!("{}s", spec.timeout.as_secs()),
    ]);
    for kv in &spec.values {
        out.extend(["--set".into(), kv.clone()]);
    }
    out.extend(target_args(target));
    out
}

/// `helm uninstall …` of `spec`, waiting (bounded) until its resources are gone.
pub fn uninstall_args(major: u32, spec: &ReleaseSpec, target: &Target) -> Vec<String> {
    let mut out: Vec<String> = vec![
        "uninstall".into(),
        spec.name.clone(),
        "--namespace".into(),
        spec.namespace.clone(),
        wait_flag(major).into(),
        "--timeout".into(),
        format!("{}s", CLEANUP_TIMEOUT.as_secs()),
    ];
    out.extend(target_args(target));
    out
}

/// How long each cleanup step may take: uninstalling, then the namespace going away.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(90);
/// Beyond `--timeout`, for what helm does outside its wait (pulling the chart, API calls), so
/// that a helm that hangs cannot hold the run.
const HELM_GRACE: Duration = Duration::from_secs(120);

/// An installed release; removed by [`Installed::remove`], else when dropped.
pub struct Installed {
    plan: Cleanup,
    done: bool,
}

#[derive(Clone)]
struct Cleanup {
    helm: Helm,
    spec: ReleaseSpec,
    target: Target,
    namespace_created: bool,
    progress: Progress,
}

/// Installs `spec` with `helm install --wait`. A release that does not become ready is a
/// [`ClusterError::InstallFailed`] with helm's output and the pods' state, removed before
/// this returns.
pub async fn install(helm: &Helm, spec: ReleaseSpec, target: Target, progress: &Progress) -> Result<Installed> {
    let client = client(&target).await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let existed = namespaces.get_opt(&spec.namespace).await.map_err(api(&target, "reading namespaces"))?.is_some();
    if existed {
        // A release of that name may be someone's installation, which must not be replaced
        // nor uninstalled afterwards.
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &spec.namespace);
        let lp = ListParams::default().labels(&format!("owner=helm,name={}", spec.name));
        if !secrets.list(&lp).await.map_err(api(&target, "reading helm releases"))?.items.is_empty() {
            return Err(ClusterError::ReleaseExists { release: spec.name, namespace: spec.namespace });
        }
    }
    // Armed before helm starts: a run stopped mid-install still removes what helm made.
    let mut installed = Installed {
        plan: Cleanup { helm: helm.clone(), spec, target, namespace_created: !existed, progress: progress.clone() },
        done: false,
    };
    let spec = &installed.plan.spec;
    progress.line(format!(
        "installing {} as helm release {} in namespace {} (waiting up to {}s for it to be ready)",
        spec.chart,
        spec.name,
        spec.namespace,
        spec.timeout.as_secs()
    ));
    let started = Instant::now();
    let args = install_args(helm.major, spec, &installed.plan.target);
    let (status, output) = run(helm, &args, spec.timeout + HELM_GRACE).await;
    if status.is_ok() {
        progress.line(format!("helm release {} is ready ({:.0}s)", spec.name, started.elapsed().as_secs_f64()));
        return Ok(installed);
    }
    // The pods are read before the cleanup removes them.
    let pods = describe_pods(&client, &spec.namespace).await;
    let (release, chart, namespace, timeout_s) =
        (spec.name.clone(), spec.chart.clone(), spec.namespace.clone(), spec.timeout.as_secs());
    let cleanup = match installed.remove().await {
        Ok(done) => format!("dracheck {done}."),
        Err(left) => format!("Cleaning up failed: {left}."),
    };
    Err(ClusterError::InstallFailed(Box::new(InstallFailure {
        release,
        chart,
        namespace,
        timeout_s,
        status: status.err().unwrap_or_default(),
        helm_tail: output_tail(&output, 12),
        pods,
        cleanup,
    })))
}

impl Installed {
    /// Uninstalls the release and deletes its namespace if the install created it; what was
    /// done, or what is left.
    pub async fn remove(&mut self) -> std::result::Result<String, String> {
        self.done = true;
        self.plan.run().await
    }

    /// The release's cluster is gone (a local cluster stopped with everything in it): there is
    /// nothing left to remove, and no API server to ask.
    pub fn gone_with_its_cluster(mut self) {
        self.done = true;
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // Drop may run on a runtime worker or while a panic unwinds: a thread of its own with
        // its own runtime (and its own client, bound to that runtime) does the async cleanup.
        let plan = self.plan.clone();
        let worker = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
            let said = rt.block_on(plan.run());
            (plan.progress, said)
        });
        if let Ok((progress, said)) = worker.join() {
            match said {
                Ok(done) => progress.line(done),
                Err(left) => eprintln!("dracheck: cleaning up the helm release failed: {left}"),
            }
        }
    }
}

impl Cleanup {
    async fn run(&self) -> std::result::Result<String, String> {
        let (spec, target) = (&self.spec, &self.target);
        self.progress.line(format!("uninstalling helm release {} from namespace {}", spec.name, spec.namespace));
        let (status, output) = run(&self.helm, &uninstall_args(self.helm.major, spec, target), CLEANUP_TIMEOUT).await;
        // A release helm never recorded (it failed or was stopped before) is not an error.
        let release = match status {
            Ok(_) => format!("uninstalled helm release {}", spec.name),
            Err(_) if output.contains("not found") => format!("found no helm release {} to uninstall", spec.name),
            Err(why) => return Err(format!("`helm uninstall {}` {why}:\n{}", spec.name, output_tail(&output, 6))),
        };
        if !self.namespace_created {
            return Ok(format!("{release} (namespace {} was there before and stays)", spec.namespace));
        }
        let client = client(target).await.map_err(|e| e.to_string())?;
        let namespaces: Api<Namespace> = Api::all(client);
        match namespaces.delete(&spec.namespace, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(format!("{release}; helm made no namespace")),
            Err(e) => return Err(format!("deleting namespace {}: {e}", spec.namespace)),
        }
        let deadline = Instant::now() + CLEANUP_TIMEOUT;
        loop {
            match namespaces.get_opt(&spec.namespace).await {
                Ok(None) => break,
                Ok(Some(_)) if Instant::now() > deadline => {
                    return Err(format!(
                        "namespace {} is still terminating after {}s",
                        spec.namespace,
                        CLEANUP_TIMEOUT.as_secs()
                    ));
                }
                Ok(Some(_)) => tokio::time::sleep(Duration::from_millis(500)).await,
                Err(e) => return Err(format!("reading namespace {}: {e}", spec.namespace)),
            }
        }
        Ok(format!("{release} and deleted namespace {}", spec.namespace))
    }
}

/// Runs helm within `limit`: whether it succeeded (else why not), and its output (stdout, then
/// stderr).
async fn run(helm: &Helm, args: &[String], limit: Duration) -> (std::result::Result<(), String>, String) {
    let child = tokio::process::Command::new(&helm.program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group: a Ctrl-C at the terminal stops the run, and the run then
        // cleans up; it must not also cut helm off mid-way.
        .process_group(0)
        .kill_on_drop(true)
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => return (Err(format!("could not run {}: {e}", helm.program.display())), String::new()),
    };
    match tokio::time::timeout(limit, child.wait_with_output()).await {
        Err(_) => (Err(format!("did not finish within {}s and was stopped", limit.as_secs())), String::new()),
        Ok(Err(e)) => (Err(format!("failed to run: {e}")), String::new()),
        Ok(Ok(out)) => {
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            if out.status.success() { (Ok(()), text) } else { (Err(format!("exited with {}", out.status)), text) }
        }
    }
}

impl Target {
    /// A client for the cluster, on the calling runtime.
    pub async fn client(&self) -> Result<kube::Client> {
        client(self).await
    }
}

/// A client for `target`, on the calling runtime.
async fn client(target: &Target) -> Result<kube::Client> {
    let io = |e: String| ClusterError::Io {
        context: format!("loading the kubeconfig {}", target.kubeconfig.display()),
        source: std::io::Error::other(e),
    };
    let kc = Kubeconfig::read_from(&target.kubeconfig).map_err(|e| io(e.to_string()))?;
    let opts = KubeConfigOptions { context: target.context.clone(), ..KubeConfigOptions::default() };
    let config = kube::Config::from_custom_kubeconfig(kc, &opts).await.map_err(|e| io(e.to_string()))?;
    kube::Client::try_from(config).map_err(|e| io(e.to_string()))
}

fn api<'a>(target: &'a Target, doing: &'static str) -> impl FnOnce(kube::Error) -> ClusterError + 'a {
    move |e| ClusterError::Io {
        context: format!("{doing} in the cluster of {}", target.kubeconfig.display()),
        source: std::io::Error::other(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chart directory: no version, no values.
    fn spec() -> ReleaseSpec {
        ReleaseSpec {
            name: "r".into(),
            namespace: "ns".into(),
            chart: "./chart".into(),
            version: None,
            values: Vec::new(),
            timeout: Duration::from_secs(60),
        }
    }

    #[test]
    fn helm_3_and_4_spell_wait_their_own_way() {
        let target = Target { kubeconfig: "/k".into(), context: None };
        assert!(install_args(4, &spec(), &target).contains(&"--wait=watcher".to_string()));
        let v3 = install_args(3, &spec(), &target);
        assert!(v3.contains(&"--wait".to_string()) && !v3.iter().any(|a| a.starts_with("--wait=")));
        assert!(!v3.contains(&"--kube-context".to_string()), "no context: the kubeconfig's current one");
    }
}
