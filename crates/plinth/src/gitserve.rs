//! Read-only Git over HTTPS for the state-store repositories of `plinth up`, so a GitOps
//! agent (Flux, Argo CD, a plain `git clone`) can pull what the platform wrote.
//!
//! Served on the API server's HTTPS listener, with its TLS certificate, under
//! `/git/<GitStateStore name>` (a trailing `.git` is accepted). Only the repository Plinth
//! created as its local state store ([`LOCAL_STORE_REPO`] in the data directory, made by
//! `plinth up`'s bootstrap) is served, to any GitStateStore whose `file://` URL names it;
//! every other repository is 404 — in particular the controllers' working copies under
//! `<data-dir>/controllers/statestores/`, which mirror stores outside the data directory
//! (remote or private ones) that the read token must not reach. Only git's smart protocol
//! for fetching (`git-upload-pack`) is answered; pushing (`git-receive-pack`) is 403 and
//! the dumb protocol is not offered.
//!
//! Request bodies are streamed into git as they arrive (never held whole), up to
//! [`GitLimits::max_request_bytes`] (413 beyond, as git's own
//! `GIT_HTTP_MAX_REQUEST_BUFFER`). A body sent without a length (chunked, as git sends
//! one larger than its `http.postBuffer`) is read first, up to that limit, because git
//! answers `200` before it reads its input: only so can an oversized one still get 413. At most [`GitLimits::max_concurrent`] requests are
//! served at once (each runs a git process); a request that finds no free slot within
//! [`GitLimits::queue_wait`] is answered 503 with `Retry-After`.
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
use std::time::Duration;

use anyhow::Context as _;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// File name of the read token, in the data directory next to the kubeconfig.
pub const TOKEN_FILE: &str = "git-read-token";
/// URL path prefix of the served repositories.
pub const ROUTE_PREFIX: &str = "/git";
/// The bare repository, in the data directory, that Plinth creates as its local state
/// store (the GitStateStore `local` of `plinth up`): the only repository served.
pub const LOCAL_STORE_REPO: &str = "state-store.git";

/// Limits of the Git endpoint.
#[derive(Clone, Debug)]
pub struct GitLimits {
    /// Git requests served at once (each runs `git http-backend`). Default 4.
    pub max_concurrent: usize,
    /// How long a request waits for a free slot before it is answered 503 with
    /// `Retry-After`. Default 10 s.
    pub queue_wait: Duration,
    /// Largest request body (an upload-pack negotiation: wants and haves), streamed to
    /// git; larger ones are 413. Default 10 MiB, git's own default limit.
    pub max_request_bytes: u64,
}

impl Default for GitLimits {
    fn default() -> Self {
        GitLimits {
            max_concurrent: 4,
            queue_wait: Duration::from_secs(10),
            max_request_bytes: 10 * 1024 * 1024,
        }
    }
}

/// State of the Git endpoint.
pub struct GitServe {
    data_dir: PathBuf,
    token: String,
    client: OnceLock<kube::Client>,
    limits: GitLimits,
    slots: Arc<Semaphore>,
}

impl GitServe {
    /// Loads (or creates) the read token in `data_dir` and prepares the endpoint. The
    /// client used to look up GitStateStores is given later with [`GitServe::set_client`]
    /// (until then requests get 503).
    ///
    /// Errors: the data directory cannot be resolved or the token file cannot be written.
    pub fn new(data_dir: &Path) -> anyhow::Result<Arc<GitServe>> {
        Self::with_limits(data_dir, GitLimits::default())
    }

