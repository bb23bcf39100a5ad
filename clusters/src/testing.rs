//! For integration tests (feature `testing`): one local cluster per test binary, started in
//! the main thread so that it lives (and dies, with the kernel's parent-death signal) with the
//! test process, shared by named tests run through libtest-mimic.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use libtest_mimic::{Arguments, Failed, Trial};

use crate::{LocalCluster, LocalClusterOptions};

/// What every test gets: the cluster's kubeconfig, and a client made on the test's own
/// runtime (a client is bound to the runtime that made it).
#[derive(Clone)]
pub struct Env {
    pub kubeconfig: PathBuf,
}

impl Env {
    pub async fn client(&self) -> kube::Client {
        crate::local::client_for(&self.kubeconfig, None).await.expect("a client for the local cluster")
    }
}

pub type TestFn = fn(Env) -> Pin<Box<dyn Future<Output = ()> + Send>>;

/// How the tests share the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharing {
    /// Side by side (libtest's default threads).
    Parallel,
    /// One at a time, for tests whose view of the cluster's devices must be their own.
    Serial,
}

/// Runs `tests` as named tests against one local cluster, which `setup` prepares first
/// (nodes, drivers, classes).
pub fn run_with_cluster<S>(tests: Vec<(&'static str, TestFn)>, sharing: Sharing, setup: S) -> std::process::ExitCode
where
    S: AsyncFnOnce(&mut LocalCluster),
{
    let mut args = Arguments::from_args();
    if sharing == Sharing::Serial {
        args.test_threads = Some(1);
    }
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let cluster = (!args.list).then(|| {
        runtime.block_on(async {
            let mut cluster =
                LocalCluster::start(LocalClusterOptions::from_env()).await.expect("the local cluster starts");
            setup(&mut cluster).await;
            cluster
        })
    });
    let env = Arc::new(cluster.as_ref().map(|c| Env { kubeconfig: c.kubeconfig().to_path_buf() }));
    let trials = tests
        .into_iter()
        .map(|(name, test)| {
            let env = env.clone();
            Trial::test(name, move || {
                let env = Env::clone(env.as_ref().as_ref().expect("a cluster when tests run"));
                let rt = tokio::runtime::Runtime::new().map_err(|e| Failed::from(e.to_string()))?;
                rt.block_on(test(env));
                Ok(())
            })
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    drop(cluster);
    drop(runtime);
    if conclusion.has_failed() { std::process::ExitCode::FAILURE } else { std::process::ExitCode::SUCCESS }
}
