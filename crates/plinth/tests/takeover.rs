//! Taking over from a running Kratix: `plinth operator` started on an API server whose
//! objects and state store Kratix made adopts them as they are. The fixture is an
//! installation Kratix left behind after one request went through: a Promise, its CRD and
//! PromiseRevision, a request with its ResourceBinding, the completed pipeline Job, the
//! Work and WorkPlacement (names with Kratix's random suffixes), and the Git repository
//! with the files and commits Kratix's writer made. Names, labels, finalizers, statuses,
//! hashes and file bytes follow Kratix's documented formats, written here literally
//! rather than by Plinth's code, so a drift in Plinth's names shows up as a re-run or a
//! commit.
//!
//! Once the operator has reconciled everything and settled: no Job was created, no file
//! was rewritten, no commit was made, the Work and WorkPlacement specs are untouched and
//! Kratix's finalizers are still in place. Changing the request's spec then runs its
//! workflow, which shows the operator was watching all along.

use crate::support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use support::*;

/// The Promise as its author wrote it (the pipeline's heredoc puts `<` and `>` in the spec,
/// which Go's JSON encoder escapes before hashing).
const PROMISE: &str = r#"
apiVersion: platform.kratix.io/v1alpha1
kind: Promise
metadata:
  name: appstack
  labels:
    kratix.io/promise-version: v1.0.0
spec:
  api:
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata:
      name: appstacks.takeover.example.com
    spec:
      group: takeover.example.com
      names:
        kind: AppStack
        plural: appstacks
        singular: appstack
      scope: Namespaced
      versions:
        - name: v1alpha1
          served: true
          storage: true
          schema:
            openAPIV3Schema:
              type: object
              properties:
                spec:
                  type: object
                  properties:
                    image:
                      type: string
                    replicas:
                      type: integer
  workflows:
    resource:
      configure:
        - apiVersion: platform.kratix.io/v1alpha1
          kind: Pipeline
          metadata:
            name: render
          spec:
            containers:
              - name: render
                image: busybox
                command: [sh, -c]
                args:
                  - |
                    cat > /kratix/output/configmap.yaml <<YAML
                    apiVersion: v1
                    kind: ConfigMap
                    metadata:
                      name: ${KRATIX_OBJECT_NAME}
                      namespace: default
                    data:
                      image: "$(sed -n 's/^ *image: *//p' /kratix/input/object.yaml | head -n1)"
                    YAML
"#;

/// `kratix.io/hash` of the request's Job: md5 of `<md5(promise spec)>-<md5(request spec)>`,
/// each marshalled as Go's `encoding/json` does (sorted keys, `<` as `\u003c`), the Promise
/// spec in the form Kratix's typed Promise gives it (its `workflows` block gains empty
/// `config` and `promise` parts).
const JOB_HASH: &str = "56a64bb75d73685370b905add0ef9b3b";
/// `<promise>-<md5("v1.0.0")[0:5]>`.
const REVISION: &str = "appstack-2888c";
/// `GenerateDeterministicObjectName("shop-appstack")`.
const BINDING: &str = "shop-appstack-ec322";
/// `GenerateObjectName(...)` names: a random five-character suffix each.
const JOB: &str = "kratix-appstack-shop-render-3f9c2";
const WORK: &str = "appstack-shop-render-7c1e4";
/// `<work>.<destination>-<md5(".")[0:5]>`.
const PLACEMENT: &str = "appstack-shop-render-7c1e4.local-5058f";
/// md5(".").
const GROUP_ID: &str = "5058f1af8388633f609cadb75a75dc9d";
const DONE_AT: &str = "2026-11-30T09:00:00Z";

