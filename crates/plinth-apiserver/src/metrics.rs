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

use crate::app::App;
use crate::registry::Registry;

/// The label a request to a path this server does not serve is counted under, whatever
/// the path says: a client must not create series by inventing URLs.
pub const OTHER: &str = "other";

/// The Kubernetes verb and resource of a request: `("list", "deployments.apps")`,
/// `("get", "pods/log")`. The resource is one the registry serves (with a served
/// subresource), [`OTHER`] for any other path under `/api` or `/apis/<group>/<version>`,
/// and `""` for discovery, OpenAPI, version and health; the verb is from a fixed set
/// (the lower-cased method outside resources, `other` for unknown methods). So every
/// label value is from a bounded set, whatever the URL.
pub fn verb_and_resource(
    registry: &Registry,
    method: &http::Method,
    path: &str,
    query: Option<&str>,
) -> (&'static str, String) {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let resource_path = match segs.as_slice() {
        ["api", _v, rest @ ..] | ["apis", _, _v, rest @ ..] => !rest.is_empty(),
        _ => false,
    };
    if !resource_path {
        return (method_verb(method), String::new());
    }
    let watch_param = query.is_some_and(|q| {
        q.split('&')
            .any(|kv| kv == "watch=true" || kv == "watch=1" || kv == "watch")
    });
    let (resource, named) = match crate::router::served_resource(registry, path) {
        Some(found) => found,
        // Unknown: the verb still tells a list from a get by the path's shape.
        None => (OTHER.to_string(), segs.len().is_multiple_of(2)),
    };
    let verb = match *method {
        http::Method::GET if watch_param => "watch",
        http::Method::GET | http::Method::HEAD if named => "get",
        http::Method::GET | http::Method::HEAD => "list",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE if named => "delete",
        http::Method::DELETE => "deletecollection",
        _ => OTHER,
    };
    (verb, resource)
}

/// The verb of a request outside the resource paths: its method, lower-cased, from the
/// fixed set of HTTP methods; `other` for extension methods.
fn method_verb(method: &http::Method) -> &'static str {
    match *method {
        http::Method::GET => "get",
        http::Method::HEAD => "head",
        http::Method::POST => "post",
        http::Method::PUT => "put",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        http::Method::OPTIONS => "options",
        _ => OTHER,
    }
}

/// What the request middleware needs: where to record, and the registry that says which
/// resources are served.
#[derive(Clone)]
pub struct Observer {
    /// The process's metrics.
    pub metrics: Arc<Metrics>,
    /// The server's state (its registry of served resources).
    pub app: Arc<App>,
}

