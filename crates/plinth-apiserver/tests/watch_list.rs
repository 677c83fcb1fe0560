//! Watch lists (`sendInitialEvents=true`): kube-runtime's watcher with
//! `streaming_lists()` gets the current objects from one watch call, ended by the
//! `k8s.io/initial-events-end` bookmark, then live changes; the option's preconditions
//! answer 422 as in Kubernetes.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use plinth_apiserver::testing::TestServer;
use serde_json::Value;

fn cm(name: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c.data = Some(BTreeMap::from([("v".to_string(), name.to_string())]));
    c
}

async fn raw_get(client: &kube::Client, path: &str) -> (u16, String) {
    let req = http::Request::get(path)
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    // A watch stays open: read what arrives within a moment.
    let mut body = resp.into_body();
    let mut text = Vec::new();
    while let Ok(Some(Ok(frame))) = tokio::time::timeout(
        Duration::from_millis(300),
        http_body_util::BodyExt::frame(&mut body),
    )
    .await
    {
        if let Ok(d) = frame.into_data() {
            text.extend_from_slice(&d);
        }
    }
    (code, String::from_utf8(text).unwrap())
}

#[tokio::test]
async fn streaming_list_watcher_sees_the_objects_then_changes() {
    let ts = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    for i in 0..5 {
        api.create(&PostParams::default(), &cm(&format!("cm-{i}")))
            .await
            .unwrap();
    }
    let mut stream = watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut initial = Vec::new();
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("watcher event")
            .unwrap()
            .unwrap();
        match ev {
            watcher::Event::Init => {}
            watcher::Event::InitApply(c) => initial.push(c.metadata.name.unwrap()),
            watcher::Event::InitDone => break,
            other => panic!("unexpected event before InitDone: {other:?}"),
        }
    }
    initial.sort();
    assert_eq!(initial, ["cm-0", "cm-1", "cm-2", "cm-3", "cm-4"]);
    api.create(&PostParams::default(), &cm("cm-5"))
        .await
        .unwrap();
    let ev = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("live event")
        .unwrap()
        .unwrap();
    match ev {
        watcher::Event::Apply(c) => assert_eq!(c.metadata.name.as_deref(), Some("cm-5")),
        other => panic!("expected the new ConfigMap, got {other:?}"),
    }
}

#[tokio::test]
async fn watch_list_ends_its_initial_events_with_an_annotated_bookmark() {
    let ts = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let (code, body) = raw_get(
        &ts.client(),
        "/api/v1/namespaces/default/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
    )
    .await;
    assert_eq!(code, 200);
    let lines: Vec<Value> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{body}");
    assert_eq!(lines[0]["type"], "ADDED");
    assert_eq!(lines[0]["object"]["metadata"]["name"], "a");
    assert_eq!(lines[1]["type"], "BOOKMARK");
    assert_eq!(
        lines[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(
        lines[1]["object"]["metadata"]["resourceVersion"],
        lines[0]["object"]["metadata"]["resourceVersion"]
    );

    // sendInitialEvents=false without a revision starts at the latest one: nothing sent.
    let (code, body) = raw_get(
        &ts.client(),
        "/api/v1/namespaces/default/configmaps?watch=true&sendInitialEvents=false&resourceVersionMatch=NotOlderThan",
    )
    .await;
    assert_eq!((code, body.as_str()), (200, ""));
}

#[tokio::test]
async fn watch_list_preconditions_answer_422() {
    let ts = TestServer::start().await.unwrap();
    for (query, field) in [
        (
            "sendInitialEvents=true&allowWatchBookmarks=true",
            "resourceVersionMatch",
        ),
        (
            "sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
            "allowWatchBookmarks",
        ),
        ("resourceVersionMatch=NotOlderThan", "resourceVersionMatch"),
    ] {
        let (code, body) = raw_get(
            &ts.client(),
            &format!("/api/v1/namespaces/default/configmaps?watch=true&{query}"),
        )
        .await;
        assert_eq!(code, 422, "{query}: {body}");
        let status: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(status["details"]["causes"][0]["field"], field, "{query}");
    }
}
