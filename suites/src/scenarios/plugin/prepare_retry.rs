//! A prepare that failed is retried, and the retry must work: the kubelet calls
//! NodePrepareResources again for a claim whose prepare failed (upstream "must retry
//! NodePrepareResources", "must run pod if NodePrepareResources fails and then succeeds").
//! The suite makes the first prepare fail the way a node does, with a CDI dir that cannot be
//! written, gives the dir back, and prepares again: the answer must name CDI devices that the
//! node's CDI dir now defines. A driver that took the failed prepare's half-done state for a
//! done one (an entry in its checkpoint, no spec) answers the retry with devices no runtime
//! can resolve, and the pod never starts.

use std::path::{Path, PathBuf};

use super::harness::PluginNode;
use crate::coverage::RowId::B;
use crate::coverage::Verdict::Covered;
use crate::coverage::{UpstreamRow, e2e, e2e_node};
use crate::engine::{Ctx, ScenarioError};
use crate::profile::ids::PLUGIN_PREPARE_RETRY as ID;

super::plugin_scenario!("plugin-prepare-retry", [ID]);

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[
    UpstreamRow {
        id: B(1),
        test: "must retry NodePrepareResources",
        at: e2e(318),
        asserts: "a prepare that failed works when the kubelet calls it again",
        guarantees: &[ID],
        verdict: Covered,
    },
    UpstreamRow {
        id: B(2),
        test: "must run pod if NodePrepareResources fails and then succeeds",
        at: e2e_node(225),
        asserts: "the same: after a failed prepare the retry prepares the claim and the pod runs",
        guarantees: &[ID],
        verdict: Covered,
    },
    UpstreamRow {
        id: B(3),
        test: "must retry NodePrepareResources after Kubelet restart",
        at: e2e_node(272),
        asserts: "the same, the retry coming from a restarted kubelet (the driver sees only the retry)",
        guarantees: &[ID],
        verdict: Covered,
    },
];

/// The node's CDI dir replaced by a plain file until dropped: nothing can be written there,
/// not even by root.
struct Blocked {
    dir: PathBuf,
    aside: PathBuf,
}

impl Blocked {
    fn new(dir: &Path) -> std::io::Result<Blocked> {
        let aside = dir.with_extension("blocked");
        std::fs::rename(dir, &aside)?;
        let blocked = Blocked { dir: dir.to_path_buf(), aside };
        std::fs::write(&blocked.dir, b"not a directory: dracheck makes a prepare fail here\n")?;
        Ok(blocked)
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.dir);
        let _ = std::fs::rename(&self.aside, &self.dir);
    }
}

async fn check(ctx: &Ctx<'_>, node: &mut PluginNode) -> Result<(), ScenarioError> {
    let device = super::first_device(node, ctx).await?;
    let claim = node.allocate("retried", &node.name, &[&device]).await?;
    let dir = node.cfg.cdi_dir();
    let blocked = Blocked::new(&dir)
        .map_err(|e| ScenarioError::Unmet(format!("replacing the CDI dir {} by a file: {e}", dir.display())))?;
    let first = node.prepared(&claim).await;
    drop(blocked);
    if let Ok(devices) = first {
        ctx.skip(
            ID,
            format!(
                "the prepare succeeded though the node's CDI dir could not be written (it answered {:?}): the driver \
                 writes its CDI specs elsewhere, and the suite knows no other way to make a prepare fail",
                node.claim_cdi_ids(&devices)
            ),
        );
        let _ = node.unprepared(&claim).await;
        return Ok(());
    }
    let outcome = match node.prepared(&claim).await {
        Err(e) => Err(format!(
            "the prepare failed while the CDI dir could not be written; with the dir back, the retry failed too: {e}"
        )),
        Ok(devices) => {
            let ids = node.claim_cdi_ids(&devices);
            let defined = node.cdi_devices()?;
            let missing: Vec<&String> = ids.iter().filter(|id| !defined.contains_key(*id)).collect();
            if ids.is_empty() {
                Err("the retry answered with no CDI device of the claim".to_string())
            } else if missing.is_empty() {
                Ok(ids)
            } else {
                Err(format!(
                    "the retry answered {ids:?}, but the node's CDI dir defines none of {missing:?}: the driver took the \
                     failed prepare for a done one and wrote no spec"
                ))
            }
        }
    };
    match outcome {
        Ok(ids) => ctx.pass(
            ID,
            format!("a prepare failed while the node's CDI dir could not be written; the retry answered {ids:?}, which resolve"),
        ),
        Err(why) => ctx.fail(ID, why, node.evidence()),
    }
    let _ = node.unprepared(&claim).await;
    Ok(())
}
