//! Reaching a cluster named by a kubeconfig, and saying why it cannot be reached the way
//! kubectl does: the server URL and the cause (a CA that is not PEM, a certificate signed by
//! an unknown authority, a refused connection), instead of the HTTP client's bare "client
//! error (Connect)". Causes are read from the error's types, never from its message text.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError, NamedCluster};

/// Why no client for the cluster of a kubeconfig could be made.
#[derive(Debug, thiserror::Error)]
pub enum ReachError {
    #[error("cannot read the kubeconfig {}: {source}; pass --kubeconfig with a readable file", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: KubeconfigError,
    },
    #[error(
        "--context {context}: the kubeconfig {} has no such context; its contexts: {}. Pass one of them with \
         --context",
        .path.display(),
        if .known.is_empty() { "none".to_string() } else { .known.join(", ") }
    )]
    UnknownContext { path: PathBuf, context: String, known: Vec<String> },
    #[error(
        "the kubeconfig {} names the cluster at {server}, but {problem}; fix the kubeconfig (kubectl fails on it \
         the same way)",
        .path.display()
    )]
    BadCa { path: PathBuf, server: String, problem: String },
    #[error("the kubeconfig {} does not give a cluster ({source}); check --kubeconfig and --context", .path.display())]
    NoCluster {
        path: PathBuf,
        #[source]
        source: KubeconfigError,
    },
    #[error("no client for the cluster at {server}: {source}")]
    Client {
        server: String,
        #[source]
        source: kube::Error,
    },
}

impl ReachError {
    /// Bad input for a kubeconfig that cannot name a cluster; a cluster that is down where the
    /// client fails. The command line turns it into an exit code.
    pub fn failure(&self) -> crate::Failure {
        match self {
            ReachError::Client { .. } => crate::Failure::ClusterDown,
            _ => crate::Failure::BadInput,
        }
    }
}

/// A client for the cluster a kubeconfig names, and that cluster's server URL for messages.
pub struct Reached {
    pub client: kube::Client,
    pub server: String,
}

/// The kubeconfig at `path` with `context` (or its current one): checked as kubectl would
/// before any request (the context exists, the CA is PEM), then a client. No request is made.
pub async fn client(
    path: &Path,
    context: Option<&str>,
    connect_timeout: Option<Duration>,
) -> Result<Reached, ReachError> {
    let kc = Kubeconfig::read_from(path).map_err(|source| ReachError::Read { path: path.to_path_buf(), source })?;
    if let Some(context) = context
        && !kc.contexts.iter().any(|c| c.name == context)
    {
        let known = kc.contexts.iter().map(|c| c.name.clone()).collect();
        return Err(ReachError::UnknownContext { path: path.to_path_buf(), context: context.to_string(), known });
    }
    let cluster = cluster_of(&kc, context);
    let server = server_of(cluster);
    if let Some(problem) = cluster.and_then(ca_problem) {
        return Err(ReachError::BadCa { path: path.to_path_buf(), server, problem });
    }
    let opts = KubeConfigOptions { context: context.map(str::to_string), ..KubeConfigOptions::default() };
    let mut config = kube::Config::from_custom_kubeconfig(kc, &opts)
        .await
        .map_err(|source| ReachError::NoCluster { path: path.to_path_buf(), source })?;
    if connect_timeout.is_some() {
        config.connect_timeout = connect_timeout;
    }
    let client =
        kube::Client::try_from(config).map_err(|source| ReachError::Client { server: server.clone(), source })?;
    Ok(Reached { client, server })
}

/// The server URL of `cluster`, for messages.
pub fn server_of(cluster: Option<&NamedCluster>) -> String {
    cluster.and_then(|c| c.cluster.as_ref()?.server.clone()).unwrap_or_else(|| "(no server)".into())
}

/// The cluster entry the kubeconfig's `context` (or its current context) points at.
pub fn cluster_of<'a>(kc: &'a Kubeconfig, context: Option<&str>) -> Option<&'a NamedCluster> {
    let context = context.or(kc.current_context.as_deref())?;
    let cluster = kc.contexts.iter().find(|c| c.name == context)?.context.as_ref()?.cluster.clone();
    kc.clusters.iter().find(|c| c.name == cluster)
}

