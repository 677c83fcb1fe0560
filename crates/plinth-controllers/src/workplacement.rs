//! The WorkPlacement controller: writes a WorkPlacement's workloads into its
//! Destination's state store and removes them again on deletion.
//!
//! * **Write** by the Destination's `filepath.mode` (paths from
//!   [`plinth_statestore::layout`]):
//!   `nestedByMetadata` replaces the placement's own directory
//!   (`<dest>/dependencies/<promise>/<pipeline>/<id5>/` or
//!   `<dest>/resources/<ns>/<promise>/<rr>/<pipeline>/<id5>/`);
//!   `none` writes each file at `<dest>/<filepath>` and records them in
//!   `<dest>/.kratix/<ns>-<name>.yaml`, deleting files the previous state file listed
//!   but the placement no longer has; `aggregatedYAML` regenerates `<dest>/<filename>`
//!   from every live WorkPlacement of the Destination, sorted by name.
//! * `Ready=True` only after a successful write, with `status.versionID`.
//! * **Path safety**: a workload whose path would leave the Destination root (`..`,
//!   absolute) is refused before anything is written: `WriteSucceeded=False` with
//!   reason `InvalidWorkloadPath` naming the path, `Ready=False`, a Warning event, and
//!   no requeue — only a change to the WorkPlacement retries (Kratix silently skipped
//!   such files). The scheduler folds the condition into the Work.
//! * **Deletion** removes exactly what was written (the directory, the files of the
//!   state file plus the state file, or this placement's documents from the aggregated
//!   file), then releases the finalizers.
//! * **Destination gone**: the placement gets `Ready=False/DestinationNotFound` and its
//!   finalizers are removed without touching any store, so Work, request and Promise
//!   deletions never hang.
//! * **Periodic re-write** every `state_store_reconciliation_interval` (zero disables);
//!   between those, status-only updates and Destination events do not re-write a
//!   generation that was already written.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ListParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use plinth_api::constants::{condition_types, finalizers, labels, messages, reasons};
use plinth_api::{
    BucketStateStore, Destination, FilepathMode, GitStateStore, StateStoreKind, WorkPlacement,
    Workload,
};
use plinth_statestore::layout::{self, PathError, PlacementSource};
use plinth_statestore::{StateStore, StoreError, WriteOp, WriteRequest};

use crate::statestore::REASON_AUTHENTICATION_FAILED;
use crate::support::harness::{Harness, Start};
use serde_json::json;

use crate::Error;
use crate::context::Context;
use crate::statestore::registry::store_generation;
use crate::support::{
    Latest, condition_is_false, describe, edit_finalizers, get_condition, patch_status, publish,
    set_condition, typed_reference,
};
use crate::triggers::{inputs_hash, watch_inputs, watched_cache};
use plinth_api::events::{EventRecorder, EventType};

const REPORTER: &str = plinth_api::constants::events::WORKPLACEMENT_CONTROLLER;

/// Reason of the terminal `WriteSucceeded=False` condition for a workload path that
/// would leave the Destination root.
pub const REASON_INVALID_WORKLOAD_PATH: &str = "InvalidWorkloadPath";
/// Reason of the terminal `WriteSucceeded=False` condition for workload content that
/// is not gzip+base64.
pub const REASON_INVALID_WORKLOAD_CONTENT: &str = "InvalidWorkloadContent";
/// Reason of `Ready=False` on a WorkPlacement whose Destination does not exist.
pub const REASON_DESTINATION_NOT_FOUND: &str = "DestinationNotFound";

/// Why a WorkPlacement's workloads could not be decoded, listed or removed from the
/// store.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    /// A workload's `content` is not gzip+base64.
    #[error("workload {filepath:?}: {cause}")]
    Undecodable {
        /// The workload's `filepath`.
        filepath: String,
        /// The decoding step that failed.
        cause: String,
    },
    /// The WorkPlacements of a Destination could not be listed.
    #[error("listing WorkPlacements of Destination {destination}: {cause}")]
    ListPlacements {
        /// The Destination.
        destination: String,
        /// The API's message.
        cause: String,
    },
    /// A `none` mode state file is not one Plinth or Kratix wrote.
    #[error("{path}: {cause}")]
    StateFile {
        /// The state file's path in the store.
        path: String,
        /// What is wrong with it.
        cause: String,
    },
    /// The state store refused a read or a write.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Decodes a workload's `content` ([`plinth_api::work_content`]).
///
/// # Errors
/// [`PlacementError::Undecodable`] naming the workload's `filepath` and the decoding
/// step that failed.
pub fn decode_workload(w: &Workload) -> Result<Vec<u8>, PlacementError> {
    plinth_api::work_content::decode(&w.content).map_err(|e| PlacementError::Undecodable {
        filepath: w.filepath.clone(),
        cause: e.to_string(),
    })
}

/// Where a placement's files go, resolved from the Destination and the placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `nestedByMetadata`: the directory the placement owns, and its files relative to it.
    Nested {
        /// Directory relative to the store prefix.
        dir: String,
        /// `(workload filepath, decoded content)`.
        files: Vec<(String, Vec<u8>)>,
    },
    /// `none`: files at `<dest>/<filepath>` plus the state file.
    Flat {
        /// `(path relative to the store prefix, decoded content)`.
        files: Vec<(String, Vec<u8>)>,
        /// `<dest>/.kratix/<ns>-<name>.yaml`.
        state_file: String,
    },
    /// `aggregatedYAML`: the one file of the Destination.
    Aggregated {
        /// `<dest>/<filename>`.
        file: String,
    },
}

/// Why a placement cannot be written no matter how often it is retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terminal {
    /// Condition reason.
    pub reason: &'static str,
    /// Condition message naming the path or workload.
    pub message: String,
}

