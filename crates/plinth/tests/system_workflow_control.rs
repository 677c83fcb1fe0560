//! Kratix's `workflow_control` system tests on a real
//! `plinth up`, with the corpus Promises `workflow-suspend` and `workflow-retry`: their
//! pipelines write `/kratix/metadata/workflow-control.yaml` (`suspend: true` or
//! `retryAfter: 10s`) and check gate ConfigMaps with in-pod `kubectl` as the pipeline's
//! ServiceAccount (RBAC enforced; the Promises grant `get` on configmaps). Image
//! `ghcr.io/syntasso/kratix-pipeline-utility` is a stock userland image (host tools,
//! incl. kubectl, in the sandbox).

use crate::support;

use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use serde_json::Value;
use support::*;

fn pipelines(o: &DynamicObject) -> Vec<Value> {
    o.data["status"]["kratix"]["workflows"]["pipelines"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn phase(o: &DynamicObject, name: &str) -> Option<String> {
    pipelines(o)
        .iter()
        .find(|p| p["name"] == name)
        .and_then(|p| p["phase"].as_str().map(String::from))
}

fn pipeline(o: &DynamicObject, name: &str) -> Value {
    pipelines(o)
        .into_iter()
        .find(|p| p["name"] == name)
        .unwrap_or(Value::Null)
}

fn suspended_label(o: &DynamicObject) -> bool {
    o.metadata.labels.as_ref().is_some_and(|l| {
        l.get("kratix.io/workflow-suspended")
            .is_some_and(|v| v == "true")
    })
}

async fn job_count(client: &kube::Client, ns: &str, pipeline: &str) -> usize {
    let jobs = dynamic(client, "batch", "v1", "Job", "jobs", Some(ns));
    jobs.list(&ListParams::default().labels(&format!("kratix.io/pipeline-name={pipeline}")))
        .await
        .unwrap()
        .items
        .len()
}

async fn wait_phase(
    api: &Api<DynamicObject>,
    name: &str,
    pipeline: &str,
    want: &str,
    secs: u64,
) -> DynamicObject {
    wait_until(
        secs,
        &format!("{name}: pipeline {pipeline} {want}"),
        || async {
            api.get(name)
                .await
                .is_ok_and(|o| phase(&o, pipeline).as_deref() == Some(want))
        },
    )
    .await;
    api.get(name).await.unwrap()
}

fn unlabel(p: &Plinth, args: &[&str]) {
    let mut a = vec!["label"];
    a.extend_from_slice(args);
    a.push("kratix.io/workflow-suspended-");
    p.kubectl(&a);
}

fn configmap(p: &Plinth, ns: &str, name: &str) {
    p.kubectl(&[
        "create",
        "configmap",
        name,
        "-n",
        ns,
        "--from-literal=value=ready",
    ]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn suspend_resume_and_delete_gates() {
    let p = Plinth::up(&[]).await;
    let client = p.client().await;
    let promises = promise_api(&client);
    let sys = "kratix-platform-system";
    create(
        &promises,
        &corpus_docs("kratix-system-tests/workflow-control/promise.yaml").remove(0),
    )
    .await;

    // pipe-1 suspends: Kratix's status, label and suspendedGeneration; pipe-2 never runs.
    let pr = wait_phase(&promises, "workflow-suspend", "pipe-1", "Suspended", 120).await;
    assert_eq!(phase(&pr, "pipe-0").as_deref(), Some("Succeeded"));
    assert_eq!(phase(&pr, "pipe-2").as_deref(), Some("Pending"));
    assert_eq!(pipeline(&pr, "pipe-1")["message"], "waiting for approval");
    assert!(
        pipeline(&pr, "pipe-1").get("nextRetryAt").is_none()
            && pipeline(&pr, "pipe-1").get("attempts").is_none()
    );
    wait_until(30, "workflow-suspended label", || async {
        promises
            .get("workflow-suspend")
            .await
            .is_ok_and(|o| suspended_label(&o))
    })
    .await;
    let pr = promises.get("workflow-suspend").await.unwrap();
    assert_eq!(
        pr.data["status"]["kratix"]["workflows"]["suspendedGeneration"],
        pr.metadata.generation.unwrap()
    );
    wait_until(30, "Reconciled=Unknown/WorkflowSuspended", || async {
        promises.get("workflow-suspend").await.is_ok_and(|o| {
            condition(&o, "Reconciled")
                .is_some_and(|c| c.0 == "Unknown" && c.1 == "WorkflowSuspended")
        })
    })
    .await;
    assert_eq!(job_count(&client, sys, "pipe-2").await, 0);
    let (pipe0_jobs, pipe1_jobs) = (
        job_count(&client, sys, "pipe-0").await,
        job_count(&client, sys, "pipe-1").await,
    );

    // Removing the label re-runs only pipe-1, which suspends again.
    unlabel(&p, &["promise", "workflow-suspend"]);
    wait_until(60, "a second pipe-1 Job", || async {
        job_count(&client, sys, "pipe-1").await > pipe1_jobs
    })
    .await;
    wait_until(60, "suspended again", || async {
        promises.get("workflow-suspend").await.is_ok_and(|o| {
            suspended_label(&o) && phase(&o, "pipe-1").as_deref() == Some("Suspended")
        })
    })
    .await;
    assert_eq!(
        job_count(&client, sys, "pipe-0").await,
        pipe0_jobs,
        "resume does not re-run earlier pipelines"
    );
    assert_eq!(job_count(&client, sys, "pipe-2").await, 0);

    // The updated Promise (pipe-1 no longer suspends) runs all three to Succeeded.
    let v2 = support::corpus("kratix-system-tests/workflow-control/promise-updated.yaml");
    p.kubectl(&["apply", "-f", v2.to_str().unwrap()]);
    wait_until(120, "all pipelines Succeeded", || async {
        promises.get("workflow-suspend").await.is_ok_and(|o| {
            ["pipe-0", "pipe-1", "pipe-2"]
                .iter()
                .all(|n| phase(&o, n).as_deref() == Some("Succeeded"))
        })
    })
    .await;
    wait_until(30, "Promise Available", || async {
        promises
            .get("workflow-suspend")
            .await
            .is_ok_and(|o| o.data["status"]["status"] == "Available")
    })
    .await;
    let pr = promises.get("workflow-suspend").await.unwrap();
    assert!(!suspended_label(&pr));
    assert!(
        pr.data["status"]["kratix"]["workflows"]
            .get("suspendedGeneration")
            .is_none(),
        "{:?}",
        pr.data["status"]
    );
    assert!(pipeline(&pr, "pipe-1").get("message").is_none());

    // The resource pipeline suspends: no Work for it.
    let requests = dynamic(
        &client,
        "test.kratix.io",
        "v1alpha1",
        "WorkflowSuspend",
        "workflowsuspends",
        Some("default"),
    );
    create(
        &requests,
        &corpus_docs("kratix-system-tests/workflow-control/resource-request.yaml").remove(0),
    )
    .await;
    let rr = wait_phase(
        &requests,
        "suspend-test",
        "resource-pipe-0",
        "Suspended",
        120,
    )
    .await;
    assert_eq!(
        pipeline(&rr, "resource-pipe-0")["message"],
        "waiting for configmap"
    );
    let works = dynamic(
        &client,
        "platform.kratix.io",
        "v1alpha1",
        "Work",
        "works",
        Some("default"),
    );
    let rr_works = || async {
        works
            .list(&ListParams::default().labels("kratix.io/resource-name=suspend-test"))
            .await
            .unwrap()
            .items
            .len()
    };
    assert_eq!(rr_works().await, 0, "a suspended run creates no Work");
    // The gate ConfigMap plus removing the label completes it with one Work.
    p.kubectl(&[
        "apply",
        "-f",
        support::corpus("kratix-system-tests/workflow-control/configmap.yaml")
            .to_str()
            .unwrap(),
    ]);
    wait_until(30, "request labelled suspended", || async {
        requests
            .get("suspend-test")
            .await
            .is_ok_and(|o| suspended_label(&o))
    })
    .await;
    unlabel(&p, &["workflowsuspend", "suspend-test", "-n", "default"]);
    wait_phase(
        &requests,
        "suspend-test",
        "resource-pipe-0",
        "Succeeded",
        90,
    )
    .await;
    wait_until(30, "one Work", || async { rr_works().await == 1 }).await;

    // Resource delete suspends while the ConfigMap exists; Works are kept.
    requests
        .delete("suspend-test", &DeleteParams::default())
        .await
        .unwrap();
    wait_until(120, "DeleteWorkflowSuspended", || async {
        requests.get("suspend-test").await.is_ok_and(|o| {
            condition(&o, "DeleteWorkflowCompleted")
                .is_some_and(|c| c.0 == "False" && c.1 == "DeleteWorkflowSuspended")
                && suspended_label(&o)
        })
    })
    .await;
    let rr = requests.get("suspend-test").await.unwrap();
    assert_eq!(
        pipelines(&rr).len(),
        1,
        "status shows only the delete pipeline: {:?}",
        pipelines(&rr)
    );
    assert_eq!(
        rr_works().await,
        1,
        "Works kept while the delete pipeline is suspended"
    );
    p.kubectl(&[
        "delete",
        "configmap",
        "workflow-suspend-test",
        "-n",
        "default",
    ]);
    unlabel(&p, &["workflowsuspend", "suspend-test", "-n", "default"]);
    wait_until(120, "request deleted", || async {
        requests.get_opt("suspend-test").await.unwrap().is_none()
    })
    .await;

    // Promise delete suspends on its gate; one delete Job while suspended.
    configmap(&p, sys, "workflow-suspend-promise-delete-gate");
    promises
        .delete("workflow-suspend", &DeleteParams::default())
        .await
        .unwrap();
    wait_until(120, "Promise DeleteWorkflowSuspended", || async {
        promises.get("workflow-suspend").await.is_ok_and(|o| {
            condition(&o, "DeleteWorkflowCompleted")
                .is_some_and(|c| c.1 == "DeleteWorkflowSuspended")
                && suspended_label(&o)
        })
    })
    .await;
    assert_eq!(job_count(&client, sys, "promise-delete-pipe").await, 1);
    p.kubectl(&[
        "delete",
        "configmap",
        "workflow-suspend-promise-delete-gate",
        "-n",
        sys,
    ]);
    unlabel(&p, &["promise", "workflow-suspend"]);
    wait_until(120, "Promise deleted", || async {
        promises
            .get_opt("workflow-suspend")
            .await
            .unwrap()
            .is_none()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn retry_after_until_gates_exist() {
    let p = Plinth::up(&[]).await;
    let client = p.client().await;
    let promises = promise_api(&client);
    let sys = "kratix-platform-system";
    create(
        &promises,
        &corpus_docs("kratix-system-tests/workflow-control/promise-retry.yaml").remove(0),
    )
    .await;

    let pr = wait_phase(&promises, "workflow-retry", "pipe-retry", "Suspended", 120).await;
    assert_eq!(phase(&pr, "pipe-0").as_deref(), Some("Succeeded"));
    let pipe = pipeline(&pr, "pipe-retry");
    assert_eq!(pipe["message"], "configmap workflow-retry-test not found");
    assert!(
        pipe["nextRetryAt"]
            .as_str()
            .is_some_and(|t| t.parse::<jiff::Timestamp>().is_ok()),
        "{pipe}"
    );
    assert!(pipe["attempts"].as_i64().unwrap_or(0) >= 1, "{pipe}");
    wait_until(30, "workflow-suspended label", || async {
        promises
            .get("workflow-retry")
            .await
            .is_ok_and(|o| suspended_label(&o))
    })
    .await;
    // It retries by itself after retryAfter (10 s).
    wait_until(90, "a second attempt", || async {
        job_count(&client, sys, "pipe-retry").await >= 2
            && promises
                .get("workflow-retry")
                .await
                .is_ok_and(|o| pipeline(&o, "pipe-retry")["attempts"].as_i64().unwrap_or(0) >= 2)
    })
    .await;
    assert_eq!(
        job_count(&client, sys, "pipe-2").await,
        0,
        "pipe-2 never ran"
    );
    // The dependency lets the retry complete, and pipe-2 follows.
    configmap(&p, sys, "workflow-retry-test");
    wait_until(90, "all Succeeded", || async {
        promises.get("workflow-retry").await.is_ok_and(|o| {
            ["pipe-0", "pipe-retry", "pipe-2"]
                .iter()
                .all(|n| phase(&o, n).as_deref() == Some("Succeeded"))
        })
    })
    .await;
    wait_until(30, "Promise Available", || async {
        promises
            .get("workflow-retry")
            .await
            .is_ok_and(|o| o.data["status"]["status"] == "Available")
    })
    .await;
    let pr = promises.get("workflow-retry").await.unwrap();
    let pipe = pipeline(&pr, "pipe-retry");
    assert!(
        pipe.get("nextRetryAt").is_none() && pipe.get("attempts").is_none(),
        "{pipe}"
    );
    assert!(!suspended_label(&pr));

    // Resource configure retries until its gate exists.
    let requests = dynamic(
        &client,
        "test.kratix.io",
        "v1alpha1",
        "WorkflowRetry",
        "workflowretries",
        Some("default"),
    );
    create(
        &requests,
        &corpus_docs("kratix-system-tests/workflow-control/resource-request-retry.yaml").remove(0),
    )
    .await;
    wait_phase(
        &requests,
        "retry-test",
        "resource-pipe-retry",
        "Suspended",
        120,
    )
    .await;
    configmap(&p, "default", "workflow-retry-resource-gate");
    wait_phase(
        &requests,
        "retry-test",
        "resource-pipe-retry",
        "Succeeded",
        90,
    )
    .await;
    wait_until(30, "ConfigureWorkflowCompleted", || async {
        requests.get("retry-test").await.is_ok_and(|o| {
            condition(&o, "ConfigureWorkflowCompleted").is_some_and(|c| c.0 == "True")
        })
    })
    .await;

    // Resource delete retries (attempts grow) until its gate exists.
    requests
        .delete("retry-test", &DeleteParams::default())
        .await
        .unwrap();
    wait_until(120, "delete retrying", || async {
        requests.get("retry-test").await.is_ok_and(|o| {
            condition(&o, "DeleteWorkflowCompleted")
                .is_some_and(|c| c.1 == "DeleteWorkflowSuspended")
                && pipelines(&o).len() == 1
                && pipeline(&o, "resource-delete-retry-pipe")["attempts"]
                    .as_i64()
                    .unwrap_or(0)
                    >= 2
        })
    })
    .await;
    configmap(&p, "default", "workflow-retry-delete-gate");
    wait_until(90, "request deleted", || async {
        requests.get_opt("retry-test").await.unwrap().is_none()
    })
    .await;

    // Promise delete likewise.
    promises
        .delete("workflow-retry", &DeleteParams::default())
        .await
        .unwrap();
    wait_until(120, "Promise delete retrying", || async {
        promises.get("workflow-retry").await.is_ok_and(|o| {
            condition(&o, "DeleteWorkflowCompleted")
                .is_some_and(|c| c.1 == "DeleteWorkflowSuspended")
        })
    })
    .await;
    configmap(&p, sys, "workflow-retry-promise-delete-gate");
    wait_until(90, "Promise deleted", || async {
        promises.get_opt("workflow-retry").await.unwrap().is_none()
    })
    .await;
}
