//! The `kubernetes` Service inside every pod of a real node. A driver installed from its chart
//! runs as a pod and finds the API server as every in-cluster client does: at
//! `KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT`, the Service's cluster IP. Pods here have
//! no route out of their network namespace (`cni`), and there is no kube-proxy, so each pod
//! gets a listener on that address *inside its own namespace* that forwards to the API
//! server on the host's loopback: what kube-proxy does for this one Service, with nothing
//! added to the host's network namespace. The cluster IP is in 127.0.0.0/8
//! (`SERVICE_RANGE`), so no traffic is addressed outside loopback.
//!
//! The handshake with the CNI plugin is a dir of files: ADD writes `<container>.netns` (the
//! pod's netns path) and waits for `<container>.ready`; DEL removes both. The proxy watches
//! the dir while the node runs; `serving` says that it does.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::task::{AbortHandle, JoinSet};

/// In the handshake dir: present while the proxy serves.
pub const SERVING: &str = "serving";

/// How often the dir is read: an ADD waits at most this long for its listener.
const POLL: Duration = Duration::from_millis(25);

/// The proxy of one node; stops (closing every listener and connection) when dropped.
pub struct ServiceProxy {
    dir: PathBuf,
    task: AbortHandle,
}

impl ServiceProxy {
    /// Serves the pods of the node whose containerd is `containerd_pid` (its mount namespace
    /// holds the pods' netns files): `listen` in each pod goes to `upstream` on the host.
    pub fn start(
        dir: &Path,
        containerd_pid: u32,
        listen: SocketAddr,
        upstream: SocketAddr,
    ) -> io::Result<ServiceProxy> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join(SERVING), "")?;
        let watched = dir.to_path_buf();
        let task = tokio::spawn(async move {
            let mut pods: HashMap<String, AbortHandle> = HashMap::new();
            loop {
                sync(&watched, containerd_pid, listen, upstream, &mut pods);
                tokio::time::sleep(POLL).await;
            }
        })
        .abort_handle();
        Ok(ServiceProxy { dir: dir.to_path_buf(), task })
    }
}

impl Drop for ServiceProxy {
    fn drop(&mut self) {
        // The pods' tasks are the watcher's: aborting it drops its map, not the tasks, so
        // the watcher's last act cannot be relied on; each pod task also ends when its
        // request file goes, and every one ends with the runtime.
        self.task.abort();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One pass over the handshake dir: a listener for each new request, none for a removed one.
fn sync(
    dir: &Path,
    containerd_pid: u32,
    listen: SocketAddr,
    upstream: SocketAddr,
    pods: &mut HashMap<String, AbortHandle>,
) {
    let requested: HashMap<String, PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.strip_suffix(".netns")?.to_string();
            let netns = std::fs::read_to_string(e.path()).ok()?;
            Some((name, PathBuf::from(netns.trim())))
        })
        .collect();
    // A request without an answer is new, or repeated by a second ADD: (re)made either way.
    pods.retain(|id, task| {
        let keep = requested.contains_key(id) && dir.join(format!("{id}.ready")).exists();
        if !keep {
            task.abort();
            let _ = std::fs::remove_file(dir.join(format!("{id}.ready")));
        }
        keep
    });
    for (id, netns) in requested {
        if pods.contains_key(&id) {
            continue;
        }
        // The netns file is a mount in the node's mount namespace, seen through containerd's root.
        let seen = Path::new(&format!("/proc/{containerd_pid}/root")).join(netns.strip_prefix("/").unwrap_or(&netns));
        let outcome = listen_in(&seen, listen).and_then(|l| {
            l.set_nonblocking(true)?;
            tokio::net::TcpListener::from_std(l)
        });
        let (task, ready) = match outcome {
            Ok(listener) => (tokio::spawn(forward(listener, upstream)).abort_handle(), "ok".to_string()),
            // The plugin fails the ADD with this text; the kubelet retries the sandbox.
            Err(e) => (
                tokio::spawn(async {}).abort_handle(),
                format!("error: listening on {listen} in {}: {e}", netns.display()),
            ),
        };
        // Whole or not at all: the plugin reads the answer as soon as the file is there.
        let answer = dir.join(format!("{id}.ready"));
        let tmp = dir.join(format!("{id}.ready.tmp"));
        if std::fs::write(&tmp, ready).and_then(|()| std::fs::rename(&tmp, &answer)).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        pods.insert(id, task);
    }
}

