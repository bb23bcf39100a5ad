//! The cluster configuration of a command, found as kubectl finds it: `--kubeconfig PATH` (one
//! file, as kubectl takes only one there), else the files `$KUBECONFIG` lists, merged (the first
//! file to set a value wins; missing files are skipped), else `~/.kube/config`, else the
//! service account of the pod the command runs in. Where a local cluster writes its own
//! kubeconfig, its path comes as `--kubeconfig` and none of the rest applies.
//!
//! Loading and merging are kube's ([`Kubeconfig::read_from`], [`Kubeconfig::merge`]), so that
//! relative paths in a file are resolved against that file's directory as kubectl does. Which
//! files to read is decided here: kube's `Kubeconfig::from_env` fails on a listed file that is
//! missing, which kubectl skips, and reads the process environment, which tests must not.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use dracheck_clusters::reach;
use kube::config::{
    AuthInfo, Cluster, Context, InClusterError, KubeConfigOptions, Kubeconfig, KubeconfigError, NamedAuthInfo,
    NamedCluster, NamedContext,
};

use crate::exit;

/// What a command can not get a cluster configuration from.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no kubeconfig ({looked}): pass --kubeconfig PATH (or set KUBECONFIG)")]
    None { looked: String },
    #[error("cannot read the kubeconfig {}: {source}; {fix}", .path.display())]
    Read {
        path: PathBuf,
        fix: &'static str,
        #[source]
        source: KubeconfigError,
    },
    #[error("cannot merge the kubeconfigs of KUBECONFIG ({files}): {source}; fix them or list fewer in KUBECONFIG")]
    Merge {
        files: String,
        #[source]
        source: KubeconfigError,
    },
    #[error(
        "--context {context}: no such context in {config}; the contexts there: {}. Pass one of them with \
         --context, or leave --context out for the current context",
        if .known.is_empty() { "none".to_string() } else { .known.join(", ") }
    )]
    UnknownContext { context: String, config: String, known: Vec<String> },
    #[error(
        "in {config}, the cluster at {server} cannot be used: {problem}; fix the kubeconfig (kubectl fails on it \
         the same way)"
    )]
    BadCa { config: String, server: String, problem: String },
    #[error("no cluster in {config} ({source}); check --kubeconfig and --context")]
    NoCluster {
        config: String,
        #[source]
        source: KubeconfigError,
    },
    #[error(
        "no kubeconfig, and this pod's service account (KUBERNETES_SERVICE_HOST is set) cannot be used: {source}; \
         pass --kubeconfig PATH (or set KUBECONFIG)"
    )]
    InCluster {
        #[source]
        source: InClusterError,
    },
    #[error("no client for the cluster at {server}: {source}")]
    Client {
        server: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot write the kubeconfig for the run's tools to {}: {source}", .path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Bad input where the configuration cannot name a cluster; a cluster that is down where
    /// only the client fails, as `reach` has it for one file.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Client { .. } | Error::Write { .. } => exit::CLUSTER_DOWN,
            _ => exit::BAD_INPUT,
        }
    }

    /// The form the commands return their failures in.
    pub fn early(self) -> (u8, String) {
        (self.exit_code(), self.to_string())
    }
}

/// The environment the configuration is looked up in; a parameter so that tests need not
/// change the process's own, which tests running in parallel share.
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// `$KUBECONFIG`, as given (a list in the platform's path separator).
    pub kubeconfig: Option<OsString>,
    pub home: Option<PathBuf>,
    /// `KUBERNETES_SERVICE_HOST` is set: the command runs in a pod.
    pub in_pod: bool,
}

impl Env {
    pub fn of_process() -> Env {
        Env {
            kubeconfig: std::env::var_os("KUBECONFIG"),
            home: std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from),
            in_pod: std::env::var_os("KUBERNETES_SERVICE_HOST").is_some_and(|h| !h.is_empty()),
        }
    }
}

