//! Watch streams (Kubernetes watch protocol: newline-delimited JSON events).
//!
//! * From `resourceVersion=N`: the revision log after N is replayed, then live events
//!   stream. A N older than the compacted log answers HTTP 200 with one in-stream
//!   `ERROR` event carrying a 410 `Expired` Status (what kube-runtime's watcher needs to
//!   re-list).
//! * Without a resourceVersion (or `0`): synthetic `ADDED` events for the current objects
//!   first.
//! * `allowWatchBookmarks=true`: periodic `BOOKMARK` events with the latest
//!   resourceVersion the watcher has caught up with.
//! * `sendInitialEvents=true` (a "watch list", which kube-runtime's `streaming_lists()`
//!   and client-go's WatchListClient use): `ADDED` events for the current objects, then
//!   a `BOOKMARK` annotated `k8s.io/initial-events-end: "true"` at the revision they were
//!   read at, then the changes after it. As in Kubernetes it needs
//!   `resourceVersionMatch=NotOlderThan` and `allowWatchBookmarks=true` (422 otherwise);
//!   `sendInitialEvents=false` starts at the given revision, or at the latest one.
//! * `timeoutSeconds`: the stream ends after that long, at most [`MAX_WATCH_TIMEOUT`]
//!   (a larger value is clamped; a negative or non-integer one is 400).
//! * A watcher that falls behind the bounded per-resource broadcast resumes from the
//!   revision log (a filtered one is cut off and its client re-lists, see `catch_up`).
//! * Never compressed.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::app::{App, AppRef, Filter, Query, Render, present};
use crate::error::ApiError;
use crate::resource::ResourceInfo;
use crate::store::{Event, EventType, ListRange};

struct Watcher {
    info: Arc<ResourceInfo>,
    ns: Option<String>,
    filter: Filter,
    render: Render,
    out: mpsc::Sender<Result<Bytes, std::io::Error>>,
    last_rv: u64,
}

impl Watcher {
    fn line(&self, kind: &str, obj: Value) -> Bytes {
        let obj = match &self.render {
            Render::Plain => obj,
            Render::Metadata => {
                json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))})
            }
            Render::Table { include_object } => {
                let rv = obj
                    .pointer("/metadata/resourceVersion")
                    .cloned()
                    .unwrap_or(json!(""));
                crate::table::render(
                    &self.info,
                    &[obj],
                    json!({"resourceVersion": rv}),
                    include_object,
                )
            }
        };
        event_line(kind, &obj)
    }

    /// Sends one event if it is new and matches. Returns false when the client is gone.
    async fn send_event(&mut self, ev: &Event) -> bool {
        if ev.rv <= self.last_rv {
            return true;
        }
        self.last_rv = ev.rv;
        if let Some(ns) = &self.ns
            && &ev.key.ns != ns
        {
            return true;
        }
        // Kubernetes' filtered-watch semantics: entering the selector is ADDED, leaving
        // it is DELETED.
        let kind = if self.filter.is_empty() {
            ev.kind
        } else {
            let now = self.filter.matches(&ev.object);
            let was = ev.prev.as_ref().map(|p| self.filter.matches(p));
            match (ev.kind, was, now) {
                (EventType::Modified, Some(false), true) => EventType::Added,
                (EventType::Modified, Some(true), false) => EventType::Deleted,
                (k, _, true) => k,
                _ => return true,
            }
        };
        let stored_form = kind == ev.kind
            && self.render == Render::Plain
            && ev.object.get("apiVersion").and_then(|a| a.as_str())
                == Some(self.info.api_version().as_str())
            && ev.object.get("kind").and_then(|k| k.as_str()) == Some(self.info.kind.as_str());
        let line = if stored_form {
            // Serialized once for every watcher of the plain stored form, by reference.
            ev.line
                .get_or_init(|| event_line(ev.kind.as_str(), &ev.object))
                .clone()
        } else {
            let obj = present(&self.info, (*ev.object).clone());
            self.line(kind.as_str(), obj)
        };
        self.out.send(Ok(line)).await.is_ok()
    }

    async fn bookmark(&mut self, rv: u64) -> bool {
        self.bookmark_with(rv, false).await
    }

    /// A BOOKMARK at `rv`; `initial_end` marks the end of a watch list's initial events.
    async fn bookmark_with(&mut self, rv: u64, initial_end: bool) -> bool {
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            metadata["annotations"] = json!({INITIAL_EVENTS_END: "true"});
        }
        let obj = json!({"kind": self.info.kind, "apiVersion": self.info.api_version(), "metadata": metadata});
        let mut s =
            serde_json::to_vec(&json!({"type": "BOOKMARK", "object": obj})).unwrap_or_default();
        s.push(b'\n');
        self.out.send(Ok(Bytes::from(s))).await.is_ok()
    }
}

/// One line of a watch stream: `{"type": kind, "object": obj}` and a newline.
fn event_line(kind: &str, obj: &Value) -> Bytes {
    #[derive(serde::Serialize)]
    struct Line<'a> {
        #[serde(rename = "type")]
        kind: &'a str,
        object: &'a Value,
    }
    let mut s = serde_json::to_vec(&Line { kind, object: obj }).unwrap_or_default();
    s.push(b'\n');
    Bytes::from(s)
}

