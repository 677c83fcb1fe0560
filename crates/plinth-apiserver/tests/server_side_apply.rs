//! Server-side apply (`application/apply-patch+yaml`) through kube-rs `Patch::Apply`:
//! create when absent, no-op re-apply, field ownership, conflicts and `force`; and the
//! workload kinds of Kubernetes served with their published schemas.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use plinth_apiserver::testing::TestServer;
use serde_json::json;

fn cm(data: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data})
}

#[tokio::test]
async fn apply_creates_then_is_a_no_op_then_removes_dropped_fields() {
    let ts = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    let pp = PatchParams::apply("agent-a");
    let created = api
        .patch("c", &pp, &Patch::Apply(cm(json!({"a": "1", "b": "2"}))))
        .await
        .unwrap();
    let mf = created.metadata.managed_fields.clone().unwrap();
    assert_eq!(mf.len(), 1);
    assert_eq!(mf[0].manager.as_deref(), Some("agent-a"));
    assert_eq!(mf[0].operation.as_deref(), Some("Apply"));
    assert_eq!(
        serde_json::to_value(&mf[0].fields_v1).unwrap(),
        json!({"f:data": {"f:a": {}, "f:b": {}}})
    );
    let again = api
        .patch("c", &pp, &Patch::Apply(cm(json!({"a": "1", "b": "2"}))))
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version, created.metadata.resource_version,
        "an apply that changes nothing is not written"
    );
    let dropped = api
        .patch("c", &pp, &Patch::Apply(cm(json!({"a": "1"}))))
        .await
        .unwrap();
    assert_eq!(
        dropped.data.unwrap().len(),
        1,
        "b was owned only by agent-a and is removed"
    );
}

#[tokio::test]
async fn apply_conflicts_name_the_other_manager_and_force_takes_ownership() {
    let ts = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(ts.client(), "default");
    let mut pp = PostParams::default();
    pp.field_manager = Some("hand-made".into());
    api.create(
        &pp,
        &serde_json::from_value(cm(json!({"a": "mine"}))).unwrap(),
    )
    .await
    .unwrap();
    let err = api
        .patch(
            "c",
            &PatchParams::apply("agent-a"),
            &Patch::Apply(cm(json!({"a": "theirs"}))),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(e) = err else {
        panic!("{err}")
    };
    assert_eq!(e.code, 409);
    assert_eq!(e.reason, "Conflict");
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"hand-made\" using v1: .data.a"
    );
    // The same value is shared ownership, not a conflict.
    api.patch(
        "c",
        &PatchParams::apply("agent-a"),
        &Patch::Apply(cm(json!({"a": "mine"}))),
    )
    .await
    .unwrap();
    let forced = api
        .patch(
            "c",
            &PatchParams::apply("agent-a").force(),
            &Patch::Apply(cm(json!({"a": "theirs"}))),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.unwrap()["a"], "theirs");
    let managers: Vec<String> = forced
        .metadata
        .managed_fields
        .unwrap()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(managers, ["agent-a"], "hand-made lost its only field");
}

#[tokio::test]
async fn apply_requires_a_field_manager() {
    let ts = TestServer::start().await.unwrap();
    let req = http::Request::patch("/api/v1/namespaces/default/configmaps/c")
        .header("content-type", "application/apply-patch+yaml")
        .body(b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n".to_vec())
        .unwrap();
    let err = ts.client().request_text(req).await.unwrap_err();
    let kube::Error::Api(e) = err else {
        panic!("{err}")
    };
    assert_eq!(e.code, 400);
    assert!(
        e.message.contains("fieldManager is required"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn workload_kinds_are_served_and_validated_by_their_schema() {
    let ts = TestServer::start().await.unwrap();
    let api: Api<Deployment> = Api::namespaced(ts.client(), "default");
    let good = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}});
    let d = api
        .patch("web", &PatchParams::apply("t"), &Patch::Apply(&good))
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    let mut bad = good.clone();
    bad["spec"]["replicas"] = json!("three");
    let err = api
        .patch("web", &PatchParams::apply("t"), &Patch::Apply(&bad))
        .await
        .unwrap_err();
    let kube::Error::Api(e) = err else {
        panic!("{err}")
    };
    assert_eq!(e.code, 422, "{}", e.message);
    assert!(
        e.message
            .contains("spec: invalid type: string \"three\", expected i32"),
        "{}",
        e.message
    );
    for (group_version, plural) in [
        ("apps/v1", "statefulsets"),
        ("apps/v1", "daemonsets"),
        ("networking.k8s.io/v1", "ingresses"),
        ("networking.k8s.io/v1", "networkpolicies"),
        ("autoscaling/v2", "horizontalpodautoscalers"),
        ("policy/v1", "poddisruptionbudgets"),
        ("storage.k8s.io/v1", "storageclasses"),
        ("batch/v1", "cronjobs"),
        ("v1", "services"),
        ("v1", "persistentvolumeclaims"),
    ] {
        let list = ts.client().list_api_group_resources(group_version).await;
        let list = match list {
            Ok(l) => l,
            Err(_) => ts
                .client()
                .list_core_api_resources(group_version)
                .await
                .unwrap(),
        };
        assert!(
            list.resources.iter().any(|r| r.name == plural),
            "{group_version} {plural} not in discovery"
        );
    }
}
