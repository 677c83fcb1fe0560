//! The HealthRecord controller (Kratix's, with its collisions fixed).
//!
//! Per record event:
//! 1. A record being deleted: rebuild its request's health without it, then release the
//!    finalizer `kratix.io/health-record-cleanup` — also when the Promise or the request
//!    is already gone (nothing to rebuild then).
//! 2. Otherwise add the finalizer and rebuild the request's health.
//!
//! Rebuilding reads the records of **that** request only (`resourceRef` name and
//! namespace — defaulting to the record's namespace — and `promiseRef.name`) from the
//! controller's cache, writes `status.healthStatus` (worst state first) and, when the
//! overall state changed, appends to `status.healthHistory` and publishes a
//! `HealthRecord` Event on the request (Normal for healthy/ready, else Warning). Nothing
//! is written when nothing changed. Deleting a request deletes its records
//! ([`delete_records_of`]).
//!
//! A record whose writer said when its next write is due ([`freshness`]) and that is
//! overdue counts as `unknown`, with the reason in its entry and in the Event; the
//! reconcile comes back when the earliest fresh record of the request would go stale.

use std::sync::Arc;

use futures::TryStreamExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use plinth_api::constants::{finalizers, health as names};
use plinth_api::{HealthRecord, HealthState};
use serde_json::Value;

use super::aggregate::{
    StaleRecords, deciding_source, health_status, is_up, parse_state, stale_reason, state_name,
};
use super::clock::Clock;
use super::freshness::{self, Freshness, Verdict};
use super::history::HealthHistory;
use super::index::RecordIndex;
use super::target::{Target, request_resource};
use crate::Error;
use crate::context::Context;
use crate::support::harness::{Harness, Start};
use crate::support::{self, edit_finalizers};

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.promise, self.namespace, self.name)
    }
}

struct RecordCtx {
    ctx: Arc<Context>,
    clock: Arc<dyn Clock>,
    store: Store<HealthRecord>,
    index: Arc<RecordIndex>,
}

impl crate::support::harness::Shared for RecordCtx {
    fn context(&self) -> &Context {
        &self.ctx
    }
}

/// Runs the HealthRecord controller until the process stops.
pub async fn run(ctx: Arc<Context>, clock: Arc<dyn Clock>) {
    let api: Api<HealthRecord> = Api::all(ctx.client.clone());
    let (store, writer) = reflector::store();
    let index = Arc::new(RecordIndex::default());
    let feed = index.clone();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .inspect_ok(move |ev| feed.observe(ev))
        .touched_objects();
    let rc = Arc::new(RecordCtx {
        ctx,
        clock,
        store: store.clone(),
        index,
    });
    Controller::for_stream(stream, store)
        .start(Harness::new("healthrecord"), reconcile, rc)
        .await;
}

async fn reconcile(rec: Arc<HealthRecord>, rc: Arc<RecordCtx>) -> Result<Action, Error> {
    let api: Api<HealthRecord> =
        Api::namespaced(rc.ctx.client.clone(), &rec.namespace().unwrap_or_default());
    let target = Target::of(&rec);
    let f = finalizers::HEALTH_RECORD_CLEANUP;
    if rec.meta().deletion_timestamp.is_some() {
        if rec.finalizers().iter().any(|x| x == f) {
            rebuild(&rc, &target, rec.uid().as_deref()).await?;
            edit_finalizers(&api, &rec.name_any(), &[], &[f]).await?;
        }
        return Ok(Action::await_change());
    }
    edit_finalizers(&api, &rec.name_any(), &[f], &[]).await?;
    label_with_request(&api, &rec, &target).await?;
    let stale_at = rebuild(&rc, &target, None).await?;
    Ok(recheck_at(&rc, stale_at))
}

/// Back when the earliest fresh record goes stale (at most the configured recheck apart,
/// so a clock that jumps is caught up with), else only on a change.
fn recheck_at(rc: &RecordCtx, stale_at: Option<jiff::Timestamp>) -> Action {
    let Some(at) = stale_at else {
        return Action::await_change();
    };
    let wait = rc
        .clock
        .now()
        .duration_until(at)
        .try_into()
        .unwrap_or(std::time::Duration::ZERO)
        + std::time::Duration::from_secs(1);
    Action::requeue(wait.min(rc.ctx.config().health_recheck_max))
}

