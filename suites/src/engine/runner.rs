//! The run engine: one namespace per scenario, labelled with the run's ID; scenarios pinned to
//! nodes by role and run in parallel across roles; bounded timeouts; every guarantee a
//! scenario owns ends with a verdict; cleanup of what the run created.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::StreamExt as _;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::resource::v1::DeviceClass;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use super::ctx::Ctx;
use super::error::{ApiContext, ScenarioError};
use super::scenario::{Role, Scenario};
use super::target::Target;
use crate::profile::Profile;
use crate::result::{AllocatedDevice, GuaranteeResult, ProfileResult, Verdict};

/// Label on every namespace and cluster-scoped object of a run.
pub const RUN_LABEL: &str = "dracheck.io/run";

/// Marks an object as the run's: the run label, and the run's owner as annotations, so that
/// `cargo xtask cleanup` can tell what a run that is gone left from what a live run uses.
pub(crate) fn mark(meta: &mut kube::api::ObjectMeta, run_id: &str) {
    meta.labels.get_or_insert_default().insert(RUN_LABEL.into(), run_id.into());
    meta.annotations.get_or_insert_default().extend(dracheck_clusters::local::owner::RunOwner::current().annotations());
}

pub use dracheck_results::filter::{Filter, glob};

pub struct Plan {
    pub driver_scenarios: Vec<&'static Scenario>,
    pub cluster_scenarios: Vec<&'static Scenario>,
    pub profiles: Vec<(PathBuf, Profile)>,
    pub filter: Filter,
    pub run_id: String,
    pub scenario_timeout: Duration,
    /// At most this many node groups at once (`--parallel N`); `None`: every group whose
    /// role has a node of its own.
    pub parallel: Option<tokio::sync::Semaphore>,
    pub namespaces: NamespaceLifetime,
}

impl Plan {
    /// A place among the groups that `--parallel N` lets run at once; `None` where it sets no bound.
    async fn permit(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        match &self.parallel {
            Some(limit) => Some(limit.acquire().await.expect("the semaphore is never closed")),
            None => None,
        }
    }
}

/// When a scenario's namespaces are deleted. Its pods and claims go when it ends either way,
/// so that the next scenario on the node finds the devices free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamespaceLifetime {
    /// When the scenario ends: the cluster outlives the run.
    Scenario,
    /// With the cluster, which the run deletes when it ends: deleting a namespace has the
    /// controller-manager list and delete every namespaced kind in it, about 80 requests,
    /// which made half of the API server's work in a run on the local cluster.
    Cluster,
}

pub struct Outcome {
    pub driver_guarantees: Vec<GuaranteeResult>,
    pub profiles: Vec<ProfileResult>,
    /// Seconds per scenario (`scenario:<profile>/<name>`).
    pub timings: BTreeMap<String, f64>,
}

/// Plugin-tier scenarios run at once. Each has a stand-in Node and a driver instance of its
/// own, so they share nothing but the machine; one after the other, a driver that never
/// registers had each of the 19 wait out the registration timeout in turn (11 min), four at
/// once still 4.4 min in five rounds.
const PLUGIN_LANES: usize = 8;

/// The plugin tier and the profiles run side by side: the plugin tier's stand-in Nodes are
/// tainted `NoSchedule` and its driver instances are its own, so neither sees the other's
/// work. One after the other, a driver that never registers had the plugin tier wait out its
/// timeouts (three rounds of 31 s) before the first profile scenario started: 385 s for the
/// targeted run of `strict-authority` alone on 16 emulated nodes, 292 s side by side.
pub async fn run(target: &Target, plan: &Plan, progress: &(dyn Fn(&str) + Sync)) -> Outcome {
    let ((driver_guarantees, driver_timings), (profiles, mut timings)) =
        futures::future::join(run_driver_tier(target, plan, progress), run_profiles(target, plan, progress)).await;
    timings.extend(driver_timings);
    Outcome { driver_guarantees, profiles, timings }
}

