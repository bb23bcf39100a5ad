//! Device profiles: the shipped ones load with the expected guarantees and claim shape, bad
//! profiles are refused with file, line and field, and `--profile` arguments resolve. No
//! cluster needed.

use std::path::{Path, PathBuf};

use dracheck_suites::profile::{
    self, ClassSource, ImpossibleVariant, IsolationMode, ProfileError, Version, VersionReq, ids,
};

const MOCK: &str = "gpu.mock.dracheck.io";

fn shipped(name: &str) -> profile::Profile {
    let path = profile::resolve(name, "mock").unwrap_or_else(|e| panic!("{e}"));
    profile::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_mock_profiles_ship_and_are_found_by_name() {
    let names: Vec<String> =
        profile::shipped("mock").iter().map(|p| p.file_stem().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["partitioned-inference", "shared-by-memory", "standard-inference", "training-intensive"]);
    for path in profile::shipped("mock") {
        let p = profile::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.metadata.name, path.file_stem().unwrap().to_string_lossy(), "name matches the file");
        assert_eq!(p.driver, MOCK);
        assert!(!p.metadata.description.is_empty());
        p.check_driver(MOCK).unwrap();
    }
    assert!(profile::shipped("no-such-driver").is_empty());
}

#[test]
fn standard_inference_publishes_every_family_but_the_outages() {
    let p = shipped("standard-inference");
    assert_eq!(p.class_name(), "mock-inference");
    assert_eq!(
        p.guarantee_ids(),
        [
            ids::CLAIM_COMPATIBLE_ALLOCATED,
            ids::WORKLOAD_SEES_DEVICES,
            ids::CLAIM_IMPOSSIBLE_UNKNOWN_CLASS,
            ids::CLAIM_IMPOSSIBLE_SELECTOR,
            ids::CLAIM_IMPOSSIBLE_COUNT,
            ids::CLAIM_IMPOSSIBLE_CAPACITY,
            ids::CLAIM_IMPOSSIBLE_EXPLAINED,
            ids::ISOLATION_EXCLUSIVE,
            ids::LIMITS_MAX_DEVICES_PER_CLAIM,
            ids::CAPACITY_RECOVERED,
            ids::RETENTION_TEMPLATE_CLAIM_DELETED,
            ids::RETENTION_STANDALONE_CLAIM_DEALLOCATED,
            ids::LIFECYCLE_UNPREPARED,
            ids::LIFECYCLE_CONTAINER_RESTART,
            ids::LIFECYCLE_PREPARED_AND_NEW,
            ids::LIFECYCLE_FORCE_DELETE,
            ids::CONFIG_CLASS_AND_CLAIM,
            ids::CONFIG_PER_REQUEST,
            ids::DRIVERS_COEXIST,
            ids::PRIORITIZED_CHOSEN_SUBREQUEST,
            ids::ADMIN_ACCESS_IN_USE_DEVICE,
            ids::ADMIN_ACCESS_NAMESPACE_LABEL,
            ids::DEVICE_STATUS_REPORTED,
            ids::TAINTS_RULE_EVICTS,
            ids::TAINTS_UNHEALTHY_KEPT_OFF,
            ids::EXTENDED_RESOURCE_PREPARED,
            ids::EXTENDED_RESOURCE_CLAIM_DELETED,
            ids::HEALTH_POD_STATUS,
            ids::DRIVER_RESTART_WORKLOAD_KEEPS_DEVICES,
            ids::DRIVER_RESTART_NEW_CLAIMS_WORK,
            ids::DRIVER_RESTART_SLICES_KEPT,
            ids::DRIVER_RESTART_NO_LEAKS,
            ids::DRIVER_UPGRADE_ROLLING,
            ids::DRIVER_UPGRADE_FAILED,
            ids::NODE_RESTART_DRIVER_RECOVERS,
            ids::NODE_REMOVAL_SLICES_GONE,
            ids::NODE_REMOVAL_PODS_GONE,
            ids::NODE_REMOVAL_CLAIMS_DEALLOCATED,
            ids::NODE_REMOVAL_CAPACITY_ELSEWHERE,
            ids::VERSIONS_KUBERNETES,
            ids::VERSIONS_DRIVER,
        ]
    );
    // Every family but the outages, which take a node of their own and are training-intensive's,
    // the partitions and their binding conditions, which need a class of partitions
    // (partitioned-inference's), and the shares,
    // which need a class of shareable devices (shared-by-memory's): the IDs are all the
    // families' except those and the other isolation mode.
    let elsewhere = [
        ids::ISOLATION_SHARED,
        ids::DRIVER_RESTART_LONG_OUTAGE,
        ids::NODE_REBOOT_WORKLOADS_RESUME,
        ids::PARTITIONABLE_COUNTERS_RESPECTED,
        ids::PARTITIONABLE_CAPACITY_RESTORED,
        ids::PARTITIONABLE_PREPARED_PARTITION,
        ids::BINDING_CONDITIONS_BOUND_WHEN_READY,
        ids::CONSUMABLE_SHARED,
        ids::CONSUMABLE_PREPARED_SHARE,
    ];
    let all: Vec<&str> = profile::family::all_ids().into_iter().filter(|id| !elsewhere.contains(id)).collect();
    assert_eq!(p.guarantee_ids(), all);
    let training = shipped("training-intensive").guarantee_ids();
    assert!(elsewhere[1..3].iter().all(|id| training.contains(id)), "the outages are published by training-intensive");
    let partitioned = shipped("partitioned-inference").guarantee_ids();
    assert!(
        elsewhere[3..7].iter().all(|id| partitioned.contains(id)),
        "partitioned-inference publishes the partitions"
    );
    let shared = shipped("shared-by-memory").guarantee_ids();
    assert!(elsewhere[7..].iter().all(|id| shared.contains(id)), "shared-by-memory publishes the shares");

    let g = &p.guarantees;
    assert_eq!(g.allocation.as_ref().unwrap().within_seconds, 30);
    assert_eq!(g.impossible.as_ref().unwrap().variants, ImpossibleVariant::ALL);
    assert_eq!(g.isolation.as_ref().unwrap().mode, IsolationMode::Exclusive);
    assert_eq!(g.limits.as_ref().unwrap().max_devices_per_claim, 2);
    assert_eq!(g.capacity_recovery.as_ref().unwrap().within().as_secs(), 30);
    assert_eq!(g.driver_restart.as_ref().unwrap().max_downtime_seconds, 10);
    let versions = g.versions.as_ref().unwrap();
    assert!(versions.kubernetes.as_ref().unwrap().matches("v1.37.2"));
    assert!(versions.driver.as_ref().unwrap().matches("0.1.0"));

    assert_eq!(p.total_devices(), Some(1));
    let devices = p.claim_spec().devices.unwrap();
    let requests = devices.requests.unwrap();
    assert_eq!(requests.len(), 1);
    let exact = requests[0].exactly.as_ref().unwrap();
    assert_eq!(exact.device_class_name, "mock-inference");
    assert_eq!(exact.allocation_mode.as_deref(), Some("ExactCount"));
    assert_eq!(exact.count, Some(1));
    let selector = &exact.selectors.as_ref().unwrap()[0];
    assert!(selector.cel.as_ref().unwrap().expression.contains("quantity(\"20Gi\")"));
    assert!(devices.constraints.is_none());
    assert!(devices.config.is_none());

    let class = p.device_class().expect("an inline class");
    assert_eq!(class.metadata.name.as_deref(), Some("mock-inference"));
    let labels = class.metadata.labels.unwrap();
    assert_eq!(labels[dracheck_objects::MANAGED_BY.0], dracheck_objects::MANAGED_BY.1);
    let expressions: Vec<String> =
        class.spec.unwrap().selectors.unwrap().into_iter().map(|s| s.cel.unwrap().expression).collect();
    assert!(expressions.iter().any(|e| e.contains(r#".model == "l4""#)), "{expressions:?}");
}

#[test]
fn training_intensive_asks_for_two_matching_a100s() {
    let p = shipped("training-intensive");
    assert_eq!(p.class_name(), "mock-training");
    assert_eq!(
        p.guarantee_ids(),
        [
            ids::CLAIM_COMPATIBLE_ALLOCATED,
            ids::WORKLOAD_SEES_DEVICES,
            ids::CLAIM_IMPOSSIBLE_SELECTOR,
            ids::CLAIM_IMPOSSIBLE_COUNT,
            ids::CLAIM_IMPOSSIBLE_CAPACITY,
            ids::CLAIM_IMPOSSIBLE_EXPLAINED,
            ids::ISOLATION_EXCLUSIVE,
            ids::LIMITS_MAX_DEVICES_PER_CLAIM,
            ids::CAPACITY_RECOVERED,
            ids::RETENTION_TEMPLATE_CLAIM_DELETED,
            ids::RETENTION_STANDALONE_CLAIM_DEALLOCATED,
            ids::LIFECYCLE_UNPREPARED,
            ids::LIFECYCLE_CONTAINER_RESTART,
            ids::LIFECYCLE_PREPARED_AND_NEW,
            ids::LIFECYCLE_FORCE_DELETE,
            ids::CONFIG_CLASS_AND_CLAIM,
            ids::CONFIG_PER_REQUEST,
            ids::DRIVERS_COEXIST,
            ids::DRIVER_RESTART_WORKLOAD_KEEPS_DEVICES,
            ids::DRIVER_RESTART_NEW_CLAIMS_WORK,
            ids::DRIVER_RESTART_SLICES_KEPT,
            ids::DRIVER_RESTART_NO_LEAKS,
            ids::DRIVER_UPGRADE_ROLLING,
            ids::DRIVER_UPGRADE_FAILED,
            ids::DRIVER_RESTART_LONG_OUTAGE,
            ids::NODE_RESTART_DRIVER_RECOVERS,
            ids::NODE_REBOOT_WORKLOADS_RESUME,
            ids::VERSIONS_KUBERNETES,
            ids::VERSIONS_DRIVER,
        ]
    );
    assert_eq!(p.guarantees.allocation.as_ref().unwrap().within().as_secs(), 60);
    assert!(p.guarantees.node_removal.is_none());
    assert_eq!(p.total_devices(), Some(2));
    let devices = p.claim_spec().devices.unwrap();
    let exact = devices.requests.as_ref().unwrap()[0].exactly.clone().unwrap();
    assert_eq!((exact.device_class_name.as_str(), exact.count), ("mock-training", Some(2)));
    let constraints = devices.constraints.unwrap();
    assert_eq!(constraints.len(), 1);
    assert_eq!(constraints[0].requests.as_deref(), Some(&["gpus".to_string()][..]));
    assert_eq!(constraints[0].match_attribute.as_deref(), Some("gpu.mock.dracheck.io/model"));
    let class = p.device_class().unwrap().spec.unwrap();
    let text = serde_json::to_string(&class).unwrap();
    assert!(text.contains(r#"model == \"a100\""#), "{text}");
}

#[test]
fn the_claim_spec_serializes_to_the_shape_the_apiserver_expects() {
    let dir = tempfile::tempdir().unwrap();
    let text = BASE
        .replace("      selectors: [\"true\"]\n", "      selectors: [\"true\"]\n      capacity: {memory: 20Gi}\n")
        .replace("guarantees:\n", "  config: {mode: inference}\nguarantees:\n");
    let p = profile::load(&write(dir.path(), "shape.yaml", &text)).unwrap_or_else(|e| panic!("{e}"));
    let json = serde_json::to_value(p.claim_spec()).unwrap();
    let expected = serde_json::json!({
        "devices": {
            "requests": [{
                "name": "gpu",
                "exactly": {
                    "deviceClassName": "test-class",
                    "allocationMode": "ExactCount",
                    "count": 1,
                    "selectors": [{"cel": {"expression": "true"}}],
                    "capacity": {"requests": {"memory": "20Gi"}},
                },
            }],
            "constraints": [{"requests": ["gpu"], "matchAttribute": "gpu.mock.dracheck.io/model"}],
            "config": [{"opaque": {"driver": MOCK, "parameters": {"mode": "inference"}}}],
        }
    });
    assert_eq!(json, expected, "{json:#}");
}

#[test]
fn an_existing_class_is_named_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let text = BASE.replace(
        "  name: test-class\n  spec:\n    selectors:\n      - cel:\n          expression: device.driver == \"gpu.mock.dracheck.io\"\n",
        "  existing: gpu.mock.dracheck.io\n",
    );
    let p = profile::load(&write(dir.path(), "existing.yaml", &text)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.device_class, ClassSource::Existing { name: MOCK.into() });
    assert_eq!(p.class_name(), MOCK);
    assert!(p.device_class().is_none());
    let spec = p.claim_spec();
    assert_eq!(spec.devices.unwrap().requests.unwrap()[0].exactly.as_ref().unwrap().device_class_name, MOCK);
}

/// A valid profile the invalid cases below change one thing in.
const BASE: &str = r#"apiVersion: dracheck.io/v1alpha1
kind: DeviceProfile
metadata:
  name: test
  description: a test profile
driver: gpu.mock.dracheck.io
deviceClass:
  name: test-class
  spec:
    selectors:
      - cel:
          expression: device.driver == "gpu.mock.dracheck.io"
claim:
  requests:
    - name: gpu
      count: 1
      selectors: ["true"]
  constraints:
    - requests: [gpu]
      matchAttribute: gpu.mock.dracheck.io/model
guarantees:
  allocation:
    withinSeconds: 30
  limits:
    maxDevicesPerClaim: 2
  versions:
    kubernetes: ">=1.34"
"#;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The 1-based line on which `needle` starts in `text`.
fn line_of(text: &str, needle: &str) -> u64 {
    let at = text.find(needle).unwrap_or_else(|| panic!("{needle:?} not in the case's text"));
    text[..at].matches('\n').count() as u64 + 1
}

#[test]
fn the_base_profile_of_the_invalid_cases_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile::load(&write(dir.path(), "base.yaml", BASE)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        p.guarantee_ids(),
        [
            ids::CLAIM_COMPATIBLE_ALLOCATED,
            ids::WORKLOAD_SEES_DEVICES,
            ids::LIMITS_MAX_DEVICES_PER_CLAIM,
            ids::VERSIONS_KUBERNETES
        ]
    );
}

#[test]
fn invalid_profiles_name_the_file_the_line_and_the_field() {
    struct Case {
        what: &'static str,
        from: &'static str,
        to: &'static str,
        /// Where the error must point: the line on which this text starts.
        at: &'static str,
        field: &'static str,
        message: &'static str,
    }
    let cases = [
        Case {
            what: "a string where seconds belong",
            from: "withinSeconds: 30",
            to: "withinSeconds: fast",
            at: "withinSeconds: fast",
            field: "guarantees.allocation.withinSeconds",
            message: "invalid type: string \"fast\", expected a whole number of seconds",
        },
        Case {
            what: "zero seconds",
            from: "withinSeconds: 30",
            to: "withinSeconds: 0",
            at: "withinSeconds: 0",
            field: "guarantees.allocation.withinSeconds",
            message: "at least 1",
        },
        Case {
            what: "an unknown guarantee parameter",
            from: "withinSeconds: 30",
            to: "withinSecs: 30",
            at: "withinSecs",
            field: "guarantees.allocation.withinSecs",
            message: "withinSecs",
        },
        Case {
            what: "an unknown guarantee family",
            from: "  limits:\n",
            to: "  speed: {}\n  limits:\n",
            at: "speed",
            field: "guarantees.speed",
            message: "speed",
        },
        Case {
            what: "an unknown field of the inline class spec",
            from: "      - cel:\n",
            to: "      - cell:\n",
            at: "cell",
            field: "deviceClass.spec.selectors[0].cell",
            message: "cell",
        },
        Case {
            what: "a wrongly typed field of the inline class spec",
            from: "expression: device.driver == \"gpu.mock.dracheck.io\"",
            to: "expression: [a, b]",
            at: "expression: [a, b]",
            field: "deviceClass.spec.selectors[0].cel.expression",
            message: "invalid type",
        },
        Case {
            what: "an unsupported apiVersion",
            from: "apiVersion: dracheck.io/v1alpha1",
            to: "apiVersion: dracheck.io/v2",
            at: "apiVersion",
            field: "apiVersion",
            message: "supported apiVersion is dracheck.io/v1alpha1",
        },
        Case {
            what: "another kind",
            from: "kind: DeviceProfile",
            to: "kind: MockInventory",
            at: "kind",
            field: "kind",
            message: "supported kind is DeviceProfile",
        },
        Case {
            what: "no requests",
            from: "  requests:\n    - name: gpu\n      count: 1\n      selectors: [\"true\"]\n  constraints:\n    - requests: [gpu]\n      matchAttribute: gpu.mock.dracheck.io/model\n",
            to: "  requests: []\n",
            at: "  requests: []",
            field: "claim.requests",
            message: "requests nothing",
        },
        Case {
            what: "a count that is no number",
            from: "count: 1",
            to: "count: many",
            at: "count: many",
            field: "claim.requests[0].count",
            message: "invalid type: string \"many\", expected a whole number",
        },
        Case {
            what: "a missing field of a nested mapping",
            from: "      matchAttribute: gpu.mock.dracheck.io/model\n",
            to: "",
            at: "    - requests: [gpu]",
            field: "claim.constraints[0].matchAttribute",
            message: "missing field `matchAttribute`",
        },
        Case {
            what: "a count below one",
            from: "count: 1",
            to: "count: 0",
            at: "count: 0",
            field: "claim.requests[0].count",
            message: "at least 1",
        },
        Case {
            what: "a duplicate request name",
            from: "  constraints:\n",
            to: "    - name: gpu\n      count: 2\n  constraints:\n",
            at: "    - name: gpu\n      count: 2",
            field: "claim.requests[1].name",
            message: "used twice",
        },
        Case {
            what: "a constraint naming an unknown request",
            from: "requests: [gpu]",
            to: "requests: [gpu, cpu]",
            at: "requests: [gpu, cpu]",
            field: "claim.constraints[0].requests[1]",
            message: "\"cpu\"",
        },
        Case {
            what: "an unqualified matchAttribute",
            from: "matchAttribute: gpu.mock.dracheck.io/model",
            to: "matchAttribute: model",
            at: "matchAttribute",
            field: "claim.constraints[0].matchAttribute",
            message: "fully qualified",
        },
        Case {
            what: "a limit below the claim's own count",
            from: "count: 1",
            to: "count: 3",
            at: "maxDevicesPerClaim",
            field: "guarantees.limits.maxDevicesPerClaim",
            message: "smaller than the profile's own claim",
        },
        Case {
            what: "a Kubernetes version requirement that does not parse",
            from: "kubernetes: \">=1.34\"",
            to: "kubernetes: newest",
            at: "kubernetes: newest",
            field: "guarantees.versions.kubernetes",
            message: "not a version requirement",
        },
        Case {
            what: "a driver version requirement that does not parse",
            from: "kubernetes: \">=1.34\"",
            to: "kubernetes: \">=1.34\"\n    driver: \">=one\"",
            at: "driver: \">=one\"",
            field: "guarantees.versions.driver",
            message: "not a version requirement",
        },
        Case {
            what: "both spec and existing",
            from: "  name: test-class\n",
            to: "  name: test-class\n  existing: other\n",
            at: "existing: other",
            field: "deviceClass.existing",
            message: "exclude each other",
        },
        Case {
            what: "neither spec nor existing",
            from: "  spec:\n    selectors:\n      - cel:\n          expression: device.driver == \"gpu.mock.dracheck.io\"\n",
            to: "",
            at: "  name: test-class",
            field: "deviceClass",
            message: "names no class",
        },
        Case {
            what: "an unknown impossible variant",
            from: "  limits:\n",
            to: "  impossible:\n    variants: [tooBig]\n  limits:\n",
            at: "variants",
            field: "guarantees.impossible.variants[0]",
            message: "tooBig",
        },
        Case {
            what: "a driver restart longer than the kubelet's wipe delay",
            from: "  limits:\n",
            to: "  driverRestart:\n    maxDowntimeSeconds: 45\n  limits:\n",
            at: "maxDowntimeSeconds: 45",
            field: "guarantees.driverRestart.maxDowntimeSeconds",
            message: "30 s",
        },
        Case {
            what: "a capacity that is no quantity",
            from: "      selectors: [\"true\"]\n",
            to: "      selectors: [\"true\"]\n      capacity: {memory: lots}\n",
            at: "capacity",
            field: "claim.requests[0].capacity.memory",
            message: "not a quantity",
        },
        Case {
            what: "an invalid driver name",
            from: "driver: gpu.mock.dracheck.io",
            to: "driver: GPU_Mock",
            at: "driver: GPU_Mock",
            field: "driver",
            message: "DRA driver name",
        },
        Case {
            what: "a missing required field",
            from: "driver: gpu.mock.dracheck.io\n",
            to: "",
            at: "apiVersion",
            field: "driver",
            message: "missing field `driver`",
        },
        Case {
            what: "no guarantees at all",
            from: "guarantees:\n  allocation:\n    withinSeconds: 30\n  limits:\n    maxDevicesPerClaim: 2\n  versions:\n    kubernetes: \">=1.34\"\n",
            to: "guarantees: {}\n",
            at: "guarantees: {}",
            field: "guarantees",
            message: "no guarantee",
        },
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        assert!(BASE.contains(case.from), "case {:?}: {:?} is not in the base profile", case.what, case.from);
        let text = BASE.replacen(case.from, case.to, 1);
        let path = write(dir.path(), &format!("case-{i}.yaml"), &text);
        let line = line_of(&text, case.at);
        let error = match profile::load(&path) {
            Ok(_) => {
                failures.push(format!("{}: accepted", case.what));
                continue;
            }
            Err(e) => e,
        };
        let message = error.to_string();
        let ok = matches!(&error, ProfileError::Invalid { line: l, field, .. } if *l == line && field == case.field)
            && message.contains(&path.display().to_string())
            && message.contains(&format!("line {line}, column "))
            && message.contains(&format!("field {}:", case.field))
            && message.contains(case.message);
        if !ok {
            failures.push(format!(
                "{}: expected line {line}, field {}, {:?}; got: {message}",
                case.what, case.field, case.message
            ));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[test]
fn invalid_yaml_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let text = BASE.replace("claim:\n", "claim: [\n");
    let path = write(dir.path(), "broken.yaml", &text);
    let e = profile::load(&path).unwrap_err();
    let ProfileError::Invalid { line, .. } = &e else { panic!("{e}") };
    assert!(*line >= line_of(&text, "claim: ["), "{e}");
    assert!(e.to_string().contains("broken.yaml"), "{e}");
}

#[test]
fn a_profile_for_another_driver_says_how_to_fix_the_command() {
    let p = shipped("standard-inference");
    let e = p.check_driver("gpu.example.com").unwrap_err();
    let message = e.to_string();
    assert!(
        message.contains(
            "profile standard-inference (" // the path follows
        ) && message.contains(
            "is for driver gpu.mock.dracheck.io, not gpu.example.com: pass --profile with a profile for \
             gpu.example.com or pick --driver mock"
        ),
        "{message}"
    );
    let e = profile::load_for("standard-inference", "mock", "gpu.example.com").unwrap_err();
    assert!(matches!(e, ProfileError::WrongDriver { .. }), "{e}");

    // A profile file for a driver dracheck ships nothing for.
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "vendor.yaml", &BASE.replace("driver: gpu.mock.dracheck.io", "driver: gpu.vendor.io"));
    let e = profile::load_for(path.to_str().unwrap(), "mock", MOCK).unwrap_err();
    let message = e.to_string();
    assert!(message.contains("is for driver gpu.vendor.io, not gpu.mock.dracheck.io"), "{message}");
    assert!(message.contains("--driver-name gpu.vendor.io"), "{message}");
}

#[test]
fn an_unknown_profile_lists_the_drivers_profiles() {
    let e = profile::resolve("heavy-training", "mock").unwrap_err();
    let ProfileError::NotFound { available, .. } = &e else { panic!("{e}") };
    assert_eq!(available, &["partitioned-inference", "shared-by-memory", "standard-inference", "training-intensive"]);
    let message = e.to_string();
    assert!(message.contains("unknown profile \"heavy-training\" for driver mock"), "{message}");
    assert!(
        message.contains("partitioned-inference, shared-by-memory, standard-inference, training-intensive"),
        "{message}"
    );
    assert!(message.contains("--profile"), "{message}");

    let e = profile::resolve("standard-inference", "nvidia-but-not-shipped").unwrap_err();
    let message = e.to_string();
    assert!(message.contains("ships no profiles for nvidia-but-not-shipped"), "{message}");
    assert!(message.contains("--driver mock"), "{message}");

    let e = profile::resolve("./no/such/profile.yaml", "mock").unwrap_err();
    assert!(matches!(e, ProfileError::Read { .. }), "{e}");
    assert!(e.to_string().contains("no/such/profile.yaml"), "{e}");
}

#[test]
fn a_profile_argument_may_be_a_path() {
    let shipped = profile::shipped("mock");
    let by_path = profile::resolve(shipped[0].to_str().unwrap(), "mock").unwrap();
    assert_eq!(by_path, shipped[0]);
    let by_name = profile::resolve("training-intensive", "mock").unwrap();
    assert_eq!(by_name, profile::profiles_dir().join("mock/training-intensive.yaml"));
    let p = profile::load_for("training-intensive", "mock", MOCK).unwrap();
    assert_eq!(p.path, by_name);
}

#[test]
fn version_requirements() {
    let cases: &[(&str, &str, bool)] = &[
        (">=1.34", "v1.37.2", true),
        (">=1.34", "1.34.0", true),
        (">=1.34", "1.33.9", false),
        (">=1.34", "v1.38.0-beta.0", true),
        ("<1.35", "1.34.99", true),
        ("<1.35", "1.35.0", false),
        (">=1.34, <1.38", "1.37.2", true),
        (">=1.34,<1.37", "1.37.2", false),
        ("=1.37", "v1.37.2", true),
        ("=1.37", "1.36.2", false),
        ("=1.37.2", "1.37.2", true),
        ("=1.37.2", "1.37.3", false),
        ("1.37", "1.37.0+k3s1", true),
        (">1.34", "1.35.0", true),
        (">1.34", "1.34.7", false),
        (">1.34.2", "1.34.3", true),
        ("<=1.34", "1.34.7", true),
        ("<=1.34", "1.35.0", false),
        (">=0.1", "0.1.0", true),
        (">=0.1", "0.0.9", false),
        (">=550.54", "550.54.15", true),
        (">= 1.34 , < 2.0", "1.40.0", true),
        (">=1.34", "not-a-version", false),
    ];
    for (req, version, expected) in cases {
        let parsed = VersionReq::parse(req).unwrap_or_else(|e| panic!("{req}: {e}"));
        assert_eq!(parsed.matches(version), *expected, "{version} against {req}");
    }
    for bad in ["", "newest", ">=", ">=1", "~1.2", ">=1.x", "1.2.3.4", ">=1.34,", "=>1.34", ">=v1.34-rc"] {
        assert!(VersionReq::parse(bad).is_err(), "{bad:?} should not parse");
    }
    assert_eq!(VersionReq::parse(">=1.34,<2.0").unwrap().to_string(), ">=1.34, <2.0");
    assert_eq!(Version::parse("v1.37.2").unwrap(), Version { major: 1, minor: 37, patch: 2 });
    assert!(Version::parse("1").is_err());
    assert!(VersionReq::parse(">=1.34").unwrap().try_matches("banana").is_err());
}

#[test]
fn a_duplicate_key_names_its_field_without_the_yaml_librarys_hint() {
    let dir = tempfile::tempdir().unwrap();
    let text = BASE.replace("  limits:\n", "  allocation:\n    withinSeconds: 60\n  limits:\n");
    let path = write(dir.path(), "dup.yaml", &text);
    let e = profile::load(&path).unwrap_err();
    let ProfileError::Invalid { field, message, .. } = &e else { panic!("{e}") };
    assert_eq!(field, "guarantees.allocation", "{e}");
    assert!(message.contains("duplicate") && message.contains("allocation"), "{e}");
    assert!(!message.to_lowercase().contains("hint"), "the library's own hint is left out: {e}");
}

#[test]
fn a_file_that_is_not_utf8_gets_advice_about_its_encoding() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("latin1.yaml");
    let mut bytes = BASE.replace("a test profile", "caf\u{e9}").into_bytes();
    // "é" in Latin-1: one byte that is no UTF-8.
    let at = bytes.windows(2).position(|w| w == [0xc3, 0xa9]).unwrap();
    bytes.splice(at..at + 2, [0xe9]);
    std::fs::write(&path, bytes).unwrap();
    let e = profile::load(&path).unwrap_err().to_string();
    assert!(e.contains("UTF-8") && e.contains("line 5"), "{e}");
    assert!(!e.contains("Pass an existing file"), "{e}");
}

/// BASE's claim written in the API's shape, as a platform team pastes it from a template.
const API_CLAIM: &str = r#"claim:
  devices:
    requests:
      - name: gpu
        exactly:
          deviceClassName: test-class
          count: 1
          selectors:
            - cel: {expression: "true"}
    constraints:
      - requests: [gpu]
        matchAttribute: gpu.mock.dracheck.io/model
"#;

const SHORT_CLAIM: &str = "claim:\n  requests:\n    - name: gpu\n      count: 1\n      selectors: [\"true\"]\n  constraints:\n    - requests: [gpu]\n      matchAttribute: gpu.mock.dracheck.io/model\n";

fn load_text(text: &str) -> Result<profile::Profile, ProfileError> {
    let dir = tempfile::tempdir().unwrap();
    profile::load(&write(dir.path(), "p.yaml", text))
}

#[test]
fn the_short_form_is_sugar_for_the_api_shape() {
    assert!(BASE.contains(SHORT_CLAIM));
    let short = load_text(BASE).unwrap();
    let api = load_text(&BASE.replace(SHORT_CLAIM, API_CLAIM)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(api.claim_spec(), short.claim_spec());
    // The class may be left out: it is the profile's.
    let unnamed =
        load_text(&BASE.replace(SHORT_CLAIM, &API_CLAIM.replace("          deviceClassName: test-class\n", "")))
            .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(unnamed.claim_spec(), short.claim_spec());
}

#[test]
fn the_api_shape_says_what_the_short_form_cannot() {
    let claim = r#"claim:
  devices:
    requests:
      - name: gpu
        firstAvailable:
          - name: big
            count: 2
            selectors: [{cel: {expression: 'device.attributes["gpu.mock.dracheck.io"].model == "a100"'}}]
          - name: any
            allocationMode: All
      - name: monitor
        exactly:
          adminAccess: true
          tolerations: [{key: example.com/unhealthy, operator: Exists, effect: NoSchedule}]
          capacity: {requests: {memory: 10Gi}}
    constraints:
      - requests: [gpu/big]
        distinctAttribute: gpu.mock.dracheck.io/uuid
    config:
      - requests: [monitor]
        opaque: {driver: gpu.mock.dracheck.io, parameters: {mode: watch}}
"#;
    let p = load_text(&BASE.replace(SHORT_CLAIM, claim).replace("  limits:\n    maxDevicesPerClaim: 2\n", ""))
        .unwrap_or_else(|e| panic!("{e}"));
    let json = serde_json::to_value(p.claim_spec()).unwrap();
    let expected = serde_json::json!({"devices": {
        "requests": [
            {"name": "gpu", "firstAvailable": [
                {"name": "big", "deviceClassName": "test-class", "allocationMode": "ExactCount", "count": 2,
                 "selectors": [{"cel": {"expression": "device.attributes[\"gpu.mock.dracheck.io\"].model == \"a100\""}}]},
                {"name": "any", "deviceClassName": "test-class", "allocationMode": "All"},
            ]},
            {"name": "monitor", "exactly": {
                "deviceClassName": "test-class", "allocationMode": "ExactCount", "count": 1, "adminAccess": true,
                "tolerations": [{"key": "example.com/unhealthy", "operator": "Exists", "effect": "NoSchedule"}],
                "capacity": {"requests": {"memory": "10Gi"}},
            }},
        ],
        "constraints": [{"requests": ["gpu/big"], "distinctAttribute": "gpu.mock.dracheck.io/uuid"}],
        "config": [{"requests": ["monitor"], "opaque": {"driver": MOCK, "parameters": {"mode": "watch"}}}],
    }});
    assert_eq!(json, expected, "{json:#}");
    assert_eq!(p.total_devices(), None, "`All` has no size of its own");
}

/// One mistake in the API-shaped claim: the file, the line, the field and the message.
#[rstest::rstest]
#[case::exactly_and_first_available(
    "        exactly:\n",
    "        firstAvailable: [{name: a}]\n        exactly:\n",
    "      - name: gpu",
    "claim.devices.requests[0]",
    "exactly one of `exactly`"
)]
#[case::another_class(
    "deviceClassName: test-class",
    "deviceClassName: other",
    "deviceClassName: other",
    "claim.devices.requests[0].exactly.deviceClassName",
    "the profile's class is \"test-class\""
)]
#[case::all_with_a_count(
    "          count: 1\n",
    "          count: 1\n          allocationMode: All\n",
    "          count: 1",
    "claim.devices.requests[0].exactly.count",
    "leave out `count`"
)]
#[case::unknown_mode(
    "          count: 1\n",
    "          allocationMode: Some\n",
    "          allocationMode: Some",
    "claim.devices.requests[0].exactly.allocationMode",
    "no allocation mode"
)]
#[case::unknown_field(
    "          count: 1\n",
    "          count: 1\n          colour: blue\n",
    "          colour: blue",
    "claim.devices.requests[0].exactly.colour",
    "unknown field `colour`"
)]
#[case::cel_that_does_not_compile(
    "{expression: \"true\"}",
    "{expression: \"device.attributes[\"}",
    "            - cel:",
    "claim.devices.requests[0].exactly.selectors[0].cel.expression",
    "does not compile"
)]
#[case::constraint_naming_no_request(
    "      - requests: [gpu]\n",
    "      - requests: [gpu, nic]\n",
    "      - requests: [gpu, nic]",
    "claim.devices.constraints[0].requests[1]",
    "names request \"nic\""
)]
#[case::both_attributes(
    "        matchAttribute: gpu.mock.dracheck.io/model\n",
    "        matchAttribute: gpu.mock.dracheck.io/model\n        distinctAttribute: gpu.mock.dracheck.io/uuid\n",
    "      - requests: [gpu]",
    "claim.devices.constraints[0]",
    "exactly one of `matchAttribute`"
)]
#[case::short_and_api_mixed(
    "    constraints:\n      - requests: [gpu]\n        matchAttribute: gpu.mock.dracheck.io/model\n",
    "  requests: []\n",
    "    requests:",
    "claim.devices",
    "exclude each other"
)]
fn an_api_shaped_claim_with_a_mistake_is_refused_at_its_line(
    #[case] from: &str,
    #[case] to: &str,
    #[case] at: &str,
    #[case] field: &str,
    #[case] message: &str,
) {
    let text = BASE.replace(SHORT_CLAIM, &API_CLAIM.replacen(from, to, 1));
    assert!(text.contains(to), "the case changes the claim: {from:?}");
    let e = load_text(&text).expect_err("refused");
    let line = line_of(&text, at);
    match &e {
        ProfileError::Invalid { line: l, field: f, message: m, .. } => {
            assert_eq!((*l, f.as_str()), (line, field), "{e}");
            assert!(m.contains(message), "{e}");
        }
        other => panic!("not an Invalid: {other}"),
    }
}