/// What the request's pipeline wrote to `/kratix/output/configmap.yaml`.
const CONFIGMAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shop\n  namespace: default\ndata:\n  image: \"nginx:1.27\"\n";
const RESOURCE_FILE: &str = "local/resources/default/appstack/shop/render/5058f/configmap.yaml";
/// Kratix's canary documents (`sigs.k8s.io/yaml` of a typed Namespace and ConfigMap).
const CANARY_NAMESPACE: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  creationTimestamp: null\n  name: kratix-worker-system\nspec: {}\nstatus: {}\n";
const CANARY_CONFIGMAP: &str = "apiVersion: v1\ndata:\n  canary: this confirms your infrastructure is reading from Kratix state stores\nkind: ConfigMap\nmetadata:\n  creationTimestamp: null\n  name: kratix-info\n  namespace: kratix-worker-system\n";

const PROMISE_FINALIZERS: [&str; 6] = [
    "kratix.io/resource-request-cleanup",
    "kratix.io/dynamic-controller-dependant-resources-cleanup",
    "kratix.io/api-crd-cleanup",
    "kratix.io/dependencies-cleanup",
    "kratix.io/workflows-cleanup",
    "kratix.io/revision-cleanup",
];
const REQUEST_FINALIZERS: [&str; 4] = [
    "kratix.io/work-cleanup",
    "kratix.io/workflows-cleanup",
    "kratix.io/delete-workflows",
    "kratix.io/resource-binding-cleanup",
];

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": message,
           "lastTransitionTime": DONE_AT})
}

