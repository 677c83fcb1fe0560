//! Read-only Git over HTTPS for the state-store repositories of `plinth up`, so a GitOps
//! agent (Flux, Argo CD, a plain `git clone`) can pull what the platform wrote.
//!
//! Served on the API server's HTTPS listener, with its TLS certificate, under
//! `/git/<GitStateStore name>` (a trailing `.git` is accepted). Only a GitStateStore whose
//! URL is `file://` and names a repository inside the data directory is served; anything
//! else is 404. Only git's smart protocol for fetching (`git-upload-pack`) is answered;
//! pushing (`git-receive-pack`) is 403 and the dumb protocol is not offered.
//!
//! Every request needs the read token from `<data-dir>/git-read-token` (created at first
//! start, kept across restarts, file mode 0600), either as the password of HTTP basic auth
//! (any user name) or as a bearer token; otherwise the answer is 401 with a basic-auth
//! challenge. The token grants nothing on the Kubernetes API.
//!
//! The protocol itself is git's own: each request runs `git http-backend` (the CGI program
//! that ships with git) with `http.receivepack=false`, so the `git` CLI must be on `PATH`
//! of the `plinth up` process; without it the endpoint answers 503 and says so.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, OnceLock};

use anyhow::Context as _;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// File name of the read token, in the data directory next to the kubeconfig.
pub const TOKEN_FILE: &str = "git-read-token";
/// URL path prefix of the served repositories.
pub const ROUTE_PREFIX: &str = "/git";
/// Largest request body accepted (an upload-pack negotiation: wants and haves).
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// State of the Git endpoint.
pub struct GitServe {
    data_dir: PathBuf,
    token: String,
    client: OnceLock<kube::Client>,
}

impl GitServe {
    /// Loads (or creates) the read token in `data_dir` and prepares the endpoint. The
    /// client used to look up GitStateStores is given later with [`GitServe::set_client`]
    /// (until then requests get 503).
    ///
    /// Errors: the data directory cannot be resolved or the token file cannot be written.
    pub fn new(data_dir: &Path) -> anyhow::Result<Arc<GitServe>> {
        let data_dir = data_dir
            .canonicalize()
            .with_context(|| format!("resolving data dir {}", data_dir.display()))?;
        let token = load_or_create_token(&data_dir.join(TOKEN_FILE))?;
        Ok(Arc::new(GitServe {
            data_dir,
            token,
            client: OnceLock::new(),
        }))
    }

    /// The read token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Path of the token file.
    pub fn token_path(&self) -> PathBuf {
        self.data_dir.join(TOKEN_FILE)
    }

    /// Gives the endpoint the client it reads GitStateStores with.
    pub fn set_client(&self, client: kube::Client) {
        let _ = self.client.set(client);
    }
}

/// Reads the token file, or writes a new random token (64 hex digits, mode 0600).
fn load_or_create_token(path: &Path) -> anyhow::Result<String> {
    let existing = std::fs::read_to_string(path).unwrap_or_default();
    if !existing.trim().is_empty() {
        return Ok(existing.trim().to_string());
    }
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("writing {}", tmp.display()))?;
    f.write_all(token.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(token)
}

/// The routes: everything under [`ROUTE_PREFIX`], authenticated by the read token.
pub fn router(state: Arc<GitServe>) -> axum::Router {
    axum::Router::new()
        .route(
            &format!("{ROUTE_PREFIX}/{{*path}}"),
            axum::routing::any(handle),
        )
        .with_state(state)
}

/// What a request asks for, from its path and query.
#[derive(Debug, PartialEq, Eq)]
enum Op {
    /// `GET <repo>/info/refs?service=git-upload-pack`
    AdvertiseUploadPack,
    /// `POST <repo>/git-upload-pack`
    UploadPack,
    /// Anything that would write: `info/refs?service=git-receive-pack`, `git-receive-pack`.
    Push,
    /// The dumb protocol or an unknown path.
    Unsupported,
}

/// Splits `<store>[.git]/<rest>` into the store name and the operation.
fn parse(path: &str, query: Option<&str>, method: &Method) -> Option<(String, Op)> {
    let (store, rest) = path.split_once('/')?;
    let store = store.strip_suffix(".git").unwrap_or(store);
    if store.is_empty() {
        return None;
    }
    let service = query.and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("service="))
            .map(str::to_string)
    });
    let op = match (rest, service.as_deref()) {
        ("info/refs", Some("git-upload-pack")) if method == Method::GET => Op::AdvertiseUploadPack,
        ("git-upload-pack", _) if method == Method::POST => Op::UploadPack,
        ("info/refs", Some("git-receive-pack")) | ("git-receive-pack", _) => Op::Push,
        _ => Op::Unsupported,
    };
    Some((store.to_string(), op))
}

