//! GetInfo names a DRA plugin of the driver, its service socket and a DRAPlugin service the
//! kubelet takes: v1 or v1beta1, both of which the v1.37 kubelet dials
//! (`servicesSupportedByKubelet`, pkg/kubelet/cm/dra/plugin/dra_plugin.go). Offering v1 is
//! checked apart, as advice (`should`): a plugin on v1beta1 alone works today.

use super::harness::PluginNode;
use crate::coverage::RowId::A;
use crate::coverage::Verdict::{Covered, Partial};
use crate::coverage::{UpstreamRow, e2e};
use crate::engine::{Ctx, ScenarioError};
use crate::profile::ids::{self, PLUGIN_REGISTRATION_INFO as ID, PLUGIN_REGISTRATION_V1 as V1};
use dracheck_kubelet_api::{DRA_PLUGIN_TYPE, DRA_V1_SERVICE, DRA_V1BETA1_SERVICE};

super::plugin_scenario!("plugin-registration", [ID, V1]);

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: A(1),
        test: "registers plugin",
        at: e2e(314),
        asserts: "the plugin registers with the kubelet (a DRA plugin of the driver, its socket, a service the kubelet takes) and serves",
        guarantees: &[ID],
        verdict: Covered,
    },
    UpstreamRow {
        id: A(7),
        test: "with multiple drivers, using only drapbv1beta1: work",
        at: e2e(4342),
        asserts: "drivers that serve only v1beta1.DRAPlugin work with the 1.37 kubelet: a pod with two claims of each of \
                  two drivers runs, each driver preparing both its claims in one call",
        guarantees: &[ID, ids::DRIVERS_COEXIST, ids::PLUGIN_PREPARE_OWN_RESULTS_ONLY],
        verdict: Partial(
            "a driver on v1beta1 alone is registered and called on that service, but no prepare here carries two claims \
             of the driver, so one that mishandles a batch of claims passes",
        ),
    },
];

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), ScenarioError> {
    let info = node.info().await?;
    let mut problems = Vec::new();
    if info.r#type != DRA_PLUGIN_TYPE {
        problems.push(format!("type {:?}, not {DRA_PLUGIN_TYPE:?}", info.r#type));
    }
    if info.name != node.driver_name {
        problems.push(format!("name {:?}, not the driver's {:?}", info.name, node.driver_name));
    }
    if !std::path::Path::new(&info.endpoint).exists() {
        problems.push(format!("endpoint {} does not exist", info.endpoint));
    }
    let v1 = info.supported_versions.iter().any(|v| v == DRA_V1_SERVICE);
    let beta = info.supported_versions.iter().any(|v| v == DRA_V1BETA1_SERVICE);
    if !v1 && !beta {
        problems.push(format!(
            "supported_versions {:?} name neither {DRA_V1_SERVICE} nor {DRA_V1BETA1_SERVICE}, the services the kubelet dials",
            info.supported_versions
        ));
    }
    let serving = match (v1, beta) {
        (true, true) => "v1 and v1beta1",
        (true, false) => "v1",
        _ => "v1beta1",
    };
    ctx.check(
        ID,
        problems.is_empty(),
        format!("a DRAPlugin named {} at {}, serving {serving}", info.name, info.endpoint),
        problems.join("; "),
        node.evidence(),
    );
    ctx.check(
        V1,
        v1,
        format!("offers {DRA_V1_SERVICE}"),
        format!(
            "supported_versions {:?} lack {DRA_V1_SERVICE}: the kubelet takes v1beta1 today, but v1 is the stable \
             service",
            info.supported_versions
        ),
        node.evidence(),
    );
    Ok(())
}
