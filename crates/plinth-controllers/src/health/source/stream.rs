//! Stream HealthSources (`spec.redis`, `spec.nats`): not polled; one long-lived consumer
//! task per source, started when the source appears, restarted when its spec (generation)
//! or credentials Secret changes, stopped when it is deleted or becomes a polled source.
//!
//! The task joins the stream's consumer group (Redis group / NATS durable consumer, default
//! `plinth-<source>`: shared by the platform's replicas so each message is handled by one
//! of them, and one per source so two sources on one stream each read every message),
//! and hands every message to the same code as a poll ([`super::poll::handle_document`]:
//! validation, `lastRun` ordering, ownership, apply). A message is acknowledged once it was
//! applied, found unchanged, or rejected; a server or transport failure leaves it
//! unacknowledged for redelivery. Delivery is at-least-once: a redelivered message is
//! unchanged, an older one (`lastRun` below the applied record's) is skipped quietly (a
//! debug log: out-of-order delivery is normal on a stream, not the Destination's error).
//!
//! A tombstone (a HealthRecord document without `data`) deletes the record it names, if
//! this source applied it. A message rejected for a reason that can clear by itself (its
//! request does not exist yet, another manager or source holds the record) is kept in
//! memory and tried again every [`RETRY_PARKED`] until it applies or a newer message for
//! the same key replaces it.
//!
//! Status: `Ready` with reason `Consuming` (or `InvalidSpec`, `SecretNotFound`,
//! `StoreError`), `records` on the platform from the source, `applied`/`unchanged` counted
//! since the consumer started (by the replica that wrote the status last), the rejected
//! keys; written at most every [`STATUS_EVERY`] unless readiness or the rejections changed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use plinth_api::HealthSource;
use plinth_api::constants::health as names;
use plinth_statestore::{NatsConfig, RedisConfig, StreamConfig, StreamConsumer, StreamMessage};

use super::poll::{Lookups, PollError, delete_record, handle_document, record_result};
use super::state::{
    NotReady, PollOutcome, SourceCtx, SourceState, publish_rejections, write_status,
};
use crate::health::validate::{Rejection, parse_tombstone};

/// How long the consumer waits for messages before checking its source is still there.
pub const WAIT: Duration = Duration::from_millis(500);
/// Status is written at most this often while only counts change.
pub const STATUS_EVERY: Duration = Duration::from_secs(2);
/// How often parked (retryable) messages are tried again.
pub const RETRY_PARKED: Duration = Duration::from_secs(5);
/// Longest wait before reconnecting after repeated failures.
pub const MAX_RECONNECT: Duration = Duration::from_secs(60);

/// Longest stream, group, consumer or subject name a stream source takes (NATS's limit
/// for names; far beyond any Redis key a health stream needs).
pub const MAX_NAME_BYTES: usize = 255;

/// `value` of `field` as a stream name: not empty, at most [`MAX_NAME_BYTES`], and for
/// NATS (`nats_name`) without the characters NATS names cannot hold. The message quotes
/// at most the start of a long value.
fn check_name(field: &str, value: &str, nats_name: bool) -> Result<(), NotReady> {
    let invalid = |m: String| Err(NotReady(names::INVALID_SPEC, m));
    if value.is_empty() {
        return invalid(format!("{field} is required"));
    }
    if value.len() > MAX_NAME_BYTES {
        let start: String = value.chars().take(40).collect();
        return invalid(format!(
            "{field} {start:?}… is {} bytes long; at most {MAX_NAME_BYTES}",
            value.len()
        ));
    }
    let bad = |c: char| c.is_whitespace() || c.is_control() || (nats_name && ".*>/\\".contains(c));
    if let Some(c) = value.chars().find(|&c| bad(c)) {
        return invalid(format!(
            "{field} {value:?}: {c:?} is not allowed{}",
            if nats_name {
                " (NATS names take no whitespace, '.', '*', '>', '/' or '\\')"
            } else {
                " (no whitespace or control characters)"
            }
        ));
    }
    Ok(())
}

