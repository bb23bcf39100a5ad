//! `cargo xtask cluster up|down|status|kubeconfig|build`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use dracheck_clusters::local::process::Lifetime;
use dracheck_clusters::local::{self, ClusterInfo, Progress, binaries, versions};
use dracheck_clusters::{ClusterError, LocalCluster, LocalClusterOptions};

use crate::exit;
use crate::nodes::{self, NodeArgs};

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Start a local cluster and return once it is ready; it runs until `cluster down`.
    /// Prints the kubeconfig path as the last line.
    Up(UpArgs),
    /// Stop the local cluster of a state dir and remove the dir.
    Down(DownArgs),
    /// Show whether the local cluster of a state dir is running and ready.
    Status(StateArgs),
    /// Print the kubeconfig path of the local cluster of a state dir (last line).
    Kubeconfig(StateArgs),
    /// Build the control-plane binaries into the cache without starting anything.
    Build(BinArgs),
    /// Import an image archive (docker or OCI, e.g. `cargo xtask dist --image`'s) into every
    /// real node of the local cluster, as `kind load image-archive` does: pods with
    /// `imagePullPolicy: IfNotPresent` then run it without a registry.
    LoadImage(LoadImageArgs),
    /// Print a kind cluster config ready for DRA (feature gates, resource.k8s.io versions,
    /// CDI in containerd), for `kind create cluster --config`.
    KindConfig(KindConfigArgs),
    /// Runs the emulated nodes and drivers of `cluster up --nodes` (started by `up`).
    #[command(hide = true)]
    Agent(AgentArgs),
    /// Reaps the cluster of a state dir once the run that owns it is gone and the dir is still
    /// there (the run was killed); every run starts one beside itself.
    #[command(hide = true)]
    ReapWhenGone(ReapArgs),
}

#[derive(Debug, Args)]
pub struct ReapArgs {
    /// The state dir of the run to watch.
    #[arg(long)]
    state_dir: PathBuf,
}

/// The reaper a run starts beside itself: this program's hidden `cluster reap-when-gone`.
pub fn reaper() -> Option<local::reap::Reaper> {
    let program = std::env::current_exe().ok()?;
    Some(local::reap::Reaper { program, args: vec!["cluster".into(), "reap-when-gone".into()] })
}

#[derive(Debug, Args)]
pub struct AgentArgs {
    #[command(flatten)]
    state: StateArgs,
    #[command(flatten)]
    nodes: NodeArgs,
    /// Run only these of the numbered nodes (repeatable): the nodes of a kept run.
    #[arg(long = "node", value_name = "NAME")]
    only: Vec<String>,
    /// The driver's DeviceClasses exist already (a kept run installed them).
    #[arg(long)]
    classes_exist: bool,
}

#[derive(Debug, Args)]
pub struct LoadImageArgs {
    #[command(flatten)]
    state: StateArgs,
    /// The image archive.
    #[arg(value_name = "ARCHIVE")]
    archive: PathBuf,
}

#[derive(Debug, Args)]
pub struct DownArgs {
    #[command(flatten)]
    state: StateArgs,
    /// Instead of the cluster of --state-dir: remove the state dirs in $TMPDIR of every run
    /// that is gone (killed before its teardown), after stopping what each one recorded.
    #[arg(long)]
    stale: bool,
}

