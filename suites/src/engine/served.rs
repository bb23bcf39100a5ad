//! Whether the API server serves a field of a `resource.k8s.io` object. A field behind a
//! feature gate that is off is not refused: the API server drops it from what it stores
//! (upstream's `dropDisabledFields`) and the object means something else. So a scenario that
//! needs such a field first creates its object with `dryRun=All` and reads back whether the
//! field survived; where it did not, the scenario is skipped with the gate's name, never judged
//! on an object that lost its point.

use k8s_openapi::api::resource::v1::{
    Counter, CounterSet, Device, DeviceClass, DeviceClassSpec, DeviceTaint, ResourceClaim, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, PostParams};

use super::{ApiContext, ScenarioError};

/// A field of a ResourceClaim that a feature gate turns on.
pub struct ClaimField {
    /// Its path, as the API's documentation writes it.
    pub path: &'static str,
    /// The feature gate that serves it.
    pub gate: &'static str,
    /// Whether `claim` (as the API server would store it) still has the field set.
    pub kept: fn(&ResourceClaim) -> bool,
    /// Whether a request is invalid without the field (a `firstAvailable` request has no
    /// `exactly`): there a dropped field shows as the claim refused as invalid (422).
    pub needed_by_request: bool,
}

pub const FIRST_AVAILABLE: ClaimField = ClaimField {
    path: "spec.devices.requests[].firstAvailable",
    gate: "DRAPrioritizedList",
    kept: |c| first_request(c).is_some_and(|r| r.first_available.as_ref().is_some_and(|a| !a.is_empty())),
    needed_by_request: true,
};

pub const ADMIN_ACCESS: ClaimField = ClaimField {
    path: "spec.devices.requests[].exactly.adminAccess",
    gate: "DRAAdminAccess",
    kept: |c| first_request(c).and_then(|r| r.exactly.as_ref()).and_then(|e| e.admin_access) == Some(true),
    needed_by_request: false,
};

fn first_request(c: &ResourceClaim) -> Option<&k8s_openapi::api::resource::v1::DeviceRequest> {
    c.spec.as_ref()?.devices.as_ref()?.requests.as_ref()?.first()
}

/// `None` where the API server keeps `field` of `claim` (created with `dryRun=All` in its
/// namespace: nothing is stored); otherwise the reason to skip, naming the gate.
pub async fn dropped(
    client: &kube::Client,
    claim: &ResourceClaim,
    field: &ClaimField,
) -> Result<Option<String>, ScenarioError> {
    let ns = claim.metadata.namespace.clone().unwrap_or_default();
    let name = claim.metadata.name.clone().unwrap_or_default();
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), &ns);
    let stored = match as_stored(&api, claim).await {
        Err(kube::Error::Api(e)) if e.code == 422 && field.needed_by_request => {
            return Ok(Some(format!(
                "the API server refuses a ResourceClaim whose request has only {} as invalid (422): it drops the \
                 field, feature gate {} is off",
                field.path, field.gate
            )));
        }
        created => created.doing(|| {
            format!("creating ResourceClaim {ns}/{name} with dryRun=All, to see whether {} is served", field.path)
        })?,
    };
    Ok((!(field.kept)(&stored)).then(|| dropped_from("ResourceClaim", field.path, field.gate)))
}

/// `obj` as the API server would store it: created with `dryRun=All`, so nothing is stored.
async fn as_stored<K>(api: &Api<K>, obj: &K) -> kube::Result<K>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.create(&PostParams { dry_run: true, ..PostParams::default() }, obj).await
}

/// Why a scenario that needs `path` of a `kind` is skipped where a dry run lost it.
fn dropped_from(kind: &str, path: &str, gate: &str) -> String {
    format!(
        "the API server drops {path} from a {kind} (a dry-run create came back without it): feature gate {gate} is off"
    )
}

