//! The adapter roles against Plinth's embedded API server (through `kube::Client`, as on a
//! real cluster): work-creator create/update/find-by-labels/suspend, status-writer merge,
//! suspension label and conflict retry, reader output.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use plinth_api::{Work, WorkSpec};
use plinth_apiserver::testing::TestServer;
use plinth_pipeline::contract::ObjectRef;
use plinth_pipeline::reader::{ReaderArgs, run_reader};
use plinth_pipeline::status_writer::{StatusWriterArgs, run_status_writer};
use plinth_pipeline::work_creator::{
    WorkCreatorArgs, WorkOutcome, decode_content, run_work_creator,
};
use plinth_pipeline::{PipelineError, WorkflowType};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

async fn platform() -> TestServer {
    let ts = TestServer::start().await.expect("API server starts");
    let crds: Api<CustomResourceDefinition> = Api::all(ts.client());
    for crd in plinth_api::crds::all_crds() {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("Kratix CRD installs");
    }
    for ns in ["kratix-platform-system", "team-a"] {
        let nss: Api<Namespace> = Api::all(ts.client());
        let n: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        match nss.create(&PostParams::default(), &n).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("namespace {ns}: {e}"),
        }
    }
    ts
}

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn resource_args(root: &Path) -> WorkCreatorArgs {
    let mut a = WorkCreatorArgs::from_input_directory(
        root,
        "redis",
        "instance-configure",
        "team-a",
        WorkflowType::Resource,
    );
    a.resource_name = Some("team.alpha.orders.primary-db".into());
    a
}

#[tokio::test]
async fn work_creator_creates_then_updates_one_work() {
    let ts = platform().await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(&root.join("input/deployment.yaml"), "kind: Deployment\n");
    write(&root.join("input/dev/cm.yaml"), "kind: ConfigMap\n");
    write(
        &root.join("metadata/destination-selectors.yaml"),
        "- directory: dev\n  matchLabels: {env: dev}\n",
    );
    write(
        &root.join("kratix-system/promise-scheduling"),
        "- matchLabels: {region: eu}\n  source: promise\n",
    );

    let outcome = run_work_creator(ts.client(), resource_args(root))
        .await
        .unwrap();
    let WorkOutcome::Created { name } = outcome else {
        panic!("expected a new Work, got {outcome:?}")
    };
    assert_eq!(name, resource_args(root).work_name());
    let works: Api<Work> = Api::namespaced(ts.client(), "team-a");
    let w = works.get(&name).await.unwrap();
    let labels = w.metadata.labels.clone().unwrap();
    assert_eq!(labels["kratix.io/promise-name"], "redis");
    assert_eq!(labels["kratix.io/work-type"], "resource");
    assert_eq!(labels["kratix.io/pipeline-name"], "instance-configure");
    assert_eq!(
        labels["kratix.io/resource-name"],
        "team.alpha.orders.primary-db"
    );
    let groups = w.spec.workload_groups.clone().unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[1].id, "5058f1af8388633f609cadb75a75dc9d");
    let content = &groups[1].workloads.as_ref().unwrap()[0];
    assert_eq!(content.filepath, "deployment.yaml");
    assert_eq!(
        decode_content(&content.content).unwrap(),
        b"kind: Deployment\n"
    );
    assert_eq!(
        w.spec.resource_name.as_deref(),
        Some("team.alpha.orders.primary-db")
    );
    assert!(w.spec.last_execution_timestamp.is_some());

    // Second run with different output: same Work, updated in place.
    std::fs::remove_dir_all(root.join("input/dev")).unwrap();
    std::fs::remove_file(root.join("metadata/destination-selectors.yaml")).unwrap();
    write(
        &root.join("input/deployment.yaml"),
        "kind: Deployment\nreplicas: 2\n",
    );
    let outcome = run_work_creator(ts.client(), resource_args(root))
        .await
        .unwrap();
    assert_eq!(outcome, WorkOutcome::Updated { name: name.clone() });
    let all = works.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        all.items.len(),
        1,
        "exactly one Work per pipeline and request"
    );
    let groups = all.items[0].spec.workload_groups.clone().unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(
        decode_content(&groups[0].workloads.as_ref().unwrap()[0].content).unwrap(),
        b"kind: Deployment\nreplicas: 2\n"
    );
    assert!(all.items[0].metadata.generation.unwrap() > w.metadata.generation.unwrap());

    // Suspend: nothing is touched.
    write(
        &root.join("metadata/workflow-control.yaml"),
        "suspend: true\n",
    );
    write(
        &root.join("input/deployment.yaml"),
        "kind: Deployment\nreplicas: 3\n",
    );
    assert_eq!(
        run_work_creator(ts.client(), resource_args(root))
            .await
            .unwrap(),
        WorkOutcome::Skipped
    );
    let again = works.get(&name).await.unwrap();
    assert_eq!(
        again.metadata.resource_version,
        all.items[0].metadata.resource_version
    );
}