#[derive(Debug, Args)]
pub struct StateArgs {
    /// Where the cluster keeps certificates, data, logs and its process record.
    #[arg(long, env = "DRACHECK_STATE_DIR", default_value_os_t = default_state_dir())]
    pub state_dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct BinArgs {
    /// Kubernetes version of the control plane (e.g. 1.37 or v1.37.2).
    #[arg(long, env = "DRACHECK_K8S_VERSION")]
    pub k8s_version: Option<String>,
    /// Use the etcd, kube-apiserver, kube-scheduler and kube-controller-manager in DIR instead
    /// of building them.
    #[arg(long, value_name = "DIR", env = "DRACHECK_K8S_BIN_DIR")]
    pub k8s_bin_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct KindConfigArgs {
    /// Kubernetes version of the nodes (e.g. 1.37 or v1.37.2).
    #[arg(long)]
    k8s_version: Option<String>,
    /// Feature gates for every component, e.g. DRAAdminAccess=true.
    #[arg(long, default_value = "")]
    feature_gates: String,
    /// Worker nodes besides the control plane.
    #[arg(long, default_value_t = 1)]
    workers: usize,
}

#[derive(Debug, Args)]
pub struct UpArgs {
    #[command(flatten)]
    state: StateArgs,
    #[command(flatten)]
    bins: BinArgs,
    /// Feature gates for every component, e.g. DRADeviceTaints=true,DRAConsumableCapacity=true.
    #[arg(long, default_value = "")]
    feature_gates: String,
    /// `resource.k8s.io` versions to serve beyond those a default API server of the release
    /// serves (v1 alone for 1.36 and 1.37), comma-separated: `v1beta2,v1beta1`.
    #[arg(long, value_delimiter = ',', value_name = "VERSIONS")]
    resource_api_versions: Vec<String>,
    /// Port of the apiserver on 127.0.0.1 (default: a free one).
    #[arg(long)]
    apiserver_port: Option<u16>,
    /// Seconds each component may take to become healthy.
    #[arg(long, default_value_t = 60)]
    start_timeout: u64,
    #[command(flatten)]
    nodes: NodeArgs,
}

/// `$XDG_RUNTIME_DIR/dracheck/local`, else `/tmp/dracheck-<uid>/local`. Short on purpose:
/// Unix socket paths under it must stay within 108 bytes.
fn default_state_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir).join("dracheck/local"),
        // SAFETY: getuid has no preconditions and cannot fail.
        _ => std::env::temp_dir().join(format!("dracheck-{}/local", unsafe { libc::getuid() })),
    }
}

pub async fn run(cmd: ClusterCommand) -> u8 {
    let result = match cmd {
        ClusterCommand::Up(args) => up(args).await,
        ClusterCommand::Down(args) if args.stale => return down_stale(),
        ClusterCommand::Down(args) => down(args.state),
        ClusterCommand::Status(args) => status(args).await,
        ClusterCommand::Kubeconfig(args) => kubeconfig(args),
        ClusterCommand::Build(args) => return ensure_binaries(&args).await.err().unwrap_or(exit::OK),
        ClusterCommand::KindConfig(args) => kind_config(args),
        ClusterCommand::LoadImage(args) => {
            local::real::load_image(&args.state.state_dir, &args.archive, &Progress::stderr()).await.map(|_| exit::OK)
        }
        ClusterCommand::ReapWhenGone(args) => {
            for line in local::reap::reap_when_gone(&args.state_dir) {
                eprintln!("dracheck reaper: {line}");
            }
            return exit::OK;
        }
        ClusterCommand::Agent(args) => {
            let takeover = nodes::Takeover { nodes: args.only, classes_exist: args.classes_exist };
            return nodes::agent(&args.state.state_dir, args.nodes, takeover).await;
        }
    };
    result.unwrap_or_else(report)
}

fn kind_config(args: KindConfigArgs) -> Result<u8, ClusterError> {
    let release = match &args.k8s_version {
        Some(v) => versions::find_release(v)?,
        None => versions::default_release(),
    };
    let gates = local::validate_feature_gates(&args.feature_gates)?;
    print!("{}", dracheck_clusters::kind::config(release, &gates, args.workers));
    Ok(exit::OK)
}

fn report(e: ClusterError) -> u8 {
    eprintln!("dracheck: {e}");
    exit::of(e.failure())
}

/// The binaries the tests and the cluster will use, built if needed; `Err` is an exit code.
pub async fn ensure_binaries(args: &BinArgs) -> Result<(), u8> {
    let progress = Progress::stderr();
    let result = match &args.k8s_bin_dir {
        Some(dir) => local::BinDir::existing(dir),
        None => {
            let release = match &args.k8s_version {
                Some(v) => versions::find_release(v),
                None => Ok(versions::default_release()),
            };
            match release {
                // The node programs too, where real nodes can run: one build instead of two.
                Ok(r) => binaries::cached_or_build(r, local::NodeKind::Real, &progress).await,
                Err(e) => Err(e),
            }
        }
    };
    match result {
        Ok(bins) => {
            progress.line(format!("control plane {} in {}", bins.version, bins.dir.display()));
            Ok(())
        }
        Err(e) => Err(report(e)),
    }
}

/// Builds the programs and images of real nodes for the release the tests use, where this
/// machine can run real nodes; where it cannot, says why (the real-node tests then skip).
pub async fn ensure_real_node_programs(args: &BinArgs) -> Result<(), u8> {
    let progress = Progress::stderr();
    if let Err(reason) = local::real::host::check_support() {
        progress.line(format!("real nodes: not on this machine ({reason}); their tests will be skipped"));
        return Ok(());
    }
    let release = match (&args.k8s_bin_dir, &args.k8s_version) {
        (Some(_), _) => return Ok(()),
        (None, Some(v)) => versions::find_release(v).map_err(report)?,
        (None, None) => versions::default_release(),
    };
    local::real::prebuild(release, &progress).await.map(|_| ()).map_err(report)
}