/// The nested-mode source of a placement: dependency (no `resourceName`) or resource.
fn placement_source(wp: &WorkPlacement) -> PlacementSource {
    let promise = wp.spec.promise_name.clone().unwrap_or_default();
    let pipeline = wp
        .labels()
        .get(labels::PIPELINE_NAME)
        .cloned()
        .unwrap_or_default();
    match wp.spec.resource_name.as_deref().filter(|r| !r.is_empty()) {
        None => PlacementSource::Dependency { promise, pipeline },
        Some(rr) => PlacementSource::Resource {
            namespace: wp.namespace().unwrap_or_default(),
            promise,
            resource: rr.to_string(),
            pipeline,
        },
    }
}

fn path_terminal(dest: &Destination, path: &str, e: &PathError) -> Terminal {
    Terminal {
        reason: REASON_INVALID_WORKLOAD_PATH,
        message: format!(
            "workload path {path:?} is not allowed under Destination {} root {:?}: {e}; nothing was written",
            dest.name_any(),
            dest.spec.path
        ),
    }
}

/// Resolves where `wp`'s workloads go on `dest` and decodes them. Every path is checked
/// with the layout's `safe_join` rules before anything is written.
///
/// # Errors
/// A [`Terminal`] naming the offending path or workload.
pub fn resolve_target(dest: &Destination, wp: &WorkPlacement) -> Result<Target, Terminal> {
    let root = dest.spec.path.as_str();
    let workloads = wp.spec.workloads.as_deref().unwrap_or(&[]);
    let decode_all = || -> Result<Vec<(String, Vec<u8>)>, Terminal> {
        workloads
            .iter()
            .map(|w| {
                decode_workload(w)
                    .map(|b| (w.filepath.clone(), b))
                    .map_err(|e| Terminal {
                        reason: REASON_INVALID_WORKLOAD_CONTENT,
                        message: e.to_string(),
                    })
            })
            .collect()
    };
    match dest.spec.filepath_mode() {
        FilepathMode::NestedByMetadata => {
            let id = wp.spec.id.clone().unwrap_or_default();
            let dir = layout::nested_directory(root, &placement_source(wp), &id)
                .map_err(|e| path_terminal(dest, root, &e))?;
            let files = decode_all()?;
            for (p, _) in &files {
                layout::safe_join_file(&dir, p).map_err(|e| path_terminal(dest, p, &e))?;
            }
            Ok(Target::Nested { dir, files })
        }
        FilepathMode::None => {
            let mut files = Vec::new();
            for (p, content) in decode_all()? {
                let full =
                    layout::none_file_path(root, &p).map_err(|e| path_terminal(dest, &p, &e))?;
                files.push((full, content));
            }
            let state_file = layout::none_state_file_path(
                root,
                &wp.namespace().unwrap_or_default(),
                &wp.name_any(),
            )
            .map_err(|e| path_terminal(dest, root, &e))?;
            Ok(Target::Flat { files, state_file })
        }
        FilepathMode::AggregatedYaml => {
            decode_all()?;
            let file = layout::aggregated_file_path(root, dest.spec.aggregated_filename())
                .map_err(|e| path_terminal(dest, dest.spec.aggregated_filename(), &e))?;
            Ok(Target::Aggregated { file })
        }
    }
}

/// `(namespace, name)` of a WorkPlacement.
type ObjectKey = (String, String);

struct WpState {
    ctx: Arc<Context>,
    /// The Destinations, cached from the watch that wakes placements.
    destinations: Store<Destination>,
    recorder: EventRecorder,
    /// `(namespace, name)` → (generation written, when). Bridges status-only events and
    /// Destination events without re-writing; the interval requeue forces a re-write.
    written: Mutex<HashMap<ObjectKey, (Option<i64>, Instant)>>,
}

impl crate::support::harness::Shared for WpState {
    fn context(&self) -> &Context {
        &self.ctx
    }
}

/// Runs the WorkPlacement controller until the process stops.
///
/// Watches WorkPlacements (all namespaces), Destinations (mapped to the placements
/// that target them, so a deleted Destination releases its placements) and state
/// stores (mapped through their Destinations, so placements waiting for a store are
/// written as soon as it turns Ready). Needs
/// `ctx.client`, `ctx.stores` (filled by the state store controllers) and, from
/// `ctx.config()`, `requeue_default` (store not ready, write failures) and
/// `state_store_reconciliation_interval` (periodic re-write; zero disables).
pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let wps: Api<WorkPlacement> = Api::all(client.clone());
    let (dest_reader, dest_stream) = watched_cache(Api::<Destination>::all(client.clone()));
    // Woken by spec changes, deletion and the scheduler's `ScheduleSucceeded` (which
    // `Ready` summarises); never by this controller's own status writes.
    let (store, trigger) = watch_inputs(wps, |wp: &WorkPlacement| {
        let conds = conditions_of(wp);
        let scheduled =
            get_condition(&conds, condition_types::SCHEDULE_SUCCEEDED).map(|c| c.status.clone());
        inputs_hash(wp, (scheduled, reschedule_requested(wp)))
    });
    let controller = Controller::for_stream(trigger, store.clone());
    let (s1, s2, s3) = (store.clone(), store.clone(), store);
    let (d1, d2) = (dest_reader.clone(), dest_reader.clone());
    let state = Arc::new(WpState {
        destinations: dest_reader,
        recorder: ctx.recorder(REPORTER),
        ctx,
        written: Mutex::new(HashMap::new()),
    });
    // Placements read a Destination's spec (state store, paths), so only a spec change,
    // the start of a deletion or its removal wakes them, not a status write: each wake
    // reaches every placement on the Destination.
    let (dests, seen) = (state.destinations.clone(), Mutex::new(HashMap::new()));
    controller
        .watches_stream(dest_stream, move |dest: Destination| {
            let inputs = inputs_hash(&dest, ());
            let gone = dests.get(&ObjectRef::from_obj(&dest)).is_none();
            let mut seen = seen.lock().expect("destination inputs");
            // A Destination gone is forgotten, so one created again under its name
            // wakes its placements even with the same spec.
            let previous = if gone {
                seen.remove(&dest.name_any())
            } else {
                seen.insert(dest.name_any(), inputs)
            };
            drop(seen);
            if gone || previous != Some(inputs) {
                placements_on(&s1, &[dest.name_any()])
            } else {
                Vec::new()
            }
        })
        // A state store turning Ready (or going away) re-queues the placements waiting on it.
        .watches(
            Api::<GitStateStore>::all(client.clone()),
            watcher::Config::default(),
            move |s: GitStateStore| {
                placements_on(
                    &s2,
                    &destinations_of_store(&d1, StateStoreKind::GitStateStore, &s.name_any()),
                )
            },
        )
        .watches(
            Api::<BucketStateStore>::all(client),
            watcher::Config::default(),
            move |s: BucketStateStore| {
                placements_on(
                    &s3,
                    &destinations_of_store(&d2, StateStoreKind::BucketStateStore, &s.name_any()),
                )
            },
        )
        .start(Harness::new("workplacement"), reconcile, state)
        .await;
}