/// The plugin-tier scenarios, [`PLUGIN_LANES`] at once, their results in the scenarios' order.
async fn run_driver_tier(
    target: &Target,
    plan: &Plan,
    progress: &(dyn Fn(&str) + Sync),
) -> (Vec<GuaranteeResult>, BTreeMap<String, f64>) {
    let mut timings = BTreeMap::new();
    let mut driver_guarantees = Vec::new();
    let driver_runs = driver_selected(plan).into_iter().map(|(s, ids)| async move {
        let _permit = plan.permit().await;
        let started = Instant::now();
        let (results, _) = run_one(target, plan, s, None, &ids, String::new(), Vec::new(), progress).await;
        (s, results, started.elapsed())
    });
    // In the scenarios' order, so that the report reads the same whatever ended first.
    let mut driver_runs = futures::stream::iter(driver_runs).buffered(PLUGIN_LANES);
    while let Some((s, results, took)) = driver_runs.next().await {
        driver_guarantees.extend(results);
        timings.insert(format!("scenario:driver/{}", s.name), took.as_secs_f64());
    }
    (driver_guarantees, timings)
}

/// The cluster-tier scenarios of every profile, with their timings.
async fn run_profiles(
    target: &Target,
    plan: &Plan,
    progress: &(dyn Fn(&str) + Sync),
) -> (Vec<ProfileResult>, BTreeMap<String, f64>) {
    let mut timings = BTreeMap::new();
    // Profiles run side by side when every one can have nodes of its own for its roles;
    // otherwise one after the other, each on all nodes (read anew: a removal takes one).
    let nodes = target.live_nodes().await;
    let mut needs: Vec<usize> = plan.profiles.iter().map(|(_, p)| roles_of(plan, p).len()).collect();
    let mut profiles = Vec::new();
    if needs.iter().sum::<usize>() <= nodes.len() {
        let scenarios: Vec<Vec<Role>> = plan.profiles.iter().map(|(_, p)| scenario_roles(plan, p)).collect();
        spread(&mut needs, &scenarios, nodes.len());
        let mut offset = 0;
        let runs = plan.profiles.iter().zip(&needs).map(|((path, profile), need)| {
            let own = nodes[offset..offset + need].to_vec();
            offset += need;
            progress(&format!("profile {} ({}) on {}", profile.metadata.name, path.display(), own.join(", ")));
            run_profile(target, plan, path, profile, own, progress)
        });
        for (result, t) in futures::future::join_all(runs.collect::<Vec<_>>()).await {
            timings.extend(t);
            profiles.push(result);
        }
    } else {
        for (path, profile) in &plan.profiles {
            progress(&format!("profile {} ({})", profile.metadata.name, path.display()));
            let nodes = target.live_nodes().await;
            let (result, t) = run_profile(target, plan, path, profile, nodes, progress).await;
            timings.extend(t);
            profiles.push(result);
        }
    }
    (profiles, timings)
}

/// A scenario with the guarantees it is to check.
pub(crate) type Selected = (&'static Scenario, Vec<&'static str>);

/// The selected driver-level scenarios with the guarantees each checks.
pub(crate) fn driver_selected(plan: &Plan) -> Vec<Selected> {
    plan.driver_scenarios
        .iter()
        .map(|s| (*s, s.applicable(None).into_iter().filter(|id| plan.filter.selects(id)).collect::<Vec<_>>()))
        .filter(|(_, ids)| !ids.is_empty())
        .collect()
}

/// The selected scenarios of `profile` with the guarantees each checks.
pub(crate) fn selected(plan: &Plan, profile: &Profile) -> Vec<Selected> {
    plan.cluster_scenarios
        .iter()
        .map(|s| (*s, s.applicable(Some(profile)).into_iter().filter(|id| plan.filter.selects(id)).collect::<Vec<_>>()))
        .filter(|(_, ids)| !ids.is_empty())
        .collect()
}

/// The role of each selected scenario of `profile`, in the order they run.
fn scenario_roles(plan: &Plan, profile: &Profile) -> Vec<Role> {
    selected(plan, profile).iter().map(|(s, _)| s.role).collect()
}

/// Gives the nodes beyond every profile's roles (`nodes` less the sum of `needs`), one at a
/// time, to the profile whose busiest lane runs the most scenarios one after the other, while
/// it has a scenario for another node.
fn spread(needs: &mut [usize], scenarios: &[Vec<Role>], nodes: usize) {
    for _ in needs.iter().sum::<usize>()..nodes {
        let busiest = (0..needs.len())
            .map(|i| (i, Lanes::new(&scenarios[i], needs[i]).most_per_lane(&scenarios[i])))
            .filter(|(i, _)| needs[*i] < lanes_wanted(&scenarios[*i]))
            .max_by_key(|(i, most)| (*most, usize::MAX - i));
        match busiest {
            Some((i, _)) => needs[i] += 1,
            None => return,
        }
    }
}