/// A listener on `addr` in the network namespace of the netns file `netns`, made on a thread
/// of its own that enters the namespace: a socket stays in the namespace it was made in.
fn listen_in(netns: &Path, addr: SocketAddr) -> io::Result<TcpListener> {
    let netns = netns.to_path_buf();
    std::thread::spawn(move || {
        let file = std::fs::File::open(&netns)?;
        // SAFETY: setns(2) on a descriptor this thread owns; the thread ends right after.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        TcpListener::bind(addr)
    })
    .join()
    .unwrap_or_else(|_| Err(io::Error::other("the listener thread panicked")))
}

/// Accepts in the pod and copies each connection to the API server and back; the connections
/// end with this task.
async fn forward(listener: tokio::net::TcpListener, upstream: SocketAddr) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((mut pod_side, _)) = accepted else { continue };
                connections.spawn(async move {
                    if let Ok(mut server_side) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut pod_side, &mut server_side).await;
                    }
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// Needs root (network namespaces); skipped without it, as the real-node tests are.
    #[tokio::test]
    async fn a_pod_reaches_the_host_listener_at_the_service_address_and_loses_it_on_del() {
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: network namespaces need root");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let netns = tmp.path().join("pod-netns");
        std::fs::write(&netns, "").unwrap();
        let made = std::process::Command::new("unshare")
            .arg(format!("--net={}", netns.display()))
            .args(["ip", "link", "set", "lo", "up"])
            .status()
            .unwrap();
        assert!(made.success());
        // The upstream: an echo server on the host's loopback.
        let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream_addr = upstream.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = upstream.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    let _ = s.write_all(&buf[..n]).await;
                });
            }
        });
        let dir = tmp.path().join("service");
        let listen: SocketAddr = "127.96.0.1:443".parse().unwrap();
        // This process's root stands in for containerd's: the netns file is a host mount here.
        let proxy = ServiceProxy::start(&dir, std::process::id(), listen, upstream_addr).unwrap();
        std::fs::write(dir.join("c1.netns"), netns.display().to_string()).unwrap();
        let ready = dir.join("c1.ready");
        for _ in 0..200 {
            if ready.exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(std::fs::read_to_string(&ready).unwrap(), "ok");
        let echoed = tokio::task::spawn_blocking({
            let netns = netns.clone();
            move || echo_through(&netns, "ping")
        })
        .await
        .unwrap();
        assert_eq!(echoed.as_deref(), Some("ping"), "the pod reaches the upstream at the service address");
        // The host's own loopback has nothing at the service address.
        assert!(std::net::TcpStream::connect(listen).is_err(), "nothing listens on the host");
        std::fs::remove_file(dir.join("c1.netns")).unwrap();
        for _ in 0..200 {
            if !ready.exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!ready.exists(), "DEL's removal closes the pod's listener");
        let after = tokio::task::spawn_blocking({
            let netns = netns.clone();
            move || echo_through(&netns, "ping")
        })
        .await
        .unwrap();
        assert_eq!(after, None, "nothing listens in the pod after DEL");
        drop(proxy);
        assert!(!dir.exists());
        let _ = std::process::Command::new("umount").arg(&netns).status();
    }

    /// Sends `text` to the service address from inside `netns` and returns what came back;
    /// `None` when the connection is refused.
    fn echo_through(netns: &Path, text: &str) -> Option<String> {
        let script =
            format!("exec 3<>/dev/tcp/127.96.0.1/443 || exit 7; printf {text} >&3; head -c {} <&3", text.len());
        let out = std::process::Command::new("nsenter")
            .arg(format!("--net={}", netns.display()))
            .args(["bash", "-c", &script])
            .output()
            .unwrap();
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }
}
