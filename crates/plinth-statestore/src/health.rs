//! The health writer: turns a Destination's stream of health-check runs into few writes.
//!
//! A health agent reports every check run; written naively (one commit per run) a handful
//! of resources checked every minute floods a Git repository with tens of thousands of
//! commits a week. The writer keeps the steady state silent:
//!
//! * **No-op suppression** — a run whose `state` and `details` equal the record last
//!   written writes nothing.
//! * **Heartbeat** — `lastRun` is refreshed at most every `heartbeat_interval` (default
//!   1 h; zero turns it off), so a reader can tell a silent agent from a healthy one. When
//!   any write happens, records whose `lastRun` is at least half an interval old ride
//!   along, so heartbeats of many records share a commit instead of spreading out.
//! * **Flush window** — changes arriving within `flush_window` (default 10 s) of the first
//!   unwritten change are written together: one commit for Git (the Git worker batches the
//!   per-record requests; its message names every record), one write per changed object
//!   for buckets.
//! * **Store down** — unwritten records stay queued in memory, one entry per record (the
//!   newest state wins), at most `max_queued` records (the oldest are dropped and counted);
//!   [`HealthWriter::report`] never waits for the store.
//!
//! Records live at `<namespace>/<promise>/<request>/<definition>.yaml` under the store's
//! `path`, one HealthRecord document each — where a HealthSource (which reads every YAML
//! file under its `path`) or a GitOps sync picks them up.
//!
//! [`HealthLedger`] holds the decisions and takes the time as an argument (tests and the
//! firehose benchmark drive it with a simulated clock); [`HealthWriter`] runs it against a
//! [`StateStore`] on a task.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::{SignedDuration, Timestamp};
use plinth_api::constants::health as names;
use plinth_api::{HealthState, names as object_names};
use serde_json::{Value, json};

use crate::{StateStore, StoreConfig, StoreError, WriteOp, WriteRequest};

/// Default flush window: changes within it share one write.
pub const DEFAULT_FLUSH_WINDOW: Duration = Duration::from_secs(10);
/// Default heartbeat interval: `lastRun` is refreshed at most this often.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(3600);
/// Default bound on records queued while the store is down.
pub const DEFAULT_MAX_QUEUED: usize = 10_000;
/// Longest wait between retries while the store keeps failing.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(300);

/// Settings of the health writer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthWriterConfig {
    /// Changes arriving within this time of the first unwritten change are written together.
    pub flush_window: Duration,
    /// `lastRun` of an unchanged record is rewritten at most this often; zero: never.
    pub heartbeat_interval: Duration,
    /// Most records kept unwritten (while the store is down); the oldest are dropped.
    pub max_queued: usize,
}

impl Default for HealthWriterConfig {
    fn default() -> Self {
        HealthWriterConfig {
            flush_window: DEFAULT_FLUSH_WINDOW,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            max_queued: DEFAULT_MAX_QUEUED,
        }
    }
}

/// Identifies one record: the request it reports on and the HealthDefinition that checks it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RecordKey {
    /// Namespace of the resource request (on the platform).
    pub namespace: String,
    /// The request's Promise.
    pub promise: String,
    /// The resource request's name.
    pub request: String,
    /// Namespace of the HealthDefinition (on the Destination).
    pub definition_namespace: String,
    /// The HealthDefinition's name.
    pub definition: String,
}

impl RecordKey {
    /// Path of the record relative to the store's `path`:
    /// `<namespace>/<promise>/<request>/<definition>.yaml`.
    pub fn path(&self) -> String {
        format!(
            "{}/{}/{}/{}.yaml",
            self.namespace, self.promise, self.request, self.definition
        )
    }

    /// The HealthRecord's `metadata.name` (see [`object_names::health_record_name`]).
    pub fn record_name(&self) -> String {
        object_names::health_record_name(
            &self.promise,
            &self.namespace,
            &self.request,
            &self.definition_namespace,
            &self.definition,
        )
    }
}