/// Removes the state dirs of runs that are gone (killed before their teardown), one line
/// each: done at the start of every `conformance` and `cluster up`. Returns how many.
pub fn reap_stale(progress: &Progress) -> usize {
    let removed = report_reaped(local::reap::reap_stale(), &|l| progress.line(l));
    report_machine(&|l| progress.line(l));
    removed
}

/// One line if real nodes of runs that are gone had left the machine's kernel settings changed.
fn report_machine(say: &dyn Fn(&str)) {
    let restored = local::reap::reap_machine();
    if !restored.is_empty() {
        say(&format!("restored what real nodes of runs that are gone had changed: {}", restored.join(", ")));
    }
}

fn report_reaped(results: Vec<Result<local::reap::Reaped, ClusterError>>, say: &dyn Fn(&str)) -> usize {
    let mut removed = 0;
    for r in results {
        match r {
            Ok(reaped) => {
                say(&reaped.to_string());
                removed += 1;
            }
            Err(e) => say(&format!("could not remove a stale state dir: {e}")),
        }
    }
    removed
}

/// `cluster down --stale`.
pub fn down_stale() -> u8 {
    let results = local::reap::reap_stale();
    let failed = results.iter().any(Result::is_err);
    let removed = report_reaped(results, &|l| println!("{l}"));
    report_machine(&|l| println!("{l}"));
    if removed == 0 && !failed {
        println!("no stale state dirs in {}", std::env::temp_dir().display());
    }
    if failed { exit::CLUSTER_DOWN } else { exit::OK }
}

async fn up(args: UpArgs) -> Result<u8, ClusterError> {
    if args.nodes.driver.is_set() && args.nodes.nodes == 0 {
        eprintln!("dracheck: --driver runs the driver on the cluster's nodes; pass --nodes N (N ≥ 1) as well");
        return Ok(exit::BAD_INPUT);
    }
    local::node_limit(args.nodes.node_kind.parse().unwrap_or_default()).check(args.nodes.nodes)?;
    if args.nodes.nodes > 0 && args.nodes.node_kind == "real" {
        local::real::host::check_support().map_err(|reason| ClusterError::RealNodesUnsupported { reason })?;
    }
    // Checked (and a Go-built driver built) before anything starts, so that a wrong driver
    // leaves nothing behind.
    let progress = Progress::stderr();
    reap_stale(&progress);
    // The given dir itself may hold the state of an `up` that was killed while starting.
    if let Some(reaped) = local::reap::reap_if_stale(&args.state.state_dir)? {
        progress.line(reaped.to_string());
    }
    let adapter = match args.nodes.driver.emulated_adapter(&progress).await {
        Ok(a) => a,
        Err((code, msg)) => {
            eprintln!("dracheck: {msg}");
            return Ok(code);
        }
    };
    let opts = LocalClusterOptions {
        k8s_version: args.bins.k8s_version,
        k8s_bin_dir: args.bins.k8s_bin_dir,
        state_dir: Some(args.state.state_dir),
        feature_gates: args.feature_gates,
        resource_api_versions: args.resource_api_versions,
        apiserver_port: args.apiserver_port,
        start_timeout: Duration::from_secs(args.start_timeout),
        lifetime: Lifetime::Detached,
        progress,
        node_kind: args.nodes.node_kind.parse().unwrap_or_default(),
        floor: false,
        // Killed before it detached, `up` leaves a cluster nobody owns: reaped at once.
        reaper: reaper(),
    };
    // Dropping the start future on Ctrl-C stops whatever it had started and removes the dir.
    let cluster = tokio::select! {
        r = LocalCluster::start(opts) => r?,
        signal = crate::interrupt::interrupted() => {
            eprintln!("dracheck: interrupted ({signal}); stopped everything that had been started");
            return Ok(exit::INTERRUPTED);
        }
    };
    let state_dir = cluster.state_dir().to_path_buf();
    if args.nodes.nodes > 0 && args.nodes.node_kind == "real" {
        // Built here, with progress on this terminal, so that the agent only starts them.
        let release = local::versions::find_release(cluster.kubernetes_version())?;
        local::real::prebuild(release, &Progress::stderr()).await?;
    }
    if args.nodes.nodes > 0 {
        eprintln!(
            "starting {} {} node(s){}",
            args.nodes.nodes,
            args.nodes.node_kind,
            adapter.as_ref().map_or(String::new(), |a| format!(" with driver {}", a.name))
        );
        let takeover = nodes::Takeover::default();
        let started = tokio::select! {
            r = nodes::spawn_agent(&state_dir, &args.nodes, &takeover, adapter.is_some()) => r,
            _ = crate::interrupt::interrupted() => Err("interrupted".into()),
        };
        if let Err(e) = started {
            eprintln!("dracheck: {e}");
            // The agent is stopped already; the handle stops the control plane.
            drop(cluster);
            eprintln!("stopped the cluster again and removed {}", state_dir.display());
            return Ok(exit::CLUSTER_DOWN);
        }
    }
    // Only now is it nobody's: an `up` killed before this point leaves a dir that the next
    // run reaps.
    let info = cluster.detach()?;
    eprintln!(
        "local cluster {} is running at {}; stop it with `{} cluster down --state-dir {}`",
        info.kubernetes_version,
        info.server,
        crate::program(),
        state_dir.display()
    );
    println!("{}", info.kubeconfig.display());
    Ok(exit::OK)
}

