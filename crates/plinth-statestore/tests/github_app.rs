//! GitHub App authentication for the Git writer (`authMethod: githubApp`):
//! a local fake of GitHub's installation-token endpoint that verifies the App JWT with
//! the App's public key (by the `openssl` CLI, not by the code that signed it), and git-http-backend behind lighttpd that accepts only
//! `x-access-token:<the token just issued>`.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use plinth_statestore::git::init_bare;
use plinth_statestore::{
    GitAuth, GitConfig, StateStore, StoreConfig, StoreError, WriteOp, WriteRequest,
};
use serde_json::{Value, json};
use support::*;

const APP_ID: &str = "424242";
const INSTALLATION_ID: &str = "987654";

/// Generates a PKCS#1 RSA key (the format GitHub hands out) with the openssl CLI; returns
/// (private key PEM, public key PEM).
fn rsa_key(dir: &Path, name: &str) -> (String, String) {
    let key = dir.join(format!("{name}.pem"));
    let public = dir.join(format!("{name}.pub.pem"));
    let st = Command::new("openssl")
        .args(["genrsa", "-traditional", "-out"])
        .arg(&key)
        .arg("2048")
        .output()
        .expect("openssl runs");
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let st = Command::new("openssl")
        .args(["rsa", "-pubout", "-in"])
        .arg(&key)
        .arg("-out")
        .arg(&public)
        .output()
        .expect("openssl runs");
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    (
        std::fs::read_to_string(&key).unwrap(),
        std::fs::read_to_string(&public).unwrap(),
    )
}

struct FakeState {
    /// The App's public key (PEM), for `openssl dgst -verify`.
    public_key: tempfile::NamedTempFile,
    /// Seconds until an issued token expires.
    token_lifetime: AtomicU64,
    issued: AtomicUsize,
    /// lighttpd's user file: rewritten with only the newest token on every issue.
    users_file: Option<PathBuf>,
    /// Claims of the last accepted JWT.
    last_claims: Mutex<Option<Value>>,
}

