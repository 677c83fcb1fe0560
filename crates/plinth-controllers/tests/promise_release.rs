//! PromiseRelease against a local HTTP server serving Promises, one of
//! them behind an Authorization header.

use crate::placement_support;

use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use placement_support::{start, wait_for};
use plinth_controllers::{promise, promiserelease};
use serde_json::{Value, json};

const PROMISE: &str = "apiVersion: platform.kratix.io/v1alpha1\nkind: Promise\nmetadata:\n  name: securepro\n  labels:\n    kratix.io/promise-version: v1.2.0\nspec: {}\n";

async fn serve() -> String {
    let app = Router::new()
        .route(
            "/secure.yaml",
            get(|h: HeaderMap| async move {
                if h.get("authorization").and_then(|v| v.to_str().ok()) == Some("Bearer s3cret") {
                    (StatusCode::OK, PROMISE.to_string())
                } else {
                    (StatusCode::UNAUTHORIZED, "no".to_string())
                }
            }),
        )
        .route(
            "/two.yaml",
            get(|| async { format!("{PROMISE}---\n{PROMISE}") }),
        )
        .route(
            // A YAML comment that never ends.
            "/endless.yaml",
            get(|| async {
                let chunk = axum::body::Bytes::from(vec![b'#'; 64 << 10]);
                let endless = futures::stream::repeat(Ok::<_, std::convert::Infallible>(chunk));
                axum::body::Body::from_stream(endless)
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

fn condition(o: &DynamicObject) -> (String, String, String) {
    let c = o.data["status"]["conditions"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["type"] == "Installed"))
        .cloned()
        .unwrap_or(Value::Null);
    (
        c["status"].as_str().unwrap_or("").into(),
        c["reason"].as_str().unwrap_or("").into(),
        c["message"].as_str().unwrap_or("").into(),
    )
}

async fn wait_reason(api: &Api<DynamicObject>, name: &str, reason: &str) -> DynamicObject {
    for _ in 0..200 {
        let o = api.get(name).await.unwrap();
        if condition(&o).1 == reason {
            return o;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "{name} never reached reason {reason}: {:#}",
        api.get(name).await.unwrap().data["status"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installs_from_http_with_authorization_and_deletes_with_the_release() {
    let env = start().await;
    tokio::spawn(promise::run(env.ctx.clone()));
    tokio::spawn(promiserelease::run(env.ctx.clone()));
    let base = serve().await;
    let releases: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &plinth_controllers::support::resources::release_resource(),
    );
    let promises: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &plinth_controllers::support::resources::promise_resource(),
    );
    let create = |v: Value| {
        let releases = releases.clone();
        async move {
            releases
                .create(&PostParams::default(), &serde_json::from_value(v).unwrap())
                .await
                .unwrap()
        }
    };

    // Without the Secret the fetch fails and the condition quotes why.
    create(json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "PromiseRelease", "metadata": {"name": "secure"},
        "spec": {"version": "v1.2.0", "sourceRef": {"type": "http", "url": format!("{base}/secure.yaml"), "secretRef": {"name": "auth", "namespace": "default"}}}})).await;
    let failed = wait_reason(&releases, "secure", "FailedToFetchPromise").await;
    assert!(
        condition(&failed)
            .2
            .contains("Secret auth not found in namespace default"),
        "{:?}",
        condition(&failed)
    );
    assert_eq!(failed.data["status"]["status"], "Error installing");

    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(env.client.clone(), "default");
    secrets.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "auth"}, "stringData": {"authorizationHeader": "Bearer s3cret"}})).unwrap()).await.unwrap();
    let ok = wait_reason(&releases, "secure", "InstalledSuccessfully").await;
    assert_eq!(ok.data["status"]["status"], "Installed");
    let p = promises.get("securepro").await.unwrap();
    assert_eq!(p.labels()["kratix.io/promise-release-name"], "secure");

    // More than one document is refused with a clear message.
    create(json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "PromiseRelease", "metadata": {"name": "two"},
        "spec": {"sourceRef": {"type": "http", "url": format!("{base}/two.yaml")}}})).await;
    let two = wait_reason(&releases, "two", "FailedToFetchPromise").await;
    assert!(
        condition(&two).2.contains("exactly one document"),
        "{:?}",
        condition(&two)
    );

    // A second release of the same Promise does not take it over: it says whose it is.
    create(json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "PromiseRelease", "metadata": {"name": "thief"},
        "spec": {"version": "v1.2.0", "sourceRef": {"type": "http", "url": format!("{base}/secure.yaml"), "secretRef": {"name": "auth", "namespace": "default"}}}})).await;
    let refused = wait_reason(&releases, "thief", "FailedToCreateOrUpdatePromise").await;
    assert_eq!(
        condition(&refused).2,
        "Promise securepro is already installed by PromiseRelease secure; delete that release first"
    );
    let p = promises.get("securepro").await.unwrap();
    assert_eq!(p.labels()["kratix.io/promise-release-name"], "secure");
    assert_eq!(p.owner_references()[0].name, "secure");
    releases
        .delete("thief", &DeleteParams::default())
        .await
        .unwrap();

    // A Promise the release installed and someone deleted is put back.
    let first_uid = p.uid();
    promises
        .delete("securepro", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the deleted Promise reinstalled by its release", || async {
        promises
            .get_opt("securepro")
            .await
            .unwrap()
            .is_some_and(|p| p.uid() != first_uid && p.metadata.deletion_timestamp.is_none())
    })
    .await;

    // Deleting the release deletes its Promise, then the release.
    releases
        .delete("secure", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("Promise and release gone", || async {
        promises.get_opt("securepro").await.unwrap().is_none()
            && releases.get_opt("secure").await.unwrap().is_none()
    })
    .await;
}

