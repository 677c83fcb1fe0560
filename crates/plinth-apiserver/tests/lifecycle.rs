//! In-process kube-rs tests of the object lifecycle: CRDs, patch types, the status
//! subresource, finalizers, owner-reference garbage collection, namespace deletion,
//! kube-runtime's watcher across compaction, and bad input.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::body::Body;
use futures::StreamExt;
use http::Request;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
    PostParams, PropagationPolicy,
};
use kube::runtime::watcher;
use plinth_apiserver::testing::TestServer;
use serde_json::{Value, json};
use tower::ServiceExt;

fn api_err<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> kube::core::Status {
    match r {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn cm(name: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c.data = Some(BTreeMap::from([("k".to_string(), "v".to_string())]));
    c
}

/// Waits (bounded) until `f` returns true.
async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..250 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}

fn widget_crd() -> CustomResourceDefinition {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "size": {"type": "integer", "minimum": 0},
            "color": {"type": "string", "default": "blue"}}},
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}});
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wg"], "categories": ["all"]},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                 "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
                 "schema": {"openAPIV3Schema": schema}},
                {"name": "v1beta1", "served": true, "storage": false, "subresources": {"status": {}},
                 "schema": {"openAPIV3Schema": schema}}]}}))
    .unwrap()
}

fn widgets(client: kube::Client, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("example.com", version, "Widget");
    Api::namespaced_with(
        client,
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, "widgets"),
    )
}

fn widget(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec})).unwrap()
}