/// A fake `api.github.com` on 127.0.0.1:0, stopped on drop.
struct FakeGithub {
    url: String,
    state: Arc<FakeState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeGithub {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeGithub {
    fn issued(&self) -> usize {
        self.state.issued.load(Ordering::SeqCst)
    }
}

fn token_name(n: usize) -> String {
    format!("ghs_plinthTestInstallationToken{n:04}")
}

/// The claims of an RS256 JWT whose header says RS256 and whose signature `openssl dgst`
/// verifies with the public key; `None` for anything else.
fn verified_claims(jwt: &str, public_key: &Path) -> Option<Value> {
    let mut parts = jwt.split('.');
    let (header, claims, signature) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let decode = |p: &str| URL_SAFE_NO_PAD.decode(p).ok();
    let header: Value = serde_json::from_slice(&decode(header)?).ok()?;
    if header["alg"] != "RS256" {
        return None;
    }
    let sig = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(sig.path(), decode(signature)?).unwrap();
    let mut openssl = Command::new("openssl")
        .args(["dgst", "-sha256", "-verify"])
        .arg(public_key)
        .arg("-signature")
        .arg(sig.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("openssl runs");
    use std::io::Write as _;
    let signed = &jwt[..jwt.rfind('.')?];
    openssl.stdin.take()?.write_all(signed.as_bytes()).ok()?;
    if !openssl.wait().ok()?.success() {
        return None;
    }
    serde_json::from_slice(&decode(claims)?).ok()
}

async fn access_tokens(
    State(st): State<Arc<FakeState>>,
    UrlPath(installation): UrlPath<String>,
    headers: HeaderMap,
) -> (StatusCode, Json<Value>) {
    let unauthorized = |m: &str| {
        (
            StatusCode::UNAUTHORIZED,
            Json(json!({"message": m, "documentation_url": "https://docs.github.com/rest"})),
        )
    };
    if headers.get("accept").and_then(|v| v.to_str().ok()) != Some("application/vnd.github+json") {
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Json(json!({"message": "wrong Accept header"})),
        );
    }
    let Some(jwt) = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    else {
        return unauthorized("A JSON web token could not be decoded");
    };
    let Some(claims) = verified_claims(jwt, st.public_key.path()) else {
        return unauthorized("A JSON web token could not be decoded");
    };
    if claims["iss"] != APP_ID || claims["iat"].as_i64().is_none() {
        return unauthorized("A JSON web token could not be decoded");
    }
    let (iat, exp) = (
        claims["iat"].as_i64().unwrap(),
        claims["exp"].as_i64().unwrap_or(i64::MAX),
    );
    let now = jiff::Timestamp::now().as_second();
    // GitHub: `iat` in the past, `exp` at most 10 minutes after it.
    if iat > now || exp - iat > 600 {
        return unauthorized("'Expiration time' claim ('exp') is too far in the future");
    }
    if installation != INSTALLATION_ID {
        return (StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"})));
    }
    *st.last_claims.lock().unwrap() = Some(claims);
    let n = st.issued.fetch_add(1, Ordering::SeqCst) + 1;
    let token = token_name(n);
    if let Some(users) = &st.users_file {
        std::fs::write(users, format!("x-access-token:{token}\n")).unwrap();
    }
    let lifetime = st.token_lifetime.load(Ordering::SeqCst) as i64;
    let expires = jiff::Timestamp::from_second(now + lifetime).unwrap();
    (
        StatusCode::CREATED,
        Json(json!({
            "token": token,
            "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            "permissions": {"contents": "write"},
            "repository_selection": "selected",
        })),
    )
}

async fn fake_github(public_pem: &str, users_file: Option<PathBuf>) -> FakeGithub {
    let state = Arc::new(FakeState {
        public_key: {
            let f = tempfile::NamedTempFile::new().unwrap();
            std::fs::write(f.path(), public_pem).unwrap();
            f
        },
        token_lifetime: AtomicU64::new(3600),
        issued: AtomicUsize::new(0),
        users_file,
        last_claims: Mutex::new(None),
    });
    let app = axum::Router::new()
        .route(
            "/app/installations/{installation}/access_tokens",
            post(access_tokens),
        )
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    FakeGithub { url, state, task }
}

fn app_cfg(git_url: &str, work: &Path, private_key: &str, api_url: &str) -> GitConfig {
    let mut c = GitConfig::new(git_url, "main", work);
    c.batch_window = Duration::from_millis(50);
    // The test servers have a self-signed certificate (git) and plain HTTP (API).
    c.insecure_skip_tls_verify = true;
    c.auth = GitAuth::GithubApp {
        app_id: APP_ID.into(),
        installation_id: INSTALLATION_ID.into(),
        private_key_pem: private_key.into(),
        api_url: api_url.into(),
    };
    c
}

fn put(name: &str, path: &str, content: &str) -> WriteRequest {
    WriteRequest {
        name: name.into(),
        ops: vec![WriteOp::Put {
            path: path.into(),
            content: content.as_bytes().to_vec(),
        }],
    }
}

struct Fixture {
    tmp: tempfile::TempDir,
    git: HttpsGitServer,
    api: FakeGithub,
    private_key: String,
}

impl Fixture {
    fn bare(&self) -> PathBuf {
        self.git.repos.join("state.git")
    }

    fn read_back(&self, path: &str) -> Vec<u8> {
        let clone = cli_clone(self.tmp.path(), &self.bare().display().to_string(), "main");
        tree_files(&clone).remove(path).unwrap_or_default()
    }
}

async fn fixture() -> Option<Fixture> {
    let tmp = tempfile::tempdir().unwrap();
    // No token issued yet: nobody gets in.
    let git = https_git_server_with_users(tmp.path(), "x-access-token:nothing-issued-yet\n")?;
    init_bare(&git.repos.join("state.git"), "main").unwrap();
    let (private_key, public_key) = rsa_key(tmp.path(), "app");
    let api = fake_github(&public_key, Some(git.users.clone())).await;
    Some(Fixture {
        tmp,
        git,
        api,
        private_key,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_succeeds_through_the_installation_token_which_is_cached() {
    let Some(f) = fixture().await else { return };
    let url = f.git.url("state.git");
    let store = StateStore::open(StoreConfig::Git(app_cfg(
        &url,
        &f.tmp.path().join("w"),
        &f.private_key,
        &f.api.url,
    )))
    .await
    .expect("opens with the App token");
    store.validate().await.unwrap();
    let out = store
        .write(put("wp-app", "dev/app.yaml", "via github app\n"))
        .await
        .unwrap();
    assert!(out.changed);
    assert_eq!(f.read_back("dev/app.yaml"), b"via github app\n");
    let out2 = store
        .write(put("wp-app", "dev/app2.yaml", "again\n"))
        .await
        .unwrap();
    assert_ne!(out.version_id, out2.version_id);
    assert_eq!(
        f.api.issued(),
        1,
        "a token with an hour left is reused for every operation"
    );

    // The JWT GitHub saw: iss = App ID, iat back-dated 60 s, exp 9 minutes ahead.
    let claims = f.api.state.last_claims.lock().unwrap().clone().unwrap();
    assert_eq!(claims["iss"], APP_ID);
    let (iat, exp) = (
        claims["iat"].as_i64().unwrap(),
        claims["exp"].as_i64().unwrap_or(i64::MAX),
    );
    assert_eq!(exp - iat, 600);
    let now = jiff::Timestamp::now().as_second();
    assert!((now - 70..=now - 50).contains(&iat), "iat {iat} now {now}");

    // The token is revoked behind the writer's back: the write fails as an authentication
    // error (without the token in the message), and the next one fetches a new token.
    std::fs::write(&f.git.users, "x-access-token:revoked\n").unwrap();
    let err = store
        .write(put("wp-app", "dev/app3.yaml", "3\n"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::AuthFailed { .. }), "{err:?}");
    assert!(!err.to_string().contains(&token_name(1)), "{err}");
    store
        .write(put("wp-app", "dev/app3.yaml", "3\n"))
        .await
        .expect("a refused token is replaced");
    assert_eq!(f.api.issued(), 2);
    assert_eq!(f.read_back("dev/app3.yaml"), b"3\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_near_expiry_is_replaced_before_use() {
    let Some(f) = fixture().await else { return };
    // Tokens live 5 minutes + 4 s: after 5 s less than the 5-minute margin is left.
    f.api.state.token_lifetime.store(304, Ordering::SeqCst);
    let url = f.git.url("state.git");
    let store = StateStore::open(StoreConfig::Git(app_cfg(
        &url,
        &f.tmp.path().join("w"),
        &f.private_key,
        &f.api.url,
    )))
    .await
    .unwrap();
    store
        .write(put("wp-1", "dev/one.yaml", "1\n"))
        .await
        .unwrap();
    let before = f.api.issued();
    assert!(before >= 1);
    tokio::time::sleep(Duration::from_secs(5)).await;
    // Issuing a token revokes the previous one on the fake git server, so this write only
    // succeeds with a freshly fetched token.
    store
        .write(put("wp-2", "dev/two.yaml", "2\n"))
        .await
        .expect("write after refresh");
    assert!(
        f.api.issued() > before,
        "a token with less than 5 minutes left was replaced"
    );
    assert_eq!(f.read_back("dev/two.yaml"), b"2\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_key_gets_githubs_message_and_nothing_secret() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, public_key) = rsa_key(tmp.path(), "app");
    let (other_key, _) = rsa_key(tmp.path(), "other");
    let api = fake_github(&public_key, None).await;
    // The git server is never contacted: the token exchange fails first.
    let err = StateStore::open(StoreConfig::Git(app_cfg(
        "https://127.0.0.1:9/org/state.git",
        &tmp.path().join("w"),
        &other_key,
        &api.url,
    )))
    .await
    .unwrap_err();
    assert!(
        matches!(err, StoreError::GithubAppAuthFailed { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "GitHub App authentication failed: A JSON web token could not be decoded"
    );
    let key_body: String = other_key.lines().nth(1).unwrap().to_string();
    assert!(!format!("{err:?}").contains(&key_body));
    assert_eq!(api.issued(), 0);

    // Right key, wrong installation: GitHub's 404, with a hint.
    let (right_key, _) = (
        std::fs::read_to_string(tmp.path().join("app.pem")).unwrap(),
        (),
    );
    let mut cfg = app_cfg(
        "https://127.0.0.1:9/org/state.git",
        &tmp.path().join("w2"),
        &right_key,
        &api.url,
    );
    if let GitAuth::GithubApp {
        installation_id, ..
    } = &mut cfg.auth
    {
        *installation_id = "1".into();
    }
    let err = StateStore::open(StoreConfig::Git(cfg)).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("GitHub App authentication failed:")
            && msg.contains("HTTP 404")
            && msg.contains("installationID 1"),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_api_and_bad_pem_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let (key, _) = rsa_key(tmp.path(), "app");
    let closed = format!("http://127.0.0.1:{}", free_port());
    let err = StateStore::open(StoreConfig::Git(app_cfg(
        "https://127.0.0.1:9/org/state.git",
        &tmp.path().join("w"),
        &key,
        &closed,
    )))
    .await
    .unwrap_err();
    assert!(matches!(err, StoreError::Unreachable { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "cannot reach GitHub API {closed}/app/installations/"
        )),
        "{msg}"
    );

    let err = StateStore::open(StoreConfig::Git(app_cfg(
        "https://127.0.0.1:9/org/state.git",
        &tmp.path().join("w2"),
        "-----BEGIN RSA PRIVATE KEY-----\nbm90IGEga2V5\n-----END RSA PRIVATE KEY-----\n",
        &closed,
    )))
    .await
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("privateKey is not a valid PEM RSA key"),
        "{err}"
    );

    // An SSH URL cannot carry an installation token.
    let err = StateStore::open(StoreConfig::Git(app_cfg(
        "git@github.com:org/state.git",
        &tmp.path().join("w3"),
        &key,
        &closed,
    )))
    .await
    .unwrap_err();
    assert!(matches!(err, StoreError::InvalidConfig { .. }), "{err:?}");
}
