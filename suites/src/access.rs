//! What the suite may do on a cluster it did not start: the least access a run needs, as RBAC.
//!
//! One table ([`NEEDS`]) is the truth for three things: the ClusterRole that `dracheck rbac`
//! prints for an in-cluster run (with its ServiceAccount and binding), the check before a run
//! ([`missing`]: one SelfSubjectAccessReview per verb and resource, so that credentials short
//! of a permission stop the run at once with every missing one named, instead of failing
//! scenarios one by one with a 403 deep in their evidence), and the docs. The in-cluster test
//! proves the table enough (a whole run under exactly these rules passes) and the check exact
//! (one permission less is named).
//!
//! The table was read off an API server's audit log of a whole `--cluster kubeconfig` run,
//! and the paths that only a failing scenario takes (events as evidence) were added. It leaves
//! out on purpose what a run with `--install helm` needs (a chart may create anything) and
//! impersonation of the driver's ServiceAccount: `plugin.slices.own-node-only` acts as the
//! driver only where the suite may impersonate it, and says it could not otherwise.

use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::{Api, PostParams};
use serde_json::Value;

/// Verbs on one resource (or a subresource of it), and why the suite needs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// API group; `""` is the core group.
    pub group: &'static str,
    /// `pods`, or `pods/log` for a subresource.
    pub resource: &'static str,
    pub verbs: &'static [&'static str],
    pub why: &'static str,
}

/// Everything a run of the suite does through the API, on resources.
pub const NEEDS: &[Need] = &[
    Need {
        group: "",
        resource: "namespaces",
        verbs: &["create", "delete"],
        why: "each scenario group works in a namespace of its own, labelled with the run, deleted after it",
    },
    Need {
        group: "",
        resource: "serviceaccounts",
        verbs: &["list", "watch"],
        why: "a new namespace's `default` ServiceAccount must exist before its pods are admitted",
    },
    Need {
        group: "",
        resource: "pods",
        verbs: &["create", "get", "list", "watch", "delete", "deletecollection"],
        why: "the workloads of the scenarios; with --driver-pods, the driver's pods it restarts",
    },
    Need {
        group: "",
        resource: "pods/log",
        verbs: &["get"],
        why: "what a workload saw of its devices (its environment, the config it was given)",
    },
    Need { group: "", resource: "events", verbs: &["list"], why: "a pod's events, as evidence when it did not run" },
    Need {
        group: "",
        resource: "nodes",
        verbs: &["get", "list", "watch", "create", "delete"],
        why: "which nodes publish devices, and the plugin tier's stand-in Nodes for the driver instances it starts",
    },
    Need {
        group: "",
        resource: "nodes/status",
        verbs: &["patch"],
        why: "the addresses of the plugin tier's stand-in Nodes",
    },
    Need {
        group: "resource.k8s.io",
        resource: "deviceclasses",
        verbs: &["create", "get", "list", "delete"],
        why: "the profiles' DeviceClasses, created for the run",
    },
    Need {
        group: "resource.k8s.io",
        resource: "resourceclaims",
        verbs: &["create", "get", "list", "watch", "delete", "deletecollection"],
        why: "the claims of the scenarios (compatible, impossible, lifecycle, …)",
    },
    Need {
        group: "resource.k8s.io",
        resource: "resourceclaims/status",
        verbs: &["patch"],
        why: "the plugin tier allocates its claims itself, as the scheduler would, to prepare them",
    },
    Need {
        group: "resource.k8s.io",
        resource: "resourceclaims/binding",
        verbs: &["patch"],
        why: "the same allocations: since 1.37 the API server also asks for this (synthetic) subresource of whoever sets status.allocation",
    },
    Need {
        group: "resource.k8s.io",
        resource: "resourceclaimtemplates",
        verbs: &["create"],
        why: "claims made from a template, as workloads usually ask",
    },
    Need {
        group: "resource.k8s.io",
        resource: "resourceslices",
        verbs: &["create", "get", "list", "watch", "patch", "delete"],
        why: "what the driver publishes, and the slices the plugin tier's driver instances publish (server-side apply)",
    },
    Need {
        group: "resource.k8s.io",
        resource: "devicetaintrules",
        verbs: &["create", "delete", "list"],
        why: "an administrator's taint on a device, in the taint scenarios; `explain` reads every rule, which the \
              scheduler counts as the devices' own taints",
    },
];

/// Everything a run reads beside resources: the API server's feature gates
/// (`kubernetes_feature_enabled`); discovery and `/version` every authenticated user may read.
pub const NON_RESOURCE: &[(&str, &[&str], &str)] =
    &[("/metrics", &["get"], "the API server's feature gates, for the report's header")];

