//! What runs that are gone left on a cluster: a run killed before its cleanup (SIGKILL, a lost
//! terminal) leaves its namespaces, DeviceClasses and DeviceTaintRules behind. Each carries the run label and
//! its owner's annotations (`runner::mark`), so `cargo xtask cleanup` can remove exactly those
//! whose run has ended and keep those of a run that still goes on.

use std::collections::BTreeMap;

use dracheck_clusters::local::owner::{OwnerState, RunOwner};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaintRule};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta};

use super::runner::RUN_LABEL;

/// What can be told about the run an object belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunState {
    /// Its owner has ended (here, or before this machine's last boot): remove.
    Gone(RunOwner),
    Running(RunOwner),
    /// Recorded on another machine, whose processes this one cannot see.
    Elsewhere(RunOwner),
    /// No owner on record (made by a dracheck from before owners were recorded).
    Unrecorded,
}

/// A namespace or DeviceClass of a dracheck run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    pub kind: &'static str,
    pub name: String,
    pub run_id: String,
    pub state: RunState,
}

impl Leftover {
    /// `None` for an object that carries no run label.
    pub fn of(kind: &'static str, meta: &ObjectMeta) -> Option<Leftover> {
        let run_id = meta.labels.as_ref()?.get(RUN_LABEL)?.clone();
        let owner = RunOwner::from_annotations(meta.annotations.as_ref().unwrap_or(&BTreeMap::new()));
        let state = match owner {
            None => RunState::Unrecorded,
            Some(owner) => match owner.state() {
                OwnerState::Gone => RunState::Gone(owner),
                OwnerState::Running => RunState::Running(owner),
                OwnerState::Elsewhere => RunState::Elsewhere(owner),
            },
        };
        Some(Leftover { kind, name: meta.name.clone().unwrap_or_default(), run_id, state })
    }

    pub fn removable(&self) -> bool {
        matches!(self.state, RunState::Gone(_))
    }

    /// Why it is removed or kept, for a line of the cleanup's report.
    pub fn reason(&self) -> String {
        match &self.state {
            RunState::Gone(o) => format!("its run ({o}) is gone"),
            RunState::Running(o) => format!("kept: its run ({o}) is still running"),
            RunState::Elsewhere(o) => {
                format!("kept: its run ({o}) is on another machine; run the cleanup there")
            }
            RunState::Unrecorded => format!(
                "kept: no owner on record (an older dracheck); if no run uses it, `kubectl delete {} -l \
                 {RUN_LABEL}={}`",
                self.kind.to_lowercase(),
                self.run_id
            ),
        }
    }
}

impl std::fmt::Display for Leftover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} (run {}): {}", self.kind, self.name, self.run_id, self.reason())
    }
}

/// Every namespace, DeviceClass and DeviceTaintRule with the run label (DeviceTaintRules where
/// the API serves them: a rule left behind would keep its device from every claim).
pub async fn find(client: &kube::Client) -> kube::Result<Vec<Leftover>> {
    let lp = ListParams::default().labels(RUN_LABEL);
    let nss: Api<Namespace> = Api::all(client.clone());
    let classes: Api<DeviceClass> = Api::all(client.clone());
    let mut out: Vec<Leftover> =
        nss.list_metadata(&lp).await?.items.iter().filter_map(|n| Leftover::of("Namespace", &n.metadata)).collect();
    out.extend(classes.list_metadata(&lp).await?.items.iter().filter_map(|c| Leftover::of("DeviceClass", &c.metadata)));
    match Api::<DeviceTaintRule>::all(client.clone()).list_metadata(&lp).await {
        Ok(rules) => out.extend(rules.items.iter().filter_map(|r| Leftover::of("DeviceTaintRule", &r.metadata))),
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => return Err(e),
    }
    Ok(out)
}

/// Deletes one leftover (a namespace in the background: its pods and claims go with it).
pub async fn remove(client: &kube::Client, leftover: &Leftover) -> kube::Result<()> {
    let gone = |r: kube::Result<()>| match r {
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        other => other,
    };
    match leftover.kind {
        "Namespace" => gone(
            Api::<Namespace>::all(client.clone()).delete(&leftover.name, &DeleteParams::background()).await.map(drop),
        ),
        "DeviceTaintRule" => gone(
            Api::<DeviceTaintRule>::all(client.clone())
                .delete(&leftover.name, &DeleteParams::default())
                .await
                .map(drop),
        ),
        _ => gone(
            Api::<DeviceClass>::all(client.clone()).delete(&leftover.name, &DeleteParams::default()).await.map(drop),
        ),
    }
}

#[cfg(test)]
mod tests {
    use dracheck_clusters::local::owner::OwnerProcess;

    use super::*;

    fn meta(run: Option<&str>, owner: Option<&RunOwner>) -> ObjectMeta {
        ObjectMeta {
            name: Some("dracheck-lifecycle-abc123".into()),
            labels: run.map(|r| [(RUN_LABEL.to_string(), r.to_string())].into()),
            annotations: owner.map(RunOwner::annotations),
            ..ObjectMeta::default()
        }
    }

    fn ended() -> OwnerProcess {
        let mut child = std::process::Command::new("/bin/true").spawn().unwrap();
        let pid = child.id();
        let start_ticks = dracheck_clusters::local::process::proc_stat(pid).map_or(1, |s| s.start_ticks);
        child.wait().unwrap();
        OwnerProcess { pid, start_ticks }
    }

    #[test]
    fn only_objects_of_a_run_that_is_gone_are_removed() {
        assert_eq!(Leftover::of("Namespace", &meta(None, None)), None, "not a run's object");

        let live = RunOwner::current();
        let running = Leftover::of("Namespace", &meta(Some("abc123"), Some(&live))).unwrap();
        assert_eq!(running.state, RunState::Running(live.clone()));
        assert!(!running.removable());

        let dead = RunOwner { process: ended(), ..live.clone() };
        let gone = Leftover::of("DeviceClass", &meta(Some("abc123"), Some(&dead))).unwrap();
        assert!(gone.removable(), "{gone}");
        assert_eq!(
            gone.to_string(),
            format!("DeviceClass dracheck-lifecycle-abc123 (run abc123): its run ({dead}) is gone")
        );

        let remote = RunOwner { host: format!("{}-elsewhere", live.host), ..dead };
        let elsewhere = Leftover::of("Namespace", &meta(Some("abc123"), Some(&remote))).unwrap();
        assert!(!elsewhere.removable(), "a pid of another machine tells nothing here");

        let old = Leftover::of("Namespace", &meta(Some("abc123"), None)).unwrap();
        assert_eq!(old.state, RunState::Unrecorded);
        assert!(!old.removable());
        assert!(old.reason().contains("kubectl delete namespace -l dracheck.io/run=abc123"), "{old}");
    }
}
