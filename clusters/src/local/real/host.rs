//! What a real node needs from the machine and changes on it, and how it is put back: the
//! checks before a start (root, cgroups), the node's cgroups, the mounts under its dirs, the
//! kernel settings the kubelet writes, and the log links it leaves in `/var/log/containers`.
//! Everything here is idempotent, because it also runs for the leftovers of a killed run.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The kernel settings the kubelet sets at start-up (`setupKernelTunables`), as
/// `/proc/sys` paths.
pub const KUBELET_SYSCTLS: &[&str] = &["vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"];
/// The inotify instances one user may hold. Measured: a real node's kubelet holds 6 and its
/// containerd 2, a control plane 13; Debian's default of 128 stops the kubelet of the 15th
/// node on a machine (cAdvisor: `inotify_init: too many open files`). dracheck raises it to
/// [`INOTIFY_INSTANCES`] while real nodes run, and puts it back with the kubelet's settings.
pub const INOTIFY_SYSCTL: &str = "fs/inotify/max_user_instances";
pub const INOTIFY_INSTANCES: u64 = 8192;

/// Raises the inotify instance limit to [`INOTIFY_INSTANCES`] unless it is that high already;
/// returns whether it changed it. The value before is in the machine's record.
pub fn raise_inotify_instances() -> io::Result<bool> {
    let now: u64 = std::fs::read_to_string(proc_sys(INOTIFY_SYSCTL))?.trim().parse().map_err(io::Error::other)?;
    if now >= INOTIFY_INSTANCES {
        return Ok(false);
    }
    std::fs::write(proc_sys(INOTIFY_SYSCTL), INOTIFY_INSTANCES.to_string())?;
    Ok(true)
}

/// The directory the kubelet writes container log links into; fixed in the kubelet.
const CONTAINER_LOG_LINKS: &str = "/var/log/containers";
/// Where containerd's shims listen, whatever containerd's own state dir.
const SHIM_SOCKETS: &str = "/run/containerd/s";
/// libcni's cache dir; fixed in containerd's CNI library.
const CNI_CACHE: &str = "/var/lib/cni";
/// Where the kubelet's device manager listens (`kubelet.sock`), whatever its `--root-dir`:
/// `pluginapi.KubeletSocket` is a constant.
const DEVICE_PLUGINS: &str = "/var/lib/kubelet/device-plugins";

/// Why this machine cannot run real nodes, or `Ok` with its cgroup layout.
pub fn check_support() -> Result<Cgroups, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("real nodes need root: the kubelet and containerd mount, create cgroups and network \
                    namespaces"
            .into());
    }
    Cgroups::detect().ok_or_else(|| "no cgroup hierarchy is mounted under /sys/fs/cgroup".into())
}

/// The cgroup hierarchies of the machine: one per controller on cgroup v1, one on v2.
#[derive(Debug, Clone)]
pub struct Cgroups {
    /// v1: each mounted hierarchy (cpu, memory, pids, …); v2: the unified root only.
    pub hierarchies: Vec<PathBuf>,
    pub v2: bool,
}

impl Cgroups {
    pub fn detect() -> Option<Cgroups> {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let mut v1 = Vec::new();
        let mut v2 = None;
        for line in mounts.lines() {
            let Some((left, right)) = line.split_once(" - ") else { continue };
            let mount_point = left.split(' ').nth(4).map(unescape);
            let fstype = right.split(' ').next();
            match (fstype, mount_point) {
                (Some("cgroup"), Some(p)) => v1.push(PathBuf::from(p)),
                (Some("cgroup2"), Some(p)) if p == "/sys/fs/cgroup" => v2 = Some(PathBuf::from(p)),
                // The hybrid layout's v2 mount (`/sys/fs/cgroup/unified`): runc mirrors each
                // container's cgroup there, so it is the node's to clean up too.
                (Some("cgroup2"), Some(p)) => v1.push(PathBuf::from(p)),
                _ => {}
            }
        }
        if !v1.is_empty() {
            // The named `systemd` hierarchy too: the kubelet checks that its cgroup root exists
            // in every mounted hierarchy.
            v1.sort();
            return Some(Cgroups { hierarchies: v1, v2: false });
        }
        v2.map(|root| Cgroups { hierarchies: vec![root], v2: true })
    }

