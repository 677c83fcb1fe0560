//! The Work controller: places each workload group of a Work with the scheduling rules
//! of [`scheduler`], writes its WorkPlacements ([`placement`]) and keeps the
//! Work's status in step ([`summary`]).
//!
//! * A Destination event re-queues exactly the Works that can be affected by it —
//!   Works with an unscheduled group, Works with a WorkPlacement on that Destination,
//!   and dependency Works with a group the Destination matches — never every Work in
//!   the cluster (Kratix's O(#Works) storm).
//! * WorkPlacements whose group no longer exists in the Work are deleted (dangling).
//! * Write failures reported by WorkPlacements (`WriteSucceeded=False`, including the
//!   terminal `InvalidWorkloadPath`) are folded into the Work's conditions as
//!   `WorkplacementsFailing`, with each failing placement's message.
//! * A Work is `Ready=True` only once every placement reports `WriteSucceeded=True`;
//!   until then it is `Ready=False/WorkplacementsPending` "Pending". Kratix marks a Work
//!   Ready as soon as it is scheduled, so requests turned Reconciled before their files
//!   reached the store.
//!
//! Deleting a Work deletes its WorkPlacements first (finalizer `kratix.io/work-cleanup`),
//! so no WorkPlacement or state-store file is orphaned.

mod placement;
pub mod scheduler;
mod shared;
mod summary;

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, DeleteParams, ListParams, PropagationPolicy};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use plinth_api::constants::{condition_types, finalizers, labels, reasons};
use plinth_api::{Destination, Work, WorkPlacement, WorkloadGroup};
use serde_json::json;

use crate::Error;
use crate::context::Context;
use crate::support::harness::{Harness, Start};
use crate::support::{
    Latest, condition_is_false, condition_is_true, describe, edit_finalizers, get_condition,
    patch_status, publish, set_condition, typed_reference,
};
use crate::triggers::{deletions, inputs_hash, watch_inputs, watched_cache};
use crate::work::scheduler::{
    DestinationFacts, choose_for_resource, destination_matches, group_selector, is_dry_run,
};
use plinth_api::events::EventType;
use shared::{WorkCtx, wp_conditions};
use summary::{GroupOutcome, summarize};

const REPORTER: &str = plinth_api::constants::events::SCHEDULER;

fn groups(work: &Work) -> &[WorkloadGroup] {
    work.spec.workload_groups.as_deref().unwrap_or(&[])
}

fn resource_name(work: &Work) -> &str {
    work.spec.resource_name.as_deref().unwrap_or("")
}

fn work_conditions(work: &Work) -> Vec<Condition> {
    work.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
}

fn wp_destination(wp: &WorkPlacement) -> String {
    wp.spec.target_destination_name.clone().unwrap_or_default()
}

/// Counts a scheduling outcome of `work` in Kratix's `kratix_workplacement_outcomes_total`:
/// `destination` empty means unscheduled.
fn count_outcome(state: &WorkCtx, work: &Work, misplaced: bool, destination: &str) {
    use crate::observe::Outcome;
    let outcome = match (destination.is_empty(), misplaced) {
        (true, _) => Outcome::Unscheduled,
        (false, true) => Outcome::Misplaced,
        (false, false) => Outcome::Scheduled,
    };
    crate::observe::placement_outcome(
        &state.ctx.metrics,
        outcome,
        work.spec.promise_name.as_deref().unwrap_or(""),
        work.spec.resource_name.as_deref().unwrap_or(""),
        &work.namespace().unwrap_or_default(),
        destination,
    );
}

/// Reasons Kratix reports as the `WorkController` rather than the `Scheduler`.
const WORK_CONTROLLER_REASONS: [&str; 3] = [
    plinth_api::constants::events::WAITING_DESTINATION,
    plinth_api::constants::events::WORKPLACEMENTS_FAILING,
    plinth_api::constants::events::FAILED_DELETE,
];

