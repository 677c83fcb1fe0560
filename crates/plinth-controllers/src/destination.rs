//! The Destination controller. Overlapping Destination roots are
//! rejected at apply time by the API server's admission for Kratix kinds.
//!
//! Per reconcile:
//! 1. `cleanup: all` ⇒ finalizer `kratix.io/destination-cleanup`; `none` ⇒ no finalizer.
//! 2. The state store must be open in the registry, else `Ready=False` with
//!    `StateStoreNotFound` ("<Kind>/<name>: not found") when the store object does not
//!    exist or `StateStoreNotReady` ("<Kind>/<name>: not ready"), a Warning
//!    `DestinationNotReady` event, and a requeue after `requeue_default`. State store
//!    status changes re-queue their Destinations (watch), so a store turning Ready is
//!    picked up at once.
//!    The API server's admission keeps the finalizer in step with `spec.cleanup` on
//!    every write, so a deletion right after a change of `cleanup` acts on the new spec.
//! 3. Deleting with the finalizer and `cleanup: all`: delete every WorkPlacement labelled
//!    `kratix.io/targetDestinationName=<name>` (their controller removes their files),
//!    wait until none is left, delete the canary files, release the finalizer.
//! 4. `initWorkloads.enabled: false` ⇒ delete canary files, `Ready=True/DestinationReady`.
//! 5. Else write the canary files for the Destination's `filepath.mode`
//!    ([`plinth_statestore::layout::canary_files`]): failure ⇒
//!    `Ready=False/StateStoreWriteFailed`, success ⇒ `Ready=True/TestDocumentsWritten`
//!    and a `DestinationReady` event. An unchanged tree makes no commit, so a
//!    re-created Destination over existing canary files goes Ready without an empty
//!    commit.
//!
//! Events fire only when the Ready condition changes. The Destination's `spec.path` is
//! normalised by the layout rules (leading/trailing/repeated `/` dropped, `.` and `/`
//! = store root, `..` refused with `Ready=False/InvalidDestinationPath`).

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, DeleteParams, ListParams, PropagationPolicy};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use plinth_api::constants::{condition_types, finalizers, labels, messages, reasons};
use plinth_api::{
    BucketStateStore, Destination, DestinationCleanup, FilepathMode, GitStateStore, StateStoreKind,
    WorkPlacement,
};
use plinth_statestore::layout;
use plinth_statestore::{StateStore, WriteOp, WriteRequest};
use serde_json::json;

use crate::Error;
use crate::context::Context;
use crate::statestore::registry::store_generation;
use crate::support::harness::{Harness, Start};
use crate::support::{
    describe, edit_finalizers, is_not_found, patch_status, publish, set_condition, typed_reference,
};
use crate::triggers::{inputs_hash, watch_inputs};
use plinth_api::events::{EventRecorder, EventType};

const REPORTER: &str = plinth_api::constants::events::DESTINATION_CONTROLLER;

/// The layout crate's mode for a Destination's `filepath.mode`.
pub fn layout_mode(mode: FilepathMode) -> layout::FilepathMode {
    match mode {
        FilepathMode::NestedByMetadata => layout::FilepathMode::NestedByMetadata,
        FilepathMode::AggregatedYaml => layout::FilepathMode::AggregatedYaml,
        FilepathMode::None => layout::FilepathMode::None,
    }
}

struct DestState {
    ctx: Arc<Context>,
    recorder: EventRecorder,
}

impl crate::support::harness::Shared for DestState {
    fn context(&self) -> &Context {
        &self.ctx
    }
}

fn destinations_of_store(
    store: &Store<Destination>,
    kind: StateStoreKind,
    name: &str,
) -> Vec<ObjectRef<Destination>> {
    store
        .state()
        .into_iter()
        .filter(|d| d.spec.state_store_ref.kind == kind && d.spec.state_store_ref.name == name)
        .map(|d| ObjectRef::from_obj(d.as_ref()))
        .collect()
}

