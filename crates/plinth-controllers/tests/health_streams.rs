//! Stream HealthSources against real servers (`redis-server`, `nats-server -js`): records
//! the health writer sends reach the request's `healthStatus`; a redelivered or older
//! message changes nothing; two platform replicas in one consumer group (Redis) or on one
//! durable consumer (NATS) apply each message once and lose none; a bad message is rejected with a Warning and acknowledged, and the
//! next good one applies; a tombstone removes the record; a record a dead replica left
//! pending is claimed (`XAUTOCLAIM`) and applied.

use crate::health_support;

use std::sync::Arc;
use std::time::Duration;

use health_support::*;
use kube::ResourceExt;
use kube::api::Api;
use plinth_api::constants::health as names;
use plinth_api::{HealthRecord, HealthState};
use plinth_statestore::health::{HealthReport, HealthWriter, HealthWriterConfig, RecordKey};
use plinth_statestore::{NatsConfig, RedisConfig, StreamConfig, StreamSink};
use serde_json::{Value, json};

fn key(request: &str, definition: &str) -> RecordKey {
    RecordKey {
        namespace: "default".into(),
        promise: PROMISE.into(),
        request: request.into(),
        definition_namespace: "default".into(),
        definition: definition.into(),
    }
}

/// The manual clock's time (2026-01-01T00:00:00Z): records near it are fresh.
const BASE: i64 = 1_767_225_600;

fn report(k: &RecordKey, state: HealthState, run_at: i64) -> HealthReport {
    HealthReport {
        key: k.clone(),
        state,
        details: Some(json!({"run": run_at})),
        run_at: jiff::Timestamp::from_second(BASE + run_at).unwrap(),
        schedule: Some("* * * * *".into()),
    }
}

/// The agent's writer on a stream: no flush window, every run a heartbeat.
fn writer(cfg: StreamConfig) -> HealthWriter {
    HealthWriter::start(
        Arc::new(StreamSink::new(cfg)),
        HealthWriterConfig {
            flush_window: Duration::ZERO,
            heartbeat_interval: Duration::from_secs(1),
            ..HealthWriterConfig::default()
        },
        Arc::new(jiff::Timestamp::now),
        Duration::from_millis(50),
    )
}