impl std::fmt::Display for RecordKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{}/{}/{}",
            self.namespace, self.promise, self.request, self.definition
        )
    }
}

/// The result of one check run.
#[derive(Clone, Debug, PartialEq)]
pub struct HealthReport {
    /// Which record it updates.
    pub key: RecordKey,
    /// The state the check found.
    pub state: HealthState,
    /// Optional details the check wrote.
    pub details: Option<Value>,
    /// When the check ran.
    pub run_at: Timestamp,
    /// The HealthDefinition's `spec.schedule`, when known: written on the record (with
    /// the writer's heartbeat) so the platform can tell when the next one is overdue.
    pub schedule: Option<String>,
}

impl HealthReport {
    /// The HealthRecord document (YAML) for this run, by a writer that refreshes an
    /// unchanged record at least every `heartbeat` (zero: never).
    pub fn document(&self, heartbeat: Duration) -> String {
        let mut data = json!({
            "promiseRef": {"name": self.key.promise},
            "resourceRef": {"name": self.key.request, "namespace": self.key.namespace},
            "state": self.state,
            "lastRun": self.run_at.as_second(),
        });
        if let Some(d) = &self.details {
            data["details"] = d.clone();
        }
        let mut doc = json!({
            "apiVersion": names::RECORD_API_VERSION,
            "kind": names::RECORD_KIND,
            "metadata": {"name": self.key.record_name(), "namespace": self.key.namespace},
            "data": data,
        });
        if let Some(schedule) = &self.schedule {
            doc["metadata"]["annotations"] = json!({
                names::SCHEDULE_ANNOTATION: schedule,
                names::REFRESH_ANNOTATION: heartbeat.as_secs().to_string(),
            });
        }
        serde_saphyr::to_string(&doc).expect("a JSON value serialises as YAML")
    }
}

/// What [`HealthLedger::report`] did with a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// Same state and details as written, heartbeat not due: nothing to write.
    Suppressed,
    /// Queued for the next flush (a change, or a heartbeat).
    Queued,
}

/// One entry of a [`Batch`]: the record's new content, or `None` to delete it.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchEntry {
    /// The record.
    pub key: RecordKey,
    /// The run to write, or `None` to delete the record.
    pub report: Option<HealthReport>,
}

/// The writes of one flush.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Batch {
    /// One entry per record, sorted by key.
    pub entries: Vec<BatchEntry>,
    /// `written` before this batch, per key, to restore if the batch fails.
    previous: Vec<(RecordKey, Option<Written>)>,
    /// The writer's heartbeat, stamped on each record.
    heartbeat: Duration,
}

impl Batch {
    /// One [`WriteRequest`] per record, named after the record (the Git commit message lists
    /// the names; a bucket write is one object per request).
    pub fn requests(&self) -> Vec<WriteRequest> {
        self.entries
            .iter()
            .map(|e| WriteRequest {
                name: format!("health {}", e.key),
                ops: vec![match &e.report {
                    Some(r) => WriteOp::Put {
                        path: e.key.path(),
                        content: r.document(self.heartbeat).into_bytes(),
                    },
                    None => WriteOp::Delete { path: e.key.path() },
                }],
            })
            .collect()
    }

