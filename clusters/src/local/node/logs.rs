//! The kubelet's HTTPS endpoint, reduced to what the apiserver proxies `pods/log` to:
//! `GET /containerLogs/{namespace}/{pod}/{container}` (with `tailLines`). It serves a
//! certificate of the cluster CA for the node's IP and accepts only clients with a
//! certificate of that CA, as the apiserver presents its kubelet client certificate.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_util::sync::CancellationToken;

use super::runtime::Runtime;

/// `(namespace, pod name)` → pod UID, kept by the pod worker.
pub type PodIndex = Arc<Mutex<HashMap<(String, String), String>>>;

pub fn tls_config(ca_pem: &str, cert_pem: &str, key_pem: &str) -> Result<Arc<rustls::ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(ca.map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| e.to_string())?;
    let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| e.to_string())?;
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(config))
}

/// Serves on `listener` until `stop`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    runtime: Arc<Runtime>,
    pods: PodIndex,
    stop: CancellationToken,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        let (stream, _peer): (tokio::net::TcpStream, SocketAddr) = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(_) => continue,
            },
        };
        let (acceptor, runtime, pods) = (acceptor.clone(), runtime.clone(), pods.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(stream).await else { return };
            let service = hyper::service::service_fn(move |req| {
                let response = handle(&req, &runtime, &pods);
                async move { Ok::<_, std::convert::Infallible>(response) }
            });
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
        });
    }
}

fn handle(req: &Request<hyper::body::Incoming>, runtime: &Runtime, pods: &PodIndex) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, body: String| {
        Response::builder()
            .status(status)
            .header("Content-Type", "text/plain")
            .body(Full::new(Bytes::from(body)))
            .expect("a valid response")
    };
    let path = req.uri().path();
    if path == "/healthz" {
        return reply(StatusCode::OK, "ok".into());
    }
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let ["containerLogs", ns, pod, container] = parts.as_slice() else {
        return reply(StatusCode::NOT_FOUND, format!("the emulated kubelet serves only /containerLogs, not {path}"));
    };
    let Some(uid) = pods.lock().unwrap().get(&(ns.to_string(), pod.to_string())).cloned() else {
        return reply(StatusCode::NOT_FOUND, format!("pod {ns}/{pod} is not on this node"));
    };
    let text = match std::fs::read_to_string(runtime.log_path(&uid, container)) {
        Ok(t) => t,
        Err(_) => return reply(StatusCode::NOT_FOUND, format!("container {container} of {ns}/{pod} has no log yet")),
    };
    let tail = req
        .uri()
        .query()
        .unwrap_or_default()
        .split('&')
        .find_map(|kv| kv.strip_prefix("tailLines="))
        .and_then(|n| n.parse::<usize>().ok());
    let body = match tail {
        Some(n) => {
            let lines: Vec<&str> = text.lines().collect();
            let mut out = lines[lines.len().saturating_sub(n)..].join("\n");
            out.push('\n');
            out
        }
        None => text,
    };
    reply(StatusCode::OK, body)
}
