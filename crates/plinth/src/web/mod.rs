//! The read-only web view `plinth up` serves under `/ui/` on the API's HTTPS listener:
//! Promises, requests with conditions and health, a map of each Promise, the files a
//! request wrote (read through the state store's reader, with the commit), pipeline logs
//! and a health chart, kept live by the API's watch (server-sent events).
//!
//! Authentication: the API's admin bearer token, or a session cookie obtained once from
//! the login link `plinth up` prints (`/ui/login?token=…`; the token works once). Every
//! read goes through the Kubernetes API with the in-process client, as any client would.

pub mod html;
mod read;

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use futures::{Stream, StreamExt};

use crate::status::{collect, tree};

/// Path prefix of the web view.
pub const ROUTE_PREFIX: &str = "/ui";
/// Name of the session cookie.
const COOKIE: &str = "plinth_ui";
/// Lifetime of a session cookie, in seconds (12 hours).
const SESSION_SECS: u64 = 12 * 3600;

/// State of the web view: the API client, the admin token, the unused login token and
/// the open sessions.
pub struct Web {
    client: OnceLock<kube::Client>,
    admin_token: OnceLock<String>,
    login: Mutex<Option<String>>,
    /// Session cookie values and when each stops being accepted.
    sessions: Mutex<HashMap<String, Instant>>,
    work_dir: PathBuf,
    readers: read::Readers,
}

impl Web {
    /// A web view that keeps its state-store clones under `<data_dir>/web`.
    pub fn new(data_dir: &std::path::Path) -> Arc<Web> {
        Arc::new(Web {
            client: OnceLock::new(),
            admin_token: OnceLock::new(),
            login: Mutex::new(None),
            sessions: Mutex::new(HashMap::new()),
            work_dir: data_dir.join("web"),
            readers: read::Readers::default(),
        })
    }

    /// Gives the view its API client and the admin token it accepts (once the server is up).
    pub fn set_client(&self, client: kube::Client, admin_token: String) {
        let _ = self.client.set(client);
        let _ = self.admin_token.set(admin_token);
    }

    /// Issues a new one-time login token (any earlier unused one stops working).
    pub fn new_login_token(&self) -> String {
        let token = random_hex();
        *self.login.lock().expect("login") = Some(token.clone());
        token
    }

    fn client(&self) -> Result<kube::Client, Box<Response>> {
        self.client
            .get()
            .cloned()
            .ok_or_else(|| Box::new((StatusCode::SERVICE_UNAVAILABLE, "starting").into_response()))
    }
}

fn random_hex() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The web view's routes (`/ui/...`), authenticated by [`authenticate`] except the login.
pub fn router(web: Arc<Web>) -> axum::Router {
    let protected = axum::Router::new()
        .route("/ui/", get(overview))
        .route("/ui/promise/{name}", get(promise_map))
        .route(
            "/ui/request/{promise}/{namespace}/{name}",
            get(request_page),
        )
        .route("/ui/file/{promise}/{namespace}/{name}", get(request_file))
        .route("/ui/events", get(events))
        .layer(axum::middleware::from_fn_with_state(
            web.clone(),
            authenticate,
        ));
    axum::Router::new()
        .route("/ui", get(|| async { Redirect::to("/ui/") }))
        .route("/ui/login", get(login))
        .merge(protected)
        .with_state(web)
}

/// Lets a request through with the admin bearer token or a live session cookie.
async fn authenticate(State(web): State<Arc<Web>>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let admin = web.admin_token.get();
    let by_token = bearer.is_some_and(|b| admin.is_some_and(|a| constant_eq(a, b)));
    let by_cookie = session_cookie(headers).is_some_and(|s| {
        let mut sessions = web.sessions.lock().expect("sessions");
        let now = Instant::now();
        sessions.retain(|_, until| *until > now);
        sessions.contains_key(&s)
    });
    if by_token || by_cookie {
        return next.run(req).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        Html(html::page(
            "Not logged in",
            "<p>Not logged in. Open the one-time login link <code>plinth up</code> printed, \
             or send the API's bearer token.</p>",
        )),
    )
        .into_response()
}

fn constant_eq(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
}

/// `/ui/login?token=…`: exchanges the one-time token for a session cookie.
async fn login(State(web): State<Arc<Web>>, Query(q): Query<HashMap<String, String>>) -> Response {
    let given = q.get("token").map(String::as_str).unwrap_or("");
    let accepted = {
        let mut login = web.login.lock().expect("login");
        let ok = login.as_deref().is_some_and(|t| constant_eq(t, given));
        if ok {
            // Used once: the link in the terminal cannot log anyone else in.
            *login = None;
        }
        ok
    };
    if !accepted {
        return (
            StatusCode::UNAUTHORIZED,
            Html(html::page(
                "Login link used",
                "<p>This login link is not valid: it has been used already or was replaced. \
                 Restart <code>plinth up</code> for a new one, or send the API's bearer token.</p>",
            )),
        )
            .into_response();
    }
    let session = random_hex();
    web.sessions.lock().expect("sessions").insert(
        session.clone(),
        Instant::now() + Duration::from_secs(SESSION_SECS),
    );
    let cookie = format!(
        "{COOKIE}={session}; Path={ROUTE_PREFIX}; Max-Age={SESSION_SECS}; HttpOnly; Secure; SameSite=Strict"
    );
    ([(header::SET_COOKIE, cookie)], Redirect::to("/ui/")).into_response()
}

