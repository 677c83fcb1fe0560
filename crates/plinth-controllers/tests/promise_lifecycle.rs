//! Promise and resource-request lifecycle against the embedded API server.
//! Jobs are completed by the test itself here, standing in for the runner,
//! so these tests pin down the controllers' decisions; the runner's own tests and the
//! end-to-end tests run real pipelines.

use crate::placement_support;

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use placement_support::{SILENCE, start, wait_event, wait_for};
use plinth_api::constants::events as ev;
use plinth_controllers::promise;
use serde_json::{Value, json};

fn promise_api(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &plinth_controllers::support::resources::promise_resource(),
    )
}

fn widget_resource(version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.test", version, "Widget"),
        "widgets",
    )
}

fn pipeline(name: &str) -> Value {
    json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "step", "image": "busybox", "command": ["sh", "-c", "true"]}]},
    })
}

fn widget_promise(name: &str, resource_configure: Vec<Value>) -> Value {
    json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Promise",
        "metadata": {"name": name, "labels": {"kratix.io/promise-version": "v1"}},
        "spec": {
            "api": {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": "widgets.example.test"},
                "spec": {
                    "group": "example.test",
                    "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
                    "scope": "Namespaced",
                    "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                        "type": "object",
                        "properties": {"spec": {"type": "object", "properties": {"size": {"type": "string"}}}},
                    }}}],
                },
            },
            "workflows": {"resource": {"configure": resource_configure}},
        },
    })
}

async fn create(api: &Api<DynamicObject>, v: Value) -> DynamicObject {
    api.create(&PostParams::default(), &serde_json::from_value(v).unwrap())
        .await
        .expect("create")
}

async fn get_status(api: &Api<DynamicObject>, name: &str) -> Value {
    api.get(name)
        .await
        .map(|o| o.data["status"].clone())
        .unwrap_or(Value::Null)
}

fn condition(status: &Value, type_: &str) -> Option<(String, String, String)> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            (
                c["status"].as_str().unwrap_or_default().to_string(),
                c["reason"].as_str().unwrap_or_default().to_string(),
                c["message"].as_str().unwrap_or_default().to_string(),
            )
        })
}

