//! In-cluster mode: dracheck as a Job in the cluster it checks, the way sonobuoy runs. `rbac`
//! prints the least access a run needs (`dracheck_suites::access`), `job` the Job that runs
//! `conformance` under that account from the image `cargo xtask dist --image` builds, and
//! `retrieve` waits for the Job and writes its results here.
//!
//! The results leave the pod through its log: at the end of a run with `--results-to-log` the
//! result and its reports follow the summary as one base64 tar.gz between two marker lines. A
//! log outlives the pod's containers (a finished Job's pod cannot be exec'd into to copy
//! files), needs no volume the cluster may not offer and no permission beyond `pods/log`, and
//! `kubectl logs` shows the same summary to whoever looks. `--results-host-path` writes them
//! to a directory of the node as well.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use clap::{Args, ValueEnum};
use dracheck_suites::access::{self, Identity};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, LogParams};
use serde_json::{Value, json};

use crate::exit;

/// The line before the results in the log.
pub const BEGIN: &str = "--- dracheck results: tar.gz, base64 ---";
/// The line after them.
pub const END: &str = "--- end of dracheck results ---";

/// Where the results are written in the Job's container.
const RESULTS_DIR: &str = "/results";

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Output {
    Yaml,
    Json,
}

#[derive(Debug, Args)]
pub struct IdentityArgs {
    /// The namespace of the ServiceAccount and the Job.
    #[arg(long, default_value = "dracheck")]
    pub namespace: String,
    /// The ServiceAccount the run acts as.
    #[arg(long, default_value = "dracheck")]
    pub service_account: String,
}

impl IdentityArgs {
    fn identity(&self) -> Identity {
        Identity { namespace: self.namespace.clone(), service_account: self.service_account.clone() }
    }
}

#[derive(Debug, Args)]
pub struct RbacArgs {
    #[command(flatten)]
    pub identity: IdentityArgs,
    /// YAML documents for `kubectl apply -f -`, or a JSON `List`.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Yaml)]
    pub output: Output,
    /// Leave out one permission, `VERB RESOURCE[.GROUP]` (e.g. `delete resourceclaims.resource.k8s.io`):
    /// a role one permission short, to see that a run names it.
    #[arg(long, value_name = "VERB RESOURCE", hide = true)]
    pub without: Option<String>,
}

#[derive(Debug, Args)]
pub struct JobArgs {
    #[command(flatten)]
    pub identity: IdentityArgs,
    /// The image `cargo xtask dist --image` built (loaded into the nodes or pushed to a registry).
    #[arg(long, value_name = "IMAGE")]
    pub image: String,
    /// The Job's name.
    #[arg(long, default_value = "dracheck")]
    pub name: String,
    /// Run in the node's network namespace (for a cluster whose API server listens on the
    /// node's loopback, as the local cluster's does).
    #[arg(long)]
    pub host_network: bool,
    /// The API server as `HOST:PORT`, instead of the `kubernetes` Service the pod would use
    /// (`KUBERNETES_SERVICE_HOST`/`_PORT`): for a cluster without a Service network.
    #[arg(long, value_name = "HOST:PORT")]
    pub api_server: Option<String>,
    /// Also write the results to this directory of the node (a hostPath volume).
    #[arg(long, value_name = "DIR")]
    pub results_host_path: Option<PathBuf>,
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Yaml)]
    pub output: Output,
    /// Arguments of `dracheck conformance` after `--` (e.g. `-- --driver nvidia --profile …`);
    /// `--cluster kubeconfig`, `--out` and `--results-to-log` are set by the Job.
    #[arg(last = true)]
    pub conformance: Vec<String>,
}