/// Runs the Destination controller until the process stops.
///
/// Watches Destinations, GitStateStores and BucketStateStores (mapped to the
/// Destinations referencing them) and WorkPlacements (mapped to their target
/// Destination, so a `cleanup: all` deletion proceeds as soon as the last placement is
/// gone). Needs `ctx.client`, `ctx.stores` and, from `ctx.config()`, `requeue_short`,
/// `requeue_default` and `state_store_reconciliation_interval` (canary re-check).
pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    // Spec changes and deletion only: the controller's own status writes do not wake it.
    let (store, trigger) = watch_inputs(Api::<Destination>::all(client.clone()), |d| {
        inputs_hash(d, ())
    });
    let controller = Controller::for_stream(trigger, store.clone());
    let (s1, s2, s3) = (store.clone(), store.clone(), store);
    let state = Arc::new(DestState {
        recorder: ctx.recorder(REPORTER),
        ctx,
    });
    controller
        .watches(
            Api::<GitStateStore>::all(client.clone()),
            watcher::Config::default(),
            move |s: GitStateStore| {
                destinations_of_store(&s1, StateStoreKind::GitStateStore, &s.name_any())
            },
        )
        .watches(
            Api::<BucketStateStore>::all(client.clone()),
            watcher::Config::default(),
            move |s: BucketStateStore| {
                destinations_of_store(&s2, StateStoreKind::BucketStateStore, &s.name_any())
            },
        )
        .watches(
            Api::<WorkPlacement>::all(client),
            watcher::Config::default(),
            move |wp: WorkPlacement| {
                let target = wp.spec.target_destination_name.clone().unwrap_or_default();
                // Only Destinations waiting for their placements to go care about them.
                s3.state()
                    .into_iter()
                    .filter(|d| d.name_any() == target && d.meta().deletion_timestamp.is_some())
                    .map(|d| ObjectRef::from_obj(d.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        .start(Harness::new("destination"), reconcile, state)
        .await;
}

fn conditions_of(d: &Destination) -> Vec<Condition> {
    d.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
}

/// Sets the Ready condition; publishes the event when it changed.
async fn set_ready(
    state: &DestState,
    dest: &Destination,
    ready: bool,
    reason: &str,
    message: &str,
    event: Option<(EventType, &str, String)>,
) -> Result<(), Error> {
    let api: Api<Destination> = Api::all(state.ctx.client.clone());
    let mut changed = false;
    patch_status(&api, &dest.name_any(), |cur: &Destination| {
        let mut conds = conditions_of(cur);
        changed = set_condition(
            &mut conds,
            condition_types::READY,
            ready,
            reason,
            message,
            cur.meta().generation,
        );
        changed.then(|| json!({"conditions": conds}))
    })
    .await
    .map_err(|e| Error::kube("writing status of", describe(dest), e))?;
    if changed && let Some((t, r, note)) = event {
        publish(&state.recorder, &typed_reference(dest), t, r, note).await;
    }
    Ok(())
}

fn canary_delete_ops(dest: &Destination) -> Vec<WriteOp> {
    layout::canary_files(&dest.spec.path, layout_mode(dest.spec.filepath_mode()))
        .map(|files| {
            files
                .into_iter()
                .map(|(path, _)| WriteOp::Delete { path })
                .collect()
        })
        .unwrap_or_default()
}

/// A Warning `DestinationNotReady` carrying `msg`.
fn not_ready_event(msg: &str) -> Option<(EventType, &'static str, String)> {
    Some((
        EventType::Warning,
        plinth_api::constants::events::DESTINATION_NOT_READY,
        msg.to_string(),
    ))
}

/// A Normal `DestinationReady`.
fn ready_event() -> Option<(EventType, &'static str, String)> {
    Some((
        EventType::Normal,
        plinth_api::constants::events::DESTINATION_READY,
        "Destination is Ready".into(),
    ))
}

/// A Destination as one reconcile sees it.
struct Reconciling<'a> {
    dest: &'a Destination,
    name: String,
    /// `Destination <name>`, for errors.
    what: String,
    api: Api<Destination>,
    /// `<Kind>/<name>` of its state store.
    store_key: String,
}

impl Reconciling<'_> {
    fn has_finalizer(&self) -> bool {
        self.dest
            .finalizers()
            .iter()
            .any(|f| f == finalizers::DESTINATION_CLEANUP)
    }
}

/// One reconcile, a failure of it reported on the Destination ([`crate::support::outcome`]).
async fn reconcile(dest: Arc<Destination>, state: Arc<DestState>) -> Result<Action, Error> {
    let result = reconcile_steps(dest.clone(), state.clone()).await;
    crate::support::outcome::report_typed(&state.ctx, REPORTER, dest.as_ref(), result).await
}

/// Deletion, or the numbered steps of the module docs.
async fn reconcile_steps(dest: Arc<Destination>, state: Arc<DestState>) -> Result<Action, Error> {
    let sref = &dest.spec.state_store_ref;
    let d = Reconciling {
        dest: &dest,
        name: dest.name_any(),
        what: describe(dest.as_ref()),
        api: Api::all(state.ctx.client.clone()),
        store_key: format!("{}/{}", sref.kind.as_str(), sref.name),
    };
    if dest.meta().deletion_timestamp.is_some() {
        return delete(&state, &d).await;
    }
    ensure_finalizer(&state, &d).await?;
    if let Err(e) = layout::normalize_path(&dest.spec.path) {
        let msg = format!("spec.path: {e}");
        set_ready(
            &state,
            &dest,
            false,
            "InvalidDestinationPath",
            &msg,
            not_ready_event(&msg),
        )
        .await?;
        return Ok(Action::await_change());
    }
    let Some(store) = open_store(&state, &d).await? else {
        return Ok(Action::requeue(state.ctx.config().requeue_default));
    };
    if dest.spec.init_workloads_enabled() {
        write_canaries(&state, &d, &store).await
    } else {
        remove_canaries(&state, &d, &store).await
    }
}

/// The wait until the periodic re-check (or for a change, with the interval zero).
fn recheck(state: &DestState) -> Action {
    let interval = state.ctx.config().state_store_reconciliation_interval;
    if interval.is_zero() {
        Action::await_change()
    } else {
        Action::requeue(interval)
    }
}

/// Deletion with the finalizer: deletes the Destination's WorkPlacements, waits
/// (`requeue_short`) until none is left, deletes the canary files, releases the
/// finalizer.
async fn delete(state: &DestState, d: &Reconciling<'_>) -> Result<Action, Error> {
    if !d.has_finalizer() {
        return Ok(Action::await_change());
    }
    // The spec the Destination had when it was deleted decides, not the finalizer: one
    // left from an earlier `cleanup: all` (where no admission keeps them in step, as in
    // cluster mode without webhooks) must not delete the workloads of a `cleanup: none`.
    if d.dest.spec.cleanup_policy() != DestinationCleanup::All {
        edit_finalizers(&d.api, &d.name, &[], &[finalizers::DESTINATION_CLEANUP])
            .await
            .map_err(|e| Error::kube("removing finalizer from", &d.what, e))?;
        return Ok(Action::await_change());
    }
    if delete_placements(state, d).await? > 0 {
        return Ok(Action::requeue(state.ctx.config().requeue_short));
    }
    let sref = &d.dest.spec.state_store_ref;
    let generation = store_generation(&state.ctx.client, sref.kind, &sref.name)
        .await
        .map_err(|e| Error::kube("reading the state store of", &d.what, e))?;
    let current = generation.and_then(|g| {
        state
            .ctx
            .stores
            .get_current(sref.kind.as_str(), &sref.name, g)
    });
    match current {
        Some(store) => {
            let ops = canary_delete_ops(d.dest);
            if !ops.is_empty()
                && let Err(e) = store
                    .write(WriteRequest {
                        name: layout::CANARY_WRITER_NAME.into(),
                        ops,
                    })
                    .await
            {
                return Err(Error::Store {
                    store: d.store_key.clone(),
                    message: format!("deleting canary files: {e}"),
                });
            }
        }
        None => {
            // A store that no longer exists has nothing left to clean; one that is
            // merely not ready yet (or not yet opened from its current spec) is waited for.
            if generation.is_some() {
                return Ok(Action::requeue(state.ctx.config().requeue_default));
            }
        }
    }
    edit_finalizers(&d.api, &d.name, &[], &[finalizers::DESTINATION_CLEANUP])
        .await
        .map_err(|e| Error::kube("removing finalizer from", &d.what, e))?;
    Ok(Action::await_change())
}

/// Deletes the WorkPlacements targeting the Destination (their controller removes
/// their files); returns how many still exist.
async fn delete_placements(state: &DestState, d: &Reconciling<'_>) -> Result<usize, Error> {
    let wps: Api<WorkPlacement> = Api::all(state.ctx.client.clone());
    let lp =
        ListParams::default().labels(&format!("{}={}", labels::TARGET_DESTINATION_NAME, d.name));
    let remaining = wps
        .list(&lp)
        .await
        .map_err(|e| Error::kube("listing WorkPlacements of", &d.what, e))?
        .items;
    for wp in remaining
        .iter()
        .filter(|wp| wp.meta().deletion_timestamp.is_none())
    {
        let ns_api: Api<WorkPlacement> = Api::namespaced(
            state.ctx.client.clone(),
            &wp.namespace().unwrap_or_default(),
        );
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..Default::default()
        };
        if let Err(e) = ns_api.delete(&wp.name_any(), &dp).await
            && !is_not_found(&e)
        {
            return Err(Error::kube("deleting WorkPlacement of", &d.what, e));
        }
    }
    Ok(remaining.len())
}