    /// Creates `/<name>` in every hierarchy, ready to take processes (on v1 the cpuset
    /// hierarchy refuses processes until `cpuset.cpus` and `cpuset.mems` are set).
    pub fn create(&self, name: &str) -> io::Result<()> {
        for h in &self.hierarchies {
            let dir = h.join(name);
            std::fs::create_dir_all(&dir)?;
            for file in ["cpuset.cpus", "cpuset.mems"] {
                let parent = h.join(file);
                if !self.v2 && parent.exists() {
                    let value = std::fs::read_to_string(&parent)?;
                    std::fs::write(dir.join(file), value.trim())?;
                }
            }
        }
        if self.v2 {
            // The kubelet manages controllers below its root only where the parent delegates
            // them.
            let root = &self.hierarchies[0];
            let controllers = std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
            let enable: Vec<String> = controllers.split_whitespace().map(|c| format!("+{c}")).collect();
            let _ = std::fs::write(root.join("cgroup.subtree_control"), enable.join(" "));
            let _ = std::fs::write(root.join(name).join("cgroup.subtree_control"), enable.join(" "));
        }
        Ok(())
    }

    /// Moves `pid` into `/<name>` of every hierarchy: what it forks stays there, so that
    /// [`Cgroups::kill_all`] finds it.
    pub fn add(&self, name: &str, pid: u32) -> io::Result<()> {
        for h in &self.hierarchies {
            std::fs::write(h.join(name).join("cgroup.procs"), pid.to_string())?;
        }
        Ok(())
    }

    /// Every process in `/<name>` and below, by the first hierarchy.
    pub fn processes(&self, name: &str) -> Vec<u32> {
        let mut pids = Vec::new();
        if let Some(h) = self.hierarchies.first() {
            collect_procs(&h.join(name), &mut pids);
        }
        pids
    }

    /// SIGKILLs every process in `/<name>` and below until none is left (or `within` has
    /// passed); returns how many were killed.
    pub fn kill_all(&self, name: &str, within: Duration) -> usize {
        let deadline = Instant::now() + within;
        let mut killed = 0;
        loop {
            let pids = self.processes(name);
            if pids.is_empty() || Instant::now() >= deadline {
                return killed;
            }
            for pid in pids {
                // SAFETY: kill(2) with a pid read from our own cgroup.
                if unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) } == 0 {
                    killed += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Removes `/<name>` and everything below it from every hierarchy, deepest first; a
    /// cgroup still holding a process stays and is named in the error.
    pub fn remove(&self, name: &str) -> io::Result<()> {
        let mut first_error = None;
        for h in &self.hierarchies {
            let dir = h.join(name);
            if !dir.exists() {
                continue;
            }
            let mut dirs = Vec::new();
            collect_dirs(&dir, &mut dirs);
            dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
            for d in dirs {
                if let Err(e) = std::fs::remove_dir(&d)
                    && e.kind() != io::ErrorKind::NotFound
                {
                    first_error.get_or_insert_with(|| io::Error::new(e.kind(), format!("{}: {e}", d.display())));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The top-level cgroups whose name starts with `prefix`, in any hierarchy.
    pub fn named_with_prefix(&self, prefix: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .hierarchies
            .iter()
            .filter_map(|h| std::fs::read_dir(h).ok())
            .flatten()
            .flatten()
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.starts_with(prefix))
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

fn collect_procs(dir: &Path, out: &mut Vec<u32>) {
    if let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        out.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
    }
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            collect_procs(&entry.path(), out);
        }
    }
}

fn collect_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    out.push(dir.to_path_buf());
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            collect_dirs(&entry.path(), out);
        }
    }
}

/// `/proc/self/mountinfo` escapes spaces and a few other bytes as `\ooo`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && let Ok(v) = u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 4]).unwrap_or("x"), 8)
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount points at or below `dir`, deepest first.
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") else { return Vec::new() };
    let mut found: Vec<PathBuf> = mounts
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(unescape))
        .map(PathBuf::from)
        .filter(|p| p.starts_with(dir))
        .collect();
    found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    found.dedup();
    found
}

/// Detaches every mount at or below `dir` (volumes, the pods' network namespaces, the
/// container root filesystems); returns how many there were.
pub fn unmount_under(dir: &Path) -> usize {
    let mut count = 0;
    // A mount can hide another at the same point; a few rounds get to the bottom.
    for _ in 0..5 {
        let mounts = mounts_under(dir);
        if mounts.is_empty() {
            break;
        }
        for m in mounts {
            let Ok(c) = std::ffi::CString::new(m.as_os_str().as_encoded_bytes()) else { continue };
            // SAFETY: umount2 with a valid C string; MNT_DETACH never blocks on busy mounts.
            if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0 {
                count += 1;
            }
        }
    }
    count
}