/// The node roles `profile`'s selected scenarios need, sorted.
pub(crate) fn roles_of(plan: &Plan, profile: &Profile) -> Vec<Role> {
    let mut roles = scenario_roles(plan, profile);
    roles.sort();
    roles.dedup();
    roles
}

async fn run_profile(
    target: &Target,
    plan: &Plan,
    path: &std::path::Path,
    profile: &Profile,
    nodes: Vec<String>,
    progress: &(dyn Fn(&str) + Sync),
) -> (ProfileResult, BTreeMap<String, f64>) {
    let mut result = ProfileResult {
        name: profile.metadata.name.clone(),
        file: path.display().to_string(),
        device_class: profile.class_name().to_string(),
        guarantees: Vec::new(),
        allocated_devices: Vec::new(),
    };
    let class_error = ensure_class(target, profile, &plan.run_id).await.err().map(|e| e.to_string());

    let selected = selected(plan, profile);
    let lanes = Lanes::new(&selected.iter().map(|(s, _)| s.role).collect::<Vec<_>>(), nodes.len());
    let node_of = |lane: usize| -> String { nodes.get(lane).cloned().unwrap_or_default() };
    let spare: Vec<String> = lanes.spare(nodes.len()).into_iter().map(node_of).collect();

    let mut groups: Vec<(usize, Vec<(usize, Selected)>)> = Vec::new();
    let mut last: Vec<(usize, Selected)> = Vec::new();
    let mut nth: HashMap<Role, usize> = HashMap::new();
    for (s, ids) in selected {
        let n = nth.entry(s.role).or_insert(0);
        let lane = lanes.of(s.role, *n);
        *n += 1;
        if lanes.last(s.role) {
            last.push((lane, (s, ids)));
            continue;
        }
        match groups.iter_mut().find(|(l, _)| *l == lane) {
            Some((_, g)) => g.push((lane, (s, ids))),
            None => groups.push((lane, vec![(lane, (s, ids))])),
        }
    }
    let run_group = |group: Vec<(usize, Selected)>| {
        let spare = spare.clone();
        let class_error = class_error.clone();
        async move {
            let mut out = Vec::new();
            let mut allocations = Vec::new();
            let mut t = BTreeMap::new();
            let _permit = plan.permit().await;
            for (lane, (s, ids)) in group {
                let started = Instant::now();
                let (results, alloc) = match &class_error {
                    Some(e) => {
                        (ids.iter().map(|id| verdict(id, s.name, Verdict::Fail, e.clone())).collect(), Vec::new())
                    }
                    None => run_one(target, plan, s, Some(profile), &ids, node_of(lane), spare.clone(), progress).await,
                };
                t.insert(format!("scenario:{}/{}", profile.metadata.name, s.name), started.elapsed().as_secs_f64());
                out.extend(results);
                allocations.extend(alloc);
            }
            (out, allocations, t)
        }
    };
    let mut ran = futures::future::join_all(groups.into_iter().map(|(_, group)| run_group(group))).await;
    if !last.is_empty() {
        ran.push(run_group(last).await);
    }
    let mut timings = BTreeMap::new();
    for (r, a, t) in ran {
        result.guarantees.extend(r);
        for d in a {
            if !result.allocated_devices.contains(&d) {
                result.allocated_devices.push(d);
            }
        }
        timings.extend(t);
    }
    result.allocated_devices.sort_by(|a, b| (&a.pool, &a.device).cmp(&(&b.pool, &b.device)));
    let order: HashMap<&str, usize> = profile.guarantee_ids().into_iter().enumerate().map(|(i, id)| (id, i)).collect();
    result.guarantees.sort_by_key(|g| order.get(g.id.as_str()).copied().unwrap_or(usize::MAX));
    if profile.device_class().is_some() {
        let api: Api<DeviceClass> = Api::all(target.client.clone());
        let _ = api.delete(profile.class_name(), &DeleteParams::default()).await;
    }
    (result, timings)
}

