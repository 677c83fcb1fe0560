//! ResourceBindings and Promise upgrades against the embedded API server: every request
//! gets a binding, requests run with their bound revision's Promise spec, pinned requests
//! stay, failed upgrades do not oscillate, a manual reconciliation retries them. Jobs are
//! finished by the test itself, standing in for the runner; each version's pipeline runs
//! a different command, so a Job shows which revision it was built from.

use crate::placement_support;

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use placement_support::{SILENCE, start, start_with, wait_for};
use plinth_controllers::promise;
use serde_json::{Value, json};

fn promises(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &plinth_controllers::support::resources::promise_resource(),
    )
}

fn gadgets(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("example.test", "v1", "Gadget"),
            "gadgets",
        ),
    )
}

fn bindings(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        "default",
        &plinth_controllers::support::resources::binding_resource(),
    )
}

/// The `upgrades` Promise at `version`; its one resource pipeline echoes the version.
fn upgrades_promise(version: &str) -> Value {
    json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Promise",
        "metadata": {"name": "upgrades", "labels": {"kratix.io/promise-version": version}},
        "spec": {
            "api": {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": "gadgets.example.test"},
                "spec": {
                    "group": "example.test",
                    "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget"},
                    "scope": "Namespaced",
                    "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                        "type": "object",
                        "properties": {"spec": {"type": "object", "properties": {"size": {"type": "string"}}}},
                    }}}],
                },
            },
            "workflows": {"resource": {"configure": [{
                "apiVersion": "platform.kratix.io/v1alpha1",
                "kind": "Pipeline",
                "metadata": {"name": "instance"},
                "spec": {"containers": [{"name": "step", "image": "busybox", "command": ["sh", "-c", format!("echo {version}")]}]},
            }]}},
        },
    })
}

async fn apply_promise(client: &Client, version: &str) {
    let api = promises(client);
    let desired = upgrades_promise(version);
    if api.get_opt("upgrades").await.unwrap().is_none() {
        api.create(
            &PostParams::default(),
            &serde_json::from_value(desired).unwrap(),
        )
        .await
        .unwrap();
        return;
    }
    let patch = json!({"metadata": desired["metadata"], "spec": desired["spec"]});
    api.patch("upgrades", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

async fn create_gadget(client: &Client, name: &str, labels: Value) {
    gadgets(client)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "example.test/v1", "kind": "Gadget", "metadata": {"name": name, "labels": labels}, "spec": {"size": "s"}})).unwrap(),
        )
        .await
        .unwrap();
}

/// The request's configure Jobs, oldest run first.
async fn jobs_of(client: &Client, request: &str) -> Vec<Job> {
    let mut items = Api::<Job>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels(&format!(
            "kratix.io/promise-name=upgrades,kratix.io/resource-name={request},kratix.io/workflow-action=configure"
        )))
        .await
        .unwrap()
        .items;
    items.sort_by_key(|j| {
        j.annotations()
            .get("plinth.dev/workflow-run")
            .and_then(|r| r.parse::<u64>().ok())
            .unwrap_or(0)
    });
    items
}

/// The command the Job's user container runs (`echo <version>`).
fn command_of(job: &Job) -> String {
    let pod = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    let step = pod
        .init_containers
        .iter()
        .flatten()
        .find(|c| c.name == "step")
        .expect("user container");
    step.command.clone().unwrap_or_default().join(" ")
}

fn running(job: &Job) -> bool {
    job.status
        .as_ref()
        .is_none_or(|s| s.succeeded.unwrap_or(0) == 0 && s.failed.unwrap_or(0) == 0)
}

