//! CronJobs through the embedded API server: the scheduler creates the Job, writes the
//! CronJob's status once, and prunes history — with a clock the test sets.

use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::api::{Api, ListParams, PostParams};
use plinth_apiserver::testing::TestServer;
use plinth_runner::cronjob::sync_cronjob;

#[tokio::test]
async fn the_scheduler_creates_one_job_per_scheduled_time_through_the_api() {
    let server = TestServer::start().await.expect("api server");
    let client = server.client();
    let cjs: Api<CronJob> = Api::namespaced(client.clone(), "default");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let cj: CronJob = serde_json::from_value(serde_json::json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "check", "namespace": "default"},
        "spec": {
            "schedule": "*/5 * * * *",
            "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}}}}
        }
    }))
    .unwrap();
    let created = cjs.create(&PostParams::default(), &cj).await.unwrap();
    let born = created.metadata.creation_timestamp.clone().unwrap().0;
    // The first multiple of five minutes after creation.
    let first = Timestamp::from_second((born.as_second() / 300 + 1) * 300).unwrap();
    let now = Arc::new(Mutex::new(first));

    let get = || async { cjs.get("check").await.unwrap() };
    sync_cronjob(&client, &get().await, *now.lock().unwrap())
        .await
        .unwrap();
    let list = jobs.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let job = &list.items[0];
    assert_eq!(
        job.metadata.name.as_deref(),
        Some(format!("check-{}", first.as_second() / 60).as_str())
    );
    assert_eq!(
        job.metadata.owner_references.as_ref().unwrap()[0].uid,
        created.metadata.uid.clone().unwrap()
    );
    let status = get().await.status.unwrap();
    assert_eq!(status.last_schedule_time.unwrap().0, first);
    assert_eq!(status.active.unwrap().len(), 1);

    // The same minute again: no second Job, no status write.
    let rv = get().await.metadata.resource_version;
    sync_cronjob(&client, &get().await, first).await.unwrap();
    assert_eq!(
        jobs.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    assert_eq!(
        get().await.metadata.resource_version,
        rv,
        "settled: nothing written"
    );
}
