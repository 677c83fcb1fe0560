//! The apply loop: one [`Agent`] per Destination, each pass a short list of named steps.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use plinth_statestore::{StateStore, StoreConfig};
use serde_json::Value;

use crate::documents::{self, Document, Phase};
use crate::inventory::{self, Entry, Inventory, InventoryError};
use crate::jobs;
use crate::kube_apply::{ApplyError, Served, Target, TargetError};
use crate::object_ref::ObjectRef;
use crate::readiness;
use crate::report::SyncReport;
use crate::status::{AgentStatus, ObjectStatus};

/// Longest wait before a pass whose documents had errors is tried again.
pub const RETRY_AFTER_ERRORS: Duration = Duration::from_secs(3);

/// How one agent runs.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// The agent's name (normally the Destination's); names its inventory ConfigMap.
    pub name: String,
    /// The state store to read (read-only; credentials inside, never logged).
    pub source: StoreConfig,
    /// The Destination's directory in the store (relative to the store's own path).
    pub path: String,
    /// Delete objects that left the store (only ones this agent applied).
    pub prune: bool,
    /// Take ownership of fields another manager owns (server-side apply `force`).
    pub force_conflicts: bool,
    /// Time between passes.
    pub interval: Duration,
    /// How long to wait for an applied CRD to become Established.
    pub crd_timeout: Duration,
    /// Where passes are counted and timed (`plinth_agent_*`); none by default.
    pub metrics: Option<std::sync::Arc<plinth_api::metrics::Metrics>>,
    /// The target is the Kratix platform itself (the Destination `platform` of `plinth
    /// up`): a request whose output it applies is a compound request, and its Events say
    /// so. False by default.
    pub platform: bool,
}

impl AgentConfig {
    /// Defaults: prune on, no forcing, [`crate::DEFAULT_INTERVAL`], 30 s CRD wait.
    pub fn new(name: impl Into<String>, source: StoreConfig, path: impl Into<String>) -> Self {
        AgentConfig {
            name: name.into(),
            source,
            path: path.into(),
            prune: true,
            force_conflicts: false,
            interval: crate::DEFAULT_INTERVAL,
            crd_timeout: Duration::from_secs(30),
            metrics: None,
            platform: false,
        }
    }
}

/// Errors that stop an agent from starting.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The inventory in the target could not be read.
    #[error(transparent)]
    Inventory(#[from] InventoryError),
}

/// Why a pass could not read the store or apply a document; reported in the pass's
/// errors and the status.
#[derive(Debug, thiserror::Error)]
enum PassError {
    /// The state store could not be opened.
    #[error("opening the state store {store}: {cause}")]
    OpenStore {
        store: String,
        cause: plinth_statestore::StoreError,
    },
    /// The state store could not be read.
    #[error("reading the state store {store}: {cause}")]
    ReadStore {
        store: String,
        cause: plinth_statestore::StoreError,
    },
    /// The Job whose spec changed could not be deleted to run the new one.
    #[error("{document}: {cause} (its spec changed)")]
    RecreateJob {
        document: String,
        cause: TargetError,
    },
    /// Another field manager owns fields the document sets (not forced).
    #[error(
        "{document}: {object}: {cause}; another field manager owns these fields (not forced; run with --force-conflicts to take them)"
    )]
    Conflict {
        document: String,
        object: String,
        cause: String,
    },
    /// The API refused the apply.
    #[error("{document}: {object}: {cause}")]
    Apply {
        document: String,
        object: String,
        cause: String,
    },
}

/// One Destination's agent.
pub struct Agent {
    cfg: AgentConfig,
    source_name: String,
    store: Option<StateStore>,
    target: Target,
    inventory: Inventory,
    saved: Option<(Inventory, AgentStatus)>,
    version: Option<String>,
    /// SHA-256 over the paths and contents of the directory last read.
    digest: Option<String>,
    files: Vec<(String, Vec<u8>)>,
    retry: bool,
    status: AgentStatus,
    /// Events about applied objects (drift corrected), in the target.
    recorder: plinth_api::events::EventRecorder,
}

