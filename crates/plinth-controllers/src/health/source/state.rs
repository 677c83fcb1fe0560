//! What a HealthSource's poll and its stream consumer share: the controller's state
//! ([`SourceCtx`]), what a source remembers between polls ([`SourceState`]), what one
//! poll found ([`PollOutcome`]), and the status and Events they write.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::Api;
use kube::runtime::reflector::Store;
use kube::{Resource, ResourceExt};
use plinth_api::constants::condition_types::READY;
use plinth_api::constants::health as names;
use plinth_api::{HealthRecord, HealthSource, HealthSourceStatus, RejectedRecord};
use plinth_statestore::{ListedObject, RecordReader};
use serde_json::{Value, json};

use crate::context::Context;
use crate::health::clock::{Clock, rfc3339};
use crate::support::{self, patch_status, set_condition};

/// How often `lastPollTime` alone is refreshed in status.
pub const POLL_TIME_REFRESH: Duration = Duration::from_secs(3600);

/// At most this many rejected keys are listed in status.
pub const MAX_LISTED_REJECTIONS: usize = 50;

pub(crate) struct SourceCtx {
    pub(crate) ctx: Arc<Context>,
    pub(crate) clock: Arc<dyn Clock>,
    /// Every HealthRecord on the platform (for claims, conflicts and no-op detection).
    pub(crate) records: Store<HealthRecord>,
    /// Every HealthSource (a stream consumer stops when its source is gone).
    pub(crate) sources: Store<HealthSource>,
    /// This controller's name in stream consumer groups (unique per process and context).
    pub(crate) consumer_name: String,
    pub(crate) states: Mutex<HashMap<String, Arc<tokio::sync::Mutex<SourceState>>>>,
    /// uid → the stream consumer task of a stream source.
    pub(crate) streams: Mutex<HashMap<String, StreamTask>>,
}

impl crate::support::harness::Shared for SourceCtx {
    fn context(&self) -> &Context {
        &self.ctx
    }
}

/// A consumer name unique to this process and controller instance.
pub(crate) fn consumer_name() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "plinth".into());
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{host}-{}-{n}-{nanos:x}", std::process::id())
}

/// Why a source cannot poll: condition reason and message.
pub(crate) struct NotReady(pub(crate) &'static str, pub(crate) String);

/// Why a HealthSource's `spec.pollInterval` cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PollIntervalError {
    /// Not a Go duration.
    #[error("spec.pollInterval {text:?}: {cause}")]
    Invalid {
        /// The value as written.
        text: String,
        /// The parser's message.
        cause: String,
    },
    /// Shorter than the minimum of 10 s.
    #[error("spec.pollInterval {text:?} is shorter than the minimum of 10s")]
    TooShort {
        /// The value as written.
        text: String,
    },
}

/// `spec.pollInterval`, checked: a Go duration of at least 10 s.
///
/// # Errors
/// [`PollIntervalError::Invalid`] when it is not a Go duration,
/// [`PollIntervalError::TooShort`] when it is under 10 s.
pub fn poll_interval(hs: &HealthSource) -> Result<Duration, PollIntervalError> {
    let Some(text) = hs.spec.poll_interval.as_deref() else {
        return Ok(Duration::from_secs(
            plinth_api::DEFAULT_HEALTH_POLL_INTERVAL_SECS,
        ));
    };
    let d =
        plinth_api::duration::parse_go_duration(text).map_err(|e| PollIntervalError::Invalid {
            text: text.to_string(),
            cause: e.to_string(),
        })?;
    if d < Duration::from_secs(plinth_api::MIN_HEALTH_POLL_INTERVAL_SECS) {
        return Err(PollIntervalError::TooShort {
            text: text.to_string(),
        });
    }
    Ok(d)
}

/// One Warning Event and one log line per rejection not reported before.
pub(crate) async fn publish_rejections(s: &SourceCtx, hs: &HealthSource, outcome: &PollOutcome) {
    for (key, reason, conflict) in &outcome.new_rejections {
        tracing::warn!(source = %hs.name_any(), key, reason, "health record skipped");
        let why = if *conflict {
            names::CONFLICT_REASON
        } else {
            names::REJECTED_REASON
        };
        // One Event per key (a shared recorder would fold them into one series by reason).
        support::publish(
            &s.ctx.recorder(names::SOURCE_COMPONENT),
            &hs.object_ref(&()),
            plinth_api::events::EventType::Warning,
            why,
            format!("{key}: {reason}"),
        )
        .await;
    }
}