/// `?fragment=1` asks for the content of `<main>` only (live updates).
fn respond(q: &HashMap<String, String>, title: &str, body: String) -> Response {
    if q.contains_key("fragment") {
        Html(body).into_response()
    } else {
        Html(html::page(title, &body)).into_response()
    }
}

fn api_error(e: anyhow::Error) -> Response {
    (
        StatusCode::BAD_GATEWAY,
        Html(html::page(
            "Error",
            &format!("<p class=\"bad\">{}</p>", html::esc(&format!("{e:#}"))),
        )),
    )
        .into_response()
}

async fn build(
    web: &Web,
    promise: Option<&str>,
    request: Option<(&str, &str)>,
) -> Result<Vec<tree::PromiseNode>, Response> {
    let client = web.client().map_err(|r| *r)?;
    let inputs = collect::collect(&client).await.map_err(api_error)?;
    Ok(tree::build(
        &inputs,
        promise,
        request,
        jiff::Timestamp::now(),
    ))
}

async fn overview(
    State(web): State<Arc<Web>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    match build(&web, None, None).await {
        Ok(t) => respond(&q, "Promises", html::overview(&t, offset(&q, "requests"))),
        Err(r) => r,
    }
}

fn not_found(what: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        Html(html::page(
            "Not found",
            &format!("<p>{} not found.</p>", html::esc(what)),
        )),
    )
        .into_response()
}

async fn promise_map(
    State(web): State<Arc<Web>>,
    Path(name): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let t = match build(&web, Some(&name), None).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let Some(p) = t.first() else {
        return not_found(&format!("Promise {name}"));
    };
    respond(
        &q,
        &format!("Promise {name}"),
        html::map(p, &read::objects, offset(&q, "requests")),
    )
}

/// The request's node in the status tree and the client to read the rest with, or
/// the page that says why there is none.
async fn request_of(
    web: &Web,
    promise: &str,
    namespace: &str,
    name: &str,
) -> Result<(tree::RequestNode, kube::Client), Response> {
    let t = build(web, Some(promise), Some((namespace, name))).await?;
    let Some(r) = t
        .into_iter()
        .next()
        .and_then(|p| p.requests.into_iter().next())
    else {
        return Err(not_found(&format!(
            "request {namespace}/{name} of Promise {promise}"
        )));
    };
    let client = web.client().map_err(|r| *r)?;
    Ok((r, client))
}

async fn request_page(
    State(web): State<Arc<Web>>,
    Path((promise, namespace, name)): Path<(String, String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let (r, client) = match request_of(&web, &promise, &namespace, &name).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let r = &r;
    let extras = html::RequestExtras {
        files: read::files(&client, &web.readers, &web.work_dir, &promise, r)
            .await
            .map_err(|e| format!("{e:#}")),
        logs: read::logs(&client, r).await,
        files_from: offset(&q, "files"),
        history: read::history(&client, &promise, &namespace, &name).await,
    };
    respond(
        &q,
        &format!("{namespace}/{name}"),
        html::request(&promise, r, &extras, jiff::Timestamp::now()),
    )
}

/// `?files=N`, `?requests=N`: the first entry of a paginated list (0 when absent or not
/// a number).
fn offset(q: &HashMap<String, String>, param: &str) -> usize {
    q.get(param).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// `/ui/file/{promise}/{namespace}/{name}?destination=D&path=P`: one file the request
/// wrote, as plain text (Secret values redacted, cut at the page's file size), loaded
/// by the request page when the file is opened. Only files in the request's own
/// directory on one of its Destinations are served.
async fn request_file(
    State(web): State<Arc<Web>>,
    Path((promise, namespace, name)): Path<(String, String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let (r, client) = match request_of(&web, &promise, &namespace, &name).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let r = &r;
    let (dest, path) = (
        q.get("destination").map(String::as_str).unwrap_or_default(),
        q.get("path").map(String::as_str).unwrap_or_default(),
    );
    match read::file(
        &client,
        &web.readers,
        &web.work_dir,
        &promise,
        r,
        dest,
        path,
    )
    .await
    {
        Ok(Some(text)) => (
            [
                (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            text,
        )
            .into_response(),
        Ok(None) => not_found(&format!(
            "file {path:?} of the request on Destination {dest:?}"
        )),
        Err(e) => api_error(e),
    }
}

/// `/ui/events`: one server-sent event per change the API's watch reports on what the
/// pages show (Promises, Jobs, Works, WorkPlacements, requests).
async fn events(State(web): State<Arc<Web>>) -> Response {
    let client = match web.client() {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let kinds = match collect::collect(&client).await {
        Ok(i) => collect::request_resources(&i),
        Err(e) => return api_error(e),
    };
    let stream: std::pin::Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>> = Box::pin(
        collect::changes(&client, &kinds)
            // The first listing of each kind is not a change.
            .skip(4 + kinds.len())
            .map(|()| Ok(Event::default().data("change"))),
    );
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}
