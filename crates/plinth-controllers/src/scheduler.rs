//! The Work controller and the scheduler.
//!
//! A Work holds workload groups; the scheduler turns each group into WorkPlacements —
//! one per chosen Destination — and keeps the Work's status in step.
//!
//! # Placement rules
//!
//! * **Selectors** of a group are merged `resource-workflow` → `promise-workflow` →
//!   `promise` (later wins), so a Promise's own `destinationSelectors` always win
//!   ([`resolve_selectors`]). Dry-run Works (label `kratix.io/dry-run: "true"`) use
//!   `{kratix.io/dry-run: "true"}` instead.
//! * **Candidates** are Destinations whose labels contain every resolved key/value;
//!   Destinations being deleted never match; with no selectors, a Destination with
//!   `strictMatchLabels: true` and at least one label is skipped
//!   ([`destination_matches`]).
//! * **Dependency groups** (Works without `spec.resourceName`) go to *every* candidate.
//!   Placements on Destinations that stopped matching are kept, labelled
//!   `kratix.io/misplaced: "true"`, and still updated.
//! * **Resource groups** go to exactly *one* Destination and stay there. Kratix picks a
//!   random candidate; Plinth picks deterministically with rendezvous
//!   (highest-random-weight) hashing: every candidate name `d` is weighted with the
//!   first 8 bytes (big-endian) of `sha256("<work namespace>/<work name>\n<group id>\n<d>")`
//!   and the highest weight wins, ties going to the smaller name ([`rendezvous_choice`]).
//!   The result depends only on the Work identity, the group id and the candidate set,
//!   so re-reconciles and other replicas agree, groups spread evenly over equal
//!   Destinations, and a new Destination only attracts groups that are not yet placed.
//!   Once a WorkPlacement exists it is never moved: when its Destination stops matching
//!   it is marked misplaced instead.
//! * A group with no candidate is **unscheduled**: the Work gets
//!   `ScheduleSucceeded=False/UnscheduledWorkloads` naming the group ids. A Destination
//!   event re-queues exactly the Works that can be affected by it — Works with an
//!   unscheduled group, Works with a WorkPlacement on that Destination, and dependency
//!   Works with a group the Destination matches — never every Work in the cluster
//!   (Kratix's O(#Works) storm).
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

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use plinth_api::constants::{
    condition_types, finalizers, labels, messages, reasons, selector_source,
};
use plinth_api::{Destination, Work, WorkPlacement, WorkloadGroup};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::Error;
use crate::context::Context;
use crate::support::{
    EventRecorder, EventType, condition_is_false, condition_is_true, describe, edit_finalizers,
    get_condition, patch_status, publish, set_condition, typed_reference,
};
use crate::triggers::{deletions, inputs_hash, watch_inputs};

const REPORTER: &str = plinth_api::constants::events::SCHEDULER;

// ---------------------------------------------------------------------------
// Pure scheduling rules (no I/O): selector resolution, matching, rendezvous choice.
// ---------------------------------------------------------------------------

/// Precedence rank of a selector source: merged in ascending rank, later wins
/// (promise > promise-workflow > resource-workflow). Unknown sources
/// rank lowest, like a resource-workflow entry.
fn source_rank(source: &str) -> u8 {
    match source {
        selector_source::PROMISE => 2,
        selector_source::PROMISE_WORKFLOW => 1,
        _ => 0,
    }
}

/// Resolves a workload group's selectors into one equality selector.
///
/// `selectors` are `(source, matchLabels)` pairs in Work order. They are merged
/// `resource-workflow` first, then `promise-workflow`, then `promise`, later keys
/// overriding earlier ones, so a Promise's own selectors always win.
/// The sort is stable: entries of one source keep their Work order.
pub fn resolve_selectors<'a, I>(selectors: I) -> BTreeMap<String, String>
where
    I: IntoIterator<Item = (&'a str, &'a BTreeMap<String, String>)>,
{
    let mut entries: Vec<(&str, &BTreeMap<String, String>)> = selectors.into_iter().collect();
    entries.sort_by_key(|(source, _)| source_rank(source));
    let mut resolved = BTreeMap::new();
    for (_, labels) in entries {
        for (k, v) in labels {
            resolved.insert(k.clone(), v.clone());
        }
    }
    resolved
}

/// What the scheduler needs to know about one Destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DestinationFacts {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels` (the scheduling targets).
    pub labels: BTreeMap<String, String>,
    /// `spec.strictMatchLabels`.
    pub strict_match_labels: bool,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
}

impl DestinationFacts {
    /// Reads the facts from a Destination object.
    pub fn of(dest: &Destination) -> Self {
        DestinationFacts {
            name: dest.name_any(),
            labels: dest.labels().clone(),
            strict_match_labels: dest.spec.strict_match_labels(),
            deleting: dest.meta().deletion_timestamp.is_some(),
        }
    }
}

