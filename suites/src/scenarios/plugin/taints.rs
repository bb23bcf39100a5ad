//! A device the driver finds unhealthy is published with a taint (Kubernetes 1.37: device
//! taints, GA), so that the scheduler keeps new claims off it: `NoSchedule`, or `NoExecute`
//! where the driver wants running workloads evicted too. The suite makes one device unhealthy
//! as the driver's adapter says (the mock: its inventory marks the device `healthy: false`),
//! the driver starts again on that, and the device must come back tainted with one of those
//! effects while the others stay untainted. A driver that only logs what its health checks
//! find lets the scheduler go on handing the device out. Where the API server drops the
//! taints of a slice (feature gate `DRADeviceTaints` off, as in 1.36) the check is skipped.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::resource::v1::{DeviceTaint, ResourceSlice};

use super::harness::PluginNode;
use crate::engine::target::NO_UNHEALTHY_HOOK;
use crate::engine::{Ctx, ScenarioError, served};
use crate::profile::ids::PLUGIN_SLICES_TAINTS_UNHEALTHY as ID;

super::plugin_scenario!("plugin-taints", [ID]);

/// A driver started on a changed health publishes at start-up, as on its first start.
const PUBLISHED: Duration = Duration::from_secs(30);

/// The taint effects that keep new claims off a device.
const KEEP_OFF: [&str; 2] = ["NoSchedule", "NoExecute"];

/// Each published device with its taints, over all slices of the node.
fn taints(slices: &[ResourceSlice]) -> BTreeMap<String, Vec<DeviceTaint>> {
    slices
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
        .map(|d| (d.name.clone(), d.taints.clone().unwrap_or_default()))
        .collect()
}

fn keeps_off(taints: &[DeviceTaint]) -> bool {
    taints.iter().any(|t| KEEP_OFF.contains(&t.effect.as_str()))
}

/// `key=value:effect` of each taint, for messages.
fn shown(taints: &[DeviceTaint]) -> Vec<String> {
    taints.iter().map(|t| format!("{}={}:{}", t.key, t.value.as_deref().unwrap_or(""), t.effect)).collect()
}

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), ScenarioError> {
    let adapter = &ctx.target.adapter;
    let (Some(mark), Some(access)) = (&adapter.mark_unhealthy, PluginNode::access(ctx)) else {
        ctx.skip(ID, NO_UNHEALTHY_HOOK);
        return Ok(());
    };
    if let Some(why) = served::slice_dropped(&ctx.client(), &node.driver_name, &served::DEVICE_TAINTS).await? {
        ctx.skip(ID, why);
        return Ok(());
    }
    let change = mark(&node.name, &node.cfg.root).map_err(ScenarioError::Unmet)?;
    let (unhealthy, healthy): (Vec<String>, Vec<String>) = {
        let (sick, well): (Vec<_>, Vec<_>) =
            change.devices.iter().partition(|d| d.taints.as_ref().is_some_and(|t| !t.is_empty()));
        (sick.into_iter().map(|d| d.name.clone()).collect(), well.into_iter().map(|d| d.name.clone()).collect())
    };
    if unhealthy.is_empty() {
        return Err(ScenarioError::Unmet(format!("{}: the adapter marks no device unhealthy", change.what)));
    }
    node.replace(&change.spec, access).await?;

    let as_wanted = |published: &BTreeMap<String, Vec<DeviceTaint>>| {
        unhealthy.iter().all(|d| published.get(d).is_some_and(|t| keeps_off(t)))
            && healthy.iter().all(|d| published.get(d).is_some_and(|t| t.is_empty()))
    };
    let outcome =
        ctx.poll_until(PUBLISHED, || async { taints(&ctx.slices_of(&node.name).await) }, |p| as_wanted(p)).await;
    match outcome {
        Ok((published, took)) => ctx.pass(
            ID,
            format!(
                "{}: within {:.1}s {} published with {}, the other {} device(s) untainted",
                change.what,
                took.as_secs_f64(),
                unhealthy.join(", "),
                unhealthy.iter().flat_map(|d| shown(&published[d])).collect::<Vec<_>>().join(", "),
                healthy.len()
            ),
        ),
        Err(published) => {
            let mut problems = Vec::new();
            for d in &unhealthy {
                match published.get(d) {
                    None => problems.push(format!("{d} is not published")),
                    Some(t) if !keeps_off(t) => problems.push(format!(
                        "{d} is published with taints {:?}, none with effect {}",
                        shown(t),
                        KEEP_OFF.join(" or ")
                    )),
                    Some(_) => {}
                }
            }
            for d in &healthy {
                match published.get(d) {
                    None => problems.push(format!("healthy {d} is not published")),
                    Some(t) if !t.is_empty() => {
                        problems.push(format!("healthy {d} is published with taints {:?}", shown(t)))
                    }
                    Some(_) => {}
                }
            }
            ctx.fail(
                ID,
                format!("{}, and {}s later: {}", change.what, PUBLISHED.as_secs(), problems.join("; ")),
                node.evidence(),
            );
        }
    }
    Ok(())
}
