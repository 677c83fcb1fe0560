//! TLS material: a CA and a serving certificate (SANs `localhost`, `127.0.0.1`, `::1`,
//! `kubernetes`, `kubernetes.default`, `kubernetes.default.svc`,
//! `kubernetes.default.svc.cluster.local`, plus any extra names the server is configured
//! with) generated with rcgen at first start and kept in `<data_dir>/tls/` (`ca.crt`,
//! `ca.key`, `server.crt`, `server.key`, `server.names`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::Error;
use crate::tokens::write_private;

/// PEM files on disk.
pub struct TlsFiles {
    /// CA certificate path.
    pub ca_cert: PathBuf,
    /// CA certificate PEM.
    pub ca_pem: String,
    /// Serving certificate PEM.
    pub server_pem: String,
    /// Serving key PEM.
    pub server_key_pem: String,
}

fn tls_err(e: impl std::fmt::Display) -> Error {
    Error::Tls(e.to_string())
}

/// Loads the TLS files from `dir`, generating them when any is missing.
pub fn load_or_create(dir: &Path) -> Result<TlsFiles, Error> {
    load_or_create_with_names(dir, &[])
}

/// Like [`load_or_create`], with extra names (DNS names or IP addresses) on the serving
/// certificate besides the standard ones. The extra names in use are kept in
/// `server.names`; when they differ from `extra`, the serving certificate is issued
/// again by the same CA (clients that trust `ca.crt` keep working).
pub fn load_or_create_with_names(dir: &Path, extra: &[String]) -> Result<TlsFiles, Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let paths = ["ca.crt", "ca.key", "server.crt", "server.key"].map(|f| dir.join(f));
    let names_path = dir.join("server.names");
    let mut wanted: Vec<String> = extra.iter().map(|n| n.trim().to_string()).collect();
    wanted.retain(|n| !n.is_empty());
    wanted.sort();
    wanted.dedup();
    let wanted_text = wanted.join("\n");
    let read = |p: &Path| std::fs::read_to_string(p).map_err(|e| Error::io(p, e));
    if paths.iter().all(|p| p.exists()) {
        let current = std::fs::read_to_string(&names_path).unwrap_or_default();
        if current.trim() == wanted_text {
            return Ok(TlsFiles {
                ca_cert: paths[0].clone(),
                ca_pem: read(&paths[0])?,
                server_pem: read(&paths[2])?,
                server_key_pem: read(&paths[3])?,
            });
        }
        let ca_key = rcgen::KeyPair::from_pem(&read(&paths[1])?).map_err(tls_err)?;
        let issuer = rcgen::Issuer::new(ca_params()?, ca_key);
        let files = issue_server(&paths, read(&paths[0])?, &issuer, &wanted)?;
        write_private(&names_path, wanted_text.as_bytes())?;
        return Ok(files);
    }
    let ca_key = rcgen::KeyPair::generate().map_err(tls_err)?;
    let params = ca_params()?;
    let ca_cert = params.self_signed(&ca_key).map_err(tls_err)?;
    let issuer = rcgen::Issuer::new(params, ca_key);
    write_private(&paths[1], issuer.key().serialize_pem().as_bytes())?;
    let files = issue_server(&paths, ca_cert.pem(), &issuer, &wanted)?;
    write_private(&names_path, wanted_text.as_bytes())?;
    Ok(files)
}

/// The CA's parameters (also used to issue again with an existing CA key).
fn ca_params() -> Result<rcgen::CertificateParams, Error> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyUsagePurpose};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(tls_err)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "plinth-ca");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca_params.not_after = rcgen::date_time_ymd(2100, 1, 1);
    Ok(ca_params)
}

/// Issues the serving certificate (standard names plus `extra`) and writes it, its key
/// and the CA certificate.
fn issue_server(
    paths: &[PathBuf; 4],
    ca_pem: String,
    issuer: &rcgen::Issuer<'_, rcgen::KeyPair>,
    extra: &[String],
) -> Result<TlsFiles, Error> {
    use rcgen::{CertificateParams, DnType, KeyPair, SanType};
    let server_key = KeyPair::generate().map_err(tls_err)?;
    let mut params = CertificateParams::new(vec![
        "localhost".to_string(),
        "kubernetes".to_string(),
        "kubernetes.default".to_string(),
        "kubernetes.default.svc".to_string(),
        "kubernetes.default.svc.cluster.local".to_string(),
    ])
    .map_err(tls_err)?;
    params
        .subject_alt_names
        .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
    params
        .subject_alt_names
        .push(SanType::IpAddress("::1".parse().unwrap()));
    for name in extra {
        let san = match name.parse::<std::net::IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(name.clone().try_into().map_err(|e| {
                Error::Tls(format!(
                    "{name:?} is neither an IP address nor a DNS name: {e}"
                ))
            })?),
        };
        params.subject_alt_names.push(san);
    }
    params
        .distinguished_name
        .push(DnType::CommonName, "plinth-apiserver");
    params.not_after = rcgen::date_time_ymd(2100, 1, 1);
    let server_cert = params.signed_by(&server_key, issuer).map_err(tls_err)?;
    let files = TlsFiles {
        ca_cert: paths[0].clone(),
        ca_pem,
        server_pem: server_cert.pem(),
        server_key_pem: server_key.serialize_pem(),
    };
    write_private(&paths[2], files.server_pem.as_bytes())?;
    write_private(&paths[3], files.server_key_pem.as_bytes())?;
    write_private(&paths[0], files.ca_pem.as_bytes())?;
    Ok(files)
}

/// A rustls server configuration (h2 and http/1.1) for the serving certificate.
pub fn server_config(files: &TlsFiles) -> Result<Arc<rustls::ServerConfig>, Error> {
    let certs = rustls_pemfile::certs(&mut files.server_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(tls_err)?;
    let key = rustls_pemfile::private_key(&mut files.server_key_pem.as_bytes())
        .map_err(tls_err)?
        .ok_or_else(|| Error::Tls("server.key holds no private key".into()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(tls_err)?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(tls_err)?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}