/// The machine as it was before the first real node started: one record for the whole machine
/// (two clusters side by side would otherwise each take the other's kubelet's settings for the
/// machine's), written by the first real node of any cluster and removed by the restore that
/// finds no kubelet left. It lives in `/run`, which a reboot empties, as it resets the
/// settings.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SysctlsBefore {
    pub values: BTreeMap<String, String>,
    /// Whether `/var/log/containers` existed: if not, it is removed again once empty.
    pub container_log_links_existed: bool,
    /// Whether libcni's cache (`/var/lib/cni`) existed: containerd's CNI library keeps each
    /// pod's network result there, a host path no setting moves.
    #[serde(default)]
    pub cni_cache_existed: bool,
    /// Whether `/run/containerd` existed: containerd puts its shims' sockets in
    /// `/run/containerd/s` whatever its state dir.
    #[serde(default)]
    pub shim_sockets_existed: bool,
    /// Whether `/var/lib/kubelet` existed: the kubelet creates [`DEVICE_PLUGINS`] in it
    /// whatever its root dir.
    #[serde(default)]
    pub kubelet_dir_existed: bool,
    /// Whether `/var/run/cdi` existed: each node's mount namespace binds its CDI dir there
    /// (`mountns`), which needs the mount point on the host.
    #[serde(default)]
    pub cdi_dir_existed: bool,
}

/// The machine-wide record.
pub const MACHINE_RECORD: &str = "/run/dracheck/host-before.json";
/// How long the machine's record must go untouched, with no kubelet running, before it counts
/// as abandoned: far longer than a node takes from recording to its kubelet's start.
const ABANDONED_AFTER: Duration = Duration::from_secs(60);
/// In a cluster's state dir: the cluster runs (or ran) real nodes, so its teardown scrubs.
const REAL_NODES_MARK: &str = "real-nodes";

/// Whether the cluster in `state_dir` started real nodes.
pub fn has_real_nodes(state_dir: &Path) -> bool {
    state_dir.join(REAL_NODES_MARK).exists()
}

impl SysctlsBefore {
    /// Marks the cluster in `state_dir` as one with real nodes and returns the machine's
    /// record, made now if there is none: a later node (of this or another cluster) finds the
    /// record and keeps it, since by then a kubelet has changed the values.
    pub fn record_once(state_dir: &Path) -> io::Result<SysctlsBefore> {
        std::fs::write(state_dir.join(REAL_NODES_MARK), "")?;
        Self::record_once_at(Path::new(MACHINE_RECORD))
    }

