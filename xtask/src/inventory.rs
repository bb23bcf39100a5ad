//! `cargo xtask inventory --driver nvidia`: what NVML says this host has, next to what the
//! driver published for its node, and where they disagree.

use std::path::PathBuf;

use clap::Args;
use dracheck_nvidia::compare;
use dracheck_nvidia::record::Recording;
use k8s_openapi::api::resource::v1::{Device, ResourceSlice};
use kube::api::{Api, ListParams};

use crate::exit;

#[derive(Debug, Args)]
pub struct InventoryArgs {
    /// The driver whose inventory to check: `nvidia` (gpu.nvidia.com, against NVML).
    #[arg(long)]
    pub driver: String,
    /// The node the driver published for (default: this host's name).
    #[arg(long)]
    pub node: Option<String>,
    /// Kubeconfig of the cluster (default: the files of $KUBECONFIG, merged, else
    /// ~/.kube/config, else the pod's service account).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of the kubeconfig to use instead of its current context.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Compare a recording of NVML (from `--record`) instead of this host's NVML.
    #[arg(long, value_name = "FILE", conflicts_with = "record")]
    pub nvml_recording: Option<PathBuf>,
    /// Only write this host's NVML view to FILE (for tests and for later comparisons).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
}

/// 0: the published devices agree with NVML; 1: they disagree; 2: bad input; 3: no NVML here,
/// or the cluster cannot be reached.
pub async fn run(args: InventoryArgs) -> u8 {
    exit::report(inventory(&args).await, "dracheck inventory")
}

async fn inventory(args: &InventoryArgs) -> Result<u8, (u8, String)> {
    if args.driver != "nvidia" {
        return Err((
            exit::BAD_INPUT,
            format!("--driver {}: the inventory oracle of this command is NVML; pass --driver nvidia", args.driver),
        ));
    }
    let nvml = nvml_view(args)?;
    if let Some(path) = &args.record {
        let text = serde_json::to_string_pretty(&nvml).expect("a recording serializes");
        std::fs::write(path, text + "\n").map_err(|e| {
            (exit::BAD_INPUT, format!("cannot write {}: {e}; pass another --record FILE", path.display()))
        })?;
        println!("recorded {} GPU(s) of this host to {}", nvml.gpus.len(), path.display());
        return Ok(exit::OK);
    }
    let node = match &args.node {
        Some(n) => n.clone(),
        None => dracheck_nvidia::host::host_name()
            .ok_or((exit::BAD_INPUT, "cannot tell this host's name; pass --node NAME".to_string()))?,
    };
    let client = crate::explain::client(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    let published = published(&client, &node).await?;
    print!("{}", side_by_side(&nvml, &published, &node));
    let mismatches = compare::compare(&nvml, &published);
    if mismatches.is_empty() {
        println!("the {} device(s) published for {node} agree with NVML", published.len());
        Ok(exit::OK)
    } else {
        println!("{} disagreement(s):", mismatches.len());
        for m in &mismatches {
            println!("  - {m}");
        }
        Ok(exit::FAILED)
    }
}

fn nvml_view(args: &InventoryArgs) -> Result<Recording, (u8, String)> {
    match &args.nvml_recording {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| (exit::BAD_INPUT, format!("cannot read {}: {e}", path.display())))
            .and_then(|t| Recording::parse(&t).map_err(|e| (exit::BAD_INPUT, format!("{}: {e}", path.display())))),
        None => dracheck_nvidia::nvml::read(&format!(
            "recorded on {}",
            dracheck_nvidia::host::host_name().unwrap_or_default()
        ))
        .map_err(|e| {
            (
                exit::CLUSTER_DOWN,
                format!("{e}. Run this on the GPU node, or compare a recording made there with --nvml-recording FILE"),
            )
        }),
    }
}

async fn published(client: &kube::Client, node: &str) -> Result<Vec<Device>, (u8, String)> {
    let api: Api<ResourceSlice> = Api::all(client.clone());
    let lp = ListParams::default().fields(&format!("spec.driver={},spec.nodeName={node}", dracheck_nvidia::DRIVER));
    let slices = api
        .list(&lp)
        .await
        .map_err(|e| {
            (
                exit::CLUSTER_DOWN,
                format!(
                    "cannot list ResourceSlices: {}; check --kubeconfig and that the cluster is up",
                    dracheck_clusters::reach::cause(&e)
                ),
            )
        })?
        .items;
    Ok(dracheck_suites::published::current_devices_by_node(&slices).remove(node).unwrap_or_default())
}

/// One line per GPU: NVML's UUID, product and memory, and what the device of that UUID (or
/// of that name) published.
fn side_by_side(nvml: &Recording, published: &[Device], node: &str) -> String {
    let mut out = format!(
        "NVML (driver {}, CUDA {}) | published by {} for {node}\n",
        nvml.driver_version,
        nvml.cuda_version(),
        dracheck_nvidia::DRIVER
    );
    for g in &nvml.gpus {
        let name = format!("gpu-{}", g.minor);
        let device = published
            .iter()
            .find(|d| compare::attribute(d, "uuid").as_deref() == Some(g.uuid.as_str()))
            .or_else(|| published.iter().find(|d| d.name == name));
        let theirs = device.map_or_else(
            || "nothing".to_string(),
            |d| {
                format!(
                    "{} {} {} {}",
                    d.name,
                    compare::attribute(d, "uuid").unwrap_or_else(|| "(no uuid)".into()),
                    compare::attribute(d, "productName").unwrap_or_else(|| "(no productName)".into()),
                    compare::memory(d).map_or_else(|| "(no memory)".into(), |m| format!("{m} bytes")),
                )
            },
        );
        out.push_str(&format!("{name} {} {} {} bytes | {theirs}\n", g.uuid, g.product_name, g.memory_bytes));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dracheck_nvidia::compare::Mismatch;

    fn fixture() -> Recording {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../drivers/nvidia/tests/fixtures/synthetic-2xa100.json");
        Recording::parse(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn each_gpu_stands_next_to_its_published_device() {
        let nvml = fixture();
        let mut published = compare::expected_devices(&nvml);
        published.pop();
        let text = side_by_side(&nvml, &published, "gpu-node");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + nvml.gpus.len(), "{text}");
        assert!(
            lines[1].contains(&nvml.gpus[0].uuid) && lines[1].split(" | ").nth(1).unwrap().contains(&nvml.gpus[0].uuid)
        );
        assert!(lines[2].ends_with("| nothing"), "{text}");
        assert!(matches!(compare::compare(&nvml, &published)[..], [Mismatch::Missing { .. }]));
    }
}
