//! Waiting for components to become healthy, while watching that they do not die meanwhile.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::process::Supervised;
use crate::error::{ClusterError, Result, log_tail};

/// Polls `check` until it succeeds. Fails early with the log tail if any of `watched` exits,
/// and with the last check error after `timeout`.
pub async fn wait_healthy<F, Fut>(
    component: &str,
    timeout: Duration,
    watched: &mut [&mut Supervised],
    mut check: F,
) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = std::result::Result<(), String>>,
{
    let deadline = Instant::now() + timeout;
    let mut last;
    loop {
        for p in watched.iter_mut() {
            if let Some(status) = p.exited() {
                let r = p.record();
                return Err(ClusterError::ComponentDied {
                    component: r.name.clone(),
                    status: status.to_string(),
                    log: r.log.clone(),
                    tail: log_tail(&r.log, 12),
                });
            }
        }
        match tokio::time::timeout(Duration::from_secs(2), check()).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => last = e,
            Err(_) => last = "the health check timed out".into(),
        }
        if Instant::now() >= deadline {
            let log = watched
                .iter()
                .find(|p| p.record().name == component)
                .map(|p| p.record().log.clone())
                .unwrap_or_default();
            return Err(ClusterError::NotHealthy {
                component: component.to_string(),
                timeout_s: timeout.as_secs(),
                last,
                tail: log_tail(&log, 12),
                log,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// etcd's `/health` over plain HTTP on loopback.
pub async fn etcd_health(port: u16) -> std::result::Result<(), String> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.map_err(|e| e.to_string())?;
    stream.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").await.map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.map_err(|e| e.to_string())?;
    if response.contains("\"health\":\"true\"") {
        Ok(())
    } else {
        Err(format!("etcd answered {:?}", response.lines().last().unwrap_or_default()))
    }
}

/// GET `path` with a client of the cluster; 200 means healthy.
pub async fn http_ok(client: &kube::Client, path: &str) -> std::result::Result<(), String> {
    let req = http::Request::get(path).body(Vec::new()).map_err(|e| e.to_string())?;
    client.request_text(req).await.map(|_| ()).map_err(|e| e.to_string())
}
