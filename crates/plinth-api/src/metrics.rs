//! Plinth's Prometheus metrics: one [`Metrics`] value holds every metric family and the
//! registry they are encoded from. A process makes one (`Arc<Metrics>`) and hands it to
//! the API server, the controllers, the runner and the agent; `/metrics` encodes it in the
//! Prometheus text format (version 0.0.4). Nothing here is global: two platforms in one
//! process (tests) have two sets of metrics.
//!
//! Names follow controller-runtime's where one exists (`controller_runtime_reconcile_*`),
//! so dashboards written for Kratix's controller manager keep working; Kratix's own two
//! counters keep their names and label sets. Every metric is described in
//! `docs/metrics.md`.
//!
//! Every label value comes from a bounded set: fixed words (results, verbs, actions),
//! names the process knows (controllers, registered resources) or the names of live
//! objects (Promises, requests, Destinations, state stores). Series named after an object
//! are removed when the object goes ([`Metrics::forget`], [`Metrics::forget_request`],
//! [`Metrics::forget_store`]), so deleted objects do not accumulate.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// A metric's label set: `(name, value)` pairs in a fixed order per metric.
pub type Labels = Vec<(String, String)>;

type HistogramFamily = Series<Histogram, fn() -> Histogram>;

/// A metric family that knows its label sets, so the series of a deleted object can be
/// found and removed (prometheus-client's `Family` can remove a label set but not list
/// them).
pub struct Series<M, C = fn() -> M> {
    family: Family<Labels, M, C>,
    keys: Mutex<HashSet<Labels>>,
}

impl<M: Default> Default for Series<M> {
    fn default() -> Self {
        Series {
            family: Family::default(),
            keys: Mutex::new(HashSet::new()),
        }
    }
}

impl<M: Clone, C: MetricConstructor<M> + Clone> Series<M, C> {
    fn new_with_constructor(constructor: C) -> Self {
        Series {
            family: Family::new_with_constructor(constructor),
            keys: Mutex::new(HashSet::new()),
        }
    }

    /// The metric of `labels`, created when new. The returned handle shares the series'
    /// value.
    pub fn get_or_create(&self, labels: &Labels) -> M {
        // The key set and the family change under one lock, so a concurrent removal
        // cannot leave a series that the key set does not know.
        let mut keys = self.keys.lock().expect("metrics lock");
        if !keys.contains(labels) {
            keys.insert(labels.clone());
        }
        self.family.get_or_create_owned(labels)
    }

    /// The metric of `labels` if the series exists.
    pub fn get(&self, labels: &Labels) -> Option<M> {
        self.family.get(labels).map(|m| m.clone())
    }

    /// Removes every series whose labels `drop` selects; returns how many went.
    pub fn remove_where(&self, mut drop: impl FnMut(&Labels) -> bool) -> usize {
        let mut keys = self.keys.lock().expect("metrics lock");
        let before = keys.len();
        keys.retain(|k| {
            let gone = drop(k);
            if gone {
                self.family.remove(k);
            }
            !gone
        });
        before - keys.len()
    }

    /// How many series the family holds.
    pub fn len(&self) -> usize {
        self.keys.lock().expect("metrics lock").len()
    }

    /// True when the family holds no series.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn family(&self) -> Family<Labels, M, C> {
        self.family.clone()
    }
}

/// The value of label `name` in `labels`.
fn value_of<'a>(labels: &'a Labels, name: &str) -> Option<&'a str> {
    labels
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// True when `labels` has every `(name, value)` of `pairs`.
fn has_all(labels: &Labels, pairs: &[(&str, &str)]) -> bool {
    pairs.iter().all(|(k, v)| value_of(labels, k) == Some(*v))
}

/// Resource requests a process exports `plinth_health_request_state` for (by default):
/// beyond it, further requests get no per-request series and
/// `plinth_health_request_series_dropped_total` counts them.
pub const MAX_REQUEST_SERIES: usize = 10_000;

/// The `Content-Type` of what [`Metrics::encode`] returns.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