/// WorkPlacements targeting any of `destinations`.
fn placements_on(
    store: &Store<WorkPlacement>,
    destinations: &[String],
) -> Vec<ObjectRef<WorkPlacement>> {
    store
        .state()
        .into_iter()
        .filter(|wp| {
            wp.spec
                .target_destination_name
                .as_ref()
                .is_some_and(|d| destinations.contains(d))
        })
        .map(|wp| ObjectRef::from_obj(wp.as_ref()))
        .collect()
}

/// Names of the Destinations using state store `kind`/`name`.
fn destinations_of_store(
    dests: &Store<Destination>,
    kind: StateStoreKind,
    name: &str,
) -> Vec<String> {
    dests
        .state()
        .into_iter()
        .filter(|d| d.spec.state_store_ref.kind == kind && d.spec.state_store_ref.name == name)
        .map(|d| d.name_any())
        .collect()
}

fn conditions_of(wp: &WorkPlacement) -> Vec<Condition> {
    wp.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
}

/// The finalizers this controller owns.
const ALL_FINALIZERS: [&str; 2] = [
    finalizers::WORKPLACEMENT_REPO_CLEANUP,
    finalizers::WORKPLACEMENT_KRATIX_DOT_FILES_CLEANUP,
];

/// A WorkPlacement as one reconcile sees it, with the API it writes through.
struct Reconciling<'a> {
    wp: &'a WorkPlacement,
    name: String,
    /// `WorkPlacement <namespace>/<name>`, for errors.
    what: String,
    api: Api<WorkPlacement>,
    /// The key of [`WpState::written`].
    key: ObjectKey,
    /// The placement as this reconcile's last write returned it: the next write starts
    /// from it rather than from a read (`support::status`).
    latest: Latest<WorkPlacement>,
}

impl<'a> Reconciling<'a> {
    fn new(state: &WpState, wp: &'a WorkPlacement) -> Self {
        let ns = wp.namespace().unwrap_or_default();
        Reconciling {
            wp,
            name: wp.name_any(),
            what: describe(wp),
            api: Api::namespaced(state.ctx.client.clone(), &ns),
            key: (ns, wp.name_any()),
            latest: Latest::new(wp),
        }
    }

    /// Removes this controller's finalizers and forgets the written generation.
    async fn release(&self, state: &WpState) -> Result<Action, Error> {
        edit_finalizers(&self.api, &self.name, &[], &ALL_FINALIZERS)
            .await
            .map_err(|e| Error::kube("releasing finalizers of", &self.what, e))?;
        state.written.lock().expect("poisoned").remove(&self.key);
        Ok(Action::await_change())
    }
}

/// One reconcile, a failure of it reported on the WorkPlacement
/// ([`crate::support::outcome`]).
async fn reconcile(wp: Arc<WorkPlacement>, state: Arc<WpState>) -> Result<Action, Error> {
    let result = reconcile_steps(wp.clone(), state.clone()).await;
    let component = plinth_api::constants::events::WORKPLACEMENT_CONTROLLER;
    crate::support::outcome::report_typed(&state.ctx, component, wp.as_ref(), result).await
}

/// The Destination and its store, then deletion, or finalizers, `Ready`, the periodic
/// re-write check and the write.
async fn reconcile_steps(wp: Arc<WorkPlacement>, state: Arc<WpState>) -> Result<Action, Error> {
    let p = Reconciling::new(&state, &wp);
    let deleting = wp.meta().deletion_timestamp.is_some();
    let dest_name = wp.spec.target_destination_name.clone().unwrap_or_default();
    let dest = destination(&state, &p, &dest_name).await?;
    let Some(dest) = dest else {
        // Destination gone: mark, release.
        if !deleting {
            write_conditions(&p, Some(&dest_name), |_, _| false).await?;
        }
        return p.release(&state).await;
    };
    let store_ref = &dest.spec.state_store_ref;
    if !deleting && reschedule_requested(&wp) {
        return reschedule(&state, &p).await;
    }
    // Only through a store opened from the store's current spec (a re-pointed URL is
    // never written through its old client).
    let generation = store_generation(&state.ctx.client, store_ref.kind, &store_ref.name)
        .await
        .map_err(|e| Error::kube("reading the state store of", &p.what, e))?;
    let current = generation.and_then(|g| {
        state
            .ctx
            .stores
            .get_current(store_ref.kind.as_str(), &store_ref.name, g)
    });
    let Some(store) = current else {
        tracing::debug!(workplacement = %p.what, store = %store_ref.name, "state store not ready");
        if deleting {
            return delete_without_store(&state, &p, store_ref.kind.as_str(), &store_ref.name)
                .await;
        }
        let (kind, name) = (store_ref.kind.as_str(), store_ref.name.as_str());
        let failed = state.ctx.stores.has_failed(kind, name);
        report_store_not_ready(&p, &wp, kind, name, failed).await?;
        return Ok(Action::requeue(state.ctx.config().requeue_default));
    };
    if deleting {
        return delete(&state, &p, &store, &dest).await;
    }
    ensure_finalizers(&p, dest.spec.filepath_mode()).await?;
    // `ScheduleSucceeded` (the scheduler's) may have changed what `Ready` says.
    if ready_differs(&conditions_of(&wp), None, wp.meta().generation) {
        write_conditions(&p, None, |_, _| false).await?;
    }
    if let Some(action) = already_written(&state, &p) {
        return Ok(action);
    }
    let target = match resolve_target(&dest, &wp) {
        Ok(t) => t,
        Err(t) => {
            report_terminal(&state, &p, &t).await?;
            return Ok(Action::await_change());
        }
    };
    write(&state, &p, &store, &dest, &wp, target).await
}

