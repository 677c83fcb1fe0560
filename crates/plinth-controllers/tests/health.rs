//! Health on the platform against real peers: the HealthRecord controller on the
//! embedded API server, HealthSources reading moto (with IAM enforced, through a
//! read-only key) and a local Git repository, the history on a manual clock, and the
//! `plinth health` report.

use crate::health_support;

use health_support::*;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use plinth_api::constants::{finalizers, health as names};
use plinth_api::{HealthRecord, HealthSource};
use plinth_controllers::health::history;
use plinth_statestore::{StoreError, WriteOp, WriteRequest};
use serde_json::{Value, json};

async fn put(store: &plinth_statestore::StateStore, ops: Vec<WriteOp>) {
    store
        .write(WriteRequest {
            name: "test".into(),
            ops,
        })
        .await
        .expect("store write");
}

fn put_op(path: &str, content: Vec<u8>) -> WriteOp {
    WriteOp::Put {
        path: path.into(),
        content,
    }
}

/// Records of one request only are aggregated, worst first; the overall change is
/// evented; deleting a record rebuilds without it; the finalizer is released even when
/// the request is gone; deleting... and the history follows the manual clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn records_aggregate_per_request_and_history_follows_the_clock() {
    let env = start().await;
    let a = env.create_request("default", "a").await;
    env.create_request("default", "b").await;
    let created: jiff::Timestamp = a.metadata.creation_timestamp.clone().unwrap().0;
    env.clock.set(created);
    env.clock.advance(30);
    env.apply_record(record("a-check-1", "default", "a", "healthy", 100))
        .await;
    let st = env.wait_state("default", "a", "healthy").await;
    assert_eq!(st["healthHistory"]["firstHealthyAfterSeconds"], 30);
    env.clock.advance(60);
    env.apply_record(record("a-check-2", "default", "a", "degraded", 101))
        .await;
    // A record for `b`, and one for a request `a` of another Promise, must not mix in.
    env.apply_record(record("b-check", "default", "b", "unhealthy", 102))
        .await;
    let mut foreign = record("other-a", "default", "a", "unhealthy", 103);
    foreign["data"]["promiseRef"]["name"] = json!("other");
    env.apply_record(foreign).await;
    let st = env.wait_state("default", "a", "degraded").await;
    let recs = st["healthStatus"]["healthRecords"].as_array().unwrap();
    assert_eq!(recs.len(), 2, "{st:#}");
    assert_eq!(
        recs[0]["source"],
        json!({"name": "a-check-1", "namespace": "default"})
    );
    assert_eq!(recs[0]["lastRun"], 100);
    assert_eq!(recs[0]["details"], json!({"check": "a-check-1"}));
    assert_eq!(recs[1]["state"], "degraded");
    env.wait_state("default", "b", "unhealthy").await;
    let rec = env.records("default").get("a-check-1").await.unwrap();
    assert!(
        rec.finalizers()
            .iter()
            .any(|f| f == finalizers::HEALTH_RECORD_CLEANUP)
    );
    // Events on the request when the overall state changes.
    wait_for("Warning HealthRecord event on a", || async {
        env.events("Healthchecktest", "a", names::RECORD_EVENT_REASON)
            .await
            .iter()
            .any(|(t, n)| t == "Warning" && n == "Health state is degraded")
    })
    .await;

    // unhealthy for 10 minutes, then recovered.
    env.clock.advance(60);
    env.apply_record(record("a-check-2", "default", "a", "unhealthy", 200))
        .await;
    env.wait_state("default", "a", "unhealthy").await;
    env.clock.advance(600);
    env.delete_record("default", "a-check-2").await;
    let st = env.wait_state("default", "a", "healthy").await;
    let transitions: Vec<(String, String)> = st["healthHistory"]["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["state"].as_str().unwrap().into(),
                t["time"].as_str().unwrap().into(),
            )
        })
        .collect();
    let at = |s: i64| {
        plinth_controllers::health::clock::rfc3339(created + jiff::SignedDuration::from_secs(s))
    };
    assert_eq!(
        transitions,
        vec![
            ("healthy".into(), at(30)),
            ("degraded".into(), at(90)),
            ("unhealthy".into(), at(150)),
            ("healthy".into(), at(750)),
        ]
    );
    assert_eq!(st["healthHistory"]["lastRecoverySeconds"], 600);
    wait_for("a-check-2 gone", || async {
        env.records("default")
            .get_opt("a-check-2")
            .await
            .unwrap()
            .is_none()
    })
    .await;

    // The history `plinth health` reports from: at 750 + 2850 = 3600 s after creation,
    // the last hour saw 60 s of degraded and 600 s of unhealthy out of 3570 s observed;
    // the unhealthy spell was decided by the record that went unhealthy.
    env.clock.advance(2850);
    let history = history::HealthHistory::from_status(&st);
    let up = history::uptime(&history, env.clock_now(), 3600).expect("an uptime for the hour");
    let want = 100.0 * (3570.0 - 660.0) / 3570.0;
    assert!((up - want).abs() < 0.05, "uptime {up}, want {want}");
    assert_eq!(history.first_healthy_after_seconds, Some(30));
    assert_eq!(history.last_recovery_seconds, Some(600));
    assert!(
        history
            .transitions
            .iter()
            .any(|t| t.state == "unhealthy" && t.source == "default/a-check-2"),
        "{history:?}"
    );

    // The request goes first: the record's finalizer is still released.
    env.requests("default")
        .delete("b", &DeleteParams::default())
        .await
        .unwrap();
    env.delete_record("default", "b-check").await;
    wait_for("b-check released", || async {
        env.records("default")
            .get_opt("b-check")
            .await
            .unwrap()
            .is_none()
    })
    .await;
    // The Promise goes first: same.
    Api::<kube::api::DynamicObject>::all_with(
        env.client.clone(),
        &plinth_controllers::support::resources::promise_resource(),
    )
    .delete("other", &DeleteParams::default())
    .await
    .unwrap();
    env.delete_record("default", "other-a").await;
    wait_for("other-a released", || async {
        env.records("default")
            .get_opt("other-a")
            .await
            .unwrap()
            .is_none()
    })
    .await;
}

