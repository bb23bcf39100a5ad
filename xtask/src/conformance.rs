//! `cargo xtask conformance`: bring up (or target) a cluster with the driver, run the
//! scenarios of its profiles, write the JSON result and print the summary.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use dracheck_clusters::LocalClusterOptions;
use dracheck_clusters::local::{NodeKind, Progress};
use dracheck_suites::adapters::Adapter;
use dracheck_suites::engine::{Abilities, Filter};
use dracheck_suites::local_run::{self, ExistingRun, LocalRun};
use dracheck_suites::profile::{self, Profile};
use dracheck_suites::result::levels::Level;
use dracheck_suites::result::{RunResult, Verdict};

use crate::drivers::DriverArgs;
use crate::exit;
use crate::providers::Provider;

#[derive(Debug, Args)]
pub struct ConformanceArgs {
    /// The driver under test (default: `mock`).
    #[command(flatten)]
    pub driver: DriverArgs,
    /// `local` (the embedded control plane with its own nodes: real ones, kubelet, containerd
    /// and runc, by default; see --node-kind), `kubeconfig` (an existing cluster
    /// with the driver installed, or --install helm), `kind` or `k3s` (a new cluster in Docker
    /// containers with the driver's chart installed, deleted after the run).
    #[arg(long, default_value = "local")]
    pub cluster: String,
    /// Kubeconfig of `--cluster kubeconfig` (default: the files of $KUBECONFIG, merged, else
    /// ~/.kube/config, else the pod's service account).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of the kubeconfig to use instead of its current context.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// A label selector of the installed driver's kubelet-plugin pods (a DaemonSet's): driver
    /// restarts delete the node's pod and wait for its replacement. Without it they are skipped
    /// outside the local cluster.
    #[arg(long, value_name = "LABEL-SELECTOR")]
    pub driver_pods: Option<String>,
    /// The namespace of `--driver-pods` (default: any).
    #[arg(long, value_name = "NS", requires = "driver_pods")]
    pub driver_namespace: Option<String>,
    /// Profiles to check (a path or a shipped profile's name; repeatable). Default: the
    /// driver's shipped profiles.
    #[arg(long = "profile", value_name = "FILE")]
    pub profiles: Vec<String>,
    /// Only guarantees matching this glob (repeatable), e.g. `claim.*`.
    #[arg(long, value_name = "ID-GLOB")]
    pub only: Vec<String>,
    /// Leave out guarantees matching this glob (repeatable).
    #[arg(long, value_name = "ID-GLOB")]
    pub skip: Vec<String>,
    /// Nodes of the local cluster. With a node per scenario role of every profile (ten for the
    /// mock's shipped profiles) all of them run side by side; more nodes deal the scenarios of
    /// the busiest roles over more nodes, which shortens a run that waits out timeouts.
    #[arg(long, default_value_t = dracheck_suites::local_run::DEFAULT_NODES)]
    pub nodes: usize,
    /// `real`: each node runs the upstream kubelet, containerd and runc (built from their Go
    /// modules; needs root and cgroups). `emulated`: dracheck's kubelet emulation, lighter,
    /// for machines without root and for scale (README.md says what it does not check).
    #[arg(long, value_name = "KIND", env = "DRACHECK_NODE_KIND", default_value = "real", value_parser = ["real", "emulated"])]
    pub node_kind: String,
    /// Kubernetes version of the local cluster.
    #[arg(long)]
    pub k8s_version: Option<String>,
    /// Prebuilt control-plane binaries for the local cluster.
    #[arg(long, value_name = "DIR")]
    pub k8s_bin_dir: Option<PathBuf>,
    /// Feature gates for every component of the local cluster.
    #[arg(long, default_value = "")]
    pub feature_gates: String,
    /// `resource.k8s.io` versions the local cluster serves beyond those a default API server
    /// of its release serves (v1 alone for 1.36 and 1.37), comma-separated: `v1beta2,v1beta1`.
    /// A driver that needs them fails on a default cluster; the result lists what was served.
    #[arg(long, value_delimiter = ',', value_name = "VERSIONS")]
    pub resource_api_versions: Vec<String>,
    /// Where to write the JSON result and its reports (`junit_*.xml`, Markdown, HTML): the
    /// CI's `$ARTIFACTS` where that is set, else `reports`.
    #[arg(long, env = "ARTIFACTS", default_value = "reports")]
    pub out: PathBuf,
    /// Leave the local cluster running after the run, its nodes and drivers included (the
    /// drivers restarted under a detached agent); prints how to stop it.
    #[arg(long)]
    pub keep_cluster: bool,
    /// Run at most N groups of scenarios at once (each group on a node of its own); 0: as
    /// many as there are nodes for.
    #[arg(long, default_value_t = 0)]
    pub parallel: usize,
    /// Seconds one scenario may take.
    #[arg(long, default_value_t = 240)]
    pub scenario_timeout: u64,
    // Boxed: the command enum keeps its variants close in size.
    #[command(flatten)]
    pub install: Box<crate::install::InstallArgs>,
    /// Worker nodes of a `--cluster kind` cluster, besides its control plane.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// After the summary, print the result and its reports to stdout as one base64 tar.gz
    /// between marker lines, for `dracheck retrieve` to take out of an in-cluster Job's log.
    #[arg(long)]
    pub results_to_log: bool,
    /// Print the plan and start nothing: the profiles, each scenario with the guarantees it
    /// would check, and which the target would skip and why. Exit 0, or 2 on bad input.
    #[arg(long)]
    pub dry_run: bool,
    /// Fail the run (exit 1) for a failed `should` too, not only for a failed `must`:
    /// `should` guarantees are hardening the DRA contract does not require (`list` shows each
    /// guarantee's level).
    #[arg(long)]
    pub strict: bool,
}