/// Writes the placement's files and reports the outcome: written, a terminal path
/// escape, refused credentials (the store is validated again first), or a failure.
async fn write(
    state: &WpState,
    p: &Reconciling<'_>,
    store: &StateStore,
    dest: &Destination,
    wp: &WorkPlacement,
    target: Target,
) -> Result<Action, Error> {
    let store_ref = &dest.spec.state_store_ref;
    match write_target(state, store, dest, wp, target).await {
        Ok(outcome) => record_written(state, p, dest, outcome).await,
        Err(StoreError::PathEscapes { path, cause }) => {
            let t = Terminal {
                reason: REASON_INVALID_WORKLOAD_PATH,
                message: format!(
                    "workload path {path:?} is not allowed under Destination {}: {cause}; nothing was written",
                    dest.name_any()
                ),
            };
            report_terminal(state, p, &t).await?;
            Ok(Action::await_change())
        }
        Err(e @ (StoreError::AuthFailed { .. } | StoreError::GithubAppAuthFailed { .. })) => {
            // Never retry with refused credentials: the store is validated again and
            // opened from its (possibly rotated) Secret before the next write.
            state
                .ctx
                .stores
                .report_auth_failure(store_ref.kind.as_str(), &store_ref.name);
            let msg = format!(
                "{e}; {}/{} is validated again, and the write is retried once its credentials work",
                store_ref.kind.as_str(),
                store_ref.name
            );
            report_write_failure(state, p, REASON_AUTHENTICATION_FAILED, &msg).await
        }
        Err(e) => {
            report_write_failure(state, p, reasons::WORKLOADS_FAILED_WRITE, &e.to_string()).await
        }
    }
}

/// The Destination named `name`: from the cache, else (not cached yet, or gone) read
/// through the API, so a placement never takes a new Destination for a deleted one.
async fn destination(
    state: &WpState,
    p: &Reconciling<'_>,
    name: &str,
) -> Result<Option<Destination>, Error> {
    if let Some(d) = state.destinations.get(&ObjectRef::new(name)) {
        return Ok(Some(d.as_ref().clone()));
    }
    Api::<Destination>::all(state.ctx.client.clone())
        .get_opt(name)
        .await
        .map_err(|e| Error::kube("reading the Destination of", &p.what, e))
}

/// Beyond Kratix, which waits silently: a placement not written yet whose Destination's
/// state store is not ready says so (`WriteSucceeded=False/StateStoreNotReady`, and
/// `Ready=False` with the same reason) instead of staying `Pending` with no reason. A
/// placement already written says the same (its files stay in the store, but no change
/// reaches it), with the action that moves it, once its store's controller found the
/// store broken or gone (`failed`; not merely not opened yet after a start); the next
/// successful write replaces these.
async fn report_store_not_ready(
    p: &Reconciling<'_>,
    wp: &WorkPlacement,
    kind: &str,
    name: &str,
    failed: bool,
) -> Result<(), Error> {
    let conds = conditions_of(wp);
    let write = get_condition(&conds, condition_types::WRITE_SUCCEEDED);
    let waiting = format!(
        "{kind}/{name} does not exist or is not ready (the Destination's Ready condition says which); the workloads are written once it is"
    );
    let stuck = format!(
        "written to {kind}/{name}, which does not exist or is not ready now (the Destination's Ready condition says which): changes are written once it is; label this WorkPlacement {}=true to move it to a Ready matching Destination",
        labels::RESCHEDULE
    );
    // Just after a start no store is open yet: a written placement waits quietly unless
    // its store's controller found the store broken or gone.
    if write.is_some_and(|c| c.status == "True") && !failed {
        return Ok(());
    }
    let was_written = write.is_some_and(|c| c.status == "True" || c.message == stuck);
    let message = if was_written { stuck } else { waiting };
    // A refused-credentials failure stays what the placement says until a write works.
    if write.is_some_and(|c| {
        c.reason == REASON_AUTHENTICATION_FAILED
            || (c.reason == reasons::STATE_STORE_NOT_READY && c.message == message)
    }) {
        return Ok(());
    }
    write_conditions(p, None, |conds, g| {
        set_condition(
            conds,
            condition_types::WRITE_SUCCEEDED,
            false,
            reasons::STATE_STORE_NOT_READY,
            &message,
            g,
        )
    })
    .await?;
    Ok(())
}

/// `plinth.dev/reschedule=true` on the placement: the user asks to move it, e.g. off a
/// Destination whose state store broke or went away after the placement was pinned there.
fn reschedule_requested(wp: &WorkPlacement) -> bool {
    wp.labels()
        .get(labels::RESCHEDULE)
        .is_some_and(|v| v == "true")
}