    /// [`GitServe::new`] with other limits.
    ///
    /// Errors: as [`GitServe::new`].
    pub fn with_limits(data_dir: &Path, limits: GitLimits) -> anyhow::Result<Arc<GitServe>> {
        let data_dir = data_dir
            .canonicalize()
            .with_context(|| format!("resolving data dir {}", data_dir.display()))?;
        let token = load_or_create_token(&data_dir.join(TOKEN_FILE))?;
        Ok(Arc::new(GitServe {
            data_dir,
            token,
            client: OnceLock::new(),
            slots: Arc::new(Semaphore::new(limits.max_concurrent.max(1))),
            limits,
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
pub(crate) fn load_or_create_token(path: &Path) -> anyhow::Result<String> {
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

pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
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
        Op::AdvertiseUploadPack | Op::UploadPack => {
            let slot = match state.slot().await {
                Ok(s) => s,
                Err(resp) => return resp,
            };
            match state.repository(&store).await {
                Ok(repo) => {
                    run_http_backend(&repo, req, slot, state.limits.max_request_bytes).await
                }
                Err(resp) => resp,
            }
        }
    }
}

impl GitServe {
    /// A slot to run one git request in, waited for at most [`GitLimits::queue_wait`];
    /// else 503 with `Retry-After`.
    async fn slot(&self) -> Result<OwnedSemaphorePermit, Response> {
        match tokio::time::timeout(self.limits.queue_wait, self.slots.clone().acquire_owned()).await
        {
            Ok(Ok(permit)) => Ok(permit),
            _ => {
                let mut r = plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "{} Git requests are being served, the most at once, and none ended within {:?}; retry later",
                        self.limits.max_concurrent, self.limits.queue_wait
                    ),
                );
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                Err(r)
            }
        }
    }

    /// The bare repository served for GitStateStore `name`: its `file://` URL, resolved,
    /// must be the local state store Plinth created ([`LOCAL_STORE_REPO`]).
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
                    format!(
                        "reading GitStateStore {name}: {}",
                        plinth_api::kube_error::describe(&e)
                    ),
                ));
            }
        };
        let url = store.data["spec"]["url"].as_str().unwrap_or_default();
        let Some(local) = url.strip_prefix("file://") else {
            return Err(not_served(format!(
                "GitStateStore {name} is not served here: its spec.url {url:?} is not a local file:// repository"
            )));
        };
        let served = self.data_dir.join(LOCAL_STORE_REPO);
        match Path::new(local).canonicalize() {
            Ok(p) if served.canonicalize().is_ok_and(|s| s == p) => Ok(p),
            Ok(_) => Err(not_served(format!(
                "GitStateStore {name} is not served here: its spec.url names {local}, and only the local state store Plinth created, {}, is served",
                served.display()
            ))),
            Err(e) => Err(not_served(format!(
                "GitStateStore {name}: repository {local}: {e}"
            ))),
        }
    }
}

/// Why a request body was not passed on whole.
#[derive(Debug, PartialEq, Eq)]
enum PipeError {
    /// More than the limit arrived; `limit + 1` bytes were passed on, so git refuses it.
    TooLarge(u64),
    /// The client's body failed (e.g. the connection went away).
    Body(String),
    /// Git stopped reading.
    Write(String),
}

/// Writes `body` to `to` chunk by chunk as it arrives (never holding it whole), at most
/// `limit + 1` bytes: a body over `limit` is cut there, so the reader sees it is too large.
async fn pipe_body<W>(body: Body, to: &mut W, limit: u64) -> Result<u64, PipeError>
where
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut stream = body.into_data_stream();
    let mut sent = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| PipeError::Body(e.to_string()))?;
        let room = (limit + 1).saturating_sub(sent);
        let part = &chunk[..chunk.len().min(usize::try_from(room).unwrap_or(usize::MAX))];
        to.write_all(part)
            .await
            .map_err(|e| PipeError::Write(e.to_string()))?;
        sent += part.len() as u64;
        if sent > limit {
            return Err(PipeError::TooLarge(limit));
        }
    }
    to.shutdown()
        .await
        .map_err(|e| PipeError::Write(e.to_string()))?;
    Ok(sent)
}

/// Runs `git http-backend` for one request, streaming the request body in and its answer
/// back; `slot` is held until the answer has been sent.
async fn run_http_backend(
    repo: &Path,
    req: Request,
    slot: OwnedSemaphorePermit,
    max_request_bytes: u64,
) -> Response {
    let (parts, body) = req.into_parts();
    let (content_length, body) = match sized_body(&parts.headers, body, max_request_bytes).await {
        Ok(sized) => sized,
        Err(refused) => return refused.response(),
    };
    let Some(cmd) = http_backend_command(repo, &parts, content_length, max_request_bytes) else {
        return Refused::NoParent.response();
    };
    let mut child = match spawn_git(cmd) {
        Ok(c) => c,
        Err(refused) => return refused.response(),
    };
    let stdout = child.stdout.take().expect("piped");
    feed_and_reap(repo, child, body, max_request_bytes);
    cgi_response(BufReader::new(stdout), slot).await
}

/// Why a Git request is answered before git has run.
#[derive(Debug)]
enum Refused {
    /// The `Content-Length` header is not a number.
    BadLength,
    /// The body is longer than the limit.
    TooLarge(u64),
    /// The body could not be read.
    Body(String),
    /// The repository's path has no parent directory to serve it from.
    NoParent,
    /// git is not installed.
    NoGit,
    /// git could not be started.
    Spawn(std::io::Error),
}