fn duration_histogram() -> Histogram {
    // 1 ms .. ~65 s: reconciles, API requests and state store writes.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

fn pipeline_histogram() -> Histogram {
    // 0.1 s .. ~27 min: pipeline Jobs.
    Histogram::new(exponential_buckets(0.1, 2.0, 15))
}

/// Every metric Plinth exports. Cheap to share (`Arc<Metrics>`); each family is
/// internally synchronised.
pub struct Metrics {
    registry: Registry,
    /// `controller_runtime_reconcile_total{controller, result}`: reconciles by outcome
    /// (`success`, `error`, `requeue`, `requeue_after`).
    pub reconciles: Series<Counter>,
    /// `controller_runtime_reconcile_errors_total{controller}`: reconciles that failed.
    pub reconcile_errors: Series<Counter>,
    /// `controller_runtime_reconcile_time_seconds{controller}`: reconcile duration.
    pub reconcile_time: HistogramFamily,
    /// `controller_runtime_active_workers{controller}`: reconciles running now.
    pub active_workers: Series<Gauge>,
    /// `plinth_pipeline_runs_total{promise, pipeline, result}`: finished pipeline Jobs.
    pub pipeline_runs: Series<Counter>,
    /// `plinth_pipeline_duration_seconds{promise, pipeline, result}`: Job start to finish.
    pub pipeline_duration: HistogramFamily,
    /// `plinth_statestore_writes_total{kind, store, result}`: write requests to a store.
    pub store_writes: Series<Counter>,
    /// `plinth_statestore_write_duration_seconds{kind, store}`: write latency, batching
    /// window and push included.
    pub store_write_duration: HistogramFamily,
    /// `plinth_statestore_written_bytes_total{kind, store}`: file content bytes sent.
    pub store_written_bytes: Series<Counter>,
    /// `plinth_statestore_commits_total{kind, store}`: distinct Git commits (bucket: writes
    /// that changed objects) made by this process.
    pub store_commits: Series<Counter>,
    /// Last counted commit per store, so writes batched into one commit count it once.
    last_commit: Mutex<HashMap<String, String>>,
    /// Health state per `(promise, namespace/name)` of request, behind `health_states`,
    /// and whether the request has a `plinth_health_request_state` series.
    health_of: Mutex<HashMap<(String, String), (String, bool)>>,
    /// Requests with a `plinth_health_request_state` series now.
    request_series_count: AtomicUsize,
    /// At most this many requests get a `plinth_health_request_state` series.
    request_series_cap: AtomicUsize,
    /// `kratix_workplacement_writes_total{result, promise, resource, destination,
    /// pipeline}`: WorkPlacement writes to a state store, as Kratix counts them.
    pub workplacement_writes: Series<Counter>,
    /// `kratix_workplacement_outcomes_total{result, promise, resource, namespace,
    /// destination}`: scheduling outcomes (`scheduled`, `unscheduled`, `misplaced`).
    pub workplacement_outcomes: Series<Counter>,
    /// `plinth_apiserver_requests_total{verb, resource, code}`.
    pub api_requests: Series<Counter>,
    /// `plinth_apiserver_request_duration_seconds{verb, resource}`.
    pub api_request_duration: HistogramFamily,
    /// `plinth_apiserver_watches{resource}`: open watches.
    pub api_watches: Series<Gauge>,
    /// `plinth_apiserver_sqlite_size_bytes`: database file size (main file and WAL).
    pub sqlite_size_bytes: Gauge,
    /// `plinth_health_requests{promise, state}`: resource requests per health state.
    pub health_states: Series<Gauge>,
    /// `plinth_health_request_state{promise, namespace, name, state}`: 1 for each request
    /// with a health state, while it has one (at most [`MAX_REQUEST_SERIES`] requests).
    pub health_request_state: Series<Gauge>,
    /// `plinth_health_request_series_dropped_total`: requests that got no
    /// `plinth_health_request_state` series because the cap was reached.
    pub health_request_dropped: Counter,
    /// `plinth_alertmanager_alerts_total{result}`: alerts the Alertmanager receiver
    /// handled, by outcome (`applied`, `unchanged`, `stale`, `noRequestLabels`,
    /// `requestNotFound`, `conflict`, `error`).
    pub alertmanager_alerts: Series<Counter>,
    /// `plinth_agent_passes_total{agent, result}`: Destination agent passes (`success`,
    /// `error`).
    pub agent_passes: Series<Counter>,
    /// `plinth_agent_pass_duration_seconds{agent}`: read, apply and prune of one pass.
    pub agent_pass_duration: HistogramFamily,
    /// `plinth_agent_objects_total{agent, action}`: objects `applied`, `unchanged` or
    /// `pruned` by the agent's passes.
    pub agent_objects: Series<Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

/// Builds a label set from `(name, value)` pairs.
pub fn labels<const N: usize>(pairs: [(&str, &str); N]) -> Labels {
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl Metrics {
    /// A fresh set of metrics, every family registered and empty.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let hist = || HistogramFamily::new_with_constructor(duration_histogram);
        let m = Metrics {
            reconciles: Series::default(),
            reconcile_errors: Series::default(),
            reconcile_time: hist(),
            active_workers: Series::default(),
            pipeline_runs: Series::default(),
            pipeline_duration: HistogramFamily::new_with_constructor(pipeline_histogram),
            store_writes: Series::default(),
            store_write_duration: hist(),
            store_written_bytes: Series::default(),
            store_commits: Series::default(),
            last_commit: Mutex::new(HashMap::new()),
            health_of: Mutex::new(HashMap::new()),
            request_series_count: AtomicUsize::new(0),
            request_series_cap: AtomicUsize::new(MAX_REQUEST_SERIES),
            workplacement_writes: Series::default(),
            workplacement_outcomes: Series::default(),
            api_requests: Series::default(),
            api_request_duration: hist(),
            api_watches: Series::default(),
            sqlite_size_bytes: Gauge::default(),
            health_states: Series::default(),
            health_request_state: Series::default(),
            health_request_dropped: Counter::default(),
            alertmanager_alerts: Series::default(),
            agent_passes: Series::default(),
            agent_pass_duration: hist(),
            agent_objects: Series::default(),
            registry: Registry::default(),
        };
        m.register_controllers(&mut registry);
        m.register_stores(&mut registry);
        m.register_api_and_agents(&mut registry);
        Metrics { registry, ..m }
    }

    /// Registers the controller and pipeline families.
    fn register_controllers(&self, r: &mut Registry) {
        r.register(
            "controller_runtime_reconcile",
            "Reconciles per controller and result",
            self.reconciles.family(),
        );
        r.register(
            "controller_runtime_reconcile_errors",
            "Reconciles that returned an error, per controller",
            self.reconcile_errors.family(),
        );
        r.register(
            "controller_runtime_reconcile_time_seconds",
            "Time a reconcile took, per controller",
            self.reconcile_time.family(),
        );
        r.register(
            "controller_runtime_active_workers",
            "Reconciles running now, per controller",
            self.active_workers.family(),
        );
        r.register(
            "plinth_pipeline_runs",
            "Finished pipeline Jobs by Promise, pipeline and result",
            self.pipeline_runs.family(),
        );
        r.register(
            "plinth_pipeline_duration_seconds",
            "Pipeline Job duration from start to finish",
            self.pipeline_duration.family(),
        );
    }

    /// Registers the state store and WorkPlacement families.
    fn register_stores(&self, r: &mut Registry) {
        r.register(
            "plinth_statestore_writes",
            "Write requests to a state store by result",
            self.store_writes.family(),
        );
        r.register(
            "plinth_statestore_write_duration_seconds",
            "State store write latency (batching and push included)",
            self.store_write_duration.family(),
        );
        r.register(
            "plinth_statestore_written_bytes",
            "File content bytes written to a state store",
            self.store_written_bytes.family(),
        );
        r.register(
            "plinth_statestore_commits",
            "Distinct commits made to a state store",
            self.store_commits.family(),
        );
        r.register(
            "kratix_workplacement_writes",
            "WorkPlacement writes to a state store",
            self.workplacement_writes.family(),
        );
        r.register(
            "kratix_workplacement_outcomes",
            "Scheduling outcomes of workload groups",
            self.workplacement_outcomes.family(),
        );
    }

    /// Registers the API server, health and agent families.
    fn register_api_and_agents(&self, r: &mut Registry) {
        r.register(
            "plinth_apiserver_requests",
            "API server requests by verb, resource and status code",
            self.api_requests.family(),
        );
        r.register(
            "plinth_apiserver_request_duration_seconds",
            "API server request latency by verb and resource",
            self.api_request_duration.family(),
        );
        r.register(
            "plinth_apiserver_watches",
            "Open watches by resource",
            self.api_watches.family(),
        );
        r.register(
            "plinth_apiserver_sqlite_size_bytes",
            "Size of the API server's SQLite database (main file and WAL)",
            self.sqlite_size_bytes.clone(),
        );
        r.register(
            "plinth_health_requests",
            "Resource requests per Promise and health state",
            self.health_states.family(),
        );
        r.register(
            "plinth_health_request_state",
            "1 per resource request and its current health state (capped per process)",
            self.health_request_state.family(),
        );
        r.register(
            "plinth_health_request_series_dropped",
            "Resource requests without a plinth_health_request_state series (cap reached)",
            self.health_request_dropped.clone(),
        );
        r.register(
            "plinth_alertmanager_alerts",
            "Alerts received from Alertmanager by outcome",
            self.alertmanager_alerts.family(),
        );
        r.register(
            "plinth_agent_passes",
            "Destination agent passes by result",
            self.agent_passes.family(),
        );
        r.register(
            "plinth_agent_pass_duration_seconds",
            "Duration of one Destination agent pass",
            self.agent_pass_duration.family(),
        );
        r.register(
            "plinth_agent_objects",
            "Objects applied, left unchanged or pruned by a Destination agent",
            self.agent_objects.family(),
        );
    }

    /// Everything in the Prometheus text format (version 0.0.4, [`CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_text::encode(&mut out, &self.registry);
        out
    }

    /// Records one state store write: its result, latency and content bytes, and a commit
    /// when `version` (the commit SHA or bucket digest after the write) is new for `store`
    /// and the write changed something. `kind` is `GitStateStore` or `BucketStateStore`.
    pub fn observe_store_write(
        &self,
        kind: &str,
        store: &str,
        elapsed: Duration,
        bytes: u64,
        outcome: Result<(bool, &str), ()>,
    ) {
        let key = labels([("kind", kind), ("store", store)]);
        let result = if outcome.is_ok() {
            "success"
        } else {
            "failure"
        };
        self.store_writes
            .get_or_create(&labels([
                ("kind", kind),
                ("store", store),
                ("result", result),
            ]))
            .inc();
        self.store_write_duration
            .get_or_create(&key)
            .observe(elapsed.as_secs_f64());
        if let Ok((changed, version)) = outcome {
            self.store_written_bytes.get_or_create(&key).inc_by(bytes);
            if changed && !version.is_empty() {
                let id = format!("{kind}/{store}");
                let mut last = self.last_commit.lock().expect("metrics lock");
                if last.get(&id).map(String::as_str) != Some(version) {
                    last.insert(id, version.to_string());
                    self.store_commits.get_or_create(&key).inc();
                }
            }
        }
    }

    /// Sets the health state of `promise`'s request `request` (`namespace/name`); `None`
    /// when it has none any more (no records, or deleted). Keeps
    /// `plinth_health_requests{promise, state}` counting requests per state and
    /// `plinth_health_request_state{promise, namespace, name, state}` at 1 for the
    /// request's state (while fewer than the cap of requests have one; see
    /// [`Metrics::set_request_series_cap`]).
    pub fn set_health(&self, promise: &str, request: &str, state: Option<&str>) {
        // The state is read back from the request's status, which a client may have
        // written: only HealthRecord states become label values.
        let state = state.map(|s| {
            serde_json::from_value::<crate::HealthState>(serde_json::Value::from(s))
                .map_or("other", |_| s)
        });
        let mut of = self.health_of.lock().expect("metrics lock");
        let key = (promise.to_string(), request.to_string());
        let before = of.get(&key).cloned();
        if before.as_ref().map(|(s, _)| s.as_str()) == state {
            return;
        }
        let (ns, name) = request.split_once('/').unwrap_or(("", request));
        let per_request = |s: &str| {
            labels([
                ("promise", promise),
                ("namespace", ns),
                ("name", name),
                ("state", s),
            ])
        };
        let mut exported = false;
        if let Some((b, had_series)) = &before {
            self.health_states
                .get_or_create(&labels([("promise", promise), ("state", b)]))
                .dec();
            if *had_series {
                self.health_request_state
                    .remove_where(|l| *l == per_request(b));
                exported = true;
            }
        }
        match state {
            Some(s) => {
                self.health_states
                    .get_or_create(&labels([("promise", promise), ("state", s)]))
                    .inc();
                if !exported && self.take_request_slot() {
                    exported = true;
                } else if !exported && before.is_none() {
                    self.health_request_dropped.inc();
                }
                if exported {
                    self.health_request_state
                        .get_or_create(&per_request(s))
                        .set(1);
                }
                of.insert(key, (s.to_string(), exported));
            }
            None => {
                if exported {
                    self.request_series_count.fetch_sub(1, Ordering::Relaxed);
                }
                of.remove(&key);
            }
        }
    }

    /// Reserves one request's `plinth_health_request_state` series under the cap.
    fn take_request_slot(&self) -> bool {
        let cap = self.request_series_cap.load(Ordering::Relaxed);
        self.request_series_count
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < cap).then_some(n + 1)
            })
            .is_ok()
    }

    /// Sets how many requests get a `plinth_health_request_state` series (default
    /// [`MAX_REQUEST_SERIES`]); requests already exported keep theirs.
    pub fn set_request_series_cap(&self, cap: usize) {
        self.request_series_cap.store(cap, Ordering::Relaxed);
    }

    /// Records one finished pipeline Job of `promise` (`result`: `succeeded` or `failed`).
    pub fn observe_pipeline(&self, promise: &str, pipeline: &str, result: &str, took: Duration) {
        let l = labels([
            ("promise", promise),
            ("pipeline", pipeline),
            ("result", result),
        ]);
        self.pipeline_runs.get_or_create(&l).inc();
        self.pipeline_duration
            .get_or_create(&l)
            .observe(took.as_secs_f64());
    }

    /// Records one API request (`verb` as Kubernetes names it: get, list, watch, create,
    /// update, patch, delete, deletecollection).
    pub fn observe_api_request(&self, verb: &str, resource: &str, code: u16, took: Duration) {
        self.api_requests
            .get_or_create(&labels([
                ("verb", verb),
                ("resource", resource),
                ("code", &code.to_string()),
            ]))
            .inc();
        self.api_request_duration
            .get_or_create(&labels([("verb", verb), ("resource", resource)]))
            .observe(took.as_secs_f64());
    }
}