/// The move: the placement deletes itself (its files leave the old Destination through
/// the finalizer when its store can be written, see [`delete_without_store`]); the Work
/// controller then places the group again, on a Ready matching Destination first.
async fn reschedule(state: &WpState, p: &Reconciling<'_>) -> Result<Action, Error> {
    p.api
        .delete(&p.name, &kube::api::DeleteParams::default())
        .await
        .map_err(|e| Error::kube("deleting, to place it again,", &p.what, e))?;
    publish(
        &state.recorder,
        &typed_reference(p.wp),
        EventType::Normal,
        plinth_api::constants::events::WORKS_RESCHEDULED,
        format!(
            "{} was labelled {}=true: removed, so its Work places the workloads again on a Ready matching Destination",
            p.what,
            labels::RESCHEDULE
        ),
    )
    .await;
    Ok(Action::await_change())
}

/// Deleting a placement whose state store is not open: when the store no longer exists
/// there is nothing to remove files from, and when the user asked for a move
/// ([`reschedule_requested`]) the files are left in the broken store; both release the
/// placement with a Warning naming the store. Otherwise the deletion waits for the
/// store, so a store that is only down for a while still gets its files removed.
async fn delete_without_store(
    state: &WpState,
    p: &Reconciling<'_>,
    kind: &str,
    name: &str,
) -> Result<Action, Error> {
    let exists = match kind {
        "BucketStateStore" => Api::<BucketStateStore>::all(state.ctx.client.clone())
            .get_opt(name)
            .await
            .map(|s| s.is_some()),
        _ => Api::<GitStateStore>::all(state.ctx.client.clone())
            .get_opt(name)
            .await
            .map(|s| s.is_some()),
    }
    .map_err(|e| Error::kube("reading the state store of", &p.what, e))?;
    if exists && !reschedule_requested(p.wp) {
        return Ok(Action::requeue(state.ctx.config().requeue_default));
    }
    let why = if exists {
        "is not ready"
    } else {
        "does not exist"
    };
    publish(
        &state.recorder,
        &typed_reference(p.wp),
        EventType::Warning,
        plinth_api::constants::events::FAILED_DELETE_FILES_FROM_REPOSITORY,
        format!(
            "{kind}/{name} {why}: the files of {} were not removed from it",
            p.what
        ),
    )
    .await;
    p.release(state).await
}

/// Deletion: removes what was written, then releases the finalizers; a failed removal
/// is reported (`Ready=False`, a Warning) and retried after `requeue_default`.
async fn delete(
    state: &WpState,
    p: &Reconciling<'_>,
    store: &StateStore,
    dest: &Destination,
) -> Result<Action, Error> {
    if !p
        .wp
        .finalizers()
        .iter()
        .any(|f| ALL_FINALIZERS.contains(&f.as_str()))
    {
        return Ok(Action::await_change());
    }
    let Err(e) = delete_from_store(state, store, dest, p.wp).await else {
        return p.release(state).await;
    };
    let msg = e.to_string();
    publish(
        &state.recorder,
        &typed_reference(p.wp),
        EventType::Warning,
        plinth_api::constants::events::FAILED_DELETE_FILES_FROM_REPOSITORY,
        msg.clone(),
    )
    .await;
    patch_status(&p.api, &p.name, |cur: &WorkPlacement| {
        let mut conds = conditions_of(cur);
        set_condition(
            &mut conds,
            condition_types::READY,
            false,
            reasons::FAILED_DELETE_FILES_FROM_REPOSITORY,
            &msg,
            cur.meta().generation,
        )
        .then(|| json!({"conditions": conds}))
    })
    .await
    .map_err(|e| Error::kube("writing status of", &p.what, e))?;
    Ok(Action::requeue(state.ctx.config().requeue_default))
}

/// Adds the repository-cleanup finalizer, and the dot-files one in `none` mode.
async fn ensure_finalizers(p: &Reconciling<'_>, mode: FilepathMode) -> Result<(), Error> {
    let mut wanted = vec![finalizers::WORKPLACEMENT_REPO_CLEANUP];
    if mode == FilepathMode::None {
        wanted.push(finalizers::WORKPLACEMENT_KRATIX_DOT_FILES_CLEANUP);
    }
    if wanted
        .iter()
        .all(|f| p.wp.finalizers().iter().any(|x| x == f))
    {
        return Ok(());
    }
    let written = edit_finalizers(&p.api, &p.name, &wanted, &[])
        .await
        .map_err(|e| Error::kube("adding finalizers to", &p.what, e))?;
    p.latest.remember(written);
    Ok(())
}

/// When this generation was already written and the periodic re-write is not due:
/// the action that waits for it (or for a change, with the interval zero).
fn already_written(state: &WpState, p: &Reconciling<'_>) -> Option<Action> {
    let interval = state.ctx.config().state_store_reconciliation_interval;
    let conds = conditions_of(p.wp);
    let written_ok = !condition_is_false(&conds, "WriteSucceeded")
        && get_condition(&conds, "WriteSucceeded").is_some();
    if !written_ok {
        return None;
    }
    let (generation, at) = state
        .written
        .lock()
        .expect("poisoned")
        .get(&p.key)
        .copied()?;
    if generation != p.wp.meta().generation {
        return None;
    }
    if interval.is_zero() {
        return Some(Action::await_change());
    }
    let elapsed = at.elapsed();
    (elapsed < interval).then(|| Action::requeue(interval - elapsed))
}

