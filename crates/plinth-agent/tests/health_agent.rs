//! The health agent against the embedded API server: a HealthDefinition becomes a
//! CronJob with its ServiceAccount and RBAC (applied once, then left alone), the records
//! the checks write reach a Git health store named by the `health-state-store-config`
//! ConfigMap, and deleting the definition deletes its CronJob, RBAC, record and stored
//! file.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use plinth_agent::health::{HealthAgent, HealthAgentConfig};
use plinth_api::constants::health as names;
use plinth_api::{HealthDefinition, HealthRecord};
use plinth_apiserver::testing::TestServer;
use serde_json::json;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn server_with_crds() -> TestServer {
    let server = TestServer::start().await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    for crd in plinth_api::crds::all_crds() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    server
}

fn definition() -> HealthDefinition {
    serde_json::from_value(json!({
        "apiVersion": "platform.kratix.io/v1alpha1", "kind": "HealthDefinition",
        "metadata": {"name": "web-health", "namespace": "default"},
        "spec": {
            "resourceRef": {"name": "one", "namespace": "default"},
            "promiseRef": {"name": "app"},
            "schedule": "*/5 * * * *",
            "input": "apiVersion: v1\nkind: ConfigMap\n",
            "workflow": {"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Pipeline",
                "metadata": {"name": "check"},
                "spec": {
                    "rbac": {"permissions": [{"apiGroups": [""], "resources": ["configmaps"],
                        "verbs": ["get"], "resourceNamespace": "apps"}]},
                    "containers": [{"name": "probe", "image": "busybox"}]}},
        }
    }))
    .unwrap()
}

/// What `health-state-creator` applies after a run.
fn record(state: &str, last_run: i64) -> serde_json::Value {
    json!({
        "apiVersion": "platform.kratix.io/v1alpha1", "kind": "HealthRecord",
        "metadata": {"name": "one-web-health", "namespace": "default",
            "labels": {names::DEFINITION_LABEL: "web-health"}},
        "data": {"promiseRef": {"name": "app"}, "resourceRef": {"name": "one", "namespace": "default"},
            "state": state, "lastRun": last_run},
    })
}

const RECORD_FILE: &str = "health/default/app/one/web-health.yaml";

/// The record's file on the bare repository's `main`, if any.
fn show(bare: &Path) -> Option<String> {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(bare)
        .args(["show", &format!("main:{RECORD_FILE}")])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

async fn wait_for(what: &str, f: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn count<K>(api: &Api<K>) -> usize
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let sel = format!(
        "{}={}",
        plinth_api::constants::labels::MANAGED_BY,
        names::AGENT_MANAGER
    );
    api.list(&ListParams::default().labels(&sel))
        .await
        .unwrap()
        .items
        .len()
}

#[tokio::test]
async fn a_definition_becomes_a_cronjob_once_and_deleting_it_removes_everything() {
    let server = server_with_crds().await;
    let client = server.client();
    let dir = tempfile::tempdir().unwrap();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "apps"}})).unwrap(),
        )
        .await
        .unwrap();
    let hds: Api<HealthDefinition> = Api::namespaced(client.clone(), "default");
    hds.create(&PostParams::default(), &definition())
        .await
        .unwrap();

    let mut agent = HealthAgent::new(HealthAgentConfig::new(dir.path()), client.clone());
    let first = agent.sync_once().await;
    assert!(first.errors.is_empty(), "{:?}", first.errors);
    assert_eq!(first.definitions, 1);
    // ServiceAccount, Role + RoleBinding for records, ClusterRole + RoleBinding in apps,
    // CronJob.
    assert_eq!(first.applied, 6, "{first:?}");
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), "default");
    let name = plinth_api::names::health_cronjob_name("default", "web-health");
    let cj = cronjobs.get(&name).await.unwrap();
    let spec = cj.spec.unwrap();
    assert_eq!(spec.schedule, "*/5 * * * *");
    let pod = spec.job_template.spec.unwrap().template.spec.unwrap();
    let init: Vec<_> = pod
        .init_containers
        .unwrap()
        .iter()
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(init, ["reader", "probe"]);
    assert_eq!(pod.containers[0].name, "health-state-creator");
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    assert_eq!(count(&sas).await, 1);
    let role_binding_in_apps: Api<k8s_openapi::api::rbac::v1::RoleBinding> =
        Api::namespaced(client.clone(), "apps");
    assert_eq!(count(&role_binding_in_apps).await, 1);

    // Settled: nothing is sent again.
    let second = agent.sync_once().await;
    assert_eq!((second.applied, second.deleted), (0, 0), "{second:?}");

    // A check's record; then the definition goes: CronJob, RBAC and record go with it.
    let records: Api<HealthRecord> = Api::namespaced(client.clone(), "default");
    records
        .create(
            &PostParams::default(),
            &serde_json::from_value(record("healthy", 100)).unwrap(),
        )
        .await
        .unwrap();
    hds.delete("web-health", &DeleteParams::default())
        .await
        .unwrap();
    let gone = agent.sync_once().await;
    assert!(gone.errors.is_empty(), "{:?}", gone.errors);
    assert_eq!(gone.deleted, 7, "{gone:?}");
    assert!(cronjobs.get_opt(&name).await.unwrap().is_none());
    assert_eq!(count(&sas).await, 0);
    assert_eq!(count(&Api::<Role>::all(client.clone())).await, 0);
    assert_eq!(count(&Api::<ClusterRole>::all(client.clone())).await, 0);
    assert!(records.get_opt("one-web-health").await.unwrap().is_none());
}