#[tokio::test]
async fn work_creator_finds_existing_work_by_labels_and_rejects_ambiguity() {
    let ts = platform().await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(&root.join("input/a.yaml"), "a: 1\n");
    let mut a = WorkCreatorArgs::from_input_directory(
        root,
        "redis",
        "promise-configure",
        "",
        WorkflowType::Promise,
    );
    a.promise_scheduling = None;
    let works: Api<Work> = Api::namespaced(ts.client(), "kratix-platform-system");
    // A Work created by Kratix (random name) carrying this pipeline's labels.
    let mut legacy = Work::new("redis-promise-configure-x7k2q", WorkSpec::default());
    legacy.metadata.labels = Some(a.work_labels());
    legacy.metadata.annotations = Some([("team".to_string(), "platform".to_string())].into());
    works.create(&PostParams::default(), &legacy).await.unwrap();
    let outcome = run_work_creator(ts.client(), a.clone()).await.unwrap();
    assert_eq!(
        outcome,
        WorkOutcome::Updated {
            name: "redis-promise-configure-x7k2q".into()
        }
    );
    let w = works.get("redis-promise-configure-x7k2q").await.unwrap();
    assert_eq!(
        w.spec.workload_groups.unwrap()[0]
            .workloads
            .as_ref()
            .unwrap()[0]
            .filepath,
        "a.yaml"
    );
    assert!(w.spec.resource_name.is_none());
    assert_eq!(
        w.metadata.annotations.unwrap()["team"],
        "platform",
        "other annotations are kept"
    );

    let mut dup = Work::new("redis-promise-configure-dup", WorkSpec::default());
    dup.metadata.labels = Some(a.work_labels());
    works.create(&PostParams::default(), &dup).await.unwrap();
    let e = run_work_creator(ts.client(), a).await.unwrap_err();
    assert!(matches!(e, PipelineError::Ambiguous(_)), "{e}");
    assert!(e.to_string().contains("redis-promise-configure-dup"), "{e}");
}

/// Installs a request CRD the way the Promise controller does and creates one request.
async fn request_object(ts: &TestServer) -> ObjectRef {
    let api = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "redises.marketplace.kratix.io"},
        "spec": {
            "group": "marketplace.kratix.io",
            "names": {"kind": "Redis", "plural": "redises", "singular": "redis"},
            "scope": "Namespaced",
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "string"}}}}}}}]
        }
    });
    let crd: CustomResourceDefinition =
        serde_json::from_value(plinth_api::request_crd::build_request_crd("redis", &api).unwrap())
            .unwrap();
    Api::<CustomResourceDefinition>::all(ts.client())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let obj = ObjectRef {
        group: "marketplace.kratix.io".into(),
        version: "v1alpha1".into(),
        kind: "Redis".into(),
        plural: "redises".into(),
        name: "r1".into(),
        namespace: Some("team-a".into()),
    };
    let rr: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "marketplace.kratix.io/v1alpha1", "kind": "Redis",
        "metadata": {"name": "r1", "namespace": "team-a"},
        "spec": {"size": "small"}
    }))
    .unwrap();
    let api = obj.api(ts.client());
    api.create(&PostParams::default(), &rr).await.unwrap();
    let status = json!({"status": {
        "message": "Pending",
        "endpoint": "old",
        "kratix": {"workflows": {"pipelines": [{"name": "instance-configure", "phase": "Running"}]}}
    }});
    api.patch_status("r1", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    obj
}

fn status_args(metadata: &Path, object: ObjectRef, last: bool) -> StatusWriterArgs {
    StatusWriterArgs {
        metadata_dir: metadata.to_path_buf(),
        object,
        pipeline_name: "instance-configure".into(),
        workflow_type: WorkflowType::Resource,
        is_last_pipeline: last,
        dry_run: false,
        max_conflict_retries: 3,
    }
}

