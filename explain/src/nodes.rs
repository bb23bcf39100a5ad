//! Whether a pod may go to a node at all, before DRA is asked: the filters the scheduler runs
//! besides DynamicResources that commonly keep a node out (readiness taints, cordon, the pod's
//! node selector, name and required affinity), and node selectors of pools and allocations.

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, Pod, Taint, Toleration};

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref().and_then(|l| l.get(key)).map(String::as_str)
}

fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let number = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => matches!((value.and_then(number), values.first().and_then(|x| number(x))), (Some(v), Some(x)) if v > x),
        "Lt" => matches!((value.and_then(number), values.first().and_then(|x| number(x))), (Some(v), Some(x)) if v < x),
        _ => false,
    }
}

/// A node selector: any term matches when all its expressions and fields do.
pub fn selector_matches(sel: &NodeSelector, node: &Node) -> bool {
    sel.node_selector_terms.iter().any(|t| {
        let exprs = t.match_expressions.iter().flatten().all(|r| requirement_matches(r, label(node, &r.key)));
        let fields = t.match_fields.iter().flatten().all(|r| {
            let v = (r.key == "metadata.name").then_some(node.metadata.name.as_deref()).flatten();
            requirement_matches(r, v)
        });
        let empty =
            t.match_expressions.as_ref().is_none_or(Vec::is_empty) && t.match_fields.as_ref().is_none_or(Vec::is_empty);
        !empty && exprs && fields
    })
}

fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if t.effect.as_deref().is_some_and(|e| !e.is_empty() && e != taint.effect) {
        return false;
    }
    match t.operator.as_deref().unwrap_or("Equal") {
        "Exists" => t.key.as_deref().is_none_or(|k| k.is_empty() || k == taint.key),
        _ => {
            t.key.as_deref() == Some(taint.key.as_str())
                && t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
    }
}

fn ready(node: &Node) -> Option<bool> {
    let conds = node.status.as_ref()?.conditions.as_ref()?;
    conds.iter().find(|c| c.type_ == "Ready").map(|c| c.status == "True")
}

/// Why the pod cannot go to `node` regardless of devices; `None` when it may. Without a pod
/// (a claim on its own) a pod without tolerations or node constraints is assumed.
pub fn node_problem(node: &Node, pod: Option<&Pod>) -> Option<String> {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let spec = pod.and_then(|p| p.spec.as_ref());
    if let Some(bound) = spec.and_then(|s| s.node_name.as_deref())
        && bound != name
    {
        return Some(format!("the pod is bound to node {bound}"));
    }
    let not_ready = match ready(node) {
        Some(true) => None,
        Some(false) => Some("node not Ready"),
        None => Some("node has no Ready condition"),
    };
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        return Some("node cordoned (spec.unschedulable)".into());
    }
    let tolerations = spec.and_then(|s| s.tolerations.clone()).unwrap_or_default();
    for taint in node.spec.as_ref().and_then(|s| s.taints.as_ref()).into_iter().flatten() {
        if taint.effect == "PreferNoSchedule" || tolerations.iter().any(|t| tolerates(t, taint)) {
            continue;
        }
        let value = taint.value.as_deref().map(|v| format!("={v}")).unwrap_or_default();
        let taint = format!("taint {}{value}:{}", taint.key, taint.effect);
        return Some(match not_ready {
            Some(r) => format!("{r} ({taint})"),
            None => format!("node has the {taint}, which the pod does not tolerate"),
        });
    }
    if let Some(r) = not_ready {
        return Some(r.into());
    }
    for (k, v) in spec.and_then(|s| s.node_selector.as_ref()).into_iter().flatten() {
        if label(node, k) != Some(v.as_str()) {
            return Some(format!(
                "the pod's nodeSelector {k}={v} does not match (node has {:?})",
                label(node, k).unwrap_or("")
            ));
        }
    }
    let required = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref());
    if let Some(sel) = required
        && !selector_matches(sel, node)
    {
        return Some("the pod's required node affinity does not match".into());
    }
    None
}