async fn wait_condition(api: &Api<DynamicObject>, name: &str, type_: &str, status: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..300 {
        last = get_status(api, name).await;
        if condition(&last, type_).is_some_and(|c| c.0 == status) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{name}: condition {type_} never became {status}; status: {last:#}");
}

async fn jobs(client: &Client, ns: &str, selector: &str) -> Vec<Job> {
    let mut items = Api::<Job>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(selector))
        .await
        .unwrap()
        .items;
    items.sort_by_key(|j| {
        j.annotations()
            .get("plinth.dev/workflow-run")
            .cloned()
            .unwrap_or_default()
            + &j.labels()["kratix.io/pipeline-name"]
    });
    items
}

async fn wait_jobs(client: &Client, ns: &str, selector: &str, n: usize) -> Vec<Job> {
    for _ in 0..300 {
        let j = jobs(client, ns, selector).await;
        if j.len() >= n {
            return j;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "fewer than {n} Jobs matching {selector} in {ns}: {:?}",
        jobs(client, ns, selector)
            .await
            .iter()
            .map(|j| j.name_any())
            .collect::<Vec<_>>()
    );
}

/// Marks a Job finished as the Job controller would.
async fn finish_job(client: &Client, job: &Job, ok: bool) {
    let api: Api<Job> = Api::namespaced(client.clone(), &job.namespace().unwrap());
    let (t, field) = if ok {
        ("Complete", "succeeded")
    } else {
        ("Failed", "failed")
    };
    let patch = json!({"status": {field: 1, "conditions": [{"type": t, "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    api.patch_status(
        &job.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .expect("job status");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promise_with_api_becomes_available_and_serves_requests() {
    let env = start().await;
    tokio::spawn(promise::run(env.ctx.clone()));
    let promises = promise_api(&env.client);
    create(&promises, widget_promise("widget", vec![])).await;

    let status = wait_condition(&promises, "widget", "Available", "True").await;
    assert_eq!(status["status"], "Available");
    assert_eq!(status["kind"], "Widget");
    assert_eq!(status["apiVersion"], "example.test/v1");
    assert_eq!(status["version"], "v1");
    assert_eq!(
        condition(&status, "Available").unwrap().1,
        "PromiseAvailable"
    );

    let p = promises.get("widget").await.unwrap();
    assert_eq!(
        p.finalizers(),
        [
            "kratix.io/resource-request-cleanup",
            "kratix.io/dynamic-controller-dependant-resources-cleanup",
            "kratix.io/api-crd-cleanup",
            "kratix.io/dependencies-cleanup",
            "kratix.io/workflows-cleanup",
            "kratix.io/revision-cleanup",
        ]
    );
    let crd = Api::<CustomResourceDefinition>::all(env.client.clone())
        .get("widgets.example.test")
        .await
        .unwrap();
    assert_eq!(crd.labels()["kratix.io/promise-name"], "widget");
    let revisions: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("platform.kratix.io", "v1alpha1", "PromiseRevision"),
            "promiserevisions",
        ),
    );
    let revs = revisions
        .list(&ListParams::default().labels("kratix.io/promise-name=widget"))
        .await
        .unwrap()
        .items;
    assert_eq!(revs.len(), 1);
    assert_eq!(revs[0].data["spec"]["version"], "v1");

    // A request with no pipelines is reconciled straight away.
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), "default", &widget_resource("v1"));
    create(&widgets, json!({"apiVersion": "example.test/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": "s"}})).await;
    let status = wait_condition(&widgets, "w1", "Reconciled", "True").await;
    assert_eq!(status["observedGeneration"], 1);
    let w = widgets.get("w1").await.unwrap();
    assert_eq!(w.labels()["kratix.io/promise-name"], "widget");
    assert!(w.finalizers().iter().any(|f| f == "kratix.io/work-cleanup"));

    // A new version: its revision is the latest (status.latest, kubectl's LATEST column),
    // the previous one no longer is.
    assert_eq!(
        revisions.get(&revs[0].name_any()).await.unwrap().data["status"]["latest"],
        true
    );
    promises
        .patch(
            "widget",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"kratix.io/promise-version": "v2"}}})),
        )
        .await
        .unwrap();
    wait_for("status.latest moves to the v2 revision", || async {
        let revs = revisions
            .list(&ListParams::default().labels("kratix.io/promise-name=widget"))
            .await
            .unwrap()
            .items;
        let latest = |v: &str| {
            revs.iter()
                .find(|r| r.data["spec"]["version"] == v)
                .map(|r| r.data["status"]["latest"].clone())
        };
        revs.len() == 2 && latest("v2") == Some(json!(true)) && latest("v1") == Some(json!(false))
    })
    .await;
    env.server.assert_settled_silent(SILENCE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_pipelines_run_serially_and_a_failure_stops_the_workflow() {
    let env = start().await;
    tokio::spawn(promise::run(env.ctx.clone()));
    let promises = promise_api(&env.client);
    create(
        &promises,
        widget_promise("widget", vec![pipeline("first"), pipeline("second")]),
    )
    .await;
    wait_condition(&promises, "widget", "Available", "True").await;

    let widgets: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), "default", &widget_resource("v1"));
    create(&widgets, json!({"apiVersion": "example.test/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": "s"}})).await;
    let sel = "kratix.io/promise-name=widget,kratix.io/resource-name=w1";
    let first = wait_jobs(&env.client, "default", sel, 1).await;
    assert_eq!(first.len(), 1);
    let job = &first[0];
    // Kratix's Job shape.
    let labels = job.labels();
    assert_eq!(labels["kratix.io/pipeline-name"], "first");
    assert_eq!(labels["kratix.io/workflow-type"], "resource");
    assert_eq!(labels["kratix.io/workflow-action"], "configure");
    assert_eq!(labels["app.kubernetes.io/managed-by"], "Kratix");
    assert!(labels.contains_key("kratix.io/hash"));
    assert!(job.name_any().len() <= 63 && job.name_any().starts_with("kratix-widget-w1-first"));
    let pod = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    let init: Vec<_> = pod
        .init_containers
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(init, ["reader", "step", "work-writer"]);
    assert_eq!(pod.containers[0].name, "status-writer");
    assert_eq!(
        pod.service_account_name.as_deref(),
        Some("widget-resource-configure-first")
    );
    let env_names: Vec<_> = pod.init_containers.as_ref().unwrap()[1]
        .env
        .as_ref()
        .unwrap()
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(
        &env_names[..3],
        [
            "KRATIX_WORKFLOW_ACTION",
            "KRATIX_WORKFLOW_TYPE",
            "KRATIX_PROMISE_NAME"
        ]
    );
    let status = get_status(&widgets, "w1").await;
    assert_eq!(
        condition(&status, "ConfigureWorkflowCompleted").unwrap().1,
        "PipelinesInProgress"
    );
    assert_eq!(
        status["kratix"]["workflows"]["pipelines"][0]["phase"],
        "Running"
    );
    assert_eq!(
        status["kratix"]["workflows"]["pipelines"][1]["phase"],
        "Pending"
    );

    // The second pipeline starts only when the first has finished.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(jobs(&env.client, "default", sel).await.len(), 1);
    finish_job(&env.client, job, true).await;
    let both = wait_jobs(&env.client, "default", sel, 2).await;
    let second = both
        .iter()
        .find(|j| j.labels()["kratix.io/pipeline-name"] == "second")
        .expect("second pipeline Job");
    let last_env = &second
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .env
        .as_ref()
        .unwrap()[0];
    assert_eq!(
        (last_env.name.as_str(), last_env.value.as_deref()),
        ("IS_LAST_PIPELINE", Some("true"))
    );

    // A failing second pipeline fails the workflow with Kratix's condition.
    finish_job(&env.client, second, false).await;
    let status = wait_condition(&widgets, "w1", "Reconciled", "False").await;
    let c = condition(&status, "ConfigureWorkflowCompleted").unwrap();
    assert_eq!(
        (c.0.as_str(), c.1.as_str(), c.2.as_str()),
        (
            "False",
            "ConfigureWorkflowFailed",
            "A Configure Pipeline has failed: second"
        )
    );
    assert_eq!(status["workflowsFailed"], 1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        jobs(&env.client, "default", sel).await.len(),
        2,
        "nothing runs after a failure"
    );

    // Editing the request restarts from the first pipeline, exactly once.
    widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"size": "m"}})),
        )
        .await
        .unwrap();
    let all = wait_jobs(&env.client, "default", sel, 3).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let all_after = jobs(&env.client, "default", sel).await;
    assert_eq!(
        all_after.len(),
        3,
        "one new Job per request change: {:?}",
        all_after.iter().map(|j| j.name_any()).collect::<Vec<_>>()
    );
    let newest = all
        .iter()
        .find(|j| j.labels()["kratix.io/hash"] != job.labels()["kratix.io/hash"])
        .unwrap();
    assert_eq!(newest.labels()["kratix.io/pipeline-name"], "first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_job_is_never_killed_by_a_change() {
    let env = start().await;
    tokio::spawn(promise::run(env.ctx.clone()));
    let promises = promise_api(&env.client);
    create(&promises, widget_promise("widget", vec![pipeline("slow")])).await;
    wait_condition(&promises, "widget", "Available", "True").await;
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), "default", &widget_resource("v1"));
    create(&widgets, json!({"apiVersion": "example.test/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": "s"}})).await;
    let sel = "kratix.io/promise-name=widget,kratix.io/resource-name=w1";
    let running = wait_jobs(&env.client, "default", sel, 1).await.remove(0);

    // Edit twice while the Job runs; nothing new starts and the Job is untouched.
    for size in ["m", "l"] {
        widgets
            .patch(
                "w1",
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"size": size}})),
            )
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    let now = jobs(&env.client, "default", sel).await;
    assert_eq!(now.len(), 1);
    assert_ne!(now[0].spec.as_ref().unwrap().suspend, Some(true));
    finish_job(&env.client, &running, true).await;
    let after = wait_jobs(&env.client, "default", sel, 2).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        jobs(&env.client, "default", sel).await.len(),
        2,
        "exactly one new run: {:?}",
        after.iter().map(|j| j.name_any()).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_promises_hold_requests_until_installed_at_the_right_version() {
    let env = start().await;
    tokio::spawn(promise::run(env.ctx.clone()));
    let promises = promise_api(&env.client);
    let mut app = widget_promise("app", vec![]);
    app["spec"]["requiredPromises"] =
        json!([{"name": "db", "version": "v1"}, {"name": "ingress", "version": "v1"}]);
    create(&promises, app).await;
    let status = wait_condition(&promises, "app", "RequirementsFulfilled", "False").await;
    assert_eq!(status["status"], "Unavailable");
    assert!(
        status["requiredPromises"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["state"] == "Requirement not installed")
    );
    let (type_, by, _) = wait_event(
        &env.client,
        "default",
        "app",
        ev::REQUIREMENTS_NOT_INSTALLED,
    )
    .await;
    assert_eq!(
        (type_.as_str(), by.as_str()),
        ("Normal", ev::PROMISE_CONTROLLER)
    );

    // A request waits while the Promise is unavailable.
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), "default", &widget_resource("v1"));
    wait_for("widget API served", || async {
        widgets.list(&ListParams::default()).await.is_ok()
    })
    .await;
    create(&widgets, json!({"apiVersion": "example.test/v1", "kind": "Widget", "metadata": {"name": "r1"}, "spec": {}})).await;
    let rr = wait_condition(&widgets, "r1", "PromiseAvailable", "False").await;
    assert_eq!(rr["message"], "Pending");

    let plain = |name: &str, version: &str| json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Promise", "metadata": {"name": name, "labels": {"kratix.io/promise-version": version}}, "spec": {}});
    create(&promises, plain("db", "v1")).await;
    create(&promises, plain("ingress", "v2")).await;
    wait_condition(&promises, "ingress", "Available", "True").await;
    let mut status = Value::Null;
    for _ in 0..100 {
        status = get_status(&promises, "app").await;
        let states: Vec<_> = status["requiredPromises"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["state"].as_str().unwrap().to_string())
            .collect();
        if states[0] == "Requirement installed"
            && states[1].starts_with("Requirement not installed at the specified version")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let msg = condition(&status, "RequirementsFulfilled").unwrap().2;
    assert!(
        msg.contains("ingress@v1") && msg.contains("installed: v2"),
        "the mismatch is named: {msg}"
    );

    // Relabelling ingress to v1 makes app Available and the request proceeds, no restart.
    promises
        .patch(
            "ingress",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": {"kratix.io/promise-version": "v1"}}})),
        )
        .await
        .unwrap();
    wait_condition(&promises, "app", "Available", "True").await;
    let (type_, by, _) =
        wait_event(&env.client, "default", "app", ev::REQUIREMENTS_FULFILLED).await;
    assert_eq!(
        (type_.as_str(), by.as_str()),
        ("Normal", ev::PROMISE_CONTROLLER)
    );
    let (type_, _, _) = wait_event(&env.client, "default", "app", ev::AVAILABLE).await;
    assert_eq!(type_, "Normal");
    wait_condition(&widgets, "r1", "Reconciled", "True").await;
    let (type_, by, _) = wait_event(&env.client, "default", "r1", ev::RECONCILE_SUCCEEDED).await;
    assert_eq!(
        (type_.as_str(), by.as_str()),
        ("Normal", ev::RESOURCE_REQUEST_CONTROLLER)
    );
    let db = get_status(&promises, "db").await;
    assert_eq!(db["requiredBy"][0]["promise"]["name"], "app");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_promise_removes_requests_rbac_and_crd_in_order() {
    let env = start().await;
    tokio::spawn(promise::run(env.ctx.clone()));
    let promises = promise_api(&env.client);
    create(&promises, widget_promise("widget", vec![pipeline("first")])).await;
    wait_condition(&promises, "widget", "Available", "True").await;
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), "default", &widget_resource("v1"));
    create(&widgets, json!({"apiVersion": "example.test/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {}})).await;
    let sel = "kratix.io/promise-name=widget,kratix.io/resource-name=w1";
    let job = wait_jobs(&env.client, "default", sel, 1).await.remove(0);
    finish_job(&env.client, &job, true).await;
    wait_for("the pipeline's ServiceAccount", || async {
        Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(env.client.clone(), "default")
            .get_opt("widget-resource-configure-first")
            .await
            .unwrap()
            .is_some()
    })
    .await;

    promises
        .delete("widget", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("Promise gone", || async {
        promises.get_opt("widget").await.unwrap().is_none()
    })
    .await;
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    assert!(
        crds.get_opt("widgets.example.test")
            .await
            .unwrap()
            .is_none(),
        "CRD removed"
    );
    let sa = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(
        env.client.clone(),
        "default",
    );
    assert!(
        sa.get_opt("widget-resource-configure-first")
            .await
            .unwrap()
            .is_none(),
        "pipeline RBAC removed"
    );
    let roles = Api::<k8s_openapi::api::rbac::v1::Role>::namespaced(env.client.clone(), "default");
    assert!(
        roles
            .list(&ListParams::default().labels("kratix.io/promise-name=widget"))
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(
        jobs(&env.client, "default", sel).await.is_empty(),
        "request Jobs removed"
    );
}

/// Two Promises naming one API: the second is refused on its status, never takes the
/// CRD over, and its deletion leaves the first's CRD and requests alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_promise_of_the_same_api_is_refused_and_its_deletion_deletes_nothing() {
    let env = start().await;
    tokio::spawn(promise::run(env.ctx.clone()));
    let promises = promise_api(&env.client);
    create(&promises, widget_promise("widget", vec![pipeline("first")])).await;
    wait_condition(&promises, "widget", "Available", "True").await;
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), "default", &widget_resource("v1"));
    create(&widgets, json!({"apiVersion": "example.test/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {}})).await;

    create(
        &promises,
        widget_promise("widget-copy", vec![pipeline("first")]),
    )
    .await;
    let status = wait_condition(&promises, "widget-copy", "ReconcileSucceeded", "False").await;
    let (_, _, message) = condition(&status, "ReconcileSucceeded").unwrap();
    assert!(
        message.contains("spec.api")
            && message.contains("widgets.example.test")
            && message.contains("is the API of Promise widget"),
        "names the field, the CRD and its Promise: {message}"
    );
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    let crd = crds.get("widgets.example.test").await.unwrap();
    assert_eq!(
        crd.labels()
            .get("kratix.io/promise-name")
            .map(String::as_str),
        Some("widget"),
        "the CRD stays the first Promise's"
    );
    let copy_jobs = "kratix.io/promise-name=widget-copy";
    assert!(
        jobs(&env.client, "default", copy_jobs).await.is_empty(),
        "no pipeline of the copy ran"
    );

    promises
        .delete("widget-copy", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the copy gone", || async {
        promises.get_opt("widget-copy").await.unwrap().is_none()
    })
    .await;
    assert!(
        crds.get_opt("widgets.example.test")
            .await
            .unwrap()
            .is_some(),
        "the first Promise's CRD kept"
    );
    assert!(
        widgets.get_opt("w1").await.unwrap().is_some(),
        "its request kept"
    );
    assert!(jobs(&env.client, "default", copy_jobs).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_follow_the_served_version_without_a_restart() {
    // The API adds v2 (served, storage) and stops serving v1.
    let env = start().await;
    tokio::spawn(promise::run(env.ctx.clone()));
    let promises = promise_api(&env.client);
    create(&promises, widget_promise("widget", vec![])).await;
    wait_condition(&promises, "widget", "Available", "True").await;

    let mut p = promises.get("widget").await.unwrap();
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "string"}}}}}});
    p.data["spec"]["api"]["spec"]["versions"] = json!([
        {"name": "v1", "served": false, "storage": false, "schema": schema},
        {"name": "v2", "served": true, "storage": true, "schema": schema},
    ]);
    promises
        .replace("widget", &PostParams::default(), &p)
        .await
        .unwrap();
    for _ in 0..100 {
        if get_status(&promises, "widget").await["apiVersion"] == "example.test/v2" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        get_status(&promises, "widget").await["apiVersion"],
        "example.test/v2"
    );

    let v2: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), "default", &widget_resource("v2"));
    create(&v2, json!({"apiVersion": "example.test/v2", "kind": "Widget", "metadata": {"name": "new"}, "spec": {"size": "s"}})).await;
    let status = wait_condition(&v2, "new", "Reconciled", "True").await;
    assert_eq!(status["observedGeneration"], 1);
}

