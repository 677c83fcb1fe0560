//! A compound Promise's requirement is resolved through the required Promise's
//! PromiseRevisions: it stays installed across an upgrade of the required Promise while
//! the pinned revision exists, and when that revision is deleted the compound turns
//! Unavailable ("not installed at the specified version") and holds new requests until
//! the requirement is met again; a request held by an Unavailable Promise without a
//! resource workflow is Reconciled once the Promise recovers.

use crate::placement_support;

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use placement_support::{start, wait_for};
use plinth_controllers::promise;
use serde_json::{Value, json};

fn condition(o: &DynamicObject, type_: &str) -> Option<String> {
    o.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .and_then(|c| c["status"].as_str().map(String::from))
}

fn requirement_state(o: &DynamicObject) -> String {
    o.data["status"]["requiredPromises"][0]["state"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn plain(name: &str, version: &str) -> Value {
    json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Promise",
        "metadata": {"name": name, "labels": {"kratix.io/promise-version": version}}, "spec": {}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_pinned_revision_makes_the_compound_unavailable_and_holds_requests() {
    let env = start().await;
    tokio::spawn(promise::run(env.ctx.clone()));
    let promises: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &plinth_controllers::support::resources::promise_resource(),
    );
    let revisions: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("platform.kratix.io", "v1alpha1", "PromiseRevision"),
            "promiserevisions",
        ),
    );
    let pp = PostParams::default();
    promises
        .create(&pp, &serde_json::from_value(plain("db", "v1.0.0")).unwrap())
        .await
        .unwrap();
    let old_rev = plinth_api::names::promise_revision_name("db", "v1.0.0");
    wait_for("db v1.0.0 revision", || async {
        revisions.get_opt(&old_rev).await.unwrap().is_some()
    })
    .await;
    // Upgrade db: v1.0.0 is no longer the installed version, but its revision exists.
    promises
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"kratix.io/promise-version": "v1.1.0"}}})),
        )
        .await
        .unwrap();
    let new_rev = plinth_api::names::promise_revision_name("db", "v1.1.0");
    wait_for("db v1.1.0 revision", || async {
        revisions.get_opt(&new_rev).await.unwrap().is_some()
    })
    .await;

    let app = json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Promise",
    "metadata": {"name": "app", "labels": {"kratix.io/promise-version": "v1"}},
    "spec": {
        "requiredPromises": [{"name": "db", "version": "v1.0.0"}],
        "api": {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "apps.example.test"},
            "spec": {"group": "example.test", "scope": "Namespaced",
                "names": {"kind": "App", "plural": "apps", "singular": "app"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}},
        "workflows": {"resource": {"configure": [{"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Pipeline",
            "metadata": {"name": "make"},
            "spec": {"containers": [{"name": "step", "image": "busybox", "command": ["true"]}]}}]}},
    }});
    promises
        .create(&pp, &serde_json::from_value(app).unwrap())
        .await
        .unwrap();
    wait_for("app Available with db v1.0.0 installed", || async {
        let a = promises.get("app").await.unwrap();
        condition(&a, "Available").as_deref() == Some("True")
            && requirement_state(&a) == "Requirement installed"
    })
    .await;

    // The pinned revision goes; nothing else about db changes.
    revisions
        .delete(&old_rev, &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        "app Unavailable after its pinned revision was deleted",
        || async {
            let a = promises.get("app").await.unwrap();
            a.data["status"]["status"] == "Unavailable"
                && condition(&a, "RequirementsFulfilled").as_deref() == Some("False")
                && requirement_state(&a).contains("not installed at the specified version")
        },
    )
    .await;

    // A new request is held: no Job while the requirement is unmet.
    let apps: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("example.test", "v1", "App"),
            "apps",
        ),
    );
    apps.create(&pp, &serde_json::from_value(json!({"apiVersion": "example.test/v1", "kind": "App", "metadata": {"name": "a1"}, "spec": {}})).unwrap())
        .await
        .unwrap();
    wait_for("a1 held", || async {
        apps.get("a1")
            .await
            .is_ok_and(|r| condition(&r, "PromiseAvailable").as_deref() == Some("False"))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let run = jobs
        .list(&ListParams::default().labels("kratix.io/resource-name=a1"))
        .await
        .unwrap();
    assert!(run.items.is_empty(), "a Job ran for a held request");

    // db back at v1.0.0: the revision exists again, app is Available and a1 runs.
    promises
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"kratix.io/promise-version": "v1.0.0"}}})),
        )
        .await
        .unwrap();
    wait_for("a1's Job once the requirement is met again", || async {
        !jobs
            .list(&ListParams::default().labels("kratix.io/resource-name=a1"))
            .await
            .unwrap()
            .items
            .is_empty()
    })
    .await;
}

/// A Promise with no resource configure workflow, Unavailable while its requirement is
/// missing, given a request, then made Available: the request is Reconciled by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_a_workflow_is_reconciled_once_its_promise_recovers() {
    let env = start().await;
    tokio::spawn(promise::run(env.ctx.clone()));
    let promises: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &plinth_controllers::support::resources::promise_resource(),
    );
    let pp = PostParams::default();
    let bare = json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Promise",
        "metadata": {"name": "bare", "labels": {"kratix.io/promise-version": "v1"}},
        "spec": {
            "requiredPromises": [{"name": "cache", "version": "v1"}],
            "api": {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "bares.example.test"},
                "spec": {"group": "example.test", "scope": "Namespaced",
                    "names": {"kind": "Bare", "plural": "bares", "singular": "bare"},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}}});
    promises
        .create(&pp, &serde_json::from_value(bare).unwrap())
        .await
        .unwrap();
    wait_for("bare Unavailable", || async {
        promises.get("bare").await.unwrap().data["status"]["status"] == "Unavailable"
    })
    .await;
    let bares: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("example.test", "v1", "Bare"),
            "bares",
        ),
    );
    wait_for("Bare API served", || async {
        bares.list(&ListParams::default()).await.is_ok()
    })
    .await;
    bares
        .create(&pp, &serde_json::from_value(json!({"apiVersion": "example.test/v1", "kind": "Bare", "metadata": {"name": "b1"}, "spec": {}})).unwrap())
        .await
        .unwrap();
    wait_for("b1 held", || async {
        bares
            .get("b1")
            .await
            .is_ok_and(|r| condition(&r, "PromiseAvailable").as_deref() == Some("False"))
    })
    .await;
    promises
        .create(&pp, &serde_json::from_value(plain("cache", "v1")).unwrap())
        .await
        .unwrap();
    wait_for("b1 Reconciled after the Promise recovered", || async {
        bares
            .get("b1")
            .await
            .is_ok_and(|r| condition(&r, "Reconciled").as_deref() == Some("True"))
    })
    .await;
}