#[derive(Debug, Args)]
pub struct RetrieveArgs {
    /// The Job's namespace.
    #[arg(long, default_value = "dracheck")]
    pub namespace: String,
    /// The Job's name.
    #[arg(long, default_value = "dracheck")]
    pub name: String,
    /// Where to write the result and its reports.
    #[arg(long, env = "ARTIFACTS", default_value = "reports")]
    pub out: PathBuf,
    /// How long to wait for the Job to finish, in seconds.
    #[arg(long, default_value_t = 3600)]
    pub wait: u64,
    /// Kubeconfig (default: as kubectl finds it).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of the kubeconfig.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

pub fn rbac(args: RbacArgs) -> u8 {
    let rules = match &args.without {
        None => access::rules(),
        Some(w) => match w.split_once(' ') {
            Some((verb, what)) => access::rules_without(verb.trim(), what.trim()),
            None => {
                eprintln!("dracheck: --without takes `VERB RESOURCE`, e.g. `delete resourceclaims.resource.k8s.io`");
                return exit::BAD_INPUT;
            }
        },
    };
    print!("{}", render(access::manifests(&args.identity.identity(), rules), args.output));
    exit::OK
}

pub fn job(args: JobArgs) -> u8 {
    if let Some(server) = &args.api_server
        && server.rsplit_once(':').is_none_or(|(_, port)| port.parse::<u16>().is_err())
    {
        eprintln!("dracheck: --api-server takes HOST:PORT (e.g. 127.0.0.1:6443), not {server:?}");
        return exit::BAD_INPUT;
    }
    print!("{}", render(vec![job_manifest(&args)], args.output));
    exit::OK
}

fn job_manifest(args: &JobArgs) -> Value {
    let id = args.identity.identity();
    let mut run = vec!["conformance", "--cluster", "kubeconfig", "--out", RESULTS_DIR, "--results-to-log"]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    run.extend(args.conformance.iter().cloned());
    let mut env = vec![];
    if let Some((host, port)) = args.api_server.as_deref().and_then(|s| s.rsplit_once(':')) {
        // The container's own variables win over those the kubelet sets from the Service.
        env.push(json!({"name": "KUBERNETES_SERVICE_HOST", "value": host.trim_matches(['[', ']'])}));
        env.push(json!({"name": "KUBERNETES_SERVICE_PORT", "value": port}));
    }
    let volume = match &args.results_host_path {
        Some(dir) => json!({"name": "results", "hostPath": {"path": dir, "type": "DirectoryOrCreate"}}),
        None => json!({"name": "results", "emptyDir": {}}),
    };
    let labels = json!({"app.kubernetes.io/name": "dracheck", "app.kubernetes.io/component": "conformance"});
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": args.name, "namespace": id.namespace, "labels": labels},
        "spec": {
            // One run: a second attempt would check a cluster the first one may have changed.
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": id.service_account,
                    "restartPolicy": "Never",
                    "hostNetwork": args.host_network,
                    "containers": [{
                        "name": "dracheck",
                        "image": args.image,
                        "imagePullPolicy": "IfNotPresent",
                        "args": run,
                        "env": env,
                        "volumeMounts": [{"name": "results", "mountPath": RESULTS_DIR}],
                    }],
                    "volumes": [volume],
                },
            },
        },
    })
}

/// YAML documents, or a `List` for JSON.
fn render(objects: Vec<Value>, output: Output) -> String {
    match output {
        Output::Json => {
            let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
            format!("{}\n", serde_json::to_string_pretty(&list).expect("JSON"))
        }
        Output::Yaml => objects
            .iter()
            .map(|o| format!("---\n{}", serde_saphyr::to_string(o).expect("objects serialize as YAML")))
            .collect(),
    }
}

/// The files as one base64 tar.gz between [`BEGIN`] and [`END`], lines of 76 characters.
pub fn bundle(files: &[PathBuf]) -> std::io::Result<String> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default()));
    for file in files {
        let name = file.file_name().map(PathBuf::from).unwrap_or_else(|| file.clone());
        builder.append_path_with_name(file, name)?;
    }
    let gz = builder.into_inner()?.finish()?;
    let text = base64::engine::general_purpose::STANDARD.encode(gz);
    let mut out = format!("{BEGIN}\n");
    for chunk in text.as_bytes().chunks(76) {
        out.push_str(std::str::from_utf8(chunk).expect("base64 is ASCII"));
        out.push('\n');
    }
    out.push_str(END);
    out.push('\n');
    Ok(out)
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UnbundleError {
    #[error("the log holds no results (no line {BEGIN:?}): the run ended before writing them")]
    NoResults,
    #[error("the results in the log end early (no line {END:?}): the log was cut")]
    Truncated,
    #[error("the results in the log are damaged: {0}")]
    Damaged(String),
}

/// The files of the last bundle in `log`: (file name, content).
pub fn unbundle(log: &str) -> Result<Vec<(String, Vec<u8>)>, UnbundleError> {
    let start = log.rfind(BEGIN).ok_or(UnbundleError::NoResults)?;
    let body = &log[start + BEGIN.len()..];
    let end = body.find(END).ok_or(UnbundleError::Truncated)?;
    let text: String = body[..end].split_whitespace().collect();
    let damaged = |e: &dyn std::fmt::Display| UnbundleError::Damaged(e.to_string());
    let gz = base64::engine::general_purpose::STANDARD.decode(text).map_err(|e| damaged(&e))?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(&gz[..]));
    let mut files = Vec::new();
    for entry in archive.entries().map_err(|e| damaged(&e))? {
        let mut entry = entry.map_err(|e| damaged(&e))?;
        let path = entry.path().map_err(|e| damaged(&e))?;
        // Only plain names: nothing the log says may write outside --out.
        let name = path
            .file_name()
            .filter(|n| Path::new(n) == path.as_ref())
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| UnbundleError::Damaged(format!("{} is not a plain file name", path.display())))?;
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).map_err(|e| damaged(&e))?;
        files.push((name, bytes));
    }
    Ok(files)
}

