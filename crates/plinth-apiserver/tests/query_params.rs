//! Numeric query parameters are parsed strictly: a value that is not a 64-bit integer (or
//! is out of the parameter's range) is a 400 naming the parameter and the value, and a
//! huge watch timeout is clamped instead of overflowing the watch's deadline.

use std::time::Duration;

use axum::body::Body;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use plinth_apiserver::testing::TestServer;
use tower::ServiceExt;

async fn call(ts: &TestServer, method: &str, uri: &str) -> (StatusCode, axum::body::Body) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .body(Body::empty())
        .unwrap();
    let resp = ts.router().oneshot(req).await.unwrap();
    let status = resp.status();
    (status, resp.into_body())
}

async fn text(body: Body) -> String {
    let bytes = body.collect().await.unwrap().to_bytes();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A list that must answer 200, as JSON.
async fn list(ts: &TestServer, uri: &str) -> serde_json::Value {
    let (status, body) = call(ts, "GET", uri).await;
    let body = text(body).await;
    assert_eq!(status, StatusCode::OK, "{uri}: {body}");
    serde_json::from_str(&body).unwrap()
}

async fn create_pod(ts: &TestServer) {
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    });
    let req = Request::post("/api/v1/namespaces/default/pods")
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(&pod).unwrap()))
        .unwrap();
    let resp = ts.router().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
}

#[tokio::test]
async fn every_numeric_query_parameter_refuses_what_is_not_an_integer() {
    let ts = TestServer::start().await.unwrap();
    create_pod(&ts).await;
    let cases = [
        (
            "GET",
            "/api/v1/namespaces/default/configmaps?limit=ten",
            "limit",
            "ten",
        ),
        // A list checks its timeout as a watch does, and a boolean is a boolean.
        (
            "GET",
            "/api/v1/namespaces/default/configmaps?timeoutSeconds=abc",
            "timeoutSeconds",
            "abc",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/configmaps?watch=maybe",
            "watch",
            "maybe",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/configmaps?limit=99999999999999999999",
            "limit",
            "99999999999999999999",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/configmaps?resourceVersion=abc",
            "resourceVersion",
            "abc",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1.5",
            "timeoutSeconds",
            "1.5",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=-1",
            "timeoutSeconds",
            "-1",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=99999999999999999999",
            "timeoutSeconds",
            "99999999999999999999",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=x1",
            "resourceVersion",
            "x1",
        ),
        (
            "DELETE",
            "/api/v1/namespaces/default/pods/p?gracePeriodSeconds=soon",
            "gracePeriodSeconds",
            "soon",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods/p/log?tailLines=all",
            "tailLines",
            "all",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods/p/log?tailLines=-2",
            "tailLines",
            "-2",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods/p/log?limitBytes=0",
            "limitBytes",
            "0",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods/p/log?limitBytes=1k",
            "limitBytes",
            "1k",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods/p/log?sinceSeconds=now",
            "sinceSeconds",
            "now",
        ),
    ];
    for (method, uri, name, value) in cases {
        let (status, body) = call(&ts, method, uri).await;
        let body = text(body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{method} {uri}: {body}");
        assert!(
            body.contains(name) && body.contains(value),
            "{method} {uri}: the error names neither {name} nor {value}: {body}"
        );
    }
    // The Pod was not deleted by the refused request; a valid grace period deletes it.
    let (status, _) = call(&ts, "GET", "/api/v1/namespaces/default/pods/p").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call(
        &ts,
        "DELETE",
        "/api/v1/namespaces/default/pods/p?gracePeriodSeconds=0",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn valid_numeric_parameters_still_work() {
    let ts = TestServer::start().await.unwrap();
    let page = list(&ts, "/api/v1/namespaces?limit=1").await;
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    assert!(page["metadata"]["continue"].is_string());
    // A limit of zero or below lists everything, as kube-apiserver does.
    for limit in ["0", "-5"] {
        let all = list(&ts, &format!("/api/v1/namespaces?limit={limit}")).await;
        assert!(all["items"].as_array().unwrap().len() >= 4, "limit={limit}");
    }
    // A one-second watch ends after about a second.
    let started = std::time::Instant::now();
    let (status, body) = call(
        &ts,
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    tokio::time::timeout(Duration::from_secs(10), text(body))
        .await
        .expect("a 1 s watch ends");
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn a_huge_watch_timeout_is_clamped_and_the_watch_stays_open() {
    let ts = TestServer::start().await.unwrap();
    let (status, body) = call(
        &ts,
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=9223372036854775807&resourceVersion=0",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let mut body = body.into_data_stream();
    use futures::StreamExt;
    // The watch delivers a change made after it started (it did not end at once).
    let client = ts.client();
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client, "default");
    let mut cm = k8s_openapi::api::core::v1::ConfigMap::default();
    cm.metadata.name = Some("after".into());
    tokio::time::sleep(Duration::from_millis(300)).await;
    cms.create(&Default::default(), &cm).await.unwrap();
    let mut seen = String::new();
    while !seen.contains("\"after\"") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), body.next())
            .await
            .expect("an event within 10 s")
            .expect("the watch is still open")
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(seen.contains("ADDED"), "{seen}");
}
