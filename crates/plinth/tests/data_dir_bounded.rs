//! A request re-run by the global `reconciliationInterval` keeps at most
//! `numberOfJobsToKeep` finished configure Jobs (plus the running one); the Pods of a
//! pruned Job go with it, and so do their log directories under `<data-dir>/pod-logs`.
//! Asserted on counts, never on timings.

use crate::support;

use std::collections::BTreeSet;
use std::path::Path;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::json;
use support::*;

const KEEP: usize = 2;

fn promise() -> serde_json::Value {
    let script = "printf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: %s\\n  namespace: default\\n' \"$KRATIX_OBJECT_NAME\" > /kratix/output/cm.yaml";
    json!({
        "apiVersion": "platform.kratix.io/v1alpha1", "kind": "Promise", "metadata": {"name": "churn"},
        "spec": {
            "api": {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "churns.test.kratix.io"},
                "spec": {"group": "test.kratix.io", "scope": "Namespaced", "names": {"kind": "Churn", "plural": "churns", "singular": "churn"},
                    "versions": [{"name": "v1alpha1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}},
            "workflows": {"resource": {"configure": [{"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Pipeline", "metadata": {"name": "sh"},
                "spec": {"containers": [{"name": "sh", "image": "busybox", "command": ["sh", "-c"], "args": [script]}]}}]}}
        }
    })
}

/// Names of the directories under `dir` (empty when it does not exist).
fn dirs_in(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

async fn names<K>(api: &Api<K>, selector: &str) -> BTreeSet<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list_metadata(&ListParams::default().labels(selector))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruned_jobs_take_their_pods_and_logs_with_them() {
    let p = Plinth::up(&[]).await;
    let client = p.client().await;
    p.kubectl(&[
        "create",
        "configmap",
        "kratix",
        "-n",
        "kratix-platform-system",
        &format!("--from-literal=config=reconciliationInterval: 2s\nnumberOfJobsToKeep: {KEEP}\n"),
    ]);
    let promises = dynamic(
        &client,
        "platform.kratix.io",
        "v1alpha1",
        "Promise",
        "promises",
        None,
    );
    create(&promises, &promise()).await;
    wait_until(90, "Promise churn Available", || async {
        promises
            .get("churn")
            .await
            .is_ok_and(|o| o.data["status"]["status"] == "Available")
    })
    .await;
    let requests = dynamic(
        &client,
        "test.kratix.io",
        "v1alpha1",
        "Churn",
        "churns",
        Some("default"),
    );
    create(
        &requests,
        &json!({"apiVersion": "test.kratix.io/v1alpha1", "kind": "Churn",
            "metadata": {"name": "r", "namespace": "default"}, "spec": {}}),
    )
    .await;

    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let selector = "kratix.io/resource-name=r";
    let logs = p.data.join("pod-logs").join("default");
    let seen_jobs = std::sync::Mutex::new(BTreeSet::new());
    let seen_pods = std::sync::Mutex::new(BTreeSet::new());
    // Re-runs come by themselves every 2 s; watch the counts while they do.
    wait_until(
        240,
        "more than keep+2 runs of the configure workflow",
        || async {
            let now_jobs = names(&jobs, selector).await;
            assert!(
                now_jobs.len() <= KEEP + 1,
                "at most numberOfJobsToKeep finished Jobs plus the running one: {now_jobs:?}"
            );
            let mut sj = seen_jobs.lock().unwrap();
            sj.extend(now_jobs);
            let mut sp = seen_pods.lock().unwrap();
            sp.extend(names(&pods, selector).await);
            sj.len() > KEEP + 2
        },
    )
    .await;

    // Stop the re-runs, so the counts below stand still.
    p.kubectl(&[
        "patch",
        "configmap",
        "kratix",
        "-n",
        "kratix-platform-system",
        "--type",
        "merge",
        "-p",
        &json!({"data": {"config": format!("reconciliationInterval: 1h\nnumberOfJobsToKeep: {KEEP}\n")}})
            .to_string(),
    ]);
    // The Pods and logs of every pruned Job go (the collector and the runner's Pod watch
    // act shortly after the Job's deletion).
    wait_until(
        90,
        "runs finished, Pods and logs of pruned Jobs removed",
        || async {
            let all_jobs = jobs
                .list(&ListParams::default().labels(selector))
                .await
                .unwrap()
                .items;
            let running = all_jobs.iter().any(|j| {
                !j.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| {
                        cs.iter().any(|c| {
                            (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True"
                        })
                    })
            });
            let live_jobs: BTreeSet<String> = all_jobs
                .iter()
                .filter_map(|j| j.metadata.name.clone())
                .collect();
            let live_pods: Vec<Pod> = pods
                .list(&ListParams::default().labels(selector))
                .await
                .unwrap()
                .items;
            let orphans = live_pods.iter().any(|p| {
                p.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .all(|o| !live_jobs.contains(&o.name))
            });
            let live_pod_names: BTreeSet<String> = live_pods
                .iter()
                .filter_map(|p| p.metadata.name.clone())
                .collect();
            let seen = seen_pods.lock().unwrap().clone();
            let stale_logs = dirs_in(&logs)
                .into_iter()
                .filter(|d| seen.contains(d) && !live_pod_names.contains(d))
                .count();
            !running && !orphans && stale_logs == 0
        },
    )
    .await;
    let seen = seen_pods.lock().unwrap().clone();
    let live_pods = names(&pods, selector).await;
    let kept_logs: BTreeSet<String> = dirs_in(&logs).intersection(&seen).cloned().collect();
    assert!(
        seen.len() > live_pods.len(),
        "some Pods were pruned: seen {seen:?}, live {live_pods:?}"
    );
    assert!(
        live_pods.len() <= KEEP + 1,
        "Pods only of the kept Jobs: {live_pods:?}"
    );
    assert!(
        kept_logs.is_subset(&live_pods),
        "log directories only for existing Pods: {kept_logs:?} vs {live_pods:?}"
    );
    assert!(!kept_logs.is_empty(), "the kept Pods still have their logs");
}
