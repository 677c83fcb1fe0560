//! `/metrics` stays bounded whatever URLs a client sends: a ServiceAccount with no rights
//! requesting hundreds of invented groups, resources, names and subresources adds only
//! the few series of the `other` resource label, once.

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use plinth_apiserver::testing::TestServer;
use serde_json::json;

/// Series lines of the Prometheus text (comments excluded).
fn series_lines(text: &str) -> usize {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .count()
}

/// A token of a new ServiceAccount that no role is bound to.
async fn unprivileged_token(ts: &TestServer) -> String {
    let client = ts.client();
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let mut sa = ServiceAccount::default();
    sa.metadata.name = Some("nobody".into());
    sas.create(&PostParams::default(), &sa).await.unwrap();
    let req = http::Request::post("/api/v1/namespaces/default/serviceaccounts/nobody/token")
        .header("content-type", "application/json")
        .body(
            serde_json::to_vec(&json!({
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600},
            }))
            .unwrap(),
        )
        .unwrap();
    let tr: serde_json::Value = client.request(req).await.unwrap();
    tr["status"]["token"].as_str().unwrap().to_string()
}

/// Request `i` of a deterministic mix: four methods over invented groups, resources,
/// names and subresources, and unknown names of a served resource. The mix repeats
/// every 12 requests, so the first rounds meet every verb and shape the rest use.
fn hostile_request(i: usize, token: &str) -> http::Request<Vec<u8>> {
    let method = ["GET", "DELETE", "PATCH", "GET"][i % 4];
    let path = match i % 3 {
        0 => format!("/apis/g{i}.example/v1/r{i}"),
        1 => format!("/apis/g{i}.example/v{i}/namespaces/n{i}/r{i}/o{i}/s{i}"),
        _ => format!("/api/v1/namespaces/default/configmaps/c{i}/sub{i}"),
    };
    let query = if i % 8 == 3 { "?watch=true" } else { "" };
    http::Request::builder()
        .method(method)
        .uri(format!("{path}{query}"))
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/merge-patch+json")
        .body(b"{}".to_vec())
        .unwrap()
}

#[tokio::test]
async fn invented_urls_add_no_series() {
    let ts = TestServer::start().await.unwrap();
    let token = unprivileged_token(&ts).await;
    let client = ts.client();
    let metrics = ts.server().metrics();
    let send = |i: usize| {
        let client = client.clone();
        let req = hostile_request(i, &token);
        async move {
            // Every one of them is refused (403/404); only the series count matters.
            let _ = client.request_text(req).await;
        }
    };
    let baseline = series_lines(&metrics.encode());
    for i in 0..48 {
        send(i).await;
    }
    let warmed = series_lines(&metrics.encode());
    for i in 48..1048 {
        send(i).await;
    }
    let text = metrics.encode();
    let after = series_lines(&text);
    assert_eq!(
        after, warmed,
        "1,000 more invented URLs added series:\n{text}"
    );
    // A handful of verb × code label sets of `other` and `configmaps`, each a counter
    // and a histogram (19 buckets + sum + count).
    assert!(
        warmed - baseline <= 12 * 22,
        "the first 48 invented URLs added {} series lines:\n{text}",
        warmed - baseline
    );
    assert!(
        !text.contains("example") && !text.contains("sub1"),
        "a label value was taken from the URL:\n{text}"
    );
    assert!(
        text.contains(r#"resource="other",code="403""#),
        "unknown paths of the unprivileged account are counted under `other`:\n{text}"
    );
}