/// One document ready to apply.
struct Planned {
    doc: Document,
    id: ObjectRef,
    served: Served,
    object: Value,
}

impl Agent {
    /// An agent applying `cfg.source`/`cfg.path` into the cluster of `client`. Reads its
    /// inventory from the target; the store is opened on the first pass (an unreachable
    /// store is a pass error, not a start error).
    ///
    /// # Errors
    /// [`AgentError::Inventory`] when the target's inventory cannot be read.
    pub async fn new(cfg: AgentConfig, client: kube::Client) -> Result<Agent, AgentError> {
        let (inventory, status) = inventory::load(&client, &cfg.name).await?;
        let source_name = describe_source(&cfg.source, &cfg.path);
        let saved = status.map(|s| (inventory.clone(), s));
        Ok(Agent {
            source_name,
            store: None,
            target: Target::new(client.clone()).await,
            inventory,
            saved,
            version: None,
            digest: None,
            files: Vec::new(),
            retry: true,
            status: AgentStatus::default(),
            recorder: plinth_api::events::EventRecorder::new(client.clone(), crate::FIELD_MANAGER),
            cfg,
        })
    }

    /// The status of the last pass.
    pub fn status(&self) -> &AgentStatus {
        &self.status
    }

    /// Runs passes every `interval` until `shutdown` completes; a store that cannot be read
    /// backs off (doubling, up to 5 minutes) and leaves what is applied alone.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        self.run_woken(std::sync::Arc::new(tokio::sync::Notify::new()), shutdown)
            .await
    }

    /// [`Agent::run`], also starting a pass as soon as `wake` is notified (e.g. by a watch
    /// on the platform's WorkPlacements for this Destination, so a change lands without
    /// waiting for the interval). A pass whose documents had errors is retried after at
    /// most [`RETRY_AFTER_ERRORS`].
    pub async fn run_woken(
        mut self,
        wake: std::sync::Arc<tokio::sync::Notify>,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        let mut failures = 0u32;
        loop {
            let started = std::time::Instant::now();
            let report = self.sync_once().await;
            if let Some(m) = &self.cfg.metrics {
                crate::observe::pass(m, &self.cfg.name, &report, started.elapsed());
            }
            failures = if self.status.store_error.is_some() {
                failures + 1
            } else {
                0
            };
            let delay = if failures > 0 {
                (self.cfg.interval.min(Duration::from_secs(5)) * 2u32.pow(failures.min(8)))
                    .min(Duration::from_secs(300))
            } else if !report.errors.is_empty() {
                self.cfg.interval.min(RETRY_AFTER_ERRORS)
            } else {
                self.cfg.interval
            };
            tracing::debug!(
                applied = report.applied,
                unchanged = report.unchanged,
                pruned = report.pruned,
                "agent pass done"
            );
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = wake.notified() => {}
                _ = &mut shutdown => return,
            }
        }
    }

    /// One pass: read the store (skipped when its version has not moved and the last pass
    /// left nothing to retry, then the files read last are used), apply in order what
    /// differs from the live objects, prune, judge readiness, save the inventory and
    /// status when they changed.
    pub async fn sync_once(&mut self) -> SyncReport {
        let writes_before = self.target.writes;
        let mut report = SyncReport::default();
        match self.read_store().await {
            Err(e) => {
                tracing::warn!(source = %self.source_name, error = %e, "state store unreadable; keeping what is applied");
                let e = e.to_string();
                self.status.store_error = Some(e.clone());
                report.errors.push(e);
                self.save_if_changed(&mut report).await;
                report.api_writes = self.target.writes - writes_before;
                return report;
            }
            // Nothing read yet: nothing to hold the cluster to.
            Ok(false) if self.digest.is_none() => {
                report.api_writes = self.target.writes - writes_before;
                return report;
            }
            // The directory did not change: the files read last are checked against the
            // live objects (reads only; a write only where someone changed a field the
            // agent declares).
            Ok(false) => {}
            Ok(true) => report.read_store = true,
        }
        let parsed = documents::parse(&self.files);
        let mut errors: Vec<String> = parsed.errors.iter().map(|e| e.message.clone()).collect();
        let mut warnings = Vec::new();
        let unreadable: BTreeSet<String> = parsed.errors.iter().map(|e| e.file.clone()).collect();
        self.target.forget_kinds();
        let mut live_cache: HashMap<String, HashMap<(Option<String>, String), Value>> =
            HashMap::new();
        let mut wanted: BTreeSet<ObjectRef> = BTreeSet::new();
        let mut live_objects: BTreeMap<ObjectRef, Value> = BTreeMap::new();
        let mut ran_jobs: BTreeSet<ObjectRef> = BTreeSet::new();
        for phase in [Phase::Foundations, Phase::Dependencies, Phase::Resources] {
            let docs: Vec<Document> = parsed
                .documents
                .iter()
                .filter(|d| d.phase == phase)
                .cloned()
                .collect();
            let planned = self
                .plan(docs, &mut wanted, &mut errors, &mut warnings)
                .await;
            for p in planned {
                let live = self.live_of(&p, &mut live_cache).await;
                match self.apply_one(&p, live, &mut report).await {
                    Ok(Some(obj)) => {
                        live_objects.insert(p.id.clone(), obj);
                    }
                    Ok(None) => {
                        ran_jobs.insert(p.id.clone());
                    }
                    Err(e) => errors.push(e.to_string()),
                }
            }
            if phase == Phase::Foundations {
                self.wait_for_crds(&parsed.documents, &live_objects, &mut errors)
                    .await;
                self.target.forget_kinds();
            }
        }
        self.prune(
            &wanted,
            &unreadable,
            &mut report,
            &mut errors,
            &mut warnings,
        )
        .await;
        for e in &errors {
            tracing::warn!(source = %self.source_name, "{e}");
        }
        for w in &warnings {
            tracing::info!(source = %self.source_name, "{w}");
        }
        self.retry = !errors.is_empty();
        self.status = AgentStatus {
            source: self.source_name.clone(),
            // A pass over the files read before reports the version they came from.
            version: if report.read_store {
                self.version.clone()
            } else {
                self.status.version.clone()
            },
            store_error: None,
            errors: errors.clone(),
            warnings,
            objects: self.judge(&live_objects, &ran_jobs),
        };
        report.errors = errors;
        self.save_if_changed(&mut report).await;
        report.api_writes = self.target.writes - writes_before;
        report
    }

    /// Step: fetch the store's version and, when it moved (or the last pass must be
    /// retried), its files. `Ok(false)` means nothing to do.
    async fn read_store(&mut self) -> Result<bool, PassError> {
        if self.store.is_none() {
            let mut source = self.cfg.source.clone();
            // A reader keeps its own Git worker, never a writer's on the same repository.
            if let StoreConfig::Git(g) = &mut source {
                g.exclusive_worker = true;
            }
            let s = StateStore::open(source)
                .await
                .map_err(|cause| PassError::OpenStore {
                    store: self.source_name.clone(),
                    cause,
                })?;
            self.store = Some(s);
        }
        let store = self.store.as_ref().expect("opened above");
        let since = if self.retry {
            None
        } else {
            self.version.as_deref()
        };
        let snap = store
            .snapshot(&self.cfg.path, since)
            .await
            .map_err(|cause| PassError::ReadStore {
                store: self.source_name.clone(),
                cause,
            })?;
        self.status.store_error = None;
        let Some(files) = snap.files else {
            return Ok(false);
        };
        // Another directory of the same store changed (the tip moved, this directory did
        // not): nothing to apply and nothing to report, so a settled agent stays silent.
        let digest = files_digest(&files);
        if !self.retry && self.digest.as_deref() == Some(digest.as_str()) {
            self.version = Some(snap.version);
            return Ok(false);
        }
        self.digest = Some(digest);
        let prefix = self.cfg.path.trim_matches('/');
        self.files = files
            .into_iter()
            .map(|(p, b)| {
                let rel = if prefix.is_empty() {
                    p
                } else {
                    p.strip_prefix(prefix)
                        .map(|r| r.trim_start_matches('/').to_string())
                        .unwrap_or(p)
                };
                (rel, b)
            })
            .collect();
        self.version = Some(snap.version);
        Ok(true)
    }

    /// Step: resolve each document's kind and scope and fill in its namespace.
    async fn plan(
        &mut self,
        docs: Vec<Document>,
        wanted: &mut BTreeSet<ObjectRef>,
        errors: &mut Vec<String>,
        warnings: &mut Vec<String>,
    ) -> Vec<Planned> {
        let mut out = Vec::new();
        for doc in docs {
            let served = match self.target.resolve(&doc.api_version, &doc.kind).await {
                Ok(Some(s)) => s,
                Ok(None) => {
                    // Keep ownership of whatever this document applied before.
                    wanted.extend(
                        self.inventory
                            .entries
                            .keys()
                            .filter(|k| {
                                k.kind == doc.kind
                                    && k.api_version == doc.api_version
                                    && k.name == doc.name
                            })
                            .cloned(),
                    );
                    errors.push(format!(
                        "{}: kind {} ({}) is not served by the target API; retrying on the next pass",
                        doc.source, doc.kind, doc.api_version
                    ));
                    continue;
                }
                Err(e) => {
                    errors.push(format!("{}: {e}", doc.source));
                    continue;
                }
            };
            let mut object = doc.object.clone();
            let namespace = if served.namespaced {
                Some(match &doc.namespace {
                    Some(ns) => ns.clone(),
                    None => {
                        warnings.push(format!(
                            "{}: {} {} has no metadata.namespace; applied into \"default\" as kubectl would",
                            doc.source, doc.kind, doc.name
                        ));
                        object["metadata"]["namespace"] = Value::String("default".into());
                        "default".into()
                    }
                })
            } else {
                if let Some(m) = object.get_mut("metadata").and_then(|m| m.as_object_mut()) {
                    m.remove("namespace");
                }
                None
            };
            let id = ObjectRef {
                api_version: doc.api_version.clone(),
                kind: doc.kind.clone(),
                namespace,
                name: doc.name.clone(),
            };
            if !wanted.insert(id.clone()) {
                errors.push(format!(
                    "{}: {} is defined more than once; the first definition is applied",
                    doc.source,
                    id.display()
                ));
                continue;
            }
            out.push(Planned {
                doc,
                id,
                served,
                object,
            });
        }
        out
    }

    /// The live object of a planned document (one list per resource and pass).
    async fn live_of(
        &self,
        p: &Planned,
        cache: &mut HashMap<String, HashMap<(Option<String>, String), Value>>,
    ) -> Option<Value> {
        let key = format!(
            "{}/{}",
            p.served.resource.api_version, p.served.resource.plural
        );
        if !cache.contains_key(&key) {
            let listed = self.target.list(&p.served).await.unwrap_or_default();
            cache.insert(key.clone(), listed);
        }
        cache
            .get(&key)?
            .get(&(p.id.namespace.clone(), p.id.name.clone()))
            .cloned()
    }

    /// Step: apply one object unless the live object already matches what this agent last
    /// applied; records it in the inventory. `Ok(None)`: a Job that already ran with this
    /// spec and is gone from the cluster, left alone (see [`jobs`]).
    async fn apply_one(
        &mut self,
        p: &Planned,
        live: Option<Value>,
        report: &mut SyncReport,
    ) -> Result<Option<Value>, PassError> {
        let hash = documents::hash_value(&p.object);
        let known = self.inventory.entries.get(&p.id);
        if let (Some(entry), Some(live)) = (known, &live)
            && entry.hash == hash
            && unchanged_since_apply(entry, live, &p.object)
        {
            report.unchanged += 1;
            return Ok(Some(live.clone()));
        }
        let job_spec = jobs::spec_hash(&p.id, &p.object);
        match jobs::decide(known, live.as_ref(), job_spec.as_deref()) {
            jobs::Decision::Apply => {}
            jobs::Decision::AlreadyRan => {
                report.unchanged += 1;
                return Ok(None);
            }
            jobs::Decision::Recreate => {
                // A Job's template is immutable: its new spec runs as a new Job.
                // (Background propagation: the Job goes at once, its Pods after it.)
                self.target
                    .delete(&p.served, &p.id)
                    .await
                    .map_err(|cause| PassError::RecreateJob {
                        document: p.doc.source.clone(),
                        cause,
                    })?;
                tracing::info!(object = %p.id.display(), "Job spec changed; the old Job was deleted to run the new one");
            }
        }
        let mut applied = self
            .target
            .apply(&p.served, &p.id, &p.object, self.cfg.force_conflicts)
            .await;
        if let (Err(ApplyError::Conflict(m)), Some(_)) = (&applied, known) {
            let m = m.clone();
            // Another manager changed a field this agent applied and still declares (e.g.
            // `kubectl scale` of declared replicas): the agent takes it back. Fields it
            // never declared, or stopped declaring, are not in the document, so they stay.
            tracing::info!(object = %p.id.display(), conflict = %m, "drift corrected: took back fields the document declares from another field manager");
            report.drift_corrected += 1;
            applied = self.target.apply(&p.served, &p.id, &p.object, true).await;
            if let Ok(obj) = &applied {
                self.announce_drift(&p.id, &p.doc.file, obj, &m).await;
            }
        }
        let applied = applied.map_err(|e| match e {
            ApplyError::Conflict(cause) => PassError::Conflict {
                document: p.doc.source.clone(),
                object: p.id.display(),
                cause,
            },
            ApplyError::Other(cause) => PassError::Apply {
                document: p.doc.source.clone(),
                object: p.id.display(),
                cause,
            },
        })?;
        report.applied += 1;
        tracing::info!(object = %p.id.display(), source = %p.doc.source, "applied");
        self.inventory.entries.insert(
            p.id.clone(),
            Entry {
                object: p.id.clone(),
                hash,
                generation: applied
                    .pointer("/metadata/generation")
                    .and_then(|g| g.as_i64()),
                source: p.doc.source.clone(),
                job_spec_hash: job_spec,
            },
        );
        Ok(Some(applied))
    }

    /// One Event on the object naming what was taken back ([`drift_event`]): a Warning
    /// naming the request that owns it when its file is in a request's directory.
    async fn announce_drift(&self, id: &ObjectRef, file: &str, obj: &Value, conflict: &str) {
        let regarding = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some(id.api_version.clone()),
            kind: Some(id.kind.clone()),
            namespace: id.namespace.clone(),
            name: Some(id.name.clone()),
            uid: obj
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .map(String::from),
            ..Default::default()
        };
        let (type_, reason, note) = drift_event(id, file, self.cfg.platform, conflict);
        self.recorder.record(&regarding, type_, reason, note).await;
    }

    /// Step: wait for every CRD of the store that this pass applied to be Established.
    /// A CRD the destination's API refused (already reported in `errors`) is not
    /// waited for: it can never become Established, and waiting would stall every pass.
    async fn wait_for_crds(
        &self,
        docs: &[Document],
        applied: &BTreeMap<ObjectRef, Value>,
        errors: &mut Vec<String>,
    ) {
        let was_applied = |d: &Document| {
            applied
                .keys()
                .any(|id| id.kind == d.kind && id.name == d.name && id.namespace.is_none())
        };
        for d in docs
            .iter()
            .filter(|d| d.kind == "CustomResourceDefinition" && was_applied(d))
        {
            if let Err(e) = self
                .target
                .wait_established(&d.name, self.cfg.crd_timeout)
                .await
            {
                errors.push(format!("{}: {e}", d.source));
            }
        }
    }

    /// Step: delete what this agent applied before and the store no longer holds. Objects
    /// from files that could not be read this pass are kept; Namespaces and CRDs are never
    /// deleted (that would delete objects the agent did not apply) — they leave the
    /// inventory with a warning.
    async fn prune(
        &mut self,
        wanted: &BTreeSet<ObjectRef>,
        unreadable: &BTreeSet<String>,
        report: &mut SyncReport,
        errors: &mut Vec<String>,
        warnings: &mut Vec<String>,
    ) {
        let gone: Vec<Entry> = self
            .inventory
            .entries
            .values()
            .filter(|e| !wanted.contains(&e.object))
            .filter(|e| !unreadable.contains(e.source.split('#').next().unwrap_or_default()))
            .cloned()
            .collect();
        for e in gone {
            if !self.cfg.prune {
                continue;
            }
            let id = &e.object;
            if matches!(id.kind.as_str(), "Namespace" | "CustomResourceDefinition") {
                warnings.push(format!(
                    "{} left the store; not deleted, since deleting it would delete objects the agent did not apply",
                    id.display()
                ));
                self.inventory.entries.remove(id);
                continue;
            }
            let served = match self.target.resolve(&id.api_version, &id.kind).await {
                Ok(Some(s)) => s,
                Ok(None) => {
                    self.inventory.entries.remove(id);
                    continue;
                }
                Err(err) => {
                    errors.push(err.to_string());
                    continue;
                }
            };
            match self.target.delete(&served, id).await {
                Ok(()) => {
                    tracing::info!(object = %id.display(), "pruned (left the store)");
                    report.pruned += 1;
                    self.inventory.entries.remove(id);
                }
                Err(err) => errors.push(err.to_string()),
            }
        }
    }

    /// Step: readiness of every inventory object.
    fn judge(
        &self,
        live: &BTreeMap<ObjectRef, Value>,
        ran_jobs: &BTreeSet<ObjectRef>,
    ) -> Vec<ObjectStatus> {
        self.inventory
            .entries
            .keys()
            .map(|id| {
                let (readiness, message) = match live.get(id) {
                    Some(obj) => readiness::judge(obj, self.target.embedded),
                    None if ran_jobs.contains(id) => {
                        (readiness::Readiness::Ready, jobs::ALREADY_RAN.to_string())
                    }
                    None => (
                        readiness::Readiness::Unknown,
                        "not applied in this pass".to_string(),
                    ),
                };
                ObjectStatus {
                    object: id.clone(),
                    readiness,
                    message,
                }
            })
            .collect()
    }

    /// Step: write inventory and status when they differ from what the target holds.
    async fn save_if_changed(&mut self, report: &mut SyncReport) {
        if self.status.source.is_empty() {
            self.status.source = self.source_name.clone();
        }
        let current = (self.inventory.clone(), self.status.clone());
        if self.saved.as_ref() == Some(&current) {
            return;
        }
        self.target.writes += 1;
        match inventory::save(&self.target.client, &self.cfg.name, &current.0, &current.1).await {
            Ok(()) => self.saved = Some(current),
            Err(e) => {
                tracing::warn!("{e}");
                report.errors.push(e.to_string());
            }
        }
    }
}