impl ConformanceArgs {
    /// The flags that shape the verdicts, as the result keeps them.
    fn shape(&self) -> dracheck_suites::result::RunShape {
        dracheck_suites::result::RunShape {
            faults: self.driver.faults.clone(),
            only: self.only.clone(),
            skip: self.skip.clone(),
            strict: self.strict,
        }
    }

    /// The guarantees `--only` and `--skip` select; each of their globs must match some
    /// guarantee ID.
    fn filter(&self) -> Result<Filter, Early> {
        let filter = Filter { only: self.only.clone(), skip: self.skip.clone() };
        let ids: Vec<&str> = dracheck_suites::profile::ids::MEANINGS.iter().map(|(id, _)| *id).collect();
        match filter.matching_none(&ids).as_slice() {
            [] => Ok(filter),
            none => Err((
                exit::BAD_INPUT,
                format!(
                    "--only/--skip {none:?}: no guarantee ID matches; `{} list` shows them all. Globs use `*` \
                     (`--only 'claim.*'`), and several are given as several flags (`--only a --only b`), not as one \
                     list",
                    crate::program()
                ),
            )),
        }
    }
}

const KNOWN_CLUSTERS: &str =
    "known are `local` (the embedded cluster), `kubeconfig` (an existing one), `kind` and `k3s`";

/// A failure before any verdict: the message and the exit code.
type Early = (u8, String);

pub async fn run(args: ConformanceArgs) -> u8 {
    exit::report(conformance(args).await, "dracheck")
}

fn load_profiles(args: &ConformanceArgs, adapter: &Adapter) -> Result<Vec<(PathBuf, Profile)>, Early> {
    let paths = if args.profiles.is_empty() {
        profile::shipped(adapter.short)
    } else {
        args.profiles
            .iter()
            .map(|p| profile::resolve(p, adapter.short))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| (exit::BAD_INPUT, e.to_string()))?
    };
    if paths.is_empty() {
        return Err((exit::BAD_INPUT, format!("driver {} ships no profiles; pass --profile FILE", adapter.short)));
    }
    let mut out = Vec::new();
    for path in paths {
        let p = profile::load(&path).map_err(|e| (exit::BAD_INPUT, e.to_string()))?;
        if p.driver != adapter.name {
            return Err((
                exit::BAD_INPUT,
                format!(
                    "profile {} is for driver {}, not {}: pass --profile with a profile for {} or pick the driver it was written for",
                    path.display(),
                    p.driver,
                    adapter.name,
                    adapter.name
                ),
            ));
        }
        out.push((path, p));
    }
    Ok(out)
}

