//! Authentication: every request carries an [`Identity`] request extension.
//!
//! * The admin bearer token (written into `<data_dir>/kubeconfig`) → user `plinth-admin`,
//!   groups `system:masters`, `system:authenticated`.
//! * ServiceAccount tokens minted by the TokenRequest subresource
//!   (`POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token`): a JWT (HS256, signed
//!   with a server key kept in the data directory) naming the ServiceAccount and its uid;
//!   valid while unexpired and while that ServiceAccount exists →
//!   user `system:serviceaccount:<ns>:<name>`, groups `system:serviceaccounts`,
//!   `system:serviceaccounts:<ns>`, `system:authenticated`.
//! * The in-process router treats a request without an `Authorization` header as the
//!   admin; over the network such a request is answered 401.

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::app::{App, AppRef, meta_str};
use crate::error::{ApiError, Error};

/// Who made a request (a request extension set by authentication).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    /// User name, e.g. `plinth-admin` or `system:serviceaccount:default:builder`.
    pub user: String,
    /// Groups, e.g. `system:masters`, `system:authenticated`.
    pub groups: Vec<String>,
    /// The user's uid (a ServiceAccount's uid; `Impersonate-Uid`), empty when unknown.
    pub uid: String,
    /// Extra attributes (`Impersonate-Extra-<key>`).
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl Identity {
    /// The administrator.
    pub fn admin() -> Identity {
        Identity {
            user: "plinth-admin".into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
            ..Identity::default()
        }
    }
}

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

fn unauthorized() -> Response {
    ApiError::new(401, "Unauthorized", "Unauthorized").into_response()
}

/// Resolves a bearer token to an identity.
async fn identify(app: &App, token: &str) -> Option<Identity> {
    if token.len() == app.tokens.admin.len()
        && token
            .bytes()
            .zip(app.tokens.admin.bytes())
            .fold(0u8, |a, (x, y)| a | (x ^ y))
            == 0
    {
        return Some(Identity::admin());
    }
    let (ns, name, uid) = app.tokens.verify(token)?;
    let sa = app
        .store
        .get(crate::store::ObjKey {
            rkey: crate::registry::rkey("", "serviceaccounts"),
            ns: ns.clone(),
            name: name.clone(),
        })
        .await
        .ok()??;
    if meta_str(&sa, "uid") != Some(uid.as_str()) {
        return None;
    }
    Some(Identity {
        user: format!("system:serviceaccount:{ns}:{name}"),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{ns}"),
            "system:authenticated".into(),
        ],
        uid,
        ..Identity::default()
    })
}

fn bearer(req: &Request) -> Option<Option<String>> {
    let h = req.headers().get(http::header::AUTHORIZATION)?;
    Some(
        h.to_str()
            .ok()
            .and_then(|s| s.strip_prefix("Bearer ").map(|t| t.trim().to_string())),
    )
}

fn is_health(path: &str) -> bool {
    matches!(path, "/readyz" | "/livez" | "/healthz")
}

/// Middleware for the network listener: a valid bearer token is required (health
/// endpoints excepted).
pub(crate) async fn network_auth(
    State(app): State<AppRef>,
    mut req: Request,
    next: Next,
) -> Response {
    let id = match bearer(&req) {
        Some(Some(t)) => identify(&app, &t).await,
        _ => None,
    };
    match id {
        Some(id) => {
            req.extensions_mut().insert(id);
            next.run(req).await
        }
        None if is_health(req.uri().path()) => next.run(req).await,
        None => unauthorized(),
    }
}

/// Middleware for the in-process router: no `Authorization` header means the admin.
pub(crate) async fn in_process_auth(
    State(app): State<AppRef>,
    mut req: Request,
    next: Next,
) -> Response {
    let id = match bearer(&req) {
        None => Some(Identity::admin()),
        Some(Some(t)) => identify(&app, &t).await,
        Some(None) => None,
    };
    match id {
        Some(id) => {
            req.extensions_mut().insert(id);
            next.run(req).await
        }
        None => unauthorized(),
    }
}

/// TokenRequest (authentication.k8s.io/v1) for a ServiceAccount.
pub(crate) async fn token_request(
    app: &Arc<App>,
    ns: String,
    name: String,
    body: Value,
) -> Result<Value, ApiError> {
    let info = app
        .registry
        .lookup("", "v1", "serviceaccounts")
        .ok_or_else(|| ApiError::internal("serviceaccounts not registered"))?;
    let sa = crate::app::get_object(app, &info, Some(&ns), &name).await?;
    let uid = meta_str(&sa, "uid").unwrap_or_default().to_string();
    if let Some(k) = body.get("kind").and_then(|k| k.as_str())
        && k != "TokenRequest"
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({k}) does not match the expected kind (TokenRequest)"
        )));
    }
    let audiences: Vec<String> = body
        .pointer("/spec/audiences")
        .and_then(|a| a.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let exp = body
        .pointer("/spec/expirationSeconds")
        .and_then(|e| e.as_i64())
        .unwrap_or(3600);
    if exp < 600 {
        return Err(ApiError::invalid(
            &crate::resource::ResourceInfo {
                group: "authentication.k8s.io".into(),
                version: "v1".into(),
                kind: "TokenRequest".into(),
                list_kind: String::new(),
                plural: "tokenrequests".into(),
                singular: "tokenrequest".into(),
                namespaced: true,
                short_names: vec![],
                categories: vec![],
                verbs: vec![],
                status_subresource: false,
                builtin: true,
                schema: None,
                printer_columns: vec![],
                storage: true,
            },
            &name,
            vec![crate::resource::Cause {
                reason: "FieldValueInvalid".into(),
                message: "may not specify a duration less than 10 minutes".into(),
                field: "spec.expirationSeconds".into(),
            }],
        ));
    }
    let (token, exp_at) = app.tokens.mint(&ns, &name, &uid, &audiences, exp);
    let exp_ts = jiff::Timestamp::from_second(exp_at)
        .map(|t| t.to_string())
        .unwrap_or_default();
    Ok(json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": crate::app::now()},
        "spec": {"audiences": audiences, "expirationSeconds": exp, "boundObjectRef": body.pointer("/spec/boundObjectRef").cloned().unwrap_or(Value::Null)},
        "status": {"token": token, "expirationTimestamp": exp_ts},
    }))
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