/// Which of the gated fields the scenarios use the API server serves, by gate, for the run's
/// result (dry runs in namespace `default`; nothing is stored). A gate whose probe could not
/// be made (the API refused it for another reason, or did not answer) is left out.
pub async fn probe(client: &kube::Client) -> std::collections::BTreeMap<String, bool> {
    use dracheck_objects::ClaimBuilder;
    let mut out = std::collections::BTreeMap::new();
    let base = ClaimBuilder::exact("dracheck-probe", 1);
    let alternatives = base.clone().first_available(&[("a", &[])]).claim("default", "dracheck-probe");
    if let Ok(dropped) = dropped(client, &alternatives, &FIRST_AVAILABLE).await {
        out.insert(FIRST_AVAILABLE.gate.to_string(), dropped.is_none());
    }
    // In a namespace without the admin-access label, a served field is refused (422) and a
    // dropped one is not.
    let admin = base.admin_access().claim("default", "dracheck-probe");
    match dropped(client, &admin, &ADMIN_ACCESS).await {
        Ok(dropped) => {
            out.insert(ADMIN_ACCESS.gate.to_string(), dropped.is_none());
        }
        Err(ScenarioError::Api(e)) if matches!(&e.source, kube::Error::Api(s) if s.code == 422) => {
            out.insert(ADMIN_ACCESS.gate.to_string(), true);
        }
        Err(_) => {}
    }
    for field in SLICE_FIELDS {
        if let Ok(dropped) = slice_dropped(client, "probe.dracheck.io", field).await {
            out.insert(field.gate.to_string(), dropped.is_none());
        }
    }
    if let Ok(dropped) = class_extended_resource_dropped(client).await {
        out.insert(EXTENDED_RESOURCE_GATE.to_string(), dropped.is_none());
    }
    out
}

/// A field of a ResourceSlice that a feature gate turns on.
pub struct SliceField {
    pub path: &'static str,
    pub gate: &'static str,
    /// Sets the field on the probe's slice, which has one device.
    pub set: fn(&mut ResourceSlice),
    /// Whether the slice (as the API server would store it) still has the field set.
    pub kept: fn(&ResourceSlice) -> bool,
}

fn devices(s: &ResourceSlice) -> impl Iterator<Item = &Device> {
    s.spec.devices.iter().flatten()
}

fn first_device(s: &mut ResourceSlice) -> &mut Device {
    &mut s.spec.devices.get_or_insert_default()[0]
}

pub const DEVICE_TAINTS: SliceField = SliceField {
    path: "spec.devices[].taints",
    gate: "DRADeviceTaints",
    set: |s| {
        first_device(s).taints = Some(vec![DeviceTaint {
            key: "dracheck.io/probe".into(),
            effect: "NoSchedule".into(),
            ..DeviceTaint::default()
        }])
    },
    kept: |s| devices(s).any(|d| d.taints.as_ref().is_some_and(|t| !t.is_empty())),
};

/// Counter sets live in a slice of their own (the API refuses them beside devices).
pub const SHARED_COUNTERS: SliceField = SliceField {
    path: "spec.sharedCounters",
    gate: "DRAPartitionableDevices",
    set: |s| {
        s.spec.devices = None;
        s.spec.shared_counters = Some(vec![CounterSet {
            name: "probe".into(),
            counters: [("memory".to_string(), Counter { value: Quantity("1Gi".into()) })].into(),
        }]);
    },
    kept: |s| s.spec.shared_counters.as_ref().is_some_and(|c| !c.is_empty()),
};

pub const MULTIPLE_ALLOCATIONS: SliceField = SliceField {
    path: "spec.devices[].allowMultipleAllocations",
    gate: "DRAConsumableCapacity",
    set: |s| first_device(s).allow_multiple_allocations = Some(true),
    kept: |s| devices(s).any(|d| d.allow_multiple_allocations == Some(true)),
};

pub const BINDING_CONDITIONS: SliceField = SliceField {
    path: "spec.devices[].bindingConditions",
    gate: "DRADeviceBindingConditions",
    set: |s| {
        let d = first_device(s);
        d.binding_conditions = Some(vec!["dracheck.io/ready".into()]);
        d.binding_failure_conditions = Some(vec!["dracheck.io/failed".into()]);
    },
    kept: |s| devices(s).any(|d| d.binding_conditions.as_ref().is_some_and(|c| !c.is_empty())),
};

/// The slice fields the run's result reports, by gate.
pub const SLICE_FIELDS: &[SliceField] = &[DEVICE_TAINTS, SHARED_COUNTERS, MULTIPLE_ALLOCATIONS, BINDING_CONDITIONS];

/// `None` where the API server keeps `field` of a ResourceSlice of `driver` (a dry-run
/// create for a node that does not exist: nothing is stored); otherwise the reason to skip,
/// naming the gate.
pub async fn slice_dropped(
    client: &kube::Client,
    driver: &str,
    field: &SliceField,
) -> Result<Option<String>, ScenarioError> {
    let mut slice = dracheck_objects::resource_slice(
        driver,
        "dracheck-probe",
        "00000000-0000-0000-0000-000000000000",
        vec![dracheck_objects::device("probe").build()],
    );
    (field.set)(&mut slice);
    let api: Api<ResourceSlice> = Api::all(client.clone());
    let stored = as_stored(&api, &slice).await.doing(|| {
        format!("creating a ResourceSlice with {} with dryRun=All, to see whether it is served", field.path)
    })?;
    Ok((!(field.kept)(&stored)).then(|| dropped_from("ResourceSlice", field.path, field.gate)))
}

