//! The diagnosis on objects built in memory: each cause the scheduler can have, named.

use dracheck_objects::{claim, device, device_class, node, pod, resource_slice};
use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::api::resource::v1::{
    AllocationResult, Device, DeviceAllocationResult, DeviceConstraint, DeviceRequest, DeviceRequestAllocationResult,
    ResourceClaim, ResourceClaimStatus,
};

use crate::model::{Cause, Reason};
use crate::{ClusterState, Explanation, Subject, explain_state};

const DRIVER: &str = "gpu.example.com";
const NS: &str = "default";

/// Four GPUs per node: two a100 (80Gi), two l4 (24Gi).
fn gpus() -> Vec<Device> {
    (0..4)
        .map(|i| {
            let (model, mem) = if i < 2 { ("a100", "80Gi") } else { ("l4", "24Gi") };
            device(&format!("gpu-{i}")).string("model", model).int("index", i).capacity("memory", mem).build()
        })
        .collect()
}

fn cluster(nodes: usize) -> ClusterState {
    let mut s = ClusterState::default();
    for n in 1..=nodes {
        let name = format!("node-{n}");
        s.nodes.push(node(&name, &format!("127.0.10.{n}")));
        s.slices.push(resource_slice(DRIVER, &name, "uid", gpus()));
    }
    s.classes.push(device_class("gpu", DRIVER, &[]));
    s
}