async fn get_json(ts: &TestServer, path: &str) -> (u16, Value) {
    let resp = ts
        .router()
        .oneshot(Request::get(path).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

async fn send(ts: &TestServer, method: &str, path: &str, ct: &str, body: Vec<u8>) -> (u16, Value) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", ct)
        .body(Body::from(body))
        .unwrap();
    let resp = ts.router().oneshot(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn crd_is_usable_immediately_and_deletion_removes_its_resources() {
    let ts = TestServer::start().await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(ts.client());
    let crd = crds
        .create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    let conds = crd.status.unwrap().conditions.unwrap();
    for t in ["NamesAccepted", "Established"] {
        assert!(
            conds.iter().any(|c| c.type_ == t && c.status == "True"),
            "{t}"
        );
    }
    // Discovery shows it at once.
    let (code, list) = get_json(&ts, "/apis/example.com/v1").await;
    assert_eq!(code, 200);
    let r = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "widgets")
        .unwrap();
    assert_eq!(r["shortNames"], json!(["wg"]));
    assert_eq!(r["categories"], json!(["all"]));
    assert_eq!(r["kind"], "Widget");
    let (_, groups) = get_json(&ts, "/apis").await;
    assert!(
        groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "example.com")
    );

    let api = widgets(ts.client(), "v1");
    let w = api
        .create(
            &PostParams::default(),
            &widget("w1", json!({"size": 3, "bogus": 1})),
        )
        .await
        .unwrap();
    // Defaulted and pruned by schema admission.
    assert_eq!(w.data["spec"]["color"], "blue");
    assert!(w.data["spec"].get("bogus").is_none());
    assert_eq!(w.metadata.generation, Some(1));

    // Invalid → 422 with a field cause; nothing stored.
    let s = api_err(
        api.create(&PostParams::default(), &widget("w2", json!({"size": -1})))
            .await,
    );
    assert_eq!(s.code, 422);
    assert_eq!(s.reason, "Invalid");
    let causes = s.details.unwrap().causes;
    assert!(causes.iter().any(|c| c.field == "spec.size"), "{causes:?}");
    api_err(api.get("w2").await);

    // Another served version: same object, rewritten apiVersion.
    let beta = widgets(ts.client(), "v1beta1");
    let b = beta.get("w1").await.unwrap();
    assert_eq!(b.types.unwrap().api_version, "example.com/v1beta1");

    // Table rendering with the printer column.
    let resp = ts
        .router()
        .oneshot(
            Request::get("/apis/example.com/v1/namespaces/default/widgets")
                .header(
                    "accept",
                    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
                )
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let t: Value = serde_json::from_slice(
        &axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(t["kind"], "Table");
    assert!(
        t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "Size")
    );

    // Update the CRD (drop v1beta1): takes effect at once.
    let mut c = crds.get("widgets.example.com").await.unwrap();
    c.spec.versions.retain(|v| v.name == "v1");
    crds.replace("widgets.example.com", &PostParams::default(), &c)
        .await
        .unwrap();
    assert_eq!(api_err(beta.get("w1").await).code, 404);
    api.get("w1").await.unwrap();

    // Delete the CRD: resources gone, API gone.
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    let (code, _) = get_json(&ts, "/apis/example.com/v1").await;
    assert_eq!(code, 404);
    crds.create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    assert_eq!(api_err(api.get("w1").await).code, 404);
}

#[tokio::test]
async fn crd_validation_rejects_bad_definitions() {
    let ts = TestServer::start().await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(ts.client());
    let mut bad = widget_crd();
    bad.metadata.name = Some("wrong.example.com".into());
    let s = api_err(crds.create(&PostParams::default(), &bad).await);
    assert_eq!(s.code, 422);
    let mut two_storage = widget_crd();
    for v in two_storage.spec.versions.iter_mut() {
        v.storage = true;
    }
    assert_eq!(
        api_err(crds.create(&PostParams::default(), &two_storage).await).code,
        422
    );
    assert!(
        crds.list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn status_subresource_and_generation() {
    let ts = TestServer::start().await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(ts.client());
    crds.create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    let api = widgets(ts.client(), "v1");
    let mut w = widget("s1", json!({"size": 1}));
    w.data["status"] = json!({"ready": true});
    let w = api.create(&PostParams::default(), &w).await.unwrap();
    assert!(
        w.data.get("status").is_none(),
        "status is dropped on create"
    );

    // A main-resource write that only touches status: ignored, no generation bump.
    let mut w2 = w.clone();
    w2.data["status"] = json!({"ready": true});
    let w2 = api
        .replace("s1", &PostParams::default(), &w2)
        .await
        .unwrap();
    assert!(w2.data.get("status").is_none());
    assert_eq!(w2.metadata.generation, Some(1));

    // Labels (metadata) change: no generation bump.
    let w3 = api
        .patch(
            "s1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(w3.metadata.generation, Some(1));

    // Status through /status: written, spec untouched, no generation bump.
    let w4 = api
        .patch_status(
            "s1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}, "spec": {"size": 99}})),
        )
        .await
        .unwrap();
    assert_eq!(w4.data["status"]["ready"], true);
    assert_eq!(w4.data["spec"]["size"], 1);
    assert_eq!(w4.metadata.generation, Some(1));

    // Spec change: generation 2, status kept.
    let w5 = api
        .patch(
            "s1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(w5.metadata.generation, Some(2));
    assert_eq!(w5.data["status"]["ready"], true);

    // replace_status with a full object.
    let mut w6 = w5.clone();
    w6.data["status"] = json!({"ready": false});
    let w6 = api
        .replace_status("s1", &PostParams::default(), &w6)
        .await
        .unwrap();
    assert_eq!(w6.data["status"]["ready"], false);
    assert_eq!(w6.metadata.generation, Some(2));

    // An unchanged write is a no-op (no new resourceVersion).
    let again = api
        .replace("s1", &PostParams::default(), &w6)
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version,
        w6.metadata.resource_version
    );
}

#[tokio::test]
async fn patch_types() {
    let ts = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    api.create(&PostParams::default(), &cm("p")).await.unwrap();
    let pp = PatchParams::default();
    let c = api
        .patch(
            "p",
            &pp,
            &Patch::Merge(json!({"data": {"a": "1", "k": null}})),
        )
        .await
        .unwrap();
    assert_eq!(
        c.data.unwrap(),
        BTreeMap::from([("a".to_string(), "1".to_string())])
    );

    let rv = api
        .get("p")
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let jp: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
        {"op": "add", "path": "/data/b", "value": "2"}]))
    .unwrap();
    let c = api
        .patch("p", &pp, &Patch::Json::<()>(jp.clone()))
        .await
        .unwrap();
    assert_eq!(c.data.as_ref().unwrap()["b"], "2");
    // Same patch again: the `test` fails now; nothing changes.
    let s = api_err(api.patch("p", &pp, &Patch::Json::<()>(jp)).await);
    assert_eq!(s.code, 422);
    assert_eq!(
        api.get("p").await.unwrap().metadata.resource_version,
        c.metadata.resource_version
    );

    let c = api
        .patch(
            "p",
            &pp,
            &Patch::Strategic(json!({"metadata": {"finalizers": ["x/y"]}, "data": {"c": "3"}})),
        )
        .await
        .unwrap();
    assert_eq!(c.data.as_ref().unwrap()["c"], "3");
    assert_eq!(c.metadata.finalizers, Some(vec!["x/y".to_string()]));
    let c = api
        .patch(
            "p",
            &pp,
            &Patch::Strategic(
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x/y"]}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(c.metadata.finalizers, None);

    let s = api_err(
        api.patch(
            "p",
            &PatchParams::apply("me"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"z": "1"}})),
        )
        .await,
    );
    // Server-side apply is supported; an applied configuration must name its object.
    assert_eq!(s.code, 400);
    assert!(
        s.message.contains("metadata.name is required"),
        "{}",
        s.message
    );

    // Strategic merge patch on a custom resource: 415.
    let crds: Api<CustomResourceDefinition> = Api::all(ts.client());
    crds.create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    let w = widgets(ts.client(), "v1");
    w.create(&PostParams::default(), &widget("x", json!({"size": 1})))
        .await
        .unwrap();
    let s = api_err(
        w.patch("x", &pp, &Patch::Strategic(json!({"spec": {"size": 2}})))
            .await,
    );
    assert_eq!(s.code, 415);

    // dryRun=All changes nothing.
    let before = api.get("p").await.unwrap();
    let dry = api
        .patch(
            "p",
            &PatchParams {
                dry_run: true,
                ..Default::default()
            },
            &Patch::Merge(json!({"data": {"dry": "1"}})),
        )
        .await
        .unwrap();
    assert_eq!(dry.data.as_ref().unwrap()["dry"], "1");
    assert_eq!(api.get("p").await.unwrap(), before);
    api.create(
        &PostParams {
            dry_run: true,
            ..Default::default()
        },
        &cm("dry"),
    )
    .await
    .unwrap();
    assert_eq!(api_err(api.get("dry").await).code, 404);
}

#[tokio::test]
async fn strategic_merge_patch_on_pod_containers() {
    let ts = TestServer::start().await.unwrap();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(ts.client(), "default");
    let pod = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [
            {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "b:1"}]}}),
    )
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let p = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"containers": [
            {"name": "a", "image": "a:2", "env": [{"name": "Y", "value": "2"}]},
            {"name": "b", "$patch": "delete"}]}})),
        )
        .await
        .unwrap();
    let cs = p.spec.unwrap().containers;
    assert_eq!(cs.len(), 1);
    assert_eq!(cs[0].image.as_deref(), Some("a:2"));
    let env: Vec<String> = cs[0]
        .env
        .clone()
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(env, vec!["X", "Y"]);
}