/// A Promise whose only Work (its static dependencies) matches no Destination is not
/// "all works ready": `WorksSucceeded` names the unscheduled Work, and turns True once a
/// Destination appears and the Work is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unscheduled_dependency_work_is_named_in_works_succeeded() {
    let env = start().await;
    tokio::spawn(promise::run(env.ctx.clone()));
    let promises = promise_api(&env.client);
    create(
        &promises,
        json!({
            "apiVersion": "platform.kratix.io/v1alpha1",
            "kind": "Promise",
            "metadata": {"name": "deps-only"},
            "spec": {"dependencies": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "deps-only"}}]},
        }),
    )
    .await;
    let work = plinth_api::names::static_dependency_work_name("deps-only");
    wait_condition(&promises, "deps-only", "Available", "True").await;
    let mut last = None;
    for _ in 0..300 {
        let st = get_status(&promises, "deps-only").await;
        last = condition(&st, "WorksSucceeded");
        if last.as_ref().is_some_and(|c| c.1 == "WorksPending") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, _, message) = last.expect("WorksSucceeded set");
    assert_eq!(status, "Unknown");
    assert!(
        message.contains(&work),
        "the unscheduled Work {work} is named: {message}"
    );

    // A Destination appears: the Work is scheduled and written, and the Promise says so.
    env.git_store("default").await;
    env.create_destination(json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Destination",
        "metadata": {"name": "dev"},
        "spec": {"path": "dev", "stateStoreRef": {"kind": "GitStateStore", "name": "default"}},
    }))
    .await;
    let st = wait_condition(&promises, "deps-only", "WorksSucceeded", "True").await;
    assert_eq!(
        condition(&st, "WorksSucceeded").unwrap().1,
        "WorksSucceeded"
    );
    env.server.assert_settled_silent(SILENCE).await;
}