async fn conformance(mut args: ConformanceArgs) -> Result<u8, Early> {
    let progress = Progress::stderr();
    if args.dry_run {
        return dry_run(&args, &progress).await;
    }
    crate::cluster::reap_stale(&progress);
    // kind and k3s say first whether Docker answers, before anything is built.
    if let provider @ ("kind" | "k3s") = args.cluster.as_str() {
        crate::providers::preflight(provider, &args.driver)?;
        // Their clusters start empty: the driver is always installed.
        args.install.install.get_or_insert_with(|| "helm".into());
    }
    let local_install = args.cluster == "local" && args.install.wanted()?;
    if !args.install.image_archive.is_empty() && !local_install {
        let msg = "--image-archive loads a driver's image into the local cluster's nodes for --install helm: use it \
                   with --cluster local --install helm (other clusters pull from their registries)";
        return Err((exit::BAD_INPUT, msg.into()));
    }
    check_resource_versions(&args)?;
    // Real nodes' prerequisites are checked in milliseconds, before any build.
    if args.cluster == "local" && args.node_kind.parse::<NodeKind>() == Ok(NodeKind::Real) {
        dracheck_clusters::local::real::preflight::check().map_err(|e| (exit::of(e.failure()), e.to_string()))?;
    }
    // Everything that can be wrong with the input is checked before anything starts.
    let adapter = args.driver.adapter(Some("mock"), &progress).await?.expect("mock is the default driver");
    let profiles = load_profiles(&args, &adapter)?;
    check_selection(&profiles, &args.filter()?)?;
    check_out(&args.out)?;
    match args.cluster.as_str() {
        "local" if args.driver_pods.is_some() => {
            return Err((
                exit::BAD_INPUT,
                "--driver-pods names the pods of a driver installed in a cluster; the local cluster runs the driver \
                 itself and restarts it directly: drop it, or use --cluster kubeconfig"
                    .into(),
            ));
        }
        "local" if args.install.wanted()? => return local_chart(args, adapter, profiles, progress).await,
        "local" => {}
        "kubeconfig" => return existing(args, adapter, profiles, progress, Provided::Named("kubeconfig".into())).await,
        provider @ ("kind" | "k3s") => {
            return container_cluster(provider.to_string(), args, adapter, profiles, progress).await;
        }
        other => {
            return Err((exit::BAD_INPUT, format!("--cluster {other}: {KNOWN_CLUSTERS}")));
        }
    }
    dracheck_clusters::local::validate_feature_gates(&args.feature_gates)
        .map_err(|e| (exit::BAD_INPUT, e.to_string()))?;
    let filter = args.filter()?;
    let node_kind: NodeKind = args.node_kind.parse().map_err(|e: String| (exit::BAD_INPUT, e))?;
    check_nodes(args.nodes, node_kind, &profiles, &filter)?;

    let short = adapter.short;
    let cfg = LocalRun {
        adapter,
        profiles,
        filter,
        nodes: args.nodes,
        cluster: LocalClusterOptions {
            k8s_version: args.k8s_version.clone(),
            k8s_bin_dir: args.k8s_bin_dir.clone(),
            feature_gates: args.feature_gates.clone(),
            resource_api_versions: args.resource_api_versions.clone(),
            node_kind,
            // A SIGKILL leaves nothing behind for long: the reaper puts the machine back.
            reaper: crate::cluster::reaper(),
            ..LocalClusterOptions::default()
        },
        scenario_timeout: Duration::from_secs(args.scenario_timeout),
        parallel: args.parallel,
        keep_cluster: args.keep_cluster,
        companion: crate::drivers::companion(),
    };
    let run_id = local_run::run_id();
    // On Ctrl-C the run's future is dropped: the cluster handle inside stops every process
    // it started and removes its state dir.
    let finished = tokio::select! {
        f = local_run::run(cfg, &run_id, &progress) => f.map_err(|e| (exit::of(e.failure), e.message))?,
        signal = crate::interrupt::interrupted() => {
            eprintln!("dracheck: interrupted ({signal}); stopped the cluster and everything the run had started");
            return Ok(exit::INTERRUPTED);
        }
    };
    let not_kept = match finished.kept {
        Some(c) => crate::nodes::keep_and_say(c, &args.driver).await.err(),
        None => None,
    };
    let code = write_and_report(&args, short, &run_id, finished.result)?;
    // The verdicts stand, but what --keep-cluster asked for did not happen: a script that
    // goes on to inspect the cluster must not find it missing after a success.
    match not_kept {
        Some(why) => Err((
            exit::CLUSTER_DOWN,
            format!("the run finished (its verdicts above), but --keep-cluster could not keep the cluster: {why}"),
        )),
        None => Ok(code),
    }
}

/// `--dry-run`: the input checked as a run checks it, then the plan on the target the
/// arguments name, with what that kind of target lets the scenarios do.
async fn dry_run(args: &ConformanceArgs, progress: &Progress) -> Result<u8, Early> {
    let adapter = args.driver.adapter(Some("mock"), progress).await?.expect("mock is the default driver");
    let profiles = load_profiles(args, &adapter)?;
    let filter = args.filter()?;
    check_selection(&profiles, &filter)?;
    // kind and K3s clusters start empty: their driver is always installed.
    let installed = args.install.wanted()? || matches!(args.cluster.as_str(), "kind" | "k3s");
    let abilities = match args.cluster.as_str() {
        "local" => {
            let node_kind: NodeKind = args.node_kind.parse().map_err(|e: String| (exit::BAD_INPUT, e))?;
            check_nodes(args.nodes, node_kind, &profiles, &filter)?;
            Abilities { node_control: true, driver_processes: !installed, driver_pods: installed, companion: true }
        }
        "kubeconfig" | "kind" | "k3s" => Abilities {
            node_control: false,
            driver_processes: false,
            driver_pods: args.driver_pods.is_some() || installed,
            companion: false,
        },
        other => return Err((exit::BAD_INPUT, format!("--cluster {other}: {KNOWN_CLUSTERS}"))),
    };
    let plan = local_run::plan(profiles, filter, "dry-run", Duration::from_secs(args.scenario_timeout), args.parallel);
    println!("dry run: driver {} ({}) on --cluster {}; nothing is started", adapter.short, adapter.name, args.cluster);
    print!("{}", dracheck_suites::engine::dry_run::describe(&plan, abilities, &adapter));
    Ok(exit::OK)
}

