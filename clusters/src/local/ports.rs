//! Loopback ports for the control plane: free ones picked by the kernel, or a port the user
//! asked for, checked before anything starts.

use std::net::{Ipv4Addr, TcpListener};

use crate::error::{ClusterError, Result};

/// A port that was free on 127.0.0.1 a moment ago. Another process may take it before the
/// component binds; that case surfaces as the component dying with "address in use".
pub fn free_port() -> Result<u16> {
    let listener =
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(ClusterError::io("finding a free port on 127.0.0.1"))?;
    listener.local_addr().map(|a| a.port()).map_err(ClusterError::io("reading a bound port"))
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
        drop(taken);
        assert_eq!(claim(Some(port), "kube-apiserver").unwrap(), port);
    }
}