#[test]
fn cel_that_does_not_compile_is_refused_in_the_short_form_and_the_class_too() {
    let short = BASE.replace("selectors: [\"true\"]", "selectors: [\"device.driver ==\"]");
    let e = load_text(&short).unwrap_err().to_string();
    assert!(e.contains("field claim.requests[0].selectors[0]: the CEL expression does not compile"), "{e}");
    let class = BASE.replace("expression: device.driver == \"gpu.mock.dracheck.io\"", "expression: device.driver ==");
    let e = load_text(&class).unwrap_err().to_string();
    assert!(
        e.contains("field deviceClass.spec.selectors[0].cel.expression: the CEL expression does not compile"),
        "{e}"
    );
}

/// The format's example in profiles/README.md is a valid profile, and so is its short form.
#[test]
fn the_readme_examples_load() {
    let readme = std::fs::read_to_string(profile::profiles_dir().join("README.md")).unwrap();
    let blocks: Vec<&str> = readme.split("```yaml\n").skip(1).map(|b| b.split("```").next().unwrap()).collect();
    let full = load_text(blocks[0]).unwrap_or_else(|e| panic!("the format example: {e}"));
    let short_claim = blocks[1];
    let start = blocks[0].find("claim:").unwrap();
    let end = blocks[0].find("guarantees:").unwrap();
    let short = load_text(&format!("{}{short_claim}\n{}", &blocks[0][..start], &blocks[0][end..]))
        .unwrap_or_else(|e| panic!("the short form example: {e}"));
    assert_eq!(full.claim_spec(), short.claim_spec(), "the two examples say the same claim");
}