/// Where the files came from; it decides what a message tells to fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    Flag,
    Env,
    Home,
}

/// The files of the configuration: `None` where there are none and the command runs in a pod.
fn files(flag: Option<&Path>, env: &Env) -> Result<Option<(Origin, Vec<PathBuf>)>, Error> {
    if let Some(path) = flag {
        return Ok(Some((Origin::Flag, vec![path.to_path_buf()])));
    }
    let listed: Vec<PathBuf> = env
        .kubeconfig
        .as_ref()
        .map(|v| std::env::split_paths(v).filter(|p| !p.as_os_str().is_empty()).collect())
        .unwrap_or_default();
    let (origin, candidates, looked) = if !listed.is_empty() {
        let looked = format!("none of the files KUBECONFIG lists exists: {}", list(&listed));
        (Origin::Env, listed, looked)
    } else if let Some(home) = &env.home {
        let path = home.join(".kube/config");
        let looked = format!("KUBECONFIG is not set and {} does not exist", path.display());
        (Origin::Home, vec![path], looked)
    } else {
        (Origin::Home, Vec::new(), "KUBECONFIG is not set and there is no home directory".to_string())
    };
    // Only a file that is not there is skipped; one that cannot be read is an error when read.
    let present: Vec<PathBuf> = candidates
        .into_iter()
        .filter(|p| !matches!(std::fs::metadata(p), Err(e) if e.kind() == std::io::ErrorKind::NotFound))
        .collect();
    match (present.is_empty(), env.in_pod) {
        (false, _) => Ok(Some((origin, present))),
        (true, true) => Ok(None),
        (true, false) => Err(Error::None { looked }),
    }
}

/// The kubeconfig files a command would read (for the redactor, which must know every
/// credential of them, also those that merging shadows); none where none is found.
pub fn paths(flag: Option<&Path>, env: &Env) -> Vec<PathBuf> {
    files(flag, env).ok().flatten().map(|(_, files)| files).unwrap_or_default()
}

/// A command's cluster configuration, read but not yet used.
#[derive(Debug, Clone)]
pub enum Loaded {
    /// One kubeconfig file, or several merged.
    Files { files: Vec<PathBuf>, merged: Box<Kubeconfig> },
    /// The service account of the pod the command runs in.
    InCluster,
}

/// Reads the configuration `flag` and `env` name; see the module's doc for the order.
pub fn load(flag: Option<&Path>, env: &Env) -> Result<Loaded, Error> {
    let Some((origin, files)) = files(flag, env)? else {
        return Ok(Loaded::InCluster);
    };
    let fix = match origin {
        Origin::Flag => "pass --kubeconfig with a readable file",
        Origin::Env => "fix it or leave it out of KUBECONFIG",
        Origin::Home => "fix it, or pass --kubeconfig PATH",
    };
    let mut merged: Option<Kubeconfig> = None;
    for path in &files {
        let next = Kubeconfig::read_from(path).map_err(|source| Error::Read { path: path.clone(), fix, source })?;
        merged = Some(match merged {
            None => next,
            Some(m) => m.merge(next).map_err(|source| Error::Merge { files: list(&files), source })?,
        });
    }
    Ok(Loaded::Files { merged: Box::new(merged.unwrap_or_default()), files })
}