/// After a successful write: remembers the generation, writes `WriteSucceeded`,
/// `Ready` and `versionID`, announces the write, and waits for the periodic re-write.
async fn record_written(
    state: &WpState,
    p: &Reconciling<'_>,
    dest: &Destination,
    outcome: plinth_statestore::WriteOutcome,
) -> Result<Action, Error> {
    state
        .written
        .lock()
        .expect("poisoned")
        .insert(p.key.clone(), (p.wp.meta().generation, Instant::now()));
    let status_changed = write_success_status(p, &outcome).await?;
    if outcome.changed || status_changed {
        let mut note = format!("successfully written to Destination: {}", dest.name_any());
        if !outcome.version_id.is_empty() {
            note.push_str(&format!(" with versionID: {}", outcome.version_id));
        }
        publish(
            &state.recorder,
            &typed_reference(p.wp),
            EventType::Normal,
            plinth_api::constants::events::WORKLOADS_WRITTEN_TO_STATE_STORE,
            note,
        )
        .await;
    }
    let interval = state.ctx.config().state_store_reconciliation_interval;
    Ok(if interval.is_zero() {
        Action::await_change()
    } else {
        Action::requeue(interval)
    })
}

/// Writes `WriteSucceeded=True`, `Ready` and `versionID`; true when anything changed.
/// A write that changed nothing keeps the recorded version: that commit still holds
/// exactly these files (Kratix's version cache).
async fn write_success_status(
    p: &Reconciling<'_>,
    outcome: &plinth_statestore::WriteOutcome,
) -> Result<bool, Error> {
    let mut status_changed = false;
    let written = p
        .latest
        .patch_status(&p.api, |cur: &WorkPlacement| {
            let mut conds = conditions_of(cur);
            let g = cur.meta().generation;
            let mut ch = set_condition(
                &mut conds,
                condition_types::WRITE_SUCCEEDED,
                true,
                reasons::WORKLOADS_WRITTEN_TO_STATE_STORE,
                messages::WORKLOADS_WRITTEN,
                g,
            );
            ch |= set_ready(&mut conds, None, g);
            let old_version = cur
                .status
                .as_ref()
                .and_then(|s| s.version_id.clone())
                .unwrap_or_default();
            let version = if !outcome.changed && !old_version.is_empty() {
                old_version.clone()
            } else {
                outcome.version_id.clone()
            };
            ch |= !version.is_empty() && old_version != version;
            status_changed = ch;
            ch.then(|| {
                let mut body = json!({"conditions": conds});
                if !version.is_empty() {
                    body["versionID"] = json!(version);
                }
                body
            })
        })
        .await
        .map_err(|e| Error::kube("writing status of", &p.what, e))?;
    Ok(status_changed && written.is_some())
}

/// A failed write: a Warning, `WriteSucceeded=False` with the error, and a retry after
/// `requeue_default`.
async fn report_write_failure(
    state: &WpState,
    p: &Reconciling<'_>,
    reason: &str,
    msg: &str,
) -> Result<Action, Error> {
    publish(
        &state.recorder,
        &typed_reference(p.wp),
        EventType::Warning,
        plinth_api::constants::events::FAILED_WRITE_TO_DESTINATION,
        msg.to_string(),
    )
    .await;
    write_conditions(p, None, |conds, g| {
        set_condition(
            conds,
            condition_types::WRITE_SUCCEEDED,
            false,
            reason,
            msg,
            g,
        )
    })
    .await?;
    Ok(Action::requeue(state.ctx.config().requeue_default))
}

/// The placement's `Ready` condition, derived from the conditions it summarises:
/// `(status, reason, message)`. This controller is `Ready`'s only writer (the scheduler
/// owns `ScheduleSucceeded`, this controller `WriteSucceeded`), so no two code paths can
/// disagree about it. `missing_destination` names the target Destination when it does
/// not exist. Priority: Destination not found, misplaced, store not ready, write failed,
/// written, pending.
pub fn derived_ready(
    conds: &[Condition],
    missing_destination: Option<&str>,
) -> (bool, &'static str, String) {
    if let Some(dest) = missing_destination {
        return (
            false,
            REASON_DESTINATION_NOT_FOUND,
            format!("Destination {dest} not found; its files are no longer managed"),
        );
    }
    if condition_is_false(conds, condition_types::SCHEDULE_SUCCEEDED) {
        return (false, "Misplaced", "Misplaced".into());
    }
    match get_condition(conds, condition_types::WRITE_SUCCEEDED) {
        Some(c) if c.status == "True" => {
            (true, "WorkloadsWrittenToTargetDestination", "Ready".into())
        }
        Some(c) if c.status == "False" && c.reason == reasons::STATE_STORE_NOT_READY => {
            (false, reasons::STATE_STORE_NOT_READY, c.message.clone())
        }
        Some(c) if c.status == "False" => {
            let reason = [
                REASON_INVALID_WORKLOAD_PATH,
                REASON_INVALID_WORKLOAD_CONTENT,
                REASON_AUTHENTICATION_FAILED,
            ]
            .into_iter()
            .find(|r| *r == c.reason)
            .unwrap_or("WorkloadsFailedWrite");
            (false, reason, "Failing".into())
        }
        _ => (false, "ScheduledToDestination", "Pending".into()),
    }
}

/// Sets `Ready` from [`derived_ready`]; true when it changed.
fn set_ready(conds: &mut Vec<Condition>, missing: Option<&str>, generation: Option<i64>) -> bool {
    let (ok, reason, message) = derived_ready(conds, missing);
    set_condition(
        conds,
        condition_types::READY,
        ok,
        reason,
        &message,
        generation,
    )
}

/// True when `Ready` in `conds` is not what [`derived_ready`] says.
fn ready_differs(conds: &[Condition], missing: Option<&str>, generation: Option<i64>) -> bool {
    let mut c = conds.to_vec();
    set_ready(&mut c, missing, generation)
}

