//! `cargo xtask cleanup`: what runs that are gone (killed before their own cleanup) left
//! behind: local state dirs in $TMPDIR, and with `--kubeconfig` the namespaces and
//! DeviceClasses of such runs on that cluster. What belongs to a run that still goes on, or
//! that cannot be judged from this machine, is listed and kept.

use std::path::PathBuf;

use clap::Args;
use dracheck_suites::engine::leftovers;

use crate::exit;

#[derive(Debug, Args)]
pub struct CleanupArgs {
    /// Also clean this cluster: the namespaces and DeviceClasses of dracheck runs that are
    /// gone.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of the kubeconfig to use instead of its current context.
    #[arg(long, value_name = "NAME", requires = "kubeconfig")]
    pub context: Option<String>,
}

pub async fn run(args: CleanupArgs) -> u8 {
    let mut code = crate::cluster::down_stale();
    if let Some(kubeconfig) = &args.kubeconfig {
        let cluster = clean_cluster(kubeconfig, args.context.as_deref()).await;
        code = code.max(cluster);
    }
    code
}

async fn clean_cluster(kubeconfig: &std::path::Path, context: Option<&str>) -> u8 {
    let client = match client(kubeconfig, context).await {
        Ok(c) => c,
        Err((code, message)) => {
            eprintln!("dracheck: {message}");
            return code;
        }
    };
    let found = match leftovers::find(&client).await {
        Ok(found) => found,
        Err(e) => {
            eprintln!(
                "dracheck: listing the namespaces and DeviceClasses of dracheck runs on the cluster of {} failed: {e}",
                kubeconfig.display()
            );
            return exit::CLUSTER_DOWN;
        }
    };
    if found.is_empty() {
        println!("no namespaces or DeviceClasses of dracheck runs on the cluster of {}", kubeconfig.display());
    }
    let mut code = exit::OK;
    for leftover in &found {
        if !leftover.removable() {
            println!("{leftover}");
            continue;
        }
        match leftovers::remove(&client, leftover).await {
            Ok(()) => println!("removed {leftover}"),
            Err(e) => {
                println!("could not remove {leftover}: {e}");
                code = exit::CLUSTER_DOWN;
            }
        }
    }
    code
}

/// An unknown context or an unusable kubeconfig is bad input; only a cluster that cannot be
/// reached is down.
async fn client(kubeconfig: &std::path::Path, context: Option<&str>) -> Result<kube::Client, (u8, String)> {
    // `--kubeconfig` is required here: cleaning whatever `$KUBECONFIG` points at by default
    // would remove objects from a cluster nobody named.
    let loaded = crate::kubeconfig::load(Some(kubeconfig), &crate::kubeconfig::Env::default())
        .map_err(crate::kubeconfig::Error::early)?;
    loaded.client(context, None).await.map_err(crate::kubeconfig::Error::early)
}