#[tokio::test]
async fn finalizers_and_deletion_timestamp() {
    let ts = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    let mut c = cm("f");
    c.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &c).await.unwrap();
    api.delete("f", &DeleteParams::default()).await.unwrap();
    let c = api.get("f").await.unwrap();
    assert!(c.metadata.deletion_timestamp.is_some());
    // New finalizers cannot be added while deleting.
    let s = api_err(
        api.patch(
            "f",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold", "b"]}})),
        )
        .await,
    );
    assert_eq!(s.code, 422);
    // Removing the last finalizer completes the deletion.
    let jp: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": ["example.com/hold"]},
        {"op": "remove", "path": "/metadata/finalizers"}]))
    .unwrap();
    api.patch("f", &PatchParams::default(), &Patch::Json::<()>(jp))
        .await
        .unwrap();
    assert_eq!(api_err(api.get("f").await).code, 404);
}

fn owned(name: &str, owner: &ConfigMap) -> ConfigMap {
    let mut c = cm(name);
    c.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: owner.metadata.name.clone().unwrap(),
            uid: owner.metadata.uid.clone().unwrap(),
            block_owner_deletion: Some(true),
            controller: Some(true),
        },
    ]);
    c
}

#[tokio::test]
async fn owner_reference_gc_background_foreground_orphan() {
    let ts = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    let pp = PostParams::default();

    // Background: the owner goes at once, the dependent follows.
    let owner = api.create(&pp, &cm("bg-owner")).await.unwrap();
    api.create(&pp, &owned("bg-dep", &owner)).await.unwrap();
    api.delete("bg-owner", &DeleteParams::background())
        .await
        .unwrap();
    assert_eq!(api_err(api.get("bg-owner").await).code, 404);
    eventually("background dependent removal", || async {
        api.get("bg-dep").await.is_err()
    })
    .await;

    // Foreground: the owner waits (deletionTimestamp + foregroundDeletion) for its dependents.
    let owner = api.create(&pp, &cm("fg-owner")).await.unwrap();
    let mut dep = owned("fg-dep", &owner);
    dep.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&pp, &dep).await.unwrap();
    api.delete("fg-owner", &DeleteParams::foreground())
        .await
        .unwrap();
    eventually("dependent marked for deletion", || async {
        api.get("fg-dep")
            .await
            .map(|d| d.metadata.deletion_timestamp.is_some())
            .unwrap_or(false)
    })
    .await;
    let o = api.get("fg-owner").await.unwrap();
    assert!(o.metadata.deletion_timestamp.is_some());
    assert!(
        o.metadata
            .finalizers
            .unwrap()
            .contains(&"foregroundDeletion".to_string())
    );
    api.patch(
        "fg-dep",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually("foreground owner removal", || async {
        api.get("fg-owner").await.is_err()
    })
    .await;

    // Orphan: the dependent stays and loses its owner reference.
    let owner = api.create(&pp, &cm("or-owner")).await.unwrap();
    api.create(&pp, &owned("or-dep", &owner)).await.unwrap();
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..Default::default()
    };
    api.delete("or-owner", &dp).await.unwrap();
    eventually("orphaning owner removal", || async {
        api.get("or-owner").await.is_err()
    })
    .await;
    let d = api.get("or-dep").await.unwrap();
    assert!(d.metadata.owner_references.is_none_or(|r| r.is_empty()));

    // Cross-kind: a Secret owned by a ConfigMap.
    let owner = api.create(&pp, &cm("x-owner")).await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(ts.client(), "default");
    let s = Secret {
        metadata: owned("x-dep", &owner).metadata,
        ..Default::default()
    };
    secrets.create(&pp, &s).await.unwrap();
    api.delete("x-owner", &DeleteParams::default())
        .await
        .unwrap();
    eventually("cross-kind dependent removal", || async {
        secrets.get("x-dep").await.is_err()
    })
    .await;
}