/// Whether a Destination is a candidate for a group with the `resolved` selector
/// ("Candidate destinations" and the matching table).
///
/// Equality matching: every selector key must be present with the same value.
/// Destinations being deleted never match. With an empty selector, a Destination with
/// `strictMatchLabels: true` and at least one label is excluded. Destinations labelled
/// `kratix.io/dry-run: "true"` only match dry-run scheduling.
pub fn destination_matches(
    dest: &DestinationFacts,
    resolved: &BTreeMap<String, String>,
    dry_run: bool,
) -> bool {
    if dest.deleting {
        return false;
    }
    if !dry_run && dest.labels.get(labels::DRY_RUN).map(String::as_str) == Some("true") {
        return false;
    }
    if resolved.is_empty() {
        return !dest.strict_match_labels || dest.labels.is_empty();
    }
    resolved.iter().all(|(k, v)| dest.labels.get(k) == Some(v))
}

/// Rendezvous (highest-random-weight) choice of ONE Destination for a resource
/// workload group; see the module docs for the rule. Returns `None` when there are no
/// candidates.
pub fn rendezvous_choice<'a, I>(
    work_namespace: &str,
    work_name: &str,
    group_id: &str,
    candidates: I,
) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    candidates
        .into_iter()
        .map(|d| (rendezvous_weight(work_namespace, work_name, group_id, d), d))
        .max_by(|(wa, da), (wb, db)| wa.cmp(wb).then_with(|| db.cmp(da)))
        .map(|(_, d)| d)
}

