//! State shared by every controller: the one Kubernetes client, the live controller
//! configuration (Kratix's `kratix` ConfigMap, reloaded without a restart) and the
//! registry of open state stores.

use std::path::PathBuf;
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use kube::Client;
use serde_json::Value;

use crate::dynamic::RequestControllers;
use crate::statestore::registry::StoreRegistry;

/// Everything a reconcile needs besides the object itself.
pub struct Context {
    /// The shared client: in-process on the embedded API server, or a real cluster's.
    pub client: Client,
    /// Open state stores keyed by `<Kind>/<name>`; filled by the state store controllers.
    pub stores: StoreRegistry,
    /// The running resource-request controllers, one per Promise API.
    pub request_controllers: RequestControllers,
    /// Event recorders by reporting component, shared so repeats aggregate
    /// ([`plinth_api::events`]).
    pub recorders:
        std::sync::Mutex<std::collections::HashMap<String, plinth_api::events::EventRecorder>>,
    /// The process's metrics: reconciles, pipelines, state store writes, scheduling
    /// outcomes ([`plinth_api::metrics`]).
    pub metrics: Arc<plinth_api::metrics::Metrics>,
    /// Condition transitions already announced as Events ([`crate::announce::announced`]).
    pub announced: crate::announce::announced::Announced,
    config: RwLock<Arc<ControllerConfig>>,
    config_version: tokio::sync::watch::Sender<u64>,
    me: Weak<Context>,
}

impl Context {
    /// Creates a context with the given starting configuration.
    pub fn new(client: Client, config: ControllerConfig) -> Arc<Context> {
        Self::with_metrics(client, config, Default::default())
    }

    /// [`Context::new`], recording into `metrics` (the set a process serves on `/metrics`).
    pub fn with_metrics(
        client: Client,
        config: ControllerConfig,
        metrics: Arc<plinth_api::metrics::Metrics>,
    ) -> Arc<Context> {
        // Every state store network call is bounded by the same timeout as the reconcile
        // that makes it, so a worker blocked on a silent server is freed by then too.
        plinth_statestore::set_network_timeouts(
            config
                .network_timeout
                .min(std::time::Duration::from_secs(10)),
            config.network_timeout,
        );
        Arc::new_cyclic(|me| Context {
            client,
            stores: StoreRegistry::default(),
            request_controllers: RequestControllers::default(),
            recorders: Default::default(),
            metrics,
            announced: Default::default(),
            config: RwLock::new(Arc::new(config)),
            config_version: tokio::sync::watch::Sender::new(0),
            me: me.clone(),
        })
    }

    /// The Event recorder of `component` (one per component for the context's lifetime).
    pub fn recorder(&self, component: &str) -> plinth_api::events::EventRecorder {
        self.recorders
            .lock()
            .expect("recorders lock")
            .entry(component.to_string())
            .or_insert_with(|| {
                plinth_api::events::EventRecorder::new(self.client.clone(), component)
            })
            .clone()
    }

    /// This context as an `Arc` (for spawning controllers from inside a reconcile).
    pub fn self_arc(&self) -> Arc<Context> {
        self.me
            .upgrade()
            .expect("context is alive while reconciling")
    }

    /// A snapshot of the current configuration (cheap: an `Arc` clone).
    pub fn config(&self) -> Arc<ControllerConfig> {
        self.config.read().expect("config lock poisoned").clone()
    }

    /// Replaces the configuration; reconciles that start afterwards see the new values.
    pub fn set_config(&self, config: ControllerConfig) {
        *self.config.write().expect("config lock poisoned") = Arc::new(config);
        self.config_version.send_modify(|v| *v += 1);
    }

    /// A receiver that sees every [`Context::set_config`] (after the new configuration is
    /// in place), for controllers that re-evaluate their objects when it changes.
    pub fn config_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.config_version.subscribe()
    }
}