/// `--resource-api-versions` names versions the local cluster's release serves, and only for
/// the local cluster: another cluster serves what its admin set up.
fn check_resource_versions(args: &ConformanceArgs) -> Result<(), Early> {
    if args.resource_api_versions.is_empty() {
        return Ok(());
    }
    if args.cluster != "local" {
        return Err((
            exit::BAD_INPUT,
            format!(
                "--resource-api-versions sets what the local cluster serves; --cluster {} serves what it was set up \
                 with: drop the flag",
                args.cluster
            ),
        ));
    }
    // A --k8s-bin-dir's release is known once its binaries answer; the cluster checks then.
    let Ok(release) = dracheck_clusters::local::versions::find_release(
        args.k8s_version.as_deref().unwrap_or(dracheck_clusters::local::versions::default_release().version),
    ) else {
        return Ok(());
    };
    release.check_resource_versions(&args.resource_api_versions).map_err(|e| (exit::BAD_INPUT, e.to_string()))
}

/// The selection leaves something to check: a run that checks nothing would start a cluster
/// and pass, which is no verdict.
fn check_selection(profiles: &[(PathBuf, Profile)], filter: &Filter) -> Result<(), Early> {
    if !local_run::selects_nothing(profiles, filter) {
        return Ok(());
    }
    let shown = |flag: &str, globs: &[String]| globs.iter().map(|g| format!("{flag} '{g}'")).collect::<Vec<_>>();
    let given = [shown("--only", &filter.only), shown("--skip", &filter.skip)].concat().join(" ");
    let names: Vec<&str> = profiles.iter().map(|(_, p)| p.metadata.name.as_str()).collect();
    Err((
        exit::BAD_INPUT,
        format!(
            "{given} leaves no guarantee of the driver or of the profiles ({}) to check, so the run would check \
             nothing and pass; select at least one with --only, or skip fewer (`{} list` shows the IDs)",
            names.join(", "),
            crate::program()
        ),
    ))
}

/// `--nodes` within what the run can use: enough for the selected scenarios, no more than the
/// machine holds.
fn check_nodes(nodes: usize, kind: NodeKind, profiles: &[(PathBuf, Profile)], filter: &Filter) -> Result<(), Early> {
    let (needed, why) = local_run::nodes_needed(profiles, filter);
    if nodes < needed {
        return Err((
            exit::BAD_INPUT,
            format!(
                "--nodes {nodes}: this run needs at least {needed} node(s): {why}. Pass --nodes {needed} or \
                 more (the default, {}, runs every scenario role of the shipped profiles side by side), or leave the \
                 node-removal guarantees out with --skip 'node.removal.*'",
                local_run::DEFAULT_NODES
            ),
        ));
    }
    dracheck_clusters::local::node_limit(kind).check(nodes).map_err(|e| (exit::BAD_INPUT, e.to_string()))
}

/// `--out` can take the result: checked before the run, so a finished run never has nowhere
/// to write. The probe file, and the folders made for it, are removed again: a run refused
/// later leaves nothing behind, and the result's write makes them anew.
fn check_out(out: &std::path::Path) -> Result<(), Early> {
    let first_missing = out.ancestors().take_while(|a| !a.as_os_str().is_empty() && !a.exists()).last();
    let probed = probe_out(out);
    if let Some(made) = first_missing {
        let _ = std::fs::remove_dir_all(made);
    }
    probed
}

fn probe_out(out: &std::path::Path) -> Result<(), Early> {
    let unwritable = |e: std::io::Error| {
        (
            exit::BAD_INPUT,
            format!(
                "--out {}: cannot write there ({e}); pass --out with a directory you can write to (it is created if \
                 missing)",
                out.display()
            ),
        )
    };
    std::fs::create_dir_all(out).map_err(unwritable)?;
    tempfile::Builder::new().prefix(".dracheck-probe-").tempfile_in(out).map(drop).map_err(unwritable)?;
    match free_bytes(out) {
        Some(free) if free < OUT_SPACE => Err((
            exit::BAD_INPUT,
            format!(
                "--out {}: {} KiB free there, and a result with its reports takes up to {} KiB; free some space or \
                 pass --out on another file system",
                out.display(),
                free / 1024,
                OUT_SPACE / 1024
            ),
        )),
        _ => Ok(()),
    }
}