/// Writes the status when something other than the poll time changed, a trigger was
/// handled, or the poll time is older than [`POLL_TIME_REFRESH`]. When `Ready` turns
/// False (or its reason changes while False) a Warning Event says why, and when it turns
/// True again a Normal one: once per change, so a source that stays broken is not
/// evented again on every retry.
pub(crate) async fn write_status(
    s: &SourceCtx,
    hs: &HealthSource,
    state: &SourceState,
    result: Result<PollOutcome, NotReady>,
    handled_trigger: Option<String>,
) -> Result<(), crate::Error> {
    let api: Api<HealthSource> = Api::all(s.ctx.client.clone());
    let now = s.clock.now();
    let generation = hs.metadata.generation;
    let (ok, reason, message, outcome) = match result {
        Ok(o) if is_stream(hs) => {
            let message = format!("Consuming {}", o.target);
            (true, names::CONSUMING, message, Some(o))
        }
        Ok(o) => {
            let message = match o.note {
                Some(note) => format!("Polled {}: {note}", o.target),
                None => format!("Polled {}", o.target),
            };
            (true, names::POLLED, message, Some(o))
        }
        Err(NotReady(r, m)) => (false, r, m, None),
    };
    // Set by the last computation of the patch (it runs again on a conflict).
    let mut turned: Option<bool> = None;
    patch_status(&api, &hs.name_any(), |cur| {
        let old = cur.status.clone().unwrap_or_default();
        let was = old
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == READY)
            .map(|c| (c.status == "True", c.reason.clone()));
        turned = match &was {
            Some((true, _)) | None if !ok => Some(false),
            Some((false, r)) if !ok && r != reason => Some(false),
            Some((false, _)) if ok => Some(true),
            _ => None,
        };
        let mut st = old.clone();
        let mut conds = st.conditions.clone().unwrap_or_default();
        set_condition(&mut conds, READY, ok, reason, &message, generation);
        st.conditions = Some(conds);
        st.observed_generation = generation;
        st.last_handled_trigger = handled_trigger.clone();
        if let Some(o) = &outcome {
            fill_counts(&mut st, state, o);
        }
        let refresh = old
            .last_poll_time
            .as_deref()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .is_none_or(|t| now.duration_since(t).as_secs() >= POLL_TIME_REFRESH.as_secs() as i64);
        if st == old && !refresh {
            return None;
        }
        st.last_poll_time = Some(rfc3339(now));
        // A merge patch of the difference, so a field that went (the last rejection
        // cleared) is removed, not left beside the new counts.
        let value = |v: &HealthSourceStatus| serde_json::to_value(v).expect("status serialises");
        Some(support::status::merge_diff(&value(&old), &value(&st)))
    })
    .await?;
    if let Some(ready) = turned {
        let kind = if ready {
            plinth_api::events::EventType::Normal
        } else {
            plinth_api::events::EventType::Warning
        };
        support::publish(
            &s.ctx.recorder(names::SOURCE_COMPONENT),
            &hs.object_ref(&()),
            kind,
            reason,
            support::conditions::bounded_message(&message).into_owned(),
        )
        .await;
    }
    Ok(())
}

fn fill_counts(st: &mut HealthSourceStatus, state: &SourceState, o: &PollOutcome) {
    st.records = Some(state.applied.len() as i64);
    st.rejected = Some(state.rejected.len() as i64);
    if o.changed {
        st.applied = Some(o.applied as i64);
        st.unchanged = Some(o.unchanged as i64);
    }
    let listed: Vec<RejectedRecord> = state
        .rejected
        .iter()
        .take(MAX_LISTED_REJECTIONS)
        .map(|(k, r)| RejectedRecord {
            key: k.clone(),
            reason: r.reason.clone(),
        })
        .collect();
    st.rejected_records = (!listed.is_empty()).then_some(listed);
}

/// The owner reference every record applied by `hs` carries.
pub(crate) fn owner_of(hs: &HealthSource) -> Value {
    json!({
        "apiVersion": plinth_api::HEALTH_SOURCE_API_VERSION,
        "kind": "HealthSource",
        "name": hs.name_any(),
        "uid": hs.uid().unwrap_or_default(),
        "controller": true,
    })
}

/// A rejected key.
#[derive(Clone, Debug)]
pub(crate) struct Rejected {
    pub(crate) reason: String,
    pub(crate) retry: bool,
}

/// What a HealthSource remembers between polls.
#[derive(Default)]
pub(crate) struct SourceState {
    pub(crate) reader: Option<(String, Arc<dyn RecordReader>)>,
    pub(crate) listing_version: Option<String>,
    pub(crate) objects: Vec<ListedObject>,
    /// key → object version last handled.
    pub(crate) seen: HashMap<String, String>,
    /// key → (namespace, name) of the record applied from it.
    pub(crate) applied: BTreeMap<String, (String, String)>,
    pub(crate) rejected: BTreeMap<String, Rejected>,
    /// Keys whose request was deleted after their record was applied.
    pub(crate) orphaned: BTreeSet<String>,
    pub(crate) last_poll: Option<Instant>,
    pub(crate) failures: u32,
}

/// The result of one poll.
#[derive(Clone, Debug, Default)]
pub struct PollOutcome {
    /// The store, for messages.
    pub target: String,
    /// Whether the listing changed (or anything had to be re-checked).
    pub changed: bool,
    /// Records created or updated on the platform.
    pub applied: usize,
    /// Records found identical to what the platform holds.
    pub unchanged: usize,
    /// Records removed because their object disappeared.
    pub removed: usize,
    /// Objects read from the store.
    pub reads: usize,
    /// `(key, reason, conflict)` for rejections not reported before.
    pub new_rejections: Vec<(String, String, bool)>,
    /// What the Ready message adds about the store (a branch not created yet).
    pub note: Option<&'static str>,
}

/// The Ready message's note for a Git branch that does not exist and never held records.
pub const BRANCH_ABSENT_NOTE: &str = "the branch does not exist yet: no Destination has written a record there (check the branch name if one should have)";

/// A running consumer task.
pub(crate) struct StreamTask {
    pub(crate) fingerprint: String,
    pub(crate) handle: tokio::task::JoinHandle<()>,
}

impl Drop for StreamTask {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

/// Whether the source is a stream.
pub fn is_stream(hs: &HealthSource) -> bool {
    hs.spec.redis.is_some() || hs.spec.nats.is_some()
}