fn plain(code: StatusCode, msg: impl Into<String>) -> Response {
    let mut msg = msg.into();
    msg.push('\n');
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        msg,
    )
        .into_response()
}

fn unauthorized() -> Response {
    let mut r = plain(
        StatusCode::UNAUTHORIZED,
        format!("a read token is required (the password in <data-dir>/{TOKEN_FILE})"),
    );
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"plinth state store (read-only)\""),
    );
    r
}

/// True when the request carries the token as a basic-auth password or a bearer token.
fn authorized(headers: &HeaderMap, token: &str) -> bool {
    use base64::Engine;
    let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let presented = if let Some(b) = value.strip_prefix("Bearer ") {
        b.trim().to_string()
    } else if let Some(b) = value.strip_prefix("Basic ") {
        let Ok(raw) = base64::engine::general_purpose::STANDARD.decode(b.trim()) else {
            return false;
        };
        let Ok(text) = String::from_utf8(raw) else {
            return false;
        };
        match text.split_once(':') {
            Some((_, password)) => password.to_string(),
            None => return false,
        }
    } else {
        return false;
    };
    constant_time_eq(presented.as_bytes(), token.as_bytes())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn handle(State(state): State<Arc<GitServe>>, req: Request) -> Response {
    if !authorized(req.headers(), &state.token) {
        return unauthorized();
    }
    let path = req
        .uri()
        .path()
        .strip_prefix(ROUTE_PREFIX)
        .unwrap_or_default()
        .trim_start_matches('/')
        .to_string();
    let Some((store, op)) = parse(&path, req.uri().query(), req.method()) else {
        return plain(
            StatusCode::NOT_FOUND,
            "expected /git/<GitStateStore name>/…",
        );
    };
    match op {
        Op::Push => plain(
            StatusCode::FORBIDDEN,
            format!(
                "GitStateStore {store} is served read-only: pushing is refused (the platform is its only writer)"
            ),
        ),
        Op::Unsupported => plain(
            StatusCode::FORBIDDEN,
            "only git's smart HTTP protocol for fetching (git-upload-pack) is served",
        ),
        Op::AdvertiseUploadPack | Op::UploadPack => match state.repository(&store).await {
            Ok(repo) => run_http_backend(&repo, req).await,
            Err(resp) => resp,
        },
    }
}

impl GitServe {
    /// The bare repository served for GitStateStore `name`: its `file://` URL, resolved,
    /// must lie inside the data directory.
    async fn repository(&self, name: &str) -> Result<PathBuf, Response> {
        let Some(client) = self.client.get() else {
            return Err(plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "the platform is still starting",
            ));
        };
        let gvk = GroupVersionKind::gvk(plinth_api::GROUP, plinth_api::VERSION, "GitStateStore");
        let ar = ApiResource::from_gvk_with_plural(&gvk, "gitstatestores");
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let not_served = |why: String| plain(StatusCode::NOT_FOUND, why);
        let store = match api.get_opt(name).await {
            Ok(Some(s)) => s,
            Ok(None) => return Err(not_served(format!("GitStateStore {name} not found"))),
            Err(e) => {
                return Err(plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("reading GitStateStore {name}: {e}"),
                ));
            }
        };
        let url = store.data["spec"]["url"].as_str().unwrap_or_default();
        let Some(local) = url.strip_prefix("file://") else {
            return Err(not_served(format!(
                "GitStateStore {name} is not served here: its spec.url {url:?} is not a local file:// repository"
            )));
        };
        match Path::new(local).canonicalize() {
            Ok(p) if p.starts_with(&self.data_dir) => Ok(p),
            Ok(_) => Err(not_served(format!(
                "GitStateStore {name} is not served here: its repository {local} is outside the data dir {}",
                self.data_dir.display()
            ))),
            Err(e) => Err(not_served(format!(
                "GitStateStore {name}: repository {local}: {e}"
            ))),
        }
    }
}