fn list(files: &[PathBuf]) -> String {
    files.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// A single kubeconfig file for the tools of a run that take a path (helm, the plugin tier's
/// driver instances, the suite's own client). A merged or in-cluster configuration is written
/// to a private temp dir, removed when this is dropped.
#[derive(Debug)]
pub struct OneFile {
    pub path: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

impl Loaded {
    /// How messages name the configuration.
    pub fn describe(&self) -> String {
        match self {
            Loaded::Files { files, .. } if files.len() == 1 => format!("the kubeconfig {}", files[0].display()),
            Loaded::Files { files, .. } => format!("the kubeconfigs of KUBECONFIG ({}, merged)", list(files)),
            Loaded::InCluster => "the in-cluster configuration (this pod's service account)".to_string(),
        }
    }

    /// The contexts there are, in the order kubectl lists them from the merged files.
    pub fn contexts(&self) -> Vec<String> {
        match self {
            Loaded::Files { merged, .. } => merged.contexts.iter().map(|c| c.name.clone()).collect(),
            Loaded::InCluster => Vec::new(),
        }
    }

    /// An unknown `--context` said before anything starts, with the contexts there are: kube's
    /// own error names neither the files nor the choices.
    pub fn check_context(&self, context: Option<&str>) -> Result<(), Error> {
        let Some(context) = context else { return Ok(()) };
        let known = self.contexts();
        if known.iter().any(|c| c == context) {
            return Ok(());
        }
        Err(Error::UnknownContext { context: context.to_string(), config: self.describe(), known })
    }

    /// kube's client configuration for `context` (else the current one), checked as kubectl
    /// checks it before any request: the context exists, the cluster's CA is PEM.
    pub async fn config(&self, context: Option<&str>) -> Result<kube::Config, Error> {
        self.check_context(context)?;
        let merged = match self {
            Loaded::Files { merged, .. } => merged,
            Loaded::InCluster => return kube::Config::incluster().map_err(|source| Error::InCluster { source }),
        };
        let cluster = reach::cluster_of(merged, context);
        if let Some(problem) = cluster.and_then(reach::ca_problem) {
            return Err(Error::BadCa { config: self.describe(), server: reach::server_of(cluster), problem });
        }
        let opts = KubeConfigOptions { context: context.map(str::to_string), ..KubeConfigOptions::default() };
        kube::Config::from_custom_kubeconfig((**merged).clone(), &opts)
            .await
            .map_err(|source| Error::NoCluster { config: self.describe(), source })
    }

    /// A client for the cluster of `context` (else the current one). No request is made.
    pub async fn client(
        &self,
        context: Option<&str>,
        connect_timeout: Option<Duration>,
    ) -> Result<kube::Client, Error> {
        let mut config = self.config(context).await?;
        if connect_timeout.is_some() {
            config.connect_timeout = connect_timeout;
        }
        let server = config.cluster_url.to_string();
        kube::Client::try_from(config).map_err(|source| Error::Client { server, source })
    }

    /// The configuration as one file: the file itself where there is one, else the merged
    /// files or the pod's service account written out (relative paths are absolute by now,
    /// as [`Kubeconfig::read_from`] resolved them).
    pub fn one_file(&self) -> Result<OneFile, Error> {
        let kubeconfig = match self {
            Loaded::Files { files, .. } if files.len() == 1 => {
                return Ok(OneFile { path: files[0].clone(), _dir: None });
            }
            Loaded::Files { merged, .. } => (**merged).clone(),
            Loaded::InCluster => in_cluster_kubeconfig()?,
        };
        let dir = tempfile::Builder::new()
            .prefix("dracheck-kubeconfig")
            .tempdir()
            .map_err(|source| Error::Write { path: std::env::temp_dir(), source })?;
        let path = dir.path().join("config");
        let json = serde_json::to_string(&kubeconfig).expect("a kubeconfig serializes");
        write_private(&path, json.as_bytes()).map_err(|source| Error::Write { path: path.clone(), source })?;
        Ok(OneFile { path, _dir: Some(dir) })
    }
}

/// The file holds credentials: only its owner may read it.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    file.write_all(bytes)
}

/// The pod's service account as a kubeconfig, from kube's in-cluster configuration, so that
/// helm and the driver instances reach the cluster the way this process does. The token and
/// CA stay files: the kubelet rotates them.
fn in_cluster_kubeconfig() -> Result<Kubeconfig, Error> {
    let config = kube::Config::incluster().map_err(|source| Error::InCluster { source })?;
    const NAME: &str = "in-cluster";
    Ok(Kubeconfig {
        clusters: vec![NamedCluster {
            name: NAME.into(),
            cluster: Some(Cluster {
                server: Some(config.cluster_url.to_string()),
                certificate_authority: config.root_cert_file.map(|p| p.display().to_string()),
                ..Cluster::default()
            }),
            ..NamedCluster::default()
        }],
        auth_infos: vec![NamedAuthInfo {
            name: NAME.into(),
            auth_info: Some(AuthInfo { token_file: config.auth_info.token_file, ..AuthInfo::default() }),
            ..NamedAuthInfo::default()
        }],
        contexts: vec![NamedContext {
            name: NAME.into(),
            context: Some(Context {
                cluster: NAME.into(),
                user: Some(NAME.into()),
                namespace: Some(config.default_namespace),
                ..Context::default()
            }),
            ..NamedContext::default()
        }],
        current_context: Some(NAME.into()),
        ..Kubeconfig::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// a: context x (current) on cluster `shared`; b: context y on its own cluster and user,
    /// and its own `shared` and `x`, which a's shadow.
    const A: &str = "apiVersion: v1\nkind: Config\ncurrent-context: x\nclusters:\n- name: shared\n  cluster:\n    \
                     server: https://a.example:6443\ncontexts:\n- name: x\n  context:\n    cluster: shared\n    \
                     user: ua\nusers:\n- name: ua\n  user:\n    token: token-of-a-0123456789\n";
    const B: &str = "apiVersion: v1\nkind: Config\ncurrent-context: y\nclusters:\n- name: shared\n  cluster:\n    \
                     server: https://shadowed.example:6443\n- name: cb\n  cluster:\n    server: \
                     https://b.example:6443\ncontexts:\n- name: y\n  context:\n    cluster: cb\n    user: ub\n- name: \
                     x\n  context:\n    cluster: cb\n    user: ub\nusers:\n- name: ub\n  user:\n    token: \
                     token-only-in-b-0123456789\n";

    struct Files {
        dir: tempfile::TempDir,
    }

    impl Files {
        fn new() -> Files {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("a"), A).unwrap();
            std::fs::write(dir.path().join("b"), B).unwrap();
            Files { dir }
        }

        fn path(&self, name: &str) -> PathBuf {
            self.dir.path().join(name)
        }

        /// `$KUBECONFIG` listing these names, with an empty entry as kubectl tolerates.
        fn env(&self, names: &[&str]) -> Env {
            let mut paths: Vec<PathBuf> = names.iter().map(|n| self.path(n)).collect();
            paths.insert(1.min(paths.len()), PathBuf::new());
            Env { kubeconfig: Some(std::env::join_paths(paths).unwrap()), home: Some(self.path("home")), in_pod: false }
        }
    }

    fn server(config: &kube::Config) -> String {
        config.cluster_url.to_string()
    }

    #[tokio::test]
    async fn kubeconfig_lists_are_merged_the_first_file_winning() {
        let files = Files::new();
        let loaded = load(None, &files.env(&["a", "b"])).unwrap();
        assert_eq!(loaded.contexts(), ["x", "y"]);
        assert_eq!(server(&loaded.config(Some("y")).await.unwrap()), "https://b.example:6443/");
        // The current context is a's, and so are `x` and `shared`, which b defines too.
        assert_eq!(server(&loaded.config(None).await.unwrap()), "https://a.example:6443/");
        assert_eq!(server(&loaded.config(Some("x")).await.unwrap()), "https://a.example:6443/");
        let Loaded::Files { merged, .. } = &loaded else { panic!("files") };
        assert_eq!(merged.current_context.as_deref(), Some("x"));
        // The other order: b wins.
        let reversed = load(None, &files.env(&["b", "a"])).unwrap();
        assert_eq!(server(&reversed.config(None).await.unwrap()), "https://b.example:6443/");
    }

    #[tokio::test]
    async fn a_missing_file_in_the_list_is_skipped_and_all_missing_is_no_kubeconfig() {
        let files = Files::new();
        let loaded = load(None, &files.env(&["missing", "b"])).unwrap();
        assert_eq!(loaded.describe(), format!("the kubeconfig {}", files.path("b").display()));
        assert_eq!(server(&loaded.config(None).await.unwrap()), "https://b.example:6443/");
        let e = load(None, &files.env(&["missing", "gone"])).unwrap_err();
        assert!(matches!(e, Error::None { .. }), "{e:?}");
        assert_eq!(e.exit_code(), exit::BAD_INPUT);
        let message = e.to_string();
        assert!(message.starts_with("no kubeconfig") && message.contains("pass --kubeconfig PATH"), "{message}");
        assert!(message.contains(&files.path("gone").display().to_string()), "{message}");
        // KUBECONFIG set means ~/.kube/config is not looked at, as with kubectl.
        std::fs::create_dir_all(files.path("home/.kube")).unwrap();
        std::fs::write(files.path("home/.kube/config"), A).unwrap();
        assert!(matches!(load(None, &files.env(&["missing"])), Err(Error::None { .. })));
        let home = Env { kubeconfig: Some("".into()), ..files.env(&[]) };
        assert_eq!(
            load(None, &home).unwrap().describe(),
            format!("the kubeconfig {}", files.path("home/.kube/config").display())
        );
        // In a pod, no kubeconfig means its service account.
        let in_pod = Env { in_pod: true, ..files.env(&["missing"]) };
        assert!(matches!(load(None, &in_pod), Ok(Loaded::InCluster)));
    }

    #[test]
    fn the_flag_names_one_file_that_must_be_there() {
        let files = Files::new();
        let env = files.env(&["b"]);
        let loaded = load(Some(&files.path("a")), &env).unwrap();
        assert_eq!(loaded.contexts(), ["x"]);
        let e = load(Some(&files.path("missing")), &env).unwrap_err();
        assert!(
            matches!(e, Error::Read { .. }) && e.to_string().contains("pass --kubeconfig with a readable file"),
            "{e}"
        );
        assert_eq!(e.exit_code(), exit::BAD_INPUT);
    }

    #[tokio::test]
    async fn an_unknown_context_lists_the_contexts_of_every_file() {
        let files = Files::new();
        let loaded = load(None, &files.env(&["a", "b"])).unwrap();
        let e = loaded.config(Some("prod")).await.unwrap_err();
        assert!(matches!(e, Error::UnknownContext { .. }), "{e:?}");
        assert_eq!(e.exit_code(), exit::BAD_INPUT);
        let message = e.to_string();
        assert!(message.contains("--context prod") && message.contains("the contexts there: x, y"), "{message}");
        assert!(message.contains(&files.path("b").display().to_string()), "{message}");
        assert!(!message.contains('\n'), "one paragraph: {message}");
        assert!(matches!(Loaded::InCluster.check_context(Some("x")), Err(Error::UnknownContext { .. })));
    }

    #[test]
    fn a_merged_list_is_written_as_one_private_file_and_one_file_is_passed_as_it_is() {
        use std::os::unix::fs::PermissionsExt as _;
        let files = Files::new();
        let single = load(Some(&files.path("a")), &Env::default()).unwrap().one_file().unwrap();
        assert_eq!(single.path, files.path("a"));
        let merged = load(None, &files.env(&["a", "b"])).unwrap().one_file().unwrap();
        let mode = std::fs::metadata(&merged.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let back = Kubeconfig::read_from(&merged.path).unwrap();
        assert_eq!(back.contexts.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["x", "y"]);
        assert_eq!(back.current_context.as_deref(), Some("x"));
        let path = merged.path.clone();
        drop(merged);
        assert!(!path.exists(), "the written file goes with its handle");
    }
}