/// Applies `own` (this controller's conditions) to the stored placement, re-derives
/// `Ready`, and writes the conditions only if anything changed. Returns whether it wrote.
async fn write_conditions(
    p: &Reconciling<'_>,
    missing: Option<&str>,
    own: impl Fn(&mut Vec<Condition>, Option<i64>) -> bool,
) -> Result<bool, Error> {
    let mut changed = false;
    let written = p
        .latest
        .patch_status(&p.api, |cur: &WorkPlacement| {
            let mut conds = conditions_of(cur);
            let g = cur.meta().generation;
            let ch = own(&mut conds, g) | set_ready(&mut conds, missing, g);
            changed = ch;
            ch.then(|| json!({"conditions": conds}))
        })
        .await
        .map_err(|e| Error::kube("writing status of", &p.what, e))?;
    // A placement deleted meanwhile was not written, whatever the change computed.
    Ok(changed && written.is_some())
}

async fn report_terminal(state: &WpState, p: &Reconciling<'_>, t: &Terminal) -> Result<(), Error> {
    let changed = write_conditions(p, None, |conds, g| {
        set_condition(
            conds,
            condition_types::WRITE_SUCCEEDED,
            false,
            t.reason,
            &t.message,
            g,
        )
    })
    .await?;
    if changed {
        publish(
            &state.recorder,
            &typed_reference(p.wp),
            EventType::Warning,
            plinth_api::constants::events::FAILED_WRITE_TO_DESTINATION,
            t.message.clone(),
        )
        .await;
    }
    Ok(())
}

/// Decoded documents of every live WorkPlacement targeting `dest` (all namespaces),
/// optionally leaving one out (the one being deleted), for the aggregated file.
async fn aggregated_documents(
    state: &WpState,
    dest: &Destination,
    exclude: Option<(&str, &str)>,
) -> Result<Vec<(String, Vec<Vec<u8>>)>, PlacementError> {
    let all: Api<WorkPlacement> = Api::all(state.ctx.client.clone());
    let lp = ListParams::default().labels(&format!(
        "{}={}",
        labels::TARGET_DESTINATION_NAME,
        dest.name_any()
    ));
    let list = all
        .list(&lp)
        .await
        .map_err(|e| PlacementError::ListPlacements {
            destination: dest.name_any(),
            cause: e.to_string(),
        })?;
    let mut out = Vec::new();
    for wp in list.items {
        if wp.meta().deletion_timestamp.is_some() {
            continue;
        }
        let ns = wp.namespace().unwrap_or_default();
        let name = wp.name_any();
        if exclude == Some((ns.as_str(), name.as_str())) {
            continue;
        }
        let mut docs = Vec::new();
        for w in wp.spec.workloads.as_deref().unwrap_or(&[]) {
            match decode_workload(w) {
                Ok(d) => docs.push(d),
                // A placement with undecodable content reports that itself; skip it here.
                Err(e) => {
                    tracing::warn!(workplacement = %name, error = %e, "skipping undecodable workload in aggregate")
                }
            }
        }
        out.push((name, docs));
    }
    Ok(out)
}

async fn write_target(
    state: &WpState,
    store: &StateStore,
    dest: &Destination,
    wp: &WorkPlacement,
    target: Target,
) -> Result<plinth_statestore::WriteOutcome, StoreError> {
    let ops = match target {
        Target::Nested { dir, files } => vec![WriteOp::ReplaceDir { dir, files }],
        Target::Flat { files, state_file } => {
            let previous = match store.read(&state_file).await? {
                Some(bytes) => layout::parse_none_state_file(&bytes).unwrap_or_default(),
                None => Vec::new(),
            };
            let now: BTreeSet<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
            let listed: Vec<String> = files.iter().map(|(p, _)| p.clone()).collect();
            let mut ops: Vec<WriteOp> = previous
                .iter()
                .filter(|p| !now.contains(p.as_str()))
                .map(|p| WriteOp::Delete { path: p.clone() })
                .collect();
            ops.extend(
                files
                    .into_iter()
                    .map(|(path, content)| WriteOp::Put { path, content }),
            );
            ops.push(WriteOp::Put {
                path: state_file,
                content: layout::none_state_file_content(&listed),
            });
            ops
        }
        Target::Aggregated { file } => {
            let mut docs = aggregated_documents(state, dest, None).await.map_err(|e| {
                StoreError::InvalidConfig {
                    field: "workplacements".into(),
                    cause: e.to_string(),
                }
            })?;
            // The placement being reconciled may not be in the list yet (fresh create).
            let name = wp.name_any();
            if !docs.iter().any(|(n, _)| *n == name) {
                let own = wp
                    .spec
                    .workloads
                    .as_deref()
                    .unwrap_or(&[])
                    .iter()
                    .filter_map(|w| decode_workload(w).ok())
                    .collect();
                docs.push((name, own));
            }
            match layout::aggregate_documents(&docs) {
                Some(content) => vec![WriteOp::Put {
                    path: file,
                    content,
                }],
                None => vec![WriteOp::Delete { path: file }],
            }
        }
    };
    let bytes = crate::observe::content_bytes(&ops);
    let started = Instant::now();
    let result = store
        .write(WriteRequest {
            name: wp.name_any(),
            ops,
        })
        .await;
    let metrics = &state.ctx.metrics;
    crate::observe::workplacement_write(metrics, wp, dest, bytes, started.elapsed(), &result);
    result
}