/// A family as [`Metrics::forget`] sees it: label sets it can drop.
trait Prune {
    fn prune(&self, drop: &mut dyn FnMut(&Labels) -> bool) -> usize;
    fn count(&self) -> usize;
}

impl<M: Clone, C: MetricConstructor<M> + Clone> Prune for Series<M, C> {
    fn prune(&self, drop: &mut dyn FnMut(&Labels) -> bool) -> usize {
        self.remove_where(drop)
    }
    fn count(&self) -> usize {
        self.len()
    }
}

impl Metrics {
    fn families(&self) -> [&dyn Prune; 21] {
        [
            &self.reconciles,
            &self.reconcile_errors,
            &self.reconcile_time,
            &self.active_workers,
            &self.pipeline_runs,
            &self.pipeline_duration,
            &self.store_writes,
            &self.store_write_duration,
            &self.store_written_bytes,
            &self.store_commits,
            &self.workplacement_writes,
            &self.workplacement_outcomes,
            &self.api_requests,
            &self.api_request_duration,
            &self.api_watches,
            &self.health_states,
            &self.health_request_state,
            &self.alertmanager_alerts,
            &self.agent_passes,
            &self.agent_pass_duration,
            &self.agent_objects,
        ]
    }

    /// Removes, from every family, each series whose labels have all of `pairs`: e.g.
    /// `[("promise", "redis")]` when the Promise is deleted, `[("destination", "edge")]`
    /// when a Destination is. Returns how many series went.
    pub fn forget(&self, pairs: &[(&str, &str)]) -> usize {
        if pairs.is_empty() {
            return 0;
        }
        if let Some(promise) = pairs.iter().find(|(k, _)| *k == "promise").map(|p| p.1) {
            let mut freed = 0;
            self.health_of
                .lock()
                .expect("metrics lock")
                .retain(|(p, _), (_, exported)| {
                    let gone = p == promise;
                    freed += usize::from(gone && *exported);
                    !gone
                });
            self.request_series_count
                .fetch_sub(freed, Ordering::Relaxed);
        }
        self.families()
            .iter()
            .map(|f| f.prune(&mut |l| has_all(l, pairs)))
            .sum()
    }

