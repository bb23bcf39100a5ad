//! Real nodes leave the machine as they found it: after a stop, after the reap of a run
//! killed with SIGKILL, and after a node whose containerd died at start-up. A
//! [`HostSnapshot`] reads everything a real node can change on the machine (mounts, cgroups,
//! the kernel settings the kubelet writes, the host paths the kubelet, containerd and the CNI
//! library write whatever dirs they are given, processes, network links, iptables chains);
//! each test takes one before its cluster starts and compares it with one taken at the end.
//!
//! Other dracheck runs may share the machine. What a test's own clusters own is found by its
//! temp dir (mount points, command lines, log links, CNI results) and by its clusters' cgroup
//! prefix, and is always compared; other runs' things are left out; what is the machine's
//! alone (kernel settings, host dirs, links, iptables) is compared only while no other run's
//! kubelet, containerd or containers run, and a part left out says so on stderr.
//!
//! Needs root and cgroups (each test says "skipped" otherwise) and the node programs (built
//! into the cache on first use). The tests take turns: each one's cluster is real.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dracheck_clusters::local::real::{host, images, kubelet};
use dracheck_clusters::local::reap::{Reaped, reap_stale_in};
use dracheck_clusters::local::{NodeKind, Progress};
use dracheck_clusters::{ClusterError, LocalCluster, LocalClusterOptions};
use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, Pod, Volume, VolumeMount};
use kube::api::{Api, PostParams};

/// One real cluster at a time in this binary: two would see each other as another run, and
/// two cores are shared.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The kernel settings the kubelet writes at start-up (`setupKernelTunables`).
const SYSCTLS: &[&str] = &["vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"];

/// Host paths that the kubelet, containerd or the CNI library write to whatever dirs they are
/// given (`/var/log/containers`, `/var/lib/cni/results`, `/run/containerd/s`,
/// `/var/lib/kubelet/device-plugins`), or would if a setting were missing: each one's
/// existence and entries.
const HOST_DIRS: &[&str] = &[
    "/var/log/containers",
    "/var/log/pods",
    "/var/lib/cni",
    "/var/lib/cni/results",
    "/var/lib/cni/networks",
    "/run/containerd",
    "/run/containerd/s",
    "/run/netns",
    "/var/lib/kubelet",
    "/var/lib/kubelet/device-plugins",
    "/var/lib/containerd",
    "/etc/containerd",
    "/etc/cni/net.d",
    "/opt/cni/bin",
    "/etc/kubernetes",
    "/var/lib/nri",
    "/run/nri",
];

/// The names (`/proc/<pid>/comm`, which the kernel cuts at 15 bytes) of a node's runtime:
/// kubelet, containerd, containerd-shim-runc-v2, runc, and the sandbox's pause.
const RUNTIME_COMMS: &[&str] = &["kubelet", "containerd", "containerd-shim", "runc", "pause"];

/// What belongs to one test: everything under its temp dir, and its clusters' cgroups.
#[derive(Debug, Clone)]
struct Scope {
    /// The temp dir with a trailing `/`, so that `/tmp/.tmpAb` does not own `/tmp/.tmpAbc`.
    dir: String,
    /// [`kubelet::cluster_prefix`] of each of its clusters' state dirs.
    prefixes: Vec<String>,
}

impl Scope {
    fn new(dir: &Path, state_dirs: &[&Path]) -> Scope {
        Scope {
            dir: format!("{}/", dir.display()),
            prefixes: state_dirs.iter().map(|d| kubelet::cluster_prefix(d)).collect(),
        }
    }

    fn owns(&self, text: &str) -> bool {
        text.contains(&self.dir) || self.prefixes.iter().any(|p| text.contains(&format!("/{p}")))
    }

