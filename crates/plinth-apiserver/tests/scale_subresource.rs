//! The `scale` subresource (`autoscaling/v1` Scale): listed in discovery, served for the
//! built-in workload kinds and for CRDs that declare `subresources.scale`, used by
//! `kubectl scale`; a scale write changes only the desired replicas and records them under
//! its own field manager, so a server-side applier takes them back only if it declares
//! them, and gives them up when it stops declaring them.

use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use plinth_apiserver::testing::TestServer;
use serde_json::{Value, json};

fn deployment(replicas: Option<i64>) -> Value {
    let mut d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
    });
    if let Some(r) = replicas {
        d["spec"]["replicas"] = json!(r);
    }
    d
}

fn replica_managers(d: &Deployment) -> Vec<String> {
    let mut out: Vec<String> = d
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.fields_v1
                .as_ref()
                .is_some_and(|f| f.0.pointer("/f:spec/f:replicas").is_some())
        })
        .filter_map(|m| m.manager.clone())
        .collect();
    out.sort();
    out
}

async fn raw(
    client: &kube::Client,
    method: &str,
    uri: &str,
    ct: &str,
    body: Value,
) -> Result<Value, kube::Error> {
    let req = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", ct)
        .body(if method == "GET" {
            Vec::new()
        } else {
            serde_json::to_vec(&body).unwrap()
        })
        .unwrap();
    client.request::<Value>(req).await
}

#[tokio::test]
async fn scale_changes_only_replicas_under_its_own_field_manager() {
    let ts = TestServer::start().await.unwrap();
    let client = ts.client();
    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let agent = PatchParams::apply("plinth-agent");
    api.patch("web", &agent, &Patch::Apply(deployment(Some(2))))
        .await
        .unwrap();

    let disc = raw(&client, "GET", "/apis/apps/v1", "", json!(null))
        .await
        .unwrap();
    let scale_res = disc["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "deployments/scale")
        .expect("deployments/scale in discovery");
    assert_eq!(scale_res["kind"], "Scale");
    assert_eq!(scale_res["group"], "autoscaling");
    assert_eq!(scale_res["verbs"], json!(["get", "patch", "update"]));

    let s = api.get_scale("web").await.unwrap();
    assert_eq!(s.spec.unwrap().replicas, Some(2));
    assert_eq!(s.status.unwrap().selector.as_deref(), Some("app=web"));

    // Another manager scales to 5: only replicas change, and it owns them beside the agent.
    let before = api.get("web").await.unwrap();
    let team_b = PatchParams {
        field_manager: Some("team-b".into()),
        ..Default::default()
    };
    let s = api
        .patch_scale(
            "web",
            &team_b,
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(s.spec.unwrap().replicas, Some(5));
    let after = api.get("web").await.unwrap();
    assert_eq!(after.spec.as_ref().unwrap().replicas, Some(5));
    assert_eq!(
        after.spec.as_ref().unwrap().template,
        before.spec.as_ref().unwrap().template
    );
    assert_eq!(replica_managers(&after), ["team-b"]);

    // The agent declaring replicas: 2 conflicts unless it takes them back (force).
    let err = api
        .patch("web", &agent, &Patch::Apply(deployment(Some(2))))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(e) if e.code == 409),
        "{err}"
    );
    let forced = api
        .patch(
            "web",
            &agent.clone().force(),
            &Patch::Apply(deployment(Some(2))),
        )
        .await
        .unwrap();
    assert_eq!(forced.spec.as_ref().unwrap().replicas, Some(2));
    assert_eq!(replica_managers(&forced), ["plinth-agent"]);

    // Scaled again to 4, then the agent stops declaring replicas: they stay at 4.
    api.patch_scale(
        "web",
        &team_b,
        &Patch::Merge(json!({"spec": {"replicas": 4}})),
    )
    .await
    .unwrap();
    let given_up = api
        .patch("web", &agent, &Patch::Apply(deployment(None)))
        .await
        .unwrap();
    assert_eq!(given_up.spec.as_ref().unwrap().replicas, Some(4));
    assert_eq!(replica_managers(&given_up), ["team-b"]);

    // PUT with a stale resourceVersion is a conflict; a negative count is refused by field.
    let mut stale = serde_json::to_value(api.get_scale("web").await.unwrap()).unwrap();
    stale["metadata"]["resourceVersion"] = json!("1");
    stale["spec"]["replicas"] = json!(3);
    let uri = "/apis/apps/v1/namespaces/default/deployments/web/scale";
    let err = raw(&client, "PUT", uri, "application/json", stale.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(e) if e.code == 409),
        "{err}"
    );
    stale["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    stale["spec"]["replicas"] = json!(-1);
    let err = raw(&client, "PUT", uri, "application/json", stale)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(e) if e.code == 422 && e.message.contains("spec.replicas")),
        "{err}"
    );

    // A kind without replicas has no scale subresource.
    let err = raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/configmaps/x/scale",
        "",
        json!(null),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(e) if e.code == 404),
        "{err}"
    );
}

#[tokio::test]
async fn a_crd_with_a_scale_subresource_is_scaled_at_its_paths() {
    let ts = TestServer::start().await.unwrap();
    let client = ts.client();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "pools.example.test"},
        "spec": {"group": "example.test", "scope": "Namespaced",
            "names": {"plural": "pools", "singular": "pool", "kind": "Pool", "listKind": "PoolList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size",
                    "statusReplicasPath": ".status.ready", "labelSelectorPath": ".status.selector"}}}]}});
    raw(
        &client,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "application/json",
        crd,
    )
    .await
    .unwrap();
    let base = "/apis/example.test/v1/namespaces/default/pools";
    let pool = json!({"apiVersion": "example.test/v1", "kind": "Pool", "metadata": {"name": "p"}, "spec": {"size": 1, "flavour": "x"}});
    raw(&client, "POST", base, "application/json", pool)
        .await
        .unwrap();
    let disc = raw(&client, "GET", "/apis/example.test/v1", "", json!(null))
        .await
        .unwrap();
    assert!(
        disc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "pools/scale"),
        "{disc}"
    );
    let s = raw(
        &client,
        "PATCH",
        &format!("{base}/p/scale"),
        "application/merge-patch+json",
        json!({"spec": {"replicas": 3}}),
    )
    .await
    .unwrap();
    assert_eq!(s["spec"]["replicas"], 3);
    assert_eq!(s["status"]["replicas"], 0);
    let p = raw(&client, "GET", &format!("{base}/p"), "", json!(null))
        .await
        .unwrap();
    assert_eq!(p["spec"], json!({"size": 3, "flavour": "x"}));
}

#[tokio::test]
async fn kubectl_scale_works() {
    if Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_err()
    {
        println!("SKIPPED: kubectl not found on PATH");
        return;
    }
    let ts = TestServer::start_https().await.unwrap();
    let api: Api<Deployment> = Api::namespaced(ts.client(), "default");
    api.patch(
        "web",
        &PatchParams::apply("plinth-agent"),
        &Patch::Apply(deployment(Some(2))),
    )
    .await
    .unwrap();
    let kc = ts.kubeconfig().unwrap();
    let home = ts.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("kubectl")
            .args(["scale", "deployment/web", "--replicas=5", "-n", "default"])
            .env("KUBECONFIG", &kc)
            .env("HOME", &home)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        api.get("web").await.unwrap().spec.unwrap().replicas,
        Some(5)
    );
}