/// Middleware: counts and times every request; a watch is counted as open from its
/// response until its body ends (the client goes away or the server cuts it off).
pub async fn observe_request(State(obs): State<Observer>, req: Request, next: Next) -> Response {
    let metrics = obs.metrics;
    let (verb, resource) = verb_and_resource(
        &obs.app.registry,
        req.method(),
        req.uri().path(),
        req.uri().query(),
    );
    let started = Instant::now();
    let response = next.run(req).await;
    metrics.observe_api_request(
        verb,
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

/// True when a `resource` label names a resource the registry serves now (or is one of
/// the labels that name none: `""` and [`OTHER`]).
fn label_served(registry: &Registry, label: &str) -> bool {
    if label.is_empty() || label == OTHER {
        return true;
    }
    let resource = label.split_once('/').map_or(label, |(r, _)| r);
    let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
    registry.storage_of(group, plural).is_some()
}

/// Drops the request series of resources the registry no longer serves (a deleted CRD),
/// and their watch gauges once no watch is open; returns how many series went.
pub fn prune_unserved(metrics: &Metrics, registry: &Registry) -> usize {
    let gone = |l: &plinth_api::metrics::Labels| {
        l.iter()
            .any(|(k, v)| k == "resource" && !label_served(registry, v))
    };
    let watches = &metrics.api_watches;
    metrics.api_requests.remove_where(gone)
        + metrics.api_request_duration.remove_where(gone)
        + watches.remove_where(|l| gone(l) && watches.get(l).is_none_or(|g| g.get() == 0))
}

/// Runs [`prune_unserved`] every `every` while the server lives.
pub async fn prune_unserved_loop(
    metrics: Arc<Metrics>,
    app: std::sync::Weak<App>,
    every: Duration,
) {
    loop {
        tokio::time::sleep(every).await;
        let Some(app) = app.upgrade() else { return };
        prune_unserved(&metrics, &app.registry);
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
        let reg = Registry::with_builtins();
        let (v, r) = verb_and_resource(&reg, &m, path, q);
        (v.to_string(), r)
    }

    fn s(a: &str, b: &str) -> (String, String) {
        (a.to_string(), b.to_string())
    }

    #[test]
    fn verbs_and_resources() {
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
            vr(
                Method::GET,
                "/api/v1/pods",
                Some("watch=true&resourceVersion=1")
            ),
            s("watch", "pods")
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
        assert_eq!(
            vr(
                Method::PUT,
                "/apis/apps/v1/namespaces/a/deployments/d/scale",
                None
            ),
            s("update", "deployments.apps/scale")
        );
        assert_eq!(vr(Method::GET, "/openapi/v3", None), s("get", ""));
        assert_eq!(vr(Method::GET, "/apis", None), s("get", ""));
        assert_eq!(vr(Method::GET, "/apis/g1.example/v1", None), s("get", ""));
    }

    #[test]
    fn paths_the_server_does_not_serve_share_one_label() {
        for (m, path) in [
            (Method::GET, "/apis/g1.example/v1/r1"),
            (Method::GET, "/apis/g2.example/v1/namespaces/x/r2/n"),
            (Method::GET, "/api/v1/unicorns"),
            // A served resource with an unknown version or subresource.
            (Method::GET, "/apis/apps/v7/deployments"),
            (Method::GET, "/api/v1/namespaces/a/pods/p/whatever"),
            (Method::GET, "/api/v1/namespaces/a/configmaps/c/log"),
            (Method::DELETE, "/apis/x.example/v1/a/b/c/d/e"),
        ] {
            assert_eq!(vr(m.clone(), path, None).1, OTHER, "{m} {path}");
        }
        let custom = Method::from_bytes(b"BREW").unwrap();
        assert_eq!(vr(custom.clone(), "/api/v1/pods", None), s("other", "pods"));
        assert_eq!(vr(custom, "/version", None), s("other", ""));
    }

    #[test]
    fn series_of_a_resource_no_longer_served_are_dropped() {
        let reg = Registry::with_builtins();
        let m = Metrics::new();
        let took = Duration::from_millis(1);
        m.observe_api_request("list", "pods", 200, took);
        m.observe_api_request("get", "widgets.example.test", 200, took);
        m.observe_api_request("patch", "widgets.example.test/status", 200, took);
        m.observe_api_request("get", OTHER, 403, took);
        m.observe_api_request("get", "", 200, took);
        // An open watch of the gone resource keeps its gauge until it closes.
        let metrics = Arc::new(m);
        let watch = WatchGuard::open(metrics.clone(), "widgets.example.test");
        assert_eq!(prune_unserved(&metrics, &reg), 4);
        let text = metrics.encode();
        assert!(!text.contains("plinth_apiserver_requests_total{verb=\"get\",resource=\"widgets"));
        assert!(text.contains(r#"plinth_apiserver_watches{resource="widgets.example.test"} 1"#));
        for kept in [
            r#"resource="pods""#,
            r#"resource="other""#,
            r#"resource="""#,
        ] {
            assert!(text.contains(kept), "{kept}:\n{text}");
        }
        drop(watch);
        assert_eq!(prune_unserved(&metrics, &reg), 1);
        assert!(!metrics.encode().contains("widgets"));
    }
}
