//! The health agent: runs each HealthDefinition on its cluster as a CronJob and writes
//! the HealthRecords the checks produce to a health store.
//!
//! A pass ([`HealthAgent::sync_once`]) is a short list of steps:
//!
//! 1. **store** — read the `health-state-store-config` ConfigMap and its Secret
//!    ([`store`]); when they changed, start a new [`HealthWriter`] on the store and hand
//!    it every current record;
//! 2. **definitions** — list the HealthDefinitions;
//! 3. **apply** — for each, server-side apply its ServiceAccount, RBAC and CronJob
//!    ([`objects`]); an object whose document did not change since this agent last
//!    applied it is not sent again, so a settled cluster sees no writes;
//! 4. **prune** — delete the agent's objects (by the managed-by label) that no definition
//!    wants any more: a deleted definition's CronJob, ServiceAccount and RBAC;
//! 5. **records** — delete the HealthRecords of definitions that are gone.
//!
//! Beside the passes, a watch on HealthRecords carrying the definition label (written by
//! `health-state-creator`) hands each to [`HealthWriter::report`] and each deletion to
//! [`HealthWriter::remove`]; the writer suppresses no-ops, batches within its flush window
//! and queues while the store is down. Passes run on HealthDefinition events and every
//! `interval`.

pub mod objects;
pub mod store;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use plinth_api::constants::{health as names, labels};
use plinth_api::{HealthDefinition, HealthRecord};
use plinth_statestore::StoreConfig;
use plinth_statestore::StreamSink;
use plinth_statestore::health::{
    HealthReport, HealthSink, HealthWriter, HealthWriterConfig, RecordKey, StoreSink,
};
use serde_json::Value;

pub use objects::CheckSettings;

/// Why a step of a health pass failed; reported in the pass's errors.
#[derive(Debug, thiserror::Error)]
enum StepError {
    /// The store configuration could not be read.
    #[error(transparent)]
    Store(#[from] store::HealthStoreError),
    /// The HealthRecords to hand to a new writer could not be listed.
    #[error("listing HealthRecords: {cause}")]
    ListRecords { cause: String },
    /// The HealthDefinitions could not be listed.
    #[error("listing HealthDefinitions: {cause}")]
    ListDefinitions { cause: String },
}

/// How the health agent runs.
#[derive(Clone, Debug)]
pub struct HealthAgentConfig {
    /// Namespace and name of the store ConfigMap (default
    /// `plinth-agent/health-state-store-config`).
    pub config_map: (String, String),
    /// Directory for a Git store's clone.
    pub work_dir: PathBuf,
    /// No-op suppression, flush window, queue bound (its `heartbeat_interval` is set from
    /// `heartbeat` when the store is known).
    pub writer: HealthWriterConfig,
    /// How often an unchanged record's `lastRun` is refreshed.
    pub heartbeat: Heartbeat,
    /// How the checks' Pods are built.
    pub check: CheckSettings,
    /// Time between passes (besides HealthDefinition events).
    pub interval: Duration,
}

impl HealthAgentConfig {
    /// Defaults: the ConfigMap in [`crate::INVENTORY_NAMESPACE`], the writer's defaults,
    /// Plinth's adapter image, a pass every 30 s.
    pub fn new(work_dir: impl Into<PathBuf>) -> Self {
        HealthAgentConfig {
            config_map: (
                crate::INVENTORY_NAMESPACE.to_string(),
                names::STORE_CONFIGMAP.to_string(),
            ),
            work_dir: work_dir.into(),
            writer: HealthWriterConfig::default(),
            heartbeat: Heartbeat::Auto,
            check: CheckSettings::default(),
            interval: crate::DEFAULT_INTERVAL,
        }
    }
}

/// A heartbeat shorter than any schedule's period: every run refreshes `lastRun`.
pub const EVERY_RUN: Duration = Duration::from_secs(1);
/// The heartbeat [`Heartbeat::Auto`] gives a Git store, where each write is a commit.
pub const GIT_HEARTBEAT: Duration = plinth_statestore::health::DEFAULT_HEARTBEAT_INTERVAL;

/// How often the writer refreshes the `lastRun` of a record whose state did not change.
/// The platform marks a record stale after a few missed refreshes (the record says how
/// often it is refreshed), so this sets how soon a silent agent is noticed.
///
/// ```
/// use plinth_agent::health::{Heartbeat, EVERY_RUN, GIT_HEARTBEAT};
/// use plinth_statestore::{LocalDirConfig, StoreConfig};
///
/// let dir = StoreConfig::LocalDir(LocalDirConfig { root: "/tmp/health".into(), path: String::new() });
/// assert_eq!(Heartbeat::Auto.interval(&dir), EVERY_RUN);
/// assert_eq!(Heartbeat::Every(GIT_HEARTBEAT).interval(&dir), GIT_HEARTBEAT);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heartbeat {
    /// Every run for object stores and directories (a write replaces one object);
    /// [`GIT_HEARTBEAT`] for Git, where each write is a commit (the heartbeats of all
    /// records share one).
    Auto,
    /// At most this often; zero never refreshes (the platform then cannot tell a silent
    /// agent from a steady one, and the records never go stale).
    Every(Duration),
}