/// The exact HealthSource YAML is accepted; a HealthSource polls moto through a
/// key that cannot write; good records apply and aggregate while every kind of bad
/// record is skipped, evented once and counted; a vanished object removes its record;
/// deleting the HealthSource removes its records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn bucket_source_applies_good_records_and_rejects_bad_ones() {
    let Some(moto) = moto(&["health"]).await else {
        return;
    };
    let env = start().await;
    // The documented shape, verbatim.
    let doc: Value = serde_saphyr::from_str(
        "apiVersion: platform.syntasso.io/v1alpha1\nkind: HealthSource\nmetadata: {name: worker-1}\nspec:\n  bucket: {endpoint: s3.example.test, bucketName: health, authMethod: accessKey,\n           secretRef: {name: health-store-reader, namespace: default}}\n  path: health\n  pollInterval: 10m\n",
    )
    .unwrap();
    let mut doc2 = doc.clone();
    env.create_source(doc).await;
    let hs = env.source("worker-1").await;
    assert_eq!(hs.spec.poll_interval.as_deref(), Some("10m"));
    assert_eq!(hs.spec.bucket.as_ref().unwrap().bucket_name, "health");
    Api::<HealthSource>::all(env.client.clone())
        .delete("worker-1", &DeleteParams::default())
        .await
        .unwrap();

    // The reader's key cannot write.
    let reader = moto
        .store("health", &moto.reader)
        .await
        .expect("reader lists");
    let denied = reader
        .write(WriteRequest {
            name: "t".into(),
            ops: vec![put_op("x.yaml", b"x".to_vec())],
        })
        .await;
    assert!(
        matches!(denied, Err(StoreError::PermissionDenied { .. })),
        "{denied:?}"
    );
    let writer = moto.store("health", &moto.admin).await.unwrap();

    env.create_request("default", "a").await;
    env.create_request("default", "b").await;
    env.create_request("team-a", "c").await;
    // A GitOps-managed record the source must not fight over.
    env.apply_record(record("gitops-owned", "default", "b", "healthy", 1))
        .await;
    let mut bad_kind = record("x", "default", "a", "healthy", 1);
    bad_kind["kind"] = json!("ConfigMap");
    let mut no_ref = record("no-ref", "default", "a", "healthy", 1);
    no_ref["data"]["resourceRef"] = json!({"namespace": "default"});
    let mut bad_state = record("bad-state", "default", "a", "fine", 1);
    bad_state["data"]["state"] = json!("fine");
    put(
        &writer,
        vec![
            put_op(
                "health/a-1.yaml",
                yaml(&record("a-1", "default", "a", "healthy", 100)),
            ),
            put_op(
                "health/a-2.yaml",
                yaml(&record("a-2", "default", "a", "degraded", 100)),
            ),
            put_op(
                "health/c.yaml",
                yaml(&record("c-1", "team-a", "c", "ready", 100)),
            ),
            put_op("health/broken.yaml", b"data: [unclosed".to_vec()),
            put_op("health/kind.yaml", yaml(&bad_kind)),
            put_op("health/no-ref.yaml", yaml(&no_ref)),
            put_op(
                "health/dangling.yaml",
                yaml(&record("d", "default", "nope", "healthy", 1)),
            ),
            put_op("health/state.yaml", yaml(&bad_state)),
            put_op(
                "health/gitops.yaml",
                yaml(&record("gitops-owned", "default", "b", "unhealthy", 5)),
            ),
        ],
    )
    .await;
    env.secret(
        "health-store-reader",
        json!({"accessKeyID": moto.reader.0, "secretAccessKey": moto.reader.1}),
    )
    .await;
    doc2["spec"]["bucket"]["endpoint"] = json!(format!("127.0.0.1:{}", moto.port));
    doc2["spec"]["bucket"]["insecure"] = json!(true);
    env.create_source(doc2).await;

    let hs = env.poll_now("worker-1", "1").await;
    let st = hs.status.clone().unwrap();
    let ready = st
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", names::POLLED),
        "{st:?}"
    );
    assert_eq!(st.records, Some(3), "{st:?}");
    assert_eq!(st.rejected, Some(6), "{st:?}");
    let reasons: Vec<(String, String)> = st
        .rejected_records
        .clone()
        .unwrap()
        .into_iter()
        .map(|r| (r.key, r.reason))
        .collect();
    let reason_of = |k: &str| {
        reasons
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, r)| r.clone())
            .unwrap_or_default()
    };
    assert!(
        reason_of("broken.yaml").starts_with("unparsable YAML"),
        "{reasons:?}"
    );
    assert!(reason_of("kind.yaml").contains("ConfigMap"), "{reasons:?}");
    assert!(
        reason_of("no-ref.yaml").contains("data.resourceRef.name"),
        "{reasons:?}"
    );
    assert!(
        reason_of("dangling.yaml").contains("default/nope not found"),
        "{reasons:?}"
    );
    assert!(reason_of("state.yaml").contains("\"fine\""), "{reasons:?}");
    assert!(
        reason_of("gitops.yaml").contains("another manager"),
        "{reasons:?}"
    );
    let st_a = env.wait_state("default", "a", "degraded").await;
    assert_eq!(
        st_a["healthStatus"]["healthRecords"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    env.wait_state("team-a", "c", "ready").await;
    let rec = env.records("default").get("a-1").await.unwrap();
    assert_eq!(
        rec.labels().get(names::SOURCE_LABEL).map(String::as_str),
        Some("worker-1")
    );
    assert_eq!(
        rec.annotations()
            .get(names::SOURCE_KEY_ANNOTATION)
            .map(String::as_str),
        Some("a-1.yaml")
    );
    // The GitOps record was left alone.
    let g = env.records("default").get("gitops-owned").await.unwrap();
    assert_eq!(g.spec.data.last_run, Some(1));
    // Each rejection is evented once, naming the key.
    let ev = env
        .events("HealthSource", "worker-1", names::REJECTED_REASON)
        .await;
    assert!(
        ev.iter()
            .any(|(t, n)| t == "Warning" && n.starts_with("broken.yaml: unparsable YAML")),
        "{ev:?}"
    );
    assert_eq!(ev.len(), 5, "{ev:?}");
    let conflicts = env
        .events("HealthSource", "worker-1", names::CONFLICT_REASON)
        .await;
    assert_eq!(conflicts.len(), 1, "{conflicts:?}");

    // A second poll with nothing changed: no new events, no status write.
    let rv = env.source("worker-1").await.metadata.resource_version;
    let hs = env.poll_now("worker-1", "2").await;
    assert_ne!(
        hs.metadata.resource_version, rv,
        "the handled trigger is recorded"
    );
    let rv = hs.metadata.resource_version.clone();
    assert_eq!(
        env.events("HealthSource", "worker-1", names::REJECTED_REASON)
            .await
            .len(),
        5
    );
    // Settled: nothing more is written.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(env.source("worker-1").await.metadata.resource_version, rv);

    // An older lastRun (out of order) is rejected; a newer one applies; a removed
    // object removes its record; a second source cannot claim request `a`.
    put(
        &writer,
        vec![
            put_op(
                "health/a-1.yaml",
                yaml(&record("a-1", "default", "a", "unhealthy", 50)),
            ),
            put_op(
                "health/a-2.yaml",
                yaml(&record("a-2", "default", "a", "healthy", 200)),
            ),
            WriteOp::Delete {
                path: "health/c.yaml".into(),
            },
            put_op(
                "other/a-9.yaml",
                yaml(&record("a-9", "default", "a", "unhealthy", 300)),
            ),
        ],
    )
    .await;
    let hs = env.poll_now("worker-1", "3").await;
    assert_ne!(hs.metadata.resource_version, rv);
    let st = hs.status.unwrap();
    assert!(
        st.rejected_records
            .unwrap()
            .iter()
            .any(|r| r.key == "a-1.yaml" && r.reason.contains("older than the applied 100")),
    );
    env.wait_state("default", "a", "healthy").await;
    wait_for("c-1 removed", || async {
        env.records("team-a")
            .get_opt("c-1")
            .await
            .unwrap()
            .is_none()
    })
    .await;
    let mut other = serde_json::to_value(env.source("worker-1").await).unwrap();
    other["metadata"] = json!({"name": "worker-2"});
    other["spec"]["path"] = json!("other");
    other.as_object_mut().unwrap().remove("status");
    env.create_source(other).await;
    let hs2 = env.poll_now("worker-2", "1").await;
    let st2 = hs2.status.unwrap();
    assert_eq!(st2.records, Some(0), "{st2:?}");
    assert!(
        st2.rejected_records.unwrap()[0]
            .reason
            .contains("claimed by HealthSource worker-1")
    );

    // Deleting the source removes its records (owner references).
    Api::<HealthSource>::all(env.client.clone())
        .delete("worker-1", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("worker-1's records removed", || async {
        let all: Vec<HealthRecord> = Api::<HealthRecord>::all(env.client.clone())
            .list(&Default::default())
            .await
            .unwrap()
            .items;
        !all.iter()
            .any(|r| r.labels().get(names::SOURCE_LABEL).map(String::as_str) == Some("worker-1"))
    })
    .await;
    // With its records gone, request `a` is free for worker-2.
    env.poll_now("worker-2", "2").await;
    env.wait_state("default", "a", "unhealthy").await;
}

/// A Git branch as a health store: before anything is written (no branch yet) the source
/// is Ready with no records, records committed by a Destination are applied, a new commit
/// is picked up on the manual trigger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn git_source_applies_committed_records() {
    let env = start().await;
    env.create_request("default", "a").await;
    let bare = env.dir.path().join("health.git");
    // No commit at all (as `git init` leaves it): the branch does not exist yet.
    git(
        env.dir.path(),
        &["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()],
    );
    env.create_source(json!({
        "apiVersion": "platform.syntasso.io/v1alpha1",
        "kind": "HealthSource",
        "metadata": {"name": "git-1"},
        "spec": {"git": {"url": format!("file://{}", bare.display()), "branch": "main"},
                 "path": "worker-1", "pollInterval": "10s"},
    }))
    .await;
    // Nothing written yet: an empty store, not a failing one (a failing poll would back
    // off, and the first record would wait for the backoff).
    let hs = env.poll_now("git-1", "0").await;
    let status = hs.status.unwrap();
    let ready = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .expect("Ready condition");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", plinth_api::constants::health::POLLED),
        "{ready:?}"
    );
    // ... and says so, so that a misspelt branch shows.
    assert!(
        ready.message.contains("the branch does not exist yet"),
        "{ready:?}"
    );
    assert_eq!(status.records, Some(0));

    let work = env.dir.path().join("work");
    git(
        env.dir.path(),
        &["clone", "-q", bare.to_str().unwrap(), "work"],
    );
    std::fs::create_dir_all(work.join("worker-1")).unwrap();
    std::fs::write(
        work.join("worker-1/a.yaml"),
        yaml(&record("a-git", "default", "a", "healthy", 10)),
    )
    .unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-qm", "health"]);
    git(&work, &["push", "-q", "origin", "HEAD:main"]);
    env.poll_now("git-1", "1").await;
    env.wait_state("default", "a", "healthy").await;
    std::fs::write(
        work.join("worker-1/a.yaml"),
        yaml(&record("a-git", "default", "a", "unhealthy", 20)),
    )
    .unwrap();
    git(&work, &["commit", "-qam", "unhealthy"]);
    git(&work, &["push", "-q", "origin", "HEAD:main"]);
    let hs = env.poll_now("git-1", "2").await;
    assert_eq!(hs.status.unwrap().records, Some(1));
    env.wait_state("default", "a", "unhealthy").await;

    // The branch removed behind the source: its record stays, and the source says why.
    git(
        env.dir.path(),
        &[
            "--git-dir",
            bare.to_str().unwrap(),
            "update-ref",
            "-d",
            "refs/heads/main",
        ],
    );
    let hs = env.poll_now("git-1", "3").await;
    let ready = hs
        .status
        .unwrap()
        .conditions
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .expect("Ready condition");
    assert_eq!(ready.status, "False", "{ready:?}");
    assert!(ready.message.contains("no longer exists"), "{ready:?}");
    assert!(env.records("default").get("a-git").await.is_ok());
    env.wait_state("default", "a", "unhealthy").await;
}

/// A pollInterval under 10 s or not a Go duration makes the source not Ready, naming the
/// field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn invalid_poll_interval_is_reported() {
    let env = start().await;
    env.create_source(json!({
        "apiVersion": "platform.syntasso.io/v1alpha1",
        "kind": "HealthSource",
        "metadata": {"name": "fast"},
        "spec": {"git": {"url": "file:///nowhere.git"}, "pollInterval": "5s"},
    }))
    .await;
    wait_for("fast not Ready", || async {
        env.source("fast")
            .await
            .status
            .and_then(|s| s.conditions)
            .is_some_and(|c| {
                c.iter().any(|c| {
                    c.reason == names::INVALID_SPEC
                        && c.message.contains("spec.pollInterval \"5s\"")
                })
            })
    })
    .await;
}