/// Runs `git http-backend` for one request and streams its answer back.
async fn run_http_backend(repo: &Path, req: Request) -> Response {
    let (Some(parent), Some(dir)) = (repo.parent(), repo.file_name()) else {
        return plain(StatusCode::NOT_FOUND, "repository path has no parent");
    };
    let (parts, body) = req.into_parts();
    let rest = if parts.uri.path().ends_with("/info/refs") {
        "info/refs"
    } else {
        "git-upload-pack"
    };
    let body = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(e) => return plain(StatusCode::PAYLOAD_TOO_LARGE, format!("request body: {e}")),
    };
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", parent)
        .env("PATH_INFO", format!("/{}/{rest}", dir.to_string_lossy()))
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", parts.method.as_str())
        .env("QUERY_STRING", parts.uri.query().unwrap_or_default())
        .env("CONTENT_TYPE", header("content-type"))
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", parent)
        .env("GIT_CONFIG_COUNT", "3")
        .env("GIT_CONFIG_KEY_0", "http.receivepack")
        .env("GIT_CONFIG_VALUE_0", "false")
        .env("GIT_CONFIG_KEY_1", "http.uploadpack")
        .env("GIT_CONFIG_VALUE_1", "true")
        .env("GIT_CONFIG_KEY_2", "safe.directory")
        .env("GIT_CONFIG_VALUE_2", repo)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Passed on only when sent: gzip-compressed negotiation, protocol v2.
    for (h, var) in [
        ("content-encoding", "HTTP_CONTENT_ENCODING"),
        ("git-protocol", "HTTP_GIT_PROTOCOL"),
    ] {
        let v = header(h);
        if !v.is_empty() {
            cmd.env(var, v);
        }
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "the git CLI is not installed on the platform's machine; install git to serve state stores over HTTPS",
            );
        }
        Err(e) => {
            return plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("starting git http-backend: {e}"),
            );
        }
    };
    let mut stdin = child.stdin.take().expect("piped");
    tokio::spawn(async move {
        let _ = stdin.write_all(&body).await;
    });
    let stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let repo_name = repo.display().to_string();
    tokio::spawn(async move {
        let mut err = String::new();
        let _ = stderr.read_to_string(&mut err).await;
        match child.wait().await {
            Ok(s) if s.success() => {}
            Ok(s) => {
                tracing::warn!(repository = %repo_name, "git http-backend exited with {s}: {}", err.trim())
            }
            Err(e) => tracing::warn!(repository = %repo_name, "git http-backend: {e}"),
        }
    });
    cgi_response(BufReader::new(stdout)).await
}

/// Turns a CGI program's output (headers, a blank line, the body) into a response whose
/// body is streamed as the program writes it.
async fn cgi_response<R>(mut out: BufReader<R>) -> Response
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
{
    let mut status = StatusCode::OK;
    let mut headers = HeaderMap::new();
    loop {
        let mut line = String::new();
        match out.read_line(&mut line).await {
            Ok(0) => {
                return plain(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "git http-backend ended without an answer",
                );
            }
            Ok(_) => {}
            Err(e) => {
                return plain(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("reading git http-backend: {e}"),
                );
            }
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            if let Some(code) = value
                .split_whitespace()
                .next()
                .and_then(|c| c.parse::<u16>().ok())
                .and_then(|c| StatusCode::from_u16(c).ok())
            {
                status = code;
            }
        } else if let (Ok(n), Ok(v)) = (
            header::HeaderName::from_bytes(name.trim().as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.append(n, v);
        }
    }
    let stream = futures::stream::unfold(out, |mut out| async move {
        let mut buf = vec![0u8; 64 * 1024];
        match out.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok::<Bytes, std::io::Error>(Bytes::from(buf)), out))
            }
            Err(e) => Some((Err(e), out)),
        }
    });
    let mut resp = Response::new(Body::from_stream(stream));
    *resp.status_mut() = status;
    *resp.headers_mut() = headers;
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_to_operations() {
        let get = Method::GET;
        let post = Method::POST;
        assert_eq!(
            parse("local/info/refs", Some("service=git-upload-pack"), &get),
            Some(("local".into(), Op::AdvertiseUploadPack))
        );
        assert_eq!(
            parse("local.git/git-upload-pack", None, &post),
            Some(("local".into(), Op::UploadPack))
        );
        assert_eq!(
            parse("local/info/refs", Some("service=git-receive-pack"), &get),
            Some(("local".into(), Op::Push))
        );
        assert_eq!(
            parse("local/git-receive-pack", None, &post),
            Some(("local".into(), Op::Push))
        );
        assert_eq!(
            parse("local/info/refs", None, &get),
            Some(("local".into(), Op::Unsupported))
        );
        assert_eq!(
            parse("local/HEAD", None, &get),
            Some(("local".into(), Op::Unsupported))
        );
        assert_eq!(parse("local", None, &get), None);
    }

    #[test]
    fn token_as_password_or_bearer() {
        use base64::Engine;
        let mut h = HeaderMap::new();
        assert!(!authorized(&h, "t0k"));
        let basic = |s: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(s)
            )
        };
        h.insert(header::AUTHORIZATION, basic("anyone:t0k").parse().unwrap());
        assert!(authorized(&h, "t0k"));
        h.insert(header::AUTHORIZATION, basic("anyone:t0x").parse().unwrap());
        assert!(!authorized(&h, "t0k"));
        h.insert(header::AUTHORIZATION, "Bearer t0k".parse().unwrap());
        assert!(authorized(&h, "t0k"));
        h.insert(header::AUTHORIZATION, "Bearer t0".parse().unwrap());
        assert!(!authorized(&h, "t0k"));
    }
}
