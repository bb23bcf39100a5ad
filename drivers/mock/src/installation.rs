//! The mock's installation, as a chart would ship it: a ServiceAccount for its kubelet plugin,
//! the rights upstream's example gives a plugin (`test/e2e/dra/test-driver/deploy/example/
//! plugin-permissions.yaml`), and that example's ValidatingAdmissionPolicy, which refuses a
//! node's plugin every ResourceSlice but its own node's. The local cluster applies it; the
//! suite checks it by acting as the account on a node.

use dracheck_adapter::Installation;
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::json;

/// Where the mock's plugin account lives.
pub const NAMESPACE: &str = "dracheck-mock";
pub const SERVICE_ACCOUNT: &str = "dracheck-mock-kubelet-plugin";

/// The installation; `node_policy: false` leaves the admission policy out (fault
/// `no-node-policy`).
pub fn installation(node_policy: bool) -> Installation {
    let rule = |groups: &[&str], resources: &[&str], verbs: &[&str]| PolicyRule {
        api_groups: Some(groups.iter().map(|g| g.to_string()).collect()),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..PolicyRule::default()
    };
    let mut inst = Installation {
        namespace: NAMESPACE.into(),
        service_account: SERVICE_ACCOUNT.into(),
        rules: vec![
            // list and watch: the controller part that sets binding conditions (`binding`).
            rule(&["resource.k8s.io"], &["resourceclaims"], &["get", "list", "watch"]),
            rule(&["resource.k8s.io"], &["resourceclaims/status"], &["patch", "update"]),
            // `status.devices` of its own driver, from a pod on the claim's node
            // (DRAResourceClaimGranularStatusAuthorization).
            PolicyRule {
                resource_names: Some(vec![crate::cli::DEFAULT_DRIVER.to_string()]),
                ..rule(
                    &["resource.k8s.io"],
                    &["resourceclaims/driver"],
                    &["associated-node:patch", "associated-node:update"],
                )
            },
            rule(&[""], &["nodes"], &["get"]),
            rule(
                &["resource.k8s.io"],
                &["resourceslices"],
                &["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"],
            ),
        ],
        policies: Vec::new(),
    };
    if node_policy {
        inst.policies.push(node_policy_for(&inst.user()));
    }
    inst
}

/// Upstream's policy for `user`: a request for a ResourceSlice must come from a pod on a node
/// (the token's node name) and name that node.
fn node_policy_for(
    user: &str,
) -> (
    k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy,
    k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
) {
    let name = format!("{SERVICE_ACCOUNT}-resourceslices");
    let policy = json!({
        "metadata": { "name": name },
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": { "resourceRules": [{
                "apiGroups": ["resource.k8s.io"],
                "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE", "DELETE"],
                "resources": ["resourceslices"],
            }]},
            "matchConditions": [{
                "name": "isPluginAccount",
                "expression": format!("request.userInfo.username == {user:?}"),
            }],
            "variables": [
                {
                    "name": "userNodeName",
                    "expression": "request.userInfo.extra[?'authentication.kubernetes.io/node-name'][0].orValue('')",
                },
                {
                    "name": "objectNodeName",
                    "expression": "(request.operation == 'DELETE' ? oldObject : object).spec.?nodeName.orValue('')",
                },
            ],
            "validations": [
                {
                    "expression": "variables.userNodeName != ''",
                    "message": "no node association found for user, this user must run in a pod on a node",
                },
                {
                    "expression": "variables.userNodeName == variables.objectNodeName",
                    "messageExpression": "\"this user running on node '\" + variables.userNodeName + \"' may not modify \" + (variables.objectNodeName == '' ? 'cluster resourceslices' : \"resourceslices on node '\" + variables.objectNodeName + \"'\")",
                },
            ],
        },
    });
    let binding = json!({
        "metadata": { "name": name },
        "spec": { "policyName": name, "validationActions": ["Deny"] },
    });
    (
        serde_json::from_value(policy).expect("the policy is a ValidatingAdmissionPolicy"),
        serde_json::from_value(binding).expect("the binding is a ValidatingAdmissionPolicyBinding"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_names_the_plugin_account_and_the_fault_leaves_it_out() {
        let good = installation(true);
        let (policy, binding) = &good.policies[0];
        let spec = policy.spec.as_ref().unwrap();
        let condition = &spec.match_conditions.as_ref().unwrap()[0].expression;
        assert_eq!(
            condition,
            "request.userInfo.username == \"system:serviceaccount:dracheck-mock:dracheck-mock-kubelet-plugin\""
        );
        assert_eq!(Some(&binding.spec.policy_name), policy.metadata.name.as_ref());
        assert_eq!(spec.validations.as_ref().unwrap().len(), 2);
        assert!(installation(false).policies.is_empty());
    }
}