/// The Event for a correction of `id`, read from `file`: when the file is in a resource
/// request's directory (`resources/<ns>/<promise>/<request>/…`), a Warning
/// `OwnedByRequest` naming that request (a compound request when the target is the
/// platform), since a hand change to what a request's output declares never stays; else
/// a Normal `DriftCorrected`. Both name the manager and fields taken back.
fn drift_event(
    id: &ObjectRef,
    file: &str,
    platform: bool,
    conflict: &str,
) -> (plinth_api::events::EventType, &'static str, String) {
    use plinth_api::constants::events;
    use plinth_statestore::layout::{PlacementSource, resource_of_file};
    match resource_of_file(file) {
        Some(PlacementSource::Resource {
            namespace,
            promise,
            resource,
            ..
        }) => (
            plinth_api::events::EventType::Warning,
            events::OWNED_BY_REQUEST,
            format!(
                "{} is owned by {}request {namespace}/{resource} (Promise {promise}), whose output declares it; took back the fields it declares: {conflict}",
                id.display(),
                if platform { "compound " } else { "" },
            ),
        ),
        _ => (
            plinth_api::events::EventType::Normal,
            events::DRIFT_CORRECTED,
            format!("took back fields the output declares: {conflict}"),
        ),
    }
}

/// The no-op check: the live object still carries the generation recorded after the last
/// apply (for kinds with a generation), or else every field of the document.
fn unchanged_since_apply(entry: &Entry, live: &Value, desired: &Value) -> bool {
    let live_gen = live
        .pointer("/metadata/generation")
        .and_then(|g| g.as_i64());
    match (entry.generation, live_gen) {
        (Some(a), Some(b)) => a == b && labels_and_annotations_hold(live, desired),
        _ => crate::kube_apply::contains(live, desired),
    }
}