/// One permission the credentials lack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    pub verb: String,
    /// `pods/log`, `resourceclaims.resource.k8s.io`, or a non-resource URL such as `/metrics`.
    pub what: String,
    pub why: &'static str,
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} ({})", self.verb, self.what, self.why)
    }
}

/// `resource.group`, as kubectl spells a resource of a group; `resource/sub.group` for a subresource.
fn qualified(need: &Need) -> String {
    if need.group.is_empty() { need.resource.to_string() } else { format!("{}.{}", need.resource, need.group) }
}

/// The permissions of [`NEEDS`] and [`NON_RESOURCE`] that the client's credentials lack, in
/// all namespaces (the suite makes namespaces of its own), each asked of the API server with a
/// SelfSubjectAccessReview, which every authenticated user may create.
pub async fn missing(client: &kube::Client) -> Result<Vec<Missing>, kube::Error> {
    use futures::StreamExt as _;
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let mut asks = Vec::new();
    for need in NEEDS {
        let (resource, subresource) =
            need.resource.split_once('/').map_or((need.resource, None), |(r, s)| (r, Some(s)));
        for verb in need.verbs {
            let attributes = ResourceAttributes {
                group: Some(need.group.to_string()),
                resource: Some(resource.to_string()),
                subresource: subresource.map(str::to_string),
                verb: Some(verb.to_string()),
                ..Default::default()
            };
            let spec = SelfSubjectAccessReviewSpec { resource_attributes: Some(attributes), ..Default::default() };
            asks.push((Missing { verb: verb.to_string(), what: qualified(need), why: need.why }, spec));
        }
    }
    for (path, verbs, why) in NON_RESOURCE {
        for verb in *verbs {
            let attributes = NonResourceAttributes { path: Some(path.to_string()), verb: Some(verb.to_string()) };
            let spec = SelfSubjectAccessReviewSpec { non_resource_attributes: Some(attributes), ..Default::default() };
            asks.push((Missing { verb: verb.to_string(), what: path.to_string(), why }, spec));
        }
    }
    let answers = futures::stream::iter(asks.into_iter().map(|(missing, spec)| {
        let api = api.clone();
        async move {
            let review = SelfSubjectAccessReview { spec, ..Default::default() };
            let answer = api.create(&PostParams::default(), &review).await?;
            Ok::<_, kube::Error>((missing, answer.status.is_some_and(|s| s.allowed)))
        }
    }))
    .buffered(8)
    .collect::<Vec<_>>()
    .await;
    let mut out = Vec::new();
    for answer in answers {
        let (missing, allowed) = answer?;
        if !allowed {
            out.push(missing);
        }
    }
    Ok(out)
}

/// Why a run stops where the credentials lack permissions: each one, and how to grant them.
pub fn refusal(missing: &[Missing]) -> String {
    let list: Vec<String> = missing.iter().map(|m| format!("  {m}")).collect();
    format!(
        "these credentials lack {} permission(s) the suite needs, on every namespace:\n{}\nGrant them: `{} rbac \
         --namespace NS --service-account NAME | kubectl apply -f -` prints a ClusterRole with exactly the suite's \
         permissions and binds it to that ServiceAccount; or run with credentials that have them.",
        missing.len(),
        list.join("\n"),
        dracheck_adapter::program::name(),
    )
}

/// The rules of [`NEEDS`] and [`NON_RESOURCE`], as a ClusterRole has them.
pub fn rules() -> Vec<PolicyRule> {
    let mut rules: Vec<PolicyRule> = NEEDS
        .iter()
        .map(|n| PolicyRule {
            api_groups: Some(vec![n.group.to_string()]),
            resources: Some(vec![n.resource.to_string()]),
            verbs: n.verbs.iter().map(|v| v.to_string()).collect(),
            ..Default::default()
        })
        .collect();
    rules.extend(NON_RESOURCE.iter().map(|(path, verbs, _)| PolicyRule {
        non_resource_urls: Some(vec![path.to_string()]),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    }));
    rules
}

/// Where an in-cluster run lives: its namespace and ServiceAccount, whose name the ClusterRole
/// and its binding share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub namespace: String,
    pub service_account: String,
}

impl Default for Identity {
    fn default() -> Self {
        Identity { namespace: "dracheck".into(), service_account: "dracheck".into() }
    }
}

impl Identity {
    /// The ClusterRole's and the binding's name: one per namespace and account, so that two
    /// installations side by side do not share (or remove) each other's role.
    pub fn role_name(&self) -> String {
        format!("dracheck:{}:{}", self.namespace, self.service_account)
    }

