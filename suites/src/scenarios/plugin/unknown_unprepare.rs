//! Unprepare of a claim the driver never prepared is not an error (kubelet may ask after a
//! restart, or twice).

use super::harness::{Claim, PluginNode};
use crate::coverage::RowId::B;
use crate::coverage::Verdict::Partial;
use crate::coverage::{UpstreamRow, e2e_node};
use crate::engine::{Ctx, ScenarioError};
use crate::profile::ids::PLUGIN_UNPREPARE_UNKNOWN_CLAIM as ID;

super::plugin_scenario!("plugin-unknown-unprepare", [ID]);

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: B(6),
        test: "must run pod if NodeUnprepareResources fails and then succeeds",
        at: e2e_node(250),
        asserts: "an unprepare that failed succeeds when the kubelet calls it again",
        guarantees: &[ID, crate::profile::ids::PLUGIN_UNPREPARE_REMOVES_STATE],
        verdict: Partial(NO_FAILED_UNPREPARE),
    },
    UpstreamRow {
        id: B(7),
        test: "must retry NodeUnprepareResources after Kubelet restart",
        at: e2e_node(303),
        asserts: "the same, the retry coming from a restarted kubelet",
        guarantees: &[ID, crate::profile::ids::PLUGIN_UNPREPARE_REMOVES_STATE],
        verdict: Partial(NO_FAILED_UNPREPARE),
    },
    UpstreamRow {
        id: B(10),
        test: "must run pod if NodeUnprepareResources fails for one plugin and then succeeds",
        at: e2e_node(681),
        asserts: "a plugin that unprepared a claim already is asked to unprepare it again, and succeeds",
        guarantees: &[ID],
        verdict: Partial(NO_SECOND_UNPREPARE),
    },
    UpstreamRow {
        id: B(11),
        test: "must call NodeUnprepareResources again if it's in progress for one plugin when Kubelet restarts",
        at: e2e_node(731),
        asserts: "an unprepare of a claim is repeated, possibly while the first still runs, and succeeds",
        guarantees: &[ID],
        verdict: Partial(NO_SECOND_UNPREPARE),
    },
];

const NO_FAILED_UNPREPARE: &str =
    "no unprepare is made to fail and then retried; the nearest check unprepares a claim that was never prepared";
const NO_SECOND_UNPREPARE: &str = "no claim is unprepared twice, in turn or at once; the nearest check unprepares a claim that was never prepared, \
     not one unprepared already";

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), ScenarioError> {
    let stranger = Claim {
        namespace: ctx.ns.clone(),
        uid: "0d15ea5e-0000-4000-8000-00000000beef".into(),
        name: "never-prepared".into(),
    };
    match node.unprepared(&stranger).await {
        Ok(()) => ctx.pass(ID, "unprepare of an unknown claim succeeded"),
        Err(e) => ctx.fail(ID, format!("unprepare of an unknown claim: {e}"), node.evidence()),
    }
    Ok(())
}