/// Whether the cluster's CA (`certificate-authority-data`, or the file `certificate-authority`
/// names) holds at least one PEM certificate. kube's loader accepts data without any PEM
/// block and only the TLS handshake fails later, as an unknown authority; kubectl says what
/// is wrong with the data, and so does this.
pub fn ca_problem(cluster: &NamedCluster) -> Option<String> {
    let c = cluster.cluster.as_ref()?;
    let (what, pem) = if let Some(data) = &c.certificate_authority_data {
        match base64::engine::general_purpose::STANDARD.decode(data.trim()) {
            Ok(pem) => ("certificate-authority-data".to_string(), pem),
            Err(e) => return Some(format!("its certificate-authority-data is not base64 ({e})")),
        }
    } else if let Some(file) = &c.certificate_authority {
        match std::fs::read(file) {
            Ok(pem) => (format!("certificate-authority {file}"), pem),
            Err(e) => return Some(format!("its certificate-authority {file} cannot be read ({e})")),
        }
    } else {
        return None;
    };
    let text = String::from_utf8_lossy(&pem);
    (!text.contains("-----BEGIN CERTIFICATE-----"))
        .then(|| format!("cannot parse the CA as PEM: its {what} holds no PEM certificate block"))
}

/// Why a request failed, as kubectl words it: the one wording every command shares.
pub use dracheck_objects::kube_errors::cause;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kube::config::Kubeconfig;

    use super::*;

    fn kubeconfig(server: &str, ca_pem: &str) -> Kubeconfig {
        let data = base64::engine::general_purpose::STANDARD.encode(ca_pem);
        Kubeconfig::from_yaml(&format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    \
             certificate-authority-data: {data}\ncontexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n\
             users:\n- name: u\n  user: {{}}\ncurrent-context: ctx\n"
        ))
        .expect("a kubeconfig")
    }

    async fn request(kc: Kubeconfig) -> kube::Error {
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.expect("a config");
        let client = kube::Client::try_from(config).expect("a client");
        client.apiserver_version().await.expect_err("the request must fail")
    }

    fn ca() -> (rcgen::Certificate, rcgen::KeyPair) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        (params.self_signed(&key).unwrap(), key)
    }

    #[tokio::test]
    async fn a_closed_port_is_a_refused_connection() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let (ca, _) = ca();
        let e = request(kubeconfig(&format!("https://127.0.0.1:{port}"), &ca.pem())).await;
        assert!(cause(&e).starts_with("connection refused"), "{}", cause(&e));
    }

    #[tokio::test]
    async fn an_unknown_context_lists_the_contexts_there_are() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        let (ca, _) = ca();
        std::fs::write(&path, serde_json::to_string(&kubeconfig("https://127.0.0.1:1", &ca.pem())).unwrap()).unwrap();
        let e = client(&path, Some("prod"), None).await.err().expect("an unknown context is refused");
        assert_eq!(e.failure(), crate::Failure::BadInput);
        assert!(e.to_string().contains("its contexts: ctx"), "{e}");
        let garbage = dir.path().join("garbage");
        std::fs::write(&garbage, serde_json::to_string(&kubeconfig("https://127.0.0.1:1", "junk")).unwrap()).unwrap();
        let e = client(&garbage, None, None).await.err().expect("a CA that is not PEM is refused");
        assert!(e.to_string().contains("https://127.0.0.1:1") && e.to_string().contains("as PEM"), "{e}");
    }

    #[test]
    fn a_ca_that_is_not_pem_is_named_before_connecting() {
        let kc = kubeconfig("https://127.0.0.1:1", "garbage, not a certificate");
        let problem = ca_problem(cluster_of(&kc, None).unwrap()).unwrap();
        assert!(problem.contains("cannot parse the CA as PEM"), "{problem}");
        let (ca, _) = ca();
        assert_eq!(ca_problem(cluster_of(&kubeconfig("https://127.0.0.1:1", &ca.pem()), Some("ctx")).unwrap()), None);
    }

    #[tokio::test]
    async fn a_server_certificate_from_another_ca_is_an_unknown_authority() {
        // A TLS server on loopback whose certificate the kubeconfig's CA did not sign.
        let (server_ca, server_ca_key) = ca();
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        let issuer = rcgen::Issuer::from_ca_cert_der(server_ca.der(), &server_ca_key).unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();
        let tls = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let _ = acceptor.accept(tcp).await;
            }
        });
        let (other_ca, _) = ca();
        let e = request(kubeconfig(&format!("https://127.0.0.1:{port}"), &other_ca.pem())).await;
        server.abort();
        assert!(cause(&e).contains("certificate signed by unknown authority"), "{}", cause(&e));
    }
}