    /// The username the API server gives the account's tokens.
    pub fn user(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.service_account)
    }
}

/// The objects that let the account run the suite: its Namespace, the ServiceAccount, a
/// ClusterRole with exactly [`rules`] (or `rules` with one taken away, for the test that the
/// check names it), and the binding; in the order `kubectl apply` needs them.
pub fn manifests(id: &Identity, rules: Vec<PolicyRule>) -> Vec<Value> {
    let labels = || Some([("app.kubernetes.io/name".to_string(), "dracheck".to_string())].into());
    let namespace = Namespace {
        metadata: kube::api::ObjectMeta { name: Some(id.namespace.clone()), labels: labels(), ..Default::default() },
        ..Default::default()
    };
    let account = ServiceAccount {
        metadata: kube::api::ObjectMeta {
            name: Some(id.service_account.clone()),
            namespace: Some(id.namespace.clone()),
            labels: labels(),
            ..Default::default()
        },
        ..Default::default()
    };
    let role = ClusterRole {
        metadata: kube::api::ObjectMeta { name: Some(id.role_name()), labels: labels(), ..Default::default() },
        rules: Some(rules),
        ..Default::default()
    };
    let binding_meta = kube::api::ObjectMeta { name: Some(id.role_name()), labels: labels(), ..Default::default() };
    let binding =
        dracheck_objects::bind_cluster_role(binding_meta, &id.role_name(), &id.namespace, &id.service_account);
    [typed(namespace), typed(account), typed(role), typed(binding)].into()
}

/// The object with its `apiVersion` and `kind`, which k8s-openapi's serializer writes.
fn typed<K: serde::Serialize>(object: K) -> Value {
    serde_json::to_value(object).expect("Kubernetes objects serialize")
}

/// `rules()` without `verb` on `resource` (`pods/log`, `resourceclaims.resource.k8s.io`): a
/// role one permission short, for proving that [`missing`] names exactly that one.
pub fn rules_without(verb: &str, what: &str) -> Vec<PolicyRule> {
    let mut rules = rules();
    for (rule, need) in rules.iter_mut().zip(NEEDS) {
        if qualified(need) == what {
            rule.verbs.retain(|v| v != verb);
        }
    }
    rules.retain(|r| !r.verbs.is_empty());
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_role_grants_exactly_the_table() {
        let rules = rules();
        assert_eq!(rules.len(), NEEDS.len() + NON_RESOURCE.len());
        for (rule, need) in rules.iter().zip(NEEDS) {
            assert_eq!(rule.resources.as_deref(), Some(&[need.resource.to_string()][..]));
            assert_eq!(rule.verbs.len(), need.verbs.len());
        }
        // Nothing broader than the table: no wildcards, no escalation, no secrets.
        for rule in &rules {
            assert!(!rule.verbs.iter().any(|v| v == "*" || v == "escalate" || v == "bind" || v == "impersonate"));
            let names = rule.resources.iter().flatten().chain(rule.api_groups.iter().flatten());
            assert!(!names.clone().any(|r| r == "*" || r == "secrets"), "{rule:?}");
        }
    }

    #[test]
    fn manifests_bind_the_account_to_its_own_role() {
        let id = Identity { namespace: "ci".into(), service_account: "checker".into() };
        let objects = manifests(&id, rules());
        let kinds: Vec<&str> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"]);
        assert_eq!(objects[3]["roleRef"]["name"], "dracheck:ci:checker");
        assert_eq!(objects[2]["metadata"]["name"], "dracheck:ci:checker");
        assert_eq!(objects[3]["subjects"][0]["namespace"], "ci");
        assert_eq!(objects[1]["metadata"]["namespace"], "ci");
        assert_eq!(id.user(), "system:serviceaccount:ci:checker");
    }

    #[test]
    fn a_role_one_permission_short_lacks_only_that_one() {
        let full = rules();
        let short = rules_without("delete", "resourceclaims.resource.k8s.io");
        let verbs = |rules: &[PolicyRule]| -> usize { rules.iter().map(|r| r.verbs.len()).sum() };
        assert_eq!(verbs(&short) + 1, verbs(&full));
        let claims =
            short.iter().find(|r| r.resources.as_deref() == Some(&["resourceclaims".to_string()][..])).unwrap();
        assert!(!claims.verbs.contains(&"delete".to_string()));
        // A subresource is named as kubectl names it.
        assert_eq!(verbs(&rules_without("get", "pods/log")) + 1, verbs(&full));
    }
}