    /// Removes the series of resource request `name` in `namespace` of `promise` (`name`
    /// empty: the Promise's own Works in `namespace`), called when the last Work made for
    /// it is gone. `kratix_workplacement_writes_total` has no namespace label (Kratix's
    /// label set), so its series go only when `name_elsewhere` is false: no request of
    /// that name is left in another namespace.
    pub fn forget_request(&self, promise: &str, namespace: &str, name: &str, name_elsewhere: bool) {
        let mut gone = self.workplacement_outcomes.remove_where(|l| {
            has_all(
                l,
                &[
                    ("promise", promise),
                    ("resource", name),
                    ("namespace", namespace),
                ],
            )
        });
        if !name_elsewhere {
            gone += self
                .workplacement_writes
                .remove_where(|l| has_all(l, &[("promise", promise), ("resource", name)]));
        }
        if !name.is_empty() {
            self.set_health(promise, &format!("{namespace}/{name}"), None);
        }
        tracing::trace!(promise, namespace, name, gone, "request metrics removed");
    }

    /// Removes the series of state store `name` of `kind` (`GitStateStore`,
    /// `BucketStateStore`), called when the store is deleted.
    pub fn forget_store(&self, kind: &str, name: &str) {
        self.last_commit
            .lock()
            .expect("metrics lock")
            .remove(&format!("{kind}/{name}"));
        self.forget(&[("kind", kind), ("store", name)]);
    }

