//! Token material kept in the data directory: the admin bearer token and the key that
//! signs ServiceAccount tokens (HS256 JWTs), and the private-file writes they share with
//! the serving certificate.

use std::path::Path;

use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::error::Error;

/// Token material: the admin token and the ServiceAccount signing key.
pub struct Tokens {
    admin: String,
    key: Vec<u8>,
}

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
}

fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    const B: usize = 64;
    let mut k = [0u8; B];
    if key.len() > B {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut ipad = [0x36u8; B];
    let mut opad = [0x5cu8; B];
    for i in 0..B {
        ipad[i] ^= k[i];
        opad[i] ^= k[i];
    }
    let inner = Sha256::new()
        .chain_update(ipad)
        .chain_update(msg)
        .finalize();
    Sha256::new()
        .chain_update(opad)
        .chain_update(inner)
        .finalize()
        .into()
}

fn random_hex(n: usize) -> String {
    use rand::RngCore;
    let mut b = vec![0u8; n];
    rand::rng().fill_bytes(&mut b);
    hex::encode(b)
}

fn load_or_create(path: &Path, make: impl FnOnce() -> String) -> Result<String, Error> {
    match std::fs::read_to_string(path) {
        Ok(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        _ => {
            let v = make();
            write_private(path, v.as_bytes())?;
            Ok(v)
        }
    }
}

/// Writes a file readable only by its owner.
pub(crate) fn write_private(path: &Path, data: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    o.mode(0o600);
    let mut f = o.open(&tmp).map_err(|e| Error::io(&tmp, e))?;
    f.write_all(data).map_err(|e| Error::io(&tmp, e))?;
    f.sync_all().map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))?;
    Ok(())
}

impl Tokens {
    /// Loads (or creates) `admin.token` and `serviceaccount.key` in `dir`.
    pub fn load(dir: &Path) -> Result<Tokens, Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let admin = load_or_create(&dir.join("admin.token"), || random_hex(32))?;
        let key = load_or_create(&dir.join("serviceaccount.key"), || random_hex(32))?;
        Ok(Tokens {
            admin,
            key: key.into_bytes(),
        })
    }

    /// The admin bearer token.
    pub fn admin_token(&self) -> &str {
        &self.admin
    }

    /// Mints a ServiceAccount token (HS256 JWT).
    pub fn mint(
        &self,
        ns: &str,
        name: &str,
        uid: &str,
        audiences: &[String],
        expiration_secs: i64,
    ) -> (String, i64) {
        let now = jiff::Timestamp::now().as_second();
        let exp = now + expiration_secs;
        let header = json!({"alg": "HS256", "typ": "JWT"});
        let claims = json!({
            "iss": "https://kubernetes.default.svc.cluster.local",
            "sub": format!("system:serviceaccount:{ns}:{name}"),
            "aud": audiences,
            "iat": now, "nbf": now, "exp": exp,
            "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": name, "uid": uid}},
        });
        let signing_input = format!(
            "{}.{}",
            b64().encode(header.to_string()),
            b64().encode(claims.to_string())
        );
        let sig = hmac_sha256(&self.key, signing_input.as_bytes());
        (format!("{signing_input}.{}", b64().encode(sig)), exp)
    }

    /// Checks a ServiceAccount token's signature and expiry; returns (namespace, name, uid).
    pub fn verify(&self, token: &str) -> Option<(String, String, String)> {
        let mut parts = token.split('.');
        let (h, c, s) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let sig = b64().decode(s).ok()?;
        let want = hmac_sha256(&self.key, format!("{h}.{c}").as_bytes());
        // Constant-time comparison.
        if sig.len() != want.len()
            || sig
                .iter()
                .zip(want.iter())
                .fold(0u8, |a, (x, y)| a | (x ^ y))
                != 0
        {
            return None;
        }
        let claims: Value = serde_json::from_slice(&b64().decode(c).ok()?).ok()?;
        if claims["exp"].as_i64()? < jiff::Timestamp::now().as_second() {
            return None;
        }
        let k = &claims["kubernetes.io"];
        Some((
            k["namespace"].as_str()?.to_string(),
            k["serviceaccount"]["name"].as_str()?.to_string(),
            k["serviceaccount"]["uid"].as_str()?.to_string(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc4231_case_2() {
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn tokens_round_trip_and_reject_tampering() {
        let dir = tempfile::tempdir().unwrap();
        let t = Tokens::load(dir.path()).unwrap();
        let (tok, _) = t.mint("ns", "sa", "uid-1", &[], 3600);
        assert_eq!(
            t.verify(&tok),
            Some(("ns".into(), "sa".into(), "uid-1".into()))
        );
        let mut bad = tok.clone();
        bad.push('x');
        assert_eq!(t.verify(&bad), None);
        let t2 = Tokens::load(dir.path()).unwrap();
        assert_eq!(t2.admin_token(), t.admin_token());
    }
}