/// Removes what `wp` wrote. Its error is the message of the event on failure.
async fn delete_from_store(
    state: &WpState,
    store: &StateStore,
    dest: &Destination,
    wp: &WorkPlacement,
) -> Result<(), PlacementError> {
    let root = dest.spec.path.as_str();
    let ns = wp.namespace().unwrap_or_default();
    let name = wp.name_any();
    let ops = match dest.spec.filepath_mode() {
        FilepathMode::NestedByMetadata => {
            let id = wp.spec.id.clone().unwrap_or_default();
            match layout::nested_directory(root, &placement_source(wp), &id) {
                Ok(dir) => vec![WriteOp::DeleteDir { dir }],
                // Nothing can have been written under an invalid directory.
                Err(_) => Vec::new(),
            }
        }
        FilepathMode::None => {
            let state_file = match layout::none_state_file_path(root, &ns, &name) {
                Ok(p) => p,
                Err(_) => return Ok(()),
            };
            let listed = match store.read(&state_file).await? {
                Some(bytes) => layout::parse_none_state_file(&bytes).map_err(|e| {
                    PlacementError::StateFile {
                        path: state_file.clone(),
                        cause: e.to_string(),
                    }
                })?,
                // No state file (never written, or removed by hand): the files this
                // placement would have written are the best record of what it owns.
                None => wp
                    .spec
                    .workloads
                    .as_deref()
                    .unwrap_or(&[])
                    .iter()
                    .filter_map(|w| layout::none_file_path(root, &w.filepath).ok())
                    .collect(),
            };
            let mut ops: Vec<WriteOp> = listed
                .into_iter()
                .map(|path| WriteOp::Delete { path })
                .collect();
            ops.push(WriteOp::Delete { path: state_file });
            ops
        }
        FilepathMode::AggregatedYaml => {
            let file = match layout::aggregated_file_path(root, dest.spec.aggregated_filename()) {
                Ok(f) => f,
                Err(_) => return Ok(()),
            };
            let docs = aggregated_documents(state, dest, Some((&ns, &name))).await?;
            match layout::aggregate_documents(&docs) {
                Some(content) => vec![WriteOp::Put {
                    path: file,
                    content,
                }],
                None => vec![WriteOp::Delete { path: file }],
            }
        }
    };
    if ops.is_empty() {
        return Ok(());
    }
    store.write(WriteRequest { name, ops }).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use plinth_api::{DestinationSpec, StateStoreRef, WorkPlacementSpec};

    fn dest(path: &str, mode: &str) -> Destination {
        let mut spec: DestinationSpec = serde_json::from_value(json!({
            "path": path,
            "stateStoreRef": {"kind": "GitStateStore", "name": "default"},
            "filepath": {"mode": mode},
        }))
        .unwrap();
        spec.state_store_ref = StateStoreRef {
            name: "default".into(),
            ..spec.state_store_ref
        };
        Destination::new("worker-1", spec)
    }

    fn wp(resource: Option<&str>, files: &[(&str, &str)]) -> WorkPlacement {
        let mut w = WorkPlacement::new(
            "w.worker-1-5058f",
            WorkPlacementSpec {
                target_destination_name: Some("worker-1".into()),
                workloads: Some(
                    files
                        .iter()
                        .map(|(p, c)| Workload {
                            filepath: p.to_string(),
                            content: plinth_api::work_content::encode(c.as_bytes()),
                            ..Default::default()
                        })
                        .collect(),
                ),
                promise_name: Some("redis".into()),
                resource_name: resource.map(String::from),
                id: Some(plinth_api::constants::DEFAULT_WORKLOAD_GROUP_ID.into()),
                ..Default::default()
            },
        );
        w.metadata.namespace = Some("team-a".into());
        w.metadata.labels =
            Some([(labels::PIPELINE_NAME.to_string(), "configure".to_string())].into());
        w
    }

    #[test]
    fn encode_decode_round_trip() {
        let w = Workload {
            filepath: "a.yaml".into(),
            content: plinth_api::work_content::encode(b"kind: A\n"),
            ..Default::default()
        };
        assert_eq!(decode_workload(&w).unwrap(), b"kind: A\n");
        let bad = Workload {
            filepath: "b.yaml".into(),
            content: "%%%".into(),
            ..Default::default()
        };
        assert!(
            decode_workload(&bad)
                .unwrap_err()
                .to_string()
                .contains("b.yaml")
        );
    }

    #[test]
    fn nested_targets() {
        let t = resolve_target(
            &dest("/worker-1/", "nestedByMetadata"),
            &wp(Some("r1"), &[("x/a.yaml", "a")]),
        )
        .unwrap();
        assert_eq!(
            t,
            Target::Nested {
                dir: "worker-1/resources/team-a/redis/r1/configure/5058f".into(),
                files: vec![("x/a.yaml".into(), b"a".to_vec())]
            }
        );
        let t = resolve_target(
            &dest("worker-1", "nestedByMetadata"),
            &wp(None, &[("a.yaml", "a")]),
        )
        .unwrap();
        assert!(
            matches!(t, Target::Nested { dir, .. } if dir == "worker-1/dependencies/redis/configure/5058f")
        );
    }

    #[test]
    fn flat_and_aggregated_targets() {
        let t =
            resolve_target(&dest("flat", "none"), &wp(Some("r1"), &[("ns.yaml", "n")])).unwrap();
        assert_eq!(
            t,
            Target::Flat {
                files: vec![("flat/ns.yaml".into(), b"n".to_vec())],
                state_file: "flat/.kratix/team-a-w.worker-1-5058f.yaml".into()
            }
        );
        let t = resolve_target(
            &dest("agg", "aggregatedYAML"),
            &wp(Some("r1"), &[("ns.yaml", "n")]),
        )
        .unwrap();
        assert_eq!(
            t,
            Target::Aggregated {
                file: "agg/aggregated.yaml".into()
            }
        );
    }

    #[test]
    fn escaping_paths_are_terminal() {
        for mode in ["nestedByMetadata", "none"] {
            let err = resolve_target(
                &dest("worker-1", mode),
                &wp(Some("r1"), &[("../../etc/passwd", "x")]),
            )
            .unwrap_err();
            assert_eq!(err.reason, REASON_INVALID_WORKLOAD_PATH);
            assert!(err.message.contains("../../etc/passwd"), "{}", err.message);
            let err = resolve_target(
                &dest("worker-1", mode),
                &wp(Some("r1"), &[("/etc/passwd", "x")]),
            )
            .unwrap_err();
            assert_eq!(err.reason, REASON_INVALID_WORKLOAD_PATH);
        }
    }
}
