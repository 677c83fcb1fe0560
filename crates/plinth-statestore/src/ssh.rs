//! SSH helpers for the Git writer: URL parsing (user, host, port), local private-key checks
//! (passphrase) and `knownHosts` matching, including hashed entries.
//!
//! The Secret keys are Kratix's (`sshPrivateKey`, `knownHosts`); beyond Kratix, keys may
//! carry a passphrase and the user and port come from the URL.

use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Digest;
use ssh_key::known_hosts::{HostPatterns, KnownHosts, Marker};

use crate::StoreError;

/// Where an SSH Git URL points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SshTarget {
    /// User from the URL, `git` when the URL has none.
    pub user: String,
    /// Host name or address (without brackets).
    pub host: String,
    /// Port, 22 unless given.
    pub port: u16,
}

impl SshTarget {
    /// `host:port`, as used in messages.
    pub fn display(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The name OpenSSH looks up in known_hosts: `host` on port 22, else `[host]:port`.
    pub fn known_hosts_name(&self) -> String {
        if self.port == 22 {
            self.host.clone()
        } else {
            format!("[{}]:{}", self.host, self.port)
        }
    }
}

/// True when the URL is an SSH URL: `ssh://…`, `git+ssh://…`, or scp-like `[user@]host:path`.
pub(crate) fn is_ssh_url(url: &str) -> bool {
    if url.starts_with("ssh://") || url.starts_with("git+ssh://") || url.starts_with("ssh+git://") {
        return true;
    }
    if url.contains("://") {
        return false;
    }
    // scp-like: a ':' before the first '/'.
    match (url.find(':'), url.find('/')) {
        (Some(c), Some(s)) => c < s,
        (Some(_), None) => true,
        _ => false,
    }
}

/// Parses user, host and port from an SSH URL (`ssh://[user@]host[:port]/path` or scp-like
/// `[user@]host:path`).
pub(crate) fn parse_ssh_url(url: &str) -> Result<SshTarget, StoreError> {
    let bad = |cause: &str| StoreError::InvalidConfig {
        field: "url".into(),
        cause: format!("{url:?}: {cause}"),
    };
    let (authority, scp) = if let Some(rest) = url
        .strip_prefix("ssh://")
        .or_else(|| url.strip_prefix("git+ssh://"))
        .or_else(|| url.strip_prefix("ssh+git://"))
    {
        (rest.split('/').next().unwrap_or(""), false)
    } else {
        let colon = url.find(':').ok_or_else(|| bad("not an SSH URL"))?;
        (&url[..colon], true)
    };
    let (user, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) if !u.is_empty() => (u.to_string(), h),
        Some((_, h)) => ("git".to_string(), h),
        None => ("git".to_string(), authority),
    };
    let (host, port) = if scp {
        (hostport.trim_start_matches('[').trim_end_matches(']'), 22)
    } else if let Some(rest) = hostport.strip_prefix('[') {
        let (h, after) = rest.split_once(']').ok_or_else(|| bad("unclosed '['"))?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| bad("port is not a number"))?,
            None => 22,
        };
        (h, port)
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) if !p.is_empty() => {
                (h, p.parse().map_err(|_| bad("port is not a number"))?)
            }
            Some((h, _)) => (h, 22),
            None => (hostport, 22),
        }
    };
    if host.is_empty() {
        return Err(bad("no host"));
    }
    Ok(SshTarget {
        user,
        host: host.to_string(),
        port,
    })
}

/// The private key prepared for libssh2: the PEM text and the matching public key line (so that
/// libssh2 does not have to derive it), plus the passphrase to hand over.
pub(crate) struct PreparedKey {
    pub private_pem: String,
    pub public_openssh: Option<String>,
    pub passphrase: Option<String>,
}

impl std::fmt::Debug for PreparedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material or the passphrase.
        f.debug_struct("PreparedKey")
            .field("encrypted", &self.passphrase.is_some())
            .finish_non_exhaustive()
    }
}

