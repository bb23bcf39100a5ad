//! A kubelet plugin's credentials write only its own node's ResourceSlices. Every node's plugin
//! runs as one ServiceAccount, which needs the right to write slices; RBAC cannot say "this
//! node's", so an installation adds an admission policy on the token's node name (upstream ships
//! one, `test/e2e/dra/test-driver/deploy/example/plugin-permissions.yaml`, and so do charts such
//! as dra-example-driver's). Without it, one compromised or buggy node can rewrite every node's
//! inventory.
//!
//! The suite acts as the plugin's account on a node, as upstream's "must apply per-node
//! permission checks" does: impersonation of the ServiceAccount with the node name and pod that
//! a pod-bound token carries. Every write is a dry run, so nothing is created or deleted. Its
//! own node's slice must be allowed (else the suite is not acting as the plugin does, and it
//! says so instead of judging); another node's slice, a cluster-wide one, and deleting a slice
//! of another node must be refused (403 or, from an admission policy, 422). The account comes
//! from the plugin's pods where the driver is installed (`--driver-pods`), else from the
//! installation its adapter states, which the local cluster applied.

use std::time::Duration;

use dracheck_adapter::installation::service_account_user;
use http::HeaderValue;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourcePool, ResourceSlice, ResourceSliceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams};

use crate::coverage::RowId::D;
use crate::coverage::Verdict::Partial;
use crate::coverage::{UpstreamRow, e2e};
use crate::engine::target::NEEDS_PLUGIN_ACCOUNT;
use crate::engine::{Ctx, ScenarioError};
use crate::profile::ids::PLUGIN_SLICES_OWN_NODE_ONLY as ID;

pub static SCENARIO: crate::engine::Scenario = crate::engine::Scenario {
    name: "plugin-permissions",
    tier: crate::engine::Tier::Plugin,
    role: crate::engine::Role::General,
    guarantees: &[ID],
    disrupts: crate::engine::Disruption::None,
    run: crate::scenario_fn!(run),
};

/// The upstream tests this scenario answers for ([`crate::coverage`]).
pub(crate) const UPSTREAM: &[UpstreamRow] = &[UpstreamRow {
    id: D(2),
    test: "must apply per-node permission checks",
    at: e2e(4075),
    asserts: "the plugin's account may create, update and delete its own node's slices, and none of another node's \
                  nor cluster-wide ones",
    guarantees: &[ID],
    verdict: Partial(
        "only creates and a delete are tried, so an installation whose admission policy leaves updates out, letting \
             a plugin rewrite another node's or a cluster-wide slice, passes",
    ),
}];

/// A node name no cluster has, for a cluster of one node.
const NO_SUCH_NODE: &str = "dracheck-no-such-node";

/// How long a refusal may take to appear: an admission policy created with the run (the local
/// cluster applies the adapter's installation at start) is enforced once the API server's
/// informer has it, usually within a second.
const POLICY_SETTLE: Duration = Duration::from_secs(15);

/// The plugin's account as a pod-bound token on `node` presents it.
struct Account {
    namespace: String,
    name: String,
    node: String,
    pod: String,
    pod_uid: String,
    /// Where the suite found it, for the evidence.
    from: String,
}

impl Account {
    /// `request` as this account: the user, groups and extra a ServiceAccount token bound to
    /// the pod gets from the API server (`serviceaccount.ServiceAccountInfo.UserInfo`).
    fn impersonate(&self, mut request: http::Request<Vec<u8>>) -> Result<http::Request<Vec<u8>>, ScenarioError> {
        let value = |v: &str| {
            HeaderValue::from_str(v).map_err(|e| ScenarioError::Unmet(format!("{v:?} is not a header value: {e}")))
        };
        let headers = request.headers_mut();
        headers.insert("Impersonate-User", value(&service_account_user(&self.namespace, &self.name))?);
        for group in ["system:serviceaccounts".to_string(), format!("system:serviceaccounts:{}", self.namespace)] {
            headers.append("Impersonate-Group", value(&group)?);
        }
        // Header names cannot hold '/': extra keys are percent-encoded, as kubectl's --as-user-extra does.
        for (key, v) in [("node-name", &self.node), ("pod-name", &self.pod), ("pod-uid", &self.pod_uid)] {
            let name = http::HeaderName::try_from(format!("Impersonate-Extra-authentication.kubernetes.io%2f{key}"))
                .map_err(|e| ScenarioError::Unmet(format!("an impersonation header: {e}")))?;
            headers.append(name, value(v)?);
        }
        Ok(request)
    }
}

