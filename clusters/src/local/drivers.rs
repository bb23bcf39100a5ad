//! Running a DRA driver's kubelet plugin on each emulated node, the way a DaemonSet would put
//! one pod per node: one process per node, with that node's registry, plugin and CDI dirs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::node::{DEFAULT_PATH, NodeConfig};
use super::process::{Lifetime, Supervised};
use crate::error::{Result, log_tail};

// What a driver is (its program and command line per node) is stated by its own crate through
// the adapter crate; the clusters only run it.
pub use dracheck_adapter::spec::{ArgsFn, DriverSpec, HELPER_FLAGS, NodeDirs, PLACEHOLDERS};

/// One driver process on one node.
pub struct DriverInstance {
    pub node: String,
    spec: DriverSpec,
    cfg: NodeConfig,
    kubeconfig: PathBuf,
    process: Option<Supervised>,
    lifetime: Lifetime,
    /// Set for a second instance of a driver on its node (a rolling update's new pod), which
    /// gets a log of its own.
    instance: Option<String>,
}

impl DriverInstance {
    pub fn start(spec: &DriverSpec, cfg: &NodeConfig, kubeconfig: &Path, lifetime: Lifetime) -> Result<DriverInstance> {
        Self::start_as(spec, cfg, kubeconfig, lifetime, None)
    }

    /// Starts `spec` as the instance `id` beside the driver's own instance on the node; `spec`
    /// is the one the driver's adapter made for that instance.
    pub fn start_instance(
        spec: &DriverSpec,
        cfg: &NodeConfig,
        kubeconfig: &Path,
        lifetime: Lifetime,
        id: &str,
    ) -> Result<DriverInstance> {
        Self::start_as(spec, cfg, kubeconfig, lifetime, Some(id.to_string()))
    }

    fn start_as(
        spec: &DriverSpec,
        cfg: &NodeConfig,
        kubeconfig: &Path,
        lifetime: Lifetime,
        instance: Option<String>,
    ) -> Result<DriverInstance> {
        let mut d = DriverInstance {
            node: cfg.name.clone(),
            spec: spec.clone(),
            cfg: cfg.clone(),
            kubeconfig: kubeconfig.to_path_buf(),
            process: None,
            lifetime,
            instance,
        };
        d.spawn(false)?;
        Ok(d)
    }

    fn spawn(&mut self, append: bool) -> Result<()> {
        let _ = std::fs::create_dir_all(self.spec.plugin_dir(&self.cfg.dirs()));
        let mut cmd = std::process::Command::new(&self.spec.program);
        // Only what a DaemonSet pod would get, not the caller's environment: a driver that
        // prefers `$KUBECONFIG` to `--kubeconfig` would otherwise talk to the user's own
        // cluster. Everything the driver needs comes on its command line.
        cmd.args((self.spec.args)(&self.cfg.dirs(), &self.kubeconfig)).env_clear().env("PATH", DEFAULT_PATH);
        let name = match &self.instance {
            Some(id) => format!("{}@{}/{id}", self.spec.name, self.cfg.name),
            None => format!("{}@{}", self.spec.name, self.cfg.name),
        };
        self.process = Some(Supervised::spawn_command(&name, cmd, &self.log_path(), append, self.lifetime)?);
        Ok(())
    }

    pub fn log_path(&self) -> PathBuf {
        match &self.instance {
            Some(id) => self.cfg.root.join(format!("driver-{}-{id}.log", self.spec.name)),
            None => self.cfg.root.join(format!("driver-{}.log", self.spec.name)),
        }
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
}
