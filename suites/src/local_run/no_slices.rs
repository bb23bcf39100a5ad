//! Why a driver started on the emulated nodes published no ResourceSlice in time: per node,
//! how far it got (a registration socket, its service socket, a registration), so that a
//! driver pointed at the wrong dirs is told where the kubelet looked, not handed an empty log.

use std::path::{Path, PathBuf};
use std::time::Duration;

use dracheck_clusters::local::{DriverSpec, NodeConfig};

/// The lines of a log quoted in the message.
const LOG_LINES: usize = 15;

/// What the suite saw of the driver on one node that has no slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Silent {
    pub node: String,
    /// The node's `plugins_registry`: the kubelet registers whatever socket appears there.
    pub registry_dir: PathBuf,
    /// The file names of the sockets in `registry_dir`.
    pub registry_sockets: Vec<String>,
    /// The driver's own dir under the node's `plugins`, where its `dra.sock` belongs.
    pub plugin_dir: PathBuf,
    pub dra_socket: bool,
    /// Whether the node's kubelet registered the driver (under its name: another name is
    /// refused before the wait ends).
    pub registered: bool,
    pub kubelet_log: PathBuf,
    pub log: PathBuf,
    /// The log's last lines, quoted; empty when the log is.
    pub log_tail: String,
}

impl Silent {
    /// Looks at `node`'s dirs and at the driver's `log`.
    pub fn observe(spec: &DriverSpec, node: &NodeConfig, registered: bool, kubelet_log: &Path, log: &Path) -> Silent {
        let registry_dir = node.registry_dir();
        let plugin_dir = spec.plugin_dir(&node.dirs());
        let empty = std::fs::metadata(log).map_or(true, |m| m.len() == 0);
        Silent {
            node: node.name.clone(),
            registry_sockets: sockets(&registry_dir),
            dra_socket: is_socket(&plugin_dir.join("dra.sock")),
            registry_dir,
            plugin_dir,
            registered,
            kubelet_log: kubelet_log.to_path_buf(),
            log: log.to_path_buf(),
            log_tail: if empty { String::new() } else { dracheck_clusters::error::log_tail(log, LOG_LINES) },
        }
    }
}

