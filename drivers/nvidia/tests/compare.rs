//! The NVML-vs-slices comparison on a synthetic recording (no GPU here), and `nvidia-smi -L`.

use dracheck_nvidia::compare::{Mismatch, compare, expected_devices, quantity_bytes};
use dracheck_nvidia::record::Recording;
use dracheck_nvidia::{nvml, smi};
use k8s_openapi::api::resource::v1::{Device, DeviceAttribute};

fn rec() -> Recording {
    let r = Recording::parse(include_str!("fixtures/synthetic-2xa100.json")).unwrap();
    assert!(!r.is_real(), "the fixture is labelled synthetic");
    r
}

fn published() -> Vec<Device> {
    let mut d = expected_devices(&rec());
    for dev in &mut d {
        dev.attributes.as_mut().unwrap().insert(
            "cudaComputeCapability".into(),
            DeviceAttribute { version: Some("8.0.0".into()), ..Default::default() },
        );
    }
    d
}

#[test]
fn matching_slices_agree() {
    assert_eq!(compare(&rec(), &published()), vec![]);
}

#[test]
fn a_missing_gpu_is_named() {
    let mut p = published();
    p.remove(1);
    assert_eq!(compare(&rec(), &p), vec![Mismatch::Missing { uuid: rec().gpus[1].uuid.clone(), minor: 1 }]);
}

#[test]
fn wrong_memory_wrong_uuid_and_mig_mode_are_caught() {
    let mut p = published();
    p[0].capacity.as_mut().unwrap().get_mut("memory").unwrap().value.0 = "20Gi".into();
    p[1].attributes.as_mut().unwrap().get_mut("uuid").unwrap().string = Some("GPU-deadbeef".into());
    let m = compare(&rec(), &p);
    assert!(
        m.contains(&Mismatch::Memory { device: "gpu-0".into(), published: Some(20 << 30), nvml: 42949672960 }),
        "{m:?}"
    );
    assert!(m.iter().any(|x| matches!(x, Mismatch::WrongUuid { device, .. } if device == "gpu-1")), "{m:?}");
    assert_eq!(m.len(), 2, "{m:?}");

    let mut r = rec();
    r.gpus[0].mig_enabled = Some(true);
    let m = compare(&r, &published());
    assert!(
        m.contains(&Mismatch::Mig { device: "gpu-0".into(), nvml_enabled: true, published_mig_devices: 0 }),
        "{m:?}"
    );
}

#[test]
fn quantities_and_smi_lines() {
    assert_eq!(quantity_bytes("40Gi"), Some(42949672960));
    assert_eq!(quantity_bytes("42949672960"), Some(42949672960));
    assert_eq!(quantity_bytes("1.5Gi"), Some(1610612736), "a whole number of bytes, written with a fraction");
    assert_eq!(quantity_bytes("1.5"), None);
    assert_eq!(quantity_bytes("-1Gi"), None);
    assert_eq!(quantity_bytes("40GB"), None);
    let out = "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-aaa)\n  MIG 1g.5gb     Device  0: (UUID: MIG-bbb)\nGPU 1: NVIDIA A100 (UUID: GPU-ccc)\n";
    assert_eq!(smi::uuids(out), ["GPU-aaa", "MIG-bbb", "GPU-ccc"]);
    assert!(smi::sees_exactly("GPU 0: X (UUID: GPU-aaa)\n", &["GPU-aaa".into()]).is_ok());
    assert!(smi::sees_exactly(out, &["GPU-aaa".into()]).is_err());
}

#[test]
fn nvml_reads_or_says_why_not() {
    match nvml::read("test") {
        Ok(r) => assert!(r.is_real() && !r.gpus.is_empty(), "{r:?}"),
        Err(e) => {
            assert!(e.0.starts_with(nvml::NO_NVML) || e.0.starts_with("NVML"), "{e}");
            println!("skipped: {e}");
        }
    }
}
