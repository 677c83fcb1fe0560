//! Kratix's `reconcile_after_failure` system tests for resource requests on a
//! real `plinth up`: the corpus config (`reconciliationInterval: 10s`,
//! `numberOfJobsToKeep: 2`, or `reconcileAfterFailure: false`) and the corpus Promise
//! `reconcilable`, whose pipeline (`backoffLimit: 0`, so each run is one quick attempt)
//! fails until the gate ConfigMap `reconcile-after-failure-gate` exists; it checks the
//! gate with in-pod `kubectl` as its ServiceAccount (stock image
//! `ghcr.io/syntasso/kratix-pipeline-utility`).

use crate::support;

use std::collections::BTreeSet;

use kube::api::ListParams;
use support::*;

async fn job_names(client: &kube::Client) -> Vec<String> {
    let jobs = dynamic(client, "batch", "v1", "Job", "jobs", Some("default"));
    let lp = ListParams::default().labels("kratix.io/pipeline-name=resource-configure");
    jobs.list(&lp)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|j| j.metadata.name.unwrap())
        .collect()
}

async fn setup(config: &str) -> (Plinth, kube::Client) {
    let p = Plinth::up(&[]).await;
    let client = p.client().await;
    p.kubectl(&[
        "apply",
        "-f",
        corpus(&format!(
            "kratix-system-tests/reconcile-after-failure/{config}"
        ))
        .to_str()
        .unwrap(),
    ]);
    let promises = promise_api(&client);
    create_available(
        &promises,
        &corpus_docs("kratix-system-tests/reconcile-after-failure/promise.yaml").remove(0),
        "reconcilable",
        90,
    )
    .await;
    let requests = dynamic(
        &client,
        "test.kratix.io",
        "v1alpha1",
        "Reconcilable",
        "reconcilables",
        Some("default"),
    );
    create(
        &requests,
        &corpus_docs("kratix-system-tests/reconcile-after-failure/resource-request.yaml").remove(0),
    )
    .await;
    wait_until(90, "ConfigureWorkflowFailed", || async {
        requests.get("example").await.is_ok_and(|o| {
            condition(&o, "ConfigureWorkflowCompleted")
                .is_some_and(|c| c.1 == "ConfigureWorkflowFailed")
        })
    })
    .await;
    (p, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn failed_request_is_rerun_and_jobs_are_pruned() {
    let (p, client) = setup("kratix-config-retry.yaml").await;
    let requests = dynamic(
        &client,
        "test.kratix.io",
        "v1alpha1",
        "Reconcilable",
        "reconcilables",
        Some("default"),
    );
    let first = job_names(&client).await;
    // Re-runs happen by themselves; at most keep+1 Jobs exist at any time.
    let seen: std::sync::Mutex<BTreeSet<String>> =
        std::sync::Mutex::new(first.iter().cloned().collect());
    wait_until(120, "more than keep+1 distinct Jobs over time", || async {
        let names = job_names(&client).await;
        assert!(
            names.len() <= 3,
            "at most numberOfJobsToKeep+1 Jobs: {names:?}"
        );
        let mut seen = seen.lock().unwrap();
        seen.extend(names);
        seen.len() > 3
    })
    .await;
    let rr = requests.get("example").await.unwrap();
    assert_eq!(
        condition(&rr, "ConfigureWorkflowCompleted").unwrap().0,
        "False"
    );

    // With the gate, the next automatic run succeeds.
    p.kubectl(&[
        "create",
        "configmap",
        "reconcile-after-failure-gate",
        "-n",
        "default",
        "--from-literal=a=b",
    ]);
    wait_until(90, "ConfigureWorkflowCompleted=True", || async {
        requests.get("example").await.is_ok_and(|o| {
            condition(&o, "ConfigureWorkflowCompleted").is_some_and(|c| c.0 == "True")
        })
    })
    .await;
    // …and it keeps re-running after success (the interval applies to succeeded runs too).
    let after = job_names(&client).await;
    wait_until(60, "a re-run after success", || async {
        job_names(&client).await.iter().any(|n| !after.contains(n))
    })
    .await;
    assert!(job_names(&client).await.len() <= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn no_rerun_after_failure_when_disabled() {
    let (p, client) = setup("kratix-config-no-retry.yaml").await;
    let requests = dynamic(
        &client,
        "test.kratix.io",
        "v1alpha1",
        "Reconcilable",
        "reconcilables",
        Some("default"),
    );
    let first = job_names(&client).await;
    assert_eq!(first.len(), 1);
    // Two full intervals pass with no new Job (the controller is alive: a manual
    // reconciliation afterwards is honoured at once).
    tokio::time::sleep(std::time::Duration::from_secs(25)).await;
    assert_eq!(
        job_names(&client).await,
        first,
        "no automatic re-run after a failure"
    );
    p.kubectl(&[
        "create",
        "configmap",
        "reconcile-after-failure-gate",
        "-n",
        "default",
        "--from-literal=a=b",
    ]);
    p.kubectl(&[
        "label",
        "reconcilable",
        "example",
        "-n",
        "default",
        "kratix.io/manual-reconciliation=true",
    ]);
    wait_until(90, "manual re-run succeeds", || async {
        requests.get("example").await.is_ok_and(|o| {
            condition(&o, "ConfigureWorkflowCompleted").is_some_and(|c| c.0 == "True")
        })
    })
    .await;
    assert_eq!(job_names(&client).await.len(), 2);
}