/// Lifting `kratix.io/paused` restarts the Promise's configure workflow from its first
/// pipeline (a new Job), then the Promise is Available again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unpausing_a_promise_reruns_its_configure_workflow() {
    let env = start().await;
    tokio::spawn(promise::run(env.ctx.clone()));
    let promises = promise_api(&env.client);
    let mut p = widget_promise("widget", vec![]);
    p["spec"]["workflows"]["promise"] = json!({"configure": [pipeline("setup")]});
    create(&promises, p).await;
    let sel = "kratix.io/promise-name=widget,kratix.io/workflow-type=promise";
    let ns = "kratix-platform-system";
    let first = wait_jobs(&env.client, ns, sel, 1).await;
    finish_job(&env.client, &first[0], true).await;
    wait_condition(&promises, "widget", "Available", "True").await;
    // (`ConfigureWorkflowCompleted` is the status-writer's, which these Jobs do not run.)
    for reason in [ev::REVISION_CREATED, ev::PIPELINE_STARTED] {
        let (type_, by, _) = wait_event(&env.client, "default", "widget", reason).await;
        assert_eq!(
            (type_.as_str(), by.as_str()),
            ("Normal", ev::PROMISE_CONTROLLER),
            "{reason}"
        );
    }

    let label = |v: Value| {
        let promises = promises.clone();
        async move {
            promises
                .patch(
                    "widget",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"labels": {"kratix.io/paused": v}}})),
                )
                .await
                .unwrap();
        }
    };
    label(json!("true")).await;
    let st = wait_condition(&promises, "widget", "Available", "False").await;
    assert_eq!(
        condition(&st, "Available").unwrap().1,
        "PausedReconciliation"
    );
    let (type_, by, _) =
        wait_event(&env.client, "default", "widget", ev::PAUSED_RECONCILIATION).await;
    assert_eq!(
        (type_.as_str(), by.as_str()),
        ("Warning", ev::PROMISE_CONTROLLER)
    );
    assert_eq!(
        jobs(&env.client, ns, sel).await.len(),
        1,
        "no Job while paused"
    );

    label(Value::Null).await;
    let all = wait_jobs(&env.client, ns, sel, 2).await;
    let new = all
        .iter()
        .find(|j| j.name_any() != first[0].name_any())
        .expect("a new Job");
    assert_eq!(new.labels()["kratix.io/pipeline-name"], "setup");
    finish_job(&env.client, new, true).await;
    wait_condition(&promises, "widget", "Available", "True").await;
    env.server.assert_settled_silent(SILENCE).await;
}