/// On which node each scenario of a profile runs. Where there are enough nodes, each role has
/// a node of its own, and the nodes beyond those deal the scenarios of the most loaded roles
/// over more nodes (a role's scenarios wait for each other only because they would share a
/// node's devices: on nodes of their own they need not; a driver that keeps workloads from
/// running makes each of them wait out its timeout, one after the other, otherwise); the rest
/// are spare. With fewer nodes than roles, the roles are dealt round the nodes, each node's
/// groups one after the other. Node removal then waits for every other group: without a spare
/// node, the pod it moves off the removed node may land on any other node, beside another group.
struct Lanes {
    /// The distinct roles, sorted; a role's first lane is its index here.
    roles: Vec<Role>,
    /// Per role, its further lanes (indices past `roles`).
    extra: Vec<Vec<usize>>,
    count: usize,
    distinct: bool,
}

impl Lanes {
    /// `scenarios`: the role of each scenario, in the order they run.
    fn new(scenarios: &[Role], nodes: usize) -> Lanes {
        let mut roles = scenarios.to_vec();
        roles.sort();
        roles.dedup();
        let distinct = nodes >= roles.len();
        let count = if distinct { roles.len() } else { nodes }.max(1);
        let mut lanes = Lanes { extra: vec![Vec::new(); roles.len()], roles, count, distinct };
        if distinct {
            let of_role = |r: Role| scenarios.iter().filter(|s| **s == r).count();
            // Node removal moves its pod onto a spare node, where one is: the first node
            // beyond the roles stays spare, so that the pod lands beside no other scenario.
            let first = lanes.roles.len() + usize::from(lanes.roles.contains(&Role::Removal));
            for lane in first..nodes {
                // The role with the most scenarios per lane gets the next node, while it has
                // more scenarios than lanes.
                let busiest = (0..lanes.roles.len())
                    .filter(|i| of_role(lanes.roles[*i]) > lanes.extra[*i].len() + 1)
                    .max_by_key(|i| (of_role(lanes.roles[*i]).div_ceil(lanes.extra[*i].len() + 1), usize::MAX - i));
                let Some(i) = busiest else { break };
                lanes.extra[i].push(lane);
            }
        }
        lanes
    }

    /// The index of the node that the `nth` scenario of `role` (counted from 0) runs on.
    fn of(&self, role: Role, nth: usize) -> usize {
        let Some(i) = self.roles.iter().position(|r| *r == role) else { return 0 };
        let extra = &self.extra[i];
        match nth % (extra.len() + 1) {
            0 => i % self.count,
            k => extra[k - 1],
        }
    }

    /// Whether `role` runs alone, after every other group.
    fn last(&self, role: Role) -> bool {
        !self.distinct && role == Role::Removal
    }

    /// The nodes of `nodes` that no scenario runs on.
    fn spare(&self, nodes: usize) -> Vec<usize> {
        if !self.distinct {
            return Vec::new();
        }
        (self.roles.len()..nodes).filter(|n| !self.extra.iter().flatten().any(|l| l == n)).collect()
    }

    /// The most scenarios one lane runs, one after the other.
    fn most_per_lane(&self, scenarios: &[Role]) -> usize {
        let mut per = vec![0usize; self.extra.iter().flatten().max().map_or(self.count, |last| last + 1)];
        let mut nth = std::collections::HashMap::new();
        for r in scenarios {
            let n = nth.entry(*r).or_insert(0usize);
            per[self.of(*r, *n)] += 1;
            *n += 1;
        }
        per.into_iter().max().unwrap_or(0)
    }
}

/// Every verdict of `results` that did not pass says that the node's driver died, and keeps
/// its log: whatever the scenario waited for, a driver that is not running explains it.
fn name_the_dead_driver(results: &mut [GuaranteeResult], exit: &super::target::DriverExit) {
    for r in results.iter_mut().filter(|r| r.verdict != Verdict::Pass) {
        r.reason = format!("{} ({})", r.reason, exit.said());
        r.evidence.push(exit.evidence());
    }
}

/// The nodes that scenarios of `roles` (one per scenario) can use: a lane for each, a spare for
/// node removal.
pub fn lanes_wanted(roles: &[Role]) -> usize {
    roles.len() + usize::from(roles.contains(&Role::Removal))
}

