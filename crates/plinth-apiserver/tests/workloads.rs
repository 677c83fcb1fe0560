//! Kubernetes defaulting of workload kinds and Event bookkeeping: a Job's selector and
//! Pod template labels, Event first/last timestamps and counts, and Plinth's shared
//! Event recorder aggregating repeats.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event as CoreEvent, ObjectReference};
use k8s_openapi::api::events::v1::Event as NewEvent;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use plinth_api::events::{EventRecorder, EventType};
use plinth_apiserver::testing::TestServer;
use serde_json::json;

#[tokio::test]
async fn a_job_selects_only_its_own_pods() {
    let ts = TestServer::start().await.unwrap();
    let jobs: Api<Job> = Api::namespaced(ts.client(), "default");
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "first"},
        "spec": {"template": {"metadata": {"labels": {"team": "a"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}
    }))
    .unwrap();
    let created = jobs.create(&PostParams::default(), &job).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let spec = created.spec.unwrap();
    assert_eq!(
        spec.selector.unwrap().match_labels.unwrap(),
        [(
            "batch.kubernetes.io/controller-uid".to_string(),
            uid.clone()
        )]
        .into()
    );
    let labels = spec.template.metadata.unwrap().labels.unwrap();
    assert_eq!(labels["batch.kubernetes.io/controller-uid"], uid);
    assert_eq!(labels["controller-uid"], uid);
    assert_eq!(labels["batch.kubernetes.io/job-name"], "first");
    assert_eq!(labels["job-name"], "first");
    assert_eq!(labels["team"], "a");

    // A manual selector is the user's.
    let manual: Job = serde_json::from_value(json!({
        "metadata": {"name": "manual"},
        "spec": {"manualSelector": true, "selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "x"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}
    }))
    .unwrap();
    let m = jobs.create(&PostParams::default(), &manual).await.unwrap();
    let ms = m.spec.unwrap();
    assert_eq!(
        ms.selector.unwrap().match_labels.unwrap(),
        [("app".to_string(), "x".to_string())].into()
    );
    assert!(
        !ms.template
            .metadata
            .unwrap()
            .labels
            .unwrap()
            .contains_key("job-name")
    );
}

#[tokio::test]
async fn events_with_only_an_event_time_get_timestamps_and_a_count() {
    let ts = TestServer::start().await.unwrap();
    let new: Api<NewEvent> = Api::namespaced(ts.client(), "default");
    let ev: NewEvent = serde_json::from_value(json!({
        "metadata": {"name": "e1"},
        "eventTime": "2026-01-01T00:00:00.123456Z",
        "reportingController": "c", "reportingInstance": "c",
        "action": "Reconcile", "reason": "Created", "type": "Normal", "note": "n",
        "regarding": {"apiVersion": "v1", "kind": "ConfigMap", "name": "cfg", "namespace": "default"}}))
    .unwrap();
    new.create(&PostParams::default(), &ev).await.unwrap();
    let core: Api<CoreEvent> = Api::namespaced(ts.client(), "default");
    let e = core.get("e1").await.unwrap();
    assert_eq!(
        e.first_timestamp.unwrap().0.to_string(),
        "2026-01-01T00:00:00Z"
    );
    assert_eq!(
        e.last_timestamp.unwrap().0.to_string(),
        "2026-01-01T00:00:00Z"
    );
    assert_eq!(e.count, Some(1));
    // A series update (kube-runtime's recorder) moves lastTimestamp and count.
    new.patch(
        "e1",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"series": {"count": 3, "lastObservedTime": "2026-01-01T00:05:00.000000Z"}}),
        ),
    )
    .await
    .unwrap();
    let e = core.get("e1").await.unwrap();
    assert_eq!(
        e.first_timestamp.unwrap().0.to_string(),
        "2026-01-01T00:00:00Z"
    );
    assert_eq!(
        e.last_timestamp.unwrap().0.to_string(),
        "2026-01-01T00:05:00Z"
    );
    assert_eq!(e.count, Some(3));
}

#[tokio::test]
async fn the_recorder_folds_repeats_into_one_event_with_a_count() {
    let ts = TestServer::start().await.unwrap();
    let recorder = EventRecorder::new(ts.client(), "job-controller");
    let job = ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: Some("j".into()),
        namespace: Some("default".into()),
        uid: Some("u1".into()),
        ..Default::default()
    };
    for _ in 0..3 {
        recorder
            .try_record(&job, EventType::Warning, "BackoffLimitExceeded", "limit")
            .await
            .unwrap();
    }
    recorder
        .try_record(
            &job,
            EventType::Normal,
            "SuccessfulCreate",
            "Created pod: j-abcde",
        )
        .await
        .unwrap();
    let core: Api<CoreEvent> = Api::namespaced(ts.client(), "default");
    let mut events = core.list(&ListParams::default()).await.unwrap().items;
    events.sort_by_key(|e| e.reason.clone());
    assert_eq!(events.len(), 2, "{events:?}");
    let repeated = &events[0];
    assert_eq!(repeated.reason.as_deref(), Some("BackoffLimitExceeded"));
    assert_eq!(repeated.count, Some(3));
    assert_eq!(repeated.type_.as_deref(), Some("Warning"));
    assert_eq!(
        repeated
            .source
            .as_ref()
            .and_then(|s| s.component.as_deref()),
        Some("job-controller")
    );
    assert!(repeated.first_timestamp.is_some());
    assert!(repeated.last_timestamp >= repeated.first_timestamp);
    assert_eq!(events[1].count, Some(1));
}