/// An error a reconcile meets that admission cannot catch (here the Promise's pipeline
/// namespace does not exist) is on the request: `ReconcileSucceeded=False` with the
/// error, and a Warning Event; once the cause is gone the condition turns True.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_reconcile_is_reported_on_the_request() {
    use k8s_openapi::api::core::v1::Namespace;
    let env = start().await;
    tokio::spawn(promise::run(env.ctx.clone()));
    let promises = promise_api(&env.client);
    let mut p = widget_promise("widget", vec![pipeline("first")]);
    p["spec"]["workflows"]["config"] = json!({"pipelineNamespace": "nowhere"});
    create(&promises, p).await;
    wait_condition(&promises, "widget", "Available", "True").await;
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), "default", &widget_resource("v1"));
    create(&widgets, json!({"apiVersion": "example.test/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": "s"}})).await;

    let status = wait_condition(&widgets, "w1", "ReconcileSucceeded", "False").await;
    let (_, reason, message) = condition(&status, "ReconcileSucceeded").unwrap();
    assert_eq!(reason, "ReconcileFailed");
    assert!(message.contains("nowhere"), "{message}");
    let (type_, _, note) = wait_event(&env.client, "default", "w1", "ReconcileFailed").await;
    assert_eq!(type_, "Warning");
    assert!(note.contains("nowhere"), "{note}");

    Api::<Namespace>::all(env.client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "nowhere"}})).unwrap(),
        )
        .await
        .unwrap();
    let status = wait_condition(&widgets, "w1", "ReconcileSucceeded", "True").await;
    assert_eq!(
        condition(&status, "ReconcileSucceeded").unwrap().1,
        "ReconcileSucceeded"
    );
}

