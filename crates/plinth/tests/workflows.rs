//! Failing pipelines on a real `plinth up`: a container exiting
//! non-zero fails its Job with a `Failed` condition and the request's
//! `ConfigureWorkflowCompleted=False/ConfigureWorkflowFailed` naming the pipeline, with
//! its logs kept for `kubectl logs <pod> -c <container>` and Kratix's labels on
//! `kubectl get jobs,pods`; an image with no engine and no image map fails the same way,
//! with the runner's message on the Job. Editing a request while a pipeline runs lets
//! it finish, then restarts once; pipeline-written status keys survive a
//! manual reconciliation. Plinth's own adapter containers run inside the runner and
//! still log and report as containers.

use crate::support;

use serde_json::{Value, json};
use support::*;

fn promise(name: &str, image: &str, script: &str) -> Value {
    json!({
        "apiVersion": "platform.kratix.io/v1alpha1", "kind": "Promise", "metadata": {"name": name},
        "spec": {
            "api": {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": format!("{name}s.test.kratix.io")},
                "spec": {"group": "test.kratix.io", "scope": "Namespaced", "names": {"kind": format!("{}{}", name[..1].to_uppercase(), &name[1..]), "plural": format!("{name}s"), "singular": name},
                    "versions": [{"name": "v1alpha1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}},
            "workflows": {"resource": {"configure": [{"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Pipeline", "metadata": {"name": "step"},
                "spec": {"jobOptions": {"backoffLimit": 0}, "containers": [{"name": "main", "image": image, "command": ["sh", "-c"], "args": [script]}]}}]}}
        }
    })
}

async fn failed_request(p: &Plinth, name: &str, image: &str, script: &str) -> (Value, Value) {
    let client = p.client().await;
    let promises = promise_api(&client);
    create(&promises, &promise(name, image, script)).await;
    wait_until(90, &format!("Promise {name} Available"), || async {
        promises
            .get(name)
            .await
            .is_ok_and(|o| o.data["status"]["status"] == "Available")
    })
    .await;
    let kind = format!("{}{}", name[..1].to_uppercase(), &name[1..]);
    let requests = dynamic(
        &client,
        "test.kratix.io",
        "v1alpha1",
        &kind,
        &format!("{name}s"),
        Some("default"),
    );
    create(&requests, &json!({"apiVersion": "test.kratix.io/v1alpha1", "kind": kind, "metadata": {"name": "r1", "namespace": "default"}, "spec": {}})).await;
    wait_until(
        120,
        &format!("{name}/r1 ConfigureWorkflowFailed"),
        || async {
            requests.get("r1").await.is_ok_and(|o| {
                condition(&o, "ConfigureWorkflowCompleted")
                    .is_some_and(|c| c.1 == "ConfigureWorkflowFailed")
            })
        },
    )
    .await;
    let rr = requests.get("r1").await.unwrap();
    let c = condition(&rr, "ConfigureWorkflowCompleted").unwrap();
    assert_eq!(c.0, "False");
    assert!(c.2.contains("step"), "condition names the pipeline: {c:?}");
    let jobs: Value = serde_json::from_str(&p.kubectl(&[
        "get",
        "jobs",
        "-n",
        "default",
        "-l",
        &format!("kratix.io/promise-name={name}"),
        "-o",
        "json",
    ]))
    .unwrap();
    let job = jobs["items"][0].clone();
    assert_eq!(job["metadata"]["labels"]["kratix.io/resource-name"], "r1");
    assert_eq!(job["metadata"]["labels"]["kratix.io/pipeline-name"], "step");
    (serde_json::to_value(&rr.data).unwrap(), job)
}

fn failed_condition(job: &Value) -> (String, String) {
    let c = job["status"]["conditions"]
        .as_array()
        .and_then(|cs| {
            cs.iter()
                .find(|c| c["type"] == "Failed" && c["status"] == "True")
        })
        .cloned()
        .unwrap_or_else(|| panic!("Failed condition: {job}"));
    (
        c["reason"].as_str().unwrap_or("").into(),
        c["message"].as_str().unwrap_or("").into(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_containers_and_unrunnable_images() {
    let p = Plinth::up(&[]).await;

    // Non-zero exit: Job Failed with a reason, logs kept.
    let (_, job) = failed_request(&p, "exiter", "busybox", "echo boom-output; exit 3").await;
    let (reason, _) = failed_condition(&job);
    assert!(!reason.is_empty(), "Failed condition has a reason: {job}");
    let pods: Value = serde_json::from_str(&p.kubectl(&[
        "get",
        "pods",
        "-n",
        "default",
        "-l",
        "kratix.io/promise-name=exiter",
        "-o",
        "json",
    ]))
    .unwrap();
    let pod = pods["items"][0]["metadata"]["name"]
        .as_str()
        .expect("a Pod")
        .to_string();
    assert_eq!(
        pods["items"][0]["metadata"]["labels"]["kratix.io/pipeline-name"],
        "step"
    );
    let logs = p.kubectl(&["logs", &pod, "-n", "default", "-c", "main"]);
    assert!(logs.contains("boom-output"), "{logs}");
    // Plinth's reader ran inside the runner (no sandbox of its own), and its log reads as
    // a reader process's: the container path it wrote, through `kubectl logs -c reader`.
    let reader = pods["items"][0]["status"]["initContainerStatuses"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == "reader"))
        .unwrap_or_else(|| panic!("a reader status: {}", pods["items"][0]["status"]));
    assert_eq!(
        reader["containerID"],
        format!("plinth://default/{pod}/reader"),
        "{reader}"
    );
    let logs = p.kubectl(&["logs", &pod, "-n", "default", "-c", "reader"]);
    assert!(
        logs.contains("wrote /kratix/input/object.yaml") && !logs.contains("/pods/"),
        "{logs}"
    );
    let table = p.kubectl(&[
        "get",
        "jobs,pods",
        "-n",
        "default",
        "-l",
        "kratix.io/promise-name=exiter",
        "--show-labels",
    ]);
    assert!(
        table.contains("kratix.io/workflow-type=resource") && table.contains(&pod),
        "{table}"
    );

    // No engine, no map: the runner's message reaches the Job.
    let (_, job) = failed_request(
        &p,
        "unrunnable",
        "registry.invalid/nothing/here:1.0",
        "true",
    )
    .await;
    let (_, message) = failed_condition(&job);
    let pods: Value = serde_json::from_str(&p.kubectl(&[
        "get",
        "pods",
        "-n",
        "default",
        "-l",
        "kratix.io/promise-name=unrunnable",
        "-o",
        "json",
    ]))
    .unwrap();
    let statuses = pods["items"][0]["status"].to_string();
    assert!(
        message.contains("registry.invalid/nothing/here:1.0")
            || statuses.contains("registry.invalid/nothing/here:1.0"),
        "the image is named: {message} / {statuses}"
    );
}

fn two_pipeline_promise() -> Value {
    let pipe = |name: &str, script: &str| {
        json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Pipeline", "metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c"], "args": [script]}]}})
    };
    let mut p = promise("sleeper", "busybox", "true");
    p["spec"]["workflows"]["resource"]["configure"] = json!([
        pipe(
            "a",
            "grep -q 'marker:' /kratix/input/object.yaml || echo 'marker: first-run' > /kratix/metadata/status.yaml"
        ),
        pipe(
            "b",
            "sleep 3; echo 'slept: true' > /kratix/metadata/status.yaml"
        ),
    ]);
    p
}

async fn jobs_of(client: &kube::Client, pipeline: &str) -> Vec<k8s_openapi::api::batch::v1::Job> {
    let api: kube::Api<k8s_openapi::api::batch::v1::Job> =
        kube::Api::namespaced(client.clone(), "default");
    let lp = kube::api::ListParams::default().labels(&format!(
        "kratix.io/promise-name=sleeper,kratix.io/pipeline-name={pipeline}"
    ));
    let mut items = api.list(&lp).await.unwrap().items;
    items.sort_by_key(|j| j.metadata.creation_timestamp.clone().map(|t| t.0));
    items
}

/// Editing the request while pipeline `b` sleeps lets that Job finish; then exactly
/// one new run starts from pipeline `a`. A status key written by a pipeline survives a
/// manual reconciliation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_during_run_restarts_once_after_it_finishes() {
    use kube::api::{Patch, PatchParams};
    let p = Plinth::up(&[]).await;
    let client = p.client().await;
    let promises = promise_api(&client);
    create_available(&promises, &two_pipeline_promise(), "sleeper", 90).await;
    let requests = dynamic(
        &client,
        "test.kratix.io",
        "v1alpha1",
        "Sleeper",
        "sleepers",
        Some("default"),
    );
    create(&requests, &json!({"apiVersion": "test.kratix.io/v1alpha1", "kind": "Sleeper", "metadata": {"name": "r1", "namespace": "default"}, "spec": {"v": 1}})).await;
    wait_until(60, "pipeline b running", || async {
        !jobs_of(&client, "b").await.is_empty()
    })
    .await;
    requests
        .patch(
            "r1",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"v": 2}})),
        )
        .await
        .unwrap();
    wait_until(
        120,
        "two runs of both pipelines and the workflow complete",
        || async {
            jobs_of(&client, "a").await.len() == 2
                && jobs_of(&client, "b").await.len() == 2
                && requests.get("r1").await.is_ok_and(|o| {
                    condition(&o, "ConfigureWorkflowCompleted").is_some_and(|c| c.0 == "True")
                        && o.data["status"]["observedGeneration"] == 2
                })
        },
    )
    .await;
    let (a, b) = (jobs_of(&client, "a").await, jobs_of(&client, "b").await);
    let first_b = b[0].status.clone().unwrap();
    assert_eq!(
        first_b.succeeded,
        Some(1),
        "the running Job finished instead of being killed: {first_b:?}"
    );
    let first_b_done = first_b.completion_time.expect("completionTime").0;
    let second_a = a[1].metadata.creation_timestamp.clone().unwrap().0;
    // creationTimestamp has one-second resolution.
    assert!(
        second_a >= first_b_done - jiff::SignedDuration::from_secs(1),
        "the new run started after the running Job completed"
    );
    let rr = requests.get("r1").await.unwrap();
    assert_eq!(rr.data["status"]["marker"], "first-run");

    // Manual reconciliation: pipeline a does not rewrite `marker`; it survives.
    p.kubectl(&[
        "label",
        "sleeper",
        "r1",
        "-n",
        "default",
        "kratix.io/manual-reconciliation=true",
    ]);
    wait_until(120, "a third run completes", || async {
        jobs_of(&client, "b")
            .await
            .iter()
            .filter(|j| j.status.as_ref().and_then(|s| s.succeeded) == Some(1))
            .count()
            == 3
            && requests.get("r1").await.is_ok_and(|o| {
                condition(&o, "ConfigureWorkflowCompleted").is_some_and(|c| c.0 == "True")
            })
    })
    .await;
    let rr = requests.get("r1").await.unwrap();
    assert_eq!(
        rr.data["status"]["marker"], "first-run",
        "{}",
        rr.data["status"]
    );
    assert!(
        !rr.metadata
            .labels
            .unwrap_or_default()
            .contains_key("kratix.io/manual-reconciliation")
    );
}

/// Output that escapes `/kratix/output` never reaches the host or a Work: a write to
/// `/kratix/output/../../x` lands inside the sandbox only, and a symlink pointing out of
/// the output directory fails the pipeline with the path named (Kratix copied such files).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_that_escapes_the_output_directory_is_refused() {
    let marker = format!("plinth-escape-{}", std::process::id());
    let p = Plinth::up(&[]).await;
    let script = format!(
        "echo escaped > /kratix/output/../../{marker}; ln -s /etc/hostname /kratix/output/leak.yaml; echo 'a: 1' > /kratix/output/ok.yaml"
    );
    let (_rr, job) = failed_request(&p, "escape", "busybox", &script).await;
    assert!(
        !std::path::Path::new("/").join(&marker).exists(),
        "nothing was written outside the sandbox"
    );
    let pod = p.kubectl(&[
        "get",
        "pods",
        "-n",
        "default",
        "-l",
        &format!("job-name={}", job["metadata"]["name"].as_str().unwrap()),
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ]);
    let log = p.kubectl(&["logs", "-n", "default", &pod, "-c", "work-writer"]);
    assert!(
        log.contains("leak.yaml"),
        "the work-writer names the escaping path: {log}"
    );
    let works = p.kubectl(&[
        "get",
        "works",
        "-n",
        "default",
        "-l",
        "kratix.io/promise-name=escape",
        "-o",
        "name",
    ]);
    assert!(works.trim().is_empty(), "no Work was written: {works}");
}