/// Metadata changes do not bump the generation; check the document's labels and
/// annotations directly.
fn labels_and_annotations_hold(live: &Value, desired: &Value) -> bool {
    ["labels", "annotations"].iter().all(|k| {
        let want = desired
            .pointer(&format!("/metadata/{k}"))
            .cloned()
            .unwrap_or(Value::Null);
        let have = live
            .pointer(&format!("/metadata/{k}"))
            .cloned()
            .unwrap_or(Value::Null);
        want.is_null() || crate::kube_apply::contains(&have, &want)
    })
}

/// SHA-256 over every `(path, content)` of a directory, in order.
fn files_digest(files: &[(String, Vec<u8>)]) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    for (p, b) in files {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    }
    hex::encode(h.finalize())
}

/// `url (branch b) path p` / `s3 endpoint/bucket path p` — never a credential.
fn describe_source(source: &StoreConfig, path: &str) -> String {
    match source {
        StoreConfig::Git(g) => format!("{} (branch {}) path {path}", redact(&g.url), g.branch),
        StoreConfig::Bucket(b) => {
            format!("bucket {} at {} path {path}", b.bucket, redact(&b.endpoint))
        }
        StoreConfig::LocalDir(l) => format!("directory {} path {path}", l.root.display()),
    }
}

/// Drops `user:password@` from a URL.
fn redact(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(s), Some(at)) if at > s => format!("{}{}", &url[..s + 3], &url[at + 1..]),
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_correction_of_a_requests_output_is_a_warning_naming_the_request() {
        let id = ObjectRef {
            api_version: "platform.kratix.io/v1alpha1".into(),
            kind: "ResourceBinding".into(),
            namespace: Some("default".into()),
            name: "app-a-db".into(),
        };
        let file = "resources/default/app/app-a/compose/5058f/db.yaml";
        let (t, reason, note) = drift_event(&id, file, true, "kubectl-patch: .spec.version");
        assert_eq!(t, plinth_api::events::EventType::Warning);
        assert_eq!(reason, "OwnedByRequest");
        assert_eq!(
            note,
            "ResourceBinding default/app-a-db is owned by compound request default/app-a (Promise app), whose output declares it; took back the fields it declares: kubectl-patch: .spec.version"
        );
        let (_, _, note) = drift_event(&id, file, false, "x");
        assert!(note.contains("owned by request default/app-a"), "{note}");
        let (t, reason, _) = drift_event(&id, "resources/out.yaml", true, "x");
        assert_eq!(t, plinth_api::events::EventType::Normal);
        assert_eq!(reason, "DriftCorrected");
    }
}
