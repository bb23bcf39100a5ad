//! Command line of the mock kubelet plugin.

use std::path::PathBuf;

use clap::Parser;

use crate::faults::Fault;

pub const DEFAULT_DRIVER: &str = "gpu.mock.dracheck.io";

/// A mock DRA driver: a real kubelet plugin (registration and DRAPlugin gRPC over Unix
/// sockets) that publishes ResourceSlices from an inventory file, writes CDI specs and keeps
/// a checkpoint. Fault switches make it break one guarantee of the driver contract at a time.
#[derive(Debug, Clone, Parser)]
// `--version` is answered by `Args::version_line`, after the faults are parsed.
#[command(name = "dracheck-mock-driver", disable_version_flag = true)]
pub struct Args {
    /// Print the version and exit.
    #[arg(short = 'V', long = "version")]
    pub print_version: bool,

    /// The DRA driver name: the `driver` of its slices and allocation results.
    #[arg(long, default_value = DEFAULT_DRIVER)]
    pub driver_name: String,

    /// The Node this plugin runs on; its pool and slices are named after it.
    #[arg(long, required_unless_present = "print_version", default_value = "", hide_default_value = true)]
    pub node_name: String,

    /// Kubeconfig to reach the apiserver. Without it: $KUBECONFIG, ~/.kube/config, then the
    /// in-cluster service account.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// Inventory YAML (kind MockInventory) with the devices to publish; re-read when it
    /// changes.
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "print_version",
        default_value = "",
        hide_default_value = true,
        value_parser = any_path
    )]
    pub inventory: PathBuf,

    /// Kubelet's plugin registry directory; the registration socket is
    /// `<driver>-reg.sock` in it.
    #[arg(long, value_name = "DIR", default_value = "/var/lib/kubelet/plugins_registry")]
    pub registrar_dir: PathBuf,

    /// Directory of the DRA service socket `dra.sock` [default: /var/lib/kubelet/plugins/<driver>].
    #[arg(long, value_name = "DIR")]
    pub plugin_dir: Option<PathBuf>,

    /// Directory the container runtime reads CDI specs from.
    #[arg(long, value_name = "DIR", default_value = "/var/run/cdi")]
    pub cdi_dir: PathBuf,

    /// Directory of the checkpoint of prepared claims [default: the plugin dir].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Prefix of the environment variables the CDI specs set (`<PREFIX>_DEVICE_<n>`,
    /// `<PREFIX>_CLAIM_UID`, …). A second mock on the same node, under another --driver-name,
    /// needs a prefix of its own; its CDI kind follows its driver name.
    #[arg(long, value_name = "PREFIX", default_value = crate::cdi::DEFAULT_ENV_PREFIX, value_parser = env_prefix)]
    pub env_prefix: String,

    /// This instance's ID beside other instances of the driver on the node, as a DaemonSet's
    /// rolling update runs an old and a new pod side by side (the upstream helper takes the
    /// pod UID): the sockets become `<driver>-<ID>-reg.sock` and `dra-<ID>.sock`, and the
    /// kubelet uses the newest. Instances share the state dir: each call reads the checkpoint
    /// anew under a file lock.
    #[arg(long, value_name = "ID", value_parser = instance_id)]
    pub instance: Option<String>,

    /// Delete this node's slices on a clean shutdown (SIGTERM, SIGINT). By default they are
    /// kept, so that a quick restart does not make the devices disappear.
    #[arg(long)]
    pub remove_slices_on_exit: bool,

    /// Switch on a fault (repeatable; --help lists them). See README.md.
    #[arg(long = "fault", value_name = "NAME[=ARG]", long_help = crate::faults::help())]
    pub faults: Vec<Fault>,
}

/// A prefix that makes valid variable names: an ASCII letter or `_` first, then letters,
/// digits and `_`.
fn env_prefix(s: &str) -> Result<String, String> {
    let mut chars = s.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(s.to_string())
    } else {
        Err(format!("{s:?} is not a variable name prefix: use letters, digits and _, not starting with a digit"))
    }
}

/// A part of socket and device names: lower-case letters, digits and `-`, up to 36 characters
/// (a pod UID), so that the registration socket's path stays within the Unix socket limit.
fn instance_id(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 36
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!("{s:?} is no instance ID: use up to 36 lower-case letters, digits and -, such as a pod UID"))
    }
}

/// Unlike clap's own path parser, takes the empty default that only `--version` leaves.
fn any_path(s: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(s))
}

