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
fn a_runtime_error_stops_the_node_as_in_the_scheduler() {
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
    let mut c = claim(NS, "want", "gpu", 1, &[]);
    let devices = c.spec.as_mut().unwrap().devices.as_mut().unwrap();
    let mut second: DeviceRequest = devices.requests.as_ref().unwrap()[0].clone();
    second.name = "other".into();
    devices.requests.as_mut().unwrap().push(second);
    devices.constraints =
        Some(vec![DeviceConstraint { match_attribute: Some(format!("{DRIVER}/model")), ..Default::default() }]);
    let mut s = cluster(1);
    // One a100 and one l4 left: two devices free, but not of one model.
    s.claims.push(holder("a", "node-1", &["gpu-0", "gpu-2"]));
    let e = explain(&s, c.clone());
    assert!(!e.fits, "{}", crate::text(&e));
    assert!(matches!(&e.causes[0], Cause::NoCombination { .. }), "{:?}", e.causes);
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