type Early = (u8, String);

pub async fn retrieve(args: RetrieveArgs) -> u8 {
    exit::report(retrieve_results(&args).await, "dracheck")
}

async fn retrieve_results(args: &RetrieveArgs) -> Result<u8, Early> {
    let client = crate::explain::client(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    let jobs: Api<Job> = Api::namespaced(client.clone(), &args.namespace);
    let (ns, name) = (&args.namespace, &args.name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    wait_for_job(&jobs, &pods, ns, name, Duration::from_secs(args.wait)).await?;
    let selector = job_pods(name);
    let listed = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| (exit::CLUSTER_DOWN, format!("listing the pods of Job {ns}/{name}: {e}")))?;
    let Some(pod) = listed.items.into_iter().next_back() else {
        return Err((exit::FAILED, format!("Job {ns}/{name} finished without a pod (it may have been deleted)")));
    };
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let log = pods
        .logs(&pod_name, &LogParams::default())
        .await
        .map_err(|e| (exit::CLUSTER_DOWN, format!("reading the log of pod {ns}/{pod_name}: {e}")))?;
    let code = container_exit_code(&pod);
    let files = match unbundle(&log) {
        Ok(files) => files,
        Err(e) => {
            let tail: Vec<&str> = log.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect();
            return Err((
                code.filter(|c| *c != exit::OK).unwrap_or(exit::FAILED),
                format!("pod {ns}/{pod_name}: {e}; the end of its log:\n{}", tail.join("\n")),
            ));
        }
    };
    std::fs::create_dir_all(&args.out)
        .map_err(|e| (exit::BAD_INPUT, format!("cannot create {}: {e}", args.out.display())))?;
    for (file, bytes) in &files {
        let path = args.out.join(file);
        std::fs::write(&path, bytes).map_err(|e| (exit::BAD_INPUT, format!("cannot write {}: {e}", path.display())))?;
        println!("{}", path.display());
    }
    // The run's own verdict: 0 every guarantee held, 1 one failed, as `conformance` exits.
    Ok(code.unwrap_or(exit::FAILED))
}

/// How often a wait for a Job says where it stands: a run takes minutes.
const PROGRESS_EVERY: Duration = Duration::from_secs(30);

/// Waits until Job `ns/name` has finished, saying every [`PROGRESS_EVERY`] what its pod is
/// doing. A Job that is not there fails at once, one deleted while waited for as soon as
/// that is seen.
async fn wait_for_job(jobs: &Api<Job>, pods: &Api<Pod>, ns: &str, name: &str, wait: Duration) -> Result<(), Early> {
    let watching = |e: kube::Error| (exit::CLUSTER_DOWN, format!("reading Job {ns}/{name}: {e}"));
    let no_job = |what: &str| {
        (
            exit::BAD_INPUT,
            format!("{what} Job {ns}/{name}; `dracheck job` prints one, `--namespace`/`--name` name another"),
        )
    };
    if jobs.get_opt(name).await.map_err(watching)?.is_none() {
        return Err(no_job("there is no"));
    }
    eprintln!("waiting for Job {ns}/{name} to finish (at most {} s)", wait.as_secs());
    let begun = tokio::time::Instant::now();
    let finished = kube::runtime::wait::await_condition(jobs.clone(), name, job_finished);
    let deadline = tokio::time::sleep(wait);
    tokio::pin!(finished, deadline);
    let mut progress = tokio::time::interval_at(begun + PROGRESS_EVERY, PROGRESS_EVERY);
    loop {
        tokio::select! {
            done = &mut finished => {
                return match done {
                    Ok(Some(_)) => Ok(()),
                    Ok(None) => Err(no_job("while waiting, someone deleted the")),
                    Err(e) => Err((exit::CLUSTER_DOWN, format!("watching Job {ns}/{name}: {e}"))),
                };
            }
            _ = &mut deadline => {
                return Err((
                    exit::FAILED,
                    format!("Job {ns}/{name} did not finish within {} s; `--wait SECONDS` waits longer", wait.as_secs()),
                ));
            }
            _ = progress.tick() => {
                if jobs.get_opt(name).await.map_err(watching)?.is_none() {
                    return Err(no_job("while waiting, someone deleted the"));
                }
                let listed = pods.list(&ListParams::default().labels(&job_pods(name))).await;
                let pod = listed.ok().and_then(|l| l.items.into_iter().next_back());
                eprintln!("  {} s: {}", begun.elapsed().as_secs(), pod_state(pod.as_ref()));
            }
        }
    }
}

/// The label selector of a Job's pods.
fn job_pods(job: &str) -> String {
    format!("batch.kubernetes.io/job-name={job}")
}

/// A pod's state in a few words: its phase, and why it waits where it does.
fn pod_state(pod: Option<&Pod>) -> String {
    let Some(pod) = pod else { return "no pod yet".into() };
    let name = pod.metadata.name.as_deref().unwrap_or("?");
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
    let waiting = status
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone()));
    match waiting {
        Some(reason) => format!("pod {name} {phase} ({reason})"),
        None => format!("pod {name} {phase}"),
    }
}