/// What a result and its reports take at most: a run's evidence (logs, events) makes the JSON
/// a few hundred KiB, and the HTML and Markdown reports repeat it.
const OUT_SPACE: u64 = 16 * 1024 * 1024;

/// The bytes an unprivileged writer may still write in `dir`'s file system; `None` where
/// that cannot be read (the write then says what went wrong).
fn free_bytes(dir: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt as _;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a valid C string and `stat` a statvfs the call fills in.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    Some(stat.f_bavail as u64 * stat.f_frsize as u64)
}

/// Writes `json` to `file` whole or not at all: into a temporary file beside it, then renamed
/// over it. A write cut short (a full disk) leaves no empty or truncated result behind.
fn write_whole(file: &std::path::Path, json: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    let mut tmp = tempfile::Builder::new().prefix(".dracheck-result-").tempfile_in(dir)?;
    tmp.write_all(json.as_bytes())?;
    tmp.as_file().sync_all()?;
    tmp.persist(file).map(drop).map_err(|e| e.error)
}

/// `--cluster kind|k3s` (`preflight` found Docker): a new cluster, the driver installed with
/// helm, the run as with `--cluster kubeconfig`, then the cluster deleted, also on Ctrl-C.
async fn container_cluster(
    provider: String,
    mut args: ConformanceArgs,
    adapter: Adapter,
    profiles: Vec<(PathBuf, Profile)>,
    progress: Progress,
) -> Result<u8, Early> {
    use dracheck_clusters::local::versions;
    let release = args.k8s_version.as_deref().map_or(Ok(versions::default_release()), versions::find_release);
    let release = release.map_err(crate::install::cluster)?;
    let gates =
        dracheck_clusters::local::validate_feature_gates(&args.feature_gates).map_err(crate::install::cluster)?;
    // The chart and helm are ready before the cluster exists, which then waits on no build.
    args.install.release(adapter.short, &progress).await?;
    let helm = args.install.helm.as_deref();
    dracheck_clusters::helm::Helm::locate(helm, &progress).await.map_err(crate::install::cluster)?;
    let name = format!("dracheck-{}", local_run::run_id());
    let cluster = tokio::select! {
        c = Provider::create(&provider, &name, release, &gates, args.workers, &progress) => c?,
        signal = crate::interrupt::interrupted() => {
            eprintln!("dracheck: interrupted ({signal}); deleting what had been created of cluster {name}");
            return Ok(exit::INTERRUPTED);
        }
    };
    args.kubeconfig = Some(cluster.kubeconfig());
    args.context = None;
    let code = existing(args, adapter, profiles, progress.clone(), Provided::Named(provider)).await;
    cluster.remove(&progress).await;
    code
}

/// `--cluster local --install helm`: the local cluster with real nodes and no driver of its
/// own, the driver's image imported into every node (no registry), its chart installed: the
/// vendor's release path. The run then goes as with `--cluster kubeconfig`, except that the
/// suite controls the nodes (kubelet restarts, node removal run), and the cluster stops after
/// it, also on Ctrl-C.
async fn local_chart(
    mut args: ConformanceArgs,
    adapter: Adapter,
    profiles: Vec<(PathBuf, Profile)>,
    progress: Progress,
) -> Result<u8, Early> {
    let node_kind: NodeKind = args.node_kind.parse().map_err(|e: String| (exit::BAD_INPUT, e))?;
    if node_kind != NodeKind::Real {
        let msg = "--install helm on the local cluster runs the driver's chart, whose pods need real nodes: drop \
                   --node-kind emulated (or DRACHECK_NODE_KIND=emulated), or run the driver as a host program \
                   without --install";
        return Err((exit::BAD_INPUT, msg.into()));
    }
    dracheck_clusters::local::validate_feature_gates(&args.feature_gates)
        .map_err(|e| (exit::BAD_INPUT, e.to_string()))?;
    let filter = args.filter()?;
    check_nodes(args.nodes, node_kind, &profiles, &filter)?;
    // The chart, image and helm are ready before the cluster starts.
    let local = crate::install::local_values(adapter.short, &args.install);
    args.install.values.splice(0..0, local);
    args.install.release(adapter.short, &progress).await?;
    let images = crate::install::local_images(&args.install, adapter.short, &progress).await?;
    dracheck_clusters::helm::Helm::locate(args.install.helm.as_deref(), &progress)
        .await
        .map_err(crate::install::cluster)?;
    let opts = LocalClusterOptions {
        k8s_version: args.k8s_version.clone(),
        k8s_bin_dir: args.k8s_bin_dir.clone(),
        feature_gates: args.feature_gates.clone(),
        resource_api_versions: args.resource_api_versions.clone(),
        node_kind,
        progress: progress.clone(),
        reaper: crate::cluster::reaper(),
        ..LocalClusterOptions::default()
    };
    let nodes = args.nodes;
    let started = async {
        let mut cluster = dracheck_clusters::LocalCluster::start(opts).await?;
        cluster.add_nodes_reporting(nodes, &progress).await?;
        for archive in &images {
            progress.line(format!("importing {} into {nodes} node(s)", archive.display()));
            cluster.import_image(archive).await?;
        }
        Ok::<_, dracheck_clusters::ClusterError>(cluster)
    };
    // On Ctrl-C or an error the half-started cluster's handle stops what it started.
    let cluster = tokio::select! {
        c = started => c.map_err(crate::install::cluster)?,
        signal = crate::interrupt::interrupted() => {
            eprintln!("dracheck: interrupted ({signal}); stopped the cluster and everything the run had started");
            return Ok(exit::INTERRUPTED);
        }
    };
    args.kubeconfig = Some(cluster.kubeconfig().to_path_buf());
    args.context = None;
    existing(args, adapter, profiles, progress, Provided::Local(Box::new(cluster))).await
}

