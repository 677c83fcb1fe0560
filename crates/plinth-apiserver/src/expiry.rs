//! Event expiry: Events are removed once their `lastTimestamp` is older than the
//! server's event TTL, as kube-apiserver does with `--event-ttl` (default 1 h, there an
//! etcd lease per Event). Without it every Event ever recorded would stay in the
//! database, so the data directory would grow with every request ever made.
//!
//! Events are stored in their core/v1 form, where the server fills `lastTimestamp`
//! on every write (`kinds`), so that field alone decides. An expired Event is deleted
//! with its resourceVersion as a precondition: one updated meanwhile (a repeat raising
//! its count and `lastTimestamp`) is kept. Watchers see the deletion, as they see a
//! lease expiring in Kubernetes.

use std::time::Duration;

use serde::Deserialize;

use crate::registry::rkey;
use crate::store::{ListRange, ObjKey, Store, StoreError, WriteOp};

/// The fields of a stored Event that expiry reads; the rest of the object is skipped
/// while parsing, so a pass over every Event allocates only these few strings.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Stamp {
    last_timestamp: Option<String>,
    event_time: Option<String>,
    #[serde(default)]
    metadata: StampMeta,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct StampMeta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    resource_version: Option<String>,
    creation_timestamp: Option<String>,
}

impl Stamp {
    /// When the Event was last seen: `lastTimestamp`, else `eventTime`, else its creation.
    fn last_seen(&self) -> Option<jiff::Timestamp> {
        [
            &self.last_timestamp,
            &self.event_time,
            &self.metadata.creation_timestamp,
        ]
        .into_iter()
        .flatten()
        .find_map(|s| s.parse().ok())
    }
}

/// Deletes every Event last seen before `now - ttl`; returns how many were deleted.
///
/// Events are read as stored text and only the expired ones are kept, so a pass costs
/// memory for what it deletes, not for every Event (hundreds of thousands on a busy
/// platform).
///
/// # Errors
/// The storage could not be read or written, or a stored Event is not valid JSON. An
/// Event changed or removed by someone else meanwhile is skipped, not an error.
pub async fn expire_events(
    store: &Store,
    ttl: Duration,
    now: jiff::Timestamp,
) -> Result<usize, StoreError> {
    let cutoff = now - jiff::SignedDuration::try_from(ttl).unwrap_or(jiff::SignedDuration::MAX);
    let events = rkey("", "events");
    let expired = move |data: &str| {
        let stamp: Stamp = serde_json::from_str(data)
            .map_err(|e| StoreError::Db(format!("corrupt stored Event: {e}")))?;
        Ok(stamp
            .last_seen()
            .is_some_and(|t| t < cutoff)
            .then_some(stamp.metadata))
    };
    let listed = store.scan(ListRange::all(events.clone()), expired).await?;
    let mut deleted = 0;
    for meta in listed.items {
        let op = WriteOp::Delete {
            key: ObjKey {
                rkey: events.clone(),
                ns: meta.namespace,
                name: meta.name,
            },
            expected_rv: meta.resource_version.and_then(|rv| rv.parse().ok()),
            expected_uid: None,
        };
        match store.write(op).await {
            Ok(_) => deleted += 1,
            Err(StoreError::NotFound | StoreError::Conflict { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(deleted)
}

/// Runs [`expire_events`] every `every` until the task is aborted.
pub(crate) async fn expiry_loop(store: Store, ttl: Duration, every: Duration) {
    let mut t = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        t.tick().await;
        match expire_events(&store, ttl, jiff::Timestamp::now()).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!("expired {n} Events older than {ttl:?}"),
            Err(e) => tracing::warn!("Event expiry failed (retried next interval): {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use std::sync::Arc;

    /// An Event last seen at `last`: in `lastTimestamp`, or for names starting with
    /// `micro-` only in `eventTime` (a MicroTime, `lastTimestamp` null), as events.k8s.io
    /// clients write them.
    fn event(name: &str, last: &str) -> Value {
        let meta = json!({"name": name, "namespace": "default", "uid": name});
        if name.starts_with("micro-") {
            let micro = last.replace('Z', ".123456Z");
            return json!({"apiVersion": "v1", "kind": "Event", "metadata": meta,
                "lastTimestamp": null, "eventTime": micro, "reason": "Test"});
        }
        json!({"apiVersion": "v1", "kind": "Event", "metadata": meta,
            "lastTimestamp": last, "reason": "Test"})
    }

    #[tokio::test]
    async fn only_events_older_than_the_ttl_are_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db"), Arc::new(|_| {})).unwrap();
        let now: jiff::Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
        for (name, last) in [
            ("old", "2026-12-01T08:00:00Z"),
            ("edge", "2026-12-01T09:00:00Z"),
            ("new", "2026-12-01T09:59:00Z"),
            ("micro-old", "2026-12-01T08:00:00Z"),
            ("micro-new", "2026-12-01T09:59:00Z"),
        ] {
            store
                .write(WriteOp::Create {
                    key: ObjKey {
                        rkey: rkey("", "events"),
                        ns: "default".into(),
                        name: name.into(),
                    },
                    obj: event(name, last),
                })
                .await
                .unwrap();
        }
        // A ConfigMap is not an Event, however old.
        store
            .write(WriteOp::Create {
                key: ObjKey {
                    rkey: rkey("", "configmaps"),
                    ns: "default".into(),
                    name: "cm".into(),
                },
                obj: json!({"metadata": {"name": "cm", "creationTimestamp": "2000-01-01T00:00:00Z"}}),
            })
            .await
            .unwrap();
        let n = expire_events(&store, Duration::from_secs(3600), now)
            .await
            .unwrap();
        assert_eq!(n, 2);
        let left: Vec<String> = store
            .list(ListRange::all(rkey("", "events")), Box::new(|_| true))
            .await
            .unwrap()
            .items
            .iter()
            .map(|e| e["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(left, ["edge", "micro-new", "new"]);
        assert_eq!(
            store
                .list(ListRange::all(rkey("", "configmaps")), Box::new(|_| true))
                .await
                .unwrap()
                .items
                .len(),
            1
        );
        // Nothing more to expire at the same moment.
        assert_eq!(
            expire_events(&store, Duration::from_secs(3600), now)
                .await
                .unwrap(),
            0
        );
    }
}
