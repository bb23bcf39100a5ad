//! `conformance --cluster kind|k3s`: a cluster of the run in Docker containers, created before
//! and deleted after it (also on Ctrl-C, errors and panics, through the handles' `Drop`).

use std::path::PathBuf;
use std::time::Duration;

use dracheck_clusters::k3s::K3sCluster;
use dracheck_clusters::kind::{self, KindCluster};
use dracheck_clusters::local::Progress;
use dracheck_clusters::local::versions::Release;
use dracheck_clusters::tools;

use crate::drivers::DriverArgs;
use crate::exit;
use crate::install::{Early, cluster};

/// How long the control plane may take to come up (kind's `--wait`, K3s' start-up).
const START_TIMEOUT: Duration = Duration::from_secs(300);

pub enum Provider {
    Kind(KindCluster),
    K3s(Box<K3sCluster>),
}

/// What can be known before anything is built: a Docker daemon answers (else exit 3, the
/// first thing said), and the driver is one that runs from a chart.
pub fn preflight(provider: &str, driver: &DriverArgs) -> Result<(), Early> {
    if let Err(why) = kind::docker_daemon() {
        return Err((
            exit::CLUSTER_DOWN,
            format!(
                "--cluster {provider} runs Kubernetes in Docker containers, and {why}. Start a Docker daemon, or use \
                 --cluster local, which needs no Docker"
            ),
        ));
    }
    let mock = driver.driver.as_deref() == Some("mock") || (driver.driver.is_none() && driver.driver_bin.is_none());
    if mock {
        return Err((
            exit::BAD_INPUT,
            format!(
                "--cluster {provider} cannot run the mock driver: its nodes run containers from images, and the mock \
                 is a host program of the local cluster's emulated nodes. Use --cluster local for the mock, or pass \
                 --driver example or --driver nvidia, which {provider} gets installed with helm"
            ),
        ));
    }
    Ok(())
}

impl Provider {
    /// Creates the cluster `name`; kind itself from PATH or built first.
    pub async fn create(
        provider: &str,
        name: &str,
        release: &Release,
        feature_gates: &str,
        workers: usize,
        progress: &Progress,
    ) -> Result<Provider, Early> {
        match provider {
            "kind" => {
                let kind = tools::locate("kind", "kind", None, &kind::recipe(), progress).await.map_err(cluster)?;
                progress.line(format!("kind: {}", kind.program.display()));
                KindCluster::create(&kind.program, name, release, feature_gates, workers, START_TIMEOUT, progress)
                    .await
                    .map(Provider::Kind)
                    .map_err(cluster)
            }
            _ => K3sCluster::start(name, release, feature_gates, START_TIMEOUT, progress)
                .await
                .map(|c| Provider::K3s(Box::new(c)))
                .map_err(cluster),
        }
    }

    pub fn kubeconfig(&self) -> PathBuf {
        match self {
            Provider::Kind(c) => c.kubeconfig(),
            Provider::K3s(c) => c.kubeconfig(),
        }
    }

    /// Deletes the cluster, saying so, or what is left.
    pub async fn remove(self, progress: &Progress) {
        let (name, said) = match self {
            Provider::Kind(c) => (c.name().to_string(), c.delete()),
            Provider::K3s(c) => (c.name().to_string(), c.stop().await),
        };
        match said {
            Ok(()) => progress.line(format!("deleted cluster {name}")),
            Err(left) => eprintln!("dracheck: {left}"),
        }
    }
}
