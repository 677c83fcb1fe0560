//! GitHub App installation tokens for Git state stores (`authMethod: githubApp`).
//!
//! The App's RSA private key signs a short-lived JWT (RS256; `iat` = now − 60 s, `exp` =
//! now + 9 min, `iss` = App ID); the JWT is exchanged at
//! `POST {api_url}/app/installations/{installation_id}/access_tokens` for an installation
//! token, which Git then sends as basic auth `x-access-token:<token>`. The token is cached
//! and replaced once less than [`TOKEN_REFRESH_MARGIN`] of its life is left; it is never kept
//! longer than [`TOKEN_MAX_AGE`] (Kratix's `KRATIX_GITHUB_APP_CREDS_EXPIRATION_DURATION`).
//!
//! Kratix fixes the API base to `https://api.github.com`; Plinth takes it from the
//! Secret key `apiURL` when present (GitHub Enterprise Server: `https://<host>/api/v3`).
//!
//! The JWT is signed with ring, the crypto library the TLS stack already carries, so the
//! build needs no second one.
//!
//! Everything here runs on a Git writer's worker thread: the HTTP call is made on a small
//! current-thread runtime owned by that thread. Neither the key nor a token is ever logged or
//! put into an error message.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use rustls_pemfile::Item;
use serde::Serialize;

use crate::StoreError;

/// API base used when the Secret has no `apiURL`.
pub const DEFAULT_GITHUB_API_URL: &str = "https://api.github.com";
/// User name sent with an installation token over HTTPS.
pub const GITHUB_APP_USERNAME: &str = "x-access-token";
/// A cached installation token is replaced when less than this much of its life is left.
pub const TOKEN_REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);
/// An installation token is never used for longer than this after it was obtained (Kratix
/// caches GitHub App credentials for 60 minutes).
pub const TOKEN_MAX_AGE: Duration = Duration::from_secs(60 * 60);
/// JWT `iat` is back-dated by this much to allow for clock drift (GitHub's recommendation).
const JWT_BACKDATE_SECS: u64 = 60;
/// JWT lifetime after "now"; GitHub accepts at most 10 minutes.
const JWT_LIFETIME_SECS: u64 = 9 * 60;

/// The JOSE header of every App JWT.
const JWT_HEADER: &str = r#"{"alg":"RS256","typ":"JWT"}"#;

/// The App's RSA private key from its PEM: PKCS#1 (`RSA PRIVATE KEY`, what GitHub hands
/// out) or PKCS#8 (`PRIVATE KEY`).
fn rsa_key(pem: &str) -> Result<RsaKeyPair, StoreError> {
    let invalid = |cause: String| StoreError::InvalidGithubAppKey { cause };
    let item = rustls_pemfile::read_one_from_slice(pem.trim().as_bytes())
        .map_err(|e| invalid(format!("{e:?}")))?
        .map(|(item, _)| item);
    let key = match item {
        Some(Item::Pkcs1Key(k)) => RsaKeyPair::from_der(k.secret_pkcs1_der()),
        Some(Item::Pkcs8Key(k)) => RsaKeyPair::from_pkcs8(k.secret_pkcs8_der()),
        Some(_) => return Err(invalid("the PEM block is not an RSA private key".into())),
        None => return Err(invalid("no PEM block found".into())),
    };
    key.map_err(|e| invalid(format!("the RSA key is rejected: {e}")))
}

#[derive(Serialize)]
struct Claims<'a> {
    iat: u64,
    exp: u64,
    iss: &'a str,
}

struct CachedToken {
    token: String,
    /// When the token must no longer be used: the earlier of GitHub's `expires_at` and
    /// obtained + [`TOKEN_MAX_AGE`].
    valid_until: Instant,
}

/// Mints JWTs and exchanges them for installation tokens, caching the current token.
pub(crate) struct AppTokenSource {
    app_id: String,
    installation_id: String,
    key: RsaKeyPair,
    api_url: String,
    insecure: bool,
    cached: Option<CachedToken>,
    http: Option<(tokio::runtime::Runtime, reqwest::Client)>,
}