impl Heartbeat {
    /// The heartbeat for a writer on `store`.
    pub fn interval(self, store: &StoreConfig) -> Duration {
        match (self, store) {
            (Heartbeat::Every(d), _) => d,
            (Heartbeat::Auto, StoreConfig::Git(_)) => GIT_HEARTBEAT,
            (Heartbeat::Auto, _) => EVERY_RUN,
        }
    }

    /// The heartbeat for a writer on a stream (Redis, NATS): [`Heartbeat::Auto`] is every
    /// run, as for a bucket.
    pub fn stream_interval(self) -> Duration {
        match self {
            Heartbeat::Every(d) => d,
            Heartbeat::Auto => EVERY_RUN,
        }
    }
}

/// How often a stream writer sends what is queued (it has no flush window).
pub const STREAM_TICK: Duration = Duration::from_millis(50);

/// The schedules of the HealthDefinitions, by namespace and name (the last pass's list).
type Schedules = Arc<Mutex<BTreeMap<(String, String), String>>>;

/// What one pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HealthSyncReport {
    /// HealthDefinitions seen.
    pub definitions: usize,
    /// Objects applied (sent) in this pass.
    pub applied: usize,
    /// Objects deleted (the agent's objects and HealthRecords of gone definitions).
    pub deleted: usize,
    /// Errors, each naming the object and the cause.
    pub errors: Vec<String>,
}

/// The writer in use and the configuration it was started from.
struct ActiveWriter {
    fingerprint: String,
    writer: HealthWriter,
}

type SharedWriter = Arc<Mutex<Option<ActiveWriter>>>;

/// The kinds the agent creates, with their plural and scope.
const KINDS: &[(&str, &str, &str, &str, bool)] = &[
    ("", "v1", "ServiceAccount", "serviceaccounts", true),
    ("rbac.authorization.k8s.io", "v1", "Role", "roles", true),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    ("batch", "v1", "CronJob", "cronjobs", true),
];

/// `(kind, namespace, name)` of an object.
type ObjectId = (String, String, String);

/// One cluster's health agent.
pub struct HealthAgent {
    client: kube::Client,
    cfg: HealthAgentConfig,
    /// Hash of the document last applied, by object.
    applied: BTreeMap<ObjectId, String>,
    writer: SharedWriter,
    schedules: Schedules,
}

impl HealthAgent {
    /// An agent for the cluster of `client`.
    pub fn new(cfg: HealthAgentConfig, client: kube::Client) -> HealthAgent {
        HealthAgent {
            client,
            cfg,
            applied: BTreeMap::new(),
            writer: Arc::new(Mutex::new(None)),
            schedules: Arc::default(),
        }
    }

