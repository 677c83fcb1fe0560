//! `plinth up --alertmanager-addr`: Alertmanager's webhook receiver. `POST /alerts` takes
//! Alertmanager's webhook payload (version 4) with `Authorization: Bearer <token>` (what
//! `http_config.authorization.credentials_file` sends) and applies one HealthRecord per
//! alert name and request (`plinth_controllers::health::alerts`). It answers 200 with each
//! alert's outcome whenever the payload parsed — also for alerts it ignored, since
//! Alertmanager resends a group on any other answer — 401 for a missing or wrong token
//! (checked before the body is read), 413 for a body over [`MAX_BODY_BYTES`], 400 for a
//! body that is not a payload, and 503 when the platform does not answer within
//! [`HANDLE_TIMEOUT`].
//!
//! Plain HTTP on a listener of its own with the limits of every Plinth listener
//! (`plinth_apiserver::listener`: connection cap, header-read, body-stall and idle
//! timeouts, accept backoff).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context as _;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use plinth_api::metrics::Metrics;
use tokio::task::JoinHandle;

/// The webhook's path.
pub const ROUTE: &str = "/alerts";
/// Largest request body accepted (1 MiB: several thousand alerts).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// How long one payload may take to apply before the answer is 503.
pub const HANDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// The token file created in the data dir when `--alertmanager-token-file` is not given.
pub const TOKEN_FILE: &str = "alertmanager-token";

/// The receiver's state.
pub struct Receiver {
    token: String,
    token_path: PathBuf,
    client: OnceLock<kube::Client>,
    metrics: Arc<Metrics>,
}

impl Receiver {
    /// A receiver checking the token in `token_file`, or when `None` the one in
    /// `<data_dir>/alertmanager-token` (created, 64 hex digits, mode 0600, when absent).
    ///
    /// Errors: the token file cannot be read (or is empty), or cannot be created.
    pub fn new(
        data_dir: &Path,
        token_file: Option<&Path>,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Arc<Receiver>> {
        let (token, token_path) = match token_file {
            Some(f) => {
                let t = std::fs::read_to_string(f)
                    .with_context(|| format!("--alertmanager-token-file {}", f.display()))?;
                let t = t.trim().to_string();
                anyhow::ensure!(
                    !t.is_empty(),
                    "--alertmanager-token-file {}: the file is empty",
                    f.display()
                );
                (t, f.to_path_buf())
            }
            None => {
                let path = data_dir.join(TOKEN_FILE);
                (crate::gitserve::load_or_create_token(&path)?, path)
            }
        };
        Ok(Arc::new(Receiver {
            token,
            token_path,
            client: OnceLock::new(),
            metrics,
        }))
    }

    /// Where the token is.
    pub fn token_path(&self) -> &Path {
        &self.token_path
    }

    /// Gives the receiver the client it applies records with (until then 503).
    pub fn set_client(&self, client: kube::Client) {
        let _ = self.client.set(client);
    }
}

/// The routes: `POST /alerts`, authenticated by the token before the body is read.
pub fn router(state: Arc<Receiver>) -> axum::Router {
    axum::Router::new()
        .route(ROUTE, axum::routing::post(handle))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authorize,
        ))
        .with_state(state)
}

async fn authorize(State(state): State<Arc<Receiver>>, req: Request, next: Next) -> Response {
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let ok = presented
        .is_some_and(|p| crate::gitserve::constant_time_eq(p.as_bytes(), state.token.as_bytes()));
    if !ok {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "a bearer token is required (see plinth up's alertmanager line)\n",
        )
            .into_response();
    }
    next.run(req).await
}