impl AppTokenSource {
    /// Checks the App settings and the key without any network access.
    ///
    /// # Errors
    /// [`StoreError::InvalidConfig`] for an empty `appID`, a non-numeric `installationID` or an
    /// unusable `apiURL`; [`StoreError::InvalidGithubAppKey`] when `privateKey` is not a PEM
    /// RSA private key that can sign.
    pub(crate) fn new(
        app_id: &str,
        installation_id: &str,
        private_key_pem: &str,
        api_url: &str,
        insecure: bool,
    ) -> Result<Self, StoreError> {
        let app_id = app_id.trim();
        if app_id.is_empty() || app_id.chars().any(char::is_whitespace) {
            return Err(StoreError::InvalidConfig {
                field: "appID".into(),
                cause: format!("{app_id:?} is not a GitHub App ID"),
            });
        }
        let installation_id = installation_id.trim();
        if installation_id.is_empty() || !installation_id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(StoreError::InvalidConfig {
                field: "installationID".into(),
                cause: format!("{installation_id:?} is not a number"),
            });
        }
        let api_url = api_url.trim().trim_end_matches('/');
        let api_url = if api_url.is_empty() {
            DEFAULT_GITHUB_API_URL
        } else {
            api_url
        };
        if !(api_url.starts_with("https://") || (insecure && api_url.starts_with("http://"))) {
            return Err(StoreError::InvalidConfig {
                field: "apiURL".into(),
                cause: format!(
                    "{api_url:?} must be an https:// URL (http:// only when the store is marked insecure)"
                ),
            });
        }
        let key = rsa_key(private_key_pem)?;
        let source = AppTokenSource {
            app_id: app_id.to_string(),
            installation_id: installation_id.to_string(),
            key,
            api_url: api_url.to_string(),
            insecure,
            cached: None,
            http: None,
        };
        // Signing once proves the key can sign before any network is used.
        source.jwt()?;
        Ok(source)
    }

    /// An RS256 JWT for the App: `iat` = now − 60 s, `exp` = now + 9 min, `iss` = App ID.
    pub(crate) fn jwt(&self) -> Result<String, StoreError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let claims = Claims {
            iat: now.saturating_sub(JWT_BACKDATE_SECS),
            exp: now + JWT_LIFETIME_SECS,
            iss: &self.app_id,
        };
        let claims = serde_json::to_vec(&claims).expect("the claims serialize");
        let signed = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(JWT_HEADER),
            URL_SAFE_NO_PAD.encode(claims)
        );
        let mut signature = vec![0; self.key.public().modulus_len()];
        self.key
            .sign(
                &RSA_PKCS1_SHA256,
                &ring::rand::SystemRandom::new(),
                signed.as_bytes(),
                &mut signature,
            )
            .map_err(|_| StoreError::InvalidGithubAppKey {
                cause: "the key cannot make an RS256 signature".into(),
            })?;
        Ok(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature)))
    }

    /// The cached installation token, if any (may be close to expiry; call [`Self::token`]
    /// before a Git operation).
    pub(crate) fn current(&self) -> Option<&str> {
        self.cached.as_ref().map(|c| c.token.as_str())
    }

    /// Forgets the cached token (after Git refused it), so the next call fetches a new one.
    pub(crate) fn invalidate(&mut self) {
        self.cached = None;
    }

    /// Returns an installation token with at least [`TOKEN_REFRESH_MARGIN`] of life left,
    /// asking GitHub for a new one when needed. Blocking; call on a worker thread only.
    ///
    /// # Errors
    /// [`StoreError::Unreachable`] when the API cannot be reached,
    /// [`StoreError::GithubAppAuthFailed`] when GitHub refuses the JWT or the installation or
    /// answers with something other than a token.
    pub(crate) fn token(&mut self) -> Result<&str, StoreError> {
        let fresh = self.cached.as_ref().is_some_and(|c| {
            c.valid_until.saturating_duration_since(Instant::now()) > TOKEN_REFRESH_MARGIN
        });
        if !fresh {
            let t = self.request_token()?;
            tracing::debug!(api = %self.api_url, installation = %self.installation_id, "GitHub App installation token obtained");
            self.cached = Some(t);
        }
        Ok(self.current().expect("token cached above"))
    }

    fn endpoint(&self) -> String {
        format!(
            "{}/app/installations/{}/access_tokens",
            self.api_url, self.installation_id
        )
    }

    fn request_token(&mut self) -> Result<CachedToken, StoreError> {
        let jwt = self.jwt()?;
        let url = self.endpoint();
        let obtained = Instant::now();
        let (status, body) = self.post_for_token(&url, &jwt)?;
        let json: Option<serde_json::Value> = serde_json::from_slice(&body).ok();
        self.check_answer(&url, status, json.as_ref(), &body)?;
        token_from(&url, json.as_ref(), obtained)
    }

    /// The HTTP client (and the runtime it runs on), built on first use.
    fn http_client(
        &mut self,
        unreachable: impl Fn(String) -> StoreError,
    ) -> Result<&(tokio::runtime::Runtime, reqwest::Client), StoreError> {
        if self.http.is_none() {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| unreachable(format!("cannot start HTTP client: {e}")))?;
            crate::install_tls_provider();
            let client = reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .timeout(Duration::from_secs(30))
                .danger_accept_invalid_certs(self.insecure)
                .user_agent(concat!("plinth/", env!("CARGO_PKG_VERSION")))
                .build()
                .map_err(|e| {
                    unreachable(format!(
                        "cannot build HTTP client: {}",
                        plinth_api::cause_chain(&e)
                    ))
                })?;
            self.http = Some((rt, client));
        }
        Ok(self.http.as_ref().expect("client built above"))
    }

    /// POSTs for an installation token with `jwt`: the answer's status and body.
    fn post_for_token(
        &mut self,
        url: &str,
        jwt: &str,
    ) -> Result<(reqwest::StatusCode, bytes::Bytes), StoreError> {
        let unreachable = |cause: String| StoreError::Unreachable {
            target: format!("GitHub API {url}"),
            cause,
        };
        let (rt, client) = self.http_client(unreachable)?;
        rt.block_on(async {
            let resp = client
                .post(url)
                .header("Authorization", format!("Bearer {jwt}"))
                .header("Accept", "application/vnd.github+json")
                .header("X-GitHub-Api-Version", "2022-11-28")
                .send()
                .await
                .map_err(|e| unreachable(plinth_api::cause_chain(&e)))?;
            let status = resp.status();
            let body = resp
                .bytes()
                .await
                .map_err(|e| unreachable(plinth_api::cause_chain(&e)))?;
            Ok((status, body))
        })
    }

    /// An answer that is not a success, as the error that says why (GitHub's own
    /// message, else the body's start, else the status text).
    fn check_answer(
        &self,
        url: &str,
        status: reqwest::StatusCode,
        json: Option<&serde_json::Value>,
        body: &[u8],
    ) -> Result<(), StoreError> {
        if status.is_success() {
            return Ok(());
        }
        let api_message = json
            .and_then(|j| j.get("message"))
            .and_then(|m| m.as_str())
            .map(str::to_string)
            .unwrap_or_else(|| {
                let text = String::from_utf8_lossy(body);
                let text = text.trim();
                if text.is_empty() {
                    status
                        .canonical_reason()
                        .unwrap_or("no message")
                        .to_string()
                } else {
                    text.chars().take(300).collect()
                }
            });
        if status == reqwest::StatusCode::UNAUTHORIZED {
            return Err(StoreError::GithubAppAuthFailed {
                message: api_message,
            });
        }
        let hint = match status.as_u16() {
            404 => format!(
                " (is installationID {} an installation of App {}?)",
                self.installation_id, self.app_id
            ),
            _ => String::new(),
        };
        Err(StoreError::GithubAppAuthFailed {
            message: format!(
                "{url} answered HTTP {}: {api_message}{hint}",
                status.as_u16()
            ),
        })
    }
}

