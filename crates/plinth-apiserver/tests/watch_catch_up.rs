//! A watcher that falls behind the bounded broadcast (here 4 events) during a burst of
//! writes resumes from the revision log: it sees every event once, in order, and its
//! stream stays open. A filtered watcher is cut off instead, and its client re-lists.
//! A watch opened from an old resourceVersion replays the log after it (in pages, more
//! than one here) the same way.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use plinth_apiserver::testing::TestServer;
use serde_json::Value;

const BURST: usize = 600;

fn cm(name: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c.metadata.labels = Some(BTreeMap::from([("app".to_string(), "x".to_string())]));
    c
}

type WatchBody = kube::client::Body;

async fn open_watch(client: &kube::Client, query: &str) -> WatchBody {
    let path = format!("/api/v1/namespaces/default/configmaps?watch=true&{query}");
    let req = http::Request::get(path)
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = client.send(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    resp.into_body()
}

/// Reads watch lines until `want` arrive, the stream ends (`false`), or 30 s pass.
async fn read_events(body: &mut WatchBody, want: usize, out: &mut Vec<Value>) -> bool {
    let mut buf = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while out.len() < want {
        let frame = tokio::time::timeout_at(deadline, http_body_util::BodyExt::frame(body))
            .await
            .expect("watch events within 30 s");
        let Some(Ok(frame)) = frame else {
            return false;
        };
        if let Ok(d) = frame.into_data() {
            buf.extend_from_slice(&d);
        }
        while let Some(i) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            out.push(serde_json::from_slice(&line).unwrap());
        }
    }
    true
}

async fn burst(api: &Api<ConfigMap>, from: usize, n: usize) {
    for i in from..from + n {
        api.create(&PostParams::default(), &cm(&format!("cm-{i:04}")))
            .await
            .unwrap();
    }
}

/// The store's revision now (the resourceVersion of a list).
async fn revision(api: &Api<ConfigMap>) -> String {
    api.list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
}

/// Reads the burst's `BURST` events from `body`: each once, in order, all `ADDED`.
async fn expect_the_burst(body: &mut WatchBody, what: &str) {
    let mut events = Vec::new();
    assert!(
        read_events(body, BURST, &mut events).await,
        "{what}: stream ended"
    );
    let names: Vec<&str> = events
        .iter()
        .map(|e| {
            assert_eq!(e["type"], "ADDED", "{what}: {e}");
            e["object"]["metadata"]["name"].as_str().unwrap()
        })
        .collect();
    let expected: Vec<String> = (0..BURST).map(|i| format!("cm-{i:04}")).collect();
    assert_eq!(names, expected, "{what}: every event once, in order");
}

/// One more create arrives on `body`: the stream is live.
async fn expect_live(api: &Api<ConfigMap>, body: &mut WatchBody) {
    burst(api, BURST, 1).await;
    let mut more = Vec::new();
    assert!(read_events(body, 1, &mut more).await, "stream ended");
    assert_eq!(
        more[0]["object"]["metadata"]["name"],
        format!("cm-{BURST:04}")
    );
}

#[tokio::test]
async fn a_watcher_behind_the_buffer_resumes_from_the_log_and_misses_nothing() {
    let ts = TestServer::start_with(|c| c.watch_buffer = 4)
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    let rv = revision(&api).await;
    // Nobody reads this stream during the burst, so its watcher falls far behind.
    let mut body = open_watch(&ts.client(), &format!("resourceVersion={rv}")).await;
    burst(&api, 0, BURST).await;
    expect_the_burst(&mut body, "behind the buffer").await;
    expect_live(&api, &mut body).await;
}

#[tokio::test]
async fn a_filtered_watcher_behind_the_buffer_is_cut_off() {
    let ts = TestServer::start_with(|c| c.watch_buffer = 4)
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    let mut body = open_watch(&ts.client(), "labelSelector=app%3Dx").await;
    burst(&api, 0, BURST).await;
    let mut events = Vec::new();
    assert!(
        !read_events(&mut body, BURST + 1, &mut events).await,
        "a filtered watcher that lagged keeps streaming"
    );
    assert!(events.len() < BURST, "{} events", events.len());
}

#[tokio::test]
async fn a_watch_from_an_old_revision_replays_every_change_after_it_once() {
    let ts = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    let rv = revision(&api).await;
    burst(&api, 0, BURST).await;
    // Opened after the burst: everything it sees first comes from the revision log.
    for query in [
        format!("resourceVersion={rv}"),
        format!("resourceVersion={rv}&labelSelector=app%3Dx"),
    ] {
        let mut body = open_watch(&ts.client(), &query).await;
        expect_the_burst(&mut body, &query).await;
    }
    // Both streams were dropped; a new one from the last revision is live.
    let last = revision(&api).await;
    let mut body = open_watch(&ts.client(), &format!("resourceVersion={last}")).await;
    expect_live(&api, &mut body).await;
}

#[tokio::test]
async fn a_watch_from_a_revision_the_log_cannot_hold_is_refused() {
    let ts = TestServer::start().await.unwrap();
    for rv in ["-1", "9223372036854775808", "18446744073709551615", "abc"] {
        let path = format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}");
        let req = http::Request::get(path)
            .body(kube::client::Body::empty())
            .unwrap();
        let resp = ts.client().send(req).await.unwrap();
        assert_eq!(resp.status().as_u16(), 400, "resourceVersion={rv}");
        let body = http_body_util::BodyExt::collect(resp.into_body())
            .await
            .unwrap()
            .to_bytes();
        let text = String::from_utf8_lossy(&body);
        assert!(
            text.contains("must be a non-negative integer no larger than 9223372036854775807"),
            "resourceVersion={rv}: {text}"
        );
    }
}