/// A source that accepts the connection and never answers: the fetch gives up after the
/// network timeout with a message that says so, and the release is not held by it — once
/// its URL is corrected it installs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_that_never_answers_times_out_and_a_fix_is_picked_up() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap();
    // Accept and hold every connection, never replying.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in silent.incoming().flatten() {
            held.push(c);
        }
    });
    let env = placement_support::start_with(|c| c.network_timeout = Duration::from_secs(2)).await;
    tokio::spawn(promise::run(env.ctx.clone()));
    tokio::spawn(promiserelease::run(env.ctx.clone()));
    let base = serve().await;
    let releases: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &plinth_controllers::support::resources::release_resource(),
    );
    releases
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "PromiseRelease", "metadata": {"name": "slow"},
                "spec": {"version": "v1.2.0", "sourceRef": {"type": "http", "url": format!("http://{silent_addr}/secure.yaml")}}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let failed = wait_reason(&releases, "slow", "FailedToFetchPromise").await;
    assert!(
        condition(&failed).2.contains("no answer within 2s"),
        "{:?}",
        condition(&failed)
    );

    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(env.client.clone(), "default");
    secrets.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "auth"}, "stringData": {"authorizationHeader": "Bearer s3cret"}})).unwrap()).await.unwrap();
    releases
        .patch(
            "slow",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"sourceRef": {"url": format!("{base}/secure.yaml"), "secretRef": {"name": "auth", "namespace": "default"}}}})),
        )
        .await
        .unwrap();
    wait_reason(&releases, "slow", "InstalledSuccessfully").await;
}

/// A source that streams without end is cut off at the size limit and said so on the
/// release, instead of filling memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_that_never_stops_sending_is_cut_off() {
    let env = placement_support::start().await;
    tokio::spawn(promiserelease::run(env.ctx.clone()));
    let base = serve().await;
    let releases: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &plinth_controllers::support::resources::release_resource(),
    );
    releases
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "PromiseRelease", "metadata": {"name": "endless"},
                "spec": {"version": "v1.2.0", "sourceRef": {"type": "http", "url": format!("{base}/endless.yaml")}}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let failed = wait_reason(&releases, "endless", "FailedToFetchPromise").await;
    let (_, _, message) = condition(&failed);
    assert!(
        message.contains("the answer is over 16777216 bytes"),
        "{message}"
    );
}