impl Args {
    /// What `--version` prints: `dracheck-mock-driver <version>`, the version as a
    /// `wrong-version` fault states it.
    pub fn version_line(&self) -> String {
        let faulty = self.faults.iter().rev().find_map(|f| match f {
            Fault::WrongVersion(v) => Some(v.as_str()),
            _ => None,
        });
        format!("dracheck-mock-driver {}", faulty.unwrap_or(env!("CARGO_PKG_VERSION")))
    }

    pub fn plugin_dir(&self) -> PathBuf {
        self.plugin_dir.clone().unwrap_or_else(|| PathBuf::from("/var/lib/kubelet/plugins").join(&self.driver_name))
    }

    pub fn state_dir(&self) -> PathBuf {
        self.state_dir.clone().unwrap_or_else(|| self.plugin_dir())
    }

    pub fn registration_socket(&self) -> PathBuf {
        match &self.instance {
            Some(id) => self.registrar_dir.join(format!("{}-{id}-reg.sock", self.driver_name)),
            None => self.registrar_dir.join(format!("{}-reg.sock", self.driver_name)),
        }
    }

    pub fn dra_socket(&self) -> PathBuf {
        match &self.instance {
            Some(id) => self.plugin_dir().join(format!("dra-{id}.sock")),
            None => self.plugin_dir().join("dra.sock"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_kubelet_layout() {
        let args = Args::try_parse_from(["x", "--node-name", "n1", "--inventory", "i.yaml"]).unwrap();
        assert_eq!(args.driver_name, DEFAULT_DRIVER);
        assert_eq!(
            args.registration_socket(),
            PathBuf::from("/var/lib/kubelet/plugins_registry/gpu.mock.dracheck.io-reg.sock")
        );
        assert_eq!(args.dra_socket(), PathBuf::from("/var/lib/kubelet/plugins/gpu.mock.dracheck.io/dra.sock"));
        assert_eq!(args.state_dir(), PathBuf::from("/var/lib/kubelet/plugins/gpu.mock.dracheck.io"));
        assert_eq!(args.cdi_dir, PathBuf::from("/var/run/cdi"));
        assert!(!args.remove_slices_on_exit);
    }

    #[test]
    fn an_instance_has_sockets_of_its_own() {
        let args =
            Args::try_parse_from(["x", "--node-name", "n1", "--inventory", "i.yaml", "--instance", "new-1"]).unwrap();
        assert_eq!(
            args.registration_socket(),
            PathBuf::from("/var/lib/kubelet/plugins_registry/gpu.mock.dracheck.io-new-1-reg.sock")
        );
        assert_eq!(args.dra_socket(), PathBuf::from("/var/lib/kubelet/plugins/gpu.mock.dracheck.io/dra-new-1.sock"));
        assert_eq!(args.state_dir(), PathBuf::from("/var/lib/kubelet/plugins/gpu.mock.dracheck.io"));
        let e = Args::try_parse_from(["x", "--node-name", "n", "--inventory", "i", "--instance", "New/1"]).unwrap_err();
        assert!(e.to_string().contains("instance ID"), "{e}");
    }

    #[test]
    fn faults_repeat_and_bad_ones_are_usage_errors() {
        let args = Args::try_parse_from([
            "x",
            "--node-name",
            "n",
            "--inventory",
            "i",
            "--fault",
            "hang-prepare",
            "--fault",
            "fail-prepare=2",
        ])
        .unwrap();
        assert_eq!(args.faults, [Fault::HangPrepare, Fault::FailPrepare(2)]);
        let e = Args::try_parse_from(["x", "--node-name", "n", "--inventory", "i", "--fault", "boom"]).unwrap_err();
        assert!(e.to_string().contains("unknown fault"), "{e}");
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn version_needs_no_other_flag_and_follows_the_fault() {
        let plain = Args::try_parse_from(["x", "--version"]).unwrap();
        assert!(plain.print_version);
        assert_eq!(plain.version_line(), format!("dracheck-mock-driver {}", env!("CARGO_PKG_VERSION")));
        let faulty = Args::try_parse_from(["x", "--fault=wrong-version=0.0.1", "-V"]).unwrap();
        assert_eq!(faulty.version_line(), "dracheck-mock-driver 0.0.1");
        let e = Args::try_parse_from(["x", "--inventory", "i"]).unwrap_err();
        assert!(e.to_string().contains("--node-name"), "{e}");
    }
}