    /// One `(store path, document)` message per record for a stream: the record, or the
    /// [`tombstone`] of a deleted one.
    pub fn messages(&self) -> Vec<(String, String)> {
        self.entries
            .iter()
            .map(|e| {
                let body = match &e.report {
                    Some(r) => r.document(self.heartbeat),
                    None => tombstone(&e.key.namespace, &e.key.record_name()),
                };
                (e.key.path(), body)
            })
            .collect()
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Written {
    state: HealthState,
    details: Option<Value>,
    last_run: Timestamp,
    schedule: Option<String>,
}

#[derive(Clone, Debug)]
enum Pending {
    Put(Box<HealthReport>),
    Delete,
}

/// The writer's decisions, with time passed in: what each run needs written and when a
/// flush is due. Not thread-safe by itself ([`HealthWriter`] wraps it in a mutex).
#[derive(Debug, Default)]
pub struct HealthLedger {
    cfg: HealthWriterConfig,
    written: HashMap<RecordKey, Written>,
    latest: HashMap<RecordKey, HealthReport>,
    pending: BTreeMap<RecordKey, (Pending, Timestamp)>,
    window_start: Option<Timestamp>,
    retry_delay: Option<Duration>,
    dropped: u64,
}

fn add(t: Timestamp, d: Duration) -> Timestamp {
    t.checked_add(SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX))
        .unwrap_or(Timestamp::MAX)
}

impl HealthLedger {
    /// An empty ledger (nothing written yet).
    pub fn new(cfg: HealthWriterConfig) -> HealthLedger {
        HealthLedger {
            cfg,
            ..HealthLedger::default()
        }
    }

    /// Takes one check run. Queues it when its state or details differ from what was
    /// written last (or from what is queued), or when the heartbeat is due; otherwise
    /// drops it (and any queued change it undoes).
    pub fn report(&mut self, r: HealthReport, now: Timestamp) -> Disposition {
        self.latest.insert(r.key.clone(), r.clone());
        let Some(w) = self.written.get(&r.key) else {
            self.enqueue(r.key.clone(), Pending::Put(Box::new(r)), now);
            return Disposition::Queued;
        };
        if w.state != r.state || w.details != r.details || w.schedule != r.schedule {
            self.enqueue(r.key.clone(), Pending::Put(Box::new(r)), now);
            return Disposition::Queued;
        }
        let hb = self.cfg.heartbeat_interval;
        if !hb.is_zero() && r.run_at >= add(w.last_run, hb) {
            self.enqueue(r.key.clone(), Pending::Put(Box::new(r)), now);
            return Disposition::Queued;
        }
        // Back to what is written: a queued change it undoes need not be written.
        if matches!(self.pending.get(&r.key), Some((Pending::Put(_), _))) {
            self.pending.remove(&r.key);
        }
        Disposition::Suppressed
    }

    /// The HealthDefinition is gone: its record is deleted at the next flush.
    pub fn remove(&mut self, key: &RecordKey, now: Timestamp) {
        self.latest.remove(key);
        if self.written.contains_key(key) {
            self.enqueue(key.clone(), Pending::Delete, now);
        } else {
            self.pending.remove(key);
        }
    }

    fn enqueue(&mut self, key: RecordKey, p: Pending, now: Timestamp) {
        if !self.pending.contains_key(&key) && self.pending.len() >= self.cfg.max_queued.max(1) {
            // Full: the record whose change waited longest gives way.
            if let Some(oldest) = self
                .pending
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(k, _)| k.clone())
            {
                self.pending.remove(&oldest);
                self.dropped += 1;
            }
        }
        self.pending.insert(key, (p, now));
        self.window_start.get_or_insert(now);
    }

    /// When the next flush is due, if anything is queued.
    pub fn due_at(&self) -> Option<Timestamp> {
        let start = self.window_start?;
        Some(add(
            start,
            self.retry_delay.unwrap_or(self.cfg.flush_window),
        ))
    }

    /// Records queued and not yet handed out.
    pub fn queued(&self) -> usize {
        self.pending.len()
    }

    /// Queued records dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Hands out the queued writes when the flush window has passed, plus the heartbeats
    /// that are at least half due (they share the write). The records count as written from
    /// now on; call [`HealthLedger::failed`] if the store refuses them.
    pub fn take_due(&mut self, now: Timestamp) -> Option<Batch> {
        if self.due_at().is_none_or(|at| now < at) {
            return None;
        }
        Some(self.take_all(now))
    }