#[tokio::test]
async fn status_writer_merges_completes_and_suspends() {
    let ts = platform().await;
    let obj = request_object(&ts).await;
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path();
    write(
        &meta.join("status.yaml"),
        "endpoint: db.example.test\nconnections: 3\n",
    );
    run_status_writer(ts.client(), status_args(meta, obj.clone(), true))
        .await
        .unwrap();
    let rr = plinth_pipeline::object::get(&obj, ts.client())
        .await
        .unwrap();
    let status = &rr.data["status"];
    assert_eq!(status["endpoint"], "db.example.test");
    assert_eq!(status["connections"], 3);
    assert_eq!(status["message"], "Resource requested");
    let done = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "ConfigureWorkflowCompleted")
        .unwrap();
    assert_eq!(done["status"], "True");
    assert_eq!(done["reason"], "PipelinesExecutedSuccessfully");

    // Retry request: label + pipeline state, no completion change.
    write(
        &meta.join("workflow-control.yaml"),
        "retryAfter: 10m\nmessage: waiting for quota\n",
    );
    std::fs::remove_file(meta.join("status.yaml")).unwrap();
    run_status_writer(ts.client(), status_args(meta, obj.clone(), true))
        .await
        .unwrap();
    let rr = plinth_pipeline::object::get(&obj, ts.client())
        .await
        .unwrap();
    assert_eq!(
        rr.metadata.labels.as_ref().unwrap()["kratix.io/workflow-suspended"],
        "true"
    );
    let p = &rr.data["status"]["kratix"]["workflows"]["pipelines"][0];
    assert_eq!(p["phase"], "Suspended");
    assert_eq!(p["message"], "waiting for quota");
    assert_eq!(p["attempts"], 1);
    assert!(p["nextRetryAt"].as_str().unwrap().ends_with('Z'));
    assert_eq!(
        rr.data["status"]["kratix"]["workflows"]["suspendedGeneration"],
        rr.metadata.generation.unwrap()
    );
    assert_eq!(
        rr.data["status"]["endpoint"], "db.example.test",
        "earlier keys kept"
    );

    // A `kratix` key from a pipeline is refused and nothing is written.
    std::fs::remove_file(meta.join("workflow-control.yaml")).unwrap();
    write(&meta.join("status.yaml"), "kratix:\n  workflows: {}\n");
    let before = plinth_pipeline::object::get(&obj, ts.client())
        .await
        .unwrap()
        .metadata
        .resource_version;
    let e = run_status_writer(ts.client(), status_args(meta, obj.clone(), true))
        .await
        .unwrap_err();
    assert!(matches!(e, PipelineError::ForbiddenStatus(_)), "{e}");
    assert_eq!(
        plinth_pipeline::object::get(&obj, ts.client())
            .await
            .unwrap()
            .metadata
            .resource_version,
        before
    );
}

#[tokio::test]
async fn status_writer_retries_on_conflict_and_keeps_the_concurrent_write() {
    use tower::ServiceExt as _;
    let ts = platform().await;
    let obj = request_object(&ts).await;
    let router = ts.router();
    let side_client = ts.client();
    let puts = Arc::new(AtomicUsize::new(0));
    let seen = puts.clone();
    let side_obj = obj.clone();
    // A client whose first status PUT loses a race: a "controller" writes status meanwhile
    // and the server answers 409, as a real API server would for the stale resourceVersion.
    let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let router = router.clone();
        let side_client = side_client.clone();
        let side_obj = side_obj.clone();
        let seen = seen.clone();
        async move {
            let is_status_put =
                req.method() == http::Method::PUT && req.uri().path().ends_with("/status");
            if is_status_put && seen.fetch_add(1, Ordering::SeqCst) == 0 {
                let patch = json!({"status": {"observedGeneration": 7, "fromController": "yes"}});
                side_obj
                    .api(side_client)
                    .patch_status(
                        &side_obj.name,
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await
                    .unwrap();
                let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409,
                    "message": "the object has been modified; please apply your changes to the latest version and try again"});
                let resp = http::Response::builder()
                    .status(409)
                    .header("content-type", "application/json")
                    .body(axum::body::Body::from(body.to_string()))
                    .unwrap();
                return Ok::<_, std::convert::Infallible>(resp);
            }
            router.oneshot(req).await
        }
    });
    let client = Client::new(svc, "default");
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join("status.yaml"),
        "endpoint: db.example.test\n",
    );
    run_status_writer(client, status_args(dir.path(), obj.clone(), false))
        .await
        .unwrap();
    assert_eq!(
        puts.load(Ordering::SeqCst),
        2,
        "one conflicted write, one retry"
    );
    let status: Value = plinth_pipeline::object::get(&obj, ts.client())
        .await
        .unwrap()
        .data["status"]
        .clone();
    assert_eq!(status["endpoint"], "db.example.test");
    assert_eq!(
        status["fromController"], "yes",
        "the concurrent write survives the re-merge"
    );
    assert_eq!(status["observedGeneration"], 7);

    // With no retries allowed the conflict is reported.
    puts.store(0, Ordering::SeqCst);
    let router = ts.router();
    let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let router = router.clone();
        async move {
            if req.method() == http::Method::PUT && req.uri().path().ends_with("/status") {
                let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409, "message": "conflict"});
                return Ok::<_, std::convert::Infallible>(
                    http::Response::builder()
                        .status(409)
                        .body(axum::body::Body::from(body.to_string()))
                        .unwrap(),
                );
            }
            router.oneshot(req).await
        }
    });
    let mut args = status_args(dir.path(), obj.clone(), false);
    args.max_conflict_retries = 2;
    let e = run_status_writer(Client::new(svc, "default"), args)
        .await
        .unwrap_err();
    assert!(matches!(e, PipelineError::Conflict(_)), "{e}");
}