// ---------------------------------------------------------------------------------------------
// The format's JSON Schema (profiles/profile.schema.json)

/// The workspace's `profiles/` folder (the source tree's, not the embedded copy).
fn profiles_source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles")
}

/// Every shipped profile file, `profiles/<driver>/*.yaml`, sorted.
fn shipped_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(profiles_source())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|dir| dir.is_dir())
        .flat_map(|dir| std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 8, "the shipped profiles: {files:?}");
    files
}

fn schema_validator() -> jsonschema::Validator {
    jsonschema::validator_for(&profile::json_schema()).unwrap_or_else(|e| panic!("the schema compiles: {e}"))
}

/// The schema's complaints about a profile's text, one line each; empty when it conforms.
fn schema_errors(validator: &jsonschema::Validator, text: &str) -> Vec<String> {
    let instance: serde_json::Value = serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("YAML: {e}"));
    validator.iter_errors(&instance).map(|e| format!("{}: {e}", e.instance_path())).collect()
}

#[test]
fn the_shipped_schema_is_the_one_generated_from_the_profile_types() {
    let path = profiles_source().join("profile.schema.json");
    let shipped = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let generated = profile::json_schema_text();
    assert!(
        shipped == generated,
        "{} is not the schema the profile types generate; write it again with\n    cargo xtask profile schema --out \
         profiles/profile.schema.json",
        profile::SCHEMA_PATH
    );
    // It ships beside the embedded profiles too, where their modelines look for it.
    let embedded = std::fs::read_to_string(profile::profiles_dir().join("profile.schema.json")).unwrap();
    assert!(embedded == generated, "the embedded schema is the generated one");
    // The meta-schema it names accepts it.
    let schema = profile::json_schema();
    assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
    jsonschema::meta::validate(&schema).unwrap_or_else(|e| panic!("not a valid draft-07 schema: {e}"));
}

