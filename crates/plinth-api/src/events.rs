//! The one Kubernetes Event recorder of Plinth's controllers and Job runner.
//!
//! It writes `core/v1` Events the way the Kubernetes event recorder of client-go does
//! (the recorder kubelets and the Job controller use): `firstTimestamp`, `lastTimestamp`,
//! `count`, `source.component` and `reportingComponent` are set, so
//! `kubectl get events --sort-by=.lastTimestamp` and `kubectl describe` order them. A
//! repeat of an Event (same object, type, reason and message) within
//! [`AGGREGATION_WINDOW`] is not a new Event: the earlier one gets `count + 1` and a new
//! `lastTimestamp` (a merge patch). Publishing is best effort: a failure is logged at
//! debug level and never fails the caller.
//!
//! [`EventRecorder::record`] writes before it returns; [`EventRecorder::record_queued`]
//! returns at once and leaves the write to one background task per recorder, in the
//! order queued (client-go's recorder is asynchronous the same way), for callers whose
//! progress should not wait on Events.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};

/// How long a repeated Event is folded into the earlier one (client-go's event cache
/// keeps similar events for ten minutes before starting a new series).
pub const AGGREGATION_WINDOW: Duration = Duration::from_secs(600);

/// Severity of an Event (`type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something happened as expected.
    Normal,
    /// Something went wrong or needs attention.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    namespace: String,
    kind: String,
    name: String,
    uid: String,
    type_: EventType,
    reason: String,
    message: String,
}

#[derive(Debug, Clone)]
struct Seen {
    event_name: String,
    count: i32,
    last: Timestamp,
}

/// The Events a recorder wrote within the aggregation window, by what makes a repeat.
#[derive(Default)]
struct SeenEvents {
    entries: HashMap<Key, Seen>,
    pruned: Option<Timestamp>,
}

impl SeenEvents {
    /// Drops the entries older than `window`, at most once a minute: a pass goes through
    /// every entry, and a busy recorder holds one per object it reported on.
    fn prune(&mut self, now: Timestamp, window: k8s_openapi::jiff::SignedDuration) {
        let minute = k8s_openapi::jiff::SignedDuration::from_secs(60);
        if self.pruned.is_some_and(|t| t + minute > now) {
            return;
        }
        self.entries.retain(|_, s| s.last + window > now);
        self.pruned = Some(now);
    }
}

/// Records Events from one component (`source.component`, e.g. `job-controller`,
/// `kubelet`, `PromiseController`). Cheap to clone; clones share the aggregation cache.
#[derive(Clone)]
pub struct EventRecorder {
    client: kube::Client,
    component: String,
    host: Option<String>,
    seen: Arc<Mutex<SeenEvents>>,
    queue: Arc<OnceLock<tokio::sync::mpsc::UnboundedSender<Queued>>>,
}

/// An Event waiting for the background writer, with the time it happened.
struct Queued {
    regarding: ObjectReference,
    type_: EventType,
    reason: String,
    message: String,
    at: Timestamp,
}

impl EventRecorder {
    /// A recorder writing through `client` as `component`.
    pub fn new(client: kube::Client, component: impl Into<String>) -> Self {
        EventRecorder {
            client,
            component: component.into(),
            host: None,
            seen: Arc::default(),
            queue: Arc::default(),
        }
    }

    /// Sets `source.host` (the node name, for kubelet Events).
    pub fn with_host(mut self, host: impl Into<String>) -> Self {
        self.host = Some(host.into());
        self
    }

    /// Records an Event about `regarding` (its namespace is the Event's; cluster-scoped
    /// objects get their Events in `default`). See the module documentation for
    /// aggregation. Errors are logged, not returned.
    pub async fn record(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        let message = message.into();
        if let Err(e) = self.try_record(regarding, type_, reason, &message).await {
            tracing::debug!(reason, %message, error = %e, "could not record event");
        }
    }

    /// Queues an Event for the recorder's background writer and returns at once; the
    /// Event keeps the time of this call. Events of one recorder are written in the order
    /// queued. Must be called within a Tokio runtime (the writer starts on first use).
    pub fn record_queued(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        let queue = self.queue.get_or_init(|| {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Queued>();
            // The writer shares the aggregation cache but not the queue, so dropping the
            // last recorder ends it.
            let writer = EventRecorder {
                queue: Arc::default(),
                ..self.clone()
            };
            tokio::spawn(async move {
                while let Some(q) = rx.recv().await {
                    let r = writer
                        .record_at(&q.regarding, q.type_, &q.reason, &q.message, q.at)
                        .await;
                    if let Err(e) = r {
                        tracing::debug!(reason = %q.reason, message = %q.message, error = %e, "could not record event");
                    }
                }
            });
            tx
        });
        let _ = queue.send(Queued {
            regarding: regarding.clone(),
            type_,
            reason: reason.to_string(),
            message: message.into(),
            at: Timestamp::now(),
        });
    }

    /// [`EventRecorder::record`], returning the API error instead of logging it.
    pub async fn try_record(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: &str,
    ) -> Result<(), kube::Error> {
        self.record_at(regarding, type_, reason, message, Timestamp::now())
            .await
    }

    /// Writes (or folds) an Event that happened at `now`.
    async fn record_at(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: &str,
        now: Timestamp,
    ) -> Result<(), kube::Error> {
        let namespace = regarding
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into());
        let key = Key {
            namespace: namespace.clone(),
            kind: regarding.kind.clone().unwrap_or_default(),
            name: regarding.name.clone().unwrap_or_default(),
            uid: regarding.uid.clone().unwrap_or_default(),
            type_,
            reason: reason.to_string(),
            message: message.to_string(),
        };
        let window =
            k8s_openapi::jiff::SignedDuration::try_from(AGGREGATION_WINDOW).expect("window fits");
        let previous = {
            let mut seen = self.seen.lock().expect("event cache lock");
            seen.prune(now, window);
            seen.entries
                .get(&key)
                .filter(|s| s.last + window > now)
                .cloned()
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        if let Some(prev) = previous {
            let count = prev.count + 1;
            let patch = serde_json::json!({
                "count": count,
                "lastTimestamp": Time(now),
            });
            match api
                .patch(
                    &prev.event_name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => {
                    self.remember(key, prev.event_name, count, now);
                    return Ok(());
                }
                // Deleted meanwhile (TTL, namespace cleanup): start a new Event.
                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        let object_name = regarding.name.clone().unwrap_or_else(|| "event".into());
        let event_name = format!("{object_name}.{:x}", now.as_nanosecond());
        let event = Event {
            metadata: ObjectMeta {
                name: Some(event_name.clone()),
                namespace: Some(namespace),
                ..Default::default()
            },
            involved_object: regarding.clone(),
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            type_: Some(type_.as_str().to_string()),
            source: Some(EventSource {
                component: Some(self.component.clone()),
                host: self.host.clone(),
            }),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            reporting_component: Some(self.component.clone()),
            reporting_instance: Some(self.host.clone().unwrap_or_else(|| self.component.clone())),
            ..Default::default()
        };
        api.create(&PostParams::default(), &event).await?;
        self.remember(key, event_name, 1, now);
        Ok(())
    }

    fn remember(&self, key: Key, event_name: String, count: i32, last: Timestamp) {
        self.seen.lock().expect("event cache lock").entries.insert(
            key,
            Seen {
                event_name,
                count,
                last,
            },
        );
    }
}
