//! CronJobs through the embedded API server: the scheduler creates the Job, writes the
//! CronJob's status once, and prunes history — with a clock the test sets.

use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use plinth_apiserver::testing::TestServer;
use plinth_runner::cronjob::CronJobController;

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
    let controller = CronJobController::new(client.clone());
    let t = *now.lock().unwrap();
    controller.sync(&get().await, t).await.unwrap();
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
    controller.sync(&get().await, first).await.unwrap();
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

#[tokio::test]
async fn a_schedule_that_never_fires_gets_one_invalid_schedule_warning_per_generation() {
    let server = TestServer::start().await.expect("api server");
    let client = server.client();
    let cjs: Api<CronJob> = Api::namespaced(client.clone(), "default");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let cj: CronJob = serde_json::from_value(serde_json::json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "pi", "namespace": "default"},
        "spec": {
            "schedule": "59 23 31 2 *",
            "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}}}}
        }
    }))
    .unwrap();
    let created = cjs.create(&PostParams::default(), &cj).await.unwrap();
    let controller = CronJobController::new(client.clone());
    let now = Timestamp::now();
    controller.sync(&created, now).await.unwrap();
    let list = events.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(list.len(), 1, "{list:?}");
    let e = &list[0];
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert_eq!(e.reason.as_deref(), Some("InvalidSchedule"));
    assert_eq!(
        e.message.as_deref(),
        Some(
            "invalid schedule: 59 23 31 2 * : time difference between two schedules is less than 1 second"
        )
    );
    assert_eq!(e.involved_object.kind.as_deref(), Some("CronJob"));
    assert_eq!(e.involved_object.name.as_deref(), Some("pi"));
    assert_eq!(
        e.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("cronjob-controller")
    );
    // Settled: more ticks write nothing (neither the Event's count nor the CronJob).
    let rv = cjs.get("pi").await.unwrap().metadata.resource_version;
    for s in 1..4 {
        let t = now + jiff::SignedDuration::from_secs(s);
        controller
            .sync(&cjs.get("pi").await.unwrap(), t)
            .await
            .unwrap();
    }
    let again = events.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].count, e.count);
    assert_eq!(
        again[0].metadata.resource_version,
        e.metadata.resource_version
    );
    assert_eq!(cjs.get("pi").await.unwrap().metadata.resource_version, rv);
}
