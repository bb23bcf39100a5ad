//! `cargo xtask explain NAMESPACE/NAME`: why a pod's claims (or one ResourceClaim) are not
//! allocated, from what the cluster's API shows.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::exit;

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The pod or ResourceClaim, as NAMESPACE/NAME (a pod of that name wins over a claim).
    #[arg(value_name = "NAMESPACE/NAME")]
    pub target: String,
    /// Kubeconfig of the cluster (default: the files of $KUBECONFIG, merged, else
    /// ~/.kube/config, else the pod's service account).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of the kubeconfig to use instead of its current context.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// `text` (summary, causes, a table per node, suggestions) or `json` (for tools).
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Output,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Output {
    Text,
    Json,
}

/// 0: a device set fits (or all claims are allocated); 1: it does not schedule, explained
/// (no device set fits, or a selector error fails the pod's whole scheduling attempt); 2: bad
/// input; 3: the cluster is unreachable or serves no DRA API.
pub async fn run(args: ExplainArgs) -> u8 {
    exit::report(explain(&args).await, "dracheck explain")
}

async fn explain(args: &ExplainArgs) -> Result<u8, (u8, String)> {
    let Some((namespace, name)) = args.target.split_once('/').filter(|(ns, n)| !ns.is_empty() && !n.is_empty()) else {
        return Err((
            exit::BAD_INPUT,
            format!(
                "{:?} is not NAMESPACE/NAME; name the pod or ResourceClaim with its namespace, e.g. default/my-job",
                args.target
            ),
        ));
    };
    let client = client(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    let explanation = dracheck_explain::explain(&client, namespace, name).await.map_err(|e| {
        let code = match e {
            dracheck_explain::Error::BadInput(_) => exit::BAD_INPUT,
            dracheck_explain::Error::Unreachable(_) | dracheck_explain::Error::NoDraApi(_) => exit::CLUSTER_DOWN,
        };
        (code, e.to_string())
    })?;
    match args.output {
        Output::Text => print!("{}", dracheck_explain::text(&explanation)),
        Output::Json => println!("{}", serde_json::to_string_pretty(&explanation).expect("the explanation serializes")),
    }
    Ok(if explanation.fits { exit::OK } else { exit::FAILED })
}

/// A client for the cluster of `kubeconfig` (else `$KUBECONFIG`'s files, merged, else
/// `~/.kube/config`, else the pod's service account) and `context`; a failure is its exit code
/// and a message naming the fix.
pub async fn client(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<kube::Client, (u8, String)> {
    let env = crate::kubeconfig::Env::of_process();
    let loaded = crate::kubeconfig::load(kubeconfig, &env).map_err(crate::kubeconfig::Error::early)?;
    loaded.client(context, Some(Duration::from_secs(5))).await.map_err(crate::kubeconfig::Error::early)
}