/// The longest a watch lasts when `timeoutSeconds` asks for more: one hour, the upper end
/// of the 30–60 minutes kube-apiserver gives a watch that names no timeout. A client
/// watches again from the last resourceVersion it saw, as it does after any timeout.
pub(crate) const MAX_WATCH_TIMEOUT: Duration = Duration::from_secs(3600);

/// `timeoutSeconds` of a watch: `None` (no timeout) when absent or 0, clamped to
/// [`MAX_WATCH_TIMEOUT`] (so a huge value cannot overflow the deadline).
fn watch_timeout(q: &Query) -> Result<Option<Duration>, ApiError> {
    Ok(crate::app::query_int_min(q, "timeoutSeconds", 0)?
        .filter(|t| *t > 0)
        .map(|t| Duration::from_secs(t.unsigned_abs()).min(MAX_WATCH_TIMEOUT)))
}

/// The annotation on the BOOKMARK that ends a watch list's initial events.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// `sendInitialEvents`: `None` when absent. It requires
/// `resourceVersionMatch=NotOlderThan`, and `true` requires `allowWatchBookmarks=true`
/// (422 as Kubernetes answers); `resourceVersionMatch` on a watch requires it.
fn send_initial_events(q: &Query, bookmarks: bool) -> Result<Option<bool>, ApiError> {
    let invalid = crate::snapshot::forbidden_list_option;
    let rv_match = q
        .get("resourceVersionMatch")
        .map(String::as_str)
        .filter(|m| !m.is_empty());
    let send = match q.get("sendInitialEvents").map(String::as_str) {
        None | Some("") => None,
        Some("true") => Some(true),
        Some("false") => Some(false),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "invalid sendInitialEvents {other:?}: must be true or false"
            )));
        }
    };
    match (send, rv_match) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(invalid(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        )),
        (Some(_), m) if m != Some("NotOlderThan") => Err(invalid(
            "resourceVersionMatch",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        )),
        (Some(true), _) if !bookmarks => Err(invalid(
            "allowWatchBookmarks",
            "sendInitialEvents requires setting allowWatchBookmarks to true",
        )),
        (Some(s), _) => Ok(Some(s)),
    }
}

fn expired(rv: u64, compacted: u64) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("too old resource version: {rv} ({compacted})"),
        "reason": "Expired", "code": 410,
    })
}

/// Starts a watch and returns the streaming response.
pub(crate) async fn watch(
    app: AppRef,
    info: Arc<ResourceInfo>,
    ns: Option<String>,
    q: &Query,
    render: Render,
) -> Result<Response, ApiError> {
    let filter = Filter::for_resource(&info, q)?;
    let from: Option<u64> = match q.get("resourceVersion").map(String::as_str) {
        None | Some("") | Some("0") => None,
        Some(s) => Some(crate::store::parse_revision(s).ok_or_else(|| {
            ApiError::bad_request(format!(
                "invalid resourceVersion {s:?}: {}",
                crate::store::INVALID_REVISION
            ))
        })?),
    };
    let timeout = watch_timeout(q)?;
    let bookmarks = q.get("allowWatchBookmarks").is_some_and(|v| v == "true");
    let send_initial = send_initial_events(q, bookmarks)?;
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(256);
    let key = crate::app::storage_rkey(&info);
    // Subscribe before reading the log so nothing falls between the two.
    let sub = app.hub.subscribe(&key);
    let mut w = Watcher {
        info,
        ns,
        filter,
        render,
        out: tx,
        last_rv: 0,
    };
    // Initial state is read before answering so errors become HTTP errors.
    let initial: Initial = match (send_initial, from) {
        (Some(false), None) => Initial::Events(Vec::new(), app.hub.published()),
        (Some(true), _) | (None, None) => {
            let filter = Filter::for_resource(&w.info, q)?;
            let res = app
                .store
                .list(
                    ListRange::all(key.clone()).in_namespace(w.ns.clone()),
                    Box::new(move |o| filter.matches(o)),
                )
                .await?;
            Initial::Objects(res.items, res.rv, send_initial == Some(true))
        }
        (_, Some(rv)) => {
            let (events, compacted) = app
                .store
                .events_since(key.clone(), rv, i64::MAX as u64, REPLAY_PAGE)
                .await?;
            if rv < compacted {
                Initial::Expired(rv, compacted)
            } else {
                Initial::Events(events, rv)
            }
        }
    };
    tokio::spawn(run(app, w_take(&mut w), sub, initial, timeout, bookmarks));
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    Ok(Response::builder()
        .status(200)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::CACHE_CONTROL, "no-cache, private")
        .body(body)
        .unwrap())
}

enum Initial {
    /// Current objects at a revision; `true`: end them with the initial-events-end
    /// bookmark.
    Objects(Vec<Value>, u64, bool),
    Events(Vec<Event>, u64),
    Expired(u64, u64),
}