/// Who made the cluster of a run on an installed driver: a provider by name (its cluster is
/// not the suite's), or the local cluster, whose nodes the suite controls and stops after.
enum Provided {
    Named(String),
    Local(Box<dracheck_clusters::LocalCluster>),
}

/// `--cluster kubeconfig`: the driver already runs there, or `--install helm` installs it for
/// the run and removes it afterwards (also on Ctrl-C; on a panic the release's `Drop` does).
async fn existing(
    args: ConformanceArgs,
    adapter: Adapter,
    profiles: Vec<(PathBuf, Profile)>,
    progress: Progress,
    provided: Provided,
) -> Result<u8, Early> {
    let loaded = crate::kubeconfig::load(args.kubeconfig.as_deref(), &crate::kubeconfig::Env::of_process())
        .map_err(crate::kubeconfig::Error::early)?;
    let short = adapter.short;
    // The install's own input (flags, chart, helm) first: it is wrong whatever the cluster.
    let release = if args.install.wanted()? {
        let spec = args.install.release(short, &progress).await?;
        let helm = dracheck_clusters::helm::Helm::locate(args.install.helm.as_deref(), &progress)
            .await
            .map_err(crate::install::cluster)?;
        Some((spec, helm))
    } else {
        None
    };
    // Checked before the install, and on the files themselves: helm's error for an unknown
    // context lists no choices, and the suite's own check would name the file written below.
    loaded.config(args.context.as_deref()).await.map_err(crate::kubeconfig::Error::early)?;
    // Helm, the suite and the plugin tier's drivers each take one path; a merged list or the
    // pod's service account is written out for them, and removed when the run returns.
    let one_file = loaded.one_file().map_err(crate::kubeconfig::Error::early)?;
    let kubeconfig = one_file.path.clone();
    let mut driver_pods = args.driver_pods.clone().map(|selector| dracheck_suites::engine::target::DriverPods {
        namespace: args.driver_namespace.clone(),
        selector,
    });
    let installed = if let Some((spec, helm)) = release {
        driver_pods = driver_pods.or_else(|| args.install.plugin_pods(short, &spec));
        tokio::select! {
            r = crate::install::install(&args.install, helm, spec, &kubeconfig, args.context.as_deref(), &adapter.name, &progress) => {
                Some(r?)
            }
            _ = crate::interrupt::interrupted() => {
                eprintln!("dracheck: interrupted during the install; removing what it had made");
                return Ok(exit::INTERRUPTED);
            }
        }
    } else {
        None
    };
    let (provider, local) = match provided {
        Provided::Named(name) => (name, None),
        Provided::Local(cluster) => ("local".to_string(), Some(*cluster)),
    };
    let started_here = local.is_some();
    let cfg = ExistingRun {
        local,
        driver_pods,
        kubeconfig,
        context: args.context.clone(),
        adapter,
        profiles,
        filter: args.filter()?,
        scenario_timeout: Duration::from_secs(args.scenario_timeout),
        parallel: args.parallel,
        // Only where the suite started the nodes: elsewhere it cannot run a driver on one.
        companion: if started_here { crate::drivers::companion() } else { None },
    };
    let run_id = local_run::run_id();
    // On Ctrl-C the run's future is dropped, and with it a local cluster inside it.
    let result = tokio::select! {
        r = local_run::run_existing(cfg, &run_id, &progress) => Some(r),
        _ = crate::interrupt::interrupted() => None,
    };
    // The release goes while its cluster is still up; a local cluster stops after. A local
    // cluster is gone already where the run did not finish (its handle was dropped), and the
    // release with it.
    let cluster_gone = started_here && !matches!(&result, Some(Ok(_)));
    if cluster_gone {
        if let Some(release) = installed {
            release.gone_with_its_cluster();
        }
    } else {
        crate::install::remove(installed, &progress).await;
    }
    let Some(result) = result else {
        eprintln!("dracheck: interrupted; objects of this run carry the label dracheck.io/run={run_id}");
        return Ok(exit::INTERRUPTED);
    };
    let finished = result.map_err(|e| (exit::of(e.failure), e.message))?;
    if let Some(cluster) = finished.kept {
        cluster.stop();
    }
    let mut result = finished.result;
    result.cluster.provider = provider;
    write_and_report(&args, short, &run_id, result)
}

