//! The webhook's serving certificate without a cert-manager: a self-signed CA kept in a
//! Secret (created when absent; on a conflict the other replica's is read, so every
//! replica trusts and presents the same CA), and a serving certificate issued from it in
//! memory for the Service's DNS names and any `--webhook-host`, re-issued before it
//! expires. Or a mounted `tls.crt`/`tls.key` (`--webhook-cert-dir`, e.g. cert-manager's),
//! re-read when it changes. The listener reads the current certificate per handshake.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// Name of the CA Secret in the operator's namespace.
pub const CA_SECRET: &str = "plinth-webhook-ca";
/// Lifetime of an issued serving certificate.
pub const SERVING_LIFETIME: Duration = Duration::from_secs(90 * 24 * 3600);
/// A serving certificate is issued again when less than this is left.
pub const RENEW_BEFORE: Duration = Duration::from_secs(30 * 24 * 3600);

/// Getting or issuing the webhook's certificates failed.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// rcgen or rustls refused the material.
    #[error("webhook certificate: {0}")]
    Tls(String),
    /// The CA Secret could not be read or written.
    #[error("Secret {namespace}/{CA_SECRET}: {message}")]
    Secret {
        /// The operator's namespace.
        namespace: String,
        /// The cause.
        message: String,
    },
    /// A mounted certificate could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

fn tls(e: impl std::fmt::Display) -> CertError {
    CertError::Tls(e.to_string())
}

/// The CA: its certificate (PEM, the webhook configurations' `caBundle`) and key.
#[derive(Clone)]
pub struct Ca {
    /// Certificate PEM.
    pub cert_pem: String,
    key_pem: String,
}

fn ca_params() -> Result<rcgen::CertificateParams, CertError> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyUsagePurpose};
    let mut p = CertificateParams::new(Vec::<String>::new()).map_err(tls)?;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name
        .push(DnType::CommonName, "plinth-webhook-ca");
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p.not_after = rcgen::date_time_ymd(2100, 1, 1);
    Ok(p)
}

