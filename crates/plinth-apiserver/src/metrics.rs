//! The API server's metrics: requests by verb and resource with their latency, open
//! watches, and the size of the SQLite database, recorded into the process's
//! [`plinth_api::metrics::Metrics`]. A middleware over the API routes does the counting,
//! so no handler knows about it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt;
use plinth_api::metrics::{Metrics, labels};

/// The Kubernetes verb and resource of a request: `("list", "deployments.apps")`,
/// `("get", "pods/log")`. Paths outside `/api` and `/apis/<group>/<version>` (discovery,
/// OpenAPI, version) have the resource `""` and the lower-cased method as verb.
pub fn verb_and_resource(
    method: &http::Method,
    path: &str,
    query: Option<&str>,
) -> (String, String) {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, rest) = match segs.as_slice() {
        ["api", _v, rest @ ..] => ("", rest),
        ["apis", g, _v, rest @ ..] => (*g, rest),
        _ => return (method.as_str().to_ascii_lowercase(), String::new()),
    };
    let mut rest = rest;
    let mut watch_path = false;
    if rest.first() == Some(&"watch") {
        watch_path = true;
        rest = &rest[1..];
    }
    // `namespaces/<ns>/<resource>/...` unless it is the Namespace itself (or its
    // `status` / `finalize` subresource).
    let namespaced = rest.len() >= 3
        && rest[0] == "namespaces"
        && !(rest.len() == 3 && matches!(rest[2], "status" | "finalize"));
    if namespaced {
        rest = &rest[2..];
    }
    let Some(plural) = rest.first() else {
        return (method.as_str().to_ascii_lowercase(), String::new());
    };
    let named = rest.len() >= 2;
    let mut resource = if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    };
    if let Some(sub) = rest.get(2) {
        resource = format!("{resource}/{sub}");
    }
    let watch_param = query.is_some_and(|q| {
        q.split('&')
            .any(|kv| kv == "watch=true" || kv == "watch=1" || kv == "watch")
    });
    let verb = match *method {
        http::Method::GET if watch_path || watch_param => "watch",
        http::Method::GET | http::Method::HEAD if named => "get",
        http::Method::GET | http::Method::HEAD => "list",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE if named => "delete",
        http::Method::DELETE => "deletecollection",
        _ => return (method.as_str().to_ascii_lowercase(), resource),
    };
    (verb.to_string(), resource)
}

/// Middleware: counts and times every request; a watch is counted as open from its
/// response until its body ends (the client goes away or the server cuts it off).
pub async fn observe_request(
    State(metrics): State<Arc<Metrics>>,
    req: Request,
    next: Next,
) -> Response {
    let (verb, resource) = verb_and_resource(req.method(), req.uri().path(), req.uri().query());
    let started = Instant::now();
    let response = next.run(req).await;
    metrics.observe_api_request(
        &verb,
        &resource,
        response.status().as_u16(),
        started.elapsed(),
    );
    if verb != "watch" || !response.status().is_success() {
        return response;
    }
    let guard = WatchGuard::open(metrics, &resource);
    let (parts, body) = response.into_parts();
    let stream = body.into_data_stream().map(move |chunk| {
        let _open = &guard;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(stream))
}

/// Holds one open watch in `plinth_apiserver_watches`; dropping it closes the watch.
struct WatchGuard {
    metrics: Arc<Metrics>,
    resource: String,
}

impl WatchGuard {
    fn open(metrics: Arc<Metrics>, resource: &str) -> WatchGuard {
        metrics
            .api_watches
            .get_or_create(&labels([("resource", resource)]))
            .inc();
        WatchGuard {
            metrics,
            resource: resource.to_string(),
        }
    }
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.metrics
            .api_watches
            .get_or_create(&labels([("resource", &self.resource)]))
            .dec();
    }
}

/// Size in bytes of the SQLite database at `db` (the main file and its WAL).
pub fn sqlite_size(db: &std::path::Path) -> u64 {
    let size = |p: PathBuf| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    size(db.to_path_buf()) + size(PathBuf::from(wal))
}

/// Keeps `plinth_apiserver_sqlite_size_bytes` current: the size now, then every `every`.
pub async fn track_sqlite_size(metrics: Arc<Metrics>, db: PathBuf, every: Duration) {
    loop {
        let bytes = sqlite_size(&db);
        metrics
            .sqlite_size_bytes
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
        tokio::time::sleep(every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    fn vr(m: Method, path: &str, q: Option<&str>) -> (String, String) {
        verb_and_resource(&m, path, q)
    }

    #[test]
    fn verbs_and_resources() {
        let s = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(
            vr(Method::GET, "/api/v1/namespaces/default/pods", None),
            s("list", "pods")
        );
        assert_eq!(
            vr(Method::GET, "/api/v1/namespaces/default/pods/p1/log", None),
            s("get", "pods/log")
        );
        assert_eq!(
            vr(Method::GET, "/api/v1/namespaces/default", None),
            s("get", "namespaces")
        );
        assert_eq!(
            vr(Method::PUT, "/api/v1/namespaces/default/finalize", None),
            s("update", "namespaces/finalize")
        );
        assert_eq!(
            vr(
                Method::GET,
                "/apis/platform.kratix.io/v1alpha1/promises",
                Some("watch=true&resourceVersion=1")
            ),
            s("watch", "promises.platform.kratix.io")
        );
        assert_eq!(
            vr(
                Method::PATCH,
                "/apis/apps/v1/namespaces/a/deployments/d/status",
                None
            ),
            s("patch", "deployments.apps/status")
        );
        assert_eq!(
            vr(Method::DELETE, "/apis/batch/v1/namespaces/a/jobs", None),
            s("deletecollection", "jobs.batch")
        );
        assert_eq!(
            vr(Method::POST, "/api/v1/namespaces", None),
            s("create", "namespaces")
        );
        assert_eq!(vr(Method::GET, "/openapi/v3", None), s("get", ""));
        assert_eq!(vr(Method::GET, "/apis", None), s("get", ""));
    }
}