#[tokio::test]
async fn namespace_deletion_removes_contents() {
    let ts = TestServer::start().await.unwrap();
    let nss: Api<Namespace> = Api::all(ts.client());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("temp".into());
    nss.create(&PostParams::default(), &ns).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "temp");
    for i in 0..3 {
        api.create(&PostParams::default(), &cm(&format!("c{i}")))
            .await
            .unwrap();
    }
    nss.delete("temp", &DeleteParams::default()).await.unwrap();
    eventually("namespace removal", || async {
        nss.get("temp").await.is_err()
    })
    .await;
    assert!(
        api.list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    // Protected namespaces stay.
    assert_eq!(
        api_err(nss.delete("default", &DeleteParams::default()).await).code,
        403
    );
    // Creating in a missing namespace: 404 naming the namespace.
    let s = api_err(api.create(&PostParams::default(), &cm("late")).await);
    assert_eq!(s.code, 404);
    assert!(s.message.contains("temp"), "{}", s.message);
}

#[tokio::test]
async fn watcher_recovers_after_compaction() {
    let ts = TestServer::start().await.unwrap();
    let client = ts.client();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &cm("before"))
        .await
        .unwrap();
    let mut stream = watcher(api.clone(), watcher::Config::default().timeout(1)).boxed();
    let mut inits = 0;
    loop {
        match stream.next().await.unwrap().unwrap() {
            watcher::Event::Init => inits += 1,
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(inits, 1);
    // Changes elsewhere move the revision past the watcher's resume point, then the log
    // is compacted: the watcher's next watch starts below it and gets a 410 in-stream.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    for i in 0..5 {
        let mut s = Secret::default();
        s.metadata.name = Some(format!("s{i}"));
        secrets.create(&PostParams::default(), &s).await.unwrap();
    }
    ts.server().compact(0).await.unwrap();
    api.create(&PostParams::default(), &cm("after"))
        .await
        .unwrap();
    // Its own watch from the stale point gets the in-stream 410.
    let (code, _) = get_json(
        &ts,
        "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=1&timeoutSeconds=1",
    )
    .await;
    assert_eq!(code, 200);
    let mut saw_after = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while tokio::time::Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(5), stream.next()).await {
            Ok(Some(Ok(watcher::Event::Init))) => inits += 1,
            Ok(Some(Ok(watcher::Event::InitApply(c)))) | Ok(Some(Ok(watcher::Event::Apply(c))))
                if c.metadata.name.as_deref() == Some("after") =>
            {
                saw_after = true
            }
            Ok(Some(Ok(watcher::Event::InitDone))) if saw_after => break,
            // kube-runtime reports the 410 and then re-lists.
            Ok(Some(Err(e))) => assert!(e.to_string().contains("Expired"), "watcher error: {e}"),
            _ => {}
        }
        if saw_after && inits >= 2 {
            break;
        }
    }
    assert!(
        saw_after,
        "the watcher saw the object created after compaction"
    );
    assert!(inits >= 2, "the watcher re-listed after the 410");
}