async fn finish(client: &Client, job: &Job, ok: bool) {
    let (t, field) = if ok {
        ("Complete", "succeeded")
    } else {
        ("Failed", "failed")
    };
    let patch = json!({"status": {field: 1, "conditions": [{"type": t, "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    Api::<Job>::namespaced(client.clone(), "default")
        .patch_status(
            &job.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .unwrap();
}

/// Waits for the request's Job running `echo <version>`, finishes it (succeeded when
/// `ok`), and keeps finishing the request's Jobs until none has run for a second: a
/// Promise change both moves the latest revision and labels every request to run again,
/// and the label may arrive after the run it asks for has started.
async fn finish_run(client: &Client, request: &str, version: &str, ok: bool) {
    let want = format!("sh -c echo {version}");
    let mut finished = 0;
    let mut quiet_since = tokio::time::Instant::now();
    let deadline = quiet_since + placement_support::CONVERGE;
    loop {
        let running: Vec<Job> = jobs_of(client, request)
            .await
            .into_iter()
            .filter(running)
            .collect();
        for j in &running {
            let mine = command_of(j) == want;
            finish(client, j, ok || !mine).await;
            finished += usize::from(mine);
        }
        if !running.is_empty() {
            quiet_since = tokio::time::Instant::now();
        }
        if finished > 0 && quiet_since.elapsed() > Duration::from_secs(1) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{request}: no Job for {version}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn binding_of(client: &Client, request: &str) -> Option<DynamicObject> {
    let mut found = bindings(client)
        .list(&ListParams::default().labels(&format!(
            "kratix.io/promise-name=upgrades,kratix.io/resource-name={request}"
        )))
        .await
        .unwrap()
        .items;
    assert!(found.len() <= 1, "{request}: more than one binding");
    found.pop()
}

fn upgrade_condition(binding: &DynamicObject) -> (String, String, String) {
    binding.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "UpgradeSucceeded")
        .map(|c| {
            (
                c["status"].as_str().unwrap_or_default().to_string(),
                c["reason"].as_str().unwrap_or_default().to_string(),
                c["message"].as_str().unwrap_or_default().to_string(),
            )
        })
        .unwrap_or_default()
}

/// Waits until the request's binding has applied `version` (and the request says so).
async fn wait_applied(client: &Client, request: &str, version: &str) {
    wait_for(&format!("{request} at {version}"), || async {
        let b = binding_of(client, request).await;
        let rr = gadgets(client).get(request).await.unwrap();
        b.is_some_and(|b| b.data["status"]["lastAppliedVersion"] == version)
            && rr.data["status"]["promiseVersion"] == version
    })
    .await;
}

async fn patch_binding_version(client: &Client, request: &str, version: &str) {
    let b = binding_of(client, request).await.unwrap();
    bindings(client)
        .patch(
            &b.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"version": version}})),
        )
        .await
        .unwrap();
}

async fn wait_latest(client: &Client, version: &str) {
    let revisions: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &plinth_controllers::support::resources::revision_resource(),
    );
    wait_for(&format!("revision {version} is latest"), || async {
        revisions
            .list(&ListParams::default().labels("kratix.io/promise-name=upgrades"))
            .await
            .unwrap()
            .items
            .iter()
            .any(|r| r.data["spec"]["version"] == version && r.data["status"]["latest"] == true)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bindings_pin_upgrade_and_hold_a_failed_version_until_retried() {
    let env = start().await;
    tokio::spawn(promise::run(env.ctx.clone()));
    let client = &env.client;
    apply_promise(client, "v1").await;
    wait_latest(client, "v1").await;

    // Every request gets a binding: labels mirrored, following the latest version.
    create_gadget(client, "one", json!({"team": "a"})).await;
    create_gadget(client, "two", json!({})).await;
    finish_run(client, "one", "v1", true).await;
    finish_run(client, "two", "v1", true).await;
    wait_applied(client, "one", "v1").await;
    wait_applied(client, "two", "v1").await;
    let one = binding_of(client, "one").await.unwrap();
    assert_eq!(
        one.name_any(),
        plinth_api::names::resource_binding_name("one", "upgrades")
    );
    assert_eq!(one.labels()["team"], "a");
    assert_eq!(one.data["spec"]["version"], "latest");
    assert_eq!(one.data["spec"]["promiseRef"]["name"], "upgrades");
    assert_eq!(
        one.data["spec"]["resourceRef"],
        json!({"name": "one", "namespace": "default"})
    );
    assert_eq!(
        gadgets(client).get("one").await.unwrap().data["status"]["resourceBindingVersion"],
        "latest"
    );
    // A label removed from the request goes from its binding too.
    gadgets(client)
        .patch(
            "one",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": null}}})),
        )
        .await
        .unwrap();
    wait_for("label removed from binding one", || async {
        !binding_of(client, "one")
            .await
            .unwrap()
            .labels()
            .contains_key("team")
    })
    .await;

    // Two is pinned to v1; a new version moves one and leaves two's workflow on v1.
    patch_binding_version(client, "two", "v1").await;
    apply_promise(client, "v2").await;
    wait_latest(client, "v2").await;
    finish_run(client, "one", "v2", true).await;
    wait_applied(client, "one", "v2").await;
    let one = binding_of(client, "one").await.unwrap();
    assert_eq!(
        upgrade_condition(&one),
        (
            "True".into(),
            "UpgradeComplete".into(),
            "Resource is at version v2".into()
        )
    );
    // The Promise's change re-runs two, with its pinned revision's spec.
    finish_run(client, "two", "v1", true).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        jobs_of(client, "two")
            .await
            .iter()
            .all(|j| command_of(j) == "sh -c echo v1")
    );
    assert_eq!(
        binding_of(client, "two").await.unwrap().data["status"]["lastAppliedVersion"],
        "v1"
    );

    // Patching two's binding moves it.
    patch_binding_version(client, "two", "latest").await;
    finish_run(client, "two", "v2", true).await;
    wait_applied(client, "two", "v2").await;

    // A failing version: one's binding stays on v2, names v3 as failed, and nothing
    // re-runs by itself.
    apply_promise(client, "v3").await;
    wait_latest(client, "v3").await;
    finish_run(client, "one", "v3", false).await;
    finish_run(client, "two", "v3", false).await;
    wait_for("one's upgrade to v3 failed", || async {
        let b = binding_of(client, "one").await.unwrap();
        upgrade_condition(&b).0 == "False"
    })
    .await;
    let one = binding_of(client, "one").await.unwrap();
    let (_, reason, message) = upgrade_condition(&one);
    assert_eq!(reason, "UpgradeFailed");
    assert!(message.contains("v3"), "{message}");
    assert_eq!(one.data["status"]["failedVersion"], "v3");
    assert_eq!(one.data["status"]["lastAppliedVersion"], "v2");
    assert_eq!(
        gadgets(client).get("one").await.unwrap().data["status"]["promiseVersion"],
        "v2"
    );
    let jobs_before = jobs_of(client, "one").await.len();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        jobs_of(client, "one").await.len(),
        jobs_before,
        "no new attempt by itself"
    );
    assert_eq!(
        upgrade_condition(&binding_of(client, "one").await.unwrap()).0,
        "False"
    );

    // The manual-reconciliation label on the binding retries once and is removed.
    let one = binding_of(client, "one").await.unwrap();
    bindings(client)
        .patch(
            &one.name_any(),
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {"kratix.io/manual-reconciliation": "true"}}}),
            ),
        )
        .await
        .unwrap();
    finish_run(client, "one", "v3", false).await;
    wait_for("retry failed again", || async {
        let b = binding_of(client, "one").await.unwrap();
        !b.labels().contains_key("kratix.io/manual-reconciliation")
            && upgrade_condition(&b).0 == "False"
            && b.data["status"]["failedVersion"] == "v3"
    })
    .await;
    assert_eq!(jobs_of(client, "one").await.len(), jobs_before + 1);

    // Binding two back on v2, whose outputs are still in place: the failed upgrade is over.
    patch_binding_version(client, "two", "v2").await;
    wait_for("two back on v2", || async {
        let b = binding_of(client, "two").await.unwrap();
        upgrade_condition(&b)
            == (
                "True".into(),
                "UpgradeComplete".into(),
                "Resource is at version v2".into(),
            )
            && b.data["status"].get("failedVersion").is_none()
    })
    .await;

    // Deleted bindings come back as they were (a recreated binding has no record of the
    // failed attempt, so one tries v3 again).
    for r in ["one", "two"] {
        let b = binding_of(client, r).await.unwrap();
        bindings(client)
            .delete(&b.name_any(), &DeleteParams::default())
            .await
            .unwrap();
    }
    wait_for("bindings recreated", || async {
        let one = binding_of(client, "one").await;
        let two = binding_of(client, "two").await;
        one.is_some_and(|b| b.data["spec"]["version"] == "latest")
            && two.is_some_and(|b| b.data["spec"]["version"] == "v2")
    })
    .await;
    finish_run(client, "one", "v3", false).await;

    // A binding created before its request is adopted, whatever its name.
    bindings(client)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "platform.kratix.io/v1alpha1",
                "kind": "ResourceBinding",
                "metadata": {"name": "custom-name", "labels": {"kratix.io/promise-name": "upgrades", "kratix.io/resource-name": "three"}},
                "spec": {"version": "v1", "promiseRef": {"name": "upgrades"}, "resourceRef": {"name": "three", "namespace": "default"}},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    create_gadget(client, "three", json!({})).await;
    finish_run(client, "three", "v1", true).await;
    wait_applied(client, "three", "v1").await;
    assert_eq!(
        binding_of(client, "three").await.unwrap().name_any(),
        "custom-name"
    );

    // Deleting a request deletes only its binding.
    gadgets(client)
        .delete("three", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("three and its binding gone", || async {
        gadgets(client).get_opt("three").await.unwrap().is_none()
            && binding_of(client, "three").await.is_none()
    })
    .await;
    assert!(binding_of(client, "one").await.is_some());
    env.server.assert_settled_silent(SILENCE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pinned_strategy_binds_new_requests_to_the_current_version() {
    let env = start_with(|c| c.resource_binding_version_strategy = "pinned".into()).await;
    tokio::spawn(promise::run(env.ctx.clone()));
    let client = &env.client;
    apply_promise(client, "v1").await;
    wait_latest(client, "v1").await;
    create_gadget(client, "one", json!({})).await;
    finish_run(client, "one", "v1", true).await;
    wait_applied(client, "one", "v1").await;
    assert_eq!(
        binding_of(client, "one").await.unwrap().data["spec"]["version"],
        "v1"
    );
    // A new version does not move it.
    apply_promise(client, "v2").await;
    wait_latest(client, "v2").await;
    finish_run(client, "one", "v1", true).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        jobs_of(client, "one")
            .await
            .iter()
            .all(|j| command_of(j) == "sh -c echo v1")
    );
    env.server.assert_settled_silent(SILENCE).await;
}
