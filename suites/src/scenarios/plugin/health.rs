//! Device health (ResourceHealthStatus, beta and on in Kubernetes 1.36 and 1.37): a driver that
//! lists the optional `DRAResourceHealth` service at registration streams the health of its
//! devices to the kubelet (`NodeWatchResources`), which shows it in the status of the pods
//! using them. The suite watches the stream as a 1.37 kubelet does (v1, else v1alpha1), turns
//! one device unhealthy as the driver's adapter says (the mock: its health file), and wants
//! that device, under its own pool and name, reported `UNHEALTHY` while no other device is;
//! then sound again, reported as such. A driver that does not offer the service is skipped:
//! the service is optional, and a profile that promises health (`resourceHealth`) fails in the
//! cluster tier instead.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use dracheck_kubelet_api::{HEALTH_V1_SERVICE, HEALTH_V1ALPHA1_SERVICE, health_v1, health_v1alpha1, rewire};
use futures::StreamExt;

use super::harness::PluginNode;
use crate::coverage::RowId::F;
use crate::coverage::Verdict::Covered;
use crate::coverage::{UpstreamRow, e2e_node};
use crate::engine::target::NO_HEALTH_HOOK;
use crate::engine::{Ctx, ScenarioError};
use crate::profile::ids::PLUGIN_HEALTH_REPORTED as ID;

super::plugin_scenario!("plugin-health", [ID]);

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: F(2),
        test: "should reflect device health changes in the Pod's status, with a plugin which only supports the v1alpha1 \
               health API",
        at: e2e_node(949),
        asserts: "a driver that offers only the v1alpha1 health service reports a device unhealthy and sound again",
        guarantees: &[ID, crate::profile::ids::HEALTH_POD_STATUS],
        verdict: Covered,
    },
    UpstreamRow {
        id: F(3),
        test: "should reflect device health changes in the Pod's status, with a plugin which only supports the v1 \
               health API",
        at: e2e_node(956),
        asserts: "the same, for a driver that offers only the v1 health service",
        guarantees: &[ID, crate::profile::ids::HEALTH_POD_STATUS],
        verdict: Covered,
    },
];

/// How long a change may take to reach the stream: the kubelet shows what it gets at once.
const REPORTED: Duration = Duration::from_secs(10);

type Reports = futures::stream::BoxStream<'static, Result<health_v1::NodeWatchResourcesResponse, String>>;

/// Each reported device, `pool/device`, with its health (`Healthy`, `Unhealthy`, `Unknown`).
type Health = BTreeMap<String, String>;

fn health(report: &health_v1::NodeWatchResourcesResponse) -> Health {
    report
        .devices
        .iter()
        .map(|d| {
            let id = d
                .device
                .as_ref()
                .map_or_else(|| "(no device)".into(), |d| format!("{}/{}", d.pool_name, d.device_name));
            (id, format!("{:?}", d.health()))
        })
        .collect()
}

/// The driver's stream, on the service a 1.37 kubelet picks among those it lists.
async fn watch(endpoint: &str, services: &[String]) -> Result<Reports, String> {
    let channel =
        dracheck_kubelet_api::connect_unix(endpoint).await.map_err(|e| format!("dialling {endpoint}: {e}"))?;
    if services.iter().any(|s| s == HEALTH_V1_SERVICE) {
        let stream = health_v1::dra_resource_health_client::DraResourceHealthClient::new(channel)
            .node_watch_resources(health_v1::NodeWatchResourcesRequest {})
            .await
            .map_err(|s| format!("NodeWatchResources (v1): {:?}: {}", s.code(), s.message()))?
            .into_inner();
        return Ok(stream.map(|r| r.map_err(|s| format!("{:?}: {}", s.code(), s.message()))).boxed());
    }
    let stream = health_v1alpha1::dra_resource_health_client::DraResourceHealthClient::new(channel)
        .node_watch_resources(health_v1alpha1::NodeWatchResourcesRequest {})
        .await
        .map_err(|s| format!("NodeWatchResources (v1alpha1): {:?}: {}", s.code(), s.message()))?
        .into_inner();
    Ok(stream
        .map(|r| {
            r.map_err(|s| format!("{:?}: {}", s.code(), s.message()))
                .and_then(|r| rewire(&r).map_err(|e| format!("a report that does not decode: {e}")))
        })
        .boxed())
}