async fn handle(State(state): State<Arc<Receiver>>, body: Bytes) -> Response {
    let payload: plinth_controllers::health::alerts::Payload = match serde_json::from_slice(&body) {
        Ok(p) => p,
        Err(e) => {
            tracing::info!(error = %e, "alertmanager: not a webhook payload");
            return (
                StatusCode::BAD_REQUEST,
                format!("not an Alertmanager webhook payload: {e}\n"),
            )
                .into_response();
        }
    };
    let Some(client) = state.client.get() else {
        return (StatusCode::SERVICE_UNAVAILABLE, "starting\n").into_response();
    };
    let work = plinth_controllers::health::alerts::receive(
        client,
        &state.metrics,
        &payload,
        jiff::Timestamp::now(),
    );
    match tokio::time::timeout(HANDLE_TIMEOUT, work).await {
        Ok(summary) => {
            if summary.ignored > 0 || summary.failed > 0 {
                tracing::info!(
                    receiver = %payload.receiver,
                    received = summary.received,
                    applied = summary.applied,
                    ignored = summary.ignored,
                    failed = summary.failed,
                    "alertmanager payload handled"
                );
            }
            axum::Json(summary).into_response()
        }
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "10")],
            "the platform did not answer in time\n",
        )
            .into_response(),
    }
}

/// Binds `addr` and serves the receiver until the process stops; returns the bound
/// address (port 0 picks a free one) and the serving task.
///
/// # Errors
/// The address cannot be bound.
pub async fn serve(
    addr: SocketAddr,
    state: Arc<Receiver>,
) -> anyhow::Result<(SocketAddr, JoinHandle<()>)> {
    let limits = plinth_apiserver::listener::ListenerLimits {
        // One Alertmanager (a few in a cluster) at most.
        max_connections: 64,
        ..Default::default()
    };
    let listener = plinth_apiserver::listener::bind(addr, limits.backlog)
        .with_context(|| format!("--alertmanager-addr {addr}: cannot listen"))?;
    let local = listener.local_addr()?;
    let task = tokio::spawn(plinth_apiserver::listener::serve(
        listener,
        None,
        router(state),
        limits,
        "alertmanager",
    ));
    tracing::info!(addr = %local, "serving the Alertmanager webhook on http://{local}{ROUTE}");
    Ok((local, task))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn post(addr: SocketAddr, auth: Option<&str>, body: &[u8]) -> (u16, String) {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let auth = auth
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let head = format!(
            "POST {ROUTE} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        s.write_all(head.as_bytes()).await.unwrap();
        // An oversize body may be refused before it is all sent.
        let _ = s.write_all(body).await;
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        let text = String::from_utf8_lossy(&out).to_string();
        let code = text
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        (code, text)
    }

    #[tokio::test]
    async fn token_size_and_payload_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let rx = Receiver::new(dir.path(), None, Arc::new(Metrics::new())).unwrap();
        let token = std::fs::read_to_string(dir.path().join(TOKEN_FILE)).unwrap();
        assert_eq!(token.len(), 64);
        let (addr, task) = serve("127.0.0.1:0".parse().unwrap(), rx).await.unwrap();
        let ok = br#"{"version":"4","status":"firing","alerts":[]}"#;
        assert_eq!(post(addr, None, ok).await.0, 401);
        assert_eq!(post(addr, Some("wrong"), ok).await.0, 401);
        let big = vec![b' '; MAX_BODY_BYTES + 1];
        assert_eq!(post(addr, Some(&token), &big).await.0, 413);
        assert_eq!(post(addr, Some(&token), b"not json").await.0, 400);
        // No client yet: the platform is still starting.
        assert_eq!(post(addr, Some(&token), ok).await.0, 503);
        task.abort();
    }

    #[test]
    fn a_given_token_file_is_used_and_must_not_be_empty() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("t");
        std::fs::write(&f, "secret\n").unwrap();
        let m = Arc::new(Metrics::new());
        let rx = Receiver::new(dir.path(), Some(&f), m.clone()).unwrap();
        assert_eq!(rx.token, "secret");
        assert_eq!(rx.token_path(), f);
        assert!(!dir.path().join(TOKEN_FILE).exists());
        std::fs::write(&f, "\n").unwrap();
        assert!(Receiver::new(dir.path(), Some(&f), m).is_err());
    }
}