fn is_socket(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

fn sockets(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| is_socket(&e.path()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The error of a driver (`program`) that published no slice on the `silent` nodes within
/// `waited`: one line per node, what to check, and the first log that has anything in it.
pub(super) fn message(driver: &str, program: &Path, waited: Duration, silent: &[Silent]) -> String {
    let names: Vec<&str> = silent.iter().map(|s| s.node.as_str()).collect();
    let mut out = format!("the driver {driver} published no ResourceSlice for {names:?} within {}s:", waited.as_secs());
    for s in silent {
        let registration = if s.registered {
            "registered with the kubelet".to_string()
        } else if s.registry_sockets.is_empty() {
            format!(
                "no registration socket appeared in {} (where the kubelet looks for {driver}-reg.sock)",
                s.registry_dir.display()
            )
        } else {
            format!(
                "the socket(s) {:?} appeared in {} but did not register (the kubelet's log {} says why)",
                s.registry_sockets,
                s.registry_dir.display(),
                s.kubelet_log.display()
            )
        };
        let service = if s.dra_socket { "dra.sock appeared in" } else { "no dra.sock appeared in" };
        let log = if s.log_tail.is_empty() { "is empty" } else { "is quoted below" };
        out.push_str(&format!(
            "\n- {}: {registration}; {service} {}; its log {} {log}",
            s.node,
            s.plugin_dir.display(),
            s.log.display()
        ));
    }
    if silent.iter().any(|s| !s.registered) {
        out.push_str(&format!(
            "\ncheck that {} is a kubelet plugin and that --driver-arg points it at the node's dirs: its registrar \
             dir at {{registrar-dir}} and its plugin dir at {{plugin-dir}} (or their parent, {{plugins-dir}}); with \
             no --driver-arg it gets the kubeletplugin helper's flags ({})",
            program.display(),
            dracheck_clusters::local::drivers::HELPER_FLAGS.join(" ")
        ));
    } else {
        out.push_str(
            "\nit registered, so it runs, but wrote no slice: check its access to the API (--kubeconfig={kubeconfig} \
             in --driver-arg) and its log",
        );
    }
    if let Some(s) = silent.iter().find(|s| !s.log_tail.is_empty()) {
        out.push_str(&format!("\nthe log of {} ({}):\n{}", s.node, s.log.display(), s.log_tail));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRIVER: &str = "gpu.acme.com";

    fn silent(node: &str) -> Silent {
        let root = Path::new("/state/nodes").join(node);
        Silent {
            node: node.into(),
            registry_dir: root.join("plugins_registry"),
            registry_sockets: Vec::new(),
            plugin_dir: root.join("plugins").join(DRIVER),
            dra_socket: false,
            registered: false,
            kubelet_log: root.join("kubelet.log"),
            log: root.join(format!("driver-{DRIVER}.log")),
            log_tail: String::new(),
        }
    }

    fn lines(message: &str) -> Vec<&str> {
        message.lines().collect()
    }

    #[test]
    fn a_driver_that_never_registers_is_told_where_the_kubelet_looked() {
        let msg = message(DRIVER, Path::new("/bin/sh"), Duration::from_secs(60), &[silent("node-1"), silent("node-2")]);
        let lines = lines(&msg);
        assert_eq!(
            lines[0],
            r#"the driver gpu.acme.com published no ResourceSlice for ["node-1", "node-2"] within 60s:"#
        );
        assert_eq!(
            lines[1],
            "- node-1: no registration socket appeared in /state/nodes/node-1/plugins_registry (where the kubelet \
             looks for gpu.acme.com-reg.sock); no dra.sock appeared in /state/nodes/node-1/plugins/gpu.acme.com; its \
             log /state/nodes/node-1/driver-gpu.acme.com.log is empty"
        );
        assert!(lines[2].starts_with("- node-2: no registration socket appeared in /state/nodes/node-2/"), "{msg}");
        assert!(lines[3].starts_with("check that /bin/sh is a kubelet plugin"), "{msg}");
        for hint in ["--driver-arg", "{registrar-dir}", "{plugin-dir}", "--kubelet-registrar-directory-path"] {
            assert!(lines[3].contains(hint), "the advice names {hint}: {msg}");
        }
        assert_eq!(lines.len(), 4, "no log is quoted when every log is empty: {msg}");
    }

    #[test]
    fn a_socket_that_did_not_register_points_at_the_kubelets_log_and_the_drivers_log_is_quoted() {
        let refused = Silent {
            registry_sockets: vec!["acme.sock".into()],
            dra_socket: true,
            log_tail: "  | listening on acme.sock".into(),
            ..silent("node-1")
        };
        let msg = message(DRIVER, Path::new("/bin/acme"), Duration::from_secs(60), &[refused]);
        let lines = lines(&msg);
        assert_eq!(
            lines[1],
            r#"- node-1: the socket(s) ["acme.sock"] appeared in /state/nodes/node-1/plugins_registry but did not register (the kubelet's log /state/nodes/node-1/kubelet.log says why); dra.sock appeared in /state/nodes/node-1/plugins/gpu.acme.com; its log /state/nodes/node-1/driver-gpu.acme.com.log is quoted below"#
        );
        assert!(lines[2].starts_with("check that /bin/acme is a kubelet plugin"), "{msg}");
        assert_eq!(
            lines[3..],
            ["the log of node-1 (/state/nodes/node-1/driver-gpu.acme.com.log):", "  | listening on acme.sock"]
        );
    }

    #[test]
    fn a_registered_driver_without_slices_is_sent_to_its_api_access() {
        let registered = Silent { registered: true, dra_socket: true, ..silent("node-1") };
        let msg = message(DRIVER, Path::new("/bin/acme"), Duration::from_secs(60), &[registered]);
        let lines = lines(&msg);
        assert!(lines[1].starts_with("- node-1: registered with the kubelet; dra.sock appeared in"), "{msg}");
        assert!(lines[2].contains("--kubeconfig={kubeconfig}"), "{msg}");
        assert!(!msg.contains("is a kubelet plugin"), "a registered driver is one: {msg}");
    }

    #[test]
    fn the_sockets_are_read_from_the_nodes_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let node = NodeConfig::numbered(dir.path(), 0);
        let spec = DriverSpec::from_template(DRIVER, Path::new("/bin/acme"), &[]).unwrap();
        std::fs::create_dir_all(node.registry_dir()).unwrap();
        std::fs::create_dir_all(spec.plugin_dir(&node.dirs())).unwrap();
        let _reg = std::os::unix::net::UnixListener::bind(node.registry_dir().join("acme-reg.sock")).unwrap();
        // A plain file is no socket, for the kubelet neither.
        std::fs::write(node.registry_dir().join("notes.txt"), "").unwrap();
        std::fs::write(spec.plugin_dir(&node.dirs()).join("dra.sock"), "").unwrap();
        let log = node.root.join("driver.log");
        std::fs::write(&log, "").unwrap();
        let seen = Silent::observe(&spec, &node, false, &node.root.join("kubelet.log"), &log);
        assert_eq!(seen.registry_sockets, ["acme-reg.sock"]);
        assert!(!seen.dra_socket, "a plain file named dra.sock is no socket");
        assert_eq!(seen.log_tail, "", "an empty log has no tail");
        std::fs::write(&log, "starting\n").unwrap();
        let seen = Silent::observe(&spec, &node, false, &node.root.join("kubelet.log"), &log);
        assert_eq!(seen.log_tail, "  | starting");
    }
}