    /// How many series all families hold (histograms count one per label set).
    pub fn series(&self) -> usize {
        self.families().iter().map(|f| f.count()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batched_writes_count_one_commit() {
        let m = Metrics::new();
        let t = Duration::from_millis(5);
        m.observe_store_write("GitStateStore", "default", t, 10, Ok((true, "abc")));
        m.observe_store_write("GitStateStore", "default", t, 20, Ok((true, "abc")));
        m.observe_store_write("GitStateStore", "default", t, 0, Ok((false, "abc")));
        m.observe_store_write("GitStateStore", "default", t, 5, Ok((true, "def")));
        m.observe_store_write("GitStateStore", "default", t, 5, Err(()));
        let text = m.encode();
        assert!(
            text.contains(
                r#"plinth_statestore_commits_total{kind="GitStateStore",store="default"} 2"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"plinth_statestore_written_bytes_total{kind="GitStateStore",store="default"} 35"#
            ),
            "{text}"
        );
        assert!(text.contains(
            r#"plinth_statestore_writes_total{kind="GitStateStore",store="default",result="failure"} 1"#
        ));
        assert!(text.contains("# TYPE plinth_statestore_write_duration_seconds histogram"));
    }

    #[test]
    fn health_gauge_counts_requests_per_state() {
        let m = Metrics::new();
        m.set_health("redis", "default/a", Some("healthy"));
        m.set_health("redis", "default/b", Some("healthy"));
        m.set_health("redis", "default/b", Some("degraded"));
        m.set_health("redis", "default/a", Some("healthy"));
        m.set_health("redis", "default/c", Some("degraded"));
        m.set_health("redis", "default/c", None);
        m.set_health("redis", "default/d", Some("made-up-by-a-client"));
        let text = m.encode();
        assert!(!text.contains("made-up"), "{text}");
        assert!(text.contains(r#"plinth_health_requests{promise="redis",state="other"} 1"#));
        assert!(
            text.contains(r#"plinth_health_requests{promise="redis",state="healthy"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"plinth_health_requests{promise="redis",state="degraded"} 1"#),
            "{text}"
        );
    }

    #[test]
    fn a_request_has_one_state_series_while_it_has_health() {
        let m = Metrics::new();
        m.set_health("redis", "default/a", Some("healthy"));
        m.set_health("redis", "default/a", Some("unhealthy"));
        let text = m.encode();
        assert!(
            text.contains(r#"plinth_health_request_state{promise="redis",namespace="default",name="a",state="unhealthy"} 1"#),
            "{text}"
        );
        assert!(!text.contains(r#"name="a",state="healthy""#), "{text}");
        m.forget_request("redis", "default", "a", false);
        assert!(!m.encode().contains("plinth_health_request_state{"));
        assert!(m.health_request_state.is_empty());
    }

    #[test]
    fn request_series_beyond_the_cap_are_dropped_and_counted() {
        let m = Metrics::new();
        m.set_request_series_cap(2);
        for r in ["default/a", "default/b", "default/c", "default/d"] {
            m.set_health("redis", r, Some("healthy"));
        }
        // A change of a dropped request is not counted again.
        m.set_health("redis", "default/c", Some("degraded"));
        assert_eq!(m.health_request_state.len(), 2);
        let text = m.encode();
        assert!(
            text.contains("plinth_health_request_series_dropped_total 2"),
            "{text}"
        );
        // A request that goes frees its slot for the next one that changes.
        m.set_health("redis", "default/a", None);
        m.set_health("redis", "default/e", Some("healthy"));
        assert!(m.encode().contains(r#"name="e",state="healthy"} 1"#));
        assert_eq!(m.health_request_state.len(), 2);
        m.forget(&[("promise", "redis")]);
        assert!(m.health_request_state.is_empty());
        m.set_health("pg", "default/x", Some("healthy"));
        m.set_health("pg", "default/y", Some("healthy"));
        assert_eq!(m.health_request_state.len(), 2);
    }

    /// The sample names `/metrics` can hold, from the `# TYPE` lines of the exposition
    /// (every registered family has one, series or not).
    fn exported_names(m: &Metrics) -> HashSet<String> {
        // A family without series has no TYPE line: give each one.
        let l = labels([("x", "y")]);
        for c in [
            &m.reconciles,
            &m.reconcile_errors,
            &m.pipeline_runs,
            &m.store_writes,
            &m.store_written_bytes,
            &m.store_commits,
            &m.workplacement_writes,
            &m.workplacement_outcomes,
            &m.api_requests,
            &m.agent_passes,
            &m.agent_objects,
            &m.alertmanager_alerts,
        ] {
            c.get_or_create(&l).inc();
        }
        for g in [
            &m.active_workers,
            &m.api_watches,
            &m.health_states,
            &m.health_request_state,
        ] {
            g.get_or_create(&l).set(1);
        }
        for h in [
            &m.reconcile_time,
            &m.pipeline_duration,
            &m.store_write_duration,
            &m.api_request_duration,
            &m.agent_pass_duration,
        ] {
            h.get_or_create(&l).observe(1.0);
        }
        assert_eq!(m.series(), 21, "every family has a series");
        let mut out = HashSet::new();
        for line in m.encode().lines() {
            let Some(rest) = line.strip_prefix("# TYPE ") else {
                continue;
            };
            let (name, kind) = rest.split_once(' ').expect("TYPE line");
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                _ => &[""],
            };
            for s in suffixes {
                out.insert(format!("{}{s}", name.trim_end_matches("_total")));
            }
        }
        out
    }

    /// Every metric name in the Grafana dashboard's queries is one this registry exports.
    #[test]
    fn the_grafana_dashboard_uses_only_exported_metrics() {
        let text = include_str!("../../../docs/grafana-dashboard.json");
        let dashboard: serde_json::Value = serde_json::from_str(text).expect("dashboard JSON");
        let mut exprs: Vec<String> = Vec::new();
        for p in dashboard["panels"].as_array().expect("panels") {
            for t in p["targets"].as_array().expect("targets") {
                exprs.push(t["expr"].as_str().expect("expr").to_string());
            }
        }
        for v in dashboard["templating"]["list"]
            .as_array()
            .expect("variables")
        {
            if let Some(q) = v["definition"].as_str() {
                exprs.push(q.to_string());
            }
        }
        assert!(exprs.len() >= 10, "{exprs:?}");
        let exported = exported_names(&Metrics::new());
        assert!(
            exported.contains("plinth_health_request_state"),
            "{exported:?}"
        );
        let mut used = 0;
        for e in &exprs {
            let idents = e
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .filter(|w| {
                    ["plinth_", "kratix_", "controller_runtime_"]
                        .iter()
                        .any(|p| w.starts_with(p))
                });
            for name in idents {
                assert!(exported.contains(name), "{name} (in {e}) is not exported");
                used += 1;
            }
        }
        assert!(used >= exprs.len(), "every query names a metric");
    }

    #[test]
    fn kratix_counters_keep_their_names() {
        let m = Metrics::new();
        m.workplacement_outcomes
            .get_or_create(&labels([
                ("result", "scheduled"),
                ("promise", "redis"),
                ("resource", "r1"),
                ("namespace", "default"),
                ("destination", "local"),
            ]))
            .inc();
        let text = m.encode();
        assert!(text.contains(
            r#"kratix_workplacement_outcomes_total{result="scheduled",promise="redis",resource="r1",namespace="default",destination="local"} 1"#
        ), "{text}");
    }

    fn outcome(m: &Metrics, promise: &str, resource: &str, ns: &str, dest: &str) {
        m.workplacement_outcomes
            .get_or_create(&labels([
                ("result", "scheduled"),
                ("promise", promise),
                ("resource", resource),
                ("namespace", ns),
                ("destination", dest),
            ]))
            .inc();
        m.workplacement_writes
            .get_or_create(&labels([
                ("result", "success"),
                ("promise", promise),
                ("resource", resource),
                ("destination", dest),
                ("pipeline", "instance-configure"),
            ]))
            .inc();
    }

    #[test]
    fn a_deleted_request_leaves_no_series() {
        let m = Metrics::new();
        outcome(&m, "redis", "a", "default", "local");
        outcome(&m, "redis", "a", "team-a", "local");
        outcome(&m, "redis", "b", "default", "local");
        m.set_health("redis", "default/a", Some("healthy"));
        // `a` still lives in team-a: its write series (no namespace label) stay.
        m.forget_request("redis", "default", "a", true);
        let text = m.encode();
        assert!(
            !text.contains(r#"resource="a",namespace="default""#),
            "{text}"
        );
        assert!(
            text.contains(r#"resource="a",namespace="team-a""#),
            "{text}"
        );
        assert!(
            text.contains(r#"promise="redis",resource="a",destination"#),
            "{text}"
        );
        assert!(text.contains(r#"plinth_health_requests{promise="redis",state="healthy"} 0"#));
        m.forget_request("redis", "team-a", "a", false);
        let text = m.encode();
        assert!(!text.contains(r#"resource="a""#), "{text}");
        assert!(text.contains(r#"resource="b""#), "{text}");
        assert_eq!(m.workplacement_outcomes.len(), 1);
        assert_eq!(m.workplacement_writes.len(), 1);
    }

    #[test]
    fn a_deleted_promise_destination_or_store_leaves_no_series() {
        let m = Metrics::new();
        outcome(&m, "redis", "a", "default", "local");
        outcome(&m, "pg", "a", "default", "edge");
        m.observe_pipeline("redis", "p", "succeeded", Duration::from_secs(1));
        m.set_health("redis", "default/a", Some("healthy"));
        m.observe_store_write("GitStateStore", "s1", Duration::ZERO, 1, Ok((true, "x")));
        m.observe_store_write("GitStateStore", "s2", Duration::ZERO, 1, Ok((true, "x")));
        let before = m.series();
        // Outcomes, writes, pipeline runs and durations, health, the request's state.
        assert_eq!(m.forget(&[("promise", "redis")]), 6);
        assert!(!m.encode().contains(r#"promise="redis""#));
        assert_eq!(m.forget(&[("destination", "edge")]), 2);
        m.forget_store("GitStateStore", "s1");
        let text = m.encode();
        assert!(!text.contains(r#"store="s1""#), "{text}");
        assert!(text.contains(r#"store="s2""#), "{text}");
        assert_eq!(m.series(), before - 6 - 2 - 4);
        // A store of the same name made again counts its first commit.
        m.observe_store_write("GitStateStore", "s1", Duration::ZERO, 1, Ok((true, "x")));
        assert!(
            m.encode()
                .contains(r#"plinth_statestore_commits_total{kind="GitStateStore",store="s1"} 1"#)
        );
        assert_eq!(m.forget(&[]), 0);
    }
}
