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

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// A metric's label set: `(name, value)` pairs in a fixed order per metric.
pub type Labels = Vec<(String, String)>;

type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

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
    pub reconciles: Family<Labels, Counter>,
    /// `controller_runtime_reconcile_errors_total{controller}`: reconciles that failed.
    pub reconcile_errors: Family<Labels, Counter>,
    /// `controller_runtime_reconcile_time_seconds{controller}`: reconcile duration.
    pub reconcile_time: HistogramFamily,
    /// `controller_runtime_active_workers{controller}`: reconciles running now.
    pub active_workers: Family<Labels, Gauge>,
    /// `plinth_pipeline_runs_total{promise, pipeline, result}`: finished pipeline Jobs.
    pub pipeline_runs: Family<Labels, Counter>,
    /// `plinth_pipeline_duration_seconds{promise, pipeline, result}`: Job start to finish.
    pub pipeline_duration: HistogramFamily,
    /// `plinth_statestore_writes_total{kind, store, result}`: write requests to a store.
    pub store_writes: Family<Labels, Counter>,
    /// `plinth_statestore_write_duration_seconds{kind, store}`: write latency, batching
    /// window and push included.
    pub store_write_duration: HistogramFamily,
    /// `plinth_statestore_written_bytes_total{kind, store}`: file content bytes sent.
    pub store_written_bytes: Family<Labels, Counter>,
    /// `plinth_statestore_commits_total{kind, store}`: distinct Git commits (bucket: writes
    /// that changed objects) made by this process.
    pub store_commits: Family<Labels, Counter>,
    /// Last counted commit per store, so writes batched into one commit count it once.
    last_commit: Mutex<HashMap<String, String>>,
    /// Health state per `(promise, namespace/name)` of request, behind `health_states`.
    health_of: Mutex<HashMap<(String, String), String>>,
    /// `kratix_workplacement_writes_total{result, promise, resource, destination,
    /// pipeline}`: WorkPlacement writes to a state store, as Kratix counts them.
    pub workplacement_writes: Family<Labels, Counter>,
    /// `kratix_workplacement_outcomes_total{result, promise, resource, namespace,
    /// destination}`: scheduling outcomes (`scheduled`, `unscheduled`, `misplaced`).
    pub workplacement_outcomes: Family<Labels, Counter>,
    /// `plinth_apiserver_requests_total{verb, resource, code}`.
    pub api_requests: Family<Labels, Counter>,
    /// `plinth_apiserver_request_duration_seconds{verb, resource}`.
    pub api_request_duration: HistogramFamily,
    /// `plinth_apiserver_watches{resource}`: open watches.
    pub api_watches: Family<Labels, Gauge>,
    /// `plinth_apiserver_sqlite_size_bytes`: database file size (main file and WAL).
    pub sqlite_size_bytes: Gauge,
    /// `plinth_health_requests{promise, state}`: resource requests per health state.
    pub health_states: Family<Labels, Gauge>,
    /// `plinth_agent_passes_total{agent, result}`: Destination agent passes (`success`,
    /// `error`).
    pub agent_passes: Family<Labels, Counter>,
    /// `plinth_agent_pass_duration_seconds{agent}`: read, apply and prune of one pass.
    pub agent_pass_duration: HistogramFamily,
    /// `plinth_agent_objects_total{agent, action}`: objects `applied`, `unchanged` or
    /// `pruned` by the agent's passes.
    pub agent_objects: Family<Labels, Counter>,
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
            reconciles: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_time: hist(),
            active_workers: Family::default(),
            pipeline_runs: Family::default(),
            pipeline_duration: HistogramFamily::new_with_constructor(pipeline_histogram),
            store_writes: Family::default(),
            store_write_duration: hist(),
            store_written_bytes: Family::default(),
            store_commits: Family::default(),
            last_commit: Mutex::new(HashMap::new()),
            health_of: Mutex::new(HashMap::new()),
            workplacement_writes: Family::default(),
            workplacement_outcomes: Family::default(),
            api_requests: Family::default(),
            api_request_duration: hist(),
            api_watches: Family::default(),
            sqlite_size_bytes: Gauge::default(),
            health_states: Family::default(),
            agent_passes: Family::default(),
            agent_pass_duration: hist(),
            agent_objects: Family::default(),
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
            self.reconciles.clone(),
        );
        r.register(
            "controller_runtime_reconcile_errors",
            "Reconciles that returned an error, per controller",
            self.reconcile_errors.clone(),
        );
        r.register(
            "controller_runtime_reconcile_time_seconds",
            "Time a reconcile took, per controller",
            self.reconcile_time.clone(),
        );
        r.register(
            "controller_runtime_active_workers",
            "Reconciles running now, per controller",
            self.active_workers.clone(),
        );
        r.register(
            "plinth_pipeline_runs",
            "Finished pipeline Jobs by Promise, pipeline and result",
            self.pipeline_runs.clone(),
        );
        r.register(
            "plinth_pipeline_duration_seconds",
            "Pipeline Job duration from start to finish",
            self.pipeline_duration.clone(),
        );
    }

    /// Registers the state store and WorkPlacement families.
    fn register_stores(&self, r: &mut Registry) {
        r.register(
            "plinth_statestore_writes",
            "Write requests to a state store by result",
            self.store_writes.clone(),
        );
        r.register(
            "plinth_statestore_write_duration_seconds",
            "State store write latency (batching and push included)",
            self.store_write_duration.clone(),
        );
        r.register(
            "plinth_statestore_written_bytes",
            "File content bytes written to a state store",
            self.store_written_bytes.clone(),
        );
        r.register(
            "plinth_statestore_commits",
            "Distinct commits made to a state store",
            self.store_commits.clone(),
        );
        r.register(
            "kratix_workplacement_writes",
            "WorkPlacement writes to a state store",
            self.workplacement_writes.clone(),
        );
        r.register(
            "kratix_workplacement_outcomes",
            "Scheduling outcomes of workload groups",
            self.workplacement_outcomes.clone(),
        );
    }

    /// Registers the API server, health and agent families.
    fn register_api_and_agents(&self, r: &mut Registry) {
        r.register(
            "plinth_apiserver_requests",
            "API server requests by verb, resource and status code",
            self.api_requests.clone(),
        );
        r.register(
            "plinth_apiserver_request_duration_seconds",
            "API server request latency by verb and resource",
            self.api_request_duration.clone(),
        );
        r.register(
            "plinth_apiserver_watches",
            "Open watches by resource",
            self.api_watches.clone(),
        );
        r.register(
            "plinth_apiserver_sqlite_size_bytes",
            "Size of the API server's SQLite database (main file and WAL)",
            self.sqlite_size_bytes.clone(),
        );
        r.register(
            "plinth_health_requests",
            "Resource requests per Promise and health state",
            self.health_states.clone(),
        );
        r.register(
            "plinth_agent_passes",
            "Destination agent passes by result",
            self.agent_passes.clone(),
        );
        r.register(
            "plinth_agent_pass_duration_seconds",
            "Duration of one Destination agent pass",
            self.agent_pass_duration.clone(),
        );
        r.register(
            "plinth_agent_objects",
            "Objects applied, left unchanged or pruned by a Destination agent",
            self.agent_objects.clone(),
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
    /// `plinth_health_requests{promise, state}` counting requests per state.
    pub fn set_health(&self, promise: &str, request: &str, state: Option<&str>) {
        let mut of = self.health_of.lock().expect("metrics lock");
        let key = (promise.to_string(), request.to_string());
        let before = match state {
            Some(s) => of.insert(key, s.to_string()),
            None => of.remove(&key),
        };
        if before.as_deref() == state {
            return;
        }
        if let Some(b) = before {
            self.health_states
                .get_or_create(&labels([("promise", promise), ("state", &b)]))
                .dec();
        }
        if let Some(s) = state {
            self.health_states
                .get_or_create(&labels([("promise", promise), ("state", s)]))
                .inc();
        }
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
        let text = m.encode();
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
}