#[tokio::test]
async fn stale_watch_gets_in_stream_410() {
    let ts = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    for i in 0..3 {
        api.create(&PostParams::default(), &cm(&format!("c{i}")))
            .await
            .unwrap();
    }
    ts.server().compact(0).await.unwrap();
    let resp = ts
        .router()
        .oneshot(
            Request::get("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=1")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    let ev: Value = serde_json::from_slice(bytes.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(ev["type"], "ERROR");
    assert_eq!(ev["object"]["code"], 410);
    assert_eq!(ev["object"]["reason"], "Expired");
}

#[tokio::test]
async fn watch_bookmarks_and_timeout() {
    let ts = TestServer::start_with(|c| c.bookmark_interval = Duration::from_millis(100))
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    let c = api.create(&PostParams::default(), &cm("b")).await.unwrap();
    let rv = c.metadata.resource_version.unwrap();
    let started = std::time::Instant::now();
    let resp = ts
        .router()
        .oneshot(
            Request::get(format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=1"))
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert!(resp.headers().get("content-encoding").is_none());
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    let events: Vec<Value> = bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert!(events.iter().any(|e| {
        e["type"] == "BOOKMARK"
            && e["object"]["metadata"]["resourceVersion"]
                .as_str()
                .is_some()
    }));
}

#[tokio::test]
async fn bad_input_is_rejected_and_changes_nothing() {
    let ts = TestServer::start().await.unwrap();
    let head = ts.server().resource_version();
    let path = "/api/v1/namespaces/default/configmaps";
    let json_ct = "application/json";

    let (code, st) = send(&ts, "POST", path, json_ct, b"{not json".to_vec()).await;
    assert_eq!(
        (code, st["kind"].as_str(), st["reason"].as_str()),
        (400, Some("Status"), Some("BadRequest"))
    );

    let (code, _) = send(
        &ts,
        "POST",
        path,
        json_ct,
        br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}"#.to_vec(),
    )
    .await;
    assert_eq!(code, 400);
    let (code, _) = send(
        &ts,
        "POST",
        path,
        json_ct,
        br#"{"apiVersion":"v2","kind":"ConfigMap","metadata":{"name":"x"}}"#.to_vec(),
    )
    .await;
    assert_eq!(code, 400);
    let (code, st) = send(
        &ts,
        "POST",
        path,
        json_ct,
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad_Name"}}"#.to_vec(),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(st["details"]["causes"][0]["field"], "metadata.name");
    let (code, _) = send(
        &ts,
        "POST",
        path,
        "application/yaml",
        b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [unclosed\n".to_vec(),
    )
    .await;
    assert_eq!(code, 400);
    let (code, st) = send(
        &ts,
        "POST",
        "/api/v1/namespaces/nowhere/configmaps",
        json_ct,
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}"#.to_vec(),
    )
    .await;
    assert_eq!(code, 404);
    assert!(st["message"].as_str().unwrap().contains("nowhere"));
    let big = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"big"}},"data":{{"k":"{}"}}}}"#,
        "x".repeat(3 * 1024 * 1024 + 10)
    );
    let (code, st) = send(&ts, "POST", path, json_ct, big.into_bytes()).await;
    assert_eq!(code, 413);
    assert_eq!(st["reason"], "RequestEntityTooLarge");
    let (code, _) = send(
        &ts,
        "POST",
        "/api/v1/namespaces/default/frobs",
        json_ct,
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(code, 404);
    assert_eq!(ts.server().resource_version(), head, "nothing was written");

    // A YAML body is accepted.
    let (code, obj) = send(
        &ts,
        "POST",
        path,
        "application/yaml",
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  a: b\n".to_vec(),
    )
    .await;
    assert_eq!(code, 201, "{obj}");
    assert_eq!(obj["data"]["a"], "b");

    // Update with mismatching name; nothing changes.
    let head = ts.server().resource_version();
    let (code, _) = send(
        &ts,
        "PUT",
        &format!("{path}/from-yaml"),
        json_ct,
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"other"}}"#.to_vec(),
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(ts.server().resource_version(), head);
}