/// A Destination `name` labelled `env: <env_label>` on the `default` Git store.
fn env_destination(name: &str, env_label: &str) -> Value {
    json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Destination",
           "metadata": {"name": name, "labels": {"env": env_label}},
           "spec": {"path": name, "stateStoreRef": {"kind": "GitStateStore", "name": "default"}}})
}

/// The controllers with a Git store, a Ready Destination `old` (`env: dev`) and the
/// Promise controller running.
async fn with_destination_old() -> (placement_support::Env, Api<DynamicObject>) {
    let env = start().await;
    env.git_store("default").await;
    env.create_destination(env_destination("old", "dev")).await;
    env.destination_ready("old").await;
    tokio::spawn(promise::run(env.ctx.clone()));
    let promises = promise_api(&env.client);
    (env, promises)
}

/// A request placed before its destination selectors changed stays where it is, and
/// says so: `WorksSucceeded=False/WorksMisplaced` naming the label that moves it and
/// `Reconciled=False/WorksMisplaced` ("Misplaced", not "Failing"). Labelling the request
/// `plinth.dev/reschedule=true` moves it to a matching Destination and the label goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misplaced_request_says_how_to_move_it_and_moves_when_labelled() {
    use placement_support::labels as label_map;
    let (env, promises) = with_destination_old().await;
    create(&promises, widget_promise("widget", vec![])).await;
    wait_condition(&promises, "widget", "Available", "True").await;
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), "default", &widget_resource("v1"));
    create(&widgets, json!({"apiVersion": "example.test/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": "s"}})).await;
    wait_condition(&widgets, "w1", "Reconciled", "True").await;

    // The request's Work, placed on `old`, whose labels then stop matching.
    let sel = vec![("promise", label_map(&[("env", "dev")]))];
    env.create_work(
        "default",
        "widget-w1",
        "widget",
        "w1",
        "configure",
        &[(".", sel, vec![("a.yaml", "a: 1\n")])],
    )
    .await;
    Api::<plinth_api::Work>::namespaced(env.client.clone(), "default")
        .patch(
            "widget-w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"kratix.io/work-type": "resource"}}})),
        )
        .await
        .unwrap();
    env.work_condition(
        "default",
        "widget-w1",
        "Ready",
        "True",
        "AllWorkplacementsScheduled",
    )
    .await;
    let placed = env.placements("default", "widget-w1").await[0].name_any();
    env.placement_ready("default", &placed).await;
    env.relabel_destination("old", json!({"env": "prod"})).await;
    env.create_destination(env_destination("new", "dev")).await;
    env.destination_ready("new").await;
    env.work_condition("default", "widget-w1", "Ready", "False", "Misplaced")
        .await;

    let status = wait_condition(&widgets, "w1", "WorksSucceeded", "False").await;
    let (_, reason, message) = condition(&status, "WorksSucceeded").unwrap();
    assert_eq!(reason, "WorksMisplaced");
    assert!(message.contains("destinationSelectors"), "{message}");
    assert!(message.contains("plinth.dev/reschedule=true"), "{message}");
    let (status_, reason, message) = condition(&status, "Reconciled").unwrap();
    assert_eq!(
        (status_.as_str(), reason.as_str(), message.as_str()),
        ("False", "WorksMisplaced", "Misplaced")
    );
    let placed_on = |wps: &[plinth_api::WorkPlacement]| -> Vec<String> {
        wps.iter()
            .map(|wp| wp.spec.target_destination_name.clone().unwrap_or_default())
            .collect()
    };
    assert_eq!(
        placed_on(&env.placements("default", "widget-w1").await),
        ["old"],
        "kept where it was"
    );

    widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"plinth.dev/reschedule": "true"}}})),
        )
        .await
        .unwrap();
    wait_for("the Work moves to the matching Destination", || async {
        placed_on(&env.placements("default", "widget-w1").await) == ["new"]
    })
    .await;
    let status = wait_condition(&widgets, "w1", "WorksSucceeded", "True").await;
    assert_eq!(condition(&status, "Reconciled").unwrap().0, "True");
    assert!(
        !widgets
            .get("w1")
            .await
            .unwrap()
            .labels()
            .contains_key("plinth.dev/reschedule")
    );
    let (type_, _, _) = wait_event(&env.client, "default", "w1", "WorksRescheduled").await;
    assert_eq!(type_, "Normal");
}