/// The reports of `stream` until one `wanted` accepts or `within` runs out; all of what came
/// merged (a driver may report some devices at a time), and how long it took.
async fn until(
    stream: &mut Reports,
    within: Duration,
    wanted: impl Fn(&Health) -> bool,
) -> Result<(Health, Duration), (Health, String)> {
    let started = Instant::now();
    let mut seen = Health::new();
    loop {
        let left = within.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, stream.next()).await {
            Ok(Some(Ok(report))) => {
                seen.extend(health(&report));
                if wanted(&seen) {
                    return Ok((seen, started.elapsed()));
                }
            }
            Ok(Some(Err(e))) => return Err((seen, format!("the stream failed: {e}"))),
            Ok(None) => return Err((seen, "the driver ended the stream".into())),
            Err(_) => return Err((seen, format!("no such report within {}s", within.as_secs()))),
        }
    }
}

fn unhealthy(seen: &Health) -> Vec<&str> {
    seen.iter().filter(|(_, h)| *h == "Unhealthy").map(|(d, _)| d.as_str()).collect()
}

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), ScenarioError> {
    let Some(set_health) = ctx.target.adapter.set_health.clone() else {
        ctx.skip(ID, NO_HEALTH_HOOK);
        return Ok(());
    };
    let info = node.info().await?;
    if !info.supported_versions.iter().any(|s| s == HEALTH_V1_SERVICE || s == HEALTH_V1ALPHA1_SERVICE) {
        ctx.skip(
            ID,
            format!(
                "the driver does not offer the optional DRAResourceHealth service (supported_versions {:?}); a profile \
                 promising health (resourceHealth) checks what that means for pods",
                info.supported_versions
            ),
        );
        return Ok(());
    }
    let device = super::first_device(node, ctx).await?;
    let target = format!("{}/{device}", node.name);
    let dirs = node.cfg.dirs();
    let mut stream = match watch(&info.endpoint, &info.supported_versions).await {
        Ok(s) => s,
        Err(e) => {
            ctx.fail(ID, format!("the driver lists the health service but {e}"), node.evidence());
            return Ok(());
        }
    };
    let first = until(&mut stream, REPORTED, |_| true).await;
    let outcome = match first {
        Err((_, why)) => Err(format!("at the start of the watch: {why}")),
        Ok((seen, _)) if !unhealthy(&seen).is_empty() => {
            Err(format!("before any device turned unhealthy, the driver reports {:?} unhealthy", unhealthy(&seen)))
        }
        Ok(_) => turn(&mut stream, &set_health, &dirs, &device, &target).await,
    };
    // Sound again whatever happened: the node may be used on.
    set_health(&dirs, &[]).map_err(ScenarioError::Unmet)?;
    match outcome {
        Ok(summary) => ctx.pass(ID, summary),
        Err(why) => ctx.fail(ID, why, node.evidence()),
    }
    Ok(())
}

/// `device` unhealthy, then sound again, each reported under `target` (`pool/device`) alone.
async fn turn(
    stream: &mut Reports,
    set_health: &dracheck_adapter::SetHealth,
    dirs: &dracheck_adapter::spec::NodeDirs,
    device: &str,
    target: &str,
) -> Result<String, String> {
    let what = set_health(dirs, &[device.to_string()])?;
    let sick = until(stream, REPORTED, |seen| unhealthy(seen) == [target]).await.map_err(|(seen, why)| {
        format!(
            "{what}: {why}; reported unhealthy: {:?}{}",
            unhealthy(&seen),
            if seen.contains_key(target) { String::new() } else { format!(" ({target} never reported)") }
        )
    })?;
    let cleared = set_health(dirs, &[])?;
    let sound =
        until(stream, REPORTED, |seen| seen.get(target).is_some_and(|h| h == "Healthy") && unhealthy(seen).is_empty())
            .await
            .map_err(|(seen, why)| format!("{cleared}: {why}; reported unhealthy: {:?}", unhealthy(&seen)))?;
    Ok(format!(
        "{what}: reported unhealthy within {:.1}s, the other {} device(s) not; sound again within {:.1}s",
        sick.1.as_secs_f64(),
        sick.0.len().saturating_sub(1),
        sound.1.as_secs_f64()
    ))
}
