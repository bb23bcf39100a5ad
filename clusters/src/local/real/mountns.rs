//! Each real node's view of the machine's paths: the node's containerd (with its shims and
//! containers) and its kubelet share a mount namespace of their own in which the paths every
//! node has, `/var/lib/kubelet` and `/var/run/cdi`, are the node's own dirs, as in a kind node
//! container. A driver installed from its chart mounts those paths as hostPath volumes and
//! registers `/var/lib/kubelet/plugins/<driver>/dra.sock` with the kubelet; several nodes on
//! one machine then neither share nor overwrite each other's sockets and CDI specs. Mounts
//! made in the namespace (the kubelet's volumes, containerd's) stay in it and go with its last
//! process, so none is left on the host.
//!
//! Host-process drivers still use the node dirs by their host paths, which the namespace
//! shows unchanged.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The kubelet's default root: hostPath volumes of DRA charts point into it.
pub const KUBELET_ROOT: &str = "/var/lib/kubelet";
/// Where DRA drivers write CDI specs by default (and containerd reads them).
pub const CDI_ROOT: &str = "/var/run/cdi";

/// A bind of a node dir (`source`) over a well-known path (`target`) in the node's namespace.
#[derive(Debug, Clone)]
pub struct Bind {
    pub source: PathBuf,
    pub target: PathBuf,
}

/// The binds of a node whose kubelet root is `root` and whose CDI dir is `cdi`.
pub fn node_binds(root: &Path, cdi: &Path) -> Vec<Bind> {
    vec![
        Bind { source: root.to_path_buf(), target: KUBELET_ROOT.into() },
        Bind { source: cdi.to_path_buf(), target: CDI_ROOT.into() },
    ]
}

/// Creates the binds' targets on the host where missing: a bind needs an existing mount point,
/// and a namespace shares the host's filesystems. They stay empty on the host; the machine
/// record removes the ones it did not find once no kubelet runs (`host::SysctlsBefore`).
pub fn ensure_mount_points(binds: &[Bind]) -> io::Result<()> {
    for b in binds {
        std::fs::create_dir_all(&b.target)?;
        std::fs::create_dir_all(&b.source)?;
    }
    Ok(())
}

fn cstring(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other)
}

/// Makes `cmd` start in a new mount namespace with `binds` applied. The namespace is a slave
/// of the host's: host mounts still appear in it, nothing mounted in it appears on the host.
pub fn start_in_new(cmd: &mut Command, binds: &[Bind]) -> io::Result<()> {
    let pairs: Vec<(CString, CString)> =
        binds.iter().map(|b| Ok((cstring(&b.source)?, cstring(&b.target)?))).collect::<io::Result<_>>()?;
    let root = CString::new("/").expect("no NUL");
    // SAFETY: between fork and exec only unshare(2) and mount(2), which are async-signal-safe
    // system calls on memory prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return Err(io::Error::last_os_error());
            }
            let slave = libc::MS_REC | libc::MS_SLAVE;
            if libc::mount(std::ptr::null(), root.as_ptr(), std::ptr::null(), slave, std::ptr::null()) != 0 {
                return Err(io::Error::last_os_error());
            }
            for (source, target) in &pairs {
                let flags = libc::MS_BIND | libc::MS_REC;
                if libc::mount(source.as_ptr(), target.as_ptr(), std::ptr::null(), flags, std::ptr::null()) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    Ok(())
}

/// The mount namespace of a running process, held open so that later processes (a restarted
/// kubelet) join it even after that process is gone.
pub struct Namespace(File);

impl Namespace {
    pub fn of(pid: u32) -> io::Result<Namespace> {
        File::open(format!("/proc/{pid}/ns/mnt")).map(Namespace)
    }

    /// Makes `cmd` start in this namespace.
    pub fn join(&self, cmd: &mut Command) -> io::Result<()> {
        let fd = self.0.try_clone()?;
        // SAFETY: setns(2) only, on a descriptor opened before the fork (the child is single
        // threaded, as setns into a mount namespace requires).
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNS) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Needs root (mount namespaces); skipped without it, as the real-node tests are.
    #[test]
    fn a_process_in_the_node_namespace_sees_the_node_dirs_at_the_well_known_paths() {
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: mount namespaces need root");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let (root, cdi) = (tmp.path().join("node"), tmp.path().join("cdi"));
        let binds = vec![
            Bind { source: root.clone(), target: tmp.path().join("well-known/kubelet") },
            Bind { source: cdi.clone(), target: tmp.path().join("well-known/cdi") },
        ];
        ensure_mount_points(&binds).unwrap();
        std::fs::write(root.join("from-node"), "kubelet").unwrap();
        std::fs::write(cdi.join("spec.json"), "cdi").unwrap();
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(format!(
            "cat {0}/kubelet/from-node {0}/cdi/spec.json && echo seen > {0}/kubelet/written && exec sleep 5",
            tmp.path().join("well-known").display()
        ));
        start_in_new(&mut cmd, &binds).unwrap();
        let mut child = cmd.stdout(std::process::Stdio::piped()).spawn().unwrap();
        let ns = Namespace::of(child.id()).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !root.join("written").exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // A second process joins the first one's namespace and sees the same binds.
        let mut join = Command::new("cat");
        join.arg(tmp.path().join("well-known/cdi/spec.json"));
        ns.join(&mut join).unwrap();
        let joined = join.output().unwrap();
        child.kill().unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "kubeletcdi");
        assert_eq!(String::from_utf8_lossy(&joined.stdout), "cdi");
        assert_eq!(
            std::fs::read_to_string(root.join("written")).unwrap().trim(),
            "seen",
            "writes land in the node dir"
        );
        // The host sees none of it at the well-known paths.
        assert!(!tmp.path().join("well-known/kubelet/from-node").exists());
        assert!(super::super::host::mounts_under(tmp.path()).is_empty(), "no mount left on the host");
    }
}
