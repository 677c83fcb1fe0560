//! One poll of a HealthSource: list with change detection, read and check the changed
//! objects, apply the good ones, remove the records whose objects are gone.
//!
//! What is remembered between polls (in memory; after a restart the first poll reads
//! everything once and writes only what differs from the platform):
//! the listing version, each key's object version when it was last handled, the key →
//! record map of applied records, and the rejected keys with their reason — so a bad
//! object is evented and logged once, not on every poll. Rejections that can clear
//! without a change in the store (a request that does not exist yet, a record another
//! manager owns) are re-checked every poll, and evented again only if the reason changes.
//! The rejections always describe the objects in the store now: a key that is gone is
//! dropped with its rejection. An object whose request was deleted after its record was
//! applied is not a rejection: it is skipped quietly (a debug log) until the Destination
//! removes it, and applied again if the request comes back.
//!
//! An object is rejected alone, never the poll: a malformed or oversized one
//! ([`super::validate::MAX_RECORD_BYTES`]) and one the API refuses (400, 413, 422) are
//! evented and listed like any other rejection; only transport and server failures fail
//! the poll.

use std::collections::{BTreeSet, HashMap, HashSet};

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use plinth_api::constants::health as names;
use plinth_api::{HealthRecord, HealthSource};
use plinth_statestore::{ListedObject, Listing, RecordReader};

use super::state::{BRANCH_ABSENT_NOTE, PollOutcome, Rejected, SourceCtx, SourceState, owner_of};
use crate::health::target::{Target, request_resource};
use crate::health::validate::{Rejection, check_last_run, parse_record};

pub(crate) enum Handled {
    Applied(String, String),
    Unchanged(String, String),
}

/// What a poll found of a record's request.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RequestState {
    Live,
    Deleting,
    Missing,
}

/// Per-poll (per stream batch) caches of API lookups.
#[derive(Default)]
pub(crate) struct Lookups {
    promises: HashMap<String, Option<ApiResource>>,
    requests: HashMap<Target, RequestState>,
    /// target → names of the sources whose records reference it.
    claims: Option<HashMap<Target, BTreeSet<String>>>,
}

/// Why a poll, or one message of a stream, failed as a whole. A bad object never does:
/// it is a [`Rejection`]. The messages are fit for the HealthSource's `Ready` condition.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PollError {
    /// The store could not be listed or read, or the stream failed.
    #[error("{0}")]
    Store(#[from] plinth_statestore::StoreError),
    /// The branch that held records is gone: more likely removed by mistake than meant to
    /// drop every record, so they are kept.
    #[error(
        "the branch no longer exists; the {kept} records read from it are kept until it is \
         back or this HealthSource is deleted"
    )]
    BranchGone {
        /// How many records were read from it.
        kept: usize,
    },
    /// Looking up a record's Promise or request failed, or the status write did.
    #[error("{0}")]
    Controller(#[from] crate::Error),
    /// The API failed `action` (e.g. `applying HealthRecord ns/name`).
    #[error("{action}: {source}")]
    Api {
        /// What was being done to which record.
        action: String,
        /// The client's error.
        source: kube::Error,
    },
    /// Handling the object or message at `key` failed.
    #[error("{key}: {source}")]
    Object {
        /// The object's key in the store, or the message's record key.
        key: String,
        /// Why.
        source: Box<PollError>,
    },
}

impl PollError {
    /// The failure `source` of handling `key`.
    pub(crate) fn at(key: &str, source: PollError) -> PollError {
        PollError::Object {
            key: key.to_string(),
            source: Box::new(source),
        }
    }
}

