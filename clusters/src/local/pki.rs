//! The local cluster's own PKI: one CA, serving certs for the components, client certs for the
//! identities that talk to the apiserver, the service-account key pair, and kubeconfigs.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::error::{ClusterError, Result};

/// A PEM certificate and its PEM private key, and where both were written.
#[derive(Debug, Clone)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub cert_pem: String,
    pub key_pem: String,
}

pub struct Pki {
    dir: PathBuf,
    ca: Issuer<'static, KeyPair>,
    pub ca_pem: String,
    pub ca_file: PathBuf,
}

impl Pki {
    /// A fresh CA in `dir/pki`.
    pub fn create(dir: &Path) -> Result<Pki> {
        let dir = dir.join("pki");
        std::fs::create_dir_all(&dir).map_err(ClusterError::io(format!("creating {}", dir.display())))?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = name("dracheck-local-ca", None);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate()?;
        let ca_pem = params.self_signed(&key)?.pem();
        let ca_file = dir.join("ca.crt");
        write_private(&ca_file, &ca_pem)?;
        write_private(&dir.join("ca.key"), &key.serialize_pem())?;
        Ok(Pki { dir, ca: Issuer::new(params, key), ca_pem, ca_file })
    }

    /// The CA that [`Pki::create`] wrote into `dir/pki`, to issue more certificates later
    /// (another process, such as the node agent of `cluster up`).
    pub fn load(dir: &Path) -> Result<Pki> {
        let dir = dir.join("pki");
        let ca_file = dir.join("ca.crt");
        let read = |p: &Path| std::fs::read_to_string(p).map_err(ClusterError::io(format!("reading {}", p.display())));
        let ca_pem = read(&ca_file)?;
        let key = KeyPair::from_pem(&read(&dir.join("ca.key"))?)?;
        let ca = Issuer::from_ca_cert_pem(&ca_pem, key)?;
        Ok(Pki { dir, ca, ca_pem, ca_file })
    }

    /// A serving certificate for `name`, valid for loopback and the given extra names.
    pub fn serving(&self, name_: &str, extra_sans: &[&str]) -> Result<CertFiles> {
        let mut sans = vec!["127.0.0.1".to_string(), "localhost".to_string()];
        sans.extend(extra_sans.iter().map(|s| s.to_string()));
        let mut params = CertificateParams::new(sans)?;
        params.distinguished_name = name(name_, None);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        self.issue(&format!("{name_}-serving"), &params)
    }

    /// A client certificate for user `cn`, in `group` if given (the apiserver maps O to a
    /// group; rcgen keeps one O per name, which is all the identities here need).
    pub fn client(&self, cn: &str, group: Option<&str>) -> Result<CertFiles> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = name(cn, group);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        let file_stem = cn.replace(':', "-");
        self.issue(&format!("{file_stem}-client"), &params)
    }

    fn issue(&self, stem: &str, params: &CertificateParams) -> Result<CertFiles> {
        let key = KeyPair::generate()?;
        let cert_pem = params.signed_by(&key, &self.ca)?.pem();
        let key_pem = key.serialize_pem();
        let cert = self.dir.join(format!("{stem}.crt"));
        let key_file = self.dir.join(format!("{stem}.key"));
        write_private(&cert, &cert_pem)?;
        write_private(&key_file, &key_pem)?;
        Ok(CertFiles { cert, key: key_file, cert_pem, key_pem })
    }

    /// The key pair that signs and verifies service-account tokens: (private, public) paths.
    pub fn service_account_keys(&self) -> Result<(PathBuf, PathBuf)> {
        let key = KeyPair::generate()?;
        let private = self.dir.join("sa.key");
        let public = self.dir.join("sa.pub");
        write_private(&private, &key.serialize_pem())?;
        write_private(&public, &key.public_key_pem())?;
        Ok((private, public))
    }

    /// A kubeconfig for `user` against `server`, with the certificates inlined so the file
    /// can be copied elsewhere and still work.
    pub fn kubeconfig(&self, path: &Path, server: &str, user: &str, creds: &CertFiles) -> Result<()> {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let text = format!(
            "apiVersion: v1\n\
             kind: Config\n\
             clusters:\n\
             - name: dracheck-local\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n\
             users:\n\
             - name: {user}\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\n\
             contexts:\n\
             - name: dracheck-local\n  context:\n    cluster: dracheck-local\n    user: {user}\n\
             current-context: dracheck-local\n",
            ca = b64(&self.ca_pem),
            cert = b64(&creds.cert_pem),
            key = b64(&creds.key_pem),
        );
        write_private(path, &text)
    }
}

fn name(cn: &str, org: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    if let Some(org) = org {
        dn.push(DnType::OrganizationName, org);
    }
    dn
}

/// Keys and kubeconfigs are credentials: readable by the owner only.
fn write_private(path: &Path, content: &str) -> Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .map_err(ClusterError::io(format!("writing {}", path.display())))?;
    f.write_all(content.as_bytes()).map_err(ClusterError::io(format!("writing {}", path.display())))
}