fn w_take(w: &mut Watcher) -> Watcher {
    Watcher {
        info: w.info.clone(),
        ns: w.ns.take(),
        filter: std::mem::replace(
            &mut w.filter,
            Filter {
                label: None,
                field: Vec::new(),
            },
        ),
        render: w.render.clone(),
        out: w.out.clone(),
        last_rv: w.last_rv,
    }
}

async fn run(
    app: AppRef,
    mut w: Watcher,
    mut sub: broadcast::Receiver<Arc<Event>>,
    initial: Initial,
    timeout: Option<Duration>,
    bookmarks: bool,
) {
    match initial {
        Initial::Expired(rv, compacted) => {
            let line = w.line("ERROR", expired(rv, compacted));
            let _ = w.out.send(Ok(line)).await;
            return;
        }
        Initial::Objects(items, rv, end_bookmark) => {
            for o in items {
                let obj = present(&w.info, o);
                let line = w.line(EventType::Added.as_str(), obj);
                if w.out.send(Ok(line)).await.is_err() {
                    return;
                }
            }
            w.last_rv = rv;
            if end_bookmark && !w.bookmark_with(rv, true).await {
                return;
            }
        }
        Initial::Events(events, rv) => {
            w.last_rv = rv;
            let more = events.len() == REPLAY_PAGE;
            for e in &events {
                if !w.send_event(e).await {
                    return;
                }
            }
            if more && !replay(&app, &mut w, i64::MAX as u64).await {
                return;
            }
        }
    }
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    let interval = app_bookmark_interval(&app);
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    loop {
        let sleep_deadline = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = sub.recv() => match r {
                Ok(ev) => {
                    if !w.send_event(&ev).await {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    if !catch_up(&app, &mut w).await {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = ticker.tick(), if bookmarks => {
                // Every event up to `published` is already queued on `sub`; drain them
                // so the bookmark never skips an event.
                let published = app.hub.published();
                loop {
                    match sub.try_recv() {
                        Ok(ev) => {
                            if !w.send_event(&ev).await {
                                return;
                            }
                        }
                        Err(broadcast::error::TryRecvError::Empty) => break,
                        Err(broadcast::error::TryRecvError::Lagged(_)) => {
                            if !catch_up(&app, &mut w).await {
                                return;
                            }
                        }
                        Err(_) => return,
                    }
                }
                let rv = published.max(w.last_rv);
                w.last_rv = rv;
                if !w.bookmark(rv).await {
                    return;
                }
            }
            _ = sleep_deadline => return,
            _ = w.out.closed() => return,
        }
    }
}

/// Resumes a watcher that fell behind the bounded broadcast from the revision log, so a
/// burst of writes costs the slow watcher a read of the log instead of a full re-list.
/// Events the broadcast still holds are skipped afterwards by their resourceVersion.
///
/// Returns `false` when the stream must end: the client went away, the log was compacted
/// past the watcher (it gets the in-stream 410 `Expired`), or the watch is filtered —
/// the log keeps no previous object, so a filtered watch could not turn an object leaving
/// its selector into `DELETED`; those end and the client re-lists.
async fn catch_up(app: &App, w: &mut Watcher) -> bool {
    if !w.filter.is_empty() {
        return false;
    }
    tracing::debug!(
        resource = %w.info.plural,
        from = w.last_rv,
        "watcher fell behind the broadcast; resuming from the revision log"
    );
    replay(app, w, app.hub.published()).await
}

/// Events read from the revision log at a time when a watch replays it (a watch from a
/// resourceVersion, or a watcher that fell behind). Each is a parsed object, so this
/// bounds what one replay holds, however long the stretch of log: when every controller's
/// watch is renewed at once, each reads the changes since its last bookmark.
const REPLAY_PAGE: usize = 64;

/// Sends the watcher the events of its resource after the last it was sent, up to `upto`,
/// from the revision log, [`REPLAY_PAGE`] at a time. Returns `false` when the stream must
/// end: the client went away, or the log was compacted past the watcher (it gets the
/// in-stream 410 `Expired`).
async fn replay(app: &App, w: &mut Watcher, upto: u64) -> bool {
    let key = crate::app::storage_rkey(&w.info);
    loop {
        let from = w.last_rv;
        match app
            .store
            .events_since(key.clone(), from, upto, REPLAY_PAGE)
            .await
        {
            Ok((events, compacted)) if from >= compacted => {
                let more = events.len() == REPLAY_PAGE;
                for e in &events {
                    if !w.send_event(e).await {
                        return false;
                    }
                }
                if !more {
                    return true;
                }
            }
            Ok((_, compacted)) => {
                let line = w.line("ERROR", expired(from, compacted));
                let _ = w.out.send(Ok(line)).await;
                return false;
            }
            Err(e) => {
                tracing::warn!(resource = %w.info.plural, "watch replay failed: {e}");
                return false;
            }
        }
    }
}

fn app_bookmark_interval(app: &App) -> Duration {
    app.bookmark_interval
}