/// The rendezvous weight of Destination `dest` for a group: the first 8 bytes
/// (big-endian) of `sha256("<ns>/<name>\n<group>\n<dest>")`.
pub fn rendezvous_weight(ns: &str, name: &str, group: &str, dest: &str) -> u64 {
    let mut h = Sha256::new();
    h.update(format!("{ns}/{name}\n{group}\n{dest}").as_bytes());
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// The WorkPlacement name `<work>.<destination>-<group id[0:5]>`,
/// shortened deterministically to a valid object name by plinth-api's name rules when
/// too long.
pub fn workplacement_name(work: &str, destination: &str, group_id: &str) -> String {
    plinth_api::names::work_placement_name(work, destination, group_id)
}

/// Longest object name the API server accepts for a WorkPlacement (DNS-1123 subdomain).
/// Counts a scheduling outcome of `work` in Kratix's `kratix_workplacement_outcomes_total`:
/// `destination` empty means unscheduled.
fn count_outcome(state: &SchedulerState, work: &Work, misplaced: bool, destination: &str) {
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

#[cfg(test)]
const MAX_NAME_LEN: usize = 253;

// ---------------------------------------------------------------------------
// Reading a Work.
// ---------------------------------------------------------------------------

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

fn groups(work: &Work) -> &[WorkloadGroup] {
    work.spec.workload_groups.as_deref().unwrap_or(&[])
}

fn resource_name(work: &Work) -> &str {
    work.spec.resource_name.as_deref().unwrap_or("")
}

fn is_dry_run(work: &Work) -> bool {
    work.labels().get(labels::DRY_RUN).map(String::as_str) == Some("true")
}

fn group_selector(work: &Work, group: &WorkloadGroup) -> BTreeMap<String, String> {
    if is_dry_run(work) {
        return BTreeMap::from([(labels::DRY_RUN.to_string(), "true".to_string())]);
    }
    resolve_selectors(group.destination_selectors.iter().flatten().map(|s| {
        (
            s.source.as_deref().unwrap_or(""),
            s.match_labels.as_ref().unwrap_or(&NO_LABELS),
        )
    }))
}

fn wp_conditions(wp: &WorkPlacement) -> Vec<Condition> {
    wp.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
}

fn work_conditions(work: &Work) -> Vec<Condition> {
    work.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------
// The controller.
// ---------------------------------------------------------------------------

struct SchedulerState {
    ctx: Arc<Context>,
    /// Events of the scheduling step (reporting component `Scheduler`).
    recorder: EventRecorder,
    /// Events of the Work lifecycle (reporting component `WorkController`).
    work_recorder: EventRecorder,
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
    let dests: Api<Destination> = Api::all(client.clone());

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
    let controller = Controller::for_stream(work_trigger, work_store.clone());
    let state = Arc::new(SchedulerState {
        recorder: ctx.recorder(REPORTER),
        work_recorder: ctx.recorder(plinth_api::constants::events::WORK_CONTROLLER),
        ctx,
    });
    controller
        .owns_stream(wp_stream)
        .watches(
            dests,
            watcher::Config::default(),
            move |dest: Destination| works_affected_by_destination(&dest, &work_store, &wp_reader),
        )
        .run(
            crate::instrument::instrument(state.ctx.metrics.clone(), "scheduler", None, reconcile),
            error_policy,
            state,
        )
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(error = %e, "work reconcile");
            }
        })
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

fn error_policy(work: Arc<Work>, err: &Error, state: Arc<SchedulerState>) -> Action {
    tracing::warn!(work = %describe(work.as_ref()), error = %err, "scheduling failed");
    Action::requeue(state.ctx.config().requeue_default)
}

/// The result of placing one workload group.
#[derive(Debug, Default)]
struct GroupOutcome {
    unscheduled: bool,
    misplaced: bool,
    failed: Option<String>,
}

async fn reconcile(work: Arc<Work>, state: Arc<SchedulerState>) -> Result<Action, Error> {
    let ctx = &state.ctx;
    let cfg = ctx.config();
    let ns = work.namespace().unwrap_or_default();
    let name = work.name_any();
    let what = describe(work.as_ref());
    let works: Api<Work> = Api::namespaced(ctx.client.clone(), &ns);
    let wp_api: Api<WorkPlacement> = Api::namespaced(ctx.client.clone(), &ns);
    let by_work = ListParams::default().labels(&format!("{}={}", labels::WORK, name));

    if work.meta().deletion_timestamp.is_some() {
        if !work
            .finalizers()
            .iter()
            .any(|f| f == finalizers::WORK_CLEANUP)
        {
            return Ok(Action::await_change());
        }
        let existing = wp_api
            .list(&by_work)
            .await
            .map_err(|e| Error::kube("listing WorkPlacements of", &what, e))?;
        for wp in existing
            .items
            .iter()
            .filter(|wp| wp.meta().deletion_timestamp.is_none())
        {
            let dp = DeleteParams {
                propagation_policy: Some(PropagationPolicy::Background),
                ..Default::default()
            };
            if let Err(e) = wp_api.delete(&wp.name_any(), &dp).await
                && !crate::support::is_not_found(&e)
            {
                publish(
                    &state.work_recorder,
                    &typed_reference(work.as_ref()),
                    EventType::Warning,
                    plinth_api::constants::events::FAILED_DELETE,
                    format!("failed to delete WorkPlacement {}: {e}", wp.name_any()),
                )
                .await;
                return Err(Error::kube("deleting WorkPlacement of", &what, e));
            }
        }
        if !existing.items.is_empty() {
            // Wait for the WorkPlacement controller to remove their files (their deletion
            // events re-queue this Work through `owns`).
            let names: Vec<String> = existing.items.iter().map(|w| w.name_any()).collect();
            let msg = format!(
                "Waiting for WorkPlacements to be deleted: [{}]",
                names.join(" ")
            );
            patch_status(&works, &name, |cur: &Work| {
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
            .map_err(|e| Error::kube("writing status of", &what, e))?;
            return Ok(Action::requeue(cfg.requeue_short));
        }
        edit_finalizers(&works, &name, &[], &[finalizers::WORK_CLEANUP])
            .await
            .map_err(|e| Error::kube("removing finalizer from", &what, e))?;
        return Ok(Action::await_change());
    }

    if !work
        .finalizers()
        .iter()
        .any(|f| f == finalizers::WORK_CLEANUP)
    {
        edit_finalizers(&works, &name, &[finalizers::WORK_CLEANUP], &[])
            .await
            .map_err(|e| Error::kube("adding finalizer to", &what, e))?;
    }

    let dry_run = is_dry_run(&work);
    let resource_work = !resource_name(&work).is_empty();
    let destinations: Vec<DestinationFacts> = Api::<Destination>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::kube("listing Destinations for", &what, e))?
        .items
        .iter()
        .map(DestinationFacts::of)
        .collect();
    let existing: Vec<WorkPlacement> = wp_api
        .list(&by_work)
        .await
        .map_err(|e| Error::kube("listing WorkPlacements of", &what, e))?
        .items;

    let mut outcomes: Vec<(String, GroupOutcome)> = Vec::new();
    let mut placed_names: BTreeSet<String> = BTreeSet::new();
    for group in groups(&work) {
        let resolved = group_selector(&work, group);
        let candidates: Vec<&DestinationFacts> = destinations
            .iter()
            .filter(|d| destination_matches(d, &resolved, dry_run))
            .collect();
        let candidate_names: BTreeSet<&str> = candidates.iter().map(|d| d.name.as_str()).collect();
        let in_group: Vec<&WorkPlacement> = existing
            .iter()
            .filter(|wp| wp.labels().get(labels::WORKLOAD_GROUP_ID) == Some(&group.id))
            .collect();
        let mut outcome = GroupOutcome::default();

        // (destination, existing placement) pairs to upsert.
        let mut targets: Vec<(String, Option<&WorkPlacement>)> = Vec::new();
        for wp in &in_group {
            targets.push((wp_destination(wp), Some(*wp)));
        }
        if resource_work {
            if in_group.is_empty() {
                match rendezvous_choice(&ns, &name, &group.id, candidate_names.iter().copied()) {
                    Some(d) => targets.push((d.to_string(), None)),
                    None => outcome.unscheduled = true,
                }
            }
        } else {
            for d in &candidate_names {
                if !in_group.iter().any(|wp| wp_destination(wp) == *d) {
                    targets.push(((*d).to_string(), None));
                }
            }
            if targets.is_empty() {
                outcome.unscheduled = true;
            }
        }

        for (dest, wp) in targets {
            let misplaced = !candidate_names.contains(dest.as_str());
            outcome.misplaced |= misplaced;
            match upsert_workplacement(&state, &work, group, &dest, wp, misplaced).await {
                Ok(wp_name) => {
                    count_outcome(&state, &work, misplaced, &dest);
                    placed_names.insert(wp_name);
                }
                Err(e) => {
                    tracing::warn!(work = %what, group = %group.id, error = %e, "WorkPlacement upsert failed");
                    outcome.failed = Some(e.to_string());
                }
            }
        }
        if outcome.unscheduled {
            count_outcome(&state, &work, false, "");
        }
        // Announced once per newly unscheduled group, not on every reconcile.
        let already_reported = get_condition(&work_conditions(&work), "ScheduleSucceeded")
            .is_some_and(|c| c.reason == "UnscheduledWorkloads" && c.message.contains(&group.id));
        if outcome.unscheduled && resource_work && !already_reported {
            publish(
                &state.recorder,
                &typed_reference(work.as_ref()),
                EventType::Normal,
                plinth_api::constants::events::NO_MATCHING_DESTINATION,
                format!(
                    "no Destination matches the selectors of workload group {}",
                    group.id
                ),
            )
            .await;
        }
        outcomes.push((group.id.clone(), outcome));
    }

    // Dangling: placements of groups that no longer exist in the Work.
    let group_ids: BTreeSet<&str> = groups(&work).iter().map(|g| g.id.as_str()).collect();
    for wp in &existing {
        let gid = wp
            .labels()
            .get(labels::WORKLOAD_GROUP_ID)
            .map(String::as_str)
            .unwrap_or("");
        if !group_ids.contains(gid) && wp.meta().deletion_timestamp.is_none() {
            let dp = DeleteParams {
                propagation_policy: Some(PropagationPolicy::Background),
                ..Default::default()
            };
            if let Err(e) = wp_api.delete(&wp.name_any(), &dp).await
                && !crate::support::is_not_found(&e)
            {
                return Err(Error::kube("deleting dangling WorkPlacement of", &what, e));
            }
        }
    }

    // Write failures reported by this Work's placements.
    let failing: Vec<(String, String)> = existing
        .iter()
        .filter(|wp| placed_names.contains(&wp.name_any()))
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

    // Beyond Kratix: a Work is Ready only once every placement is written, so a
    // request is not Reconciled before its files reached the store.
    let unwritten: Vec<String> = placed_names
        .iter()
        .filter(|n| {
            !existing.iter().any(|wp| {
                &wp.name_any() == *n && condition_is_true(&wp_conditions(wp), "WriteSucceeded")
            })
        })
        .cloned()
        .collect();
    let summary = summarize(&outcomes, &failing, &unwritten);
    let total = groups(&work).len() as i64;
    let unscheduled_count = outcomes.iter().filter(|(_, o)| o.unscheduled).count() as i64;
    let mut changed_reasons: Vec<(EventType, &'static str, String)> = Vec::new();
    let generation = work.meta().generation;
    patch_status(&works, &name, |cur: &Work| {
        let mut conds = work_conditions(cur);
        let mut changed = false;
        changed_reasons.clear();
        for c in &summary.conditions {
            if set_condition(
                &mut conds, c.type_, c.status, c.reason, &c.message, generation,
            ) {
                changed = true;
                if c.type_ == "ScheduleSucceeded" {
                    changed_reasons.push((c.event_type, c.event_reason, c.message.clone()));
                }
            }
        }
        let st = cur.status.as_ref();
        if st.and_then(|s| s.work_placements) != Some(total)
            || st.and_then(|s| s.work_placements_created) != Some(total - unscheduled_count)
        {
            changed = true;
        }
        changed.then(|| {
            json!({
                "conditions": conds,
                "workPlacements": total,
                "workPlacementsCreated": total - unscheduled_count,
            })
        })
    })
    .await
    .map_err(|e| Error::kube("writing status of", &what, e))?;
    for (t, reason, msg) in changed_reasons {
        let recorder = if WORK_CONTROLLER_REASONS.contains(&reason) {
            &state.work_recorder
        } else {
            &state.recorder
        };
        publish(recorder, &typed_reference(work.as_ref()), t, reason, msg).await;
    }

    if let Some(err) = outcomes.iter().find_map(|(_, o)| o.failed.clone()) {
        return Err(Error::Invalid {
            object: what,
            message: err,
        });
    }
    if unscheduled_count > 0 && resource_work {
        return Ok(Action::requeue(cfg.requeue_slow));
    }
    Ok(Action::await_change())
}

fn wp_destination(wp: &WorkPlacement) -> String {
    wp.spec.target_destination_name.clone().unwrap_or_default()
}

/// One condition the Work should carry, with the event announcing a change to it.
struct WantedCondition {
    type_: &'static str,
    status: bool,
    reason: &'static str,
    message: String,
    event_type: EventType,
    event_reason: &'static str,
}

struct Summary {
    conditions: Vec<WantedCondition>,
}

/// The Work's `Ready` and `ScheduleSucceeded` conditions from the group outcomes and
/// the failing placements (`WorkplacementsFailing` names each failing placement).
fn summarize(
    outcomes: &[(String, GroupOutcome)],
    failing: &[(String, String)],
    unwritten: &[String],
) -> Summary {
    let ids = |pred: &dyn Fn(&GroupOutcome) -> bool| -> String {
        outcomes
            .iter()
            .filter(|(_, o)| pred(o))
            .map(|(id, _)| id.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let cond = |type_, status, reason, message: String, event_type, event_reason| WantedCondition {
        type_,
        status,
        reason,
        message,
        event_type,
        event_reason,
    };
    let conditions = if !failing.is_empty() {
        let names: Vec<&str> = failing.iter().map(|(n, _)| n.as_str()).collect();
        let details: Vec<String> = failing
            .iter()
            .filter(|(_, m)| !m.is_empty())
            .map(|(n, m)| format!("{n}: {m}"))
            .collect();
        let mut msg = format!("Workplacements failed to write: [{}]", names.join(" "));
        if !details.is_empty() {
            msg.push_str("; ");
            msg.push_str(&details.join("; "));
        }
        vec![
            cond(
                "ScheduleSucceeded",
                false,
                "WorkplacementsFailing",
                msg,
                EventType::Warning,
                plinth_api::constants::events::WORKPLACEMENTS_FAILING,
            ),
            cond(
                "Ready",
                false,
                "WorkplacementsFailing",
                "Failing".into(),
                EventType::Warning,
                plinth_api::constants::events::WORKPLACEMENTS_FAILING,
            ),
        ]
    } else if outcomes.iter().any(|(_, o)| o.failed.is_some()) {
        let msg = format!(
            "Failed to schedule or update for workloadGroups: [{}]",
            ids(&|o| o.failed.is_some())
        );
        vec![
            cond(
                "ScheduleSucceeded",
                false,
                "FailedToScheduleWorkloads",
                msg,
                EventType::Warning,
                "FailedToScheduleWorkloads",
            ),
            cond(
                "Ready",
                false,
                "FailedToScheduleWorkloads",
                "Pending".into(),
                EventType::Warning,
                "FailedToScheduleWorkloads",
            ),
        ]
    } else if outcomes.iter().any(|(_, o)| o.unscheduled) {
        let msg = format!(
            "No matching destination found for workloadGroups: [{}]",
            ids(&|o| o.unscheduled)
        );
        vec![
            cond(
                "ScheduleSucceeded",
                false,
                "UnscheduledWorkloads",
                msg.clone(),
                EventType::Normal,
                plinth_api::constants::events::WAITING_DESTINATION,
            ),
            cond(
                "Ready",
                false,
                "UnscheduledWorkloads",
                "Pending".into(),
                EventType::Normal,
                plinth_api::constants::events::WAITING_DESTINATION,
            ),
        ]
    } else if outcomes.iter().any(|(_, o)| o.misplaced) {
        let msg = format!(
            "Target destination no longer matches destinationSelectors for workloadGroups: [{}]",
            ids(&|o| o.misplaced)
        );
        vec![
            cond(
                "ScheduleSucceeded",
                false,
                "DestinationSelectorMismatch",
                msg,
                EventType::Warning,
                plinth_api::constants::events::DESTINATION_SELECTOR_MISMATCH,
            ),
            cond(
                "Ready",
                false,
                "Misplaced",
                "Misplaced".into(),
                EventType::Warning,
                plinth_api::constants::events::DESTINATION_SELECTOR_MISMATCH,
            ),
        ]
    } else if !unwritten.is_empty() {
        vec![
            cond(
                "ScheduleSucceeded",
                true,
                "AllWorkplacementsScheduled",
                "All workplacements scheduled successfully".into(),
                EventType::Normal,
                plinth_api::constants::events::ALL_WORKPLACEMENTS_SCHEDULED,
            ),
            cond(
                "Ready",
                false,
                "WorkplacementsPending",
                "Pending".into(),
                EventType::Normal,
                plinth_api::constants::events::ALL_WORKPLACEMENTS_SCHEDULED,
            ),
        ]
    } else {
        vec![
            cond(
                "ScheduleSucceeded",
                true,
                "AllWorkplacementsScheduled",
                "All workplacements scheduled successfully".into(),
                EventType::Normal,
                plinth_api::constants::events::ALL_WORKPLACEMENTS_SCHEDULED,
            ),
            cond(
                "Ready",
                true,
                "AllWorkplacementsScheduled",
                "Ready".into(),
                EventType::Normal,
                plinth_api::constants::events::ALL_WORKPLACEMENTS_SCHEDULED,
            ),
        ]
    };
    Summary { conditions }
}

/// Creates or updates the WorkPlacement of `group` on `dest` and sets its scheduling
/// conditions. Returns its name.
async fn upsert_workplacement(
    state: &SchedulerState,
    work: &Work,
    group: &WorkloadGroup,
    dest: &str,
    existing: Option<&WorkPlacement>,
    misplaced: bool,
) -> Result<String, Error> {
    let ns = work.namespace().unwrap_or_default();
    let work_name = work.name_any();
    let api: Api<WorkPlacement> = Api::namespaced(state.ctx.client.clone(), &ns);
    let name = existing
        .map(|wp| wp.name_any())
        .unwrap_or_else(|| workplacement_name(&work_name, dest, &group.id));
    let what = format!("WorkPlacement {ns}/{name}");

    let mut labels: BTreeMap<String, String> = BTreeMap::from([
        (labels::WORK.to_string(), work_name.clone()),
        (labels::WORKLOAD_GROUP_ID.to_string(), group.id.clone()),
        (
            labels::TARGET_DESTINATION_NAME.to_string(),
            dest.to_string(),
        ),
    ]);
    if let Some(p) = work.labels().get(labels::PIPELINE_NAME) {
        labels.insert(labels::PIPELINE_NAME.to_string(), p.clone());
    }
    if misplaced {
        labels.insert(labels::MISPLACED.to_string(), "true".to_string());
    }
    let mut annotations: BTreeMap<String, String> = existing
        .map(|wp| wp.annotations().clone())
        .unwrap_or_default();
    for (k, v) in work.annotations() {
        if k != "kubectl.kubernetes.io/last-applied-configuration" {
            annotations.insert(k.clone(), v.clone());
        }
    }
    let spec = json!({
        "targetDestinationName": dest,
        "workloads": group.workloads,
        "promiseName": work.spec.promise_name,
        "resourceName": work.spec.resource_name,
        "id": group.id,
        "generation": work.meta().generation.unwrap_or(0),
    });

    let mut changed = false;
    match existing {
        Some(wp) => {
            let current_spec = serde_json::to_value(&wp.spec).unwrap_or(Value::Null);
            let spec_same = [
                "targetDestinationName",
                "workloads",
                "promiseName",
                "resourceName",
                "id",
                "generation",
            ]
            .iter()
            .all(|k| json_field_eq(&current_spec, &spec, k));
            let labels_same = wp.labels() == &labels;
            let annotations_same = wp.annotations() == &annotations;
            if !(spec_same && labels_same && annotations_same)
                && wp.meta().deletion_timestamp.is_none()
            {
                // Labels are replaced wholesale: keys no longer wanted are nulled.
                let mut label_patch = serde_json::Map::new();
                for k in wp.labels().keys() {
                    label_patch.insert(k.clone(), Value::Null);
                }
                for (k, v) in &labels {
                    label_patch.insert(k.clone(), json!(v));
                }
                let body = json!({
                    "metadata": {
                        "resourceVersion": wp.meta().resource_version,
                        "labels": label_patch,
                        "annotations": annotations,
                    },
                    "spec": spec,
                });
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&body))
                    .await
                    .map_err(|e| Error::kube("updating", &what, e))?;
                changed = true;
            }
        }
        None => {
            let owner = OwnerReference {
                api_version: Work::api_version(&()).into_owned(),
                kind: Work::kind(&()).into_owned(),
                name: work_name.clone(),
                uid: work.meta().uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            };
            let obj = json!({
                "apiVersion": WorkPlacement::api_version(&()),
                "kind": WorkPlacement::kind(&()),
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": labels,
                    "annotations": annotations,
                    "finalizers": [finalizers::WORKPLACEMENT_REPO_CLEANUP],
                    "ownerReferences": [owner],
                },
                "spec": spec,
            });
            let wp: WorkPlacement = serde_json::from_value(obj).map_err(|e| Error::Invalid {
                object: what.clone(),
                message: format!("building WorkPlacement: {e}"),
            })?;
            match api.create(&PostParams::default(), &wp).await {
                Ok(_) => changed = true,
                Err(ref e) if crate::support::is_already_exists(e) => {
                    // Created concurrently (or by a previous reconcile whose list was stale):
                    // the next reconcile updates it.
                }
                Err(e) => return Err(Error::kube("creating", &what, e)),
            }
        }
    }
    if changed {
        publish(
            &state.recorder,
            &typed_reference(work),
            EventType::Normal,
            plinth_api::constants::events::WORKPLACEMENT_RECONCILED,
            format!("WorkPlacement {name} reconciled for Destination {dest}"),
        )
        .await;
    }

    // Scheduling conditions on the WorkPlacement ("Status").
    let mut became_misplaced = false;
    patch_status(&api, &name, |cur: &WorkPlacement| {
        let mut conds = wp_conditions(cur);
        let gen_ = cur.meta().generation;
        let mut ch = false;
        became_misplaced = false;
        if misplaced {
            let was = condition_is_false(&conds, condition_types::SCHEDULE_SUCCEEDED);
            ch |= set_condition(
                &mut conds,
                condition_types::SCHEDULE_SUCCEEDED,
                false,
                reasons::DESTINATION_SELECTOR_MISMATCH,
                messages::TARGET_NO_LONGER_MATCHES,
                gen_,
            );
            became_misplaced = !was;
        } else {
            ch |= set_condition(
                &mut conds,
                condition_types::SCHEDULE_SUCCEEDED,
                true,
                reasons::SCHEDULED_TO_DESTINATION,
                messages::SCHEDULED_TO_CORRECT_DESTINATION,
                gen_,
            );
        }
        // `Ready` is the WorkPlacement controller's alone: it summarises this condition
        // with its own `WriteSucceeded`.
        ch.then(|| json!({"conditions": conds}))
    })
    .await
    .map_err(|e| Error::kube("writing status of", &what, e))?;
    if became_misplaced && let Ok(Some(wp)) = api.get_opt(&name).await {
        publish(&state.recorder, &typed_reference(&wp), EventType::Warning, plinth_api::constants::events::DESTINATION_SELECTOR_MISMATCH, format!("Destination {dest} no longer matches the destinationSelectors of workload group {}", group.id))
        .await;
    }
    Ok(name)
}

fn json_field_eq(a: &Value, b: &Value, key: &str) -> bool {
    let norm = |v: Option<&Value>| match v {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(s)) if s.is_empty() => Value::Null,
        Some(Value::Array(a)) if a.is_empty() => Value::Null,
        Some(v) => v.clone(),
    };
    norm(a.get(key)) == norm(b.get(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn dest(name: &str, l: &[(&str, &str)], strict: bool) -> DestinationFacts {
        DestinationFacts {
            name: name.into(),
            labels: labels(l),
            strict_match_labels: strict,
            deleting: false,
        }
    }

    #[test]
    fn selector_precedence_promise_wins() {
        let rw = labels(&[("env", "dev"), ("zone", "eu")]);
        let pw = labels(&[("env", "staging"), ("tier", "gold")]);
        let p = labels(&[("env", "prod")]);
        // Order in the Work does not matter: promise > promise-workflow > resource-workflow.
        let resolved = resolve_selectors([
            (selector_source::PROMISE, &p),
            (selector_source::RESOURCE_WORKFLOW, &rw),
            (selector_source::PROMISE_WORKFLOW, &pw),
        ]);
        assert_eq!(
            resolved,
            labels(&[("env", "prod"), ("zone", "eu"), ("tier", "gold")])
        );
        let resolved = resolve_selectors([
            (selector_source::PROMISE_WORKFLOW, &pw),
            (selector_source::RESOURCE_WORKFLOW, &rw),
        ]);
        assert_eq!(resolved.get("env").unwrap(), "staging");
        assert!(resolve_selectors(std::iter::empty()).is_empty());
    }

    #[test]
    fn matching_table_of_section_5_4() {
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a [(&'a str, &'a str)], bool);
        let cases: &[Case] = &[
            (&[], &[], true),
            (&[("env", "dev")], &[], true),
            (&[("env", "dev")], &[("env", "dev")], true),
            (&[("env", "dev"), ("zone", "eu")], &[("env", "dev")], true),
            (&[("env", "dev")], &[("env", "prod")], false),
            (&[("env", "dev")], &[("env", "dev"), ("zone", "eu")], false),
            (&[], &[("env", "dev")], false),
        ];
        for (dl, sel, want) in cases {
            let d = dest("d", dl, false);
            assert_eq!(
                destination_matches(&d, &labels(sel), false),
                *want,
                "dest {dl:?} selector {sel:?}"
            );
        }
    }

    #[test]
    fn strict_match_labels_b10() {
        // a: env=prod strict; b: no labels (strict irrelevant when unlabelled).
        let a = dest("a", &[("env", "prod")], true);
        let b = dest("b", &[], true);
        let none = BTreeMap::new();
        assert!(!destination_matches(&a, &none, false));
        assert!(destination_matches(&b, &none, false));
        assert!(destination_matches(&a, &labels(&[("env", "prod")]), false));
        let c = dest("c", &[("env", "testing")], false);
        assert!(destination_matches(
            &c,
            &labels(&[("env", "testing")]),
            false
        ));
        assert!(!destination_matches(
            &a,
            &labels(&[("env", "testing")]),
            false
        ));
    }

    #[test]
    fn deleting_and_dry_run_destinations() {
        let mut d = dest("d", &[], false);
        d.deleting = true;
        assert!(!destination_matches(&d, &BTreeMap::new(), false));
        let dry = dest("dry", &[(labels::DRY_RUN, "true")], false);
        assert!(!destination_matches(&dry, &BTreeMap::new(), false));
        assert!(destination_matches(
            &dry,
            &labels(&[(labels::DRY_RUN, "true")]),
            true
        ));
    }

    #[test]
    fn rendezvous_is_deterministic_and_order_independent() {
        let names = ["alpha", "beta", "gamma", "delta"];
        let first = rendezvous_choice("ns", "w", "g", names.iter().copied()).unwrap();
        let mut reversed = names;
        reversed.reverse();
        assert_eq!(
            rendezvous_choice("ns", "w", "g", reversed.iter().copied()).unwrap(),
            first
        );
        assert_eq!(rendezvous_choice("ns", "w", "g", std::iter::empty()), None);
        // Removing a loser never changes the winner; removing the winner picks the runner-up.
        let without_loser: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| *n != first)
            .take(2)
            .chain([first])
            .collect();
        assert_eq!(
            rendezvous_choice("ns", "w", "g", without_loser.iter().copied()).unwrap(),
            first
        );
        // The winner is the maximum weight.
        let max = names
            .iter()
            .map(|d| rendezvous_weight("ns", "w", "g", d))
            .max()
            .unwrap();
        assert_eq!(rendezvous_weight("ns", "w", "g", first), max);
    }

    #[test]
    fn rendezvous_spreads_groups() {
        let names = ["d1", "d2", "d3"];
        let mut counts: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for i in 0..600 {
            let w = format!("work-{i}");
            *counts
                .entry(
                    rendezvous_choice(
                        "team-a",
                        &w,
                        "5058f1af8388633f609cadb75a75dc9d",
                        names.iter().copied(),
                    )
                    .unwrap(),
                )
                .or_default() += 1;
        }
        for n in names {
            let c = counts.get(n).copied().unwrap_or(0);
            assert!((120..=280).contains(&c), "{n} got {c} of 600: {counts:?}");
        }
    }

    #[test]
    fn workplacement_names() {
        assert_eq!(
            workplacement_name(
                "redis-abc12",
                "worker-1",
                "5058f1af8388633f609cadb75a75dc9d"
            ),
            "redis-abc12.worker-1-5058f"
        );
        let long_work = "w".repeat(200);
        let long_dest = "d".repeat(100);
        let n = workplacement_name(&long_work, &long_dest, "5058f1af8388633f609cadb75a75dc9d");
        assert!(n.len() <= MAX_NAME_LEN, "{}", n.len());
        assert!(n.chars().last().unwrap().is_ascii_alphanumeric());
        // Deterministic.
        assert_eq!(
            n,
            workplacement_name(&long_work, &long_dest, "5058f1af8388633f609cadb75a75dc9d")
        );
        assert_ne!(
            n,
            workplacement_name(&long_work, &long_dest, "aaaaaf1af8388633f609cadb75a75dc9d")
        );
    }

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

    #[test]
    fn summary_priorities() {
        let ok = GroupOutcome::default();
        let uns = GroupOutcome {
            unscheduled: true,
            ..Default::default()
        };
        let mis = GroupOutcome {
            misplaced: true,
            ..Default::default()
        };
        let s = summarize(
            &[("g1".into(), ok), ("g2".into(), uns), ("g3".into(), mis)],
            &[],
            &[],
        );
        assert_eq!(s.conditions[0].reason, "UnscheduledWorkloads");
        assert_eq!(
            s.conditions[0].message,
            "No matching destination found for workloadGroups: [g2]"
        );
        let s = summarize(
            &[(
                "g3".into(),
                GroupOutcome {
                    misplaced: true,
                    ..Default::default()
                },
            )],
            &[],
            &[],
        );
        assert_eq!(s.conditions[1].reason, "Misplaced");
        let s = summarize(
            &[("g1".into(), GroupOutcome::default())],
            &[("wp1".into(), "bad path".into())],
            &[],
        );
        assert_eq!(s.conditions[0].reason, "WorkplacementsFailing");
        assert!(
            s.conditions[0]
                .message
                .starts_with("Workplacements failed to write: [wp1]")
        );
        assert!(s.conditions[0].message.contains("bad path"));
        let s = summarize(
            &[("g1".into(), GroupOutcome::default())],
            &[],
            &["wp1".into()],
        );
        assert_eq!(
            (s.conditions[0].status, s.conditions[1].status),
            (true, false),
            "scheduled, not yet written"
        );
        assert_eq!(s.conditions[1].message, "Pending");
        let s = summarize(&[("g1".into(), GroupOutcome::default())], &[], &[]);
        assert!(s.conditions.iter().all(|c| c.status));
    }
}