/// Runs one poll. Transport errors fail the poll (`Err` with the cause); bad objects
/// never do.
pub(crate) async fn poll(
    s: &SourceCtx,
    hs: &HealthSource,
    state: &mut SourceState,
    reader: &dyn RecordReader,
) -> Result<PollOutcome, PollError> {
    let mut out = PollOutcome {
        target: reader.describe(),
        ..Default::default()
    };
    let since = state.listing_version.clone();
    match reader.list(since.as_deref()).await? {
        Listing::Unchanged => {}
        Listing::Changed { version, objects } => {
            state.listing_version = Some(version);
            state.objects = objects;
            out.changed = true;
        }
        // Never read anything there: nothing written yet, an empty store (the message
        // says so, so a misspelt branch is visible).
        Listing::Absent if state.objects.is_empty() => {
            out.note = Some(BRANCH_ABSENT_NOTE);
        }
        // It held records: more likely removed by mistake than meant to drop every
        // record, so nothing is removed and the source reports it.
        Listing::Absent => {
            return Err(PollError::BranchGone {
                kept: state.applied.len(),
            });
        }
    }
    let todo = work_list(s, state);
    out.changed |= !todo.is_empty();
    let mut lookups = Lookups::default();
    for obj in &todo {
        let known = state.applied.contains_key(&obj.key) || state.orphaned.contains(&obj.key);
        let result = handle(s, hs, reader, obj, known, &mut lookups)
            .await
            .map_err(|e| PollError::at(&obj.key, e))?;
        out.reads += 1;
        state.seen.insert(obj.key.clone(), obj.version.clone());
        record_result(state, &mut out, &obj.key, result);
    }
    let handled: HashSet<&str> = todo.iter().map(|o| o.key.as_str()).collect();
    out.unchanged += state
        .applied
        .keys()
        .filter(|k| !handled.contains(k.as_str()))
        .count();
    out.removed = remove_gone(s, hs, state).await?;
    Ok(out)
}

/// The objects to (re)read: changed version, retryable rejection, or applied record
/// missing from the platform.
fn work_list(s: &SourceCtx, state: &SourceState) -> Vec<ListedObject> {
    state
        .objects
        .iter()
        .filter(|o| {
            if state.seen.get(&o.key) != Some(&o.version) {
                return true;
            }
            if state.rejected.get(&o.key).is_some_and(|r| r.retry)
                || state.orphaned.contains(&o.key)
            {
                return true;
            }
            state
                .applied
                .get(&o.key)
                .is_some_and(|(ns, name)| s.records.get(&ObjectRef::new(name).within(ns)).is_none())
        })
        .cloned()
        .collect()
}

/// Remembers what handling the object at `key` gave and counts it in `out`.
pub(crate) fn record_result(
    state: &mut SourceState,
    out: &mut PollOutcome,
    key: &str,
    result: Result<Handled, Rejection>,
) {
    let key = key.to_string();
    match result {
        Ok(Handled::Applied(ns, name)) => {
            out.applied += 1;
            state.applied.insert(key.clone(), (ns, name));
            state.rejected.remove(&key);
            state.orphaned.remove(&key);
        }
        Ok(Handled::Unchanged(ns, name)) => {
            out.unchanged += 1;
            state.applied.insert(key.clone(), (ns, name));
            state.rejected.remove(&key);
            state.orphaned.remove(&key);
        }
        Err(Rejection::Orphaned(why)) => {
            // The request's deletion removed the record; the object is the Destination's
            // to remove. Nothing to report.
            if state.orphaned.insert(key.clone()) {
                tracing::debug!(key = %key, reason = %why, "health record skipped: its request was deleted");
            }
            state.applied.remove(&key);
            state.rejected.remove(&key);
        }
        Err(rej) => {
            state.orphaned.remove(&key);
            let known = state
                .rejected
                .get(&key)
                .is_some_and(|r| r.reason == rej.reason());
            if !known {
                out.new_rejections.push((
                    key.clone(),
                    rej.reason().to_string(),
                    matches!(rej, Rejection::Conflict(_)),
                ));
            }
            state.rejected.insert(
                key.clone(),
                Rejected {
                    reason: rej.reason().to_string(),
                    retry: rej.retryable(),
                },
            );
        }
    }
}

/// Reads, checks and applies one object; `known`: its record was applied before. `Err`
/// only for transport and server failures.
async fn handle(
    s: &SourceCtx,
    hs: &HealthSource,
    reader: &dyn RecordReader,
    obj: &ListedObject,
    known: bool,
    lookups: &mut Lookups,
) -> Result<Result<Handled, Rejection>, PollError> {
    let Some(bytes) = reader.get(&obj.key).await? else {
        return Ok(Err(Rejection::Invalid(
            "disappeared while being read".into(),
        )));
    };
    handle_document(s, hs, &obj.key, &bytes, known, lookups).await
}