impl Env {
    fn clock_now(&self) -> jiff::Timestamp {
        use plinth_controllers::health::Clock;
        self.clock.now()
    }
}

/// Azure Blob Storage (Azurite) with a read+list SAS: the SAS cannot write, and the
/// HealthSource applies the records it reads with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn azure_source_reads_with_a_read_only_sas() {
    let Some((azurite, sas)) = azurite("health").await else {
        return;
    };
    let sas_auth = plinth_statestore::BucketAuth::AzureSas {
        account: AZURITE_ACCOUNT.into(),
        token: sas.clone(),
    };
    let reader = azurite.store("health", sas_auth).await.expect("SAS lists");
    let denied = reader
        .write(WriteRequest {
            name: "t".into(),
            ops: vec![put_op("x.yaml", b"x".to_vec())],
        })
        .await;
    assert!(
        matches!(
            denied,
            Err(StoreError::PermissionDenied { .. } | StoreError::AuthFailed { .. })
        ),
        "{denied:?}"
    );
    let writer = azurite
        .store(
            "health",
            plinth_statestore::BucketAuth::AccessKey {
                id: AZURITE_ACCOUNT.into(),
                secret: AZURITE_KEY.into(),
            },
        )
        .await
        .unwrap();
    let env = start().await;
    env.create_request("default", "a").await;
    put(
        &writer,
        vec![
            put_op(
                "worker-1/a.yaml",
                yaml(&record("a-az", "default", "a", "degraded", 1)),
            ),
            put_op("worker-1/bad.yaml", b"kind: [".to_vec()),
        ],
    )
    .await;
    env.secret("azure-reader", json!({"sasToken": sas})).await;
    env.create_source(json!({
        "apiVersion": "platform.syntasso.io/v1alpha1",
        "kind": "HealthSource",
        "metadata": {"name": "azure-1"},
        "spec": {"azure": {"account": AZURITE_ACCOUNT, "container": "health",
                           "endpoint": azurite.endpoint(),
                           "secretRef": {"name": "azure-reader"}},
                 "path": "worker-1", "pollInterval": "10s"},
    }))
    .await;
    env.wait_state("default", "a", "degraded").await;
    let hs = env.poll_now("azure-1", "1").await;
    let st = hs.status.unwrap();
    assert_eq!((st.records, st.rejected), (Some(1), Some(1)), "{st:?}");
}
