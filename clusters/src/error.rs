//! Errors of the cluster providers. Each message is one paragraph that says what went wrong
//! and what to do about it, because these reach a person at a terminal or in a CI log.

use std::path::PathBuf;

/// What kind of failure an error is. Libraries say only this; the command line (`xtask`)
/// chooses the exit code of each kind, so that every number is chosen in one place and the
/// docs, scripts and tests that read them agree (ARCHITECTURE.md, "Architecture invariants").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Bad input: a wrong flag, an unknown version, a missing file, a port or state dir in use.
    BadInput,
    /// The cluster could not be brought up, is not running or cannot be reached.
    ClusterDown,
    /// The driver's install (a helm release) failed; it was uninstalled.
    InstallFailed,
    /// The credentials lack a permission the suite needs on a cluster it did not start.
    Forbidden,
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(
        "Kubernetes version {requested} has no build recipe here. Known versions: {known}. \
         Pass one of them with --k8s-version, or point --k8s-bin-dir at a directory that \
         holds etcd, kube-apiserver, kube-scheduler and kube-controller-manager of the \
         version you want."
    )]
    UnknownVersion { requested: String, known: String },

    #[error(
        "--resource-api-versions names resource.k8s.io/{version}, which Kubernetes {release} does not serve; it \
         serves {known}. Pass some of those, or leave the flag out to serve what a default API server of {release} \
         serves."
    )]
    BadResourceVersion { version: String, release: String, known: String },

    #[error(
        "{dir} has no usable {binary} ({problem}). A --k8s-bin-dir must hold executable \
         etcd, kube-apiserver, kube-scheduler and kube-controller-manager binaries; drop the \
         flag to let dracheck build them from the upstream Go modules instead."
    )]
    MissingBinary { dir: PathBuf, binary: String, problem: String },

    #[error(
        "the binaries in {dir} report Kubernetes {found}, but {requested} was requested. \
         Drop --k8s-version to use them as they are, or pass a --k8s-bin-dir of {requested}."
    )]
    BinaryVersionMismatch { dir: PathBuf, found: String, requested: String },

    /// A program built from Go modules (the control plane, node programs, tools) could not
    /// be built.
    #[error(transparent)]
    Build(#[from] dracheck_gobuild::GoBuildError),

    #[error(
        "port {port} on 127.0.0.1 is already in use, so {component} cannot listen on it. \
         Choose another port, or leave the port unset so that dracheck picks a free one."
    )]
    PortInUse { port: u16, component: String },

    #[error(
        "invalid feature gate setting {entry:?}: expected Name=true or Name=false, separated by commas (e.g. DRADeviceTaints=true,DRAConsumableCapacity=true)."
    )]
    InvalidFeatureGates { entry: String },

    #[error(
        "{component} exited during start-up ({status}); its log is {log}. Its last lines:\n{tail}\n\
         Nothing was left running. Fix the cause shown in the log (a stale data dir, a flag the \
         binary does not know, a port taken meanwhile) and run the command again."
    )]
    ComponentDied { component: String, status: String, log: PathBuf, tail: String },

    #[error(
        "{component} did not become healthy within {timeout_s}s ({last}); its log is {log}. \
         Its last lines:\n{tail}\nNothing was left running. On a loaded machine pass a longer \
         --start-timeout; otherwise read the log for the cause."
    )]
    NotHealthy { component: String, timeout_s: u64, last: String, log: PathBuf, tail: String },

    #[error(
        "a local cluster is already running from {state_dir} (pid {pid} alive). Use it, or stop \
         it first with `{program} cluster down --state-dir {state_dir}`, or pick another \
         --state-dir.",
        program = dracheck_adapter::program::name()
    )]
    AlreadyRunning { state_dir: PathBuf, pid: u32 },

    #[error(
        "no local cluster state in {state_dir} ({detail}). Start one with `{program} cluster \
         up --state-dir {state_dir}`, or pass the --state-dir that `cluster up` used.",
        program = dracheck_adapter::program::name()
    )]
    NoState { state_dir: PathBuf, detail: String },

    #[error(
        "the cluster in {state_dir} is not running: {detail}. Run `{program} cluster down \
         --state-dir {state_dir}` to clean up what is left, then `cluster up` again.",
        program = dracheck_adapter::program::name()
    )]
    NotRunning { state_dir: PathBuf, detail: String },

    #[error(
        "{state_dir} is not empty and holds no dracheck cluster, so it cannot be a state dir: \
         stopping the cluster removes its state dir. Pass a new or empty directory."
    )]
    StateDirNotOurs { state_dir: PathBuf },

    #[error(
        "this machine cannot run real nodes: {reason}. Run as root on a machine with cgroups, or pass \
         --node-kind emulated to use dracheck's emulated nodes (README.md, \"Node kinds\", says what they do not \
         check)."
    )]
    RealNodesUnsupported { reason: String },

    #[error(
        "{what} needs real nodes: emulated nodes run no container images. Pass --node-kind real (the default; \
         it needs root and cgroups)."
    )]
    RealNodesNeeded { what: String },

    #[error(
        "the local cluster has no node {name}; `{program} cluster status` lists its nodes",
        program = dracheck_adapter::program::name()
    )]
    NoSuchNode { name: String },

    #[error("{tool} is not available: {detail}. To fix: {fix}.")]
    MissingTool { tool: String, detail: String, fix: String },

    /// Several [`ClusterError::MissingTool`] at once: each says its own fix.
    #[error(
        "real nodes need {} things this machine lacks:{}\nInstall each as it says (`.ci/run` installs the Debian \
         packages where missing), or use --node-kind emulated.",
        .0.len(),
        .0.iter().map(|e| format!("\n  - {e}")).collect::<String>()
    )]
    MissingPrerequisites(Vec<ClusterError>),

    #[error("the pod network of a real node cannot be set up: {problem}. To fix: {fix}.")]
    CniSetup { problem: String, fix: String },

    #[error(
        "importing the node image {archive} into the containerd at {address} failed ({status}). ctr's last \
         lines:\n{tail}\nThe archive is built by dracheck into its cache dir; if the lines call it broken, remove \
         that file so that it is built again, and run the command again."
    )]
    ImageImportFailed { archive: PathBuf, address: PathBuf, status: String, tail: String },

    #[error(
        "`kind create cluster` of {name} failed after {elapsed_s}s ({status}). Its last lines:\n{tail}\n\
         What it had created was deleted again. Check that the node image {image} can be pulled and that \
         Docker has a few GiB of memory free, then run the command again."
    )]
    KindCreateFailed { name: String, elapsed_s: u64, status: String, image: String, tail: String },

    #[error(
        "the K3s container ({image}) did not start: {detail}. Nothing was left running. Check that the \
         image can be pulled (its tag follows the Kubernetes release; pick another release with \
         --k8s-version) and that Docker allows privileged containers."
    )]
    K3sFailed { image: String, detail: String },

    #[error(
        "namespace {namespace} already holds a helm release {release}, which may be someone's installation: \
         dracheck neither replaces nor removes it. Run without --install to check the driver as it is \
         installed, or uninstall it first (`helm uninstall {release} -n {namespace}`)."
    )]
    ReleaseExists { release: String, namespace: String },

    #[error(transparent)]
    InstallFailed(Box<InstallFailure>),

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    #[error("generating certificates failed: {0}")]
    Pki(#[from] rcgen::Error),

    #[error("talking to the local apiserver failed while {context}: {source}")]
    Kube {
        context: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error(
        "--nodes {requested}: this machine can hold at most {limit} {kind} nodes ({available_mib} MiB of memory \
         available, {per_node_mib} MiB per node for what runs on it and its share of the apiserver, {reserved_mib} \
         MiB kept for the control plane). Pass a smaller --nodes, or free memory; emulated nodes \
         (--node-kind emulated) cost less."
    )]
    TooManyNodes {
        requested: usize,
        limit: usize,
        available_mib: u64,
        per_node_mib: u64,
        reserved_mib: u64,
        kind: String,
    },
}