/// Sets the request label on `rec` when it is missing or stale (nothing sent otherwise).
async fn label_with_request(
    api: &Api<HealthRecord>,
    rec: &HealthRecord,
    target: &Target,
) -> Result<(), Error> {
    let value = target.label_value();
    if rec.labels().get(names::REQUEST_LABEL) == Some(&value) {
        return Ok(());
    }
    let body = serde_json::json!({"metadata": {"labels": {names::REQUEST_LABEL: value}}});
    match api
        .patch(
            &rec.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&body),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(ref e) if crate::support::is_not_found(e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Rebuilds `target`'s `healthStatus` (and history) from the cached records that
/// reference it (found through the index, not by scanning every record), leaving out
/// the record with uid `excluding` (one being deleted). A missing Promise or request is
/// not an error: there is nothing to update. Returns when the earliest of the records
/// still fresh goes stale.
async fn rebuild(
    rc: &RecordCtx,
    target: &Target,
    excluding: Option<&str>,
) -> Result<Option<jiff::Timestamp>, Error> {
    let ctx = &*rc.ctx;
    let Some(ar) = request_resource(ctx, &target.promise).await? else {
        return Ok(None);
    };
    let records: Vec<Arc<HealthRecord>> = rc
        .index
        .records_of(target)
        .iter()
        .filter_map(|key| rc.store.get(key))
        .filter(|r| {
            r.meta().deletion_timestamp.is_none()
                && r.uid().as_deref() != excluding
                && Target::of(r) == *target
        })
        .collect();
    let refs: Vec<&HealthRecord> = records.iter().map(|r| r.as_ref()).collect();
    let requests: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &target.namespace, &ar);
    let now = rc.clock.now();
    let (stale, stale_at) = judge_freshness(ctx, &refs, now).await;
    let mut change: Option<(Option<HealthState>, Option<HealthState>)> = None;
    let res = crate::support::update_status(&requests, &target.name, |status, obj| {
        change = apply_health(status, obj, &refs, &stale, now);
        change.is_some()
    })
    .await;
    let stored = match res {
        Ok(o) => o,
        Err(Error::Kube(ref e)) if crate::support::is_not_found(e) => {
            // The request is gone: so are its health series.
            let request = format!("{}/{}", target.namespace, target.name);
            ctx.metrics.set_health(&target.promise, &request, None);
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let state = (!refs.is_empty())
        .then(|| stored.data.pointer("/status/healthStatus/state"))
        .flatten()
        .and_then(Value::as_str);
    let request = format!("{}/{}", target.namespace, target.name);
    ctx.metrics.set_health(&target.promise, &request, state);
    if let Some((before, Some(after))) = change
        && before != Some(after)
    {
        let why = stale_reason(&refs, &stale)
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        support::publish(
            &ctx.recorder(names::RECORD_COMPONENT),
            &crate::support::reference(&stored),
            support::event_type(!is_up(after)),
            names::RECORD_EVENT_REASON,
            format!("Health state is {}{why}", state_name(after)),
        )
        .await;
    }
    Ok(stale_at)
}

/// Which of `records` are stale at `now`, and when the earliest fresh one goes stale.
/// A record applied by a HealthSource may arrive up to one poll interval after its write,
/// so that interval is part of its grace.
async fn judge_freshness(
    ctx: &Context,
    records: &[&HealthRecord],
    now: jiff::Timestamp,
) -> (StaleRecords, Option<jiff::Timestamp>) {
    let missed = ctx.config().health_stale_after_missed_runs;
    let mut stale = StaleRecords::new();
    let mut earliest: Option<jiff::Timestamp> = None;
    let mut polls: std::collections::HashMap<String, std::time::Duration> = Default::default();
    for r in records {
        if missed == 0 || !r.annotations().contains_key(names::SCHEDULE_ANNOTATION) {
            continue;
        }
        let poll = match r.labels().get(names::SOURCE_LABEL) {
            None => std::time::Duration::ZERO,
            Some(src) => match polls.get(src) {
                Some(d) => *d,
                None => {
                    let d = source_poll_interval(ctx, src).await;
                    polls.insert(src.clone(), d);
                    d
                }
            },
        };
        let policy = Freshness {
            missed,
            grace: freshness::SLACK + poll,
        };
        match policy.judge_record(r, now) {
            Verdict::Unjudged => {}
            Verdict::Fresh { stale_at } => {
                earliest = Some(earliest.map_or(stale_at, |e| e.min(stale_at)));
            }
            Verdict::Stale { message } => {
                let key = (r.namespace().unwrap_or_default(), r.name_any());
                stale.insert(key, message);
            }
        }
    }
    (stale, earliest)
}

/// The poll interval of the HealthSource `name`; zero for a stream source (nothing waits
/// for a poll) and when it is gone or unreadable (its records then get the least grace,
/// never more than they would from the source).
async fn source_poll_interval(ctx: &Context, name: &str) -> std::time::Duration {
    let api: Api<plinth_api::HealthSource> = Api::all(ctx.client.clone());
    match api.get_opt(name).await {
        // A stream delivers as records come: no poll to wait for.
        Ok(Some(hs)) if super::source::state::is_stream(&hs) => std::time::Duration::ZERO,
        Ok(Some(hs)) => super::source::state::poll_interval(&hs).unwrap_or_default(),
        _ => std::time::Duration::ZERO,
    }
}

/// Sets `healthStatus` and `healthHistory` in a request's status for `records`.
/// Returns `Some((state before, state after))` when the status changed.
fn apply_health(
    status: &mut Value,
    obj: &DynamicObject,
    records: &[&HealthRecord],
    stale: &StaleRecords,
    now: jiff::Timestamp,
) -> Option<(Option<HealthState>, Option<HealthState>)> {
    let before_status = status.clone();
    let before = status
        .pointer("/healthStatus/state")
        .and_then(Value::as_str)
        .and_then(parse_state);
    let built_by_records = status
        .pointer("/healthStatus/healthRecords")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    let map = crate::support::ensure_object(status);
    let after = if records.is_empty() {
        // No records: a pipeline's healthStatus stays; one the records built goes.
        if built_by_records {
            map.remove("healthStatus");
        }
        None
    } else {
        let hs = health_status(records, stale);
        let after = hs["state"].as_str().and_then(parse_state);
        if !map
            .get("healthStatus")
            .is_some_and(|shown| only_heartbeats(shown, &hs))
        {
            map.insert("healthStatus".into(), hs);
        }
        after
    };
    if let Some(state) = after {
        let mut history = HealthHistory::from_status(status);
        let created = obj.meta().creation_timestamp.as_ref().map(|t| t.0);
        if history.record(state, &deciding_source(records, stale), now, created) {
            crate::support::ensure_object(status).insert(
                "healthHistory".into(),
                serde_json::to_value(&history).expect("history serialises"),
            );
        }
    }
    (*status != before_status).then_some((before, after))
}

/// Longest a request's `healthStatus` keeps a record's older `lastRun` when nothing else
/// changed: heartbeats (a writer refreshing an unchanged state every run) reach the
/// HealthRecords, where freshness is judged, but the request's status is rewritten for
/// them at most this often, so a settled platform stays quiet.
pub const LAST_RUN_REFRESH_SECS: i64 = 3600;

/// Whether `next` differs from `shown` only by `lastRun`s that advanced by less than
/// [`LAST_RUN_REFRESH_SECS`].
fn only_heartbeats(shown: &Value, next: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(entries) = v.get_mut("healthRecords").and_then(Value::as_array_mut) {
            for e in entries {
                if let Some(e) = e.as_object_mut() {
                    e.remove("lastRun");
                }
            }
        }
        v
    };
    let runs = |v: &Value| -> Vec<Option<i64>> {
        v["healthRecords"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| e["lastRun"].as_i64())
            .collect()
    };
    strip(shown) == strip(next)
        && runs(shown)
            .iter()
            .zip(runs(next))
            .all(|(a, b)| match (a, b) {
                (Some(a), Some(b)) => b >= *a && b - a < LAST_RUN_REFRESH_SECS,
                (a, b) => *a == b,
            })
}

/// Deletes every HealthRecord that references the request `target` (called when the
/// request is deleted). Lists by the request label, plus any record not labelled yet
/// (one the controller has not reconciled), never every record. Returns how many were
/// deleted.
pub async fn delete_records_of(ctx: &Context, target: &Target) -> Result<usize, Error> {
    let all: Api<HealthRecord> = Api::all(ctx.client.clone());
    let labelled = ListParams::default().labels(&format!(
        "{}={}",
        names::REQUEST_LABEL,
        target.label_value()
    ));
    let unlabelled = ListParams::default().labels(&format!("!{}", names::REQUEST_LABEL));
    let mut found = all.list(&labelled).await?.items;
    found.extend(all.list(&unlabelled).await?.items);
    let mut n = 0;
    for r in found {
        if Target::of(&r) != *target || r.meta().deletion_timestamp.is_some() {
            continue;
        }
        let api: Api<HealthRecord> =
            Api::namespaced(ctx.client.clone(), &r.namespace().unwrap_or_default());
        match api.delete(&r.name_any(), &DeleteParams::background()).await {
            Ok(_) => n += 1,
            Err(ref e) if crate::support::is_not_found(e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shown(state: &str, last_run: i64) -> Value {
        json!({"state": state, "healthRecords": [
            {"state": state, "source": {"name": "a", "namespace": "default"}, "lastRun": last_run}
        ]})
    }

    #[test]
    fn a_heartbeat_alone_rewrites_the_status_at_most_hourly() {
        assert!(only_heartbeats(
            &shown("healthy", 100),
            &shown("healthy", 160)
        ));
        assert!(only_heartbeats(
            &shown("healthy", 100),
            &shown("healthy", 100)
        ));
        assert!(
            !only_heartbeats(&shown("healthy", 100), &shown("healthy", 100 + 3600)),
            "an hour on, the status shows the newer run"
        );
        assert!(!only_heartbeats(
            &shown("healthy", 100),
            &shown("unhealthy", 160)
        ));
        assert!(
            !only_heartbeats(&shown("healthy", 160), &shown("healthy", 100)),
            "an older run is shown as it is"
        );
    }
}