fn write_and_report(args: &ConformanceArgs, short: &str, run_id: &str, result: RunResult) -> Result<u8, Early> {
    let file = args.out.join(format!("{short}-{}-{run_id}.json", result.cluster.kubernetes_version));
    let _ = std::fs::create_dir_all(&args.out);
    let mut result = result;
    result.shape = args.shape();
    crate::report::redactor(args.kubeconfig.as_deref()).result(&mut result);
    let json = serde_json::to_string_pretty(&result).expect("the result serializes");
    let file = match write_or_fallback(&file, &json, &std::env::temp_dir()) {
        Ok((written, None)) => written,
        Ok((written, Some(e))) => {
            eprintln!(
                "dracheck: could not write {} ({e}); the result is at {} instead",
                file.display(),
                written.display()
            );
            written
        }
        Err(why) => return Err((exit::FAILED, format!("{why}; here it is:\n{json}"))),
    };
    print_summary(&result);
    println!("result: {}", file.display());
    let pages = match dracheck_report::render_beside(&file, &result, &Default::default()) {
        Ok(pages) => {
            let names: Vec<String> = pages.iter().map(|p| p.display().to_string()).collect();
            println!("reports: {}", names.join(", "));
            pages
        }
        Err(e) => {
            eprintln!("dracheck: the result is written, but rendering its reports failed: {e}");
            Vec::new()
        }
    };
    if args.results_to_log {
        let files: Vec<PathBuf> = std::iter::once(file.clone()).chain(pages).collect();
        match crate::in_cluster::bundle(&files) {
            Ok(text) => print!("{text}"),
            Err(e) => eprintln!("dracheck: could not print the results to the log: {e}"),
        }
    }
    if let Some(summary) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
        let summary = PathBuf::from(summary);
        if let Err(e) = append_summary(&summary, &result) {
            eprintln!("dracheck: could not append the summary to $GITHUB_STEP_SUMMARY ({}): {e}", summary.display());
        }
    }
    Ok(if result.held(args.strict) { exit::OK } else { exit::FAILED })
}

/// Appends the Markdown report to `path`, the file GitHub Actions shows as the job's summary
/// (`$GITHUB_STEP_SUMMARY`): other steps write there too, so it is appended to, not replaced.
fn append_summary(path: &std::path::Path, result: &RunResult) -> std::io::Result<()> {
    use std::io::Write as _;
    let text = dracheck_report::render(result, dracheck_report::Format::Markdown, &Default::default());
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    writeln!(file, "{}", text.trim_end())
}

/// Writes a finished result to `file`; where that fails (`--out` was writable when the run
/// began, but no longer is) to the same name in `fallback_dir`, with the error that sent it
/// there. A finished result is never dropped silently.
fn write_or_fallback(
    file: &std::path::Path,
    json: &str,
    fallback_dir: &std::path::Path,
) -> Result<(PathBuf, Option<std::io::Error>), String> {
    let e = match write_whole(file, json) {
        Ok(()) => return Ok((file.to_path_buf(), None)),
        Err(e) => e,
    };
    let fallback = fallback_dir.join(file.file_name().unwrap_or_else(|| "dracheck-result.json".as_ref()));
    match write_whole(&fallback, json) {
        Ok(()) => Ok((fallback, Some(e))),
        Err(e2) => Err(format!(
            "the run finished, but its result could be written neither to {} ({e}) nor to {} ({e2})",
            file.display(),
            fallback.display()
        )),
    }
}