impl Refused {
    fn response(self) -> Response {
        match self {
            Refused::BadLength => plain(StatusCode::BAD_REQUEST, "invalid Content-Length"),
            Refused::TooLarge(max) => plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("a Git request body may have at most {max} bytes"),
            ),
            Refused::Body(e) => plain(
                StatusCode::BAD_REQUEST,
                format!("reading the request body: {e}"),
            ),
            Refused::NoParent => plain(StatusCode::NOT_FOUND, "repository path has no parent"),
            Refused::NoGit => plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "the git CLI is not installed on the platform's machine; install git to serve state stores over HTTPS",
            ),
            Refused::Spawn(e) => plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("starting git http-backend: {e}"),
            ),
        }
    }
}

/// The body with its length: as sent when the request states it, else read whole (at
/// most `max_request_bytes`).
async fn sized_body(
    headers: &HeaderMap,
    body: Body,
    max_request_bytes: u64,
) -> Result<(u64, Body), Refused> {
    if let Some(n) = body_length(headers, max_request_bytes)? {
        return Ok((n, body));
    }
    let mut stream = body.into_data_stream();
    let mut whole = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| Refused::Body(e.to_string()))?;
        if (whole.len() + chunk.len()) as u64 > max_request_bytes {
            return Err(Refused::TooLarge(max_request_bytes));
        }
        whole.extend_from_slice(&chunk);
    }
    Ok((whole.len() as u64, Body::from(whole)))
}

/// The request's `Content-Length`, if sent.
fn body_length(headers: &HeaderMap, max_request_bytes: u64) -> Result<Option<u64>, Refused> {
    let Some(v) = headers.get(header::CONTENT_LENGTH) else {
        return Ok(None);
    };
    let Some(n) = v.to_str().ok().and_then(|v| v.parse::<u64>().ok()) else {
        return Err(Refused::BadLength);
    };
    if n > max_request_bytes {
        return Err(Refused::TooLarge(max_request_bytes));
    }
    Ok(Some(n))
}

/// `git http-backend` as a CGI program for this request: read only (upload-pack), with no
/// system or user configuration, and only the request's own headers passed on.
fn http_backend_command(
    repo: &Path,
    parts: &axum::http::request::Parts,
    content_length: u64,
    max_request_bytes: u64,
) -> Option<tokio::process::Command> {
    let (parent, dir) = (repo.parent()?, repo.file_name()?);
    let rest = if parts.uri.path().ends_with("/info/refs") {
        "info/refs"
    } else {
        "git-upload-pack"
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
        .env("GIT_HTTP_MAX_REQUEST_BUFFER", max_request_bytes.to_string())
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
    cmd.env("CONTENT_LENGTH", content_length.to_string());
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
    Some(cmd)
}

/// Starts git.
fn spawn_git(mut cmd: tokio::process::Command) -> Result<tokio::process::Child, Refused> {
    cmd.spawn().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Refused::NoGit
        } else {
            Refused::Spawn(e)
        }
    })
}

/// Streams the request body into git (cut at the limit) and waits for git to end, logging
/// how it failed; both in the background while the answer streams back.
fn feed_and_reap(
    repo: &Path,
    mut child: tokio::process::Child,
    body: Body,
    max_request_bytes: u64,
) {
    let mut stdin = child.stdin.take().expect("piped");
    let repo_name = repo.display().to_string();
    tokio::spawn(async move {
        if let Err(PipeError::TooLarge(limit)) =
            pipe_body(body, &mut stdin, max_request_bytes).await
        {
            tracing::debug!(repository = %repo_name, "a Git request body over {limit} bytes was cut");
        }
    });
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
}

