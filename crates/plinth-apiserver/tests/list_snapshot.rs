//! Lists at a revision: `limit` + `continue` page one consistent snapshot, a token whose
//! revision was compacted away answers 410 `Expired` with a fresh token, and
//! `resourceVersionMatch` has Kubernetes' Exact / NotOlderThan semantics. With kube-rs and
//! the real kubectl (`kubectl get --chunk-size`).

use std::collections::BTreeMap;
use std::process::Command;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, VersionMatch};
use plinth_apiserver::testing::TestServer;
use serde_json::{Value, json};

fn cm(name: &str, v: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c.data = Some(BTreeMap::from([("v".to_string(), v.to_string())]));
    c
}

fn value(c: &ConfigMap) -> String {
    c.data.as_ref().unwrap()["v"].clone()
}

async fn fill(api: &Api<ConfigMap>, n: usize) {
    for i in 0..n {
        api.create(&PostParams::default(), &cm(&format!("cm-{i:02}"), "old"))
            .await
            .unwrap();
    }
}

async fn set(api: &Api<ConfigMap>, name: &str, v: &str) -> ConfigMap {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": v}})),
    )
    .await
    .unwrap()
}

/// The (name, value) pairs of `first` and of every page after it, each page asserted to
/// be at the first page's revision.
async fn all_pages(
    api: &Api<ConfigMap>,
    first: kube::core::ObjectList<ConfigMap>,
    limit: u32,
) -> Vec<(String, String)> {
    let rv = first.metadata.resource_version.clone();
    let pairs = |items: &[ConfigMap]| {
        items
            .iter()
            .map(|c| (c.metadata.name.clone().unwrap(), value(c)))
            .collect::<Vec<_>>()
    };
    let mut seen = pairs(&first.items);
    let mut token = first.metadata.continue_.clone();
    while let Some(t) = token.filter(|t| !t.is_empty()) {
        let page = api
            .list(&ListParams::default().limit(limit).continue_token(&t))
            .await
            .expect("a page at a revision above the compaction point is served");
        assert_eq!(
            page.metadata.resource_version, rv,
            "every page at the first page's revision"
        );
        seen.extend(pairs(&page.items));
        token = page.metadata.continue_;
    }
    seen
}

/// GETs a path through the client and returns (status code, JSON body).
async fn raw_get(client: &kube::Client, path: &str) -> (u16, Value) {
    let req = http::Request::get(path)
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    (code, serde_json::from_slice(&body).unwrap())
}

#[tokio::test]
async fn continue_pages_one_consistent_snapshot() {
    let ts = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    fill(&api, 25).await;
    let first = api.list(&ListParams::default().limit(10)).await.unwrap();
    // Changes after the first page: none of them may show in the following pages.
    set(&api, "cm-15", "new").await;
    api.delete("cm-20", &DeleteParams::default()).await.unwrap();
    api.create(&PostParams::default(), &cm("cm-15a", "new"))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("cm-99", "new"))
        .await
        .unwrap();
    set(&api, "cm-21", "new").await;
    api.delete("cm-21", &DeleteParams::default()).await.unwrap();
    let seen = all_pages(&api, first, 10).await;
    let want: Vec<(String, String)> = (0..25)
        .map(|i| (format!("cm-{i:02}"), "old".to_string()))
        .collect();
    assert_eq!(seen, want);
    // A fresh list sees the changes.
    let now = api.list(&ListParams::default()).await.unwrap();
    let names: Vec<String> = now
        .items
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert!(names.contains(&"cm-99".to_string()) && !names.contains(&"cm-20".to_string()));
}

/// Compaction keeps each live object's latest revision, so objects whose whole history
/// was compacted can still change under a paged list without making it expire: the list
/// shows them as they were at its revision.
#[tokio::test]
async fn pages_stay_consistent_over_objects_whose_history_was_compacted() {
    let ts = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    fill(&api, 12).await;
    set(&api, "cm-11", "older").await;
    api.delete("cm-10", &DeleteParams::default()).await.unwrap();
    ts.server().compact(0).await.unwrap();
    let first = api.list(&ListParams::default().limit(5)).await.unwrap();
    set(&api, "cm-07", "new").await;
    api.delete("cm-09", &DeleteParams::default()).await.unwrap();
    set(&api, "cm-11", "new").await;
    let seen = all_pages(&api, first, 5).await;
    let mut want: Vec<(String, String)> = (0..10)
        .map(|i| (format!("cm-{i:02}"), "old".to_string()))
        .collect();
    want.push(("cm-11".into(), "older".into()));
    assert_eq!(seen, want);
    // A second compaction drops the revisions of the deleted objects and keeps the rest.
    ts.server().compact(0).await.unwrap();
    let again = api.list(&ListParams::default().limit(5)).await.unwrap();
    set(&api, "cm-00", "newer").await;
    let rest = api
        .list(
            &ListParams::default()
                .limit(100)
                .continue_token(again.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(again.items.len() + rest.items.len(), 10);
}

#[tokio::test]
async fn a_continue_token_past_compaction_is_410_expired_with_a_fresh_token() {
    let ts = TestServer::start().await.unwrap();
    let client = ts.client();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    fill(&api, 12).await;
    let first = api.list(&ListParams::default().limit(5)).await.unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    set(&api, "cm-07", "new").await;
    ts.server().compact(0).await.unwrap();

    let err = api
        .list(&ListParams::default().limit(5).continue_token(&token))
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
        }
        e => panic!("unexpected {e}"),
    }
    // The Status carries a fresh token that continues over the current state.
    let (code, status) = raw_get(
        &client,
        &format!("/api/v1/namespaces/default/configmaps?limit=5&continue={token}"),
    )
    .await;
    assert_eq!(code, 410);
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "Expired");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("too old to display a consistent list result")
    );
    let fresh = status["metadata"]["continue"].as_str().unwrap().to_string();
    assert!(!fresh.is_empty());
    let rest = api
        .list(&ListParams::default().continue_token(&fresh))
        .await
        .unwrap();
    let names: Vec<(String, String)> = rest
        .items
        .iter()
        .map(|c| (c.metadata.name.clone().unwrap(), value(c)))
        .collect();
    assert_eq!(names.first().map(|n| n.0.as_str()), Some("cm-05"));
    assert_eq!(names.len(), 7);
    assert!(
        names.contains(&("cm-07".into(), "new".into())),
        "the current state: {names:?}"
    );
}