/// `cleanup: all` wants the finalizer, `none` does not; a failed edit is reported as
/// `Ready=False/DestinationFinalizerUpdateFailed`.
async fn ensure_finalizer(state: &DestState, d: &Reconciling<'_>) -> Result<(), Error> {
    let want = d.dest.spec.cleanup_policy() == DestinationCleanup::All;
    if want == d.has_finalizer() {
        return Ok(());
    }
    let (add, remove): (&[&str], &[&str]) = if want {
        (&[finalizers::DESTINATION_CLEANUP], &[])
    } else {
        (&[], &[finalizers::DESTINATION_CLEANUP])
    };
    let Err(e) = edit_finalizers(&d.api, &d.name, add, remove).await else {
        return Ok(());
    };
    let msg = format!("failed to update finalizers: {e}");
    set_ready(
        state,
        d.dest,
        false,
        "DestinationFinalizerUpdateFailed",
        &msg,
        None,
    )
    .await?;
    Err(Error::kube("updating finalizers of", &d.what, e))
}

/// The Destination's open state store; `None` (after reporting `StateStoreNotReady`
/// or `StateStoreNotFound`) when there is none to write to.
async fn open_store(state: &DestState, d: &Reconciling<'_>) -> Result<Option<StateStore>, Error> {
    let sref = &d.dest.spec.state_store_ref;
    // The store object is read even when a writer is registered: a deleted store's
    // writer may not have been dropped yet when its deletion event reaches us, and one
    // opened from an older spec must not be written through.
    let generation = store_generation(&state.ctx.client, sref.kind, &sref.name)
        .await
        .map_err(|e| Error::kube("reading the state store of", &d.what, e))?;
    let exists = generation.is_some();
    if let Some(g) = generation {
        let kind = sref.kind.as_str();
        if let Some(store) = state.ctx.stores.get_current(kind, &sref.name, g) {
            return Ok(Some(store));
        }
        if state.ctx.stores.get(kind, &sref.name).is_some() {
            // Opened from an older spec: its controller is opening this one, and its
            // status write wakes this Destination. Nothing changed for the Destination.
            return Ok(None);
        }
    }
    // A store that exists but has no writer yet is usually one whose controller has
    // not reconciled it (every fresh start): the store's own conditions and events
    // carry any real fault, so waiting for it is no warning of the Destination's.
    let (reason, msg, event) = if exists {
        let msg = format!("{}: not ready", d.store_key);
        ("StateStoreNotReady", msg, None)
    } else {
        let msg = format!("{}: not found", d.store_key);
        let event = not_ready_event(&msg);
        ("StateStoreNotFound", msg, event)
    };
    set_ready(state, d.dest, false, reason, &msg, event).await?;
    Ok(None)
}