fn print_summary(r: &RunResult) {
    println!();
    let build = match r.timings.get("build") {
        Some(b) if *b >= 1.0 => format!(" (+ {b:.0}s building the cluster's binaries)"),
        _ => String::new(),
    };
    println!(
        "dracheck {} · driver {} {} · Kubernetes {} ({}) · {:.0}s{build}",
        r.dracheck_version,
        r.driver.name,
        r.driver.version,
        r.cluster.kubernetes_version,
        r.cluster.describe(),
        r.duration_seconds
    );
    for note in r.shape.notes() {
        println!("  note: {note}");
    }
    let row = |scope: &str, g: &dracheck_suites::result::GuaranteeResult| {
        let mark = match (g.verdict, g.level) {
            (Verdict::Pass, _) => "PASS",
            (Verdict::Fail, Level::Must) => "FAIL",
            // Advice the driver does not follow: said, not failed (unless --strict).
            (Verdict::Fail, Level::Should) => "WARN",
            (Verdict::Skip, _) => "skip",
        };
        let reason: String = g.reason.chars().take(110).collect();
        println!("  {mark}  {scope:<20} {:<42} {reason}", g.id);
    };
    for g in &r.driver_guarantees {
        row("driver", g);
    }
    for p in &r.profiles {
        for g in &p.guarantees {
            row(&p.name, g);
        }
    }
    let count = |v: Verdict, level: Option<Level>| {
        r.all().filter(|g| g.verdict == v && level.is_none_or(|l| g.level == l)).count()
    };
    let advice = match count(Verdict::Fail, Some(Level::Should)) {
        0 => String::new(),
        n => format!(" ({n} of them should-level advice, WARN: exit 1 only with --strict)"),
    };
    println!(
        "{} passed, {} failed{advice}, {} skipped",
        count(Verdict::Pass, None),
        count(Verdict::Fail, None),
        count(Verdict::Skip, None)
    );
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_result_that_cannot_go_to_out_goes_to_the_fallback_dir() {
        let fallback = tempfile::tempdir().unwrap();
        let gone = std::path::Path::new("/proc/dracheck-no-such-dir/mock-v1.37.2-abc.json");
        let (written, why) = super::write_or_fallback(gone, "{}", fallback.path()).unwrap();
        assert_eq!(written, fallback.path().join("mock-v1.37.2-abc.json"));
        assert!(why.is_some(), "the reason it went elsewhere is kept");
        assert_eq!(std::fs::read_to_string(written).unwrap(), "{}");
    }

    #[test]
    fn an_unwritable_out_is_refused_before_the_run_and_leaves_no_folder() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = dir.path().join("a/b/results");
        super::check_out(&fresh).unwrap();
        assert!(!dir.path().join("a").exists(), "the folders made for the probe are removed again");
        let file = dir.path().join("a-file");
        std::fs::write(&file, "").unwrap();
        let (code, message) = super::check_out(&file).unwrap_err();
        assert_eq!(code, crate::exit::BAD_INPUT);
        assert!(message.contains("cannot write there"), "{message}");
    }

    /// A result that does not fit is not left behind cut short: `/dev/full` takes no byte, and
    /// a file system with room for the result holds the whole of it and nothing else.
    #[test]
    fn a_result_is_written_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mock.json");
        super::write_whole(&file, "{\"a\": 1}").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "{\"a\": 1}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["mock.json"], "no temporary file is left");
        // A directory where the result should go: the rename fails, and the half-made file goes.
        let taken = dir.path().join("taken");
        std::fs::create_dir(&taken).unwrap();
        std::fs::write(taken.join("x"), "").unwrap();
        assert!(super::write_whole(&taken, "{}").is_err());
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 2, "only mock.json and taken: {left:?}");
    }

    /// A file system without room for a result is refused before the run, with the space it
    /// has and what a result needs.
    #[test]
    fn an_out_without_room_is_refused_before_the_run() {
        let dir = tempfile::tempdir().unwrap();
        assert!(super::free_bytes(dir.path()).is_some_and(|b| b > 0));
        // /dev/shm's size is the machine's; a tiny file system needs a mount, which only root
        // may make, so the check's arithmetic is what is tested everywhere.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped the small file system: mounting one needs root");
            return;
        }
        let small = tempfile::tempdir().unwrap();
        let target = std::ffi::CString::new(small.path().to_str().unwrap()).unwrap();
        let fs = std::ffi::CString::new("tmpfs").unwrap();
        let opts = std::ffi::CString::new("size=1m").unwrap();
        // SAFETY: valid C strings; the mount is undone below, also when an assertion fails.
        let mounted =
            unsafe { libc::mount(fs.as_ptr(), target.as_ptr(), fs.as_ptr(), 0, opts.as_ptr().cast::<libc::c_void>()) }
                == 0;
        if !mounted {
            eprintln!("skipped the small file system: mount: {}", std::io::Error::last_os_error());
            return;
        }
        struct Unmount(std::ffi::CString);
        impl Drop for Unmount {
            fn drop(&mut self) {
                // SAFETY: a valid C string naming the mount made above.
                unsafe { libc::umount2(self.0.as_ptr(), libc::MNT_DETACH) };
            }
        }
        let _unmount = Unmount(target);
        let (code, message) = super::check_out(small.path()).unwrap_err();
        assert_eq!(code, crate::exit::BAD_INPUT);
        assert!(message.contains("KiB free there"), "{message}");
    }
}