/// The API's answer to one write of the account.
enum Answer {
    Allowed,
    /// 403 (authorization) or 422 (an admission policy's default reason), with the API's words.
    Refused(u16, String),
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Answer::Allowed => f.write_str("allowed"),
            Answer::Refused(code, message) => write!(f, "refused ({code}: {message})"),
        }
    }
}

async fn send(ctx: &Ctx<'_>, account: &Account, request: http::Request<Vec<u8>>) -> Result<Answer, ScenarioError> {
    match ctx.client().request_text(account.impersonate(request)?).await {
        Ok(_) => Ok(Answer::Allowed),
        Err(kube::Error::Api(s)) if s.code == 403 || s.code == 422 => Ok(Answer::Refused(s.code, s.message)),
        Err(e) => Err(ScenarioError::Unmet(format!(
            "the API answered a dry-run write as {} with neither success nor a refusal: {e}",
            account.from
        ))),
    }
}

const SLICES: &str = "/apis/resource.k8s.io/v1/resourceslices";

/// A dry-run create of a slice of the driver on `node` (`None`: for all nodes).
async fn create(ctx: &Ctx<'_>, account: &Account, node: Option<&str>) -> Result<Answer, ScenarioError> {
    let slice = ResourceSlice {
        metadata: ObjectMeta { generate_name: Some("dracheck-permission-".into()), ..ObjectMeta::default() },
        spec: ResourceSliceSpec {
            driver: ctx.target.driver.name.clone(),
            node_name: node.map(str::to_string),
            all_nodes: node.is_none().then_some(true),
            pool: ResourcePool {
                name: format!("dracheck-permission-{}", node.unwrap_or("cluster")),
                generation: 1,
                resource_slice_count: 1,
            },
            ..ResourceSliceSpec::default()
        },
    };
    let body = serde_json::to_vec(&slice).map_err(|e| ScenarioError::Unmet(format!("encoding a slice: {e}")))?;
    let pp = PostParams { dry_run: true, ..PostParams::default() };
    let request = kube::core::Request::new(SLICES)
        .create(&pp, body)
        .map_err(|e| ScenarioError::Unmet(format!("building a request: {e}")))?;
    send(ctx, account, request).await
}

/// A dry-run delete of the slice `name`.
async fn delete(ctx: &Ctx<'_>, account: &Account, name: &str) -> Result<Answer, ScenarioError> {
    let dp = DeleteParams { dry_run: true, ..DeleteParams::default() };
    let request = kube::core::Request::new(SLICES)
        .delete(name, &dp)
        .map_err(|e| ScenarioError::Unmet(format!("building a request: {e}")))?;
    send(ctx, account, request).await
}