/// Checks and applies one record document read from `key` (an object of a polled store,
/// a message of a stream); `known`: its record was applied before. `Err` only for
/// transport and server failures.
pub(crate) async fn handle_document(
    s: &SourceCtx,
    hs: &HealthSource,
    key: &str,
    bytes: &[u8],
    known: bool,
    lookups: &mut Lookups,
) -> Result<Result<Handled, Rejection>, PollError> {
    let rec = match parse_record(bytes) {
        Ok(r) => r,
        Err(rej) => return Ok(Err(rej)),
    };
    if let Err(rej) = check_last_run(&rec, s.clock.now()) {
        return Ok(Err(rej));
    }
    if let Some(rej) = check_refs(s, &rec, known, lookups).await? {
        return Ok(Err(rej));
    }
    if let Some(rej) = check_ownership(s, hs, &rec, lookups) {
        return Ok(Err(rej));
    }
    apply(s, hs, rec, key).await
}

/// The Promise and the request must exist (and the request not be going away). A request
/// that is going, or gone after its record was applied (`known`), orphans the object.
async fn check_refs(
    s: &SourceCtx,
    rec: &HealthRecord,
    known: bool,
    lookups: &mut Lookups,
) -> Result<Option<Rejection>, crate::Error> {
    let target = Target::of(rec);
    if !lookups.promises.contains_key(&target.promise) {
        let ar = request_resource(&s.ctx, &target.promise).await?;
        lookups.promises.insert(target.promise.clone(), ar);
    }
    let Some(ar) = lookups.promises[&target.promise].clone() else {
        return Ok(Some(Rejection::Dangling(format!(
            "data.promiseRef: Promise {:?} not found (or it has no API)",
            target.promise
        ))));
    };
    if !lookups.requests.contains_key(&target) {
        let api: Api<DynamicObject> =
            Api::namespaced_with(s.ctx.client.clone(), &target.namespace, &ar);
        let found = match api.get_opt(&target.name).await? {
            None => RequestState::Missing,
            Some(r) if r.meta().deletion_timestamp.is_some() => RequestState::Deleting,
            Some(_) => RequestState::Live,
        };
        lookups.requests.insert(target.clone(), found);
    }
    let what = format!("{} {}/{}", ar.kind, target.namespace, target.name);
    Ok(match lookups.requests[&target] {
        RequestState::Live => None,
        RequestState::Deleting => Some(Rejection::Orphaned(format!("{what} is being deleted"))),
        RequestState::Missing if known => Some(Rejection::Orphaned(format!("{what} was deleted"))),
        RequestState::Missing => Some(Rejection::Dangling(format!(
            "data.resourceRef: {what} not found"
        ))),
    })
}

/// Another manager's record, another source's request, or an older `lastRun`.
fn check_ownership(
    s: &SourceCtx,
    hs: &HealthSource,
    rec: &HealthRecord,
    lookups: &mut Lookups,
) -> Option<Rejection> {
    let mine = hs.name_any();
    let (ns, name) = (rec.namespace().unwrap_or_default(), rec.name_any());
    if let Some(ex) = s.records.get(&ObjectRef::new(&name).within(&ns)) {
        match ex.labels().get(names::SOURCE_LABEL) {
            Some(o) if *o == mine => {}
            Some(o) => {
                return Some(Rejection::Claimed(format!(
                    "HealthRecord {ns}/{name} is applied by HealthSource {o}"
                )));
            }
            None => {
                let manager = ex
                    .meta()
                    .managed_fields
                    .iter()
                    .flatten()
                    .filter_map(|m| m.manager.clone())
                    .next()
                    .unwrap_or_else(|| "unknown".into());
                return Some(Rejection::Conflict(format!(
                    "HealthRecord {ns}/{name} is managed by another manager ({manager}); one mechanism per set of records"
                )));
            }
        }
        if let (Some(new), Some(old)) = (rec.spec.data.last_run, ex.spec.data.last_run)
            && new < old
        {
            return Some(Rejection::Stale(format!(
                "data.lastRun {new} is older than the applied {old}"
            )));
        }
    }
    let claims = lookups.claims.get_or_insert_with(|| claims_of(s));
    let target = Target::of(rec);
    let others: Vec<&String> = claims
        .get(&target)
        .into_iter()
        .flatten()
        .filter(|o| **o != mine)
        .collect();
    others.first().map(|o| {
        Rejection::Claimed(format!(
            "request {}/{} of Promise {} is claimed by HealthSource {o}",
            target.namespace, target.name, target.promise
        ))
    })
}