/// A claim of someone else holding `devices` on `node`.
fn holder(name: &str, node: &str, devices: &[&str]) -> ResourceClaim {
    let mut c = claim(NS, name, "gpu", devices.len() as i64, &[]);
    c.status = Some(ResourceClaimStatus {
        allocation: Some(AllocationResult {
            devices: Some(DeviceAllocationResult {
                results: Some(
                    devices
                        .iter()
                        .map(|d| DeviceRequestAllocationResult {
                            request: "req".into(),
                            driver: DRIVER.into(),
                            pool: node.into(),
                            device: d.to_string(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                config: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    c
}

fn explain(state: &ClusterState, c: ResourceClaim) -> Explanation {
    let name = c.metadata.name.clone().unwrap();
    let p = pod(NS, "job").claim("gpu", &name).build();
    explain_state(state, &Subject { what: "pod default/job".into(), pod: Some(p), claims: vec![c] })
}

const A100: &str = r#"device.attributes["gpu.example.com"].model == "a100""#;

#[test]
fn a_free_matching_device_fits() {
    let e = explain(&cluster(2), claim(NS, "want", "gpu", 2, &[A100]));
    assert!(e.fits, "{}", crate::text(&e));
    assert!(e.causes.is_empty());
    assert_eq!(e.summary.free_compatible, 4);
    assert!(e.nodes.iter().all(|n| n.fits && n.detail.contains("gpu.example.com/")), "{:?}", e.nodes);
}

#[test]
fn the_classic_case_names_the_other_models_attribute() {
    let mut s = cluster(2);
    s.claims.push(holder("a", "node-1", &["gpu-0", "gpu-1"]));
    s.claims.push(holder("b", "node-2", &["gpu-0", "gpu-1"]));
    let e = explain(&s, claim(NS, "want", "gpu", 1, &[A100]));
    let text = crate::text(&e);
    assert!(!e.fits, "{text}");
    assert_eq!(
        crate::render::summary_line(&e.summary),
        "8 devices, 4 free, 4 compatible, 0 free and compatible, needed 1"
    );
    let [Cause::AllocatedElsewhere { request, compatible: 4, holders, free_misses }] = e.causes.as_slice() else {
        panic!("{:?}", e.causes)
    };
    assert_eq!(request, "req");
    assert_eq!(holders, &["default/a", "default/b"]);
    assert_eq!(free_misses.len(), 1);
    assert_eq!((free_misses[0].devices, free_misses[0].actual.as_slice()), (4, &[r#"model="l4""#.to_string()][..]));
    let l4 = &e.claims[0].requests[0].devices.iter().find(|d| d.device == "gpu-2").unwrap().ruled_out;
    assert!(
        matches!(l4, Some(Reason::Selector { actual, source, .. }) if actual == r#"model="l4""# && source == "request"),
        "{l4:?}"
    );
    assert!(text.contains(r#"model="l4""#) && text.contains("allocated to default/a"), "{text}");
}

#[test]
fn a_count_above_inventory_says_how_many_exist_and_what_fits() {
    let e = explain(&cluster(2), claim(NS, "want", "gpu", 9, &[]));
    assert!(!e.fits);
    assert_eq!(e.causes, vec![Cause::CountAboveInventory { request: "req".into(), needed: 9, compatible: 8 }]);
    assert!(e.suggestions.iter().any(|s| s.contains("largest count that fits now is 4")), "{:?}", e.suggestions);
}

#[test]
fn more_than_one_node_has_is_not_enough_on_one_node() {
    let e = explain(&cluster(2), claim(NS, "want", "gpu", 3, &[A100]));
    assert!(!e.fits);
    assert!(matches!(&e.causes[0], Cause::NotEnoughOnOneNode { needed: 3, most: 2, .. }), "{:?}", e.causes);
}

#[test]
fn too_few_on_any_node_wins_over_what_is_allocated_now() {
    // Both a100 of every node are taken, but no node could give three even if free: the
    // count is the cause, not the holders.
    let mut state = cluster(2);
    for (i, node) in ["node-1", "node-2"].iter().enumerate() {
        state.claims.push(holder(&format!("holder-{i}"), node, &["gpu-0", "gpu-1"]));
    }
    let e = explain(&state, claim(NS, "want", "gpu", 3, &[A100]));
    assert!(!e.fits);
    assert!(
        matches!(&e.causes[0], Cause::NotEnoughOnOneNode { needed: 3, most: 2, in_all: true, .. }),
        "{:?}",
        e.causes
    );
}

#[test]
fn too_much_capacity_names_the_capacity_and_the_largest_one() {
    let big = r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("160Gi")) >= 0"#;
    let e = explain(&cluster(1), claim(NS, "want", "gpu", 1, &[big]));
    assert!(!e.fits);
    let Cause::NoCompatibleDevice { misses, .. } = &e.causes[0] else { panic!("{:?}", e.causes) };
    assert_eq!(misses[0].expression, big);
    assert_eq!(misses[0].devices, 4);
    assert!(misses[0].actual.contains(&"capacity memory=80Gi".to_string()), "{misses:?}");
    assert!(
        e.suggestions.iter().any(|s| s.contains("largest free memory") && s.contains("80Gi")),
        "{:?}",
        e.suggestions
    );
}

#[test]
fn a_runtime_error_counts_only_where_the_allocator_meets_it() {
    let mut s = cluster(1);
    // Only gpu-3 has the attribute; the lookup fails on gpu-0 first.
    let d = s.slices[0].spec.devices.as_mut().unwrap();
    d[3] = device("gpu-3").string("model", "l4").string("special", "yes").capacity("memory", "24Gi").build();
    let sel = r#"device.attributes["gpu.example.com"].special == "yes""#;
    let e = explain(&s, claim(NS, "want", "gpu", 1, &[sel]));
    assert!(!e.fits, "{}", crate::text(&e));
    assert!(
        matches!(&e.causes[0], Cause::SelectorError { device, error, .. } if device.ends_with("/gpu-0") && error.contains("no such key: special")),
        "{:?}",
        e.causes
    );
    // A selector that matches the first device it reaches never meets the error.
    let first =
        r#"device.attributes["gpu.example.com"].index == 0 || device.attributes["gpu.example.com"].special == "yes""#;
    assert!(explain(&s, claim(NS, "want", "gpu", 1, &[first])).fits);
}

#[test]
fn an_unknown_class_is_named_with_the_classes_that_exist() {
    let e = explain(&cluster(1), claim(NS, "want", "no-such-class", 1, &[]));
    assert!(!e.fits);
    assert_eq!(e.causes, vec![Cause::UnknownClass { request: "req".into(), class: "no-such-class".into() }]);
    assert!(e.suggestions[0].contains("gpu (4 free matching device(s))"), "{:?}", e.suggestions);
}

#[test]
fn another_class_that_matches_is_suggested() {
    let mut s = cluster(1);
    s.classes = vec![
        device_class("a100-only", DRIVER, &[A100]),
        device_class("l4-only", DRIVER, &[r#"device.attributes["gpu.example.com"].model == "l4""#]),
    ];
    s.claims.push(holder("a", "node-1", &["gpu-0", "gpu-1"]));
    let e = explain(&s, claim(NS, "want", "a100-only", 1, &[]));
    assert!(!e.fits);
    assert!(
        e.suggestions.iter().any(|x| x.contains("DeviceClass l4-only would match 2 free device(s)")),
        "{:?}",
        e.suggestions
    );
    let row = e.claims[0].requests[0].devices.iter().find(|d| d.device == "gpu-2").unwrap();
    assert!(matches!(&row.ruled_out, Some(Reason::Selector { source, .. }) if source == "class a100-only"), "{row:?}");
}

#[test]
fn match_attribute_constraints_are_kept() {
    let c = two_gpus_with(DeviceConstraint { match_attribute: Some(format!("{DRIVER}/model")), ..Default::default() });
    let mut s = cluster(1);
    // One a100 and one l4 left: two devices free, but not of one model.
    s.claims.push(holder("a", "node-1", &["gpu-0", "gpu-2"]));
    let e = explain(&s, c.clone());
    assert!(!e.fits, "{}", crate::text(&e));
    assert!(
        matches!(&e.causes[0], Cause::ConstraintUnmet { constraint, .. } if constraint == "matchAttribute"),
        "{:?}",
        e.causes
    );
    s.claims.clear();
    assert!(explain(&s, c).fits);
}

#[test]
fn incomplete_pools_and_unready_nodes_are_reported() {
    let mut s = cluster(2);
    s.slices[0].spec.pool.resource_slice_count = 2;
    let cond = &mut s.nodes[1].status.as_mut().unwrap().conditions.as_mut().unwrap()[0];
    cond.status = "False".into();
    s.nodes[1].spec.as_mut().unwrap().taints = Some(vec![Taint {
        key: "node.kubernetes.io/not-ready".into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    }]);
    let e = explain(&s, claim(NS, "want", "gpu", 1, &[]));
    assert!(!e.fits, "{}", crate::text(&e));
    let rows = &e.claims[0].requests[0].devices;
    assert!(
        matches!(&rows[0].ruled_out, Some(Reason::Pool { message }) if message.contains("pool incomplete")),
        "{rows:?}"
    );
    assert!(
        matches!(&rows[4].ruled_out, Some(Reason::Node { message }) if message.contains("node not Ready")),
        "{rows:?}"
    );
    assert!(matches!(&e.causes[0], Cause::Unreachable { .. }), "{:?}", e.causes);
}

#[test]
fn device_taints_need_a_toleration() {
    let mut s = cluster(1);
    for d in s.slices[0].spec.devices.as_mut().unwrap() {
        d.taints = Some(vec![k8s_openapi::api::resource::v1::DeviceTaint {
            key: "maintenance".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]);
    }
    let e = explain(&s, claim(NS, "want", "gpu", 1, &[]));
    assert!(!e.fits);
    let rows = &e.claims[0].requests[0].devices;
    assert_eq!(rows[0].ruled_out, Some(Reason::Taint { taint: "maintenance:NoSchedule".into() }));
    // One line for the taint and the devices it keeps out, not a "selector #0" per device.
    let text = crate::text(&e);
    assert!(text.contains("device taint maintenance:NoSchedule not tolerated, on 4 device(s)"), "{text}");
    assert!(!text.contains("selector #"), "{text}");
    // The way out is a toleration, and no other class or selector is offered for devices the
    // request could not take either.
    assert_eq!(
        e.suggestions,
        ["request req: 4 free device(s) match but carry taints it does not tolerate (maintenance:NoSchedule); if the \
          workload may use such devices, add to the request `tolerations: [{key: \"maintenance\", operator: Exists, \
          effect: NoSchedule}]`"],
        "{}",
        crate::text(&e)
    );
}

/// An administrator's NoSchedule DeviceTaintRule keeps the scheduler off the devices it
/// selects as their own taint would: explain said "fits" while the pod stayed Unschedulable.
#[test]
fn a_device_taint_rule_needs_a_toleration_too() {
    use k8s_openapi::api::resource::v1::{DeviceTaint, DeviceTaintRule, DeviceTaintRuleSpec, DeviceTaintSelector};
    let mut s = cluster(1);
    let rule = |selector: Option<DeviceTaintSelector>| DeviceTaintRule {
        metadata: Default::default(),
        spec: DeviceTaintRuleSpec {
            device_selector: selector,
            taint: DeviceTaint { key: "maintenance".into(), effect: "NoSchedule".into(), ..Default::default() },
        },
        status: None,
    };
    // A rule without a selector picks no device; one for another driver neither.
    s.taint_rules.push(rule(None));
    s.taint_rules
        .push(rule(Some(DeviceTaintSelector { driver: Some("nic.example.com".into()), ..Default::default() })));
    assert!(explain(&s, claim(NS, "want", "gpu", 1, &[])).fits);
    s.taint_rules.push(rule(Some(DeviceTaintSelector { driver: Some(DRIVER.into()), ..Default::default() })));
    let e = explain(&s, claim(NS, "want", "gpu", 1, &[]));
    assert!(!e.fits, "{}", crate::text(&e));
    let rows = &e.claims[0].requests[0].devices;
    assert_eq!(rows[0].ruled_out, Some(Reason::Taint { taint: "maintenance:NoSchedule".into() }));
}

/// A claim that names no amount of a shared device takes the capacity policy's default share
/// (the whole capacity without one), as the allocator counts it: explain counted only amounts
/// asked and said "fits" while the scheduler found too little left.
#[test]
fn a_share_that_asks_nothing_takes_the_policy_s_default() {
    use k8s_openapi::api::resource::v1::{CapacityRequestPolicy, DeviceCapacity};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let shared = |default: Option<&str>| {
        let mut s = cluster(1);
        let devices = s.slices[0].spec.devices.as_mut().unwrap();
        devices.truncate(1);
        devices[0].allow_multiple_allocations = Some(true);
        devices[0].capacity = Some(
            [(
                "memory".to_string(),
                DeviceCapacity {
                    value: Quantity("80Gi".into()),
                    request_policy: default
                        .map(|d| CapacityRequestPolicy { default: Some(Quantity(d.into())), ..Default::default() }),
                },
            )]
            .into(),
        );
        s
    };
    let e = explain(&shared(Some("8Gi")), claim(NS, "want", "gpu", 1, &[]));
    assert!(e.fits, "a default share fits a free device: {}", crate::text(&e));
    // 75Gi of it taken already: the 8Gi default share does not fit, nor does the whole.
    for default in [Some("8Gi"), None] {
        let mut s = shared(default);
        let mut taken = holder("other", "node-1", &["gpu-0"]);
        let result = &mut taken
            .status
            .as_mut()
            .unwrap()
            .allocation
            .as_mut()
            .unwrap()
            .devices
            .as_mut()
            .unwrap()
            .results
            .as_mut()
            .unwrap()[0];
        result.consumed_capacity = Some([("memory".to_string(), Quantity("75Gi".into()))].into());
        s.claims.push(taken);
        let e = explain(&s, claim(NS, "want", "gpu", 1, &[]));
        assert!(!e.fits, "{default:?}: {}", crate::text(&e));
        let rows = &e.claims[0].requests[0].devices;
        let Some(Reason::Capacity { name, requested, available }) = &rows[0].ruled_out else {
            panic!("{default:?}: {:?}", rows[0].ruled_out)
        };
        assert_eq!((name.as_str(), available.as_str()), ("memory", "5Gi"), "{default:?}");
        assert!(requested.contains("nothing asked"), "{requested}");
    }
}

#[test]
fn the_json_names_causes_and_reasons_by_kind() {
    let e = explain(&cluster(1), claim(NS, "want", "nope", 1, &[]));
    let json = serde_json::to_value(&e).unwrap();
    assert_eq!(json["causes"][0]["kind"], "unknownClass");
    assert_eq!(json["fits"], false);
    assert_eq!(json["summary"]["needed"], 1);
}

#[test]
#[ignore = "prints the text of the classic case for a look"]
fn show_classic_text() {
    let mut s = cluster(2);
    s.claims.push(holder("a", "node-1", &["gpu-0", "gpu-1"]));
    s.claims.push(holder("b", "node-2", &["gpu-0", "gpu-1"]));
    println!("{}", crate::text(&explain(&s, claim(NS, "want", "gpu", 1, &[A100]))));
    println!("{}", crate::text(&explain(&s, claim(NS, "want", "gpu", 9, &[]))));
}

#[test]
fn json_fields_are_camel_case() {
    let mut s = cluster(1);
    s.claims.push(holder("a", "node-1", &["gpu-0", "gpu-1", "gpu-2", "gpu-3"]));
    let json = serde_json::to_value(explain(&s, claim(NS, "want", "gpu", 1, &[]))).unwrap();
    assert_eq!(json["summary"]["freeCompatible"], 0);
    assert_eq!(json["causes"][0]["kind"], "allocatedElsewhere");
    assert!(json["causes"][0]["freeMisses"].is_array(), "{json}");
    assert_eq!(json["claims"][0]["requests"][0]["devices"][0]["ruledOut"]["kind"], "allocated");
}

/// Gives the devices of slice `slice` at `devices` the string attribute `special`.
fn with_special(state: &mut ClusterState, slice: usize, devices: &[usize], value: &str) {
    let d = state.slices[slice].spec.devices.as_mut().unwrap();
    for &i in devices {
        d[i].attributes.get_or_insert_default().insert(
            "special".into(),
            k8s_openapi::api::resource::v1::DeviceAttribute { string: Some(value.into()), ..Default::default() },
        );
    }
}

const SPECIAL: &str = r#"device.attributes["gpu.example.com"].special == "yes""#;

#[test]
fn a_selector_error_on_one_node_fails_the_whole_scheduling_attempt() {
    // node-2 has a device that matches, node-1's devices lack the attribute: the allocator's
    // error on node-1 makes the DynamicResources filter return an Error status, which fails
    // the pod's scheduling attempt as a whole (SchedulerError), whatever node-2 offers.
    let mut s = cluster(2);
    with_special(&mut s, 1, &[0, 1, 2, 3], "yes");
    let e = explain(&s, claim(NS, "want", "gpu", 1, &[SPECIAL]));
    let text = crate::text(&e);
    assert!(!e.fits, "{text}");
    let [Cause::SelectorError { device, error, .. }] = e.causes.as_slice() else { panic!("{:?}", e.causes) };
    assert!(device.ends_with("node-1/gpu-0") && error.contains("no such key: special"), "{device}: {error}");
    assert!(e.causes[0].describe().contains("SchedulerError"), "{text}");
    assert!(text.contains("SchedulerError"), "{text}");
    // node-2 alone would do: the table says so, the verdict does not.
    assert!(e.nodes.iter().any(|n| n.node == "node-2" && n.fits), "{:?}", e.nodes);
}

#[test]
fn a_selector_that_fails_on_every_device_names_the_failure() {
    let e = explain(&cluster(1), claim(NS, "want", "gpu", 1, &[SPECIAL]));
    assert!(!e.fits);
    for c in &e.causes {
        let line = c.describe();
        assert!(!line.trim_end().ends_with(':'), "a cause line without its reason: {line:?}");
    }
    let Some(Cause::NoCompatibleDevice { misses, .. }) = e.causes.get(1) else { panic!("{:?}", e.causes) };
    let line = e.causes[1].describe();
    assert!(line.contains(SPECIAL) && line.contains("4 device(s)") && line.contains("no such key: special"), "{line}");
    assert_eq!(misses.len(), 1, "{misses:?}");
    assert!(misses[0].error.as_deref().is_some_and(|x| x.contains("no such key: special")), "{misses:?}");
    assert_eq!(misses[0].actual, ["special missing (domain gpu.example.com)"]);
}

#[test]
fn a_cluster_without_devices_says_so() {
    let mut s = cluster(1);
    s.slices.clear();
    let e = explain(&s, claim(NS, "want", "gpu", 1, &[]));
    assert!(!e.fits);
    let lines: Vec<String> = e.causes.iter().map(Cause::describe).collect();
    assert!(lines.iter().all(|l| !l.trim_end().ends_with(':')), "a cause line without its reason: {lines:?}");
    assert!(lines[0].contains("no ResourceSlice publishes a device"), "{lines:?}");
    assert_eq!(e.causes, vec![Cause::NoDevicesPublished { request: "req".into() }]);
    assert!(e.suggestions[0].contains("kubectl get resourceslices"), "{:?}", e.suggestions);
}

/// Evaluates `expression` against device `i` of the first slice.
fn eval_on(state: &ClusterState, i: usize, expression: &str) -> Result<bool, String> {
    let env = crate::cel::Environment::new();
    let d = &state.slices[0].spec.devices.as_ref().unwrap()[i];
    let input = crate::cel::DeviceInput::of(DRIVER, d);
    env.matches(&env.compile(expression).map_err(|e| e.to_string())?, &input).map_err(|e| e.to_string())
}

#[test]
fn the_guard_suggested_is_for_the_attribute_the_device_lacks() {
    let mut s = cluster(1);
    with_special(&mut s, 0, &[3], "yes");
    let e = explain(&s, claim(NS, "want", "gpu", 1, &[SPECIAL]));
    assert!(!e.fits);
    let has = r#"has(device.attributes["gpu.example.com"].special)"#;
    let optional = r#"device.attributes["gpu.example.com"].?special.orValue("")"#;
    assert!(
        e.suggestions.iter().any(|x| x.contains(&format!("{has} && ({SPECIAL})")) && x.contains(optional)),
        "{:?}",
        e.suggestions
    );
    // Both guards are what the allocator evaluates without error: false without the
    // attribute, the selector's answer with it.
    for guarded in [format!("{has} && ({SPECIAL})"), format!(r#"{optional} == "yes""#)] {
        assert_eq!(eval_on(&s, 0, &guarded), Ok(false), "{guarded}");
        assert_eq!(eval_on(&s, 3, &guarded), Ok(true), "{guarded}");
    }

    // A missing capacity is guarded the same way.
    let cores = r#"device.capacity["gpu.example.com"].cores.compareTo(quantity("1")) >= 0"#;
    let e = explain(&s, claim(NS, "want", "gpu", 1, &[cores]));
    assert!(
        e.suggestions.iter().any(|x| x.contains(r#"has(device.capacity["gpu.example.com"].cores)"#)
            && x.contains(r#"device.capacity["gpu.example.com"].?cores.orValue(quantity("0"))"#)),
        "{:?}",
        e.suggestions
    );
}

/// A claim of two requests of one GPU each under `constraint`.
fn two_gpus_with(constraint: DeviceConstraint) -> ResourceClaim {
    let mut c = claim(NS, "want", "gpu", 1, &[]);
    let devices = c.spec.as_mut().unwrap().devices.as_mut().unwrap();
    let mut second: DeviceRequest = devices.requests.as_ref().unwrap()[0].clone();
    second.name = "other".into();
    devices.requests.as_mut().unwrap().push(second);
    devices.constraints = Some(vec![constraint]);
    c
}

#[test]
fn an_unmet_match_attribute_names_the_attribute_and_the_values_per_node() {
    let mut s = cluster(2);
    // One a100 and one l4 free per node: two devices, but not of one model.
    s.claims.push(holder("a", "node-1", &["gpu-0", "gpu-2"]));
    s.claims.push(holder("b", "node-2", &["gpu-1", "gpu-3"]));
    let model = format!("{DRIVER}/model");
    let e = explain(&s, two_gpus_with(DeviceConstraint { match_attribute: Some(model), ..Default::default() }));
    assert!(!e.fits, "{}", crate::text(&e));
    let line = e.causes[0].describe();
    assert!(line.contains("matchAttribute gpu.example.com/model"), "{line}");
    assert!(line.contains(r#"node-1: "a100" (gpu-1), "l4" (gpu-3)"#), "{line}");
    assert!(line.contains(r#"node-2: "a100" (gpu-0), "l4" (gpu-2)"#), "{line}");
    let [Cause::ConstraintUnmet { claim, constraint, attribute, nodes }] = e.causes.as_slice() else {
        panic!("{:?}", e.causes)
    };
    assert_eq!(
        (claim.as_str(), constraint.as_str(), attribute.as_str()),
        ("default/want", "matchAttribute", "gpu.example.com/model")
    );
    assert_eq!(nodes.iter().map(|n| n.node.as_str()).collect::<Vec<_>>(), ["node-1", "node-2"]);
    // The node table names it too.
    assert!(e.nodes.iter().all(|n| n.detail.contains("matchAttribute gpu.example.com/model not met")), "{:?}", e.nodes);
}

#[test]
fn an_unmet_distinct_attribute_names_the_attribute_and_the_values_per_node() {
    let mut s = cluster(1);
    // Only the two a100 are free: two devices, but of one model.
    s.claims.push(holder("a", "node-1", &["gpu-2", "gpu-3"]));
    let model = format!("{DRIVER}/model");
    let e = explain(&s, two_gpus_with(DeviceConstraint { distinct_attribute: Some(model), ..Default::default() }));
    assert!(!e.fits, "{}", crate::text(&e));
    let line = e.causes[0].describe();
    assert!(line.contains("distinctAttribute gpu.example.com/model"), "{line}");
    assert!(line.contains(r#"node-1: "a100" (gpu-0, gpu-1)"#), "{line}");
}

/// One node whose pool is an a30 published as partitions: the whole GPU or two halves, which
/// share its counters (a slice of their own, as the API wants them).
fn partitioned() -> ClusterState {
    use k8s_openapi::api::resource::v1::{Counter, CounterSet, DeviceCounterConsumption};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let counters = |gi: u32| [("memory".to_string(), Counter { value: Quantity(format!("{gi}Gi")) })].into();
    let partition = |name: &str, gi: u32| {
        let mut d = device(name).string("model", "a30").build();
        d.consumes_counters = Some(vec![DeviceCounterConsumption {
            counter_set: "gpu-4".into(),
            counters: counters(gi),
            ..Default::default()
        }]);
        d
    };
    let mut s = ClusterState::default();
    s.nodes.push(node("node-1", "127.0.10.1"));
    let mut devices = resource_slice(
        DRIVER,
        "node-1",
        "uid",
        vec![partition("whole", 24), partition("half-0", 12), partition("half-1", 12)],
    );
    devices.spec.pool.resource_slice_count = 2;
    let mut shared = resource_slice(DRIVER, "node-1", "uid", Vec::new());
    shared.metadata.name = Some("node-1-counters".into());
    shared.spec.devices = None;
    shared.spec.shared_counters = Some(vec![CounterSet { name: "gpu-4".into(), counters: counters(24) }]);
    shared.spec.pool.resource_slice_count = 2;
    s.slices = vec![devices, shared];
    s.classes.push(device_class("gpu", DRIVER, &[]));
    s
}

#[test]
fn a_free_partition_whose_device_is_allocated_whole_is_held_through_its_counters() {
    let mut s = partitioned();
    s.claims.push(holder("whole", "node-1", &["whole"]));
    let e = explain(&s, claim(NS, "want", "gpu", 1, &[]));
    let text = crate::text(&e);
    assert!(!e.fits, "the halves are free but their counters are taken: {text}");
    let [Cause::AllocatedElsewhere { holders, .. }] = e.causes.as_slice() else { panic!("{:?}", e.causes) };
    assert_eq!(
        holders,
        &["default/whole", "default/whole (through counter memory of gpu-4, which it shares)"],
        "the whole itself, and the halves through the counters: {text}"
    );
    let half = &e.claims[0].requests[0].devices.iter().find(|d| d.device == "half-0").unwrap().ruled_out;
    assert!(matches!(half, Some(Reason::Allocated { by, .. }) if by.contains("through counter memory")), "{half:?}");
}

#[test]
fn partitions_chosen_together_stay_within_their_counters() {
    let s = partitioned();
    // Two devices: the two halves, not the whole and a half (which the pool order offers first).
    let e = explain(&s, claim(NS, "two", "gpu", 2, &[]));
    assert!(e.fits, "{}", crate::text(&e));
    assert!(e.nodes[0].detail.contains("half-0") && e.nodes[0].detail.contains("half-1"), "{:?}", e.nodes);
    assert!(!e.nodes[0].detail.contains("/whole"), "{:?}", e.nodes);
    // Three never fit together.
    let e = explain(&s, claim(NS, "three", "gpu", 3, &[]));
    assert!(!e.fits, "{}", crate::text(&e));
}

/// A selector using what Kubernetes has and dracheck lacks gets no verdict: not "no device
/// set fits", not a selector error that fails the scheduling attempt. (Every function of the
/// 1.37 environment is implemented: a function of a later release stands for one.)
#[test]
fn a_selector_dracheck_cannot_evaluate_is_said_so() {
    let env = crate::cel::Environment::lacking(&[("futureFunction", "a later release's library")]);
    let later = r#"device.attributes["gpu.example.com"].model.futureFunction() == "a100""#;
    let c = claim(NS, "want", "gpu", 1, &[later]);
    let name = c.metadata.name.clone().unwrap();
    let p = pod(NS, "job").claim("gpu", &name).build();
    let e = crate::diagnose::explain_in(
        &env,
        &cluster(1),
        &Subject { what: "pod default/job".into(), pod: Some(p), claims: vec![c] },
    );
    assert!(!e.fits);
    let [Cause::Unevaluable { request, source, index, feature, .. }] = e.causes.as_slice() else {
        panic!("{:?}", e.causes)
    };
    assert_eq!((request.as_str(), source.as_str(), *index), ("req", "request", 0));
    assert_eq!(feature, "`futureFunction` (a later release's library)");
    let text = crate::text(&e);
    assert!(text.contains("no verdict: dracheck cannot evaluate a selector"), "{text}");
    assert!(text.contains("dracheck cannot evaluate this selector: request selector #0"), "{text}");
    assert!(!text.contains("SchedulerError"), "{text}");
    assert!(e.suggestions.iter().any(|s| s.contains("scheduler's events")), "{:?}", e.suggestions);
}

/// A request with alternatives needs one of them: the node says what each alternative lacks,
/// and "needed" counts the request once, not every alternative added up.
#[test]
fn each_alternative_of_a_first_available_request_is_named_with_its_own_shortfall() {
    const L4: &str = r#"device.attributes["gpu.example.com"].model == "l4""#;
    let want = dracheck_objects::ClaimBuilder::exact("gpu", 3)
        .first_available(&[("a100", &[A100]), ("l4", &[L4])])
        .claim(NS, "want");
    let e = explain(&cluster(1), want);
    let text = crate::text(&e);
    assert!(!e.fits, "{text}");
    assert_eq!(e.summary.needed, 3, "{text}");
    let node = e.nodes.iter().find(|n| n.node == "node-1").unwrap();
    assert_eq!(
        node.detail, "no alternative has enough devices free and compatible here: req/a100 2 of 3, req/l4 2 of 3",
        "{text}"
    );
    // One alternative that fits is enough: no shortfall is named for the node.
    let fits = dracheck_objects::ClaimBuilder::exact("gpu", 2)
        .first_available(&[("a100", &[A100]), ("l4", &[L4])])
        .claim(NS, "want");
    let e = explain(&cluster(1), fits);
    assert!(e.fits, "{}", crate::text(&e));
    assert_eq!(e.summary.needed, 2);
}

/// A gated pod is not tried by the scheduler at all: a fit says so, not only "fits".
#[test]
fn a_pod_held_by_a_scheduling_gate_is_said_to_be_held() {
    let c = claim(NS, "want", "gpu", 1, &[]);
    let mut p = pod(NS, "job").claim("gpu", "want").build();
    p.spec.as_mut().unwrap().scheduling_gates =
        Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate { name: "example.com/quota".into() }]);
    let e = explain_state(&cluster(1), &Subject { what: "pod default/job".into(), pod: Some(p), claims: vec![c] });
    let text = crate::text(&e);
    assert_eq!(e.scheduling_gates, ["example.com/quota"]);
    assert!(text.contains("held: the pod has the scheduling gates example.com/quota"), "{text}");
    let json = serde_json::to_value(&e).unwrap();
    assert_eq!(json["schedulingGates"], serde_json::json!(["example.com/quota"]));
    // Without a gate the JSON has no such field.
    let ungated = explain(&cluster(1), claim(NS, "want", "gpu", 1, &[]));
    assert!(serde_json::to_value(&ungated).unwrap().get("schedulingGates").is_none());
}