    /// Runs passes on HealthDefinition events and every `interval`, and the record
    /// watch, until `shutdown` completes; unwritten records are flushed (bounded by the
    /// store's timeouts) before returning.
    pub async fn run(mut self, shutdown: impl std::future::Future<Output = ()>) {
        let wake = Arc::new(tokio::sync::Notify::new());
        let definitions = tokio::spawn(wake_on_definitions(self.client.clone(), wake.clone()));
        let records = tokio::spawn(watch_records(
            self.client.clone(),
            self.writer.clone(),
            self.schedules.clone(),
        ));
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let report = self.sync_once().await;
            for e in &report.errors {
                tracing::warn!(error = %e, "health agent");
            }
            tokio::select! {
                _ = &mut shutdown => break,
                _ = wake.notified() => {}
                _ = tokio::time::sleep(self.cfg.interval) => {}
            }
        }
        definitions.abort();
        records.abort();
        let writer = self.writer.lock().expect("health writer").take();
        if let Some(w) = writer {
            w.writer.flush().await;
        }
    }

    /// One pass; see the module documentation for its steps.
    pub async fn sync_once(&mut self) -> HealthSyncReport {
        let mut report = HealthSyncReport::default();
        // Definitions first: the records handed to a new writer carry their schedules.
        let listed = self.list_definitions().await;
        if let Ok(definitions) = &listed {
            self.remember_schedules(definitions);
        }
        if let Err(e) = self.refresh_store().await {
            report.errors.push(e.to_string());
        }
        let definitions = match listed {
            Ok(d) => d,
            Err(e) => {
                report.errors.push(e.to_string());
                return report;
            }
        };
        report.definitions = definitions.len();
        let wanted = self.apply_definitions(&definitions, &mut report).await;
        self.prune_objects(&wanted, &mut report).await;
        self.prune_records(&definitions, &mut report).await;
        report
    }

    /// Records queued and not yet written to the store (0 without a store).
    pub fn queued(&self) -> usize {
        self.writer
            .lock()
            .expect("health writer")
            .as_ref()
            .map_or(0, |w| w.writer.queued())
    }

    /// Writes every queued record now; returns how many failed (0 without a store).
    pub async fn flush(&self) -> usize {
        let writer = self.writer.lock().expect("health writer").take();
        let Some(w) = writer else { return 0 };
        let failed = w.writer.flush().await;
        *self.writer.lock().expect("health writer") = Some(w);
        failed
    }

    /// Step 1: (re)start the writer when the store configuration changed.
    async fn refresh_store(&mut self) -> Result<(), StepError> {
        let (ns, name) = &self.cfg.config_map;
        let loaded = store::load(&self.client, ns, name, &self.cfg.work_dir).await?;
        let current = self
            .writer
            .lock()
            .expect("health writer")
            .as_ref()
            .map(|w| w.fingerprint.clone());
        let Some(loaded) = loaded else {
            if current.is_some() {
                tracing::warn!(configmap = %format!("{ns}/{name}"), "health store configuration removed; records are no longer written");
                *self.writer.lock().expect("health writer") = None;
            }
            return Ok(());
        };
        if current.as_deref() == Some(loaded.fingerprint.as_str()) {
            return Ok(());
        }
        let mut writer_cfg = self.cfg.writer.clone();
        let (sink, tick): (Arc<dyn HealthSink>, Duration) = match loaded.config {
            store::HealthStore::Store(cfg) => {
                writer_cfg.heartbeat_interval = self.cfg.heartbeat.interval(&cfg);
                (Arc::new(StoreSink::new(cfg)), Duration::from_secs(1))
            }
            // A message per record: sent as it comes, no flush window.
            store::HealthStore::Stream(cfg) => {
                writer_cfg.heartbeat_interval = self.cfg.heartbeat.stream_interval();
                writer_cfg.flush_window = Duration::ZERO;
                (Arc::new(StreamSink::new(cfg)), STREAM_TICK)
            }
        };
        tracing::info!(configmap = %format!("{ns}/{name}"), heartbeat = ?writer_cfg.heartbeat_interval, "health store configured");
        let writer = HealthWriter::start(sink, writer_cfg, Arc::new(Timestamp::now), tick);
        let records: Api<HealthRecord> = Api::all(self.client.clone());
        let list =
            records
                .list(&ListParams::default())
                .await
                .map_err(|e| StepError::ListRecords {
                    cause: e.to_string(),
                })?;
        let schedules = self.schedules.lock().expect("schedules").clone();
        for r in list.items.iter().filter_map(|r| report_of(r, &schedules)) {
            writer.report(r);
        }
        *self.writer.lock().expect("health writer") = Some(ActiveWriter {
            fingerprint: loaded.fingerprint,
            writer,
        });
        Ok(())
    }

    fn remember_schedules(&self, definitions: &[HealthDefinition]) {
        let current = definitions
            .iter()
            .map(|hd| (objects::definition_id(hd), hd.spec.schedule.clone()))
            .collect();
        *self.schedules.lock().expect("schedules") = current;
    }

    /// Step 2.
    async fn list_definitions(&self) -> Result<Vec<HealthDefinition>, StepError> {
        let api: Api<HealthDefinition> = Api::all(self.client.clone());
        api.list(&ListParams::default())
            .await
            .map(|l| l.items)
            .map_err(|e| StepError::ListDefinitions {
                cause: e.to_string(),
            })
    }

    /// Step 3: returns every object the definitions want.
    async fn apply_definitions(
        &mut self,
        definitions: &[HealthDefinition],
        report: &mut HealthSyncReport,
    ) -> BTreeSet<ObjectId> {
        let mut wanted = BTreeSet::new();
        for hd in definitions {
            let (ns, name) = objects::definition_id(hd);
            let objs = match objects::build_objects(hd, &self.cfg.check) {
                Ok(o) => o,
                Err(e) => {
                    report
                        .errors
                        .push(format!("HealthDefinition {ns}/{name}: {e}"));
                    continue;
                }
            };
            for obj in objs {
                let id = object_id(&obj);
                wanted.insert(id.clone());
                let hash = plinth_api::hash::md5_hex(obj.to_string().as_bytes());
                if self.applied.get(&id) == Some(&hash) {
                    continue;
                }
                match apply(&self.client, &obj).await {
                    Ok(()) => {
                        report.applied += 1;
                        self.applied.insert(id, hash);
                    }
                    Err(e) => report.errors.push(format!(
                        "HealthDefinition {ns}/{name}: {} {}/{}: {e}",
                        id.0, id.1, id.2
                    )),
                }
            }
        }
        wanted
    }

    /// Step 4.
    async fn prune_objects(&mut self, wanted: &BTreeSet<ObjectId>, report: &mut HealthSyncReport) {
        let selector = format!("{}={}", labels::MANAGED_BY, names::AGENT_MANAGER);
        for &(group, version, kind, plural, namespaced) in KINDS {
            let ar = ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(group, version, kind),
                plural,
            );
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
            let list = match api.list(&ListParams::default().labels(&selector)).await {
                Ok(l) => l,
                Err(e) => {
                    report.errors.push(format!("listing {kind}s: {e}"));
                    continue;
                }
            };
            for o in list.items {
                let ns = o.namespace().unwrap_or_default();
                let id = (kind.to_string(), ns.clone(), o.name_any());
                if wanted.contains(&id) {
                    continue;
                }
                let api: Api<DynamicObject> = if namespaced {
                    Api::namespaced_with(self.client.clone(), &ns, &ar)
                } else {
                    Api::all_with(self.client.clone(), &ar)
                };
                match delete(&api, &id.2).await {
                    Ok(()) => {
                        report.deleted += 1;
                        self.applied.remove(&id);
                    }
                    Err(e) => report
                        .errors
                        .push(format!("deleting {kind} {ns}/{}: {e}", id.2)),
                }
            }
        }
    }

    /// Step 5.
    async fn prune_records(&self, definitions: &[HealthDefinition], report: &mut HealthSyncReport) {
        let live: BTreeSet<_> = definitions.iter().map(objects::definition_id).collect();
        let api: Api<HealthRecord> = Api::all(self.client.clone());
        let list = match api.list(&ListParams::default()).await {
            Ok(l) => l,
            Err(e) => {
                report.errors.push(format!("listing HealthRecords: {e}"));
                return;
            }
        };
        for r in list.items {
            let Some(def) = r.labels().get(names::DEFINITION_LABEL) else {
                continue;
            };
            let ns = r.namespace().unwrap_or_default();
            if live.contains(&(ns.clone(), def.clone())) {
                continue;
            }
            let api: Api<HealthRecord> = Api::namespaced(self.client.clone(), &ns);
            match api.delete(&r.name_any(), &DeleteParams::default()).await {
                Ok(_) => report.deleted += 1,
                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                Err(e) => report
                    .errors
                    .push(format!("deleting HealthRecord {ns}/{}: {e}", r.name_any())),
            }
        }
    }
}