/// The stream configuration and the consumer group of a stream source.
pub(crate) fn stream_config(
    hs: &HealthSource,
    secret: &str,
    data: &std::collections::HashMap<String, String>,
) -> Result<(StreamConfig, String), NotReady> {
    let key = |k: &str| data.get(k).filter(|v| !v.is_empty()).cloned();
    let invalid = |m: String| NotReady(names::INVALID_SPEC, m);
    // A referenced Secret holding none of the keys the transport reads is a mistake (the
    // connection would go out without credentials and fail as "authentication required").
    let has_keys = |wanted: &[&str]| -> Result<(), NotReady> {
        if secret.is_empty() || wanted.iter().any(|k| key(k).is_some()) {
            return Ok(());
        }
        let mut present: Vec<&str> = data.keys().map(String::as_str).collect();
        present.sort_unstable();
        present.truncate(10);
        Err(invalid(format!(
            "Secret {secret} has none of the keys {} (it has: {})",
            wanted.join(", "),
            if present.is_empty() {
                "no keys".to_string()
            } else {
                present.join(", ")
            }
        )))
    };
    if let Some(r) = &hs.spec.redis {
        if !(r.address.starts_with("redis://") || r.address.starts_with("rediss://")) {
            return Err(invalid(format!(
                "spec.redis.address {:?} is not redis://host:port or rediss://host:port",
                r.address
            )));
        }
        check_name("spec.redis.stream", &r.stream, false)?;
        if let Some(g) = r.group.as_deref().filter(|g| !g.is_empty()) {
            check_name("spec.redis.group", g, false)?;
        }
        has_keys(&["username", "password"])?;
        let mut c = RedisConfig::new(&r.address, &r.stream);
        c.username = key("username");
        c.password = key("password");
        let group = r.group.clone().filter(|g| !g.is_empty());
        return Ok((
            StreamConfig::Redis(c),
            group.unwrap_or_else(|| plinth_statestore::stream::default_group(&hs.name_any())),
        ));
    }
    let n = hs.spec.nats.as_ref().expect("a stream source");
    if n.servers.is_empty() || n.stream.is_empty() || n.subject.is_empty() {
        return Err(invalid(
            "spec.nats needs servers, stream and subject".into(),
        ));
    }
    check_name("spec.nats.stream", &n.stream, true)?;
    if let Some(c) = n.consumer.as_deref().filter(|c| !c.is_empty()) {
        check_name("spec.nats.consumer", c, true)?;
    }
    // A subject is dot-separated tokens: checked as a name token by token.
    check_name("spec.nats.subject", &n.subject, false)?;
    if n.subject.split('.').any(str::is_empty) {
        return Err(invalid(format!(
            "spec.nats.subject {:?}: an empty token (a subject is tokens separated by single dots)",
            n.subject
        )));
    }
    has_keys(&["token", "username", "password"])?;
    let mut c = NatsConfig::new(n.servers.clone(), &n.stream, &n.subject);
    c.token = key("token");
    c.username = key("username");
    c.password = key("password");
    let consumer = n.consumer.clone().filter(|g| !g.is_empty());
    Ok((
        StreamConfig::Nats(c),
        consumer.unwrap_or_else(|| plinth_statestore::stream::default_group(&hs.name_any())),
    ))
}

/// What the consumer keeps besides the poll state.
#[derive(Default)]
struct Counts {
    applied: usize,
    unchanged: usize,
    /// key → document of a message rejected for a reason that may clear.
    parked: BTreeMap<String, (String, Vec<u8>)>,
}