#[test]
fn every_shipped_profile_names_the_schema_in_its_first_line_and_conforms_to_it() {
    let validator = schema_validator();
    for path in shipped_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text.lines().next(),
            Some("# yaml-language-server: $schema=../profile.schema.json"),
            "{}: the first line is the modeline editors read",
            path.display()
        );
        profile::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let errors = schema_errors(&validator, &text);
        assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
    }
}

/// The schema takes the forms the tests' valid profiles use (short form, API shape with and
/// without a request's class, alternatives, admin access, opaque config, an existing class)
/// and the README's examples.
#[test]
fn the_schema_accepts_the_valid_profiles_of_the_tests_and_the_readme() {
    let validator = schema_validator();
    let api_claim = r#"claim:
  devices:
    requests:
      - name: gpu
        firstAvailable:
          - name: big
            count: 2
          - name: any
            allocationMode: All
      - name: monitor
        exactly:
          adminAccess: true
          capacity: {requests: {memory: 10Gi}}
    constraints:
      - requests: [gpu/big]
        distinctAttribute: gpu.mock.dracheck.io/uuid
    config:
      - requests: [monitor]
        opaque: {driver: gpu.mock.dracheck.io, parameters: {mode: watch}}
"#;
    let readme = std::fs::read_to_string(profiles_source().join("README.md")).unwrap();
    let example = readme.split("```yaml\n").nth(1).and_then(|b| b.split("```").next()).unwrap().to_string();
    let cases = [
        ("the base profile", BASE.to_string()),
        ("the API shape", BASE.replace(SHORT_CLAIM, API_CLAIM)),
        ("no class in a request", BASE.replace(SHORT_CLAIM, &API_CLAIM.replace("          deviceClassName: test-class\n", ""))),
        ("alternatives", BASE.replace(SHORT_CLAIM, api_claim).replace("  limits:\n    maxDevicesPerClaim: 2\n", "")),
        (
            "an existing class",
            BASE.replace(
                "  name: test-class\n  spec:\n    selectors:\n      - cel:\n          expression: device.driver == \"gpu.mock.dracheck.io\"\n",
                "  existing: gpu.mock.dracheck.io\n",
            ),
        ),
        ("short form with capacity and config", BASE.replace("      selectors: [\"true\"]\n", "      selectors: [\"true\"]\n      capacity: {memory: 8Gi, cores: 4}\n").replace("  constraints:\n", "  config: {mode: fast}\n  constraints:\n")),
        ("the README's example", example),
    ];
    for (what, text) in cases {
        load_text(&text).unwrap_or_else(|e| panic!("{what}: the parser refuses it: {e}"));
        let errors = schema_errors(&validator, &text);
        assert!(errors.is_empty(), "{what}: {errors:#?}");
    }
}