/// Runs the Work controller (scheduler) until the process stops.
///
/// Watches Works (all namespaces), owns WorkPlacements, and watches Destinations with
/// a mapper that re-queues only the Works a Destination event can affect (module docs).
/// Uses `ctx.client` and, from `ctx.config()`, `requeue_short` (deletion waits),
/// `requeue_default` (errors) and `requeue_slow` (unscheduled resource Works, as a safety
/// net behind the Destination watch).
pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let works: Api<Work> = Api::all(client.clone());
    let wps: Api<WorkPlacement> = Api::all(client.clone());
    let (dest_reader, dest_stream) = watched_cache(Api::<Destination>::all(client.clone()));

    // From its WorkPlacements the scheduler reads only `WriteSucceeded` (folded into the
    // Work) and their existence; its own writes to them (spec, `ScheduleSucceeded`) and
    // the `Ready` the WorkPlacement controller derives do not wake it.
    let (wp_reader, wp_applied) = watch_inputs(wps.clone(), |wp: &WorkPlacement| {
        let write = get_condition(&wp_conditions(wp), "WriteSucceeded")
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()));
        let mut h = std::collections::hash_map::DefaultHasher::new();
        std::hash::Hash::hash(&write, &mut h);
        std::hash::Hash::hash(&wp.meta().deletion_timestamp.is_some(), &mut h);
        std::hash::Hasher::finish(&h)
    });
    let wp_stream = futures::stream::select(wp_applied, deletions(wps));

    // Works: spec changes and deletion, never the scheduler's own status writes.
    let (work_store, work_trigger) = watch_inputs(works, |w: &Work| inputs_hash(w, ()));
    let controller = Controller::for_stream(work_trigger, work_store.clone())
        .with_config(ctx.config().runtime());
    let state = Arc::new(WorkCtx {
        recorder: ctx.recorder(REPORTER),
        work_recorder: ctx.recorder(plinth_api::constants::events::WORK_CONTROLLER),
        works: work_store.clone(),
        destinations: dest_reader,
        ctx,
    });
    controller
        .owns_stream(wp_stream)
        .watches_stream(dest_stream, move |dest: Destination| {
            works_affected_by_destination(&dest, &work_store, &wp_reader)
        })
        .start(Harness::new("scheduler"), reconcile, state)
        .await;
}

/// The Works a Destination event can affect: Works with a WorkPlacement on it, Works
/// with an unscheduled group, and dependency Works with a group it matches.
fn works_affected_by_destination(
    dest: &Destination,
    works: &Store<Work>,
    wps: &Store<WorkPlacement>,
) -> Vec<ObjectRef<Work>> {
    let facts = DestinationFacts::of(dest);
    let mut out: BTreeSet<(String, String)> = BTreeSet::new();
    for wp in wps.state() {
        if wp.labels().get(labels::TARGET_DESTINATION_NAME) == Some(&facts.name)
            && let (Some(work), Some(ns)) = (wp.labels().get(labels::WORK), wp.namespace())
        {
            out.insert((ns, work.clone()));
        }
    }
    for work in works.state() {
        let ns = work.namespace().unwrap_or_default();
        let name = work.name_any();
        if out.contains(&(ns.clone(), name.clone())) {
            continue;
        }
        let status = work.status.as_ref();
        let total = status.and_then(|s| s.work_placements).unwrap_or(-1);
        let created = status.and_then(|s| s.work_placements_created).unwrap_or(-2);
        let unscheduled = total != created
            || get_condition(&work_conditions(&work), "ScheduleSucceeded")
                .is_some_and(|c| c.status == "False" && c.reason == "UnscheduledWorkloads");
        let dependency_match = resource_name(&work).is_empty()
            && groups(&work)
                .iter()
                .any(|g| destination_matches(&facts, &group_selector(&work, g), is_dry_run(&work)));
        if unscheduled || dependency_match {
            out.insert((ns, name));
        }
    }
    out.into_iter()
        .map(|(ns, name)| ObjectRef::new(&name).within(&ns))
        .collect()
}