async fn redis_conn(r: &Peer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(r.redis_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

async fn xadd(conn: &mut redis::aio::MultiplexedConnection, key: &str, body: &[u8]) {
    let _: String = redis::cmd("XADD")
        .arg("health")
        .arg("*")
        .arg("key")
        .arg(key)
        .arg("record")
        .arg(body)
        .query_async(conn)
        .await
        .unwrap();
}

fn nats_cfg(n: &Peer) -> StreamConfig {
    StreamConfig::Nats(NatsConfig::new(
        vec![n.nats_url()],
        "HEALTH",
        "health.records",
    ))
}

async fn record_of(env: &Env, k: &RecordKey) -> Option<HealthRecord> {
    env.records("default")
        .get_opt(&k.record_name())
        .await
        .unwrap()
}

/// The writer's records reach the request, keep their freshness stamps, follow a change,
/// and a deleted definition's tombstone removes the record.
async fn writer_round_trip(env: &Env, w: &HealthWriter) {
    let k = key("a", "probe");
    w.report(report(&k, HealthState::Healthy, 1_000));
    env.wait_state("default", "a", "healthy").await;
    let rec = record_of(env, &k).await.expect("record applied");
    let ann = rec.annotations();
    assert_eq!(
        ann.get(names::SCHEDULE_ANNOTATION).map(String::as_str),
        Some("* * * * *")
    );
    assert_eq!(
        ann.get(names::REFRESH_ANNOTATION).map(String::as_str),
        Some("1")
    );
    assert_eq!(ann.get(names::SOURCE_KEY_ANNOTATION), Some(&k.path()));
    assert_eq!(
        rec.labels().get(names::SOURCE_LABEL).map(String::as_str),
        Some("stream-1")
    );
    w.report(report(&k, HealthState::Unhealthy, 1_060));
    env.wait_state("default", "a", "unhealthy").await;
    w.remove(&k);
    wait_for("the tombstone removes the record", || async {
        record_of(env, &k).await.is_none()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn redis_records_from_the_writer_reach_the_request() {
    let Some(r) = redis_server().await else {
        return;
    };
    let env = start().await;
    env.create_request("default", "a").await;
    redis_source(&env, &r).await;
    wait_ready(&env, "stream-1").await;
    let w = writer(StreamConfig::Redis(RedisConfig::new(
        r.redis_url(),
        "health",
    )));
    writer_round_trip(&env, &w).await;
    let st = env.source("stream-1").await.status.unwrap();
    assert_eq!(st.rejected, Some(0), "{st:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn nats_records_from_the_writer_reach_the_request() {
    let Some(n) = nats_server().await else { return };
    let env = start().await;
    env.create_request("default", "a").await;
    nats_source(&env, &n).await;
    wait_ready(&env, "stream-1").await;
    let w = writer(nats_cfg(&n));
    writer_round_trip(&env, &w).await;
}

fn doc(k: &RecordKey, state: &str, last_run: i64) -> Vec<u8> {
    yaml(&record(
        &k.record_name(),
        "default",
        &k.request,
        state,
        last_run,
    ))
}

async fn rv_of(env: &Env, ns: &str, name: &str) -> String {
    env.requests(ns)
        .get(name)
        .await
        .unwrap()
        .resource_version()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn redis_a_redelivered_or_older_record_changes_nothing() {
    let Some(r) = redis_server().await else {
        return;
    };
    let env = start().await;
    env.create_request("default", "a").await;
    env.create_request("default", "b").await;
    redis_source(&env, &r).await;
    wait_ready(&env, "stream-1").await;
    let mut conn = redis_conn(&r).await;
    let (ka, kb) = (key("a", "probe"), key("b", "probe"));
    xadd(&mut conn, &ka.path(), &doc(&ka, "healthy", 100)).await;
    env.wait_state("default", "a", "healthy").await;
    // Let the status write settle before reading the version.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (request_rv, record_rv) = (
        rv_of(&env, "default", "a").await,
        record_of(&env, &ka)
            .await
            .unwrap()
            .resource_version()
            .unwrap(),
    );
    // Redelivered, then older: neither changes anything; the marker for `b` shows both
    // were handled before it.
    xadd(&mut conn, &ka.path(), &doc(&ka, "healthy", 100)).await;
    xadd(&mut conn, &ka.path(), &doc(&ka, "unhealthy", 50)).await;
    xadd(&mut conn, &kb.path(), &doc(&kb, "degraded", 100)).await;
    env.wait_state("default", "b", "degraded").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rv_of(&env, "default", "a").await, request_rv);
    assert_eq!(
        record_of(&env, &ka)
            .await
            .unwrap()
            .resource_version()
            .unwrap(),
        record_rv
    );
    let events = env
        .events("HealthSource", "stream-1", names::REJECTED_REASON)
        .await;
    assert!(
        events.is_empty(),
        "an older message is not the Destination's error: {events:?}"
    );
    let pending: Value = redis_pending(&mut conn).await;
    assert_eq!(pending, json!(0), "every message acknowledged");
}

/// A `redis-server`, the platform with request `a` and the source `stream-1` consuming
/// it, and a connection for writing to the stream; `None` (SKIPPED) without redis-server.
async fn redis_with_source() -> Option<(Peer, Env, redis::aio::MultiplexedConnection)> {
    let r = redis_server().await?;
    let env = start().await;
    env.create_request("default", "a").await;
    redis_source(&env, &r).await;
    wait_ready(&env, "stream-1").await;
    let conn = redis_conn(&r).await;
    Some((r, env, conn))
}

async fn redis_pending(conn: &mut redis::aio::MultiplexedConnection) -> Value {
    let v: Vec<redis::Value> = redis::cmd("XPENDING")
        .arg("health")
        .arg("plinth-stream-1")
        .query_async(conn)
        .await
        .unwrap();
    match &v[0] {
        redis::Value::Int(n) => json!(n),
        other => json!(format!("{other:?}")),
    }
}

/// Two platform replicas on one consumer group (`env` has its replica started, the
/// source exists): 40 records sent by the writer are each written to the API exactly
/// once, with the `lastRun` the writer sent, and the request follows.
async fn two_replicas_apply_each_record_once(env: &Env, w: &HealthWriter) {
    // Every write to a record, seen by a watch from the start.
    let writes = Arc::new(std::sync::Mutex::new(Vec::<(String, i64)>::new()));
    let api: Api<HealthRecord> = Api::all(env.client.clone());
    let seen = writes.clone();
    let watch = tokio::spawn(async move {
        use futures::StreamExt;
        let mut s = std::pin::pin!(kube::runtime::watcher(api, Default::default()));
        // The source's writes change `data`; the HealthRecord controller's (its finalizer)
        // do not.
        let mut last = std::collections::HashMap::new();
        while let Some(Ok(ev)) = s.next().await {
            if let kube::runtime::watcher::Event::Apply(r) = ev {
                let data = serde_json::to_value(&r.spec.data).unwrap();
                if last.insert(r.name_any(), data.clone()) != Some(data) {
                    seen.lock()
                        .unwrap()
                        .push((r.name_any(), r.spec.data.last_run.unwrap_or_default()));
                }
            }
        }
    });
    wait_ready(env, "stream-1").await;
    const N: i64 = 40;
    let keys: Vec<RecordKey> = (0..N).map(|i| key("a", &format!("check-{i}"))).collect();
    for (i, k) in keys.iter().enumerate() {
        w.report(report(k, HealthState::Healthy, 1_000 + i as i64));
    }
    wait_for("every record applied", || async {
        env.records("default")
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len()
            == N as usize
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    watch.abort();
    let writes = writes.lock().unwrap().clone();
    for (i, k) in keys.iter().enumerate() {
        let mine: Vec<&(String, i64)> = writes
            .iter()
            .filter(|(n, _)| *n == k.record_name())
            .collect();
        assert_eq!(mine.len(), 1, "{}: written {mine:?}", k.record_name());
        assert_eq!(mine[0].1, BASE + 1_000 + i as i64);
    }
    env.wait_state("default", "a", "healthy").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn redis_two_replicas_share_the_group_and_apply_each_record_once() {
    let Some(r) = redis_server().await else {
        return;
    };
    let mut env = start().await;
    env.start_replica();
    env.create_request("default", "a").await;
    redis_source(&env, &r).await;
    let w = writer(StreamConfig::Redis(RedisConfig::new(
        r.redis_url(),
        "health",
    )));
    two_replicas_apply_each_record_once(&env, &w).await;
    let mut conn = redis_conn(&r).await;
    assert_eq!(redis_pending(&mut conn).await, json!(0));
    let consumers: Vec<redis::Value> = redis::cmd("XINFO")
        .arg("CONSUMERS")
        .arg("health")
        .arg("plinth-stream-1")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(consumers.len(), 2, "both replicas joined the group");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn nats_two_replicas_share_the_durable_consumer_and_apply_each_record_once() {
    let Some(n) = nats_server().await else { return };
    let mut env = start().await;
    env.start_replica();
    env.create_request("default", "a").await;
    nats_source(&env, &n).await;
    let w = writer(nats_cfg(&n));
    two_replicas_apply_each_record_once(&env, &w).await;
    // One durable consumer, nothing left to deliver or acknowledge, and a pull request
    // waiting from each replica (a lone replica leaves one).
    let js = async_nats::jetstream::new(async_nats::connect(n.nats_url()).await.unwrap());
    let stream = js.get_stream("HEALTH").await.unwrap();
    assert_eq!(
        stream.cached_info().state.consumer_count,
        1,
        "one durable consumer"
    );
    wait_for("both replicas pulling, nothing pending", || async {
        let mut consumer: async_nats::jetstream::consumer::PullConsumer =
            stream.get_consumer("plinth-stream-1").await.unwrap();
        let info = consumer.info().await.unwrap().clone();
        info.num_pending == 0 && info.num_ack_pending == 0 && info.num_waiting == 2
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn redis_a_bad_message_is_rejected_acknowledged_and_the_next_applies() {
    let Some((_r, env, mut conn)) = redis_with_source().await else {
        return;
    };
    let k = key("a", "probe");
    xadd(&mut conn, &k.path(), b"state: [unclosed").await;
    xadd(&mut conn, &k.path(), &doc(&k, "healthy", 10)).await;
    env.wait_state("default", "a", "healthy").await;
    wait_for("the rejection evented", || async {
        env.events("HealthSource", "stream-1", names::REJECTED_REASON)
            .await
            .iter()
            .any(|(t, note)| {
                t == "Warning" && note.contains("unparsable YAML") && note.contains(&k.path())
            })
    })
    .await;
    assert_eq!(
        redis_pending(&mut conn).await,
        json!(0),
        "the bad message was acknowledged"
    );
    // The good message for the same key cleared the rejection.
    wait_for("status without the rejection", || async {
        env.source("stream-1")
            .await
            .status
            .is_some_and(|s| s.rejected == Some(0))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn nats_a_bad_message_is_rejected_and_an_older_one_changes_nothing() {
    let Some(n) = nats_server().await else { return };
    let env = start().await;
    env.create_request("default", "a").await;
    env.create_request("default", "b").await;
    nats_source(&env, &n).await;
    wait_ready(&env, "stream-1").await;
    let client = async_nats::connect(n.nats_url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let publish = |k: &RecordKey, body: Vec<u8>| {
        let js = js.clone();
        let path = k.path();
        async move {
            let mut h = async_nats::HeaderMap::new();
            h.insert(plinth_statestore::stream::KEY_HEADER, path.as_str());
            js.publish_with_headers("health.records", h, body.into())
                .await
                .unwrap()
                .await
                .unwrap();
        }
    };
    let (ka, kb) = (key("a", "probe"), key("b", "probe"));
    publish(&ka, b"state: [unclosed".to_vec()).await;
    publish(&ka, doc(&ka, "healthy", 100)).await;
    env.wait_state("default", "a", "healthy").await;
    wait_for("the rejection evented", || async {
        env.events("HealthSource", "stream-1", names::REJECTED_REASON)
            .await
            .iter()
            .any(|(t, note)| t == "Warning" && note.contains("unparsable YAML"))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let request_rv = rv_of(&env, "default", "a").await;
    publish(&ka, doc(&ka, "healthy", 100)).await;
    publish(&ka, doc(&ka, "unhealthy", 50)).await;
    publish(&kb, doc(&kb, "degraded", 100)).await;
    env.wait_state("default", "b", "degraded").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rv_of(&env, "default", "a").await, request_rv);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn redis_a_dead_consumers_pending_record_is_claimed_and_applied() {
    let Some(r) = redis_server().await else {
        return;
    };
    let env = start().await;
    env.create_request("default", "a").await;
    let mut conn = redis_conn(&r).await;
    let k = key("a", "probe");
    xadd(&mut conn, &k.path(), &doc(&k, "degraded", 10)).await;
    // A replica that read the record and died before acknowledging it.
    let _: String = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("health")
        .arg("plinth-stream-1")
        .arg("0")
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("plinth-stream-1")
        .arg("dead-replica")
        .arg("STREAMS")
        .arg("health")
        .arg(">")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(redis_pending(&mut conn).await, json!(1));
    let t0 = std::time::Instant::now();
    redis_source(&env, &r).await;
    wait_ready(&env, "stream-1").await;
    // Claimed once it has been idle for CLAIM_IDLE (30 s), within the wait's 60 s.
    env.wait_state("default", "a", "degraded").await;
    assert!(
        t0.elapsed() >= plinth_statestore::stream::CLAIM_IDLE - Duration::from_secs(5),
        "claimed before the dead consumer's entry was idle: {:?}",
        t0.elapsed()
    );
    wait_for("the claimed entry acknowledged", || async {
        redis_pending(&mut redis_conn(&r).await).await == json!(0)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn redis_a_record_from_the_future_is_rejected_and_the_next_applies() {
    let Some((_r, env, mut conn)) = redis_with_source().await else {
        return;
    };
    let k = key("a", "probe");
    // lastRun in milliseconds: far ahead of the platform's clock. Had it applied, every
    // later record would be "older" for centuries.
    xadd(&mut conn, &k.path(), &doc(&k, "unhealthy", BASE * 1000)).await;
    xadd(&mut conn, &k.path(), &doc(&k, "healthy", BASE + 10)).await;
    env.wait_state("default", "a", "healthy").await;
    wait_for("the future record rejected with a Warning", || async {
        env.events("HealthSource", "stream-1", names::REJECTED_REASON)
            .await
            .iter()
            .any(|(t, note)| {
                t == "Warning"
                    && note.contains("ahead of the platform's clock")
                    && note.contains(&k.path())
            })
    })
    .await;
    assert_eq!(
        record_of(&env, &k).await.unwrap().spec.data.last_run,
        Some(BASE + 10)
    );
}

/// A NATS source on `subject` of stream `HEALTH`, named `name`.
async fn nats_subject_source(env: &Env, n: &Peer, name: &str, subject: &str) {
    env.create_source(json!({
        "apiVersion": "platform.syntasso.io/v1alpha1",
        "kind": "HealthSource",
        "metadata": {"name": name},
        "spec": {"nats": {"servers": [n.nats_url()], "stream": "HEALTH", "subject": subject}},
    }))
    .await;
}

/// The Ready condition's reason and message of source `name`.
async fn readiness(env: &Env, name: &str) -> Option<(String, String)> {
    env.source(name).await.status.and_then(|st| {
        st.conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready")
            .map(|c| (c.reason.clone(), c.message.clone()))
    })
}

/// Two sources on one stream, one subject each (a Destination per subject): each has its
/// own durable consumer and reads every message of its subject. A subject the stream does
/// not capture is refused, naming what it captures; a source moved to another captured
/// subject gets its consumer made again on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn nats_sources_on_one_stream_each_read_their_subject() {
    let Some(n) = nats_server().await else { return };
    let env = start().await;
    for r in ["a", "b", "c"] {
        env.create_request("default", r).await;
    }
    let js = async_nats::jetstream::new(async_nats::connect(n.nats_url()).await.unwrap());
    js.create_stream(async_nats::jetstream::stream::Config {
        name: "HEALTH".into(),
        subjects: vec!["health.>".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    nats_subject_source(&env, &n, "dest-a", "health.a").await;
    nats_subject_source(&env, &n, "dest-b", "health.b").await;
    wait_ready(&env, "dest-a").await;
    wait_ready(&env, "dest-b").await;
    let publish = |subject: &'static str, k: RecordKey, state: &'static str| {
        let js = js.clone();
        async move {
            let mut h = async_nats::HeaderMap::new();
            h.insert(plinth_statestore::stream::KEY_HEADER, k.path().as_str());
            js.publish_with_headers(subject, h, doc(&k, state, BASE).into())
                .await
                .unwrap()
                .await
                .unwrap();
        }
    };
    // Several records per subject: with a shared consumer, the two sources would split
    // them and reject each other's.
    for (i, state) in ["degraded", "unhealthy", "healthy"].into_iter().enumerate() {
        publish("health.a", key("a", &format!("probe-{i}")), state).await;
        publish("health.b", key("b", &format!("probe-{i}")), state).await;
    }
    for r in ["a", "b"] {
        env.wait_state("default", r, "unhealthy").await;
    }
    let records = env
        .records("default")
        .list(&Default::default())
        .await
        .unwrap();
    for r in &records.items {
        let want = format!("dest-{}", r.spec.data.resource_ref.name);
        assert_eq!(
            r.labels().get(names::SOURCE_LABEL),
            Some(&want),
            "{}",
            r.name_any()
        );
    }
    assert_eq!(records.items.len(), 6);
    let stream = js.get_stream("HEALTH").await.unwrap();
    for c in ["plinth-dest-a", "plinth-dest-b"] {
        let mut consumer: async_nats::jetstream::consumer::PullConsumer =
            stream.get_consumer(c).await.unwrap();
        assert_eq!(consumer.info().await.unwrap().num_ack_pending, 0, "{c}");
    }
    let rejected = env
        .events("HealthSource", "dest-a", names::REJECTED_REASON)
        .await;
    assert!(rejected.is_empty(), "dest-a rejected: {rejected:?}");

    // A subject outside the stream: refused, naming what the stream captures.
    let sources: Api<plinth_api::HealthSource> = Api::all(env.client.clone());
    let move_to = |subject: &'static str| {
        let sources = sources.clone();
        async move {
            sources
                .patch(
                    "dest-b",
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(json!({"spec": {"nats": {"subject": subject}}})),
                )
                .await
                .unwrap();
        }
    };
    move_to("other.b").await;
    wait_for("the subject refused", || async {
        readiness(&env, "dest-b")
            .await
            .is_some_and(|(_, m)| m.contains("NATS stream HEALTH captures health.>, not other.b"))
    })
    .await;
    // Retries back off and say nothing new: one Warning, counted once.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::all(env.client.clone());
    let refusals: Vec<_> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.name.as_deref() == Some("dest-b")
                && e.reason.as_deref() == Some(names::STORE_ERROR)
        })
        .collect();
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    let count = refusals[0].count.unwrap_or(1)
        + refusals[0]
            .series
            .as_ref()
            .and_then(|s| s.count)
            .unwrap_or(0);
    assert_eq!(count, 1, "evented again on a retry: {refusals:?}");
    assert_eq!(refusals[0].type_.as_deref(), Some("Warning"));
    // Moved to a captured subject: its consumer now filters it.
    move_to("health.c").await;
    wait_for("consuming health.c", || async {
        readiness(&env, "dest-b")
            .await
            .is_some_and(|(r, m)| r == names::CONSUMING && m.contains("health.c"))
    })
    .await;
    publish("health.c", key("c", "probe"), "degraded").await;
    env.wait_state("default", "c", "degraded").await;
    // The recovery is evented too, as a Normal Event.
    wait_for("the recovery evented", || async {
        env.events("HealthSource", "dest-b", names::CONSUMING)
            .await
            .iter()
            .any(|(t, m)| t == "Normal" && m.contains("health.c"))
    })
    .await;
    let mut consumer: async_nats::jetstream::consumer::PullConsumer =
        stream.get_consumer("plinth-dest-b").await.unwrap();
    assert_eq!(
        consumer.info().await.unwrap().config.filter_subject,
        "health.c"
    );
}