/// Creates the profile's inline DeviceClass (replacing a leftover of an earlier run), or
/// checks that the named one exists.
async fn ensure_class(target: &Target, profile: &Profile, run_id: &str) -> Result<(), ScenarioError> {
    let api: Api<DeviceClass> = Api::all(target.client.clone());
    match profile.device_class() {
        Some(mut class) => {
            mark(&mut class.metadata, run_id);
            let name = profile.class_name();
            if let Ok(Some(existing)) = api.get_opt(name).await {
                let ours = existing.metadata.labels.as_ref().is_some_and(|l| l.contains_key(RUN_LABEL));
                if !ours {
                    return Err(ScenarioError::ForeignClass(name.into()));
                }
                let _ = api.delete(name, &DeleteParams::default()).await;
                for _ in 0..50 {
                    if api.get_opt(name).await.ok().flatten().is_none() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            api.create(&PostParams::default(), &class).await.doing(|| format!("creating DeviceClass {name}"))?;
            Ok(())
        }
        None => match api
            .get_opt(profile.class_name())
            .await
            .doing(|| format!("reading DeviceClass {}", profile.class_name()))?
        {
            Some(_) => Ok(()),
            None => Err(ScenarioError::NoClass(profile.class_name().into())),
        },
    }
}

fn verdict(id: &str, scenario: &str, verdict: Verdict, reason: String) -> GuaranteeResult {
    GuaranteeResult {
        id: id.into(),
        scenario: scenario.into(),
        verdict,
        level: dracheck_results::levels::Level::of(id),
        reason,
        evidence: Vec::new(),
        durations: BTreeMap::new(),
    }
}

#[allow(clippy::too_many_arguments)]
async fn run_one(
    target: &Target,
    plan: &Plan,
    s: &'static Scenario,
    profile: Option<&Profile>,
    ids: &[&str],
    node: String,
    spare: Vec<String>,
    progress: &(dyn Fn(&str) + Sync),
) -> (Vec<GuaranteeResult>, Vec<AllocatedDevice>) {
    if let Some(why) = target.cannot(s.disrupts) {
        return (ids.iter().map(|id| verdict(id, s.name, Verdict::Skip, why.into())).collect(), Vec::new());
    }
    let profile_part = profile.map_or(String::new(), |p| format!("{}-", p.metadata.name));
    let ns = format!("dracheck-{profile_part}{}-{}", s.name.replace('_', "-"), plan.run_id);
    if let Err(e) = create_namespace(target, &ns, &plan.run_id, &[]).await {
        let failed = ids
            .iter()
            .map(|id| verdict(id, s.name, Verdict::Fail, format!("the scenario could not start: {e}")))
            .collect();
        return (failed, Vec::new());
    }
    let on = if node.is_empty() { String::new() } else { format!(" on {node}") };
    progress(&format!("{}: started{on}", s.name));
    let started = Instant::now();
    let ctx = Ctx::new(target, profile, ns.clone(), &plan.run_id, s.name, node.clone(), spare, progress);
    let outcome = match tokio::time::timeout(plan.scenario_timeout, (s.run)(&ctx)).await {
        Ok(r) => r,
        Err(_) => Err(ScenarioError::Deadline(plan.scenario_timeout)),
    };
    let mut results = ctx.take_results();
    // An error after every check was recorded is the scenario's own clean-up (waiting for the
    // node to be as it found it): no verdict, but the scenarios after it on the node may feel it.
    if let Err(e) = &outcome
        && ids.iter().all(|id| results.iter().any(|r| r.id == *id))
    {
        progress(&format!("{}: after its checks: {e}", s.name));
    }
    // A scenario that stopped before its checks (a pod that never ran, a wait that ran out)
    // says only what it waited for; the node's logs say what the kubelet and the driver did.
    let unchecked: Vec<&str> = ids.iter().copied().filter(|id| !results.iter().any(|r| r.id == *id)).collect();
    let node_logs = match &outcome {
        Err(_) if !unchecked.is_empty() && !node.is_empty() => target.node_logs(&node, 30).await,
        _ => Vec::new(),
    };
    for id in unchecked {
        let mut result = match &outcome {
            Err(e) => verdict(id, s.name, Verdict::Fail, format!("not checked: {e}")),
            Ok(()) => verdict(id, s.name, Verdict::Fail, "the scenario ended without checking it".into()),
        };
        result.evidence = node_logs.clone();
        results.push(result);
    }
    results.retain(|r| ids.contains(&r.id.as_str()));
    if !node.is_empty()
        && results.iter().any(|r| r.verdict != Verdict::Pass)
        && let Some(exit) = target.driver_exit(&node).await
    {
        name_the_dead_driver(&mut results, &exit);
        progress(&format!("{}: {}; its log ends:\n{}", s.name, exit.said(), exit.log_tail));
    }
    let failed = results.iter().filter(|r| r.verdict == Verdict::Fail).count();
    progress(&format!(
        "{}: done in {:.1}s, {} checked, {failed} failed",
        s.name,
        started.elapsed().as_secs_f64(),
        results.len()
    ));
    let classes: Api<DeviceClass> = Api::all(target.client.clone());
    let rules: Api<k8s_openapi::api::resource::v1::DeviceTaintRule> = Api::all(target.client.clone());
    for object in ctx.take_cluster_objects() {
        let _ = match object {
            super::ctx::ClusterObject::Class(name) => classes.delete(&name, &DeleteParams::default()).await.map(drop),
            super::ctx::ClusterObject::TaintRule(name) => rules.delete(&name, &DeleteParams::default()).await.map(drop),
        };
    }
    let nss: Api<Namespace> = Api::all(target.client.clone());
    for ns in std::iter::once(ns.clone()).chain(ctx.take_namespaces()) {
        release_devices(target, &ns).await;
        if plan.namespaces == NamespaceLifetime::Scenario {
            let _ = nss.delete(&ns, &DeleteParams::background()).await;
        }
    }
    (results, ctx.take_allocations())
}

/// Deletes the namespace's pods and claims and waits (bounded) until they are gone, so that
/// the next scenario on the node finds its devices free; the namespace itself goes later.
async fn release_devices(target: &Target, ns: &str) {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(target.client.clone(), ns);
    let claims: Api<k8s_openapi::api::resource::v1::ResourceClaim> = Api::namespaced(target.client.clone(), ns);
    let _ = pods.delete_collection(&DeleteParams::default(), &ListParams::default()).await;
    let _ = claims.delete_collection(&DeleteParams::default(), &ListParams::default()).await;
    for _ in 0..300 {
        let pods_left = pods.list(&ListParams::default()).await.map_or(0, |l| l.items.len());
        let claims_left = claims.list(&ListParams::default()).await.map_or(0, |l| l.items.len());
        if pods_left == 0 && claims_left == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub(crate) async fn create_namespace(
    target: &Target,
    name: &str,
    run_id: &str,
    labels: &[(&str, &str)],
) -> Result<(), ScenarioError> {
    let nss: Api<Namespace> = Api::all(target.client.clone());
    let mut meta = dracheck_objects::meta_for(name, None);
    mark(&mut meta, run_id);
    let own = meta.labels.get_or_insert_default();
    own.extend(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    nss.create(&PostParams::default(), &Namespace { metadata: meta, ..Namespace::default() })
        .await
        .doing(|| format!("creating namespace {name}"))?;
    // Pods are admitted only once the namespace's default ServiceAccount exists.
    let sas: Api<ServiceAccount> = Api::namespaced(target.client.clone(), name);
    let exists = |sa: Option<&ServiceAccount>| sa.is_some();
    super::wait::until(&sas, "default", exists, Duration::from_secs(30)).await.map(drop).map_err(|_| {
        ScenarioError::timeout(format!("namespace {name} got no default ServiceAccount"), Duration::from_secs(30))
    })
}

/// Removes what a run left behind (after Ctrl-C or a crash): its namespaces and classes.
pub async fn cleanup_run(client: &kube::Client, run_id: &str) {
    let lp = ListParams::default().labels(&format!("{RUN_LABEL}={run_id}"));
    let nss: Api<Namespace> = Api::all(client.clone());
    let _ = nss.delete_collection(&DeleteParams::background(), &lp).await;
    let classes: Api<DeviceClass> = Api::all(client.clone());
    let _ = classes.delete_collection(&DeleteParams::default(), &lp).await;
}

#[cfg(test)]
mod tests {
    use super::{Lanes, Role, Verdict, name_the_dead_driver, spread, verdict};

    const ROLES: [Role; 5] = [Role::General, Role::Exhaustion, Role::Restarts, Role::Outages, Role::Removal];

    /// A dead driver is named in every verdict of its node that did not pass, with its log,
    /// and in none that passed.
    #[test]
    fn a_driver_that_died_is_named_in_the_verdicts_it_could_affect() {
        let exit = crate::engine::target::DriverExit {
            node: "node-3".into(),
            status: "exit status: 1".into(),
            log_tail: "panic: the device went away".into(),
        };
        let mut results = vec![
            verdict("a", "s", Verdict::Fail, "not checked: pod x was not Running within 60s".into()),
            verdict("b", "s", Verdict::Pass, "it ran".into()),
            verdict("c", "s", Verdict::Skip, "cannot be told".into()),
        ];
        name_the_dead_driver(&mut results, &exit);
        assert_eq!(
            results[0].reason,
            "not checked: pod x was not Running within 60s (the driver process on node-3 exited on its own (exit \
             status: 1) and was not running)"
        );
        assert_eq!(results[0].evidence[0].body, "panic: the device went away");
        assert_eq!(results[1].reason, "it ran");
        assert!(results[1].evidence.is_empty());
        assert!(results[2].reason.contains("exited on its own"));
    }

    #[test]
    fn each_role_has_a_node_of_its_own_where_there_are_enough() {
        let lanes = Lanes::new(&ROLES, 7);
        assert_eq!(ROLES.map(|r| lanes.of(r, 0)), [0, 1, 2, 3, 4]);
        assert!(!ROLES.iter().any(|r| lanes.last(*r)));
        // One scenario per role: another node would not shorten any lane, so two are spare.
        assert_eq!(lanes.spare(7), [5, 6]);
    }

    #[test]
    fn nodes_beyond_the_roles_deal_the_busiest_roles_scenarios_over_more_nodes() {
        // Six general scenarios, three restarts, one removal; four nodes more than roles.
        let scenarios = [[Role::General; 6].as_slice(), &[Role::Restarts; 3], &[Role::Removal]].concat();
        let lanes = Lanes::new(&scenarios, 7);
        // The first stays spare for the pod that node removal moves; the general role gets a
        // node (6 → 3 a lane), then, tied with the restarts at 3, one more as the first role
        // (3 → 2), then the restarts one (3 → 2).
        assert_eq!(lanes.spare(7), [3]);
        assert_eq!((0..6).map(|n| lanes.of(Role::General, n)).collect::<Vec<_>>(), [0, 4, 5, 0, 4, 5]);
        assert_eq!((0..3).map(|n| lanes.of(Role::Restarts, n)).collect::<Vec<_>>(), [1, 6, 1]);
        assert_eq!(lanes.of(Role::Removal, 0), 2);
        assert_eq!(lanes.most_per_lane(&scenarios), 2);
        // Past one node per scenario, the rest are spare.
        let lanes = Lanes::new(&scenarios, 14);
        assert_eq!(lanes.most_per_lane(&scenarios), 1);
        assert_eq!(lanes.spare(14), [3, 11, 12, 13]);
        // As many nodes as roles: one lane each, as before.
        assert_eq!(Lanes::new(&scenarios, 3).most_per_lane(&scenarios), 6);
    }

    #[test]
    fn spare_nodes_go_to_the_profile_whose_busiest_lane_is_longest() {
        let busy = [[Role::General; 6].as_slice(), &[Role::Removal]].concat();
        let light = vec![Role::General, Role::General];
        let mut needs = [2, 1];
        spread(&mut needs, &[busy.clone(), light.clone()], 6);
        // A spare node for node removal, then 6 → 3 → 2 on the busy profile.
        assert_eq!(needs, [5, 1]);
        // More nodes than scenarios and a spare can use: the rest stay unused.
        let mut needs = [2, 1];
        spread(&mut needs, &[busy, light], 30);
        assert_eq!(needs, [8, 2]);
    }

    #[test]
    fn fewer_nodes_take_the_roles_in_turn_and_removal_runs_last() {
        let lanes = Lanes::new(&ROLES, 3);
        assert_eq!(ROLES[..4].iter().map(|r| lanes.of(*r, 0)).collect::<Vec<_>>(), [0, 1, 2, 0]);
        assert!(lanes.last(Role::Removal));
        assert!(!lanes.last(Role::General));
        assert!(lanes.spare(3).is_empty());
        // One node, or none known: everything on the first, one after the other.
        for nodes in [0, 1] {
            let lanes = Lanes::new(&ROLES, nodes);
            assert!(ROLES.iter().all(|r| lanes.of(*r, 0) == 0 && lanes.of(*r, 1) == 0));
        }
    }
}