/// Runs the consumer of `hs` until the task is aborted or the source is gone.
pub(crate) async fn consume(
    s: Arc<SourceCtx>,
    hs: HealthSource,
    cfg: StreamConfig,
    group: String,
    state: Arc<tokio::sync::Mutex<SourceState>>,
) {
    let mut failures: u32 = 0;
    let mut counts = Counts::default();
    s.records.wait_until_ready().await.ok();
    sync_applied(&s, &hs, &mut *state.lock().await);
    while still_there(&s, &hs) {
        let mut consumer = match StreamConsumer::open(&cfg, &group, &s.consumer_name).await {
            Ok(c) => c,
            Err(e) => {
                failures += 1;
                report_and_wait(&s, &hs, &state, e.to_string(), failures).await;
                continue;
            }
        };
        tracing::info!(source = %hs.name_any(), stream = %consumer.describe(), group = %group, consumer = %s.consumer_name, "health source consuming");
        match run_consumer(&s, &hs, &mut consumer, &state, &mut counts, &mut failures).await {
            Ok(()) => return,
            Err(e) => {
                failures += 1;
                tracing::warn!(source = %hs.name_any(), error = %e, "health source stream failed; reconnecting");
                report_and_wait(&s, &hs, &state, e.to_string(), failures).await;
            }
        }
    }
}

/// Shows the stream's failure on the source's `Ready` condition, then waits out the
/// backoff of the `failures`-th failure in a row.
async fn report_and_wait(
    s: &SourceCtx,
    hs: &HealthSource,
    state: &tokio::sync::Mutex<SourceState>,
    message: String,
    failures: u32,
) {
    let st = state.lock().await;
    let _ = write_status(s, hs, &st, Err(NotReady(names::STORE_ERROR, message)), None).await;
    drop(st);
    tokio::time::sleep(backoff(failures)).await;
}

/// The records on the platform labelled with this source, by key: a stream is not re-read
/// from the start, and the platform's replicas share it, so `records` in status counts what
/// the platform holds rather than what this consumer applied.
fn sync_applied(s: &SourceCtx, hs: &HealthSource, st: &mut SourceState) {
    let mine = hs.name_any();
    st.applied = s
        .records
        .state()
        .iter()
        .filter(|r| r.labels().get(names::SOURCE_LABEL) == Some(&mine))
        .map(|r| {
            let (ns, name) = (r.namespace().unwrap_or_default(), r.name_any());
            let key = r
                .annotations()
                .get(names::SOURCE_KEY_ANNOTATION)
                .cloned()
                .unwrap_or_else(|| format!("{ns}/{name}"));
            (key, (ns, name))
        })
        .collect();
}

fn backoff(failures: u32) -> Duration {
    Duration::from_millis(500)
        .saturating_mul(2u32.saturating_pow(failures.saturating_sub(1).min(10)))
        .min(MAX_RECONNECT)
}

fn still_there(s: &SourceCtx, hs: &HealthSource) -> bool {
    s.sources
        .get(&ObjectRef::new(&hs.name_any()))
        .is_some_and(|cur| cur.uid() == hs.uid() && cur.metadata.deletion_timestamp.is_none())
}