async fn run(ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
    let Some(account) = account(ctx).await? else { return Ok(()) };
    ctx.phase(&format!("acting as {}", account.from));

    // The control: without it a refusal below might only say that the suite does not act as the
    // plugin does (no right to impersonate, another account), not that the plugin is held to its node.
    match create(ctx, &account, Some(&account.node)).await? {
        Answer::Allowed => {}
        refused => {
            ctx.skip(ID, format!(
                "as {}, a dry-run create of a slice on its own node {} was {refused}: the suite cannot act as the plugin \
                 (it needs to impersonate serviceaccounts, groups and userextras), or the account may write no slice at all",
                account.from, account.node
            ));
            return Ok(());
        }
    }

    let nodes = ctx.target.live_nodes().await;
    let other = nodes.iter().find(|n| **n != account.node).cloned().unwrap_or_else(|| NO_SUCH_NODE.into());
    let foreign_slice = kube::Api::<ResourceSlice>::all(ctx.client())
        .list(&Default::default())
        .await
        .ok()
        // A slice of the cluster's own nodes: the plugin tier's stand-in nodes, whose scenarios
        // run beside this one, come and go with their slices.
        .and_then(|l| {
            l.items.into_iter().find(|s| {
                s.spec.node_name.as_deref().is_some_and(|n| n != account.node && nodes.iter().any(|live| live == n))
            })
        })
        .and_then(|s| Some((s.metadata.name?, s.spec.node_name?)));

    // Each write is tried again until refused, for as long as a just-applied policy may take.
    let attempt = || async {
        let mut answers = vec![
            (format!("create a slice on node {other}"), create(ctx, &account, Some(&other)).await?),
            ("create a slice for all nodes".into(), create(ctx, &account, None).await?),
        ];
        if let Some((name, node)) = &foreign_slice {
            answers.push((format!("delete the slice {name} of node {node}"), delete(ctx, &account, name).await?));
        }
        Ok::<_, ScenarioError>(answers)
    };
    let all_refused = |r: &Result<Vec<(String, Answer)>, ScenarioError>| {
        r.as_ref().map_or(true, |answers| answers.iter().all(|(_, a)| matches!(a, Answer::Refused(..))))
    };
    let answers = match ctx.poll_until(POLICY_SETTLE, attempt, all_refused).await {
        Ok((answers, _)) | Err(answers) => answers?,
    };
    let shown: Vec<String> = answers.iter().map(|(what, a)| format!("{what}: {a}")).collect();
    let allowed: Vec<&str> =
        answers.iter().filter(|(_, a)| matches!(a, Answer::Allowed)).map(|(what, _)| what.as_str()).collect();
    if allowed.is_empty() {
        ctx.pass(ID, format!("as {}: own node's slice allowed; {}", account.from, shown.join("; ")));
    } else {
        ctx.fail(
            ID,
            format!(
                "as {}, the plugin may {} (dry runs, still allowed after {} s): every node's plugin can rewrite every \
                 node's inventory; the installation needs an admission policy on the token's node name, as upstream's \
                 plugin-permissions.yaml",
                account.from,
                allowed.join(" and "),
                POLICY_SETTLE.as_secs()
            ),
            Vec::new(),
        );
    }
    Ok(())
}

/// The plugin's account on a node, or `None` after recording the skip.
async fn account(ctx: &Ctx<'_>) -> Result<Option<Account>, ScenarioError> {
    if let Some(pods) = &ctx.target.driver_pods {
        let Some(pod) = crate::engine::driver_pods::any_ready(&ctx.client(), pods, &ctx.target.nodes).await? else {
            ctx.skip(ID, format!("no ready pod of the driver's plugin ({}) on the driver's nodes", pods.selector));
            return Ok(None);
        };
        return Ok(Some(of_pod(pod)));
    }
    // The same rule `conformance --dry-run` plans with.
    let unknown = super::unreachable(&SCENARIO, &ctx.target.adapter, ctx.target.abilities());
    let (None, Some(inst), Some(node)) = (unknown, &ctx.target.adapter.installation, ctx.target.nodes.first()) else {
        ctx.skip(ID, unknown.unwrap_or(NEEDS_PLUGIN_ACCOUNT));
        return Ok(None);
    };
    Ok(Some(Account {
        namespace: inst.namespace.clone(),
        name: inst.service_account.clone(),
        node: node.clone(),
        pod: format!("{}-{node}", inst.service_account),
        pod_uid: format!("dracheck-{}", ctx.run_id),
        from: format!(
            "{} on node {node} (the driver's installation as the local cluster applied it)",
            service_account_user(&inst.namespace, &inst.service_account)
        ),
    }))
}

fn of_pod(pod: Pod) -> Account {
    let namespace = pod.metadata.namespace.unwrap_or_default();
    let spec = pod.spec.unwrap_or_default();
    let name = spec.service_account_name.unwrap_or_else(|| "default".into());
    let (pod_name, node) = (pod.metadata.name.unwrap_or_default(), spec.node_name.unwrap_or_default());
    Account {
        from: format!(
            "{} on node {node} (the account of the plugin's pod {namespace}/{pod_name})",
            service_account_user(&namespace, &name)
        ),
        namespace,
        name,
        node,
        pod: pod_name,
        pod_uid: pod.metadata.uid.unwrap_or_default(),
    }
}