fn claims_of(s: &SourceCtx) -> HashMap<Target, BTreeSet<String>> {
    let mut out: HashMap<Target, BTreeSet<String>> = HashMap::new();
    for r in s.records.state() {
        if let Some(src) = r.labels().get(names::SOURCE_LABEL) {
            out.entry(Target::of(&r)).or_default().insert(src.clone());
        }
    }
    out
}

/// Creates or replaces the record unless the platform already holds exactly it. The API
/// refusing this record (a bad request, too large, invalid) rejects it alone; other
/// failures are `Err`.
async fn apply(
    s: &SourceCtx,
    hs: &HealthSource,
    rec: HealthRecord,
    key: &str,
) -> Result<Result<Handled, Rejection>, PollError> {
    match write_record(s, hs, rec, key).await {
        Ok(Written::Done(h)) => Ok(Ok(h)),
        Ok(Written::Older(why)) => Ok(Err(Rejection::Stale(why))),
        Err((what, kube::Error::Api(e))) if matches!(e.code, 400 | 413 | 422) => {
            Ok(Err(Rejection::Invalid(format!(
                "{what} refused by the API ({}): {}",
                e.code, e.message
            ))))
        }
        Err((action, source)) => Err(PollError::Api { action, source }),
    }
}

enum Written {
    Done(Handled),
    /// The platform's copy (read from the API, newer than the cache) has a newer `lastRun`.
    Older(String),
}

async fn write_record(
    s: &SourceCtx,
    hs: &HealthSource,
    rec: HealthRecord,
    key: &str,
) -> Result<Written, (String, kube::Error)> {
    let (ns, name) = (rec.namespace().unwrap_or_default(), rec.name_any());
    let desired = desired_record(hs, rec, key);
    let existing = s.records.get(&ObjectRef::new(&name).within(&ns));
    if let Some(ex) = &existing
        && same_record(ex, &desired)
    {
        return Ok(Written::Done(Handled::Unchanged(ns, name)));
    }
    let api: Api<HealthRecord> = Api::namespaced(s.ctx.client.clone(), &ns);
    let err = |e: kube::Error| (format!("applying HealthRecord {ns}/{name}"), e);
    match api.get_opt(&name).await.map_err(err)? {
        None => {
            api.create(&PostParams::default(), &desired)
                .await
                .map_err(err)?;
        }
        Some(cur) => {
            if same_record(&cur, &desired) {
                return Ok(Written::Done(Handled::Unchanged(ns, name)));
            }
            // The cache may lag behind a write of this source (or of another replica
            // consuming the same stream): the API's copy decides.
            if let (Some(new), Some(old)) = (desired.spec.data.last_run, cur.spec.data.last_run)
                && new < old
                && cur.labels().get(names::SOURCE_LABEL) == Some(&hs.name_any())
            {
                return Ok(Written::Older(format!(
                    "data.lastRun {new} is older than the applied {old}"
                )));
            }
            let mut next = desired;
            next.metadata.resource_version = cur.metadata.resource_version.clone();
            next.metadata.finalizers = cur.metadata.finalizers.clone();
            api.replace(&name, &PostParams::default(), &next)
                .await
                .map_err(err)?;
        }
    }
    Ok(Written::Done(Handled::Applied(ns, name)))
}