#[tokio::test]
async fn reader_writes_the_full_object() {
    let ts = platform().await;
    let obj = request_object(&ts).await;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    let output = dir.path().join("output");
    let path = run_reader(
        ts.client(),
        ReaderArgs {
            input_dir: input.clone(),
            output_dir: Some(output.clone()),
            object: obj.clone(),
            dry_run: false,
        },
    )
    .await
    .unwrap();
    assert_eq!(path, input.join("object.yaml"));
    assert!(output.is_dir());
    let text = std::fs::read_to_string(&path).unwrap();
    let v: Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(v["kind"], "Redis");
    assert_eq!(v["metadata"]["name"], "r1");
    assert_eq!(v["spec"]["size"], "small");
    assert_eq!(v["status"]["endpoint"], "old");
}

#[tokio::test]
async fn status_writer_on_a_promise() {
    let ts = platform().await;
    let promise: plinth_api::Promise = serde_json::from_value(json!({
        "apiVersion": "platform.kratix.io/v1alpha1", "kind": "Promise",
        "metadata": {"name": "namespace"},
        "spec": {}
    }))
    .unwrap();
    let promises: Api<plinth_api::Promise> = Api::all(ts.client());
    promises
        .create(&PostParams::default(), &promise)
        .await
        .unwrap();
    promises
        .patch_status(
            "namespace",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"message": "Pending"}})),
        )
        .await
        .unwrap();
    let obj = ObjectRef::from_env_with(|k| {
        Some(
            match k {
                "KRATIX_OBJECT_GROUP" => "platform.kratix.io",
                "KRATIX_OBJECT_VERSION" => "v1alpha1",
                "KRATIX_OBJECT_KIND" => "Promise",
                "KRATIX_CRD_PLURAL" => "promises",
                "KRATIX_OBJECT_NAME" => "namespace",
                "KRATIX_CLUSTER_SCOPED" => "true",
                _ => return None,
            }
            .to_string(),
        )
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut args = status_args(dir.path(), obj, true);
    args.workflow_type = WorkflowType::Promise;
    args.pipeline_name = "promise-configure".into();
    run_status_writer(ts.client(), args).await.unwrap();
    let p = promises.get("namespace").await.unwrap();
    let status = p.status.unwrap();
    assert_eq!(status.message.as_deref(), Some("Promise configured"));
    let c = plinth_api::find_condition(&status.conditions, "ConfigureWorkflowCompleted").unwrap();
    assert_eq!(c.status, "True");
    assert_eq!(c.reason, "PipelinesExecutedSuccessfully");
}

#[tokio::test]
async fn reader_shows_dry_runs_the_real_request_with_the_proposed_spec() {
    let ts = platform().await;
    let real = request_object(&ts).await;
    let ephemeral: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "marketplace.kratix.io/v1alpha1", "kind": "Redis",
        "metadata": {"name": "kratix-dry-run-d1", "namespace": "team-a",
            "labels": {"kratix.io/dry-run": "true"},
            "annotations": {"kratix.io/dry-run-resource-name": "r1", "kratix.io/dry-run-resource-namespace": "team-a"}},
        "spec": {"size": "large"}
    }))
    .unwrap();
    real.api(ts.client())
        .create(&PostParams::default(), &ephemeral)
        .await
        .unwrap();
    let mut obj = real.clone();
    obj.name = "kratix-dry-run-d1".into();
    let dir = tempfile::tempdir().unwrap();
    let path = run_reader(
        ts.client(),
        ReaderArgs {
            input_dir: dir.path().to_path_buf(),
            output_dir: None,
            object: obj,
            dry_run: true,
        },
    )
    .await
    .unwrap();
    let v: Value = serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(v["metadata"]["name"], "r1");
    assert_eq!(v["spec"]["size"], "large");
    assert_eq!(v["status"]["endpoint"], "old");
}