    fn record_once_at(path: &Path) -> io::Result<SysctlsBefore> {
        if let Some(before) = Self::load_at(path) {
            // Touched, so that [`SysctlsBefore::abandoned_at`] does not take the record of a
            // node about to start its kubelet for one that a killed run left.
            std::fs::File::options().append(true).open(path)?.set_modified(std::time::SystemTime::now())?;
            return Ok(before);
        }
        let before = SysctlsBefore {
            values: KUBELET_SYSCTLS
                .iter()
                .chain([&INOTIFY_SYSCTL])
                .filter_map(|k| Some((k.to_string(), std::fs::read_to_string(proc_sys(k)).ok()?.trim().to_string())))
                .collect(),
            container_log_links_existed: Path::new(CONTAINER_LOG_LINKS).exists(),
            cni_cache_existed: Path::new(CNI_CACHE).exists(),
            shim_sockets_existed: Path::new(SHIM_SOCKETS).parent().is_some_and(Path::exists),
            kubelet_dir_existed: Path::new(DEVICE_PLUGINS).parent().is_some_and(Path::exists),
            cdi_dir_existed: Path::new(super::mountns::CDI_ROOT).exists(),
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        // Two runs starting together: the first to create the file wins, the other reads it.
        let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                std::thread::sleep(std::time::Duration::from_millis(50));
                return Self::load_at(path).ok_or(e);
            }
            Err(e) => return Err(e),
        };
        io::Write::write_all(&mut file, &serde_json::to_vec_pretty(&before).map_err(io::Error::other)?)?;
        Ok(before)
    }

    /// Puts the machine back from a record that no run will restore: one left by runs that
    /// were all killed (a SIGKILL, an ended session) without a state dir that a reap finds,
    /// such as a test's. It is abandoned when no kubelet runs and no node has started for
    /// [`ABANDONED_AFTER`]; a node that is starting touches the record first. Returns the
    /// settings it changed.
    pub fn restore_if_abandoned() -> Vec<String> {
        match Self::abandoned_at(Path::new(MACHINE_RECORD), ABANDONED_AFTER) {
            Some(before) if !other_kubelet_running() => before.restore(),
            _ => Vec::new(),
        }
    }

    /// The record at `path` if no node has touched it for `quiet`.
    fn abandoned_at(path: &Path, quiet: Duration) -> Option<SysctlsBefore> {
        let age = std::fs::metadata(path).ok()?.modified().ok()?.elapsed().unwrap_or_default();
        if age < quiet {
            return None;
        }
        Self::load_at(path)
    }

    /// The machine's record, while a real node runs or a run's leftovers are not cleaned up.
    pub fn load() -> Option<SysctlsBefore> {
        Self::load_at(Path::new(MACHINE_RECORD))
    }

    fn load_at(path: &Path) -> Option<SysctlsBefore> {
        serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
    }

    /// Writes the recorded values back and removes the record, unless a kubelet still runs
    /// on this machine (it set them, and would set them again; the last one's teardown
    /// restores). Returns the settings it changed.
    pub fn restore(&self) -> Vec<String> {
        if other_kubelet_running() {
            return Vec::new();
        }
        let _ = std::fs::remove_file(MACHINE_RECORD);
        if let Some(dir) = Path::new(MACHINE_RECORD).parent() {
            let _ = std::fs::remove_dir(dir);
        }
        let mut changed = Vec::new();
        for (key, value) in &self.values {
            let now = std::fs::read_to_string(proc_sys(key)).unwrap_or_default();
            if now.trim() != value && std::fs::write(proc_sys(key), value).is_ok() {
                changed.push(format!("{}={value}", key.replace('/', ".")));
            }
        }
        if !self.container_log_links_existed {
            // Only when empty: another kubelet's links stay.
            let _ = std::fs::remove_dir(CONTAINER_LOG_LINKS);
        }
        // A killed shim leaves its socket; a live containerd's shims' are bound and stay.
        remove_dead_sockets(Path::new(SHIM_SOCKETS));
        if !self.shim_sockets_existed {
            for dir in [SHIM_SOCKETS, "/run/containerd"] {
                let _ = std::fs::remove_dir(dir);
            }
        }
        if !self.cni_cache_existed {
            for dir in ["results", ""] {
                let _ = std::fs::remove_dir(Path::new(CNI_CACHE).join(dir));
            }
        }
        remove_dead_sockets(Path::new(DEVICE_PLUGINS));
        if !self.kubelet_dir_existed {
            for dir in [DEVICE_PLUGINS, "/var/lib/kubelet"] {
                let _ = std::fs::remove_dir(dir);
            }
        }
        if !self.cdi_dir_existed {
            let _ = std::fs::remove_dir(super::mountns::CDI_ROOT);
        }
        changed
    }
}

fn proc_sys(key: &str) -> PathBuf {
    Path::new("/proc/sys").join(key)
}

/// Any process named `kubelet` on the machine that still runs: the zombie of a killed run's
/// kubelet stays in /proc until init reaps it (seconds later on some machines), and must not
/// keep the reap of that run from putting the machine back.
fn other_kubelet_running() -> bool {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "kubelet"))
        .any(|pid| crate::local::process::proc_stat(pid).is_some_and(|s| s.state != 'Z'))
}