/// Turns a CGI program's output (headers, a blank line, the body) into a response whose
/// body is streamed as the program writes it.
async fn cgi_response<R>(mut out: BufReader<R>, slot: OwnedSemaphorePermit) -> Response
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
    // The slot goes with the stream: it is freed when the answer has been sent or the
    // client went away.
    let stream = futures::stream::unfold((out, slot), |(mut out, slot)| async move {
        let mut buf = vec![0u8; 64 * 1024];
        match out.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok::<Bytes, std::io::Error>(Bytes::from(buf)), (out, slot)))
            }
            Err(e) => Some((Err(e), (out, slot))),
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

    /// A request body whose chunks the test sends one by one.
    fn channel_body() -> (
        tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>,
        Body,
    ) {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let stream = futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|chunk| (chunk, rx))
        });
        (tx, Body::from_stream(stream))
    }

    #[tokio::test]
    async fn request_bodies_reach_git_as_they_arrive() {
        let (tx, body) = channel_body();
        let (mut to_git, mut git) = tokio::io::duplex(1024);
        let pipe = tokio::spawn(async move { pipe_body(body, &mut to_git, 100).await });
        tx.send(Ok(Bytes::from_static(b"0032want"))).await.unwrap();
        let mut first = [0u8; 8];
        tokio::time::timeout(Duration::from_secs(5), git.read_exact(&mut first))
            .await
            .expect("the first chunk is passed on before the body ends")
            .unwrap();
        assert_eq!(&first, b"0032want");
        assert!(!pipe.is_finished());
        tx.send(Ok(Bytes::from_static(b"0000"))).await.unwrap();
        drop(tx);
        assert_eq!(pipe.await.unwrap(), Ok(12));
        let mut rest = Vec::new();
        git.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"0000");
    }

    #[tokio::test]
    async fn a_chunked_body_over_the_limit_is_refused_with_413_before_git_answers() {
        let (tx, body) = channel_body();
        let req = Request::post("/git/local/git-upload-pack")
            .body(body)
            .unwrap();
        let slots = Arc::new(Semaphore::new(1));
        let slot = slots.clone().acquire_owned().await.unwrap();
        let send = tokio::spawn(async move {
            for _ in 0..3 {
                if tx.send(Ok(Bytes::from(vec![b'x'; 60]))).await.is_err() {
                    break;
                }
            }
        });
        let resp = run_http_backend(Path::new("/nowhere/repo.git"), req, slot, 100).await;
        send.await.unwrap();
        assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert!(body_text(resp).await.contains("at most 100 bytes"));
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_cut_one_byte_past_it() {
        let (tx, body) = channel_body();
        let (mut to_git, mut git) = tokio::io::duplex(4096);
        let pipe = tokio::spawn(async move { pipe_body(body, &mut to_git, 100).await });
        for _ in 0..3 {
            if tx.send(Ok(Bytes::from(vec![b'x'; 60]))).await.is_err() {
                break;
            }
        }
        assert_eq!(pipe.await.unwrap(), Err(PipeError::TooLarge(100)));
        let mut seen = Vec::new();
        git.read_to_end(&mut seen).await.unwrap();
        assert_eq!(seen.len(), 101);
    }

    fn serve_with(limits: GitLimits) -> (tempfile::TempDir, Arc<GitServe>) {
        let dir = tempfile::tempdir().unwrap();
        let state = GitServe::with_limits(dir.path(), limits).unwrap();
        (dir, state)
    }

    fn refs_request(state: &GitServe) -> Request {
        Request::get("/git/local/info/refs?service=git-upload-pack")
            .header(header::AUTHORIZATION, format!("Bearer {}", state.token()))
            .body(Body::empty())
            .unwrap()
    }

    async fn body_text(resp: Response) -> String {
        let b = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        String::from_utf8_lossy(&b).into_owned()
    }

    #[tokio::test]
    async fn requests_beyond_the_concurrency_cap_get_503_with_retry_after() {
        let (_dir, state) = serve_with(GitLimits {
            max_concurrent: 1,
            queue_wait: Duration::from_millis(200),
            ..GitLimits::default()
        });
        let busy = state.slots.clone().acquire_owned().await.unwrap();
        let started = std::time::Instant::now();
        let resp = handle(State(state.clone()), refs_request(&state)).await;
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
        assert!(started.elapsed() >= Duration::from_millis(200));
        let text = body_text(resp).await;
        assert!(text.contains("1 Git requests are being served"), "{text}");
        // A slot that frees while the request waits lets it through (here to the store
        // lookup, which has no client yet).
        let waiting = tokio::spawn(handle(State(state.clone()), refs_request(&state)));
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(busy);
        let resp = waiting.await.unwrap();
        assert!(
            body_text(resp).await.contains("still starting"),
            "the request got the freed slot"
        );
    }

    #[tokio::test]
    async fn the_slot_is_held_until_the_answer_has_been_sent() {
        let (_dir, state) = serve_with(GitLimits::default());
        let slot = state.slots.clone().acquire_owned().await.unwrap();
        let free = || state.slots.available_permits();
        assert_eq!(free(), GitLimits::default().max_concurrent - 1);
        let (mut cgi, out) = tokio::io::duplex(1024);
        cgi.write_all(b"Content-Type: application/x-git-upload-pack-result\r\n\r\nPACK")
            .await
            .unwrap();
        let resp = cgi_response(BufReader::new(out), slot).await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(
            free(),
            GitLimits::default().max_concurrent - 1,
            "held while streaming"
        );
        drop(cgi);
        assert_eq!(body_text(resp).await, "PACK");
        assert_eq!(free(), GitLimits::default().max_concurrent);
    }

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