/// A Work as one reconcile sees it, with the APIs it writes through.
struct Reconciling<'a> {
    work: &'a Work,
    ns: String,
    name: String,
    /// `Work <namespace>/<name>`, for errors.
    what: String,
    works: Api<Work>,
    placements: Api<WorkPlacement>,
}

impl<'a> Reconciling<'a> {
    fn new(state: &WorkCtx, work: &'a Work) -> Self {
        let ns = work.namespace().unwrap_or_default();
        Reconciling {
            work,
            name: work.name_any(),
            what: describe(work),
            works: Api::namespaced(state.ctx.client.clone(), &ns),
            placements: Api::namespaced(state.ctx.client.clone(), &ns),
            ns,
        }
    }

    fn has_finalizer(&self) -> bool {
        self.work
            .finalizers()
            .iter()
            .any(|f| f == finalizers::WORK_CLEANUP)
    }

    /// This Work's WorkPlacements.
    async fn list_placements(&self) -> Result<Vec<WorkPlacement>, Error> {
        let by_work = ListParams::default().labels(&format!("{}={}", labels::WORK, self.name));
        Ok(self
            .placements
            .list(&by_work)
            .await
            .map_err(|e| Error::kube("listing WorkPlacements of", &self.what, e))?
            .items)
    }

    /// Deletes a WorkPlacement in the background; a 404 is success.
    async fn delete_placement(&self, wp: &WorkPlacement) -> Result<(), kube::Error> {
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..Default::default()
        };
        match self.placements.delete(&wp.name_any(), &dp).await {
            Err(e) if !crate::support::is_not_found(&e) => Err(e),
            _ => Ok(()),
        }
    }
}

/// One reconcile, a failure of it reported on the Work ([`crate::support::outcome`]).
async fn reconcile(work: Arc<Work>, state: Arc<WorkCtx>) -> Result<Action, Error> {
    let result = reconcile_steps(work.clone(), state.clone()).await;
    let component = plinth_api::constants::events::WORK_CONTROLLER;
    crate::support::outcome::report_typed(&state.ctx, component, work.as_ref(), result).await
}

/// Deletion, or finalizer, placement of every group, dangling placements, status.
async fn reconcile_steps(work: Arc<Work>, state: Arc<WorkCtx>) -> Result<Action, Error> {
    let w = Reconciling::new(&state, &work);
    if work.meta().deletion_timestamp.is_some() {
        return delete(&state, &w).await;
    }
    // The Work as last written here, where the status write starts from.
    let latest = Latest::new(work.as_ref());
    if !w.has_finalizer() {
        let written = edit_finalizers(&w.works, &w.name, &[finalizers::WORK_CLEANUP], &[])
            .await
            .map_err(|e| Error::kube("adding finalizer to", &w.what, e))?;
        latest.remember(written);
    }
    let destinations = known_destinations(&state, &w).await?;
    let existing = w.list_placements().await?;
    let mut outcomes: Vec<(String, GroupOutcome)> = Vec::new();
    let mut placed: BTreeSet<String> = BTreeSet::new();
    for group in groups(&work) {
        let outcome = place_group(&state, &w, group, &destinations, &existing, &mut placed).await;
        outcomes.push((group.id.clone(), outcome));
    }
    delete_dangling(&w, &existing).await?;
    // A placement changed under this reconcile: the next one starts from it, and nothing
    // is reported or summarised from this one's stale view.
    if outcomes.iter().any(|(_, o)| o.conflicted) {
        return Err(Error::Conflict(w.what));
    }
    write_status(&state, &w, &latest, &outcomes, &existing, &placed).await?;
    if let Some(err) = outcomes.iter().find_map(|(_, o)| o.failed.clone()) {
        return Err(Error::Invalid {
            object: w.what,
            message: err,
        });
    }
    if outcomes.iter().any(|(_, o)| o.unscheduled) && !resource_name(&work).is_empty() {
        return Ok(Action::requeue(state.ctx.config().requeue_slow));
    }
    Ok(Action::await_change())
}

