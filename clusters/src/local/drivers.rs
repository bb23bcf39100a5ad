//! Running a DRA driver's kubelet plugin on each emulated node, the way a DaemonSet would put
//! one pod per node: one process per node, with that node's registry, plugin and CDI dirs.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::node::{DEFAULT_PATH, NodeConfig};
use super::process::{Lifetime, Supervised};
use crate::error::{Result, log_tail};

/// Maps a node's directories and the cluster's kubeconfig to the driver's command line; each
/// driver has its own flag names for them.
pub type ArgsFn = Arc<dyn Fn(&NodeConfig, &Path) -> Vec<String> + Send + Sync>;

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

impl DriverSpec {
    /// A driver whose command line is `template` with the [`PLACEHOLDERS`] filled in per node;
    /// an unknown `{…}` placeholder is an error that lists the known ones.
    pub fn from_template(name: &str, program: &Path, template: &[String]) -> std::result::Result<DriverSpec, String> {
        for arg in template {
            let mut rest = arg.as_str();
            while let Some(start) = rest.find('{') {
                let end = rest[start..].find('}').map_or(rest.len(), |e| start + e + 1);
                let placeholder = &rest[start..end];
                if !PLACEHOLDERS.contains(&placeholder) {
                    return Err(format!(
                        "the driver argument {arg:?} has the unknown placeholder {placeholder:?}; known are {}",
                        PLACEHOLDERS.join(", ")
                    ));
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

    /// The dir the driver keeps its service socket in on `node`.
    pub fn plugin_dir(&self, node: &NodeConfig) -> PathBuf {
        node.plugins_dir().join(&self.name)
    }
}

/// One driver process on one node.
pub struct DriverInstance {
    pub node: String,
    spec: DriverSpec,
    cfg: NodeConfig,
    kubeconfig: PathBuf,
    process: Option<Supervised>,
    lifetime: Lifetime,
}

impl DriverInstance {
    pub fn start(spec: &DriverSpec, cfg: &NodeConfig, kubeconfig: &Path, lifetime: Lifetime) -> Result<DriverInstance> {
        let mut d = DriverInstance {
            node: cfg.name.clone(),
            spec: spec.clone(),
            cfg: cfg.clone(),
            kubeconfig: kubeconfig.to_path_buf(),
            process: None,
            lifetime,
        };
        d.spawn(false)?;
        Ok(d)
    }

    fn spawn(&mut self, append: bool) -> Result<()> {
        let _ = std::fs::create_dir_all(self.spec.plugin_dir(&self.cfg));
        let mut cmd = std::process::Command::new(&self.spec.program);
        // Only what a DaemonSet pod would get, not the caller's environment: a driver that
        // prefers `$KUBECONFIG` to `--kubeconfig` would otherwise talk to the user's own
        // cluster. Everything the driver needs comes on its command line.
        cmd.args((self.spec.args)(&self.cfg, &self.kubeconfig)).env_clear().env("PATH", DEFAULT_PATH);
        let name = format!("{}@{}", self.spec.name, self.cfg.name);
        self.process = Some(Supervised::spawn_command(&name, cmd, &self.log_path(), append, self.lifetime)?);
        Ok(())
    }

    pub fn log_path(&self) -> PathBuf {
        self.cfg.root.join(format!("driver-{}.log", self.spec.name))
    }

    /// The last lines of the driver's log, for evidence and error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log_path(), lines)
    }

    /// SIGTERM (SIGKILL after `grace`); the driver's own shutdown path runs.
    pub fn stop(&mut self, grace: Duration) {
        if let Some(mut p) = self.process.take() {
            p.stop(grace);
        }
    }

    /// A crash: SIGKILL, no shutdown path, stale sockets left behind.
    pub fn kill(&mut self) {
        self.stop(Duration::ZERO);
    }

    /// Stops (gracefully) and starts the driver again on the same node with the same dirs.
    pub fn restart(&mut self, grace: Duration) -> Result<()> {
        self.stop(grace);
        self.spawn(true)
    }

    /// Starts it again after `stop` or `kill`.
    pub fn start_again(&mut self) -> Result<()> {
        if self.process.is_none() {
            self.spawn(true)?;
        }
        Ok(())
    }

    /// `Some(status)` if the process has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.process.as_mut().and_then(|p| p.exited())
    }

    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(|p| p.record().pid)
    }

    /// Gives the process up to a supervisor that outlives this handle (`cluster up`).
    pub fn release(mut self) -> Option<super::process::ProcessRecord> {
        self.process.take().map(Supervised::release)
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
        let node = NodeConfig::numbered(Path::new("/c"), 1);
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
    fn a_driver_gets_a_pods_environment_not_the_callers() {
        let dir = tempfile::tempdir().unwrap();
        // `env` with no arguments prints its environment, into the driver's log.
        let spec = DriverSpec::from_template("env.dracheck.io", Path::new("/usr/bin/env"), &[]).unwrap();
        let node = NodeConfig::numbered(dir.path(), 0);
        let kubeconfig = dir.path().join("admin.kubeconfig");
        let mut driver = DriverInstance::start(&spec, &node, &kubeconfig, Lifetime::Attached).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while driver.exited().is_none() {
            assert!(std::time::Instant::now() < deadline, "`env` did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
        // The test's own environment (cargo's variables, HOME, a KUBECONFIG if set) is the
        // caller's; none of it may reach the driver.
        let env = std::fs::read_to_string(driver.log_path()).unwrap();
        assert_eq!(env.lines().collect::<Vec<_>>(), [format!("PATH={DEFAULT_PATH}")]);
    }

    #[test]
    fn an_unknown_placeholder_is_named() {
        let err = DriverSpec::from_template("d", Path::new("/bin/p"), &["--dir={state-dir}".into()]).unwrap_err();
        assert!(err.contains("{state-dir}") && err.contains("{cdi-dir}"), "{err}");
    }
}