/// Removes libcni's cached results of the pods whose network namespace was under
/// `node_root` (containerd keeps them there, `netns_mounts_under_state_dir`).
pub fn remove_cni_results(node_root: &Path) -> usize {
    let needle = node_root.display().to_string();
    let mut removed = 0;
    for entry in std::fs::read_dir(Path::new(CNI_CACHE).join("results")).into_iter().flatten().flatten() {
        if std::fs::read_to_string(entry.path()).is_ok_and(|t| t.contains(&needle))
            && std::fs::remove_file(entry.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// Removes the sockets in `dir` that nothing listens on (a stopped kubelet's `kubelet.sock`, a
/// killed shim's socket).
fn remove_dead_sockets(dir: &Path) -> usize {
    use std::os::unix::fs::FileTypeExt as _;
    let bound = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
    let mut removed = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path().display().to_string();
        if entry.file_type().is_ok_and(|t| t.is_socket())
            && !bound.lines().any(|l| l.ends_with(&path))
            && std::fs::remove_file(entry.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// Removes the links in `/var/log/containers` that point into `logs_dir` (a node's pod logs).
pub fn remove_container_log_links(logs_dir: &Path) -> usize {
    let mut removed = 0;
    for entry in std::fs::read_dir(CONTAINER_LOG_LINKS).into_iter().flatten().flatten() {
        if std::fs::read_link(entry.path()).is_ok_and(|t| t.starts_with(logs_dir))
            && std::fs::remove_file(entry.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(r"/tmp/a\040b"), "/tmp/a b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape(r"/end\04"), r"/end\04");
    }

    #[test]
    fn the_machine_is_recorded_once_for_every_cluster() {
        let dir = tempfile::tempdir().unwrap();
        let record = dir.path().join("run/host-before.json");
        let first = SysctlsBefore::record_once_at(&record).unwrap();
        assert_eq!(first.values.len(), KUBELET_SYSCTLS.len() + 1, "{first:?}");
        let mut changed = first.clone();
        changed.values.insert("kernel/panic".into(), "12345".into());
        std::fs::write(&record, serde_json::to_vec(&changed).unwrap()).unwrap();
        // A later node, of this or another cluster, keeps the first record, not what it reads
        // now (a kubelet has changed it by then).
        assert_eq!(SysctlsBefore::record_once_at(&record).unwrap(), changed);
        assert_eq!(SysctlsBefore::load_at(&record).unwrap(), changed);
    }

    #[test]
    fn a_record_is_abandoned_only_once_no_node_has_touched_it_for_a_while() {
        let dir = tempfile::tempdir().unwrap();
        let record = dir.path().join("host-before.json");
        assert_eq!(SysctlsBefore::abandoned_at(&record, Duration::ZERO), None, "no record, nothing to restore");
        let first = SysctlsBefore::record_once_at(&record).unwrap();
        assert_eq!(SysctlsBefore::abandoned_at(&record, Duration::from_secs(60)), None, "just written");
        let an_hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options().append(true).open(&record).unwrap().set_modified(an_hour_ago).unwrap();
        assert_eq!(SysctlsBefore::abandoned_at(&record, Duration::from_secs(60)), Some(first.clone()));
        // A node starting now keeps the record and makes it fresh again.
        assert_eq!(SysctlsBefore::record_once_at(&record).unwrap(), first);
        assert_eq!(SysctlsBefore::abandoned_at(&record, Duration::from_secs(60)), None, "touched by a new node");
    }

    #[test]
    fn a_mount_below_a_dir_is_found_and_detached() {
        if check_support().is_err() {
            eprintln!("skipped: needs root and cgroups");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a b");
        std::fs::create_dir(&target).unwrap();
        let c = std::ffi::CString::new(target.as_os_str().as_encoded_bytes()).unwrap();
        let fstype = std::ffi::CString::new("tmpfs").unwrap();
        // SAFETY: mounting a tmpfs on a dir of our own temp dir.
        let rc = unsafe { libc::mount(fstype.as_ptr(), c.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
        assert_eq!(mounts_under(dir.path()), vec![target.clone()]);
        assert_eq!(unmount_under(dir.path()), 1);
        assert!(mounts_under(dir.path()).is_empty());
    }

    #[test]
    fn a_cgroup_with_processes_is_emptied_and_removed() {
        let Ok(cgroups) = check_support() else {
            eprintln!("skipped: needs root and cgroups");
            return;
        };
        let name = format!("dracheck-test-{}", std::process::id());
        cgroups.create(&name).unwrap();
        let mut child = std::process::Command::new("sleep").arg("600").spawn().unwrap();
        cgroups.add(&name, child.id()).unwrap();
        assert_eq!(cgroups.processes(&name), vec![child.id()]);
        assert!(cgroups.named_with_prefix("dracheck-test-").contains(&name));
        assert_eq!(cgroups.kill_all(&name, Duration::from_secs(5)), 1);
        let _ = child.wait();
        cgroups.remove(&name).unwrap();
        assert!(cgroups.hierarchies.iter().all(|h| !h.join(&name).exists()));
    }
}