/// Intervals and defaults of the controllers. Kratix hard-codes most of these;
/// here every one is configurable, and the keys of Kratix's `kratix` ConfigMap
/// (`reconciliationInterval`, `numberOfJobsToKeep`, ...) override the workflow-related
/// ones at run time.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// Short requeue while waiting on something that will not send an event (Kratix: 5 s).
    pub requeue_short: Duration,
    /// Requeue after an error or a not-ready dependency (Kratix: 15 s).
    pub requeue_default: Duration,
    /// Requeue while a Promise cannot fulfil requests (Kratix: 60 s).
    pub requeue_slow: Duration,
    /// Periodic workflow re-run interval (`reconciliationInterval`, Kratix default 10 h).
    pub reconciliation_interval: Duration,
    /// Periodic WorkPlacement re-write (`stateStoreReconciliationInterval`, default 10 h; zero disables).
    pub state_store_reconciliation_interval: Duration,
    /// Re-run failed configure workflows at the interval too (`workflows.reconcileAfterFailure`, default true).
    pub reconcile_after_failure: bool,
    /// Jobs kept per pipeline (`numberOfJobsToKeep`, default 5).
    pub number_of_jobs_to_keep: usize,
    /// `workflows.jobOptions.defaultBackoffLimit`.
    pub default_backoff_limit: Option<i32>,
    /// `workflows.defaultImagePullPolicy`.
    pub default_image_pull_policy: Option<String>,
    /// `workflows.defaultContainerSecurityContext`: applied to user containers without
    /// one and, beyond Kratix, merged under the hardened context of Plinth's own containers.
    pub default_security_context: Option<Value>,
    /// `workflows.defaultContainerResources` (replaces the built-in defaults wholesale).
    pub default_container_resources: Option<Value>,
    /// Most configure workflows of one Promise's resource requests in flight at a time
    /// (`workflows.maxInFlightPerPromise`, Plinth's own key; default 10; 0 = no limit).
    pub max_in_flight_per_promise: usize,
    /// `featureFlags.dryRun` (default false): DryRuns run; off, they are told so.
    pub feature_dry_run: bool,
    /// `resourceBindingVersionStrategy`: `floating` (default) or `pinned`.
    pub resource_binding_version_strategy: String,
    /// Image of the pipeline adapter (reader, work-creator, status-writer).
    pub adapter_image: String,
    /// Where controllers keep local state (state store working copies under `statestores/`).
    pub data_dir: PathBuf,
    /// How long the Git writer waits to batch writes into one commit.
    pub git_batch_window: Duration,
    /// Longest a state store may take to open and validate (connect, authenticate, check
    /// the branch or bucket) before the reconcile gives up with `NotReady`, so an endpoint
    /// that accepts connections and never answers cannot hold the store's reconcile. Also
    /// the overall timeout of a PromiseRelease's HTTP fetch (its connect timeout is at
    /// most 10 s).
    pub network_timeout: Duration,
    /// Reconciles one controller of per-request objects (requests, Works,
    /// WorkPlacements) runs at a time; the rest wait in its queue. controller-runtime
    /// calls this `MaxConcurrentReconciles` (Kratix leaves it at 1). Without a bound,
    /// ten thousand requests applied at once start ten thousand reconciles, each holding
    /// its copies and responses, which was the peak of `plinth up`'s memory.
    pub max_concurrent_reconciles: u16,
    /// Scheduled writes of a HealthRecord that may be overdue before it is stale and its
    /// request's health `unknown` (`health.staleAfterMissedRuns`, Plinth's own key;
    /// default 3; 0: records never go stale).
    pub health_stale_after_missed_runs: u32,
    /// Longest the HealthRecord controller waits before judging a request's records'
    /// freshness again (it comes back sooner when one is due to go stale).
    pub health_recheck_max: Duration,
}

impl ControllerConfig {
    /// The kube-runtime controller settings these imply.
    pub fn runtime(&self) -> kube::runtime::controller::Config {
        kube::runtime::controller::Config::default().concurrency(self.max_concurrent_reconciles)
    }
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            requeue_short: Duration::from_secs(5),
            requeue_default: Duration::from_secs(15),
            requeue_slow: Duration::from_secs(60),
            reconciliation_interval: Duration::from_secs(10 * 3600),
            state_store_reconciliation_interval: Duration::from_secs(10 * 3600),
            reconcile_after_failure: true,
            number_of_jobs_to_keep: 5,
            default_backoff_limit: None,
            default_image_pull_policy: None,
            default_security_context: None,
            default_container_resources: None,
            max_in_flight_per_promise: 10,
            feature_dry_run: false,
            resource_binding_version_strategy: "floating".into(),
            adapter_image: plinth_api::constants::DEFAULT_ADAPTER_IMAGE.into(),
            data_dir: std::env::temp_dir().join("plinth-controllers"),
            git_batch_window: Duration::from_millis(200),
            network_timeout: Duration::from_secs(30),
            max_concurrent_reconciles: 32,
            health_stale_after_missed_runs: 3,
            health_recheck_max: Duration::from_secs(3600),
        }
    }
}