/// Mistakes both the parser and the schema refuse, so that an editor flags them as they are
/// typed.
#[test]
fn the_schema_refuses_what_the_parser_refuses() {
    let validator = schema_validator();
    let api = BASE.replace(SHORT_CLAIM, API_CLAIM);
    let cases = [
        ("an unknown top-level field", format!("{BASE}colour: red\n")),
        ("an unknown guarantee parameter", BASE.replace("withinSeconds: 30", "withinSecs: 30")),
        ("an unknown family", BASE.replace("  allocation:\n", "  allocaton:\n")),
        ("zero seconds", BASE.replace("withinSeconds: 30", "withinSeconds: 0")),
        ("seconds as text", BASE.replace("withinSeconds: 30", "withinSeconds: fast")),
        ("another apiVersion", BASE.replace("dracheck.io/v1alpha1", "dracheck.io/v1")),
        ("another kind", BASE.replace("kind: DeviceProfile", "kind: Profile")),
        ("a driver name in capitals", BASE.replace("driver: gpu.mock", "driver: GPU.mock")),
        ("a request name in capitals", BASE.replace("    - name: gpu\n", "    - name: Gpu\n")),
        ("a zero count", BASE.replace("      count: 1\n", "      count: 0\n")),
        ("a limit of zero", BASE.replace("maxDevicesPerClaim: 2", "maxDevicesPerClaim: 0")),
        ("an attribute without its domain", BASE.replace("matchAttribute: gpu.mock.dracheck.io/model", "matchAttribute: model")),
        ("not a quantity", BASE.replace("      selectors: [\"true\"]\n", "      selectors: [\"true\"]\n      capacity: {memory: 40GB}\n")),
        ("a version without an operator's syntax", BASE.replace("\">=1.34\"", "\"~1.34\"")),
        ("no guarantee", format!("{}guarantees: {{}}\n", BASE.split("guarantees:").next().unwrap())),
        ("a claim in both forms", BASE.replace("claim:\n", &API_CLAIM.replace("    constraints:\n      - requests: [gpu]\n        matchAttribute: gpu.mock.dracheck.io/model\n", ""))),
        ("an unknown field in the API's shape", api.replace("          count: 1\n", "          count: 1\n          colour: red\n")),
        ("a count as text in the API's shape", api.replace("          count: 1\n", "          count: one\n")),
        (
            "an inline and an existing class",
            BASE.replace("  name: test-class\n", "  name: test-class\n  existing: gpu.mock.dracheck.io\n"),
        ),
        ("an existing class with a name", BASE.replace("  spec:\n    selectors:\n      - cel:\n          expression: device.driver == \"gpu.mock.dracheck.io\"\n", "  existing: gpu.mock.dracheck.io\n")),
        ("no impossible variant", BASE.replace("guarantees:\n", "guarantees:\n  impossible:\n    variants: []\n")),
        ("a variant twice", BASE.replace("guarantees:\n", "guarantees:\n  impossible:\n    variants: [unknownClass, unknownClass]\n")),
        ("an unknown variant", BASE.replace("guarantees:\n", "guarantees:\n  impossible:\n    variants: [unknownColour]\n")),
        ("a downtime past the slice wipe delay", BASE.replace("guarantees:\n", "guarantees:\n  driverRestart:\n    maxDowntimeSeconds: 30\n")),
        ("a capacity name with a dash", BASE.replace("guarantees:\n", "guarantees:\n  consumableCapacity:\n    capacity: gpu-memory\n    share: 8Gi\n")),
    ];
    for (what, text) in cases {
        assert_ne!(text, BASE, "{what}: the case changes the base profile");
        assert!(load_text(&text).is_err(), "{what}: the parser takes it:\n{text}");
        assert!(!schema_errors(&validator, &text).is_empty(), "{what}: the schema takes it:\n{text}");
    }
}
