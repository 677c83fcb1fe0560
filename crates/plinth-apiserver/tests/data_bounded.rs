//! The data directory stays bounded under churn: compaction of the revision log,
//! incremental vacuum and WAL checkpoint keep the database file from growing when
//! objects keep being created, changed and deleted; Events expire after the event TTL.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Event, ObjectReference};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use plinth_apiserver::testing::TestServer;
use serde_json::json;

/// One round of churn: 100 ConfigMaps of about 4 KiB created, changed three times and
/// deleted, and 50 Events recorded.
async fn churn(client: &kube::Client, round: usize) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let filler = "x".repeat(4096);
    for i in 0..100 {
        let mut c = ConfigMap::default();
        c.metadata.name = Some(format!("c-{i}"));
        c.data = Some(BTreeMap::from([("v".into(), filler.clone())]));
        api.create(&PostParams::default(), &c).await.unwrap();
    }
    for step in 0..3 {
        for i in 0..100 {
            let patch = json!({"data": {"step": format!("{round}-{step}")}});
            api.patch(
                &format!("c-{i}"),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .unwrap();
        }
    }
    for i in 0..100 {
        api.delete(&format!("c-{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    for i in 0..50 {
        let mut e = Event::default();
        e.metadata.name = Some(format!("e-{round}-{i}"));
        e.involved_object = ObjectReference {
            kind: Some("ConfigMap".into()),
            name: Some(format!("c-{i}")),
            namespace: Some("default".into()),
            ..Default::default()
        };
        e.reason = Some("Churn".into());
        e.message = Some(filler[..512].to_string());
        events.create(&PostParams::default(), &e).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_stops_growing_under_churn() {
    let ts = TestServer::start_with(|c| {
        // Compaction and maintenance are run by the test after each round.
        c.compaction_interval = Duration::from_secs(3600);
        c.maintenance_interval = Duration::from_secs(3600);
        c.event_ttl = Duration::from_secs(3600);
    })
    .await
    .unwrap();
    let client = ts.client();
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let mut sizes = Vec::new();
    for round in 0..12 {
        churn(&client, round).await;
        // One round stands for an hour: its Events have expired by the next.
        ts.server()
            .expire_events(
                Duration::from_secs(3600),
                jiff::Timestamp::now() + jiff::SignedDuration::from_secs(3601),
            )
            .await
            .unwrap();
        ts.server().compact(1000).await.unwrap();
        ts.server().maintain().await.unwrap();
        sizes.push(ts.server().data_file_size());
    }
    // 12 rounds wrote 12 × 500 revisions of ~4 KiB (~24 MiB) and 600 Events; without
    // compaction and vacuum the file would grow by ~2 MiB a round.
    let after3 = sizes[2];
    let last = *sizes.last().unwrap();
    assert!(
        last <= after3 + after3 / 5,
        "database grew from {after3} bytes after 3 rounds to {last} after 12: {sizes:?}"
    );
    let left = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .len();
    assert_eq!(left, 0, "every round's Events expired");
    // With every churned object gone and the whole log compacted, the free pages go
    // back to the file system: the file shrinks to about the live objects.
    ts.server().compact(0).await.unwrap();
    ts.server().maintain().await.unwrap();
    let emptied = ts.server().data_file_size();
    assert!(
        emptied < 1024 * 1024 && emptied < after3 / 2,
        "database of {emptied} bytes after everything was deleted and compacted (peak {after3})"
    );
}

#[tokio::test]
async fn events_expire_after_the_ttl() {
    let ts = TestServer::start_with(|c| c.event_ttl = Duration::from_secs(1))
        .await
        .unwrap();
    let events: Api<Event> = Api::namespaced(ts.client(), "default");
    let mut e = Event::default();
    e.metadata.name = Some("short-lived".into());
    e.involved_object = ObjectReference {
        kind: Some("Pod".into()),
        name: Some("p".into()),
        namespace: Some("default".into()),
        ..Default::default()
    };
    e.reason = Some("Test".into());
    events.create(&PostParams::default(), &e).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while events.get_opt("short-lived").await.unwrap().is_some() {
        assert!(
            Instant::now() < deadline,
            "the Event was not removed after its TTL"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