/// gzip + base64 of `text`, as Kratix's work-writer stores a workload.
fn compressed(text: &str) -> String {
    let mut child = Command::new("sh")
        .args(["-c", "gzip -cn | base64 -w0"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run gzip and base64");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// Commits `files` to `main` of the bare `repo` as Kratix's writer does (author Kratix,
/// message `Update from: <name>`); returns the new HEAD.
fn kratix_commit(repo: &Path, work: &Path, name: &str, files: &[(&str, &str)]) -> String {
    let run = |args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(work)
            .args(args)
            .output()
            .expect("run git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    if !work.exists() {
        let out = Command::new("git")
            .arg("clone")
            .arg(repo)
            .arg(work)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for (path, content) in files {
        let file = work.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, content).unwrap();
        run(&["add", path]);
    }
    run(&[
        "-c",
        "user.name=Kratix",
        "-c",
        "user.email=kratix@syntasso.io",
        "commit",
        "-m",
        &format!("Update from: {name}"),
        "--author=Kratix <kratix@syntasso.io>",
    ]);
    run(&["push", "origin", "HEAD:main"]);
    run(&["rev-parse", "HEAD"])
}

async fn patch_status(api: &Api<DynamicObject>, name: &str, status: Value) {
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await
    .unwrap_or_else(|e| panic!("status of {name}: {e}"));
}

fn finalizers(obj: &DynamicObject) -> BTreeSet<String> {
    obj.metadata
        .finalizers
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Builds the installation Kratix left behind; returns the state store's HEAD.
async fn kratix_installation(p: &Plinth, client: &kube::Client) -> String {
    // The state store as Kratix's writer left it: canaries of both Destinations, then the
    // request's file.
    let clone = p.dir.path().join("kratix-clone");
    kratix_commit(
        &p.repo(),
        &clone,
        "kratix-canary",
        &[
            (
                "local/dependencies/kratix-canary-namespace.yaml",
                CANARY_NAMESPACE,
            ),
            (
                "local/resources/kratix-canary-configmap.yaml",
                CANARY_CONFIGMAP,
            ),
            (
                "platform/dependencies/kratix-canary-namespace.yaml",
                CANARY_NAMESPACE,
            ),
            (
                "platform/resources/kratix-canary-configmap.yaml",
                CANARY_CONFIGMAP,
            ),
        ],
    );
    let head = kratix_commit(&p.repo(), &clone, PLACEMENT, &[(RESOURCE_FILE, CONFIGMAP)]);

    // The Promise, with the finalizers Kratix adds and the status it reports.
    let promises = promise_api(client);
    let mut promise: Value = serde_saphyr::from_str(PROMISE).unwrap();
    promise["metadata"]["finalizers"] = json!(PROMISE_FINALIZERS);
    let promise_uid = create(&promises, &promise).await.metadata.uid.unwrap();
    patch_status(
        &promises,
        "appstack",
        json!({
            "status": "Available", "version": "v1.0.0", "observedGeneration": 1,
            "kind": "AppStack", "apiVersion": "takeover.example.com/v1alpha1",
            "conditions": [
                condition("RequirementsFulfilled", "True", "RequirementsInstalled", "Requirements fulfilled"),
                condition("Available", "True", "PromiseAvailable", "Ready to fulfil resource requests"),
                condition("Reconciled", "True", "Reconciled", "Reconciled"),
            ],
        }),
    )
    .await;

    // The CRD Kratix installed from `spec.api`: a status subresource with an open schema.
    let mut crd = promise["spec"]["api"].clone();
    crd["metadata"]["labels"] = json!({"kratix.io/promise-name": "appstack"});
    crd["spec"]["versions"][0]["subresources"] = json!({"status": {}});
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"] =
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let crds = dynamic(
        client,
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        None,
    );
    create(&crds, &crd).await;

    let revisions = dynamic(
        client,
        "platform.kratix.io",
        "v1alpha1",
        "PromiseRevision",
        "promiserevisions",
        None,
    );
    create(
        &revisions,
        &json!({
            "apiVersion": "platform.kratix.io/v1alpha1", "kind": "PromiseRevision",
            "metadata": {
                "name": REVISION,
                "labels": {"kratix.io/promise-name": "appstack", "kratix.io/latest-revision": "true"},
                "finalizers": ["kratix.io/resource-request-cleanup"],
                "ownerReferences": [{"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Promise",
                    "name": "appstack", "uid": promise_uid, "controller": true, "blockOwnerDeletion": true}],
            },
            "spec": {"version": "v1.0.0", "promiseRef": {"name": "appstack"}, "promiseSpec": promise["spec"]},
        }),
    )
    .await;
    patch_status(&revisions, REVISION, json!({"latest": true})).await;

    // The request, reconciled.
    let requests = dynamic(
        client,
        "takeover.example.com",
        "v1alpha1",
        "AppStack",
        "appstacks",
        Some("default"),
    );
    wait_until(30, "the AppStack API served", || async {
        requests.list(&ListParams::default()).await.is_ok()
    })
    .await;
    let request_uid = create(
        &requests,
        &json!({
            "apiVersion": "takeover.example.com/v1alpha1", "kind": "AppStack",
            "metadata": {"name": "shop", "namespace": "default",
                "labels": {"kratix.io/promise-name": "appstack"},
                "finalizers": REQUEST_FINALIZERS},
            "spec": {"image": "nginx:1.27", "replicas": 2},
        }),
    )
    .await
    .metadata
    .uid
    .unwrap();
    patch_status(
        &requests,
        "shop",
        json!({
            "message": "Resource requested", "observedGeneration": 1,
            "workflows": 1, "workflowsSucceeded": 1, "workflowsFailed": 0,
            "promiseVersion": "v1.0.0", "resourceBindingVersion": "latest",
            "lastSuccessfulConfigureWorkflowTime": DONE_AT,
            "kratix": {"workflows": {"lastSuccessfulConfigureWorkflowTime": DONE_AT,
                "pipelines": [{"name": "render", "phase": "Succeeded", "lastTransitionTime": DONE_AT}]}},
            "conditions": [
                condition("ConfigureWorkflowCompleted", "True", "PipelinesExecutedSuccessfully", "Pipelines completed"),
                condition("WorksSucceeded", "True", "WorksSucceeded", "All works associated with this resource are ready"),
                condition("Reconciled", "True", "Reconciled", "Reconciled"),
            ],
        }),
    )
    .await;

    let bindings = dynamic(
        client,
        "platform.kratix.io",
        "v1alpha1",
        "ResourceBinding",
        "resourcebindings",
        Some("default"),
    );
    create(
        &bindings,
        &json!({
            "apiVersion": "platform.kratix.io/v1alpha1", "kind": "ResourceBinding",
            "metadata": {"name": BINDING, "namespace": "default",
                "labels": {"kratix.io/promise-name": "appstack", "kratix.io/resource-name": "shop"}},
            "spec": {"version": "latest", "promiseRef": {"name": "appstack"},
                "resourceRef": {"name": "shop", "namespace": "default"}},
        }),
    )
    .await;
    patch_status(&bindings, BINDING, json!({"lastAppliedVersion": "v1.0.0"})).await;

    // The pipeline Job, completed.
    let labels = json!({
        "kratix.io/promise-name": "appstack", "kratix.io/workflow-type": "resource",
        "kratix.io/workflow-action": "configure", "kratix.io/pipeline-name": "render",
        "app.kubernetes.io/managed-by": "Kratix", "kratix.io/resource-name": "shop",
        "kratix.io/hash": JOB_HASH,
    });
    let adapter = "ghcr.io/syntasso/kratix-platform-pipeline-adapter:v0.150.0";
    let jobs = dynamic(client, "batch", "v1", "Job", "jobs", Some("default"));
    create(
        &jobs,
        &json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": JOB, "namespace": "default", "labels": labels,
                "annotations": {"kratix.io/job-resource-namespace": "default",
                    "kratix.io/job-resource-name": "shop", "kratix.io/job-resource-kind": "AppStack",
                    "kratix.io/job-resource-api-version": "takeover.example.com/v1alpha1"},
                "ownerReferences": [{"apiVersion": "takeover.example.com/v1alpha1", "kind": "AppStack",
                    "name": "shop", "uid": request_uid}]},
            "spec": {"template": {"metadata": {"labels": labels}, "spec": {
                "serviceAccountName": "appstack-resource-configure-render",
                "restartPolicy": "OnFailure",
                "volumes": [
                    {"name": "promise-scheduling", "configMap": {"name": "destination-selectors-appstack",
                        "items": [{"key": "destinationSelectors", "path": "promise-scheduling"}]}},
                    {"name": "shared-input", "emptyDir": {}},
                    {"name": "shared-output", "emptyDir": {}},
                    {"name": "shared-metadata", "emptyDir": {}},
                ],
                "initContainers": [
                    {"name": "reader", "image": adapter, "command": ["sh", "-c", "reader"]},
                    promise["spec"]["workflows"]["resource"]["configure"][0]["spec"]["containers"][0],
                    {"name": "work-writer", "image": adapter, "command": ["/bin/pipeline-adapter"],
                        "args": ["work-creator", "--input-directory", "/work-creator-files",
                            "--promise-name", "appstack", "--pipeline-name", "render",
                            "--namespace", "default", "--workflow-type", "resource",
                            "--resource-name", "shop"]},
                ],
                "containers": [{"name": "status-writer", "image": adapter,
                    "command": ["sh", "-c", "update-status"]}],
            }}},
        }),
    )
    .await;
    patch_status(
        &jobs,
        JOB,
        json!({
            "startTime": "2026-11-30T08:59:40Z", "completionTime": DONE_AT,
            "succeeded": 1, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {},
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                 "message": "Reached expected number of succeeded pods", "lastProbeTime": DONE_AT, "lastTransitionTime": DONE_AT},
                {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                 "message": "Reached expected number of succeeded pods", "lastProbeTime": DONE_AT, "lastTransitionTime": DONE_AT},
            ],
        }),
    )
    .await;

    // The Work the work-writer made and the WorkPlacement the scheduler made from it.
    let workloads = json!([{"filepath": "configmap.yaml", "content": compressed(CONFIGMAP)}]);
    let works = dynamic(
        client,
        "platform.kratix.io",
        "v1alpha1",
        "Work",
        "works",
        Some("default"),
    );
    let work_uid = create(
        &works,
        &json!({
            "apiVersion": "platform.kratix.io/v1alpha1", "kind": "Work",
            "metadata": {"name": WORK, "namespace": "default",
                "labels": {"kratix.io/promise-name": "appstack", "kratix.io/work-type": "resource",
                    "kratix.io/pipeline-name": "render", "kratix.io/resource-name": "shop"},
                "finalizers": ["kratix.io/work-cleanup"]},
            "spec": {"promiseName": "appstack", "resourceName": "shop",
                "workloadGroups": [{"directory": ".", "id": GROUP_ID, "workloads": workloads}]},
        }),
    )
    .await
    .metadata
    .uid
    .unwrap();
    patch_status(
        &works,
        WORK,
        json!({
            "workPlacements": 1, "workPlacementsCreated": 1,
            "conditions": [
                condition("ScheduleSucceeded", "True", "AllWorkplacementsScheduled", "All workplacements scheduled successfully"),
                condition("Ready", "True", "AllWorkplacementsScheduled", "Ready"),
            ],
        }),
    )
    .await;
    let placements = dynamic(
        client,
        "platform.kratix.io",
        "v1alpha1",
        "WorkPlacement",
        "workplacements",
        Some("default"),
    );
    create(
        &placements,
        &json!({
            "apiVersion": "platform.kratix.io/v1alpha1", "kind": "WorkPlacement",
            "metadata": {"name": PLACEMENT, "namespace": "default",
                "labels": {"kratix.io/work": WORK, "kratix.io/workload-group-id": GROUP_ID,
                    "kratix.io/targetDestinationName": "local", "kratix.io/pipeline-name": "render"},
                "finalizers": ["finalizers.workplacement.kratix.io/repo-cleanup"],
                "ownerReferences": [{"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Work",
                    "name": WORK, "uid": work_uid, "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"targetDestinationName": "local", "workloads": workloads,
                "promiseName": "appstack", "resourceName": "shop", "id": GROUP_ID, "generation": 1},
        }),
    )
    .await;
    patch_status(
        &placements,
        PLACEMENT,
        json!({
            "versionID": head,
            "conditions": [
                condition("ScheduleSucceeded", "True", "ScheduledToDestination", "Scheduled to correct Destination"),
                condition("WriteSucceeded", "True", "WorkloadsWrittenToStateStore", "Workloads written to State Store"),
                condition("Ready", "True", "WorkloadsWrittenToTargetDestination", "Ready"),
            ],
        }),
    )
    .await;
    head
}

/// Successful reconciles of `controller` in a `/metrics` text, summed over its series.
fn reconciles(metrics: &str, controller: &str) -> f64 {
    let name = format!("controller=\"{controller}\"");
    metrics
        .lines()
        .filter(|l| l.starts_with("controller_runtime_reconcile_total{"))
        .filter(|l| l.contains(&name) && l.contains("result=\"success\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The store's latest revision (a list's resourceVersion).
async fn global_revision(client: &kube::Client) -> u64 {
    let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    ns.list_metadata(&ListParams::default().limit(1))
        .await
        .unwrap()
        .metadata
        .resource_version
        .and_then(|v| v.parse().ok())
        .unwrap()
}

fn job_names(jobs: &[Job]) -> BTreeSet<String> {
    jobs.iter()
        .filter_map(|j| j.metadata.name.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_adopts_what_kratix_made_without_rerunning_or_rewriting() {
    // No runner: the Jobs are the record of what ran, and none is started by accident.
    let p = Plinth::up(&["--no-controllers", "--no-runner"]).await;
    let client = p.client().await;
    let head = kratix_installation(&p, &client).await;
    let commits = commit_count(&p.repo(), "main");
    let files = repo_files(&p.repo(), "main");

    let jobs: Api<Job> = Api::all(client.clone());
    let jobs_before = job_names(&jobs.list(&ListParams::default()).await.unwrap().items);
    let works = dynamic(
        &client,
        "platform.kratix.io",
        "v1alpha1",
        "Work",
        "works",
        Some("default"),
    );
    let placements = dynamic(
        &client,
        "platform.kratix.io",
        "v1alpha1",
        "WorkPlacement",
        "workplacements",
        Some("default"),
    );
    let work_spec = works.get(WORK).await.unwrap().data["spec"].clone();
    let placement_spec = placements.get(PLACEMENT).await.unwrap().data["spec"].clone();

    let before_operator = global_revision(&client).await;
    let metrics = format!("127.0.0.1:{}", free_port());
    // A long lease: its renewals (every fifth of it) then leave room for the quiet the
    // settled check waits for.
    let mut operator = p.operator_with(
        "takeover",
        120,
        &["--webhook-addr", "off", "--metrics-addr", &metrics],
    );
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kratix-platform-system");
    wait_until(60, "the operator holds the Lease", || async {
        leases
            .get_opt("plinth-operator")
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity)
            .as_deref()
            == Some("takeover")
    })
    .await;
    // Every controller that owns one of Kratix's objects has reconciled it.
    for controller in ["promise", "scheduler", "workplacement", "request"] {
        wait_until(
            90,
            &format!("a reconcile by the {controller} controller"),
            || async {
                std::net::TcpStream::connect(&metrics).is_ok()
                    && reconciles(&scrape(&metrics), controller) >= 1.0
            },
        )
        .await;
    }
    assert_settled_silent(&client, Duration::from_secs(10)).await;
    // What taking over wrote (statuses in Plinth's words, the objects Kratix would also have
    // made), for the log of a failing run.
    eprintln!(
        "written by the takeover: {}",
        changed_since(&client, before_operator).await
    );

    // Nothing ran again and nothing was written again.
    let jobs_after = job_names(&jobs.list(&ListParams::default()).await.unwrap().items);
    assert_eq!(
        jobs_after, jobs_before,
        "the operator started a pipeline again"
    );
    assert_eq!(
        commit_count(&p.repo(), "main"),
        commits,
        "the operator committed to an unchanged state store:\n{}",
        git(&[
            "--git-dir",
            &p.repo().to_string_lossy(),
            "log",
            "--stat",
            "-3",
            "main"
        ])
    );
    assert_eq!(
        git(&[
            "--git-dir",
            &p.repo().to_string_lossy(),
            "rev-parse",
            "main"
        ])
        .trim(),
        head
    );
    assert_eq!(repo_files(&p.repo(), "main"), files);
    assert_eq!(
        repo_file(&p.repo(), "main", RESOURCE_FILE).as_deref(),
        Some(CONFIGMAP)
    );
    assert_eq!(works.get(WORK).await.unwrap().data["spec"], work_spec);
    assert_eq!(
        placements.get(PLACEMENT).await.unwrap().data["spec"],
        placement_spec
    );
    assert_eq!(
        works
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1,
        "a second Work was made beside Kratix's"
    );

    // Kratix's finalizers stand (Plinth's are the same names), and the request is still
    // reported as reconciled.
    let promise = promise_api(&client).get("appstack").await.unwrap();
    assert_eq!(finalizers(&promise), set(&PROMISE_FINALIZERS));
    assert_eq!(promise.data["status"]["status"], "Available");
    let requests = dynamic(
        &client,
        "takeover.example.com",
        "v1alpha1",
        "AppStack",
        "appstacks",
        Some("default"),
    );
    let request = requests.get("shop").await.unwrap();
    assert_eq!(finalizers(&request), set(&REQUEST_FINALIZERS));
    assert_eq!(
        support::condition(&request, "Reconciled")
            .map(|c| c.0)
            .as_deref(),
        Some("True"),
        "{:#}",
        request.data["status"]
    );
    let bindings = dynamic(
        &client,
        "platform.kratix.io",
        "v1alpha1",
        "ResourceBinding",
        "resourcebindings",
        Some("default"),
    );
    assert_eq!(
        bindings
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );

    // The operator was watching: a changed spec is a new input, and its workflow runs.
    requests
        .patch(
            "shop",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"image": "nginx:1.28"}})),
        )
        .await
        .unwrap();
    wait_until(60, "a Job for the changed request", || async {
        job_names(&jobs.list(&ListParams::default()).await.unwrap().items).len() > jobs_before.len()
    })
    .await;
    let _ = operator.kill();
    let _ = operator.wait();
}