/// The feature gate that serves a DeviceClass's `extendedResourceName`.
const EXTENDED_RESOURCE_GATE: &str = "DRAExtendedResource";

/// `None` where the API server keeps a DeviceClass's `spec.extendedResourceName` (a dry-run
/// create); otherwise the reason to skip, naming the gate.
pub async fn class_extended_resource_dropped(client: &kube::Client) -> Result<Option<String>, ScenarioError> {
    let class = DeviceClass {
        metadata: dracheck_objects::meta_for("dracheck-probe", None),
        spec: Some(DeviceClassSpec {
            extended_resource_name: Some("probe.dracheck.io/device".into()),
            ..DeviceClassSpec::default()
        }),
    };
    let api: Api<DeviceClass> = Api::all(client.clone());
    let stored = as_stored(&api, &class).await.doing(|| {
        "creating a DeviceClass with spec.extendedResourceName with dryRun=All, to see whether it is served".into()
    })?;
    let kept = stored.spec.and_then(|s| s.extended_resource_name).is_some();
    Ok((!kept).then(|| dropped_from("DeviceClass", "spec.extendedResourceName", EXTENDED_RESOURCE_GATE)))
}

/// The feature gate that serves DeviceTaintRules (GA and on in 1.37, beta and off in 1.36).
const TAINT_RULES_GATE: &str = "DRADeviceTaintRules";

/// `None` where the API server serves `resource.k8s.io/v1` DeviceTaintRules (a dry-run create
/// of `rule`); otherwise the reason to skip, naming the gate. A kind that is not served is
/// refused with 404, not dropped.
pub async fn taint_rules_unserved(
    client: &kube::Client,
    rule: &k8s_openapi::api::resource::v1::DeviceTaintRule,
) -> Result<Option<String>, ScenarioError> {
    let api: Api<k8s_openapi::api::resource::v1::DeviceTaintRule> = Api::all(client.clone());
    match as_stored(&api, rule).await {
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Some(format!(
            "the API server does not serve resource.k8s.io/v1 DeviceTaintRules (404): feature gate {TAINT_RULES_GATE} is off"
        ))),
        stored => {
            stored.doing(|| {
                "creating a DeviceTaintRule with dryRun=All, to see whether DeviceTaintRules are served".to_string()
            })?;
            Ok(None)
        }
    }
}

/// The DRA feature gates the API server reports through its `kubernetes_feature_enabled`
/// metric, by name; empty where `/metrics` cannot be read (no permission on a cluster the
/// suite did not start): the probes above then say what is served.
pub async fn gates_enabled(client: &kube::Client) -> std::collections::BTreeMap<String, bool> {
    let Ok(request) = http::Request::get("/metrics").body(Vec::new()) else { return Default::default() };
    match client.request_text(request).await {
        Ok(text) => dra_gates(&text),
        Err(_) => Default::default(),
    }
}

/// The DRA gates of a metrics page: `kubernetes_feature_enabled{name="DRAAdminAccess",stage=""} 1`.
fn dra_gates(metrics: &str) -> std::collections::BTreeMap<String, bool> {
    metrics
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("kubernetes_feature_enabled{")?;
            let (labels, value) = rest.split_once('}')?;
            let name = labels.split(',').find_map(|l| l.trim().strip_prefix("name=\""))?.trim_end_matches('"');
            let dra = name.starts_with("DRA") || name == "DynamicResourceAllocation";
            dra.then(|| (name.to_string(), value.trim() == "1"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_dra_gates_are_read_from_the_metric() {
        let page = "# HELP kubernetes_feature_enabled ...\n\
                    kubernetes_feature_enabled{name=\"DRAConsumableCapacity\",stage=\"BETA\"} 1\n\
                    kubernetes_feature_enabled{name=\"DRADeviceTaintRules\",stage=\"BETA\"} 0\n\
                    kubernetes_feature_enabled{name=\"DynamicResourceAllocation\",stage=\"\"} 1\n\
                    kubernetes_feature_enabled{name=\"InPlacePodVerticalScaling\",stage=\"\"} 1\n\
                    apiserver_request_total{code=\"200\"} 7\n";
        let gates = super::dra_gates(page);
        assert_eq!(
            gates,
            [
                ("DRAConsumableCapacity".to_string(), true),
                ("DRADeviceTaintRules".to_string(), false),
                ("DynamicResourceAllocation".to_string(), true),
            ]
            .into()
        );
    }
}