    /// Hands out everything queued now, window or not (shutdown, tests); as
    /// [`HealthLedger::take_due`] otherwise.
    pub fn take_all(&mut self, now: Timestamp) -> Batch {
        self.window_start = None;
        let mut entries: BTreeMap<RecordKey, Option<HealthReport>> =
            std::mem::take(&mut self.pending)
                .into_iter()
                .map(|(k, (p, _))| {
                    let r = match p {
                        Pending::Put(r) => Some(*r),
                        Pending::Delete => None,
                    };
                    (k, r)
                })
                .collect();
        self.add_riders(&mut entries, now);
        let mut batch = Batch {
            heartbeat: self.cfg.heartbeat_interval,
            ..Batch::default()
        };
        for (key, report) in entries {
            let before = match &report {
                Some(r) => self.written.insert(
                    key.clone(),
                    Written {
                        state: r.state,
                        details: r.details.clone(),
                        last_run: r.run_at,
                        schedule: r.schedule.clone(),
                    },
                ),
                None => self.written.remove(&key),
            };
            batch.previous.push((key.clone(), before));
            batch.entries.push(BatchEntry { key, report });
        }
        batch
    }

    /// Heartbeats half due ride along with a write that happens anyway.
    fn add_riders(&self, entries: &mut BTreeMap<RecordKey, Option<HealthReport>>, now: Timestamp) {
        let hb = self.cfg.heartbeat_interval;
        if hb.is_zero() || entries.is_empty() {
            return;
        }
        for (key, latest) in &self.latest {
            if entries.contains_key(key) {
                continue;
            }
            if let Some(w) = self.written.get(key)
                && latest.run_at > w.last_run
                && now >= add(w.last_run, hb / 2)
            {
                entries.insert(key.clone(), Some(latest.clone()));
            }
        }
    }

    /// The store took the batch: forget the retry back-off.
    pub fn succeeded(&mut self) {
        self.retry_delay = None;
    }

    /// The store refused `failed` entries of `batch`: they are queued again unless a newer
    /// run of the same record is queued already, and the next try waits a flush window,
    /// doubling on every further failure (at most 5 minutes).
    pub fn failed(&mut self, batch: Batch, failed: &[RecordKey], now: Timestamp) {
        for (key, before) in batch.previous {
            if !failed.contains(&key) {
                continue;
            }
            match before {
                Some(w) => self.written.insert(key.clone(), w),
                None => self.written.remove(&key),
            };
        }
        for e in batch.entries {
            if !failed.contains(&e.key) || self.pending.contains_key(&e.key) {
                continue;
            }
            let p = match e.report {
                Some(r) => Pending::Put(Box::new(r)),
                None => Pending::Delete,
            };
            self.enqueue(e.key, p, now);
        }
        let next = match self.retry_delay {
            None => self.cfg.flush_window,
            Some(d) => (d * 2).min(MAX_RETRY_DELAY),
        };
        self.retry_delay = Some(next.max(Duration::from_millis(1)));
        self.window_start = Some(now);
    }
}

/// Where a [`HealthWriter`] writes: one result per entry of the batch, in order.
pub trait HealthSink: Send + Sync {
    /// Writes the batch's entries (concurrently where the store allows).
    fn write(&self, batch: &Batch) -> BoxFuture<'_, Vec<Result<(), StoreError>>>;
}

/// A state store opened on first use and again after a failure, so a store that is down
/// when the agent starts is picked up once it is back.
pub struct StoreSink {
    cfg: StoreConfig,
    store: tokio::sync::Mutex<Option<StateStore>>,
}

impl StoreSink {
    /// A sink for the store `cfg` names (opened lazily).
    pub fn new(cfg: StoreConfig) -> StoreSink {
        StoreSink {
            cfg,
            store: tokio::sync::Mutex::new(None),
        }
    }
}