/// Consumes until the source is gone (`Ok`) or the stream fails (`Err`).
async fn run_consumer(
    s: &Arc<SourceCtx>,
    hs: &HealthSource,
    consumer: &mut StreamConsumer,
    state: &tokio::sync::Mutex<SourceState>,
    counts: &mut Counts,
    failures: &mut u32,
) -> Result<(), PollError> {
    let target = consumer.describe().to_string();
    let mut last_status: Option<Instant> = None;
    let mut dirty = true;
    let mut last_retry = Instant::now();
    loop {
        if !still_there(s, hs) {
            return Ok(());
        }
        let msgs = consumer.next(WAIT).await?;
        let mut st = state.lock().await;
        let mut out = PollOutcome {
            target: target.clone(),
            changed: true,
            ..Default::default()
        };
        let mut lookups = Lookups::default();
        let mut acks = Vec::new();
        let mut failed = None;
        for (i, m) in msgs.iter().enumerate() {
            match handle_message(s, hs, &mut st, &mut out, counts, m, &mut lookups).await {
                Ok(()) => acks.push(m.id.clone()),
                Err(e) => {
                    let rest: Vec<String> = msgs[i..].iter().map(|m| m.id.clone()).collect();
                    consumer.retry_later(&rest, Duration::from_secs(5)).await;
                    failed = Some(e);
                    break;
                }
            }
        }
        if last_retry.elapsed() >= RETRY_PARKED && failed.is_none() && !counts.parked.is_empty() {
            last_retry = Instant::now();
            retry_parked(s, hs, &mut st, &mut out, counts, &mut lookups).await?;
        }
        consumer.ack(&acks).await?;
        if let Some(e) = failed {
            return Err(e);
        }
        dirty |= out.applied + out.removed > 0 || !out.new_rejections.is_empty();
        let urgent = !out.new_rejections.is_empty() || last_status.is_none();
        publish_rejections(s, hs, &out).await;
        let due = last_status.is_none_or(|t| t.elapsed() >= STATUS_EVERY);
        if dirty && (urgent || due) {
            out.applied = counts.applied;
            out.unchanged = counts.unchanged;
            sync_applied(s, hs, &mut st);
            write_status(s, hs, &st, Ok(out), None).await?;
            last_status = Some(Instant::now());
            dirty = false;
        }
        // Reset only once a whole round went through, its status write included: a
        // status the API refuses must back off like a stream that fails.
        *failures = 0;
    }
}

/// Handles one message; `Err` only for server and transport failures (not acknowledged).
async fn handle_message(
    s: &SourceCtx,
    hs: &HealthSource,
    st: &mut SourceState,
    out: &mut PollOutcome,
    counts: &mut Counts,
    m: &StreamMessage,
    lookups: &mut Lookups,
) -> Result<(), PollError> {
    let key = m
        .key
        .clone()
        .unwrap_or_else(|| "(message without key)".into());
    counts.parked.remove(&key);
    if let Some((ns, name)) = parse_tombstone(&m.body) {
        if delete_record(s, hs, &ns, &name).await? {
            out.removed += 1;
        }
        st.applied.remove(&key);
        st.rejected.remove(&key);
        st.orphaned.remove(&key);
        return Ok(());
    }
    handle_body(s, hs, st, out, counts, &key, &m.id, &m.body, lookups).await
}

#[allow(clippy::too_many_arguments)]
async fn handle_body(
    s: &SourceCtx,
    hs: &HealthSource,
    st: &mut SourceState,
    out: &mut PollOutcome,
    counts: &mut Counts,
    key: &str,
    id: &str,
    body: &[u8],
    lookups: &mut Lookups,
) -> Result<(), PollError> {
    let known = st.applied.contains_key(key) || st.orphaned.contains(key);
    let result = handle_document(s, hs, key, body, known, lookups)
        .await
        .map_err(|e| PollError::at(key, e))?;
    out.reads += 1;
    match &result {
        Err(Rejection::Stale(why)) => {
            tracing::debug!(source = %hs.name_any(), key, message = id, reason = %why, "health record skipped: older than the applied one");
            counts.unchanged += 1;
            return Ok(());
        }
        Err(rej) if rej.retryable() => {
            counts
                .parked
                .insert(key.to_string(), (id.to_string(), body.to_vec()));
        }
        Ok(super::poll::Handled::Applied(..)) => counts.applied += 1,
        Ok(super::poll::Handled::Unchanged(..)) => counts.unchanged += 1,
        Err(_) => {}
    }
    let result = result.map_err(|rej| match rej {
        Rejection::Invalid(m) => Rejection::Invalid(format!("message {id}: {m}")),
        other => other,
    });
    record_result(st, out, key, result);
    Ok(())
}