#[tokio::test]
async fn records_reach_the_git_store_the_configmap_names_and_leave_it_with_their_definition() {
    let server = server_with_crds().await;
    let client = server.client();
    let dir = tempfile::tempdir().unwrap();
    let bare = dir.path().join("health.git");
    git(
        dir.path(),
        &["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()],
    );
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "plinth-agent");
    let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    ns.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "plinth-agent"}})).unwrap(),
    )
    .await
    .unwrap();
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": names::STORE_CONFIGMAP, "namespace": "plinth-agent"},
            "data": {"stateStoreKind": "GitStateStore", "url": format!("file://{}", bare.display()),
                     "branch": "main", "path": "health"},
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    let hds: Api<HealthDefinition> = Api::namespaced(client.clone(), "default");
    hds.create(&PostParams::default(), &definition())
        .await
        .unwrap();
    let records: Api<HealthRecord> = Api::namespaced(client.clone(), "default");
    records
        .create(
            &PostParams::default(),
            &serde_json::from_value(record("healthy", 100)).unwrap(),
        )
        .await
        .unwrap();

    let mut cfg = HealthAgentConfig::new(dir.path().join("work"));
    cfg.writer.flush_window = Duration::from_millis(200);
    cfg.interval = Duration::from_millis(500);
    let agent = HealthAgent::new(cfg, client.clone());
    let task = tokio::spawn(agent.run(std::future::pending()));

    wait_for("the healthy record", || {
        show(&bare).is_some_and(|t| t.contains("state: healthy"))
    })
    .await;
    // The record says when the platform should expect the next one: the definition's
    // schedule, and the Git writer's hourly heartbeat (an unchanged state is rewritten
    // at most once an hour, so no commit firehose).
    let text = show(&bare).unwrap();
    let doc: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(
        doc["metadata"]["annotations"][names::SCHEDULE_ANNOTATION],
        "*/5 * * * *",
        "{text}"
    );
    assert_eq!(
        doc["metadata"]["annotations"][names::REFRESH_ANNOTATION],
        "3600",
        "{text}"
    );

    // A new run with a new state is written; one with the same state is not.
    records
        .patch(
            "one-web-health",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"state": "unhealthy", "lastRun": 160}})),
        )
        .await
        .unwrap();
    wait_for("the unhealthy record", || {
        show(&bare).is_some_and(|t| t.contains("state: unhealthy"))
    })
    .await;
    let commits = git(
        dir.path(),
        &[
            "--git-dir",
            bare.to_str().unwrap(),
            "rev-list",
            "--count",
            "main",
        ],
    );
    records
        .patch(
            "one-web-health",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"lastRun": 220}})),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = git(
        dir.path(),
        &[
            "--git-dir",
            bare.to_str().unwrap(),
            "rev-list",
            "--count",
            "main",
        ],
    );
    assert_eq!(commits, after, "an unchanged state wrote a commit");

    hds.delete("web-health", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the record to leave the store", || show(&bare).is_none()).await;
    task.abort();
}