#[tokio::test]
async fn resource_version_match_exact_and_not_older_than() {
    let ts = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    let a = api
        .create(&PostParams::default(), &cm("a", "1"))
        .await
        .unwrap();
    let rv1 = a.metadata.resource_version.clone().unwrap();
    set(&api, "a", "2").await;
    api.create(&PostParams::default(), &cm("b", "1"))
        .await
        .unwrap();

    let exact = api
        .list(&ListParams::default().at(&rv1).matching(VersionMatch::Exact))
        .await
        .unwrap();
    assert_eq!(
        exact.metadata.resource_version.as_deref(),
        Some(rv1.as_str())
    );
    let got: Vec<(String, String)> = exact
        .items
        .iter()
        .map(|c| (c.metadata.name.clone().unwrap(), value(c)))
        .collect();
    assert_eq!(got, vec![("a".to_string(), "1".to_string())]);

    let newer = api
        .list(
            &ListParams::default()
                .at(&rv1)
                .matching(VersionMatch::NotOlderThan),
        )
        .await
        .unwrap();
    assert_eq!(newer.items.len(), 2);
    assert_eq!(value(&newer.items[0]), "2");
    assert!(
        newer
            .metadata
            .resource_version
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > rv1.parse::<u64>().unwrap()
    );

    // Combinations Kubernetes forbids.
    let code = |r: Result<_, kube::Error>| match r {
        Err(kube::Error::Api(s)) => (s.code, s.reason),
        Ok(_) => (200, String::new()),
        Err(e) => panic!("{e}"),
    };
    let client = ts.client();
    let (c, s) = raw_get(
        &client,
        "/api/v1/namespaces/default/configmaps?resourceVersion=0&resourceVersionMatch=Exact",
    )
    .await;
    assert_eq!((c, s["reason"].as_str()), (422, Some("Invalid")));
    let (c, s) = raw_get(
        &client,
        "/api/v1/namespaces/default/configmaps?resourceVersionMatch=Exact",
    )
    .await;
    assert_eq!((c, s["reason"].as_str()), (422, Some("Invalid")));
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .contains("resourceVersionMatch is forbidden unless resourceVersion is provided")
    );
    let (c, _) = raw_get(
        &client,
        "/api/v1/namespaces/default/configmaps?resourceVersion=1&resourceVersionMatch=Newest",
    )
    .await;
    assert_eq!(c, 422);
    // A revision the store has not reached.
    assert_eq!(
        code(
            api.list(
                &ListParams::default()
                    .at("999999")
                    .matching(VersionMatch::Exact)
            )
            .await
        )
        .0,
        504
    );
    // A compacted revision.
    ts.server().compact(0).await.unwrap();
    assert_eq!(
        code(
            api.list(&ListParams::default().at(&rv1).matching(VersionMatch::Exact))
                .await
        ),
        (410, "Expired".to_string())
    );
}

#[tokio::test]
async fn kubectl_get_with_chunk_size_pages_every_object() {
    if Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        println!("SKIPPED: kubectl not found on PATH");
        return;
    }
    let ts = TestServer::start_https().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    fill(&api, 23).await;
    let kc = ts.kubeconfig().unwrap();
    let home = ts.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("kubectl")
            .args([
                "get",
                "configmaps",
                "-n",
                "default",
                "--chunk-size=5",
                "-o",
                "name",
                "-v=6",
            ])
            .env("KUBECONFIG", &kc)
            .env("HOME", &home)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The server's own kube-root-ca.crt is there too.
    let names: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("configmap/cm-"))
        .collect();
    let want: Vec<String> = (0..23).map(|i| format!("configmap/cm-{i:02}")).collect();
    assert_eq!(names, want.iter().map(String::as_str).collect::<Vec<_>>());
    // kubectl asked in five chunks (four continue requests).
    assert_eq!(stderr.matches("continue=").count(), 4, "{stderr}");
}