impl ClusterError {
    /// What kind of failure this is: bad input, a cluster that could not be brought up, or a
    /// driver install that failed. The command line turns it into an exit code.
    pub fn failure(&self) -> Failure {
        match self {
            ClusterError::UnknownVersion { .. }
            | ClusterError::BadResourceVersion { .. }
            | ClusterError::MissingBinary { .. }
            | ClusterError::BinaryVersionMismatch { .. }
            | ClusterError::PortInUse { .. }
            | ClusterError::InvalidFeatureGates { .. }
            | ClusterError::AlreadyRunning { .. }
            | ClusterError::NoState { .. }
            | ClusterError::StateDirNotOurs { .. }
            | ClusterError::MissingTool { .. }
            | ClusterError::MissingPrerequisites(_)
            | ClusterError::CniSetup { .. }
            | ClusterError::ReleaseExists { .. }
            | ClusterError::TooManyNodes { .. }
            | ClusterError::RealNodesNeeded { .. } => Failure::BadInput,
            ClusterError::InstallFailed(_) => Failure::InstallFailed,
            _ => Failure::ClusterDown,
        }
    }

    /// The component log that the message quotes and names, if it does.
    pub(crate) fn quoted_log_mut(&mut self) -> Option<&mut PathBuf> {
        match self {
            ClusterError::ComponentDied { log, .. } | ClusterError::NotHealthy { log, .. } => Some(log),
            _ => None,
        }
    }

    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ClusterError {
        let context = context.into();
        move |source| ClusterError::Io { context, source }
    }

    pub(crate) fn kube(context: impl Into<String>) -> impl FnOnce(kube::Error) -> ClusterError {
        let context = context.into();
        move |source| ClusterError::Kube { context, source: Box::new(source) }
    }
}

/// A helm release that did not become ready, with what tells why.
#[derive(Debug, thiserror::Error)]
#[error(
    "helm could not install the release {release} of {chart} into namespace {namespace} ({status}; it \
     waits up to {timeout_s}s for the release to be ready). helm's last lines:\n{helm_tail}\nThe driver's \
     pods:\n{pods}\n{cleanup} Read helm's lines and the pods' states above for the cause (a chart that cannot \
     be found or pulled, an image that cannot be pulled, a node the driver cannot run on); if it only needs \
     longer, pass a larger --install-timeout."
)]
pub struct InstallFailure {
    pub release: String,
    pub chart: String,
    pub namespace: String,
    pub timeout_s: u64,
    pub status: String,
    pub helm_tail: String,
    pub pods: String,
    pub cleanup: String,
}

pub type Result<T, E = ClusterError> = std::result::Result<T, E>;

/// Log tails for error messages, as the Go builds quote them.
pub use dracheck_gobuild::{log_tail, quoted_tail};