#[tokio::test]
async fn field_validation_strict_and_warn() {
    let ts = TestServer::start().await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(ts.client());
    crds.create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    let body = |name: &str| {
        serde_json::to_vec(&json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"size": 1, "bogus": true}}))
            .unwrap()
    };
    let head = ts.server().resource_version();
    let (code, st) = send(
        &ts,
        "POST",
        &format!("{path}?fieldValidation=Strict"),
        "application/json",
        body("a"),
    )
    .await;
    assert_eq!(code, 400);
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .contains("unknown field \"spec.bogus\""),
        "{st}"
    );
    assert_eq!(ts.server().resource_version(), head);

    let req = Request::post(format!("{path}?fieldValidation=Warn"))
        .header("content-type", "application/json")
        .body(Body::from(body("b")))
        .unwrap();
    let resp = ts.router().oneshot(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    let w = resp
        .headers()
        .get("warning")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        w.contains("unknown field") && w.contains("spec.bogus"),
        "{w}"
    );

    // Strict on a patch result.
    let (code, _) = send(
        &ts,
        "PATCH",
        &format!("{path}/b?fieldValidation=Strict"),
        "application/merge-patch+json",
        br#"{"spec":{"other":1}}"#.to_vec(),
    )
    .await;
    assert_eq!(code, 400);
}

