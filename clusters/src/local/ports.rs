//! Loopback ports for the control plane: free ones picked by the kernel, or a port the user
//! asked for, checked before anything starts.

use std::collections::HashSet;
use std::net::{Ipv4Addr, TcpListener};
use std::sync::Mutex;

use crate::error::{ClusterError, Result};

/// Ports this process handed out. A component binds its port a few seconds after it was
/// picked; without the record, a second cluster starting in the same process (tests run side
/// by side) could be handed the same port in between.
static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// Where picked ports come from: below the kernel's ephemeral range, so that neither an
/// outgoing connection nor another `bind(0)` gets a port between our pick and the
/// component's bind.
const PICK_FROM: u16 = 20000;

/// A port that is free on 127.0.0.1, below the ephemeral range, and not handed out before by
/// this process. Another process may still take it before the component binds; that case
/// surfaces as the component dying with "address in use".
pub fn free_port() -> Result<u16> {
    let upper = ephemeral_low().max(PICK_FROM + 1000);
    let span = u32::from(upper - PICK_FROM);
    let mut handed = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    let handed = handed.get_or_insert_with(HashSet::new);
    let seed = std::process::id().wrapping_mul(2_654_435_761)
        ^ std::time::UNIX_EPOCH.elapsed().map(|d| d.subsec_nanos()).unwrap_or(0);
    for i in 0..span {
        let port = PICK_FROM + ((seed.wrapping_add(i.wrapping_mul(7919))) % span) as u16;
        if handed.contains(&port) {
            continue;
        }
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            handed.insert(port);
            return Ok(port);
        }
    }
    Err(ClusterError::io("finding a free port on 127.0.0.1")(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        format!("every port in {PICK_FROM}..{upper} is taken"),
    )))
}

/// The lower end of the kernel's ephemeral port range (Linux default 32768).
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768)
}

/// `port` if it is free, else a free one when `port` is `None`.
pub fn claim(port: Option<u16>, component: &str) -> Result<u16> {
    match port {
        None => free_port(),
        Some(port) => match TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
            Ok(_) => Ok(port),
            Err(_) => Err(ClusterError::PortInUse { port, component: component.to_string() }),
        },
    }
}

/// Whether anything accepts connections on 127.0.0.1:`port`.
pub fn is_listening(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(&(Ipv4Addr::LOCALHOST, port).into(), std::time::Duration::from_millis(200))
        .is_ok()
}

/// The processes listening on TCP `port` (IPv4), with their command lines, read from
/// `/proc/net/tcp` and the processes' socket descriptors. Tells "still ours" apart from a
/// port that another process took after we released it.
pub fn listeners(port: u16) -> Vec<(u32, String)> {
    let Ok(table) = std::fs::read_to_string("/proc/net/tcp") else { return Vec::new() };
    let inodes: Vec<String> = table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let local_port = u16::from_str_radix(f.get(1)?.rsplit(':').next()?, 16).ok()?;
            (local_port == port && *f.get(3)? == "0A").then(|| f.get(9).map(|s| format!("socket:[{s}]")))?
        })
        .collect();
    if inodes.is_empty() {
        return Vec::new();
    }
    let Ok(procs) = std::fs::read_dir("/proc") else { return Vec::new() };
    procs
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
                    .any(|target| inodes.iter().any(|i| target.to_string_lossy() == *i))
            })
        })
        .map(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            (pid, String::from_utf8_lossy(&cmd).replace('\0', " "))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_port_is_refused_with_its_component() {
        let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = taken.local_addr().unwrap().port();
        let err = claim(Some(port), "kube-apiserver").unwrap_err();
        assert!(matches!(err, ClusterError::PortInUse { port: p, .. } if p == port));
        assert!(err.to_string().contains("kube-apiserver"));
        assert!(is_listening(port));
        let me = std::process::id();
        assert!(listeners(port).iter().any(|(pid, _)| *pid == me), "{:?}", listeners(port));
        drop(taken);
        assert_eq!(claim(Some(port), "kube-apiserver").unwrap(), port);
    }

    #[test]
    fn picked_ports_are_distinct_and_below_the_ephemeral_range() {
        let picked: Vec<u16> = (0..200).map(|_| free_port().unwrap()).collect();
        let distinct: HashSet<u16> = picked.iter().copied().collect();
        assert_eq!(distinct.len(), picked.len(), "a port was handed out twice");
        assert!(picked.iter().all(|p| (PICK_FROM..ephemeral_low().max(PICK_FROM + 1000)).contains(p)), "{picked:?}");
    }
}