impl Ca {
    /// A new self-signed CA.
    ///
    /// # Errors
    /// rcgen failed.
    pub fn generate() -> Result<Ca, CertError> {
        let key = rcgen::KeyPair::generate().map_err(tls)?;
        let cert = ca_params()?.self_signed(&key).map_err(tls)?;
        Ok(Ca {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// The CA kept in the Secret, created when absent; when another replica created it
    /// first (409), that one is read.
    ///
    /// # Errors
    /// The Secret cannot be read or created, or holds no usable CA.
    pub async fn load_or_create(secrets: &Api<Secret>, namespace: &str) -> Result<Ca, CertError> {
        let err = |e: kube::Error| CertError::Secret {
            namespace: namespace.into(),
            message: plinth_api::kube_error::describe(&e),
        };
        if let Some(s) = secrets.get_opt(CA_SECRET).await.map_err(err)? {
            return Ca::from_secret(&s, namespace);
        }
        let ca = Ca::generate()?;
        let secret = ca.to_secret();
        match secrets.create(&PostParams::default(), &secret).await {
            Ok(_) => Ok(ca),
            Err(kube::Error::Api(e)) if e.code == 409 => {
                let s = secrets.get(CA_SECRET).await.map_err(err)?;
                Ca::from_secret(&s, namespace)
            }
            Err(e) => Err(err(e)),
        }
    }

    fn to_secret(&self) -> Secret {
        let data = BTreeMap::from([
            (
                "tls.crt".to_string(),
                ByteString(self.cert_pem.clone().into_bytes()),
            ),
            (
                "tls.key".to_string(),
                ByteString(self.key_pem.clone().into_bytes()),
            ),
        ]);
        Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(CA_SECRET.into()),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/name".to_string(),
                    "plinth".to_string(),
                )])),
                ..Default::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(data),
            ..Default::default()
        }
    }

    fn from_secret(s: &Secret, namespace: &str) -> Result<Ca, CertError> {
        let get = |k: &str| {
            s.data
                .as_ref()
                .and_then(|d| d.get(k))
                .and_then(|b| String::from_utf8(b.0.clone()).ok())
                .ok_or_else(|| CertError::Secret {
                    namespace: namespace.into(),
                    message: format!("has no {k}"),
                })
        };
        Ok(Ca {
            cert_pem: get("tls.crt")?,
            key_pem: get("tls.key")?,
        })
    }

    /// A serving certificate for `names` (DNS names or IP addresses), valid for
    /// [`SERVING_LIFETIME`]: (certificate PEM, key PEM).
    ///
    /// # Errors
    /// A name is neither an IP address nor a DNS name, or rcgen failed.
    pub fn issue(&self, names: &[String]) -> Result<(String, String), CertError> {
        use rcgen::{CertificateParams, DnType, KeyPair, SanType};
        let ca_key = KeyPair::from_pem(&self.key_pem).map_err(tls)?;
        let issuer = rcgen::Issuer::new(ca_params()?, ca_key);
        let key = KeyPair::generate().map_err(tls)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(tls)?;
        for name in names {
            params
                .subject_alt_names
                .push(match name.parse::<std::net::IpAddr>() {
                    Ok(ip) => SanType::IpAddress(ip),
                    Err(_) => SanType::DnsName(name.clone().try_into().map_err(|e| {
                        CertError::Tls(format!(
                            "{name:?} is neither an IP address nor a DNS name: {e}"
                        ))
                    })?),
                });
        }
        params
            .distinguished_name
            .push(DnType::CommonName, "plinth-webhook");
        let now = std::time::SystemTime::now();
        params.not_before = (now - Duration::from_secs(300)).into();
        params.not_after = (now + SERVING_LIFETIME).into();
        let cert = params.signed_by(&key, &issuer).map_err(tls)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

/// The certificate a listener presents, replaceable while it serves.
#[derive(Debug)]
pub struct CurrentCert(RwLock<Arc<CertifiedKey>>);

impl CurrentCert {
    /// From PEM certificate chain and key.
    ///
    /// # Errors
    /// The PEM holds no certificate or key, or rustls refuses them.
    pub fn new(cert_pem: &str, key_pem: &str) -> Result<CurrentCert, CertError> {
        Ok(CurrentCert(RwLock::new(certified(cert_pem, key_pem)?)))
    }

    /// Presents `cert_pem`/`key_pem` from the next handshake on.
    ///
    /// # Errors
    /// As [`CurrentCert::new`].
    pub fn replace(&self, cert_pem: &str, key_pem: &str) -> Result<(), CertError> {
        let new = certified(cert_pem, key_pem)?;
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = new;
        Ok(())
    }

    /// A rustls server configuration (h2, http/1.1) presenting the current certificate.
    ///
    /// # Errors
    /// rustls refused the protocol versions.
    pub fn server_config(self: &Arc<Self>) -> Result<Arc<rustls::ServerConfig>, CertError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(tls)?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(cfg))
    }
}

impl ResolvesServerCert for CurrentCert {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

fn certified(cert_pem: &str, key_pem: &str) -> Result<Arc<CertifiedKey>, CertError> {
    let certs = rustls_pemfile::certs(&mut cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(tls)?;
    if certs.is_empty() {
        return Err(CertError::Tls("no certificate in the PEM".into()));
    }
    let key = rustls_pemfile::private_key(&mut key_pem.as_bytes())
        .map_err(tls)?
        .ok_or_else(|| CertError::Tls("no private key in the PEM".into()))?;
    let provider = rustls::crypto::ring::default_provider();
    let signer = provider.key_provider.load_private_key(key).map_err(tls)?;
    Ok(Arc::new(CertifiedKey::new(certs, signer)))
}

/// A mounted certificate directory's `tls.crt` and `tls.key`.
///
/// # Errors
/// A file cannot be read.
pub fn read_dir(dir: &Path) -> Result<(String, String), CertError> {
    let read = |f: &str| {
        let path = dir.join(f);
        std::fs::read_to_string(&path).map_err(|source| CertError::Io { path, source })
    };
    Ok((read("tls.crt")?, read("tls.key")?))
}