/// Retargeting a Promise (adding `destinationSelectors` after its dependencies were
/// placed) keeps the placed Work where it is and says so on the Promise; labelling the
/// Promise `plinth.dev/reschedule=true` removes the misplaced placement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retargeted_promise_reports_misplaced_dependencies_and_reschedules_them() {
    let (env, promises) = with_destination_old().await;
    let mut p = widget_promise("widget", vec![]);
    p["spec"]["dependencies"] =
        json!([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "widget-deps"}}]);
    create(&promises, p).await;
    wait_condition(&promises, "widget", "WorksSucceeded", "True").await;
    let works: Api<plinth_api::Work> = Api::all(env.client.clone());
    let dep = works
        .list(&ListParams::default().labels("kratix.io/promise-name=widget"))
        .await
        .unwrap()
        .items
        .remove(0);
    let ns = dep.namespace().unwrap();
    let placed_on = |wps: Vec<plinth_api::WorkPlacement>| -> Vec<String> {
        let mut d: Vec<String> = wps
            .iter()
            .map(|wp| wp.spec.target_destination_name.clone().unwrap_or_default())
            .collect();
        d.sort();
        d
    };
    wait_for("placed on old", || async {
        placed_on(env.placements(&ns, &dep.name_any()).await) == ["old"]
    })
    .await;

    env.create_destination(env_destination("new", "prod")).await;
    env.destination_ready("new").await;
    promises
        .patch(
            "widget",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"destinationSelectors": [{"matchLabels": {"env": "prod"}}]}}),
            ),
        )
        .await
        .unwrap();
    let status = wait_condition(&promises, "widget", "WorksSucceeded", "False").await;
    let (_, reason, message) = condition(&status, "WorksSucceeded").unwrap();
    assert_eq!(reason, "WorksMisplaced", "{message}");
    assert!(
        message.contains("label the promise plinth.dev/reschedule=true"),
        "{message}"
    );
    wait_for("kept on old, added on new", || async {
        placed_on(env.placements(&ns, &dep.name_any()).await) == ["new", "old"]
    })
    .await;

    promises
        .patch(
            "widget",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"plinth.dev/reschedule": "true"}}})),
        )
        .await
        .unwrap();
    wait_for("only on new", || async {
        placed_on(env.placements(&ns, &dep.name_any()).await) == ["new"]
    })
    .await;
    wait_condition(&promises, "widget", "WorksSucceeded", "True").await;
    assert!(
        !promises
            .get("widget")
            .await
            .unwrap()
            .labels()
            .contains_key("plinth.dev/reschedule")
    );
}