/// The Destinations as the watch cache has them, once it holds the first full list
/// (waiting at most `network_timeout`). A Destination the cache does not show yet
/// re-queues the Works it can take through the Destination watch (module docs).
async fn known_destinations(
    state: &WorkCtx,
    w: &Reconciling<'_>,
) -> Result<Vec<DestinationFacts>, Error> {
    let timeout = state.ctx.config().network_timeout;
    match tokio::time::timeout(timeout, state.destinations.wait_until_ready()).await {
        Ok(Ok(())) => {}
        Ok(Err(_)) => {
            return Err(Error::Invalid {
                object: w.what.clone(),
                message: "the Destination watch stopped".into(),
            });
        }
        Err(_) => {
            return Err(Error::NotReady(format!(
                "the scheduler has not listed the Destinations after {timeout:?}, so {} cannot be scheduled yet",
                w.what
            )));
        }
    }
    let mut all = state.destinations.state();
    // In name order, as a list returns them: placement ties are broken by it.
    all.sort_by_key(|d| d.name_any());
    Ok(all.iter().map(|d| DestinationFacts::of(d)).collect())
}

/// Deletion: deletes the WorkPlacements and waits (`requeue_short`, and their deletion
/// events through `owns`) until the WorkPlacement controller removed their files, then
/// removes the finalizer.
async fn delete(state: &WorkCtx, w: &Reconciling<'_>) -> Result<Action, Error> {
    if !w.has_finalizer() {
        return Ok(Action::await_change());
    }
    let existing = w.list_placements().await?;
    for wp in existing
        .iter()
        .filter(|wp| wp.meta().deletion_timestamp.is_none())
    {
        if let Err(e) = w.delete_placement(wp).await {
            publish(
                &state.work_recorder,
                &typed_reference(w.work),
                EventType::Warning,
                plinth_api::constants::events::FAILED_DELETE,
                format!("failed to delete WorkPlacement {}: {e}", wp.name_any()),
            )
            .await;
            return Err(Error::kube("deleting WorkPlacement of", &w.what, e));
        }
    }
    if existing.is_empty() {
        edit_finalizers(&w.works, &w.name, &[], &[finalizers::WORK_CLEANUP])
            .await
            .map_err(|e| Error::kube("removing finalizer from", &w.what, e))?;
        forget_request_series(state, w.work);
        return Ok(Action::await_change());
    }
    let names: Vec<String> = existing.iter().map(|w| w.name_any()).collect();
    let msg = format!(
        "Waiting for WorkPlacements to be deleted: [{}]",
        names.join(" ")
    );
    patch_status(&w.works, &w.name, |cur: &Work| {
        let mut conds = work_conditions(cur);
        set_condition(
            &mut conds,
            condition_types::READY,
            false,
            reasons::DELETING,
            &msg,
            cur.meta().generation,
        )
        .then(|| json!({"conditions": conds}))
    })
    .await
    .map_err(|e| Error::kube("writing status of", &w.what, e))?;
    Ok(Action::requeue(state.ctx.config().requeue_short))
}

/// Removes the scheduling and write series of `work`'s request (or of its Promise's own
/// Works in its namespace) once no other live Work is counted under them: a deleted
/// request must not leave series behind. Works being deleted count as gone, as nothing
/// is scheduled or written for them any more; so of two Works deleted together, the
/// later one to finish does the removal whichever order the cache sees them in.
fn forget_request_series(state: &WorkCtx, work: &Work) {
    let promise = work.spec.promise_name.as_deref().unwrap_or("");
    let resource = work.spec.resource_name.as_deref().unwrap_or("");
    let ns = work.namespace().unwrap_or_default();
    let name = work.name_any();
    let mut same_name_elsewhere = false;
    for other in state.works.state() {
        if other.meta().deletion_timestamp.is_some()
            || other.spec.promise_name.as_deref().unwrap_or("") != promise
            || other.spec.resource_name.as_deref().unwrap_or("") != resource
        {
            continue;
        }
        let other_ns = other.namespace().unwrap_or_default();
        if other_ns == ns {
            if other.name_any() != name {
                return;
            }
        } else {
            same_name_elsewhere = true;
        }
    }
    state
        .ctx
        .metrics
        .forget_request(promise, &ns, resource, same_name_elsewhere);
}

