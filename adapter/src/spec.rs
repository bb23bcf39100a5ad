//! How a driver's kubelet plugin starts on a node: its program and the command line it gets
//! for the node's name, dirs and the cluster's kubeconfig (each driver has its own flags).

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A node's kubelet dirs as a driver on it sees them: real kubelet paths, rooted in the node's
/// own folder so that several nodes and clusters never share a socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDirs {
    pub name: String,
    pub root: PathBuf,
}

impl NodeDirs {
    /// `plugins_registry`: where drivers put their registration sockets.
    pub fn registry_dir(&self) -> PathBuf {
        self.root.join("plugins_registry")
    }
    /// `plugins`: the parent of each driver's own socket dir.
    pub fn plugins_dir(&self) -> PathBuf {
        self.root.join("plugins")
    }
    pub fn cdi_dir(&self) -> PathBuf {
        self.root.join("cdi")
    }
}

/// Maps a node's dirs and the cluster's kubeconfig to the driver's command line.
pub type ArgsFn = Arc<dyn Fn(&NodeDirs, &Path) -> Vec<String> + Send + Sync>;

#[derive(Clone)]
pub struct DriverSpec {
    /// The DRA driver name, e.g. `gpu.mock.dracheck.io`.
    pub name: String,
    pub program: PathBuf,
    pub args: ArgsFn,
}

impl std::fmt::Debug for DriverSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriverSpec").field("name", &self.name).field("program", &self.program).finish()
    }
}

/// The placeholders of a [`DriverSpec::from_template`] command line, and what each becomes on
/// a node.
pub const PLACEHOLDERS: &[&str] =
    &["{node}", "{kubeconfig}", "{registrar-dir}", "{plugins-dir}", "{plugin-dir}", "{cdi-dir}"];

/// The flags of the upstream kubeletplugin helper's drivers (dra-example-driver and drivers
/// written like it) for the node's name, the API, the registration and plugin dirs and CDI.
pub const HELPER_FLAGS: &[&str] = &[
    "--node-name={node}",
    "--kubeconfig={kubeconfig}",
    "--kubelet-registrar-directory-path={registrar-dir}",
    "--kubelet-plugins-directory-path={plugins-dir}",
    "--cdi-root={cdi-dir}",
];

/// A driver argument with a placeholder that is none of [`PLACEHOLDERS`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the driver argument {arg:?} has the unknown placeholder {placeholder:?}; known are {}", PLACEHOLDERS.join(", "))]
pub struct UnknownPlaceholder {
    pub arg: String,
    pub placeholder: String,
}

impl DriverSpec {
    /// A driver whose command line is `template` with the [`PLACEHOLDERS`] filled in per node.
    pub fn from_template(name: &str, program: &Path, template: &[String]) -> Result<DriverSpec, UnknownPlaceholder> {
        for arg in template {
            let mut rest = arg.as_str();
            while let Some(start) = rest.find('{') {
                let end = rest[start..].find('}').map_or(rest.len(), |e| start + e + 1);
                let placeholder = &rest[start..end];
                if !PLACEHOLDERS.contains(&placeholder) {
                    return Err(UnknownPlaceholder { arg: arg.clone(), placeholder: placeholder.into() });
                }
                rest = &rest[end..];
            }
        }
        let (driver, template) = (name.to_string(), template.to_vec());
        Ok(DriverSpec {
            name: name.to_string(),
            program: program.to_path_buf(),
            args: Arc::new(move |node, kubeconfig| {
                let fill = |arg: &String| {
                    arg.replace("{node}", &node.name)
                        .replace("{kubeconfig}", &kubeconfig.display().to_string())
                        .replace("{registrar-dir}", &node.registry_dir().display().to_string())
                        .replace("{plugins-dir}", &node.plugins_dir().display().to_string())
                        .replace("{plugin-dir}", &node.plugins_dir().join(&driver).display().to_string())
                        .replace("{cdi-dir}", &node.cdi_dir().display().to_string())
                };
                template.iter().map(fill).collect()
            }),
        })
    }

    /// The same driver with `extra` after its arguments.
    pub fn with_args(&self, extra: Vec<String>) -> DriverSpec {
        let args = self.args.clone();
        DriverSpec {
            name: self.name.clone(),
            program: self.program.clone(),
            args: Arc::new(move |node, kubeconfig| {
                let mut all = args(node, kubeconfig);
                all.extend(extra.iter().cloned());
                all
            }),
        }
    }

    /// The dir the driver keeps its service socket in on `node`.
    pub fn plugin_dir(&self, node: &NodeDirs) -> PathBuf {
        node.plugins_dir().join(&self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_is_filled_per_node() {
        let template: Vec<String> =
            HELPER_FLAGS.iter().map(|f| f.to_string()).chain(["--plugin={plugin-dir}/x".to_string()]).collect();
        let spec = DriverSpec::from_template("gpu.example.com", Path::new("/bin/p"), &template).unwrap();
        let node = NodeDirs { name: "node-2".into(), root: "/c/nodes/node-2".into() };
        let args = (spec.args)(&node, Path::new("/c/admin.kubeconfig"));
        assert_eq!(
            args,
            [
                "--node-name=node-2",
                "--kubeconfig=/c/admin.kubeconfig",
                "--kubelet-registrar-directory-path=/c/nodes/node-2/plugins_registry",
                "--kubelet-plugins-directory-path=/c/nodes/node-2/plugins",
                "--cdi-root=/c/nodes/node-2/cdi",
                "--plugin=/c/nodes/node-2/plugins/gpu.example.com/x",
            ]
        );
    }

    #[test]
    fn an_unknown_placeholder_is_named() {
        let err = DriverSpec::from_template("d", Path::new("/bin/p"), &["--dir={state-dir}".into()]).unwrap_err();
        assert_eq!(err.placeholder, "{state-dir}");
        assert!(err.to_string().contains("{cdi-dir}"), "{err}");
    }
}
