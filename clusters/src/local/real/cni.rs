//! The pod network of a real node: containerd needs an address on every sandbox's interface,
//! and the host's network namespace must stay as it is. The plugin (`assets/dracheck-cni`, a
//! POSIX shell script; its header says how) puts both ends of a veth pair into the pod's
//! namespace and gives one an address from the node's own /24 in 127.100.0.0/16, so nothing
//! is added to the host: no link, route or iptables rule.

use std::path::{Path, PathBuf};

use crate::error::{ClusterError, Result};

/// The plugin: containerd runs it for every sandbox, with the network config on stdin.
const PLUGIN: &str = include_str!("assets/dracheck-cni");

/// The plugin's file name, which is also its `type` in the network config.
pub const PLUGIN_TYPE: &str = "dracheck-cni";

/// The network's name in the config list.
pub const NETWORK_NAME: &str = "dracheck";

/// How many nodes get a /24 of their own: the third octet of 127.100.N.0, 1 to 254.
pub const MAX_NODES: usize = 254;

/// The host programs the plugin runs, each with the Debian package that has it.
const HOST_TOOLS: [(&str, &str); 7] = [
    ("ip", "iproute2"),
    ("nsenter", "util-linux"),
    ("flock", "util-linux"),
    ("sed", "sed"),
    ("grep", "grep"),
    ("sleep", "coreutils"),
    ("mv", "coreutils"),
];

/// Where the plugin looks for them besides `PATH` (it appends these itself, since containerd
/// runs it with containerd's environment).
const SBIN_DIRS: [&str; 6] = ["/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/local/bin", "/usr/bin", "/bin"];

/// The dirs that containerd's CRI config names (`bin_dirs`, `conf_dir`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CniSetup {
    pub bin_dir: PathBuf,
    pub conf_dir: PathBuf,
    /// The handshake dir of the node's `kubernetes` Service (`service`).
    pub service_dir: PathBuf,
}

/// The pod subnet of node number `node_index` (0-based): `127.100.<index + 1>.0/24`. Each
/// node has its own, so that pod IPs are unique in the cluster; the addresses exist only
/// inside pods' namespaces, so they collide with nothing on the host. Beyond [`MAX_NODES`]
/// nodes there is no /24 left and the node is refused.
pub fn pod_subnet(node_index: usize) -> Result<String> {
    if node_index >= MAX_NODES {
        return Err(ClusterError::CniSetup {
            problem: format!(
                "node number {} has no pod subnet left: real nodes get one /24 each in 127.100.0.0/16, \
                 {MAX_NODES} in all",
                node_index + 1
            ),
            fix: format!("run at most {MAX_NODES} real nodes, or pass --node-kind emulated for more"),
        });
    }
    Ok(format!("127.100.{}.0/24", node_index + 1))
}

/// Writes the plugin to `<node_root>/cni/bin/dracheck-cni` and the network config list
/// (`subnet`, addresses kept in `<node_root>/cni/ipam`) to `<node_root>/cni/conf`. Refuses a
/// machine without the programs the plugin runs, naming their packages.
pub fn install(node_root: &Path, subnet: &str) -> Result<CniSetup> {
    check_host_tools()?;
    check_subnet(subnet)?;
    let root = std::path::absolute(node_root)
        .map_err(ClusterError::io(format!("making {} absolute", node_root.display())))?
        .join("cni");
    let setup = CniSetup { bin_dir: root.join("bin"), conf_dir: root.join("conf"), service_dir: root.join("service") };
    let ipam_dir = root.join("ipam");
    // The plugin reads the config with sed, which cannot undo JSON escapes.
    let ipam_str = ipam_dir.to_str().filter(|s| !s.chars().any(|c| c == '"' || c == '\\' || c.is_control()));
    let Some(ipam_str) = ipam_str else {
        return Err(ClusterError::CniSetup {
            problem: format!(
                "the path {} is not UTF-8 or has quotes, backslashes or control characters",
                root.display()
            ),
            fix: "pass a --state-dir whose path has none of them".into(),
        });
    };
    for dir in [&setup.bin_dir, &setup.conf_dir, &ipam_dir] {
        std::fs::create_dir_all(dir).map_err(ClusterError::io(format!("creating {}", dir.display())))?;
    }
    let conflist = serde_json::json!({
        "cniVersion": "1.0.0",
        "name": NETWORK_NAME,
        "plugins": [{ "type": PLUGIN_TYPE, "subnet": subnet, "dataDir": ipam_str, "serviceDir": format!("{}/service", root.display()) }],
    });
    let conflist = serde_json::to_string_pretty(&conflist)
        .map_err(|e| ClusterError::Io { context: "writing the CNI config".into(), source: std::io::Error::other(e) })?;
    write_replacing(&setup.bin_dir.join(PLUGIN_TYPE), PLUGIN, 0o755)?;
    write_replacing(&setup.conf_dir.join("10-dracheck.conflist"), &conflist, 0o644)?;
    Ok(setup)
}