/// Where a group's WorkPlacements go: (destination, existing placement) pairs, and
/// whether the group is unscheduled. Existing placements stay; a resource group without
/// one gets the scheduler's choice (a Ready candidate first); a dependency group gets
/// every candidate it lacks.
fn plan_group<'a>(
    w: &Reconciling<'_>,
    group: &WorkloadGroup,
    matching: &[&DestinationFacts],
    candidates: &BTreeSet<&str>,
    in_group: &[&'a WorkPlacement],
) -> (Vec<(String, Option<&'a WorkPlacement>)>, bool) {
    let mut targets: Vec<(String, Option<&WorkPlacement>)> = in_group
        .iter()
        .map(|wp| (wp_destination(wp), Some(*wp)))
        .collect();
    if !resource_name(w.work).is_empty() {
        if !in_group.is_empty() {
            return (targets, false);
        }
        return match choose_for_resource(&w.ns, &w.name, &group.id, matching) {
            Some(d) => (vec![(d.to_string(), None)], false),
            None => (targets, true),
        };
    }
    for d in candidates {
        if !in_group.iter().any(|wp| wp_destination(wp) == *d) {
            targets.push(((*d).to_string(), None));
        }
    }
    let unscheduled = targets.is_empty();
    (targets, unscheduled)
}

/// Places one workload group: upserts its WorkPlacements (their names go into
/// `placed`), counts the outcomes, and announces a newly unscheduled resource group.
async fn place_group(
    state: &WorkCtx,
    w: &Reconciling<'_>,
    group: &WorkloadGroup,
    destinations: &[DestinationFacts],
    existing: &[WorkPlacement],
    placed: &mut BTreeSet<String>,
) -> GroupOutcome {
    let resolved = group_selector(w.work, group);
    let dry_run = is_dry_run(w.work);
    let matching: Vec<&DestinationFacts> = destinations
        .iter()
        .filter(|d| destination_matches(d, &resolved, dry_run))
        .collect();
    let candidates: BTreeSet<&str> = matching.iter().map(|d| d.name.as_str()).collect();
    let in_group: Vec<&WorkPlacement> = existing
        .iter()
        .filter(|wp| wp.labels().get(labels::WORKLOAD_GROUP_ID) == Some(&group.id))
        .collect();
    let (targets, unscheduled) = plan_group(w, group, &matching, &candidates, &in_group);
    let mut outcome = GroupOutcome {
        unscheduled,
        ..Default::default()
    };
    for (dest, wp) in targets {
        let misplaced = !candidates.contains(dest.as_str());
        outcome.misplaced |= misplaced;
        match placement::upsert(state, w.work, group, &dest, wp, misplaced).await {
            Ok(wp_name) => {
                // A placement kept on a Destination that is gone (being removed by its
                // deletion) is no scheduling outcome; counting it would bring back the
                // series removed with the Destination.
                if destinations.iter().any(|d| d.name == dest) {
                    count_outcome(state, w.work, misplaced, &dest);
                }
                placed.insert(wp_name);
            }
            Err(e) if e.is_conflict() => {
                tracing::debug!(work = %w.what, group = %group.id, error = %e, "WorkPlacement upsert lost a write race; retrying");
                outcome.conflicted = true;
            }
            Err(e) => {
                tracing::warn!(work = %w.what, group = %group.id, error = %e, "WorkPlacement upsert failed");
                outcome.failed = Some(e.to_string());
            }
        }
    }
    if outcome.unscheduled {
        count_outcome(state, w.work, false, "");
        announce_unscheduled(state, w.work, group).await;
    }
    outcome
}

/// Announces an unscheduled resource group once, not on every reconcile.
async fn announce_unscheduled(state: &WorkCtx, work: &Work, group: &WorkloadGroup) {
    let already_reported = get_condition(&work_conditions(work), "ScheduleSucceeded")
        .is_some_and(|c| c.reason == "UnscheduledWorkloads" && c.message.contains(&group.id));
    if resource_name(work).is_empty() || already_reported {
        return;
    }
    publish(
        &state.recorder,
        &typed_reference(work),
        EventType::Normal,
        plinth_api::constants::events::NO_MATCHING_DESTINATION,
        format!(
            "no Destination matches the selectors of workload group {}",
            group.id
        ),
    )
    .await;
}

/// Deletes the placements of groups that no longer exist in the Work.
async fn delete_dangling(w: &Reconciling<'_>, existing: &[WorkPlacement]) -> Result<(), Error> {
    let group_ids: BTreeSet<&str> = groups(w.work).iter().map(|g| g.id.as_str()).collect();
    for wp in existing {
        let gid = wp
            .labels()
            .get(labels::WORKLOAD_GROUP_ID)
            .map(String::as_str)
            .unwrap_or("");
        if !group_ids.contains(gid) && wp.meta().deletion_timestamp.is_none() {
            w.delete_placement(wp)
                .await
                .map_err(|e| Error::kube("deleting dangling WorkPlacement of", &w.what, e))?;
        }
    }
    Ok(())
}

/// The placed WorkPlacements whose write failed (name, message), and those not yet
/// written. Beyond Kratix: a Work is Ready only once every placement is written, so a
/// request is not Reconciled before its files reached the store.
fn write_state(
    existing: &[WorkPlacement],
    placed: &BTreeSet<String>,
) -> (Vec<(String, String)>, Vec<String>) {
    let failing = existing
        .iter()
        .filter(|wp| placed.contains(&wp.name_any()))
        .filter_map(|wp| {
            let conds = wp_conditions(wp);
            condition_is_false(&conds, condition_types::WRITE_SUCCEEDED).then(|| {
                let msg = get_condition(&conds, condition_types::WRITE_SUCCEEDED)
                    .map(|c| c.message.clone())
                    .unwrap_or_default();
                (wp.name_any(), msg)
            })
        })
        .collect();
    let unwritten = placed
        .iter()
        .filter(|n| {
            !existing.iter().any(|wp| {
                &wp.name_any() == *n && condition_is_true(&wp_conditions(wp), "WriteSucceeded")
            })
        })
        .cloned()
        .collect();
    (failing, unwritten)
}

/// Writes the Work's conditions and placement counts, starting from `latest`, and
/// announces each changed `ScheduleSucceeded` with its event.
async fn write_status(
    state: &WorkCtx,
    w: &Reconciling<'_>,
    latest: &Latest<Work>,
    outcomes: &[(String, GroupOutcome)],
    existing: &[WorkPlacement],
    placed: &BTreeSet<String>,
) -> Result<(), Error> {
    let (failing, unwritten) = write_state(existing, placed);
    let summary = summarize(outcomes, &failing, &unwritten);
    let total = groups(w.work).len() as i64;
    let created = total - outcomes.iter().filter(|(_, o)| o.unscheduled).count() as i64;
    let mut announce: Vec<(EventType, &'static str, String)> = Vec::new();
    let generation = w.work.meta().generation;
    let written = latest
        .patch_status(&w.works, |cur: &Work| {
            let mut conds = work_conditions(cur);
            let mut changed = false;
            announce.clear();
            for c in &summary.conditions {
                if set_condition(
                    &mut conds, c.type_, c.status, c.reason, &c.message, generation,
                ) {
                    changed = true;
                    if c.type_ == "ScheduleSucceeded" {
                        announce.push((c.event_type, c.event_reason, c.message.clone()));
                    }
                }
            }
            let st = cur.status.as_ref();
            changed |= st.and_then(|s| s.work_placements) != Some(total)
                || st.and_then(|s| s.work_placements_created) != Some(created);
            changed.then(|| {
            json!({"conditions": conds, "workPlacements": total, "workPlacementsCreated": created})
        })
        })
        .await
        .map_err(|e| Error::kube("writing status of", &w.what, e))?;
    if written.is_none() {
        // Deleted meanwhile: nothing was written, so nothing is announced.
        return Ok(());
    }
    for (t, reason, msg) in announce {
        let recorder = if WORK_CONTROLLER_REASONS.contains(&reason) {
            &state.work_recorder
        } else {
            &state.recorder
        };
        publish(recorder, &typed_reference(w.work), t, reason, msg).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work_obj(
        name: &str,
        resource: &str,
        selector: Option<(&str, &str)>,
        status: Option<(i64, i64)>,
    ) -> Work {
        let mut sels = vec![];
        if let Some((k, v)) = selector {
            sels.push(json!({"source": "promise", "matchLabels": {k: v}}));
        }
        serde_json::from_value(json!({
            "apiVersion": "platform.kratix.io/v1alpha1",
            "kind": "Work",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {
                "resourceName": resource,
                "workloadGroups": [{"id": "g", "directory": ".", "destinationSelectors": sels}],
            },
            "status": status.map(|(t, c)| json!({"workPlacements": t, "workPlacementsCreated": c})),
        }))
        .unwrap()
    }

    #[test]
    fn destination_events_map_only_to_affected_works() {
        use kube::runtime::watcher::Event;
        let (works, mut ww) = kube::runtime::reflector::store::<Work>();
        let (wps, mut pw) = kube::runtime::reflector::store::<WorkPlacement>();
        for w in [
            work_obj("placed-here", "r1", Some(("env", "prod")), Some((1, 1))),
            work_obj("placed-elsewhere", "r2", None, Some((1, 1))),
            work_obj("unscheduled", "r3", Some(("env", "test")), Some((1, 0))),
            work_obj(
                "dependency-matching",
                "",
                Some(("env", "dev")),
                Some((1, 1)),
            ),
            work_obj(
                "dependency-not-matching",
                "",
                Some(("env", "prod")),
                Some((1, 1)),
            ),
        ] {
            ww.apply_watcher_event(&Event::Apply(w));
        }
        for (wp, work, dest) in [
            ("p1", "placed-here", "dev"),
            ("p2", "placed-elsewhere", "other"),
            ("p3", "dependency-not-matching", "other"),
        ] {
            let obj: WorkPlacement = serde_json::from_value(json!({
                "apiVersion": "platform.kratix.io/v1alpha1",
                "kind": "WorkPlacement",
                "metadata": {"name": wp, "namespace": "team-a", "labels": {labels::WORK: work, labels::TARGET_DESTINATION_NAME: dest}},
                "spec": {"targetDestinationName": dest},
            }))
            .unwrap();
            pw.apply_watcher_event(&Event::Apply(obj));
        }
        let dest: Destination = serde_json::from_value(json!({
            "apiVersion": "platform.kratix.io/v1alpha1",
            "kind": "Destination",
            "metadata": {"name": "dev", "labels": {"env": "dev"}},
            "spec": {"path": "dev", "stateStoreRef": {"kind": "GitStateStore", "name": "s"}},
        }))
        .unwrap();
        let mut got: Vec<String> = works_affected_by_destination(&dest, &works, &wps)
            .into_iter()
            .map(|r| r.name)
            .collect();
        got.sort();
        assert_eq!(got, ["dependency-matching", "placed-here", "unscheduled"]);
    }
}