/// The report a HealthRecord written by `health-state-creator` stands for (`None` for
/// records without the definition label: not the agent's), with its definition's
/// schedule from `schedules` (by namespace and name).
pub fn report_of(
    r: &HealthRecord,
    schedules: &BTreeMap<(String, String), String>,
) -> Option<HealthReport> {
    let definition = r.labels().get(names::DEFINITION_LABEL)?.clone();
    let d = &r.spec.data;
    let definition_namespace = r.meta().namespace.clone().unwrap_or_default();
    let key = RecordKey {
        namespace: d
            .resource_ref
            .namespace
            .clone()
            .unwrap_or_else(|| definition_namespace.clone()),
        promise: d.promise_ref.name.clone(),
        request: d.resource_ref.name.clone(),
        definition_namespace,
        definition,
    };
    let run_at = d
        .last_run
        .and_then(|s| Timestamp::from_second(s).ok())
        .unwrap_or_else(Timestamp::now);
    let schedule = schedules
        .get(&(key.definition_namespace.clone(), key.definition.clone()))
        .cloned();
    Some(HealthReport {
        key,
        state: d.state,
        details: d.details.clone(),
        run_at,
        schedule,
    })
}

fn object_id(obj: &Value) -> ObjectId {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (
        s(&obj["kind"]),
        s(&obj["metadata"]["namespace"]),
        s(&obj["metadata"]["name"]),
    )
}