/// `initWorkloads.enabled: false`: deletes the canary files, `Ready=True/DestinationReady`.
async fn remove_canaries(
    state: &DestState,
    d: &Reconciling<'_>,
    store: &StateStore,
) -> Result<Action, Error> {
    let ops = canary_delete_ops(d.dest);
    let failure = "Failed to delete test documents from State Store";
    if let Some(requeue) = write_canary_ops(state, d, store, ops, failure).await? {
        return Ok(requeue);
    }
    let (reason, msg) = (reasons::DESTINATION_READY, messages::DESTINATION_READY);
    set_ready(state, d.dest, true, reason, msg, ready_event()).await?;
    Ok(recheck(state))
}

/// Writes the canary files of the Destination's `filepath.mode`:
/// `Ready=True/TestDocumentsWritten`, or `Ready=False/StateStoreWriteFailed`.
async fn write_canaries(
    state: &DestState,
    d: &Reconciling<'_>,
    store: &StateStore,
) -> Result<Action, Error> {
    let files = layout::canary_files(&d.dest.spec.path, layout_mode(d.dest.spec.filepath_mode()))
        .map_err(|e| Error::Invalid {
        object: d.what.clone(),
        message: format!("spec.path: {e}"),
    })?;
    let ops = files
        .into_iter()
        .map(|(path, content)| WriteOp::Put { path, content })
        .collect();
    let failure = "Failed to write test documents to State Store";
    if let Some(requeue) = write_canary_ops(state, d, store, ops, failure).await? {
        return Ok(requeue);
    }
    let (reason, msg) = (
        reasons::TEST_DOCUMENTS_WRITTEN,
        messages::TEST_DOCUMENTS_WRITTEN,
    );
    set_ready(state, d.dest, true, reason, msg, ready_event()).await?;
    Ok(recheck(state))
}