fn down(args: StateArgs) -> Result<u8, ClusterError> {
    let stopped = local::stop_recorded(&args.state_dir)?;
    eprintln!("{}", down_message(&stopped, &args.state_dir));
    Ok(exit::OK)
}

/// What `down` found and did, e.g. `local cluster v1.37.2: found 4 recorded processes, none
/// alive; removed /tmp/x`.
fn down_message(stopped: &local::Stopped, state_dir: &std::path::Path) -> String {
    format!("local cluster {}: {}; removed {}", stopped.kubernetes_version, stopped.summary(), state_dir.display())
}

async fn status(args: StateArgs) -> Result<u8, ClusterError> {
    let info = ClusterInfo::load(&args.state_dir)?;
    println!("Kubernetes {} at {}", info.kubernetes_version, info.server);
    let mut all_alive = true;
    for p in &info.processes {
        let alive = p.is_alive();
        all_alive &= alive;
        println!("  {:<24} pid {:<8} {}", p.name, p.pid, if alive { "running" } else { "NOT RUNNING" });
    }
    let ready = match local::client_for(&info.kubeconfig, None).await {
        Ok(client) => {
            let req = http::Request::get("/readyz").body(Vec::new()).expect("a valid request");
            client.request_text(req).await.map(|_| ()).map_err(|e| e.to_string())
        }
        Err(e) => Err(e.to_string()),
    };
    match (&ready, all_alive && info.ready) {
        (Ok(()), true) => {
            println!("  apiserver /readyz ok; resource.k8s.io {}", info.resource_api_versions.join(", "));
            println!("  kubeconfig {}", info.kubeconfig.display());
            Ok(exit::OK)
        }
        _ => Err(ClusterError::NotRunning {
            state_dir: args.state_dir,
            detail: match ready {
                Err(e) => format!("the apiserver is not ready ({e})"),
                Ok(()) if !info.ready => "start-up never completed".into(),
                Ok(()) => "some of its processes are gone".into(),
            },
        }),
    }
}

fn kubeconfig(args: StateArgs) -> Result<u8, ClusterError> {
    let info = ClusterInfo::load(&args.state_dir)?;
    if info.first_alive().is_none() {
        return Err(ClusterError::NotRunning {
            state_dir: args.state_dir,
            detail: "none of its processes is running".into(),
        });
    }
    println!("{}", info.kubeconfig.display());
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stopped(stopped: &[&str], not_running: &[&str]) -> local::Stopped {
        local::Stopped {
            kubernetes_version: "v1.37.2".into(),
            stopped: stopped.iter().map(|s| s.to_string()).collect(),
            not_running: not_running.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn down_says_what_it_found() {
        let dir = std::path::Path::new("/tmp/dracheck-0/local");
        let components = ["etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager"];
        assert_eq!(
            down_message(&stopped(&[], &components), dir),
            "local cluster v1.37.2: found 4 recorded processes, none alive; removed /tmp/dracheck-0/local"
        );
        assert_eq!(
            down_message(&stopped(&components, &[]), dir),
            "local cluster v1.37.2: stopped its 4 processes (etcd, kube-apiserver, kube-scheduler, \
             kube-controller-manager); removed /tmp/dracheck-0/local"
        );
        assert_eq!(
            down_message(&stopped(&["kube-apiserver", "node-agent"], &["etcd"]), dir),
            "local cluster v1.37.2: stopped 2 of its 3 recorded processes (kube-apiserver, node-agent); etcd had \
             already ended; removed /tmp/dracheck-0/local"
        );
    }
}
