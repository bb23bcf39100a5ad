//! A plugin the kubelet refuses recovers: `NotifyRegistrationStatus` with an error (the
//! kubelet could not use the plugin: its endpoint did not answer, or another instance had
//! it) is no reason to quit. The kubelet tries the registration socket again, and the plugin
//! must still be there, with its sockets, and register (upstream "must recover and register
//! after registration failure"). A plugin that exits instead, as CSI's node-driver-registrar
//! does, leaves the node without it until its container is restarted, and its slices are
//! wiped 30 s after its socket goes.

use std::time::Duration;

use super::harness::PluginNode;
use crate::coverage::RowId::A;
use crate::coverage::Verdict::Covered;
use crate::coverage::{UpstreamRow, e2e_node};
use crate::engine::{Ctx, ScenarioError};
use crate::profile::ids::PLUGIN_REGISTRATION_RECOVERS as ID;

super::plugin_scenario!("plugin-registration-retry", [ID]);

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: A(4),
        test: "must recover and register after registration failure",
        at: e2e_node(142),
        asserts: "after a registration round that failed, the plugin is still there and registers at the kubelet's next attempt",
        guarantees: &[ID],
        verdict: Covered,
    },
    UpstreamRow {
        id: A(5),
        test: "must recover and register after NotifyRegistrationStatus failure",
        at: e2e_node(165),
        asserts: "the same, the round failing in NotifyRegistrationStatus",
        guarantees: &[ID],
        verdict: Covered,
    },
];

/// The refusal's error, as a kubelet words one.
const REFUSAL: &str = "dracheck: the kubelet could not use the plugin (simulated registration failure)";
/// The kubelet's plugin manager tries a failed registration again after a back-off of about
/// a second, then more.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// How long the plugin has to answer again.
const RECOVERY: Duration = Duration::from_secs(10);

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), ScenarioError> {
    node.refuse(REFUSAL).await?;
    tokio::time::sleep(RETRY_AFTER).await;
    let deadline = tokio::time::Instant::now() + RECOVERY;
    let outcome = loop {
        if let Some(status) = node.exited() {
            break Err(format!("the plugin exited ({status}) when the kubelet refused it"));
        }
        match node.info().await {
            Ok(info) => break Ok(info),
            Err(e) if tokio::time::Instant::now() > deadline => {
                break Err(format!(
                    "after the kubelet refused it, the plugin answered no registration within {}s: {e}",
                    RECOVERY.as_secs()
                ));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    match outcome {
        Ok(info) => ctx.pass(
            ID,
            format!(
                "refused once by the kubelet, the plugin stayed up and registered at the next attempt (endpoint {})",
                info.endpoint
            ),
        ),
        Err(why) => ctx.fail(ID, why, node.evidence()),
    }
    Ok(())
}