/// Sends the canary writes as one request. On failure sets
/// `Ready=False/StateStoreWriteFailed` ("<failure>: <cause>") and returns the requeue.
async fn write_canary_ops(
    state: &DestState,
    d: &Reconciling<'_>,
    store: &StateStore,
    ops: Vec<WriteOp>,
    failure: &str,
) -> Result<Option<Action>, Error> {
    let request = WriteRequest {
        name: layout::CANARY_WRITER_NAME.into(),
        ops,
    };
    let Err(e) = store.write(request).await else {
        return Ok(None);
    };
    let msg = format!("{failure}: {e}");
    let reason = reasons::STATE_STORE_WRITE_FAILED;
    set_ready(state, d.dest, false, reason, &msg, not_ready_event(&msg)).await?;
    Ok(Some(Action::requeue(state.ctx.config().requeue_default)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest(name: &str, kind: &str, store: &str, path: &str) -> Destination {
        let spec = serde_json::from_value(json!({
            "path": path,
            "stateStoreRef": {"kind": kind, "name": store},
        }))
        .unwrap();
        Destination::new(name, spec)
    }

    #[test]
    fn canary_paths_follow_the_mode() {
        let mut d = dest("worker-1", "GitStateStore", "s", "worker-1");
        let ops = canary_delete_ops(&d);
        assert_eq!(
            ops,
            vec![
                WriteOp::Delete {
                    path: "worker-1/dependencies/kratix-canary-namespace.yaml".into()
                },
                WriteOp::Delete {
                    path: "worker-1/resources/kratix-canary-configmap.yaml".into()
                },
            ]
        );
        d.spec.filepath = Some(serde_json::from_value(json!({"mode": "none"})).unwrap());
        assert_eq!(
            canary_delete_ops(&d)[0],
            WriteOp::Delete {
                path: "worker-1/kratix-canary-namespace.yaml".into()
            }
        );
    }
}