impl HealthSink for StoreSink {
    fn write(&self, batch: &Batch) -> BoxFuture<'_, Vec<Result<(), StoreError>>> {
        let reqs = batch.requests();
        Box::pin(async move {
            let mut guard = self.store.lock().await;
            if guard.is_none() {
                match StateStore::open(self.cfg.clone()).await {
                    Ok(s) => *guard = Some(s),
                    Err(e) => return reqs.iter().map(|_| Err(e.clone())).collect(),
                }
            }
            let store = guard.clone().expect("opened above");
            drop(guard);
            // Issued at once, so the Git worker puts them in one commit.
            let results = futures::future::join_all(reqs.into_iter().map(|r| store.write(r))).await;
            if results.iter().any(Result::is_err) {
                *self.store.lock().await = None;
            }
            results.into_iter().map(|r| r.map(|_| ())).collect()
        })
    }
}

/// The time source of a [`HealthWriter`] (a fixed or stepped clock in tests).
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// The running health writer: [`HealthWriter::report`] records a run without waiting; a
/// task flushes the ledger to the sink when a window closes. Dropping the writer stops
/// the task (unwritten records are lost; call [`HealthWriter::flush`] first).
pub struct HealthWriter {
    ledger: Arc<Mutex<HealthLedger>>,
    sink: Arc<dyn HealthSink>,
    clock: Clock,
    flushing: Arc<tokio::sync::Mutex<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HealthWriter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HealthWriter {
    /// Starts a writer on the current Tokio runtime, checking for due flushes every `tick`.
    pub fn start(
        sink: Arc<dyn HealthSink>,
        cfg: HealthWriterConfig,
        clock: Clock,
        tick: Duration,
    ) -> HealthWriter {
        let ledger = Arc::new(Mutex::new(HealthLedger::new(cfg)));
        let flushing = Arc::new(tokio::sync::Mutex::new(()));
        let task = {
            let (ledger, sink, clock, flushing) = (
                ledger.clone(),
                sink.clone(),
                clock.clone(),
                flushing.clone(),
            );
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(tick).await;
                    flush_due(&ledger, sink.as_ref(), &clock, &flushing, false).await;
                }
            })
        };
        HealthWriter {
            ledger,
            sink,
            clock,
            flushing,
            task,
        }
    }

    /// Records a check run (never waits for the store).
    pub fn report(&self, r: HealthReport) -> Disposition {
        let now = (self.clock)();
        self.ledger.lock().expect("health ledger").report(r, now)
    }

    /// Deletes a record at the next flush.
    pub fn remove(&self, key: &RecordKey) {
        let now = (self.clock)();
        self.ledger.lock().expect("health ledger").remove(key, now);
    }

    /// Writes everything queued now, ignoring the window; returns how many records failed.
    pub async fn flush(&self) -> usize {
        flush_due(
            &self.ledger,
            self.sink.as_ref(),
            &self.clock,
            &self.flushing,
            true,
        )
        .await
    }

    /// Records queued and not yet written.
    pub fn queued(&self) -> usize {
        self.ledger.lock().expect("health ledger").queued()
    }

    /// Queued records dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.ledger.lock().expect("health ledger").dropped()
    }
}

async fn flush_due(
    ledger: &Mutex<HealthLedger>,
    sink: &dyn HealthSink,
    clock: &Clock,
    flushing: &tokio::sync::Mutex<()>,
    force: bool,
) -> usize {
    let _one_at_a_time = flushing.lock().await;
    let batch = {
        let mut l = ledger.lock().expect("health ledger");
        let now = clock();
        if force {
            Some(l.take_all(now)).filter(|b| !b.entries.is_empty())
        } else {
            l.take_due(now)
        }
    };
    let Some(batch) = batch else { return 0 };
    let results = sink.write(&batch).await;
    let failed: Vec<RecordKey> = batch
        .entries
        .iter()
        .zip(&results)
        .filter(|(_, r)| r.is_err())
        .map(|(e, _)| e.key.clone())
        .collect();
    if let Some(Err(e)) = results.iter().find(|r| r.is_err()) {
        tracing::warn!(records = failed.len(), error = %e, "health store write failed; records stay queued");
    }
    let mut l = ledger.lock().expect("health ledger");
    if failed.is_empty() {
        l.succeeded();
    } else {
        l.failed(batch, &failed, clock());
    }
    failed.len()
}

