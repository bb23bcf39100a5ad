//! Resolving CDI device IDs (`vendor/class=name`) against the spec files drivers write, as a
//! CDI-enabled container runtime does before it starts a container. Only the environment
//! edits are applied: emulated containers are host processes, without device nodes or mounts.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    cdi_version: String,
    kind: String,
    #[serde(default)]
    devices: Vec<SpecDevice>,
    #[serde(default)]
    container_edits: Option<Edits>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecDevice {
    name: String,
    #[serde(default)]
    container_edits: Option<Edits>,
}

#[derive(Debug, Default, Deserialize)]
struct Edits {
    #[serde(default)]
    env: Vec<String>,
}

/// Every device of every spec file in `dir`, by fully qualified ID, with the env edits a
/// container using it gets (spec-wide edits first, then the device's own).
pub fn load_registry(dir: &Path) -> Result<BTreeMap<String, Vec<String>>, String> {
    let mut out = BTreeMap::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(format!("reading CDI dir {}: {e}", dir.display())),
    };
    let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or_default();
        if !matches!(ext, "json" | "yaml" | "yml") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        // YAML is a superset of JSON, so one parser reads both kinds of spec file.
        let spec: Spec =
            serde_saphyr::from_str(&text).map_err(|e| format!("invalid CDI spec {}: {e}", path.display()))?;
        if spec.cdi_version.is_empty() || !spec.kind.contains('/') {
            return Err(format!(
                "invalid CDI spec {}: needs cdiVersion and a kind of the form vendor/class",
                path.display()
            ));
        }
        let common = spec.container_edits.map(|e| e.env).unwrap_or_default();
        for d in spec.devices {
            let mut env = common.clone();
            env.extend(d.container_edits.map(|e| e.env).unwrap_or_default());
            out.insert(format!("{}={}", spec.kind, d.name), env);
        }
    }
    Ok(out)
}

/// The env edits for `ids`, or the IDs no spec file defines.
pub fn resolve(dir: &Path, ids: &[String]) -> Result<Vec<(String, String)>, String> {
    let registry = load_registry(dir)?;
    let missing: Vec<&str> = ids.iter().filter(|id| !registry.contains_key(*id)).map(String::as_str).collect();
    if !missing.is_empty() {
        return Err(format!("unresolvable CDI devices {}", missing.join(", ")));
    }
    Ok(ids
        .iter()
        .flat_map(|id| registry[id].iter())
        .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_ids_to_env_and_names_the_missing_ones() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.json"),
            r#"{"cdiVersion":"0.6.0","kind":"mock.dracheck.io/gpu","containerEdits":{"env":["COMMON=1"]},
               "devices":[{"name":"u1-gpu-0","containerEdits":{"env":["DEV=gpu-0"]}}]}"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join("b.yaml"),
            "cdiVersion: 0.6.0\nkind: gpu.example.com/gpu\ndevices:\n- name: gpu-1\n  containerEdits:\n    env: [EX=1]\n",
        )
        .unwrap();
        let env =
            resolve(dir.path(), &["mock.dracheck.io/gpu=u1-gpu-0".into(), "gpu.example.com/gpu=gpu-1".into()]).unwrap();
        assert_eq!(env, vec![("COMMON".into(), "1".into()), ("DEV".into(), "gpu-0".into()), ("EX".into(), "1".into())]);
        let err = resolve(dir.path(), &["mock.dracheck.io/gpu=nope".into()]).unwrap_err();
        assert!(err.contains("unresolvable CDI devices mock.dracheck.io/gpu=nope"), "{err}");
    }

    #[test]
    fn an_invalid_spec_is_reported_with_its_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bad.json"), r#"{"kind":"nokind"}"#).unwrap();
        let err = load_registry(dir.path()).unwrap_err();
        assert!(err.contains("bad.json"), "{err}");
    }
}