/// The token of a successful answer, cached until the earlier of its `expires_at` and
/// the longest a token is kept.
fn token_from(
    url: &str,
    json: Option<&serde_json::Value>,
    obtained: Instant,
) -> Result<CachedToken, StoreError> {
    let token = json
        .and_then(|j| j.get("token"))
        .and_then(|t| t.as_str())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| StoreError::GithubAppAuthFailed {
            message: format!("{url} answered without a token"),
        })?
        .to_string();
    let mut valid_until = obtained + TOKEN_MAX_AGE;
    if let Some(expires) = json
        .and_then(|j| j.get("expires_at"))
        .and_then(|t| t.as_str())
    {
        let at: jiff::Timestamp = expires
            .parse()
            .map_err(|e| StoreError::GithubAppAuthFailed {
                message: format!("{url} answered an unreadable expires_at {expires:?}: {e}"),
            })?;
        let left = at.as_millisecond() - jiff::Timestamp::now().as_millisecond();
        let left = Duration::from_millis(left.max(0) as u64);
        valid_until = valid_until.min(obtained + left);
    }
    Ok(CachedToken { token, valid_until })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A private key made by the `openssl` CLI: `args` after `openssl`, key written to stdout.
    fn openssl_key(args: &[&str]) -> String {
        let out = std::process::Command::new("openssl")
            .args(args)
            .output()
            .expect("openssl runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn pkcs1_and_pkcs8_rsa_keys_sign_and_other_keys_are_refused() {
        let pkcs1 = openssl_key(&["genrsa", "-traditional", "2048"]);
        assert!(pkcs1.starts_with("-----BEGIN RSA PRIVATE KEY-----"));
        let pkcs8 = openssl_key(&[
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
        ]);
        assert!(pkcs8.starts_with("-----BEGIN PRIVATE KEY-----"));
        for pem in [&pkcs1, &pkcs8] {
            let source = AppTokenSource::new("123", "456", pem, "", false).unwrap();
            let jwt = source.jwt().unwrap();
            let parts: Vec<_> = jwt.split('.').collect();
            assert_eq!(parts.len(), 3, "{jwt}");
            let claims: serde_json::Value =
                serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
            assert_eq!(claims["iss"], "123");
            assert_eq!(
                claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(),
                JWT_BACKDATE_SECS + JWT_LIFETIME_SECS
            );
            // A 2048-bit key signs 256 bytes.
            assert_eq!(URL_SAFE_NO_PAD.decode(parts[2]).unwrap().len(), 256);
        }
        let ec = openssl_key(&["ecparam", "-name", "prime256v1", "-genkey", "-noout"]);
        let err = AppTokenSource::new("123", "456", &ec, "", false)
            .err()
            .unwrap();
        assert!(err.to_string().contains("not an RSA private key"), "{err}");
    }

    #[test]
    fn settings_are_checked_before_any_network() {
        let err = AppTokenSource::new("123", "456", "not a key", "", false)
            .err()
            .unwrap();
        assert!(
            err.to_string()
                .starts_with("privateKey is not a valid PEM RSA key"),
            "{err}"
        );
        let pem_garbage = "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n";
        let err = AppTokenSource::new("123", "456", pem_garbage, "", false)
            .err()
            .unwrap();
        assert!(
            matches!(err, StoreError::InvalidGithubAppKey { .. }),
            "{err}"
        );
        let err = AppTokenSource::new("123", "12a", pem_garbage, "", false)
            .err()
            .unwrap();
        assert!(err.to_string().contains("installationID"), "{err}");
        let err = AppTokenSource::new("", "1", pem_garbage, "", false)
            .err()
            .unwrap();
        assert!(err.to_string().contains("appID"), "{err}");
        let err = AppTokenSource::new("1", "1", pem_garbage, "http://ghe.example.test", false)
            .err()
            .unwrap();
        assert!(err.to_string().contains("apiURL"), "{err}");
    }
}