/// Writes beside the file and renames over it: a shell reads its script as it runs, so a
/// plugin rewritten in place could break an ADD under way, and containerd could read half a
/// config.
fn write_replacing(path: &Path, text: &str, mode: u32) -> Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(mode).open(&tmp)?;
        f.write_all(text.as_bytes())?;
        // The umask may have taken bits from `mode`.
        f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        ClusterError::Io { context: format!("writing {}", path.display()), source: e }
    })
}

fn check_subnet(subnet: &str) -> Result<()> {
    let ok = subnet
        .strip_suffix(".0/24")
        .map(|prefix| prefix.split('.').collect::<Vec<_>>())
        .is_some_and(|octets| octets.len() == 3 && octets.iter().all(|o| o.parse::<u8>().is_ok()));
    if ok {
        Ok(())
    } else {
        Err(ClusterError::CniSetup {
            problem: format!(
                "the pod subnet {subnet:?} is not a /24 such as 127.100.1.0/24, the only kind the plugin takes"
            ),
            fix: "this is a bug in dracheck; please report it with the command line".into(),
        })
    }
}

fn check_host_tools() -> Result<()> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path).chain(SBIN_DIRS.iter().map(PathBuf::from)).collect();
    let missing: Vec<(&str, &str)> = HOST_TOOLS
        .into_iter()
        .filter(|(tool, _)| !dirs.iter().any(|d| crate::tools::is_executable(&d.join(tool))))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut packages: Vec<&str> = missing.iter().map(|(_, p)| *p).collect();
    packages.sort_unstable();
    packages.dedup();
    Err(ClusterError::MissingTool {
        tool: missing.iter().map(|(t, _)| *t).collect::<Vec<_>>().join(", "),
        detail: "real nodes' pod network plugin runs it, and it is neither on PATH nor in /usr/sbin or /sbin".into(),
        fix: format!("apt-get install {}", packages.join(" ")),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::io::Write as _;
    use std::process::{Command, Stdio};

    use super::*;

    #[test]
    fn each_node_gets_its_own_subnet_and_the_255th_is_refused() {
        let subnets: BTreeSet<String> = (0..MAX_NODES).map(|i| pod_subnet(i).unwrap()).collect();
        assert_eq!(subnets.len(), MAX_NODES);
        assert_eq!(pod_subnet(0).unwrap(), "127.100.1.0/24");
        assert_eq!(pod_subnet(253).unwrap(), "127.100.254.0/24");
        for s in &subnets {
            check_subnet(s).unwrap();
        }
        let err = pod_subnet(254).unwrap_err().to_string();
        assert!(err.contains("node number 255") && err.contains("--node-kind emulated"), "{err}");
    }

    #[test]
    fn subnets_other_than_a_slash_24_are_refused() {
        for bad in ["127.100.1.0/16", "127.100.1.5/24", "127.100.0/24", "127.100.1.0", "a.b.c.0/24", "127.100.256.0/24"]
        {
            assert!(check_subnet(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn install_writes_an_executable_plugin_and_a_config_naming_the_subnet_and_dir() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let setup = install(dir.path(), "127.100.3.0/24").unwrap();
        assert_eq!(setup.bin_dir, dir.path().join("cni/bin"));
        assert_eq!(setup.conf_dir, dir.path().join("cni/conf"));
        let plugin = setup.bin_dir.join(PLUGIN_TYPE);
        assert_eq!(std::fs::metadata(&plugin).unwrap().permissions().mode() & 0o777, 0o755);
        assert_eq!(std::fs::read_to_string(&plugin).unwrap(), PLUGIN);
        let conf: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(setup.conf_dir.join("10-dracheck.conflist")).unwrap())
                .unwrap();
        assert_eq!(conf["name"], NETWORK_NAME);
        assert_eq!(conf["cniVersion"], "1.0.0");
        assert_eq!(conf["plugins"].as_array().unwrap().len(), 1);
        assert_eq!(conf["plugins"][0]["type"], PLUGIN_TYPE);
        assert_eq!(conf["plugins"][0]["subnet"], "127.100.3.0/24");
        assert_eq!(conf["plugins"][0]["dataDir"], dir.path().join("cni/ipam").to_str().unwrap());
        assert!(dir.path().join("cni/ipam").is_dir());
        // Installing again (a restarted node) replaces the files and leaves no temp files.
        install(dir.path(), "127.100.3.0/24").unwrap();
        assert_eq!(std::fs::read_dir(&setup.bin_dir).unwrap().count(), 1);
        assert_eq!(std::fs::read_dir(&setup.conf_dir).unwrap().count(), 1);
    }

    #[test]
    fn a_node_root_the_plugin_could_not_parse_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = install(&dir.path().join("a\"b"), "127.100.3.0/24").unwrap_err();
        assert_eq!(err.failure(), crate::Failure::BadInput);
        assert!(err.to_string().contains("--state-dir"), "{err}");
    }

    /// One call of the plugin as containerd makes it: the config list's plugin with `name` and
    /// `cniVersion` injected, as compact JSON (libcni re-marshals it).
    struct Plugin {
        _root: tempfile::TempDir,
        setup: CniSetup,
        stdin: String,
    }

    struct Outcome {
        ok: bool,
        stdout: String,
        json: serde_json::Value,
    }

    impl Plugin {
        fn install(subnet: &str) -> Plugin {
            let root = tempfile::tempdir().unwrap();
            let setup = install(root.path(), subnet).unwrap();
            let list: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(setup.conf_dir.join("10-dracheck.conflist")).unwrap())
                    .unwrap();
            let mut conf = list["plugins"][0].clone();
            conf["name"] = list["name"].clone();
            conf["cniVersion"] = list["cniVersion"].clone();
            Plugin { _root: root, setup, stdin: conf.to_string() }
        }

        fn ipam_dir(&self) -> PathBuf {
            self.setup.bin_dir.parent().unwrap().join("ipam")
        }

        fn call(&self, command: &str, container: &str, netns: Option<&Path>) -> Outcome {
            self.call_with(command, container, netns, &self.stdin)
        }

        fn call_with(&self, command: &str, container: &str, netns: Option<&Path>, stdin: &str) -> Outcome {
            let mut cmd = Command::new(self.setup.bin_dir.join(PLUGIN_TYPE));
            cmd.env("CNI_COMMAND", command)
                .env("CNI_CONTAINERID", container)
                .env("CNI_IFNAME", "eth0")
                .env("CNI_PATH", &self.setup.bin_dir)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            if let Some(netns) = netns {
                cmd.env("CNI_NETNS", netns);
            }
            let mut child = cmd.spawn().unwrap();
            child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
            let out = child.wait_with_output().unwrap();
            let stdout = String::from_utf8(out.stdout).unwrap();
            let json = if stdout.trim().is_empty() {
                serde_json::Value::Null
            } else {
                serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
            };
            Outcome { ok: out.status.success(), stdout, json }
        }
    }

    /// A network namespace of the test, deleted on drop (also when the test panics).
    struct Netns {
        /// Removed after the namespace's mount (fields drop after `Drop::drop`).
        _dir: tempfile::TempDir,
        file: PathBuf,
    }

    impl Netns {
        /// `None`, with the reason printed, where the test cannot create one. The namespace is
        /// kept by a bind mount on a file of the test's own temp dir (`unshare --net=FILE`),
        /// not under `/run/netns`: `ip netns add` would leave that dir and its mount behind.
        fn add() -> Option<Netns> {
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } != 0 {
                eprintln!("skipped: creating network namespaces needs root");
                return None;
            }
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("netns");
            std::fs::write(&file, "").unwrap();
            match Command::new("unshare").arg(format!("--net={}", file.display())).arg("true").output() {
                Ok(out) if out.status.success() => Some(Netns { _dir: dir, file }),
                Ok(out) => {
                    eprintln!("skipped: `unshare --net` failed: {}", String::from_utf8_lossy(&out.stderr).trim());
                    None
                }
                Err(e) => {
                    eprintln!("skipped: `unshare` did not run: {e}");
                    None
                }
            }
        }

        fn path(&self) -> PathBuf {
            self.file.clone()
        }

        /// A command's output inside the namespace.
        fn run(&self, args: &[&str]) -> String {
            let out =
                Command::new("nsenter").arg(format!("--net={}", self.file.display())).args(args).output().unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    }

    impl Drop for Netns {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.file).status();
            let _ = std::fs::remove_file(&self.file);
        }
    }

    fn host_links() -> BTreeSet<String> {
        let out = Command::new("ip").args(["-o", "link"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split(':').nth(1).map(|n| n.trim().to_string()))
            .collect()
    }

    fn address_of(outcome: &Outcome) -> String {
        outcome.json["ips"][0]["address"].as_str().unwrap_or_else(|| panic!("no address: {}", outcome.stdout)).into()
    }

    #[test]
    fn add_addresses_the_pod_inside_its_namespace_only_and_del_frees_it() {
        let Some(netns) = Netns::add() else { return };
        let plugin = Plugin::install("127.100.7.0/24");
        let before = host_links();

        let added = plugin.call("ADD", "c1", Some(&netns.path()));
        assert!(added.ok, "{}", added.stdout);
        assert_eq!(added.json["cniVersion"], "1.0.0");
        assert_eq!(added.json["interfaces"][0]["name"], "eth0");
        assert_eq!(added.json["interfaces"][0]["sandbox"], netns.path().to_str().unwrap());
        assert_eq!(added.json["ips"][0]["interface"], 0);
        assert_eq!(address_of(&added), "127.100.7.2/24");

        assert!(netns.run(&["ip", "-4", "-o", "addr", "show", "dev", "eth0"]).contains("inet 127.100.7.2/24"));
        let links = netns.run(&["ip", "-o", "link"]);
        assert!(links.contains("eth0p@eth0") && links.contains("lo: <LOOPBACK,UP"), "{links}");
        if Path::new("/proc/sys/net/ipv6").exists() {
            let v6 = netns.run(&["cat", "/proc/sys/net/ipv6/conf/all/disable_ipv6"]);
            assert_eq!(v6.trim(), "1");
        }
        assert_eq!(host_links(), before, "ADD changed the host's links");
        let ip_file = plugin.ipam_dir().join("127.100.7.2");
        assert_eq!(std::fs::read_to_string(&ip_file).unwrap(), "c1\neth0\n");

        let checked = plugin.call("CHECK", "c1", Some(&netns.path()));
        assert!(checked.ok, "{}", checked.stdout);
        // A repeated ADD of the same container keeps its address.
        assert_eq!(address_of(&plugin.call("ADD", "c1", Some(&netns.path()))), "127.100.7.2/24");

        let deleted = plugin.call("DEL", "c1", Some(&netns.path()));
        assert!(deleted.ok && deleted.stdout.is_empty(), "{}", deleted.stdout);
        assert!(!ip_file.exists());
        assert!(!netns.run(&["ip", "-o", "link"]).contains("eth0"));
        assert!(!plugin.call("CHECK", "c1", Some(&netns.path())).ok);
        // DEL is idempotent, also once the namespace is gone.
        assert!(plugin.call("DEL", "c1", Some(&netns.path())).ok);
        let gone = netns.path();
        drop(netns);
        assert!(plugin.call("DEL", "c1", Some(&gone)).ok);
        assert!(plugin.call("DEL", "c1", None).ok);
        assert_eq!(host_links(), before, "DEL changed the host's links");
    }

    #[test]
    fn two_pods_get_different_addresses_and_del_frees_exactly_its_own() {
        let (Some(a), Some(b), Some(c)) = (Netns::add(), Netns::add(), Netns::add()) else { return };
        let plugin = Plugin::install("127.100.8.0/24");
        assert_eq!(address_of(&plugin.call("ADD", "a", Some(&a.path()))), "127.100.8.2/24");
        assert_eq!(address_of(&plugin.call("ADD", "b", Some(&b.path()))), "127.100.8.3/24");

        assert!(plugin.call("DEL", "a", Some(&a.path())).ok);
        assert!(!plugin.ipam_dir().join("127.100.8.2").exists());
        assert!(plugin.ipam_dir().join("127.100.8.3").exists());
        assert!(b.run(&["ip", "-4", "-o", "addr"]).contains("inet 127.100.8.3/24"));
        // The lowest free address goes to the next pod.
        assert_eq!(address_of(&plugin.call("ADD", "c", Some(&c.path()))), "127.100.8.2/24");

        // GC (CNI 1.1) frees what is not among the valid attachments.
        let mut gc: serde_json::Value = serde_json::from_str(&plugin.stdin).unwrap();
        gc["cni.dev/valid-attachments"] = serde_json::json!([{"containerID": "c", "ifname": "eth0"}]);
        assert!(plugin.call_with("GC", "", None, &gc.to_string()).ok);
        assert!(plugin.ipam_dir().join("127.100.8.2").exists());
        assert!(!plugin.ipam_dir().join("127.100.8.3").exists());
    }

    #[test]
    fn version_status_and_errors_answer_in_cni_json() {
        let plugin = Plugin::install("127.100.9.0/24");
        let version = plugin.call("VERSION", "", None);
        assert!(version.ok);
        assert_eq!(version.json["supportedVersions"], serde_json::json!(["0.4.0", "1.0.0", "1.1.0"]));
        assert!(plugin.call("STATUS", "", None).ok);

        let no_netns = plugin.call("ADD", "c1", None);
        assert!(!no_netns.ok);
        assert_eq!(no_netns.json["code"], 4);
        assert!(no_netns.json["msg"].as_str().unwrap().contains("CNI_NETNS"), "{}", no_netns.stdout);

        let missing = plugin.call("ADD", "c1", Some(Path::new("/run/netns/dracheck-no-such-netns")));
        assert!(!missing.ok);
        assert!(missing.json["msg"].as_str().unwrap().contains("does not exist"), "{}", missing.stdout);

        let bad =
            plugin.call_with("DEL", "c1", None, r#"{"cniVersion":"1.0.0","subnet":"127.100.9.0/16","dataDir":"/x"}"#);
        assert!(!bad.ok);
        assert_eq!(bad.json["code"], 7);
        assert!(bad.json["msg"].as_str().unwrap().contains("\"subnet\""), "{}", bad.stdout);

        let unknown = plugin.call("FROB", "", None);
        assert!(!unknown.ok && unknown.json["msg"].as_str().unwrap().contains("FROB"), "{}", unknown.stdout);
    }
}