    /// Whose a path, command line or link target is.
    fn owner(&self, text: &str) -> Owner {
        if self.owns(text) {
            Owner::Own
        } else if text.contains("/dracheck-") || text.contains("/nodes/node-") {
            Owner::OtherRun
        } else {
            Owner::Machine
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Own,
    OtherRun,
    Machine,
}

/// One entry of a host dir: its name, what it is, and what it points to or says (for whose
/// it is).
#[derive(Debug, Clone)]
struct Entry {
    name: String,
    kind: &'static str,
    mentions: String,
}

#[derive(Debug, Clone)]
struct Proc {
    pid: u32,
    comm: String,
    cmdline: String,
    cgroup: String,
}

/// Everything real nodes can change on the machine, as read at one moment; [`HostSnapshot::view`]
/// sorts it by whose it is.
#[derive(Debug, Clone)]
struct HostSnapshot {
    /// Mount point and file system type of every mount of this mount namespace.
    mounts: Vec<(String, String)>,
    /// Each top-level cgroup: its hierarchy and name.
    cgroups: Vec<(String, String)>,
    sysctls: BTreeMap<String, String>,
    /// Each of [`HOST_DIRS`]: `None` when it does not exist.
    dirs: BTreeMap<&'static str, Option<Vec<Entry>>>,
    processes: Vec<Proc>,
    links: Vec<String>,
    /// `None`: this machine has no `iptables`.
    iptables: Option<Vec<String>>,
}

impl HostSnapshot {
    /// The snapshot to compare the end with: taken after the machine is put back from what
    /// killed runs left (as every run's start does), so that their leftovers are not taken for
    /// the machine's own settings and their restore for this test's change.
    fn take_clean() -> HostSnapshot {
        let restored = dracheck_clusters::local::reap::reap_machine();
        if !restored.is_empty() {
            eprintln!("restored what killed runs had left on the machine: {}", restored.join(", "));
        }
        HostSnapshot::take()
    }

    fn take() -> HostSnapshot {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").expect("reading /proc/self/mountinfo");
        let mut mounts = Vec::new();
        let mut hierarchies = Vec::new();
        for line in mountinfo.lines() {
            let Some((left, right)) = line.split_once(" - ") else { continue };
            let (Some(point), Some(fstype)) = (left.split(' ').nth(4), right.split(' ').next()) else { continue };
            let point = unescape(point);
            if fstype == "cgroup" || fstype == "cgroup2" {
                hierarchies.push(point.clone());
            }
            mounts.push((point, fstype.to_string()));
        }
        let cgroups = hierarchies
            .iter()
            .flat_map(|h| {
                std::fs::read_dir(h)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(move |e| (h.clone(), e.file_name().to_string_lossy().into_owned()))
            })
            .collect();
        let sysctls = SYSCTLS
            .iter()
            .map(|k| {
                let v = std::fs::read_to_string(Path::new("/proc/sys").join(k)).unwrap_or_else(|e| format!("({e})"));
                (k.replace('/', "."), v.trim().to_string())
            })
            .collect();
        let bound = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
        let bound: BTreeSet<&str> = bound.lines().filter_map(|l| l.split_whitespace().nth(7)).collect();
        let dirs = HOST_DIRS.iter().map(|d| (*d, read_entries(Path::new(d), &bound))).collect();
        HostSnapshot {
            mounts,
            cgroups,
            sysctls,
            dirs,
            processes: processes(),
            links: links(),
            iptables: iptables_chains(),
        }
    }

    /// The snapshot as `scope`'s test sees it.
    fn view(&self, scope: &Scope) -> View {
        let mut v = View::default();
        for (point, fstype) in &self.mounts {
            let relevant = scope.owns(point)
                || point.starts_with("/run/netns")
                || point.contains("containerd")
                || point.contains("kubelet");
            if relevant {
                v.put(scope.owner(point), "mount", format!("{point} ({fstype})"));
            }
        }
        for (hierarchy, name) in &self.cgroups {
            let owner = if scope.prefixes.iter().any(|p| name.starts_with(p.as_str())) {
                Owner::Own
            } else if name.starts_with("dracheck-") {
                Owner::OtherRun
            } else {
                Owner::Machine
            };
            v.put(owner, "cgroup", format!("{hierarchy}/{name}"));
        }
        for (key, value) in &self.sysctls {
            v.put(Owner::Machine, "sysctl", format!("{key}={value}"));
        }
        for (dir, entries) in &self.dirs {
            let Some(entries) = entries else { continue };
            v.put(Owner::Machine, "host dir", dir.to_string());
            for e in entries {
                v.put(scope.owner(&e.mentions), dir, format!("{} ({})", e.name, e.kind));
            }
        }
        for p in &self.processes {
            if scope.owns(&p.cmdline) || scope.owns(&p.cgroup) {
                v.put(Owner::Own, "process", format!("{} {}: {}", p.pid, p.comm, p.cmdline));
            } else if RUNTIME_COMMS.contains(&p.comm.as_str()) {
                v.others.push(format!("{} {}: {}", p.pid, p.comm, p.cmdline));
            }
        }
        for link in &self.links {
            v.put(Owner::Machine, "network link", link.clone());
        }
        for chain in self.iptables.iter().flatten() {
            v.put(Owner::Machine, "iptables chain", chain.clone());
        }
        v
    }
}

/// A snapshot sorted by whose it is.
#[derive(Debug, Default)]
struct View {
    /// The test's own: part → items.
    own: BTreeMap<String, BTreeSet<String>>,
    /// The machine's, which no run owns.
    machine: BTreeMap<String, BTreeSet<String>>,
    /// Other runs' kubelets, containerds, shims and containers running at the time.
    others: Vec<String>,
}

impl View {
    fn put(&mut self, owner: Owner, part: &str, item: String) {
        let map = match owner {
            Owner::Own => &mut self.own,
            Owner::Machine => &mut self.machine,
            Owner::OtherRun => return,
        };
        map.entry(part.to_string()).or_default().insert(item);
    }

    fn own(&self, part: &str) -> &BTreeSet<String> {
        static EMPTY: BTreeSet<String> = BTreeSet::new();
        self.own.get(part).unwrap_or(&EMPTY)
    }
}

/// `+`/`-` lines for every item that is only in `after`/`before`. A dead socket that was there
/// before may have been cleaned up (teardown removes dead shim sockets, whoever left them).
fn diff(before: &BTreeMap<String, BTreeSet<String>>, after: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let parts: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let empty = BTreeSet::new();
    let mut lines = Vec::new();
    for part in parts {
        let (b, a) = (before.get(part).unwrap_or(&empty), after.get(part).unwrap_or(&empty));
        lines.extend(a.difference(b).map(|i| format!("+ {part}: {i}")));
        lines.extend(b.difference(a).filter(|i| !i.ends_with("(dead socket)")).map(|i| format!("- {part}: {i}")));
    }
    lines
}

/// Panics with what changed unless the host is as `before` was: the test's own parts always,
/// the machine's only if no other run's runtime ran at any of `seen` (the moments this test
/// looked, `before` and `after` included).
fn assert_as_before(before: &HostSnapshot, after: &HostSnapshot, seen: &[&HostSnapshot], scope: &Scope) {
    let (b, a) = (before.view(scope), after.view(scope));
    let mut changes = diff(&b.own, &a.own);
    let others: BTreeSet<String> =
        [before, after].into_iter().chain(seen.iter().copied()).flat_map(|s| s.view(scope).others).collect();
    if others.is_empty() {
        changes.extend(diff(&b.machine, &a.machine));
    } else {
        let shown: Vec<&String> = others.iter().take(5).collect();
        eprintln!(
            "the machine-wide parts (kernel settings, host dirs, links, iptables) were not compared: {} processes \
             of other runs' nodes ran meanwhile, such as:\n  {}",
            others.len(),
            shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  ")
        );
    }
    if before.iptables.is_none() {
        eprintln!("iptables chains not compared: this machine has no iptables");
    }
    assert!(changes.is_empty(), "the host is not as it was before (+ appeared, - went):\n{}", changes.join("\n"));
}

/// Asserts that `during` shows the test's nodes: their cgroups and processes, so that an
/// unchanged host afterwards means they were removed and not that the snapshot missed them.
/// Their mounts (pod volumes, netns files, the kubelet's root) stay in the nodes' own mount
/// namespaces, which end with their last process: the host sees none of them even now.
fn assert_sees_the_nodes(during: &HostSnapshot, scope: &Scope) {
    let v = during.view(scope);
    for part in ["cgroup", "process"] {
        assert!(!v.own(part).is_empty(), "the snapshot finds no {part} of the running nodes: {:#?}", v.own);
    }
    assert!(v.own("mount").is_empty(), "node mounts leaked into the host's mount namespace: {:#?}", v.own("mount"));
    eprintln!(
        "while the nodes ran: {} cgroups, {} processes of this test",
        v.own("cgroup").len(),
        v.own("process").len()
    );
}

/// The mounts in the mount namespaces of this test's nodes (their containerds'), as mountinfo
/// lines: what the kubelet and containerd mount stays there.
fn node_namespace_mounts(during: &HostSnapshot, scope: &Scope) -> Vec<String> {
    let containerds: Vec<&Proc> =
        during.processes.iter().filter(|p| p.comm == "containerd" && scope.owns(&p.cmdline)).collect();
    assert!(!containerds.is_empty(), "a containerd of this test runs");
    containerds
        .iter()
        .flat_map(|c| {
            std::fs::read_to_string(format!("/proc/{}/mountinfo", c.pid))
                .unwrap_or_default()
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|l| scope.owns(l) || l.contains(" /var/lib/kubelet/"))
        .collect()
}

fn read_entries(dir: &Path, bound: &BTreeSet<&str>) -> Option<Vec<Entry>> {
    use std::os::unix::fs::FileTypeExt as _;
    let entries = std::fs::read_dir(dir).ok()?;
    let mut out: Vec<Entry> = entries
        .flatten()
        .map(|e| {
            let path = e.path();
            let t = e.file_type().ok();
            let (kind, mentions) = match t {
                Some(t) if t.is_symlink() => {
                    ("link", std::fs::read_link(&path).map(|p| p.display().to_string()).unwrap_or_default())
                }
                Some(t) if t.is_socket() => {
                    let live = bound.contains(path.to_string_lossy().as_ref());
                    (if live { "live socket" } else { "dead socket" }, String::new())
                }
                Some(t) if t.is_dir() => ("dir", String::new()),
                // A CNI result names the pod's network namespace, under its node's dir.
                _ => ("file", head(&path)),
            };
            Entry { name: e.file_name().to_string_lossy().into_owned(), kind, mentions }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Some(out)
}

/// The first 64 KiB of a file, as text.
fn head(path: &Path) -> String {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    if let Ok(f) = std::fs::File::open(path) {
        let _ = f.take(64 * 1024).read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Every live process (zombies hold nothing but their pid) with its name, command line and
/// cgroups.
fn processes() -> Vec<Proc> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("reading /proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Some(stat) = dracheck_clusters::local::process::proc_stat(pid) else { continue };
        if stat.state == 'Z' {
            continue;
        }
        let read = |f: &str| std::fs::read(e.path().join(f)).map(|b| String::from_utf8_lossy(&b).into_owned());
        let (Ok(comm), Ok(cmdline)) = (read("comm"), read("cmdline")) else { continue };
        out.push(Proc {
            pid,
            comm: comm.trim().to_string(),
            cmdline: cmdline.trim_end_matches('\0').replace('\0', " "),
            cgroup: read("cgroup").unwrap_or_default(),
        });
    }
    out
}

/// The network links of this network namespace, by name (`ip -o link`).
fn links() -> Vec<String> {
    let out = Command::new("ip").args(["-o", "link"]).stdin(Stdio::null()).output().expect("running ip -o link");
    assert!(out.status.success(), "ip -o link: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|name| name.split('@').next().unwrap_or(name).to_string())
        .collect()
}

/// The chains of every iptables table, or `None` where there is no `iptables`.
fn iptables_chains() -> Option<Vec<String>> {
    let mut chains = Vec::new();
    for table in ["filter", "nat", "mangle"] {
        let out = match Command::new("iptables").args(["-t", table, "-S"]).stdin(Stdio::null()).output() {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => panic!("running iptables: {e}"),
        };
        let text = String::from_utf8_lossy(&out.stdout);
        chains.extend(
            text.lines()
                .filter_map(|l| l.strip_prefix("-N ").or_else(|| l.strip_prefix("-P ")))
                .map(|c| format!("{table} {}", c.split(' ').next().unwrap_or(c))),
        );
    }
    Some(chains)
}

/// `/proc/self/mountinfo` writes spaces and a few other bytes as `\ooo`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        match octal {
            Some(v) if bytes[i] == b'\\' => {
                out.push(v);
                i += 4;
            }
            _ => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether this machine can run real nodes; says why not otherwise.
fn supported() -> bool {
    match host::check_support() {
        Ok(_) => true,
        Err(reason) => {
            eprintln!("skipped: {reason}");
            false
        }
    }
}

fn real_options(state_dir: Option<PathBuf>) -> LocalClusterOptions {
    LocalClusterOptions {
        node_kind: NodeKind::Real,
        state_dir,
        progress: Progress::stderr(),
        ..LocalClusterOptions::from_env()
    }
}

/// A pod of the workload image that sleeps on `node`; with a memory-backed emptyDir (a tmpfs
/// the kubelet mounts) when `volume`.
fn sleeper(name: &str, node: &str, volume: bool) -> Pod {
    let mut pod = dracheck_objects::pod("default", name)
        .image(images::WORKLOAD_IMAGE)
        .exec(&["sleep".into(), "3600".into()])
        .on_node(node)
        .build();
    if volume {
        let spec = pod.spec.as_mut().expect("a pod spec");
        spec.volumes = Some(vec![Volume {
            name: "scratch".into(),
            empty_dir: Some(EmptyDirVolumeSource { medium: Some("Memory".into()), ..Default::default() }),
            ..Default::default()
        }]);
        spec.containers[0].volume_mounts =
            Some(vec![VolumeMount { name: "scratch".into(), mount_path: "/scratch".into(), ..Default::default() }]);
    }
    pod
}

/// Creates `pods` and waits until each one runs (measured: about 1.5 s each).
async fn run_pods(client: &kube::Client, pods: &[Pod]) {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    for pod in pods {
        api.create(&PostParams::default(), pod).await.expect("creating a pod");
    }
    for pod in pods {
        let name = pod.metadata.name.as_deref().expect("a named pod");
        let running =
            kube::runtime::wait::await_condition(api.clone(), name, kube::runtime::wait::conditions::is_pod_running());
        if tokio::time::timeout(Duration::from_secs(120), running).await.is_err() {
            let status = api.get(name).await.ok().and_then(|p| p.status);
            panic!("pod {name} did not run within 120s: {status:#?}");
        }
    }
}

/// Waits for `what` to hold, for at most `timeout`; panics naming it and what `check` last
/// said otherwise.
fn wait_until(what: &str, timeout: Duration, mut check: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + timeout;
    loop {
        match check() {
            Ok(()) => return,
            Err(last) if Instant::now() >= deadline => panic!("not within {timeout:?}: {what}; {last}"),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

#[tokio::test]
async fn a_real_node_run_leaves_the_host_as_it_was() {
    if !supported() {
        return;
    }
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let before = HostSnapshot::take_clean();

    let mut cluster =
        LocalCluster::start(real_options(Some(tmp.path().join("state")))).await.expect("the cluster starts");
    let scope = Scope::new(tmp.path(), &[cluster.state_dir()]);
    cluster.add_nodes(2).await.expect("two real nodes start");
    run_pods(&cluster.client(), &[sleeper("plain", "node-1", false), sleeper("with-volume", "node-2", true)]).await;

    let during = HostSnapshot::take();
    let v = during.view(&scope);
    assert_sees_the_nodes(&during, &scope);
    let node_mounts = node_namespace_mounts(&during, &scope);
    assert!(
        node_mounts.iter().any(|m| m.contains("/volumes/kubernetes.io~empty-dir/scratch") && m.contains(" - tmpfs ")),
        "the emptyDir's tmpfs is among the mounts of the nodes' namespace: {node_mounts:#?}"
    );
    assert!(
        v.own("process").iter().any(|p| p.ends_with(": sleep 3600")),
        "the containers are among the processes: {:#?}",
        v.own("process")
    );
    // One log link per container, one network result per pod sandbox: host paths the
    // kubelet and containerd's CNI library use whatever their dirs.
    for dir in ["/var/log/containers", "/var/lib/cni/results"] {
        assert_eq!(v.own(dir).len(), 2, "each pod has its entry in {dir}: {:#?}", v.own);
    }

    cluster.stop();
    let after = HostSnapshot::take();
    assert_as_before(&before, &after, &[&during], &scope);
    eprintln!("took {:?}", started.elapsed());
}

/// The run that [`a_sigkilled_run_leaves_nothing_after_the_next_reap`] starts in a process of
/// its own and kills: a cluster, a real node and a running pod in `$TMPDIR`; it writes the
/// state dir's path to the file [`CHILD_READY`] names once the pod runs, then waits to be
/// killed.
#[tokio::test]
#[ignore = "the run that a_sigkilled_run_leaves_nothing_after_the_next_reap starts and kills"]
async fn a_run_to_be_killed() {
    let Some(ready) = std::env::var_os(CHILD_READY) else { return };
    let mut cluster = LocalCluster::start(real_options(None)).await.expect("the cluster starts");
    cluster.add_nodes(1).await.expect("a real node starts");
    run_pods(&cluster.client(), &[sleeper("doomed", "node-1", true)]).await;
    let ready = PathBuf::from(ready);
    let partial = ready.with_extension("partial");
    std::fs::write(&partial, cluster.state_dir().as_os_str().as_encoded_bytes()).unwrap();
    std::fs::rename(&partial, &ready).unwrap();
    std::future::pending::<()>().await;
}

/// Where the run to be killed says that its pod runs.
const CHILD_READY: &str = "DRACHECK_TEST_KILLED_RUN_READY";

/// SIGKILLs the run to be killed and reaps what it left, should the test fail halfway.
struct KillAndReap<'a> {
    child: Child,
    tmp: &'a Path,
}

impl Drop for KillAndReap<'_> {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = reap_stale_in(self.tmp);
    }
}

#[tokio::test]
async fn a_sigkilled_run_leaves_nothing_after_the_next_reap() {
    if !supported() {
        return;
    }
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let ready = tmp.path().join("ready");
    let log_path = tmp.path().join("killed-run.log");
    let before = HostSnapshot::take_clean();

    let log = std::fs::File::create(&log_path).unwrap();
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "a_run_to_be_killed", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_READY, &ready)
        .env("TMPDIR", tmp.path())
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut run = KillAndReap { child, tmp: tmp.path() };
    let child_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    wait_until("the run to be killed has its pod running", Duration::from_secs(300), || {
        if let Some(status) = run.child.try_wait().unwrap() {
            panic!("the run to be killed ended ({status}) before its pod ran:\n{}", child_log());
        }
        if ready.exists() { Ok(()) } else { Err(format!("{} not written yet", ready.display())) }
    });
    let state_dir = PathBuf::from(std::fs::read_to_string(&ready).unwrap());
    assert!(state_dir.starts_with(tmp.path()), "the run keeps its state in its TMPDIR: {}", state_dir.display());
    let scope = Scope::new(tmp.path(), &[&state_dir]);
    let during = HostSnapshot::take();
    assert_sees_the_nodes(&during, &scope);

    run.child.kill().unwrap(); // SIGKILL: no teardown runs.
    run.child.wait().unwrap();
    // PR_SET_PDEATHSIG takes the control plane, kubelet and containerd with it; the shims
    // (re-parented) and the containers stay, with the mounts and cgroups.
    let mentions_tmp = |comms: &[&str]| {
        let survivors: Vec<String> = processes()
            .into_iter()
            .filter(|p| comms.contains(&p.comm.as_str()) && scope.owns(&p.cmdline))
            .map(|p| format!("{} {}: {}", p.pid, p.comm, p.cmdline))
            .collect();
        if survivors.is_empty() { Ok(()) } else { Err(format!("still running: {survivors:#?}")) }
    };
    let control_plane = ["etcd", "kube-apiserver", "kube-scheduler", "kube-controller"];
    wait_until("the killed run's control plane, kubelet and containerd die with it", Duration::from_secs(10), || {
        mentions_tmp(&[&control_plane[..], &["kubelet", "containerd"]].concat())
    });
    let killed_snapshot = HostSnapshot::take();
    let killed = killed_snapshot.view(&scope);
    assert!(!killed.own("cgroup").is_empty(), "a killed run cannot remove its cgroups: {:#?}", killed.own);
    assert!(killed.own("mount").is_empty(), "the killed run's mounts stay in its nodes' namespaces: {:#?}", killed.own);
    let left: Vec<String> = killed.own.iter().map(|(part, items)| format!("{} {part}", items.len())).collect();
    eprintln!("left by the killed run: {}", left.join(", "));

    let reaped: Vec<Reaped> = reap_stale_in(tmp.path()).into_iter().map(|r| r.expect("the reap succeeds")).collect();
    let [reaped] = <[Reaped; 1]>::try_from(reaped).expect("exactly the killed run's state dir is reaped");
    assert_eq!(reaped.state_dir, state_dir);
    let prefix = &scope.prefixes[0];
    let said = reaped.to_string();
    for (what, found) in [
        ("the containers in the node's cgroup", format!("processes in /{prefix}node-1")),
        ("the shims in containerd's cgroup", format!("processes in /{prefix}node-1-runtime")),
        ("the pod's log link", "1 links in /var/log/containers".to_string()),
        ("the pod's network result", "1 CNI results in /var/lib/cni".to_string()),
    ] {
        assert!(reaped.scrubbed.iter().any(|s| s.contains(&found)), "the reap names {what} ({found:?}): {said}");
    }
    assert!(said.contains("; cleaned up "), "{said}");
    eprintln!("{said}");

    let after = HostSnapshot::take();
    assert_as_before(&before, &after, &[&during, &killed_snapshot], &scope);
    assert!(!state_dir.exists(), "the reap removed the state dir");
    drop(run);
    eprintln!("took {:?}", started.elapsed());
}

/// A node component that exits at start-up is named by its exit, at once (not by a readiness
/// wait that runs out), with its log and the log's tail, and the failed node leaves nothing.
/// `in_the_way` (under the node's dir) is made a directory where the component needs a file:
/// containerd cannot replace its socket (unlink fails with EISDIR); the kubelet cannot read its
/// CPU manager checkpoint and exits when it starts its container manager, after containerd ran.
#[rstest::rstest]
#[case::containerd("containerd", "containerd/containerd.sock", "containerd.sock")]
#[case::kubelet("kubelet", "cpu_manager_state", "cpu_manager_state")]
#[tokio::test]
async fn a_dying_component_is_named_with_its_log_and_nothing_is_left(
    #[case] component: &str,
    #[case] in_the_way: &str,
    #[case] named_in_log: &str,
) {
    if !supported() {
        return;
    }
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let before = HostSnapshot::take_clean();

    let mut cluster =
        LocalCluster::start(real_options(Some(tmp.path().join("state")))).await.expect("the cluster starts");
    let scope = Scope::new(tmp.path(), &[cluster.state_dir()]);
    let node_dir = cluster.state_dir().join("nodes/node-1");
    std::fs::create_dir_all(node_dir.join(in_the_way).join("in-the-way")).unwrap();
    let node_started = Instant::now();
    let err = cluster.add_nodes(1).await.expect_err("node-1 cannot start");
    let took = node_started.elapsed();

    let ClusterError::ComponentDied { component: died, status, log, tail } = &err else {
        panic!("not the {component}'s exit: {err:?}");
    };
    assert_eq!(died, &format!("{component} of node-1"), "{err}");
    assert!(status.contains("exit status"), "{status}");
    assert_eq!(log, &node_dir.join(format!("{component}.log")), "{err}");
    assert!(tail.contains(named_in_log), "the log tail says what the {component} failed on: {tail}");
    assert!(err.to_string().contains(tail.as_str()), "the message quotes the tail: {err}");
    assert_eq!(err.failure(), dracheck_clusters::Failure::ClusterDown, "a cluster that could not be brought up");
    eprintln!("add_nodes failed after {took:?}: {err}");
    let failed = HostSnapshot::take();
    let v = failed.view(&scope);
    assert!(v.own("cgroup").is_empty(), "the failed node's cgroups are gone at once: {:#?}", v.own("cgroup"));
    assert!(v.own("mount").is_empty(), "the failed node's mounts are gone at once: {:#?}", v.own("mount"));

    cluster.stop();
    let after = HostSnapshot::take();
    assert_as_before(&before, &after, &[&failed], &scope);
    eprintln!("took {:?}", started.elapsed());
}