#[tokio::test]
async fn events_are_one_resource_in_both_api_versions() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use k8s_openapi::api::events::v1::Event as NewEvent;
    let ts = TestServer::start().await.unwrap();
    let new: Api<NewEvent> = Api::namespaced(ts.client(), "default");
    let ev: NewEvent = serde_json::from_value(json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e1"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "plinth.io/promise", "reportingInstance": "x",
        "action": "Reconcile", "reason": "Created", "type": "Normal",
        "note": "made a thing",
        "regarding": {"apiVersion": "v1", "kind": "ConfigMap", "name": "cfg", "namespace": "default", "uid": "u-1"}}))
    .unwrap();
    new.create(&PostParams::default(), &ev).await.unwrap();
    // kubectl describe's query: core/v1 with involvedObject field selectors.
    let core: Api<CoreEvent> = Api::namespaced(ts.client(), "default");
    let l =
        core.list(&kube::api::ListParams::default().fields(
            "involvedObject.name=cfg,involvedObject.kind=ConfigMap,involvedObject.uid=u-1",
        ))
        .await
        .unwrap();
    assert_eq!(l.items.len(), 1);
    assert_eq!(l.items[0].message.as_deref(), Some("made a thing"));
    assert_eq!(
        l.items[0].reporting_component.as_deref(),
        Some("plinth.io/promise")
    );
    // And back through events.k8s.io with its own field names.
    let l = new
        .list(&kube::api::ListParams::default().fields("regarding.name=cfg"))
        .await
        .unwrap();
    assert_eq!(l.items[0].note.as_deref(), Some("made a thing"));
    // A merge patch through events.k8s.io (what kube-runtime's Recorder sends for series).
    let p = new
        .patch(
            "e1",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"series": {"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(p.series.unwrap().count, 2);
    assert_eq!(core.get("e1").await.unwrap().series.unwrap().count, Some(2));
}

#[tokio::test]
async fn delete_collection_with_a_label_selector() {
    let ts = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    for (name, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let mut c = cm(name);
        c.metadata.labels = Some(BTreeMap::from([("app".to_string(), app.to_string())]));
        api.create(&PostParams::default(), &c).await.unwrap();
    }
    api.delete_collection(
        &DeleteParams::default(),
        &kube::api::ListParams::default().labels("app=x"),
    )
    .await
    .unwrap();
    let left: Vec<String> = api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect();
    assert_eq!(left, vec!["c"]);
}

#[tokio::test]
async fn pod_logs_from_the_data_directory() {
    use k8s_openapi::api::core::v1::Pod;
    let ts = TestServer::start().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(ts.client(), "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "main", "image": "busybox"}]}})).unwrap();
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Pending"));
    let dir = ts.data_dir().join("pod-logs/default/p");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("main.log"), "one\ntwo\nthree\n").unwrap();
    assert_eq!(
        pods.logs("p", &Default::default()).await.unwrap(),
        "one\ntwo\nthree\n"
    );
    let lp = kube::api::LogParams {
        tail_lines: Some(1),
        ..Default::default()
    };
    assert_eq!(pods.logs("p", &lp).await.unwrap(), "three\n");
    // follow: streams until the container terminates.
    let lp = kube::api::LogParams {
        follow: true,
        ..Default::default()
    };
    let mut stream = pods.log_stream("p", &lp).await.unwrap();
    let writer = {
        let pods = pods.clone();
        let dir = dir.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(dir.join("main.log"))
                .unwrap();
            f.write_all(b"four\n").unwrap();
            pods.patch_status(
                "p",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
            )
            .await
            .unwrap();
        })
    };
    let mut text = Vec::new();
    use futures::AsyncReadExt;
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut text))
        .await
        .unwrap()
        .unwrap();
    writer.await.unwrap();
    assert_eq!(String::from_utf8(text).unwrap(), "one\ntwo\nthree\nfour\n");
    // Unknown container: 400.
    let lp = kube::api::LogParams {
        container: Some("nope".into()),
        ..Default::default()
    };
    assert!(pods.logs("p", &lp).await.is_err());
}