/// The tombstone of record `namespace/name`: a HealthRecord document without `data`.
pub fn tombstone(namespace: &str, name: &str) -> String {
    let doc = json!({
        "apiVersion": names::RECORD_API_VERSION,
        "kind": names::RECORD_KIND,
        "metadata": {"name": name, "namespace": namespace},
    });
    serde_saphyr::to_string(&doc).expect("a JSON value serialises as YAML")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn key(request: &str) -> RecordKey {
        RecordKey {
            namespace: "default".into(),
            promise: "redis".into(),
            request: request.into(),
            definition_namespace: "default".into(),
            definition: "liveness".into(),
        }
    }

    fn run(request: &str, state: HealthState, at: i64) -> HealthReport {
        HealthReport {
            key: key(request),
            state,
            details: None,
            run_at: t(at),
            schedule: None,
        }
    }

    fn written_keys(b: &Batch) -> Vec<String> {
        b.entries.iter().map(|e| e.key.request.clone()).collect()
    }

    #[test]
    fn unchanged_runs_write_nothing_until_the_heartbeat() {
        let mut l = HealthLedger::new(HealthWriterConfig::default());
        assert_eq!(
            l.report(run("a", HealthState::Healthy, 0), t(0)),
            Disposition::Queued
        );
        assert!(l.take_due(t(9)).is_none(), "window still open");
        assert_eq!(written_keys(&l.take_due(t(10)).unwrap()), ["a"]);
        for m in 1..60 {
            let d = l.report(run("a", HealthState::Healthy, m * 60), t(m * 60));
            assert_eq!(d, Disposition::Suppressed, "minute {m}");
            assert!(l.take_due(t(m * 60 + 10)).is_none());
        }
        // An hour after the last written lastRun: the heartbeat is written.
        assert_eq!(
            l.report(run("a", HealthState::Healthy, 3600), t(3600)),
            Disposition::Queued
        );
        let b = l.take_due(t(3610)).unwrap();
        assert_eq!(b.entries[0].report.as_ref().unwrap().run_at, t(3600));
        assert_eq!(
            l.report(run("a", HealthState::Healthy, 3660), t(3660)),
            Disposition::Suppressed
        );
    }

    #[test]
    fn a_zero_heartbeat_never_refreshes_last_run() {
        let cfg = HealthWriterConfig {
            heartbeat_interval: Duration::ZERO,
            ..HealthWriterConfig::default()
        };
        let mut l = HealthLedger::new(cfg);
        l.report(run("a", HealthState::Healthy, 0), t(0));
        l.take_due(t(10)).unwrap();
        for h in 1..=48 {
            let at = h * 3600;
            assert_eq!(
                l.report(run("a", HealthState::Healthy, at), t(at)),
                Disposition::Suppressed
            );
        }
        assert_eq!(l.queued(), 0);
    }

    #[test]
    fn changes_within_a_window_are_one_batch_and_details_count_as_change() {
        let mut l = HealthLedger::new(HealthWriterConfig::default());
        l.report(run("a", HealthState::Healthy, 0), t(0));
        l.report(run("b", HealthState::Healthy, 3), t(3));
        l.report(run("c", HealthState::Degraded, 9), t(9));
        assert!(l.take_due(t(9)).is_none());
        let b = l.take_due(t(10)).unwrap();
        assert_eq!(written_keys(&b), ["a", "b", "c"]);
        assert!(l.take_due(t(100)).is_none(), "nothing left");
        // Same state, new details: a change.
        let mut r = run("a", HealthState::Healthy, 60);
        r.details = Some(json!({"replicas": 2}));
        assert_eq!(l.report(r, t(60)), Disposition::Queued);
        // A later run in the same window replaces the queued one (newest wins).
        l.report(run("a", HealthState::Unhealthy, 65), t(65));
        let b = l.take_due(t(70)).unwrap();
        assert_eq!(b.entries.len(), 1);
        assert_eq!(
            b.entries[0].report.as_ref().unwrap().state,
            HealthState::Unhealthy
        );
    }

    #[test]
    fn a_change_undone_before_the_flush_writes_nothing() {
        let mut l = HealthLedger::new(HealthWriterConfig::default());
        l.report(run("a", HealthState::Healthy, 0), t(0));
        l.take_due(t(10)).unwrap();
        l.report(run("a", HealthState::Unhealthy, 60), t(60));
        l.report(run("a", HealthState::Healthy, 65), t(65));
        assert!(
            l.take_due(t(80))
                .map(|b| b.entries)
                .unwrap_or_default()
                .is_empty()
        );
    }

    #[test]
    fn heartbeats_half_due_ride_along_with_a_write() {
        let mut l = HealthLedger::new(HealthWriterConfig::default());
        l.report(run("a", HealthState::Healthy, 0), t(0));
        l.take_due(t(10)).unwrap();
        l.report(run("b", HealthState::Healthy, 1200), t(1200));
        l.take_due(t(1210)).unwrap();
        // At 40 min: a's lastRun is 40 min old (≥ half), b's 20 min (not yet).
        l.report(run("a", HealthState::Healthy, 2400), t(2400));
        l.report(run("b", HealthState::Healthy, 2400), t(2400));
        l.report(run("c", HealthState::Unhealthy, 2400), t(2400));
        let b = l.take_due(t(2410)).unwrap();
        assert_eq!(written_keys(&b), ["a", "c"]);
    }

    #[test]
    fn a_failed_batch_is_queued_again_and_the_newest_state_wins() {
        let mut l = HealthLedger::new(HealthWriterConfig::default());
        l.report(run("a", HealthState::Healthy, 0), t(0));
        l.report(run("b", HealthState::Healthy, 0), t(0));
        let b = l.take_due(t(10)).unwrap();
        // The store is down: a fails, b made it.
        l.failed(b, &[key("a")], t(11));
        assert_eq!(l.queued(), 1);
        // Retried after a window, then doubling.
        assert!(l.take_due(t(20)).is_none());
        let b = l.take_due(t(21)).unwrap();
        assert_eq!(written_keys(&b), ["a"]);
        l.failed(b, &[key("a")], t(21));
        assert_eq!(l.due_at(), Some(t(41)));
        // A newer run arrives while down: it replaces the queued one.
        l.report(run("a", HealthState::Unhealthy, 30), t(30));
        assert_eq!(l.queued(), 1);
        // b is written, so an unchanged b run stays silent even while the store is down.
        assert_eq!(
            l.report(run("b", HealthState::Healthy, 30), t(30)),
            Disposition::Suppressed
        );
        let b = l.take_due(t(41)).unwrap();
        assert_eq!(
            b.entries[0].report.as_ref().unwrap().state,
            HealthState::Unhealthy
        );
        l.succeeded();
        assert_eq!(
            l.report(run("a", HealthState::Unhealthy, 90), t(90)),
            Disposition::Suppressed
        );
    }

    #[test]
    fn a_failed_first_write_leaves_the_record_unwritten() {
        let mut l = HealthLedger::new(HealthWriterConfig::default());
        l.report(run("a", HealthState::Healthy, 0), t(0));
        let b = l.take_due(t(10)).unwrap();
        l.failed(b, &[key("a")], t(10));
        // Still not written: the same state is not suppressed by the failed attempt.
        let b = l.take_due(t(20)).unwrap();
        assert_eq!(written_keys(&b), ["a"]);
    }

    #[test]
    fn the_queue_is_bounded_and_drops_the_oldest() {
        let cfg = HealthWriterConfig {
            max_queued: 2,
            ..HealthWriterConfig::default()
        };
        let mut l = HealthLedger::new(cfg);
        l.report(run("a", HealthState::Healthy, 0), t(0));
        l.report(run("b", HealthState::Healthy, 1), t(1));
        l.report(run("a", HealthState::Unhealthy, 2), t(2));
        l.report(run("c", HealthState::Healthy, 3), t(3));
        assert_eq!(l.queued(), 2);
        assert_eq!(l.dropped(), 1);
        let b = l.take_due(t(10)).unwrap();
        assert_eq!(written_keys(&b), ["a", "c"], "b waited longest");
    }

    #[test]
    fn removing_a_written_record_deletes_it_once() {
        let mut l = HealthLedger::new(HealthWriterConfig::default());
        l.remove(&key("x"), t(0));
        assert!(l.due_at().is_none(), "never written: nothing to delete");
        l.report(run("a", HealthState::Healthy, 0), t(0));
        l.take_due(t(10)).unwrap();
        l.remove(&key("a"), t(20));
        let b = l.take_due(t(30)).unwrap();
        assert_eq!(b.entries[0].report, None);
        let reqs = b.requests();
        assert_eq!(
            reqs[0].ops,
            [WriteOp::Delete {
                path: "default/redis/a/liveness.yaml".into()
            }]
        );
    }

    #[test]
    fn the_record_document_is_a_health_record_at_the_documented_path() {
        let mut r = run("a", HealthState::Degraded, 42);
        r.details = Some(json!({"reason": "1 of 3 replicas"}));
        assert_eq!(r.key.path(), "default/redis/a/liveness.yaml");
        let doc: Value = serde_saphyr::from_str(&r.document(Duration::ZERO)).unwrap();
        assert_eq!(doc["apiVersion"], "platform.kratix.io/v1alpha1");
        assert_eq!(doc["kind"], "HealthRecord");
        assert_eq!(doc["metadata"]["namespace"], "default");
        assert_eq!(doc["metadata"]["name"], r.key.record_name().as_str());
        assert_eq!(doc["data"]["state"], "degraded");
        assert_eq!(doc["data"]["lastRun"], 1_800_000_042);
        assert_eq!(doc["data"]["promiseRef"]["name"], "redis");
        assert_eq!(doc["data"]["resourceRef"]["name"], "a");
        assert_eq!(doc["data"]["details"]["reason"], "1 of 3 replicas");
        assert!(doc["metadata"].get("annotations").is_none());
    }

    #[test]
    fn a_record_with_a_schedule_carries_it_and_the_heartbeat() {
        let mut r = run("a", HealthState::Healthy, 42);
        r.schedule = Some("*/5 * * * *".into());
        let doc: Value = serde_saphyr::from_str(&r.document(Duration::from_secs(3600))).unwrap();
        let a = &doc["metadata"]["annotations"];
        assert_eq!(a[names::SCHEDULE_ANNOTATION], "*/5 * * * *");
        assert_eq!(a[names::REFRESH_ANNOTATION], "3600");
    }

    #[test]
    fn a_new_schedule_is_written_although_the_state_did_not_change() {
        let mut l = HealthLedger::new(HealthWriterConfig::default());
        l.report(run("a", HealthState::Healthy, 0), t(0));
        l.take_all(t(0));
        let mut r = run("a", HealthState::Healthy, 60);
        assert_eq!(l.report(r.clone(), t(60)), Disposition::Suppressed);
        r.schedule = Some("@daily".into());
        assert_eq!(l.report(r, t(60)), Disposition::Queued);
    }
}
