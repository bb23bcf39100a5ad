//! A container's environment and command line as kubelet makes them: literal values, the
//! downward API fields a DaemonSet's pods use to learn where they run, and `$(VAR)`
//! references in command and args.

use k8s_openapi::api::core::v1::{Container, Pod};

/// `container`'s environment in `pod` on the node `node` at `node_ip`, after `HOSTNAME`.
pub fn environment(
    pod: &Pod,
    container: &Container,
    node: &str,
    node_ip: &str,
) -> Result<Vec<(String, String)>, String> {
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let mut env = vec![("HOSTNAME".to_string(), pod_name.clone())];
    for e in container.env.iter().flatten() {
        let value = match (&e.value, &e.value_from) {
            (Some(v), _) => expand(v, &env),
            (None, None) => String::new(),
            (None, Some(from)) => {
                let path = from.field_ref.as_ref().map(|f| f.field_path.as_str()).ok_or_else(|| {
                    format!(
                        "Error: env {} of container {}: emulated nodes resolve only fieldRef (spec.nodeName, \
                         metadata.name, metadata.namespace, metadata.uid, status.hostIP, status.podIP)",
                        e.name, container.name
                    )
                })?;
                match path {
                    "spec.nodeName" => node.to_string(),
                    "metadata.name" => pod_name.clone(),
                    "metadata.namespace" => pod.metadata.namespace.clone().unwrap_or_default(),
                    "metadata.uid" => pod.metadata.uid.clone().unwrap_or_default(),
                    // Containers run on the host, so the pod has the node's address.
                    "status.hostIP" | "status.podIP" => node_ip.to_string(),
                    other => {
                        return Err(format!(
                            "Error: env {} of container {}: fieldRef {other} is not resolved on emulated nodes",
                            e.name, container.name
                        ));
                    }
                }
            }
        };
        env.push((e.name.clone(), value));
    }
    Ok(env)
}

/// `$(VAR)` replaced by VAR's value where `env` defines it, left as it is where not; `$$`
/// escapes a `$`, as kubelet expands command, args and env values.
pub fn expand(s: &str, env: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(')
            && let Some(end) = inner.find(')')
        {
            let name = &inner[..end];
            match env.iter().rev().find(|(k, _)| k == name) {
                Some((_, v)) => out.push_str(v),
                None => out.push_str(&rest[i..i + 2 + end + 1]),
            }
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector};

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn references_expand_as_kubelet_expands_them() {
        let env = vars(&[("NODE", "node-1"), ("DIR", "/x")]);
        assert_eq!(expand("--node=$(NODE)", &env), "--node=node-1");
        assert_eq!(expand("$(DIR)/$(NODE)/reg", &env), "/x/node-1/reg");
        assert_eq!(expand("$(MISSING) stays", &env), "$(MISSING) stays");
        assert_eq!(expand("$$(NODE) is escaped, $$ too", &env), "$(NODE) is escaped, $ too");
        assert_eq!(expand("a $ alone, $(unclosed", &env), "a $ alone, $(unclosed");
    }

    fn field(name: &str, path: &str) -> EnvVar {
        EnvVar {
            name: name.into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector { field_path: path.into(), ..Default::default() }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_downward_api_names_node_and_pod() {
        let mut pod = Pod::default();
        pod.metadata.name = Some("plugin-x".into());
        pod.metadata.namespace = Some("drivers".into());
        let container = Container {
            name: "plugin".into(),
            env: Some(vec![
                field("NODE_NAME", "spec.nodeName"),
                field("NS", "metadata.namespace"),
                field("IP", "status.hostIP"),
                EnvVar { name: "SOCKET".into(), value: Some("/reg/$(NODE_NAME).sock".into()), ..Default::default() },
            ]),
            ..Default::default()
        };
        let env = environment(&pod, &container, "node-2", "127.0.10.2").unwrap();
        assert_eq!(
            env,
            vars(&[
                ("HOSTNAME", "plugin-x"),
                ("NODE_NAME", "node-2"),
                ("NS", "drivers"),
                ("IP", "127.0.10.2"),
                ("SOCKET", "/reg/node-2.sock"),
            ])
        );
        let secret = Container {
            name: "plugin".into(),
            env: Some(vec![EnvVar {
                name: "TOKEN".into(),
                value_from: Some(EnvVarSource { secret_key_ref: Some(Default::default()), ..Default::default() }),
                ..Default::default()
            }]),
            ..Default::default()
        };
        assert!(environment(&pod, &secret, "node-2", "127.0.10.2").unwrap_err().contains("only fieldRef"));
    }
}