/// Checks the key locally before any connection, so a wrong passphrase gets its own error
/// instead of libssh2's misleading "Unable to extract public key from private key".
pub(crate) fn prepare_key(pem: &str, passphrase: Option<&str>) -> Result<PreparedKey, StoreError> {
    let pem = pem.trim().to_string() + "\n";
    if pem.trim().is_empty() {
        return Err(StoreError::InvalidConfig {
            field: "sshPrivateKey".into(),
            cause: "empty".into(),
        });
    }
    let passphrase = passphrase.filter(|p| !p.is_empty());
    if pem.contains("BEGIN OPENSSH PRIVATE KEY") {
        let key =
            ssh_key::PrivateKey::from_openssh(&pem).map_err(|e| StoreError::InvalidConfig {
                field: "sshPrivateKey".into(),
                cause: format!("not a valid OpenSSH private key: {e}"),
            })?;
        let public = key.public_key().to_openssh().ok();
        if key.is_encrypted() {
            let pass = passphrase.ok_or(StoreError::PassphraseRequired)?;
            key.decrypt(pass).map_err(|_| StoreError::WrongPassphrase)?;
            return Ok(PreparedKey {
                private_pem: pem,
                public_openssh: public,
                passphrase: Some(pass.to_string()),
            });
        }
        return Ok(PreparedKey {
            private_pem: pem,
            public_openssh: public,
            passphrase: None,
        });
    }
    if pem.contains("PRIVATE KEY-----") {
        // Legacy PEM (RSA/EC). Encrypted ones carry a Proc-Type header or are PKCS#8 "ENCRYPTED";
        // libssh2 decrypts those itself.
        let encrypted = pem.contains("Proc-Type: 4,ENCRYPTED") || pem.contains("BEGIN ENCRYPTED");
        if encrypted && passphrase.is_none() {
            return Err(StoreError::PassphraseRequired);
        }
        return Ok(PreparedKey {
            private_pem: pem,
            public_openssh: None,
            passphrase: if encrypted {
                passphrase.map(str::to_string)
            } else {
                None
            },
        });
    }
    Err(StoreError::InvalidConfig {
        field: "sshPrivateKey".into(),
        cause: "not a PEM or OpenSSH private key".into(),
    })
}

/// Parsed `knownHosts` content.
#[derive(Debug, Clone)]
pub(crate) struct KnownHostsDb {
    entries: Vec<(HostPatterns, Option<Marker>, Vec<u8>, String)>,
}

impl KnownHostsDb {
    /// Parses OpenSSH known_hosts text. Lines that do not parse are skipped; at least one valid
    /// entry is required.
    pub fn parse(text: &str) -> Result<Self, StoreError> {
        let mut entries = Vec::new();
        let mut errors = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            match KnownHosts::new(t).next() {
                Some(Ok(e)) => {
                    let blob =
                        e.public_key()
                            .to_bytes()
                            .map_err(|err| StoreError::InvalidKnownHosts {
                                cause: format!("line {}: {err}", i + 1),
                            })?;
                    let alg = e.public_key().algorithm().to_string();
                    entries.push((e.host_patterns().clone(), e.marker().cloned(), blob, alg));
                }
                Some(Err(err)) => errors.push(format!("line {}: {err}", i + 1)),
                None => {}
            }
        }
        if entries.is_empty() {
            return Err(StoreError::InvalidKnownHosts {
                cause: if errors.is_empty() {
                    "no entries".to_string()
                } else {
                    format!("no valid entries ({})", errors.join("; "))
                },
            });
        }
        Ok(Self { entries })
    }

    /// Checks a presented host key (SSH wire encoding) for a target.
    pub fn check(&self, target: &SshTarget, key: &[u8], key_type: &str) -> Result<(), StoreError> {
        let name = target.known_hosts_name();
        let mut host_known = false;
        for (patterns, marker, blob, _) in &self.entries {
            if !host_matches(patterns, &name) {
                continue;
            }
            match marker {
                Some(Marker::Revoked) if blob == key => {
                    return Err(StoreError::HostKeyMismatch {
                        host: target.display(),
                        key_type: key_type.to_string(),
                        fingerprint: format!("{} (marked @revoked)", fingerprint(key)),
                    });
                }
                // Certificate authorities are not supported for host keys; skip them.
                Some(_) => continue,
                None => {
                    host_known = true;
                    if blob == key {
                        return Ok(());
                    }
                }
            }
        }
        if host_known {
            Err(StoreError::HostKeyMismatch {
                host: target.display(),
                key_type: key_type.to_string(),
                fingerprint: fingerprint(key),
            })
        } else {
            Err(StoreError::UnknownHostKey {
                host: target.display(),
            })
        }
    }
}

/// OpenSSH-style `SHA256:<base64>` fingerprint of a wire-encoded key.
pub(crate) fn fingerprint(key: &[u8]) -> String {
    let d = sha2::Sha256::digest(key);
    format!(
        "SHA256:{}",
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(d)
    )
}

fn host_matches(patterns: &HostPatterns, name: &str) -> bool {
    match patterns {
        HostPatterns::HashedName { salt, hash } => {
            let Ok(mut mac) = Hmac::<sha1::Sha1>::new_from_slice(salt) else {
                return false;
            };
            mac.update(name.as_bytes());
            mac.verify_slice(hash).is_ok()
        }
        HostPatterns::Patterns(list) => {
            let mut matched = false;
            for p in list {
                if let Some(neg) = p.strip_prefix('!') {
                    if wildcard(neg, name) {
                        return false;
                    }
                } else if wildcard(p, name) {
                    matched = true;
                }
            }
            matched
        }
    }
}

