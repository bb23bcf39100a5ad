//! Why a request to a cluster failed, worded as kubectl words it: a certificate signed by an
//! unknown authority, a refused connection, a credential plugin that failed, instead of the
//! HTTP client's bare "client error (Connect)". Causes are read from the error's types (the
//! source chain), never from its message text, so that every command that reaches a cluster
//! (a run, `explain`, `inventory`) says the same with its fix.

use std::error::Error as StdError;

/// The first cause in `err`'s source chain that has words of its own, else the chain's
/// messages joined.
pub fn cause(err: &(dyn StdError + 'static)) -> String {
    let mut chain = Vec::new();
    let mut next: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = next {
        if let Some(named) = named(e) {
            return named;
        }
        chain.push(e.to_string());
        next = e.source();
    }
    chain.dedup();
    chain.join(": ")
}

/// A cause kubectl has words for, where `e` (or the error an `io::Error` wraps) is one.
fn named(e: &(dyn StdError + 'static)) -> Option<String> {
    if let Some(io) = e.downcast_ref::<std::io::Error>() {
        if io.kind() == std::io::ErrorKind::ConnectionRefused {
            return Some("connection refused (nothing listens at that address: is the cluster up?)".into());
        }
        if let Some(inner) = io.get_ref() {
            return named(inner);
        }
    }
    if let Some(auth) = e.downcast_ref::<kube::client::AuthError>() {
        return exec_plugin(auth);
    }
    match e.downcast_ref::<rustls::Error>()? {
        // A CA of the same name that did not sign the certificate is a bad signature to
        // rustls; kubectl calls both an unknown authority.
        rustls::Error::InvalidCertificate(
            rustls::CertificateError::UnknownIssuer | rustls::CertificateError::BadSignature,
        ) => Some(
            "x509: certificate signed by unknown authority (the kubeconfig's CA did not sign the server's \
             certificate: is it the CA of this cluster? Point --kubeconfig or --context at this cluster's)"
                .into(),
        ),
        rustls::Error::InvalidCertificate(c) => Some(format!("x509: the server's certificate is not valid: {c:?}")),
        other => Some(format!("TLS: {other}")),
    }
}

/// A kubeconfig's exec credential plugin that did not give a token: what it said, and how to
/// see why.
fn exec_plugin(auth: &kube::client::AuthError) -> Option<String> {
    use kube::client::AuthError;
    Some(match auth {
        AuthError::AuthExecStart(e) => format!(
            "the kubeconfig's credential plugin could not be started ({e}): install the command its \
             users[].user.exec.command names, or put it on PATH"
        ),
        AuthError::AuthExecRun { cmd, out } => {
            let said = String::from_utf8_lossy(&out.stderr);
            let last = said.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output").trim();
            format!(
                "the kubeconfig's credential plugin `{cmd}` failed ({}): {last}; run it by hand to see why (an \
                 expired login is the usual cause), then try again",
                out.status
            )
        }
        AuthError::AuthExecParse(e) => format!(
            "the kubeconfig's credential plugin answered with no ExecCredential dracheck can read ({e}): check the \
             plugin's version and its users[].user.exec.apiVersion"
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt as _;

    use super::*;

    #[test]
    fn a_failed_credential_plugin_is_named_with_its_last_words_and_the_fix() {
        let out = std::process::Output {
            status: std::process::ExitStatus::from_raw(1 << 8),
            stdout: Vec::new(),
            stderr: b"starting\nerror: the login expired\n".to_vec(),
        };
        let err =
            kube::Error::Auth(kube::client::AuthError::AuthExecRun { cmd: "cloud-auth".into(), out: Box::new(out) });
        let said = cause(&err);
        assert!(said.contains("credential plugin `cloud-auth` failed (exit status: 1)"), "{said}");
        assert!(said.contains("error: the login expired") && said.contains("run it by hand"), "{said}");
        let missing = kube::Error::Auth(kube::client::AuthError::AuthExecStart(std::io::Error::from(
            std::io::ErrorKind::NotFound,
        )));
        assert!(cause(&missing).contains("could not be started"), "{}", cause(&missing));
    }
}
