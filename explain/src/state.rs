//! Reading what the scheduler sees: the claims to explain (a pod's, or one claim), every
//! DeviceClass, ResourceSlice, ResourceClaim (for allocations) and Node.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use kube::api::{Api, ListParams};

use crate::Error;

/// The cluster objects the diagnosis works on; the evaluation never reads the cluster itself,
/// so it runs the same on objects built in memory.
#[derive(Debug, Clone, Default)]
pub struct ClusterState {
    pub classes: Vec<DeviceClass>,
    pub slices: Vec<ResourceSlice>,
    /// All claims of the cluster: their allocations say which devices are in use.
    pub claims: Vec<ResourceClaim>,
    pub nodes: Vec<Node>,
    /// An administrator's taints on devices (DRADeviceTaintRules, on by default in 1.37): the
    /// allocator counts them as the devices' own.
    pub taint_rules: Vec<DeviceTaintRule>,
}

/// What is explained: the claims of a pod, or one claim on its own.
#[derive(Debug, Clone)]
pub struct Subject {
    /// `pod ns/name` or `ResourceClaim ns/name`.
    pub what: String,
    pub pod: Option<Pod>,
    /// The claims in the pod's order; a claim not generated yet from its template is the
    /// template's shape under the name it will get.
    pub claims: Vec<ResourceClaim>,
}

const TIMEOUT: Duration = Duration::from_secs(20);

fn unreachable(e: impl std::fmt::Display) -> Error {
    Error::Unreachable(format!(
        "the cluster cannot be reached ({e}); check --kubeconfig and --context, and that the cluster is up"
    ))
}

async fn call<T>(f: impl std::future::Future<Output = kube::Result<T>>) -> Result<T, Error> {
    match tokio::time::timeout(TIMEOUT, f).await {
        Err(_) => Err(unreachable(format!("no answer within {}s", TIMEOUT.as_secs()))),
        Ok(Err(kube::Error::Api(s))) if s.code == 403 => Err(Error::Unreachable(format!(
            "these credentials may not read what the scheduler reads ({}); explain reads every DeviceClass, \
             ResourceSlice, ResourceClaim, DeviceTaintRule and Node: grant list on them, or use credentials that have it",
            s.message
        ))),
        Ok(Err(kube::Error::Api(s))) if s.code == 404 => Err(Error::NoDraApi(format!(
            "the cluster does not serve the objects dracheck reads ({}); DRA needs resource.k8s.io/v1 \
             (Kubernetes 1.34 or later)",
            s.message
        ))),
        Ok(Err(e)) => Err(unreachable(dracheck_objects::kube_errors::cause(&e))),
        Ok(Ok(v)) => Ok(v),
    }
}

/// Fails with [`Error::NoDraApi`] unless `resource.k8s.io/v1` is served.
pub async fn check_dra_api(client: &kube::Client) -> Result<(), Error> {
    let groups = call(client.list_api_groups()).await?;
    let versions: Vec<String> = groups
        .groups
        .into_iter()
        .find(|g| g.name == "resource.k8s.io")
        .map(|g| g.versions.into_iter().map(|v| v.version).collect())
        .unwrap_or_default();
    if !versions.iter().any(|v| v == "v1") {
        return Err(Error::NoDraApi(format!(
            "the cluster does not serve resource.k8s.io/v1 (served versions: {}); DRA claims are explained as \
             Kubernetes 1.34 and later serve them: upgrade the cluster or enable the API group",
            if versions.is_empty() { "none".to_string() } else { versions.join(", ") }
        )));
    }
    Ok(())
}

pub async fn read_cluster(client: &kube::Client) -> Result<ClusterState, Error> {
    let lp = ListParams::default();
    Ok(ClusterState {
        classes: call(Api::<DeviceClass>::all(client.clone()).list(&lp)).await?.items,
        slices: call(Api::<ResourceSlice>::all(client.clone()).list(&lp)).await?.items,
        claims: call(Api::<ResourceClaim>::all(client.clone()).list(&lp)).await?.items,
        nodes: call(Api::<Node>::all(client.clone()).list(&lp)).await?.items,
        // A cluster without the API (the feature off, an older release) has no rules.
        // `call` words a 404 as a missing API: here that is a cluster without the rules.
        taint_rules: match call(Api::<DeviceTaintRule>::all(client.clone()).list(&lp)).await {
            Ok(list) => list.items,
            Err(Error::NoDraApi(_)) => Vec::new(),
            Err(e) => return Err(e),
        },
    })
}

/// The pod `namespace/name` if there is one, else the claim of that name. A pod wins because
/// it brings its claims (and a pod and its claim often share a name).
pub async fn read_subject(client: &kube::Client, namespace: &str, name: &str) -> Result<Subject, Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    if let Some(pod) = call(pods.get_opt(name)).await? {
        return pod_subject(client, namespace, pod).await;
    }
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), namespace);
    if let Some(claim) = call(claims.get_opt(name)).await? {
        return Ok(Subject { what: format!("ResourceClaim {namespace}/{name}"), pod: None, claims: vec![claim] });
    }
    Err(Error::BadInput(format!(
        "there is no pod and no ResourceClaim {namespace}/{name}; name an existing one as NAMESPACE/NAME \
         (kubectl get pods,resourceclaims -n {namespace})"
    )))
}

async fn pod_subject(client: &kube::Client, namespace: &str, pod: Pod) -> Result<Subject, Error> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let refs = pod.spec.as_ref().and_then(|s| s.resource_claims.clone()).unwrap_or_default();
    if refs.is_empty() {
        return Err(Error::BadInput(format!(
            "pod {namespace}/{name} has no resource claims (spec.resourceClaims is empty), so DRA has nothing to \
             allocate for it; its scheduling is not a DRA question (kubectl describe pod -n {namespace} {name})"
        )));
    }
    let statuses = pod.status.as_ref().and_then(|s| s.resource_claim_statuses.clone()).unwrap_or_default();
    let claims_api: Api<ResourceClaim> = Api::namespaced(client.clone(), namespace);
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), namespace);
    let mut claims = Vec::new();
    for r in refs {
        let generated = statuses.iter().find(|s| s.name == r.name).and_then(|s| s.resource_claim_name.clone());
        let claim_name = r.resource_claim_name.clone().or(generated);
        if let Some(claim_name) = &claim_name
            && let Some(c) = call(claims_api.get_opt(claim_name)).await?
        {
            claims.push(c);
            continue;
        }
        if let Some(t) = &r.resource_claim_template_name {
            let Some(template) = call(templates.get_opt(t)).await? else {
                return Err(Error::BadInput(format!(
                    "pod {namespace}/{name}: claim {} comes from the ResourceClaimTemplate {t}, which does not exist; \
                     create it or fix spec.resourceClaims",
                    r.name
                )));
            };
            let mut c = ResourceClaim::default();
            c.metadata.namespace = Some(namespace.into());
            c.metadata.name = Some(claim_name.unwrap_or_else(|| format!("{name}-{} (not generated yet)", r.name)));
            c.spec = template.spec.and_then(|s| s.spec);
            claims.push(c);
            continue;
        }
        return Err(Error::BadInput(format!(
            "pod {namespace}/{name}: its claim {} names the ResourceClaim {}, which does not exist; create it or fix \
             spec.resourceClaims",
            r.name,
            claim_name.unwrap_or_default()
        )));
    }
    Ok(Subject { what: format!("pod {namespace}/{name}"), pod: Some(pod), claims })
}