/// OpenSSH pattern match: `*` any run, `?` one character; case-insensitive.
fn wildcard(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.to_ascii_lowercase().chars().collect();
    let n: Vec<char> = name.to_ascii_lowercase().chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_urls_b12() {
        let t = parse_ssh_url("deploy-bot@git.example.test:org/state.git").unwrap();
        assert_eq!(
            t,
            SshTarget {
                user: "deploy-bot".into(),
                host: "git.example.test".into(),
                port: 22
            }
        );
        let t = parse_ssh_url("ssh://deploy-bot@git.example.test:2222/org/state.git").unwrap();
        assert_eq!((t.user.as_str(), t.port), ("deploy-bot", 2222));
        let t = parse_ssh_url("ssh://git.example.test/org/state.git").unwrap();
        assert_eq!((t.user.as_str(), t.port), ("git", 22));
        let t = parse_ssh_url("ssh://u@[::1]:2200/r.git").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 2200));
        assert_eq!(t.known_hosts_name(), "[::1]:2200");
        assert!(is_ssh_url("git@github.com:org/repo.git"));
        assert!(is_ssh_url("ssh://h/r"));
        assert!(!is_ssh_url("https://h/r"));
        assert!(!is_ssh_url("/srv/repo.git"));
        assert!(!is_ssh_url("file:///srv/repo.git"));
        assert!(parse_ssh_url("ssh://h:xx/r").is_err());
    }

    #[test]
    fn wildcards() {
        assert!(wildcard("*.example.test", "git.example.test"));
        assert!(wildcard("git?.example.test", "git1.example.test"));
        assert!(!wildcard("*.example.test", "example.test"));
        assert!(wildcard("[127.0.0.1]:2222", "[127.0.0.1]:2222"));
        assert!(wildcard("GIT.example.test", "git.EXAMPLE.test"));
    }

    const ED_KEY: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIFTUSxCodQQ5Q6Qo1F7MoApk8MyWOslIOBUA05QZveig";

    #[test]
    fn known_hosts_plain_and_hashed() {
        let key_blob = base64::engine::general_purpose::STANDARD
            .decode(ED_KEY)
            .unwrap();
        let target = SshTarget {
            user: "git".into(),
            host: "127.0.0.1".into(),
            port: 2222,
        };
        let db = KnownHostsDb::parse(&format!("[127.0.0.1]:2222 ssh-ed25519 {ED_KEY}\n")).unwrap();
        db.check(&target, &key_blob, "ssh-ed25519").unwrap();
        let other = SshTarget {
            port: 2223,
            ..target.clone()
        };
        assert_eq!(
            db.check(&other, &key_blob, "ssh-ed25519")
                .unwrap_err()
                .to_string(),
            "host key for 127.0.0.1:2223 not in knownHosts"
        );
        let mut wrong = key_blob.clone();
        *wrong.last_mut().unwrap() ^= 1;
        assert!(matches!(
            db.check(&target, &wrong, "ssh-ed25519"),
            Err(StoreError::HostKeyMismatch { .. })
        ));

        // Hashed entry: |1|base64(salt)|base64(HMAC-SHA1(salt, name)).
        let salt = b"0123456789abcdefghij";
        let mut mac = Hmac::<sha1::Sha1>::new_from_slice(salt).unwrap();
        mac.update(b"[127.0.0.1]:2222");
        let h = mac.finalize().into_bytes();
        let b64 = base64::engine::general_purpose::STANDARD;
        let line = format!(
            "|1|{}|{} ssh-ed25519 {ED_KEY}\n",
            b64.encode(salt),
            b64.encode(h)
        );
        let db = KnownHostsDb::parse(&line).unwrap();
        db.check(&target, &key_blob, "ssh-ed25519").unwrap();
        assert!(matches!(
            db.check(&other, &key_blob, "ssh-ed25519"),
            Err(StoreError::UnknownHostKey { .. })
        ));

        let neg = KnownHostsDb::parse(&format!("*,!127.0.0.1 ssh-ed25519 {ED_KEY}\n")).unwrap();
        let p22 = SshTarget {
            port: 22,
            ..target.clone()
        };
        assert!(matches!(
            neg.check(&p22, &key_blob, "ssh-ed25519"),
            Err(StoreError::UnknownHostKey { .. })
        ));
        assert!(KnownHostsDb::parse("# nothing\n").is_err());
        assert!(KnownHostsDb::parse("garbage line\n").is_err());
    }

    #[test]
    fn key_checks() {
        assert!(matches!(
            prepare_key("hello", None),
            Err(StoreError::InvalidConfig { .. })
        ));
        assert!(matches!(
            prepare_key(
                "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nabc\n-----END RSA PRIVATE KEY-----",
                None
            ),
            Err(StoreError::PassphraseRequired)
        ));
    }
}