/// Complete or Failed, the two ends of a Job.
fn job_finished(job: Option<&Job>) -> bool {
    job.and_then(|j| j.status.as_ref()?.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True"))
}

fn container_exit_code(pod: &Pod) -> Option<u8> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    let code = statuses.iter().find(|s| s.name == "dracheck")?.state.as_ref()?.terminated.as_ref()?.exit_code;
    u8::try_from(code).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_comes_back_out_of_a_log_around_it() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("mock-v1.json"), dir.path().join("junit_mock-v1.xml"));
        std::fs::write(&a, br#"{"ok": true}"#).unwrap();
        std::fs::write(&b, vec![b'x'; 10_000]).unwrap();
        let log = format!("PASS driver a\n77 passed\n{}more output\n", bundle(&[a, b]).unwrap());
        let inside = log.split(BEGIN).nth(1).unwrap().split(END).next().unwrap();
        assert!(inside.lines().all(|l| l.len() <= 76), "{inside}");
        let files = unbundle(&log).unwrap();
        assert_eq!(files[0], ("mock-v1.json".to_string(), br#"{"ok": true}"#.to_vec()));
        assert_eq!(files[1].0, "junit_mock-v1.xml");
        assert_eq!(files[1].1.len(), 10_000);
    }

    #[test]
    fn a_log_without_results_or_cut_short_says_which() {
        assert_eq!(unbundle("dracheck: bad input\n"), Err(UnbundleError::NoResults));
        assert_eq!(unbundle(&format!("{BEGIN}\nAAAA\n")), Err(UnbundleError::Truncated));
        assert!(matches!(unbundle(&format!("{BEGIN}\n!!!\n{END}\n")), Err(UnbundleError::Damaged(_))));
    }

    fn job_args(extra: &[&str]) -> JobArgs {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            job: JobArgs,
        }
        let mut argv = vec!["job", "--image", "dracheck.io/dracheck:0.1.0"];
        argv.extend(extra);
        Cli::parse_from(argv).job
    }

    #[test]
    fn the_job_runs_conformance_as_the_account_and_keeps_the_given_arguments() {
        let job = job_manifest(&job_args(&["--namespace", "ci", "--", "--driver", "mock", "--only", "claim.*"]));
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(job["metadata"]["namespace"], json!("ci"));
        assert_eq!(pod["serviceAccountName"], json!("dracheck"));
        assert_eq!(pod["restartPolicy"], json!("Never"));
        assert_eq!(job["spec"]["backoffLimit"], json!(0));
        let args: Vec<&str> =
            pod["containers"][0]["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        assert_eq!(
            args,
            [
                "conformance",
                "--cluster",
                "kubeconfig",
                "--out",
                "/results",
                "--results-to-log",
                "--driver",
                "mock",
                "--only",
                "claim.*"
            ]
        );
        assert_eq!(pod["containers"][0]["env"], json!([]));
        assert_eq!(pod["volumes"][0]["emptyDir"], json!({}));
    }

    #[test]
    fn an_api_server_address_overrides_the_service_and_a_host_path_keeps_the_results() {
        let job = job_manifest(&job_args(&[
            "--api-server",
            "127.0.0.1:6443",
            "--host-network",
            "--results-host-path",
            "/var/dracheck",
        ]));
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(pod["hostNetwork"], json!(true));
        assert_eq!(
            pod["containers"][0]["env"],
            json!([{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"}, {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"}])
        );
        assert_eq!(pod["volumes"][0]["hostPath"]["path"], json!("/var/dracheck"));
    }

    #[test]
    fn yaml_is_one_document_per_object() {
        let objects = access::manifests(&Identity::default(), access::rules());
        let yaml = render(objects, Output::Yaml);
        assert_eq!(yaml.matches("---\n").count(), 4);
        assert!(yaml.contains("kind: ClusterRoleBinding"), "{yaml}");
        let json: Value = serde_json::from_str(&render(vec![json!({"kind": "X"})], Output::Json)).unwrap();
        assert_eq!(json["kind"], "List");
    }
}