async fn retry_parked(
    s: &SourceCtx,
    hs: &HealthSource,
    st: &mut SourceState,
    out: &mut PollOutcome,
    counts: &mut Counts,
    lookups: &mut Lookups,
) -> Result<(), PollError> {
    let parked = std::mem::take(&mut counts.parked);
    for (key, (id, body)) in parked {
        handle_body(s, hs, st, out, counts, &key, &id, &body, lookups).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config_of(spec: serde_json::Value) -> Result<(StreamConfig, String), NotReady> {
        config_with(spec, "", &[])
    }

    fn config_with(
        spec: serde_json::Value,
        secret: &str,
        keys: &[(&str, &str)],
    ) -> Result<(StreamConfig, String), NotReady> {
        let hs: HealthSource = serde_json::from_value(json!({
            "apiVersion": "platform.syntasso.io/v1alpha1", "kind": "HealthSource",
            "metadata": {"name": "eu.worker"}, "spec": spec,
        }))
        .unwrap();
        let data = keys
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        stream_config(&hs, secret, &data)
    }

    #[test]
    fn a_secret_without_any_key_the_transport_reads_is_refused_naming_its_keys() {
        let redis = json!({"redis": {"address": "redis://r:6379", "stream": "health"}});
        let Err(NotReady(reason, m)) = config_with(
            redis.clone(),
            "default/creds",
            &[("user", "u"), ("pass", "p")],
        ) else {
            panic!("accepted")
        };
        assert_eq!(reason, names::INVALID_SPEC);
        assert_eq!(
            m,
            "Secret default/creds has none of the keys username, password (it has: pass, user)"
        );
        assert!(config_with(redis, "default/creds", &[("password", "p")]).is_ok());
        let nats = json!({"nats": {"servers": ["nats://n:4222"], "stream": "HEALTH",
                                   "subject": "health.eu"}});
        assert!(config_with(nats.clone(), "default/creds", &[("token", "t")]).is_ok());
        let Err(NotReady(_, m)) = config_with(nats, "default/creds", &[]) else {
            panic!("accepted")
        };
        assert!(
            m.ends_with("token, username, password (it has: no keys)"),
            "{m}"
        );
    }

    fn refusal(spec: serde_json::Value) -> String {
        match config_of(spec) {
            Ok(_) => panic!("accepted"),
            Err(NotReady(reason, message)) => {
                assert_eq!(reason, names::INVALID_SPEC, "{message}");
                message
            }
        }
    }

    #[test]
    fn each_source_has_its_own_group_by_default() {
        let redis = json!({"redis": {"address": "redis://r:6379", "stream": "health"}});
        assert_eq!(config_of(redis).ok().unwrap().1, "plinth-eu_worker");
        let nats = json!({"nats": {"servers": ["nats://n:4222"], "stream": "HEALTH",
                                   "subject": "health.eu", "consumer": "mine"}});
        assert_eq!(config_of(nats).ok().unwrap().1, "mine");
    }

    #[test]
    fn names_a_stream_cannot_hold_are_refused_without_quoting_them_whole() {
        let huge = "s".repeat(100_000);
        let m = refusal(json!({"redis": {"address": "redis://r:6379", "stream": huge}}));
        assert!(
            m.contains("spec.redis.stream") && m.contains("100000 bytes long; at most 255"),
            "{m}"
        );
        assert!(m.len() < 200, "{} bytes", m.len());
        let m = refusal(
            json!({"nats": {"servers": ["nats://n:4222"], "stream": "HE.AL TH*",
                                        "subject": "health.records"}}),
        );
        assert!(
            m.contains("spec.nats.stream \"HE.AL TH*\": '.' is not allowed"),
            "{m}"
        );
        let m = refusal(
            json!({"nats": {"servers": ["nats://n:4222"], "stream": "HEALTH",
                                        "subject": "health..records"}}),
        );
        assert!(m.contains("an empty token"), "{m}");
        let m = refusal(json!({"redis": {"address": "redis://r:6379", "stream": "a b"}}));
        assert!(m.contains("' ' is not allowed"), "{m}");
    }
}