async fn apply(client: &kube::Client, obj: &Value) -> Result<(), kube::Error> {
    let (kind, ns, name) = object_id(obj);
    let &(group, version, _, plural, namespaced) = KINDS
        .iter()
        .find(|k| k.2 == kind)
        .expect("the agent builds only the kinds it lists");
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, &kind), plural);
    let api: Api<DynamicObject> = if namespaced {
        Api::namespaced_with(client.clone(), &ns, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    };
    api.patch(
        &name,
        &PatchParams::apply(names::AGENT_FIELD_MANAGER).force(),
        &Patch::Apply(obj),
    )
    .await
    .map(|_| ())
}

async fn delete(api: &Api<DynamicObject>, name: &str) -> Result<(), kube::Error> {
    // Background: a CronJob's Jobs and Pods go with it.
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Notifies `wake` on every HealthDefinition event; watch errors back off.
async fn wake_on_definitions(client: kube::Client, wake: Arc<tokio::sync::Notify>) {
    let api: Api<HealthDefinition> = Api::all(client);
    let mut events = std::pin::pin!(watcher::watcher(api, watcher::Config::default()));
    while let Some(e) = events.next().await {
        match e {
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
            Ok(_) => wake.notify_one(),
            Err(e) => {
                tracing::debug!(error = %e, "watching HealthDefinitions");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Hands the checks' HealthRecords to the writer in use (none while no store is
/// configured: the store step reports every record when it starts one).
async fn watch_records(client: kube::Client, writer: SharedWriter, schedules: Schedules) {
    let api: Api<HealthRecord> = Api::all(client);
    let mut events = std::pin::pin!(watcher::watcher(api, watcher::Config::default()));
    while let Some(e) = events.next().await {
        let event = match e {
            Ok(event) => event,
            Err(e) => {
                tracing::debug!(error = %e, "watching HealthRecords");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let schedules = schedules.lock().expect("schedules").clone();
        let guard = writer.lock().expect("health writer");
        let Some(w) = guard.as_ref() else { continue };
        match event {
            watcher::Event::Apply(r) | watcher::Event::InitApply(r) => {
                if let Some(report) = report_of(&r, &schedules) {
                    w.writer.report(report);
                }
            }
            watcher::Event::Delete(r) => {
                if let Some(report) = report_of(&r, &schedules) {
                    w.writer.remove(&report.key);
                }
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
        }
    }
}