fn desired_record(hs: &HealthSource, mut rec: HealthRecord, key: &str) -> HealthRecord {
    let m = &mut rec.metadata;
    m.labels
        .get_or_insert_with(Default::default)
        .insert(names::SOURCE_LABEL.into(), hs.name_any());
    // The HealthRecord controller sets the same label; writing it here keeps the two
    // from undoing each other's writes.
    let request = Target::of(&rec).label_value();
    let m = &mut rec.metadata;
    m.labels
        .get_or_insert_with(Default::default)
        .insert(names::REQUEST_LABEL.into(), request);
    m.annotations
        .get_or_insert_with(Default::default)
        .insert(names::SOURCE_KEY_ANNOTATION.into(), key.into());
    m.owner_references = Some(vec![
        serde_json::from_value(owner_of(hs)).expect("owner reference"),
    ]);
    m.resource_version = None;
    m.uid = None;
    m.finalizers = None;
    m.managed_fields = None;
    m.creation_timestamp = None;
    m.generation = None;
    rec
}

fn same_record(ex: &HealthRecord, desired: &HealthRecord) -> bool {
    let (a, b) = (&ex.metadata, &desired.metadata);
    ex.spec.data == desired.spec.data
        && a.labels == b.labels
        && a.annotations == b.annotations
        && a.owner_references == b.owner_references
}

/// Removes the records whose objects are gone from the store; forgets gone keys.
async fn remove_gone(
    s: &SourceCtx,
    hs: &HealthSource,
    state: &mut SourceState,
) -> Result<usize, PollError> {
    let present: HashSet<String> = state.objects.iter().map(|o| o.key.clone()).collect();
    state.seen.retain(|k, _| present.contains(k));
    state.rejected.retain(|k, _| present.contains(k));
    state.orphaned.retain(|k| present.contains(k));
    let gone: Vec<(String, (String, String))> = state
        .applied
        .iter()
        .filter(|(k, _)| !present.contains(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (key, (ns, name)) in &gone {
        delete_record(s, hs, ns, name).await?;
        state.applied.remove(key);
    }
    Ok(gone.len())
}

/// Deletes HealthRecord `ns/name` if this source applied it; `Ok(true)` when it did.
pub(crate) async fn delete_record(
    s: &SourceCtx,
    hs: &HealthSource,
    ns: &str,
    name: &str,
) -> Result<bool, PollError> {
    let mine = hs.name_any();
    let ours = s
        .records
        .get(&ObjectRef::new(name).within(ns))
        .is_some_and(|r| r.labels().get(names::SOURCE_LABEL) == Some(&mine));
    if !ours {
        return Ok(false);
    }
    let api: Api<HealthRecord> = Api::namespaced(s.ctx.client.clone(), ns);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(true),
        Err(ref e) if crate::support::is_not_found(e) => Ok(false),
        Err(source) => Err(PollError::Api {
            action: format!("removing HealthRecord {ns}/{name}"),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::target::Target;

    #[test]
    fn the_source_copy_carries_the_request_label_the_controller_sets() {
        let hs: HealthSource = serde_json::from_value(serde_json::json!({
            "apiVersion": "platform.syntasso.io/v1alpha1", "kind": "HealthSource",
            "metadata": {"name": "worker-1", "uid": "u1"},
            "spec": {"bucket": {"endpoint": "s3.example.test", "bucketName": "health",
                     "authMethod": "accessKey", "secretRef": {"name": "reader"}},
                     "path": "health", "pollInterval": "10m"},
        }))
        .unwrap();
        let rec: HealthRecord = serde_json::from_value(serde_json::json!({
            "apiVersion": "platform.kratix.io/v1alpha1", "kind": "HealthRecord",
            "metadata": {"name": "a-1", "namespace": "default"},
            "data": {"promiseRef": {"name": "p"}, "resourceRef": {"name": "a"},
                     "state": "healthy", "lastRun": 1},
        }))
        .unwrap();
        let desired = desired_record(&hs, rec.clone(), "a-1.yaml");
        // The platform's copy after the HealthRecord controller labelled it.
        let mut on_platform = desired.clone();
        on_platform
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(names::REQUEST_LABEL.into(), Target::of(&rec).label_value());
        assert!(
            same_record(&on_platform, &desired),
            "the source would rewrite the record and drop the label"
        );
    }
}
