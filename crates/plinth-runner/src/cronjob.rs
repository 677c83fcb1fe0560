//! `batch/v1` CronJobs in embedded mode: what Kubernetes' CronJob controller does, for the
//! runner's cluster. Each CronJob is looked at every tick; [`plan`] decides, from the
//! CronJob, its Jobs and the time, which Job to create, which to delete and what the status
//! says; [`run_cronjobs`] carries that out through the API. The clock is a parameter, so
//! schedules are tested with simulated time.
//!
//! Behaviour, as Kubernetes':
//! * `schedule`: five cron fields or a macro (`@yearly`, `@annually`, `@monthly`, `@weekly`,
//!   `@daily`, `@midnight`, `@hourly`), evaluated in `timeZone` (an IANA name; UTC when
//!   unset, the embedded server's zone).
//! * The most recent scheduled time after `lastScheduleTime` (or the creation time) that is
//!   not older than `startingDeadlineSeconds` starts one Job; earlier missed times are
//!   skipped. The Job is named `<cronjob>-<scheduled time in minutes since the epoch>`, so a
//!   time is never started twice.
//! * `concurrencyPolicy`: `Allow` (default), `Forbid` (skip while a Job is active; the time is
//!   tried again until its deadline), `Replace` (delete the active Jobs first).
//! * `suspend: true` starts nothing; finished Jobs beyond `successfulJobsHistoryLimit`
//!   (default 3) and `failedJobsHistoryLimit` (default 1) are deleted, oldest first.
//! * `status.active`, `lastScheduleTime`, `lastSuccessfulTime`; written only when changed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use plinth_api::events::{EventRecorder, EventType};
use plinth_api::schedule::{Schedule, ScheduleError};

use crate::RunnerError;

/// `source.component` of the scheduler's Events (Kubernetes' CronJob controller's).
pub const COMPONENT: &str = "cronjob-controller";
/// Warning: the schedule parses but never fires (`59 23 31 2 *`, the 31st of February).
pub const REASON_INVALID_SCHEDULE: &str = "InvalidSchedule";
/// Warning: the schedule does not parse (admission normally refuses it).
pub const REASON_UNPARSEABLE_SCHEDULE: &str = "UnparseableSchedule";
/// Warning: `spec.timeZone` names no known zone.
pub const REASON_UNKNOWN_TIME_ZONE: &str = "UnknownTimeZone";

/// Annotation on a Job created by a CronJob: the scheduled time (RFC 3339).
pub const SCHEDULED_TIMESTAMP_ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
/// Default `successfulJobsHistoryLimit`.
pub const DEFAULT_SUCCESSFUL_HISTORY: i32 = 3;
/// Default `failedJobsHistoryLimit`.
pub const DEFAULT_FAILED_HISTORY: i32 = 1;
/// How far back missed times are searched when a CronJob has no deadline (Kubernetes gives
/// up after 100 missed times; a week of minutes is plenty to find the latest one).
const MAX_LOOKBACK_MINUTES: i64 = 7 * 24 * 60;

/// The time source of the CronJob scheduler.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// What [`plan`] decided for one CronJob.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// A Job to create, for this scheduled time.
    pub create: Option<Job>,
    /// Active Jobs to delete first (`Replace`).
    pub replace: Vec<String>,
    /// Finished Jobs beyond the history limits.
    pub prune: Vec<String>,
    /// The status to write (when it differs from the current one).
    pub status: CronJobStatus,
    /// A Warning Event to record: why nothing can be scheduled (Kubernetes' reasons and
    /// messages).
    pub warning: Option<Warning>,
}

/// A Warning Event about a CronJob: its reason and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// `InvalidSchedule`, `UnparseableSchedule` or `UnknownTimeZone`.
    pub reason: &'static str,
    /// Kubernetes' message text for that reason.
    pub message: String,
}

/// The Warning for a schedule or time zone that does not parse, with the CronJob
/// controller's text (`invalid timeZone: "…": unknown time zone …`, `unparseable
/// schedule: "…" : …`).
fn parse_warning(
    spec: &k8s_openapi::api::batch::v1::CronJobSpec,
    error: &ScheduleError,
) -> Warning {
    match (spec.time_zone.as_deref(), error) {
        (Some(tz), ScheduleError::UnknownTimeZone { .. }) => Warning {
            reason: REASON_UNKNOWN_TIME_ZONE,
            message: format!("invalid timeZone: {tz:?}: unknown time zone {tz}"),
        },
        _ => {
            let prefix = format!("spec.schedule {:?}: ", spec.schedule);
            let error = error.to_string();
            let cause = error.strip_prefix(&prefix).unwrap_or(&error);
            Warning {
                reason: REASON_UNPARSEABLE_SCHEDULE,
                message: format!("unparseable schedule: {:?} : {cause}", spec.schedule),
            }
        }
    }
}

fn finished(job: &Job) -> Option<bool> {
    let conds = job.status.as_ref()?.conditions.as_ref()?;
    for c in conds {
        if c.status == "True" && (c.type_ == "Complete" || c.type_ == "SuccessCriteriaMet") {
            return Some(true);
        }
        if c.status == "True" && (c.type_ == "Failed" || c.type_ == "FailureTarget") {
            return Some(false);
        }
    }
    None
}

fn owned_by(job: &Job, cj: &CronJob) -> bool {
    let uid = cj.metadata.uid.as_deref();
    job.owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && Some(o.uid.as_str()) == uid)
}

fn job_time(job: &Job) -> Timestamp {
    job.annotations()
        .get(SCHEDULED_TIMESTAMP_ANNOTATION)
        .and_then(|s| s.parse().ok())
        .or_else(|| job.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Why a CronJob cannot be planned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The CronJob has no `spec`.
    #[error("spec is missing")]
    MissingSpec,
}

/// Decides what to do for `cj` at `now`, given every Job in its namespace.
///
/// A schedule or time zone that does not parse, or a schedule that never fires, starts
/// nothing and sets [`Plan::warning`] (as Kubernetes' controller, a suspended CronJob's
/// schedule is not looked at; its time zone is).
///
/// # Errors
/// [`PlanError::MissingSpec`] when the CronJob has no spec.
pub fn plan(cj: &CronJob, jobs: &[Job], now: Timestamp) -> Result<Plan, PlanError> {
    let spec = cj.spec.as_ref().ok_or(PlanError::MissingSpec)?;
    let schedule = Schedule::parse(&spec.schedule, spec.time_zone.as_deref());
    let mut own: Vec<&Job> = jobs.iter().filter(|j| owned_by(j, cj)).collect();
    own.sort_by_key(|j| job_time(j));
    let mut status = cj.status.clone().unwrap_or_default();
    let mut plan = Plan::default();
    let active: Vec<&Job> = own
        .iter()
        .copied()
        .filter(|j| finished(j).is_none() && j.metadata.deletion_timestamp.is_none())
        .collect();
    // Last successful time: the latest completion among succeeded Jobs.
    let last_ok = own
        .iter()
        .filter(|j| finished(j) == Some(true))
        .filter_map(|j| j.status.as_ref()?.completion_time.as_ref().map(|t| t.0))
        .max();
    if let Some(t) = last_ok
        && status.last_successful_time.as_ref().is_none_or(|c| c.0 < t)
    {
        status.last_successful_time = Some(Time(t));
    }
    plan.prune = history_to_prune(spec, &own);
    let mut still_active: Vec<&Job> = active.clone();
    let suspended = spec.suspend.unwrap_or(false);
    let due = match &schedule {
        Err(e) => {
            if !suspended || matches!(e, ScheduleError::UnknownTimeZone { .. }) {
                plan.warning = Some(parse_warning(spec, e));
            }
            None
        }
        Ok(_) if suspended => None,
        Ok(schedule) => match due_time(cj, schedule, now) {
            Due::At(t) => Some(t),
            Due::Nothing => None,
            Due::Never => {
                // Kubernetes' controller finds no two schedule times a second apart.
                plan.warning = Some(Warning {
                    reason: REASON_INVALID_SCHEDULE,
                    message: format!(
                        "invalid schedule: {} : time difference between two schedules is less than 1 second",
                        spec.schedule
                    ),
                });
                None
            }
        },
    };
    if let Some(t) = due {
        let name = format!("{}-{}", cj.name_any(), t.as_second() / 60);
        let exists = own.iter().any(|j| j.name_any() == name);
        let policy = spec.concurrency_policy.as_deref().unwrap_or("Allow");
        let blocked = policy == "Forbid" && !active.is_empty();
        if !exists && !blocked {
            if policy == "Replace" {
                plan.replace = active.iter().map(|j| j.name_any()).collect();
                still_active.clear();
            }
            plan.create = Some(job_for(cj, &name, t));
        }
        if !blocked {
            status.last_schedule_time = Some(Time(t));
        }
    }
    let mut refs: Vec<ObjectReference> = still_active.iter().map(|j| job_ref(j)).collect();
    if let Some(j) = &plan.create {
        refs.push(job_ref(j));
    }
    status.active = (!refs.is_empty()).then_some(refs);
    plan.status = status;
    Ok(plan)
}

/// What [`due_time`] found.
enum Due {
    /// Start the Job of this scheduled time.
    At(Timestamp),
    /// No time is due now.
    Nothing,
    /// The schedule never fires after the last schedule (or the creation).
    Never,
}

/// The scheduled time to start now, if any: the latest one after the last schedule (or the
/// creation), not older than `startingDeadlineSeconds`.
fn due_time(cj: &CronJob, schedule: &Schedule, now: Timestamp) -> Due {
    let Some(spec) = cj.spec.as_ref() else {
        return Due::Nothing;
    };
    let last = cj
        .status
        .as_ref()
        .and_then(|s| s.last_schedule_time.as_ref().map(|t| t.0))
        .or_else(|| cj.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .unwrap_or(now);
    let mut earliest = last;
    if let Some(d) = spec.starting_deadline_seconds {
        let oldest_allowed = now - jiff::SignedDuration::from_secs(d);
        // A time exactly at the deadline is still allowed.
        let bound = oldest_allowed - jiff::SignedDuration::from_secs(1);
        if bound > earliest {
            earliest = bound;
        }
    }
    match schedule.latest_between(earliest, now, MAX_LOOKBACK_MINUTES) {
        Some(t) => Due::At(t),
        None if schedule.next_after(last).is_none() => Due::Never,
        None => Due::Nothing,
    }
}

fn history_to_prune(spec: &k8s_openapi::api::batch::v1::CronJobSpec, own: &[&Job]) -> Vec<String> {
    let keep_ok = spec
        .successful_jobs_history_limit
        .unwrap_or(DEFAULT_SUCCESSFUL_HISTORY)
        .max(0) as usize;
    let keep_failed = spec
        .failed_jobs_history_limit
        .unwrap_or(DEFAULT_FAILED_HISTORY)
        .max(0) as usize;
    let mut out = Vec::new();
    for (want, keep) in [(true, keep_ok), (false, keep_failed)] {
        let done: Vec<&&Job> = own.iter().filter(|j| finished(j) == Some(want)).collect();
        let extra = done.len().saturating_sub(keep);
        out.extend(done.iter().take(extra).map(|j| j.name_any()));
    }
    out
}

fn job_ref(j: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: j.metadata.name.clone(),
        namespace: j.metadata.namespace.clone(),
        uid: j.metadata.uid.clone(),
        resource_version: j.metadata.resource_version.clone(),
        ..ObjectReference::default()
    }
}

fn job_for(cj: &CronJob, name: &str, t: Timestamp) -> Job {
    let tmpl = cj
        .spec
        .as_ref()
        .map(|s| s.job_template.clone())
        .unwrap_or_default();
    let tmeta = tmpl.metadata.unwrap_or_default();
    let mut annotations = tmeta.annotations.unwrap_or_default();
    annotations.insert(
        SCHEDULED_TIMESTAMP_ANNOTATION.into(),
        t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    );
    Job {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: cj.metadata.namespace.clone(),
            labels: tmeta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "batch/v1".into(),
                kind: "CronJob".into(),
                name: cj.name_any(),
                uid: cj.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: tmpl.spec,
        status: None,
    }
}

/// Kubernetes' CronJob controller for the embedded cluster: carries out [`plan`] through
/// the API and records its Warnings, each once per CronJob generation (a settled CronJob,
/// even one whose schedule never fires, writes nothing). Cheap to clone; clones share what
/// was recorded.
#[derive(Clone)]
pub struct CronJobController {
    client: kube::Client,
    recorder: EventRecorder,
    /// The last Warning recorded per CronJob uid, with the generation it was about.
    warned: Arc<Mutex<HashMap<String, Warned>>>,
}

/// A Warning recorded about a CronJob, with the generation it was about.
type Warned = (Option<i64>, Warning);

impl CronJobController {
    /// A controller writing through `client`, its Events as `cronjob-controller`.
    pub fn new(client: kube::Client) -> Self {
        CronJobController {
            recorder: EventRecorder::new(client.clone(), COMPONENT),
            client,
            warned: Arc::default(),
        }
    }

    /// Carries out [`plan`] for one CronJob at `now`.
    ///
    /// # Errors
    /// API errors, and a CronJob without a spec.
    pub async fn sync(&self, cj: &CronJob, now: Timestamp) -> Result<(), RunnerError> {
        let client = &self.client;
        let ns = cj.namespace().unwrap_or_default();
        let what = format!("CronJob {ns}/{}", cj.name_any());
        let jobs_api: Api<Job> = Api::namespaced(client.clone(), &ns);
        let jobs = jobs_api
            .list(&ListParams::default())
            .await
            .map_err(|e| RunnerError::kube(format!("list Jobs for {what}"), e))?;
        let p =
            plan(cj, &jobs.items, now).map_err(|m| RunnerError::Config(format!("{what}: {m}")))?;
        self.warn(cj, p.warning.as_ref()).await;
        let bg = DeleteParams::background();
        for name in p.replace.iter().chain(&p.prune) {
            match jobs_api.delete(name, &bg).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                Err(e) => return Err(RunnerError::kube(format!("delete Job {ns}/{name}"), e)),
            }
        }
        let mut status = p.status;
        if let Some(job) = &p.create {
            match jobs_api.create(&PostParams::default(), job).await {
                Ok(created) => {
                    if let Some(a) = status.active.as_mut().and_then(|a| a.last_mut()) {
                        *a = job_ref(&created);
                    }
                }
                Err(kube::Error::Api(s)) if s.is_already_exists() => {}
                Err(e) => return Err(RunnerError::kube(format!("create Job for {what}"), e)),
            }
        }
        if Some(&status) != cj.status.as_ref() {
            let api: Api<CronJob> = Api::namespaced(client.clone(), &ns);
            let patch = serde_json::json!({"status": status});
            api.patch_status(
                &cj.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(|e| RunnerError::kube(format!("write status of {what}"), e))?;
        }
        Ok(())
    }

    /// Records `warning` about `cj` unless the same one was recorded for its generation;
    /// forgets the CronJob once it has none.
    async fn warn(&self, cj: &CronJob, warning: Option<&Warning>) {
        let uid = cj.metadata.uid.clone().unwrap_or_default();
        let generation = cj.metadata.generation;
        {
            let mut warned = self.warned.lock().expect("not poisoned");
            let Some(w) = warning else {
                warned.remove(&uid);
                return;
            };
            if warned.get(&uid) == Some(&(generation, w.clone())) {
                return;
            }
            warned.insert(uid, (generation, w.clone()));
        }
        if let Some(w) = warning {
            let regarding = ObjectReference {
                api_version: Some("batch/v1".into()),
                kind: Some("CronJob".into()),
                name: cj.metadata.name.clone(),
                namespace: cj.metadata.namespace.clone(),
                uid: cj.metadata.uid.clone(),
                resource_version: cj.metadata.resource_version.clone(),
                ..ObjectReference::default()
            };
            self.recorder
                .record(&regarding, EventType::Warning, w.reason, w.message.clone())
                .await;
        }
    }

    /// Forgets the CronJobs whose uid is not in `live`.
    fn retain(&self, live: &std::collections::HashSet<String>) {
        self.warned
            .lock()
            .expect("not poisoned")
            .retain(|uid, _| live.contains(uid));
    }
}

/// Schedules every CronJob in the cluster, looking every `tick` and at once when a
/// CronJob changes (a watch, as Kubernetes' controller reacts to a new CronJob), with
/// `clock` for the time. Runs until aborted; API errors are logged and tried again at the
/// next tick.
pub async fn run_cronjobs(client: kube::Client, clock: Clock, tick: Duration) {
    use futures::StreamExt as _;
    let api: Api<CronJob> = Api::all(client.clone());
    let controller = CronJobController::new(client);
    let changed = Arc::new(tokio::sync::Notify::new());
    let wake = changed.clone();
    let watch = api.clone();
    let _watch = AbortOnDrop(tokio::spawn(async move {
        let mut events =
            kube::runtime::watcher(watch, kube::runtime::watcher::Config::default()).boxed();
        while let Some(event) = events.next().await {
            if matches!(
                event,
                Ok(kube::runtime::watcher::Event::Apply(_)
                    | kube::runtime::watcher::Event::Delete(_))
            ) {
                wake.notify_one();
            }
        }
    }));
    loop {
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                for cj in &list.items {
                    if cj.meta().deletion_timestamp.is_some() {
                        continue;
                    }
                    if let Err(e) = controller.sync(cj, clock()).await {
                        tracing::warn!(error = %e, "cronjob scheduler");
                    }
                }
                controller.retain(
                    &list
                        .items
                        .iter()
                        .filter_map(|c| c.metadata.uid.clone())
                        .collect(),
                );
            }
            Err(e) => tracing::debug!(error = %e, "list CronJobs"),
        }
        tokio::select! {
            () = tokio::time::sleep(tick) => {}
            () = changed.notified() => {}
        }
    }
}

/// Aborts a task when dropped (the CronJob watch ends with the scheduler).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{CronJobSpec, JobCondition, JobStatus, JobTemplateSpec};
    use serde_json::json;

    /// 2026-01-05T00:00:00Z, a Monday in winter.
    fn t0() -> Timestamp {
        "2026-01-05T00:00:00Z".parse().unwrap()
    }

    fn at(min: i64) -> Timestamp {
        t0() + jiff::SignedDuration::from_secs(min * 60)
    }

    fn cronjob(schedule: &str, extra: serde_json::Value) -> CronJob {
        let mut spec = json!({
            "schedule": schedule,
            "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}
        });
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        CronJob {
            metadata: ObjectMeta {
                name: Some("check".into()),
                namespace: Some("default".into()),
                uid: Some("cj-uid".into()),
                creation_timestamp: Some(Time(t0())),
                ..ObjectMeta::default()
            },
            spec: Some(serde_json::from_value::<CronJobSpec>(spec).unwrap()),
            status: None,
        }
    }

    fn job_of(cj: &CronJob, minute: i64, outcome: Option<bool>) -> Job {
        let mut j = job_for(
            cj,
            &format!("check-{}", at(minute).as_second() / 60),
            at(minute),
        );
        if let Some(ok) = outcome {
            j.status = Some(JobStatus {
                conditions: Some(vec![JobCondition {
                    type_: if ok { "Complete" } else { "Failed" }.into(),
                    status: "True".into(),
                    ..JobCondition::default()
                }]),
                completion_time: ok.then(|| Time(at(minute + 1))),
                ..JobStatus::default()
            });
        }
        j
    }

    fn created(p: &Plan) -> Option<String> {
        p.create.as_ref().map(|j| j.name_any())
    }

    #[test]
    fn a_schedule_that_never_fires_is_an_invalid_schedule_warning() {
        let cj = cronjob("59 23 31 2 *", json!({}));
        let p = plan(&cj, &[], at(60 * 24 * 400)).unwrap();
        assert_eq!(created(&p), None);
        assert_eq!(
            p.warning,
            Some(Warning {
                reason: REASON_INVALID_SCHEDULE,
                message: "invalid schedule: 59 23 31 2 * : time difference between two schedules is less than 1 second".into(),
            })
        );
        assert_eq!(p.status, CronJobStatus::default(), "no status to write");
        // Suspended: the schedule is not looked at.
        let suspended = cronjob("59 23 31 2 *", json!({"suspend": true}));
        assert_eq!(plan(&suspended, &[], at(1)).unwrap().warning, None);
        // A schedule that fires, even far ahead, warns of nothing.
        let yearly = cronjob("0 0 29 2 *", json!({}));
        assert_eq!(plan(&yearly, &[], at(1)).unwrap().warning, None);
    }

    #[test]
    fn bad_schedules_and_time_zones_are_warnings_with_kubes_reasons() {
        let cj = cronjob("* * * * *", json!({"timeZone": "Mars/Olympus"}));
        let w = plan(&cj, &[], at(1)).unwrap().warning.unwrap();
        assert_eq!(w.reason, REASON_UNKNOWN_TIME_ZONE);
        assert_eq!(
            w.message,
            "invalid timeZone: \"Mars/Olympus\": unknown time zone Mars/Olympus"
        );
        let cj = cronjob("61 * * * *", json!({}));
        let w = plan(&cj, &[], at(1)).unwrap().warning.unwrap();
        assert_eq!(w.reason, REASON_UNPARSEABLE_SCHEDULE);
        assert!(
            w.message
                .starts_with("unparseable schedule: \"61 * * * *\" : "),
            "{}",
            w.message
        );
    }

    #[test]
    fn a_job_starts_at_each_scheduled_minute_and_only_once() {
        let mut cj = cronjob("*/5 * * * *", json!({}));
        assert_eq!(created(&plan(&cj, &[], at(4)).unwrap()), None);
        let p = plan(&cj, &[], at(5)).unwrap();
        let name = format!("check-{}", at(5).as_second() / 60);
        assert_eq!(created(&p).as_deref(), Some(name.as_str()));
        let job = p.create.clone().unwrap();
        assert_eq!(job.owner_references()[0].uid, "cj-uid");
        assert_eq!(
            job.annotations()[SCHEDULED_TIMESTAMP_ANNOTATION],
            "2026-01-05T00:05:00Z"
        );
        assert_eq!(p.status.last_schedule_time, Some(Time(at(5))));
        assert_eq!(p.status.active.as_ref().unwrap().len(), 1);
        // The status is written: the same minute starts nothing again.
        cj.status = Some(p.status);
        assert_eq!(
            created(&plan(&cj, std::slice::from_ref(&job), at(5)).unwrap()),
            None
        );
        assert_eq!(created(&plan(&cj, &[job], at(9)).unwrap()), None);
    }

    #[test]
    fn missed_times_start_only_the_latest() {
        let cj = cronjob("* * * * *", json!({}));
        let p = plan(&cj, &[], at(30)).unwrap();
        assert_eq!(p.status.last_schedule_time, Some(Time(at(30))));
        assert!(
            created(&p)
                .unwrap()
                .ends_with(&(at(30).as_second() / 60).to_string())
        );
    }

    #[test]
    fn the_time_zone_decides_the_wall_clock() {
        // 09:00 in Berlin is 08:00 UTC in January.
        let cj = cronjob("0 9 * * *", json!({"timeZone": "Europe/Berlin"}));
        assert_eq!(created(&plan(&cj, &[], at(7 * 60 + 59)).unwrap()), None);
        assert!(created(&plan(&cj, &[], at(8 * 60)).unwrap()).is_some());
        let utc = cronjob("0 9 * * *", json!({}));
        assert_eq!(created(&plan(&utc, &[], at(8 * 60 + 30)).unwrap()), None);
    }

    #[test]
    fn concurrency_policies() {
        let mut cj = cronjob("* * * * *", json!({"concurrencyPolicy": "Forbid"}));
        cj.status = Some(CronJobStatus {
            last_schedule_time: Some(Time(at(1))),
            ..CronJobStatus::default()
        });
        let running = job_of(&cj, 1, None);
        let p = plan(&cj, std::slice::from_ref(&running), at(2)).unwrap();
        assert_eq!(created(&p), None, "Forbid skips while a Job runs");
        assert_eq!(p.status.last_schedule_time, Some(Time(at(1))));
        // Finished: the missed minute starts now.
        let done = job_of(&cj, 1, Some(true));
        assert!(created(&plan(&cj, &[done], at(2)).unwrap()).is_some());

        cj.spec.as_mut().unwrap().concurrency_policy = Some("Replace".into());
        let p = plan(&cj, std::slice::from_ref(&running), at(2)).unwrap();
        assert_eq!(p.replace, [running.name_any()]);
        assert!(created(&p).is_some());
        assert_eq!(p.status.active.as_ref().unwrap().len(), 1);

        cj.spec.as_mut().unwrap().concurrency_policy = None;
        let p = plan(&cj, std::slice::from_ref(&running), at(2)).unwrap();
        assert!(p.replace.is_empty());
        assert!(created(&p).is_some());
        assert_eq!(
            p.status.active.as_ref().unwrap().len(),
            2,
            "Allow runs both"
        );
    }

    #[test]
    fn a_time_older_than_the_starting_deadline_is_skipped() {
        let mut cj = cronjob("0 * * * *", json!({"startingDeadlineSeconds": 30}));
        cj.status = Some(CronJobStatus {
            last_schedule_time: Some(Time(at(0))),
            ..CronJobStatus::default()
        });
        let late = at(61);
        assert_eq!(created(&plan(&cj, &[], late).unwrap()), None);
        let in_time = at(60) + jiff::SignedDuration::from_secs(20);
        assert!(created(&plan(&cj, &[], in_time).unwrap()).is_some());
    }

    #[test]
    fn suspended_cronjobs_start_nothing() {
        let cj = cronjob("* * * * *", json!({"suspend": true}));
        let p = plan(&cj, &[], at(10)).unwrap();
        assert_eq!(created(&p), None);
        assert_eq!(p.status.last_schedule_time, None);
    }

    #[test]
    fn history_limits_prune_the_oldest_and_last_successful_time_is_kept() {
        let cj = cronjob(
            "* * * * *",
            json!({"successfulJobsHistoryLimit": 2, "failedJobsHistoryLimit": 1, "suspend": true}),
        );
        let mut jobs: Vec<Job> = (1..=4).map(|m| job_of(&cj, m, Some(true))).collect();
        jobs.extend((5..=7).map(|m| job_of(&cj, m, Some(false))));
        let mut foreign = job_of(&cj, 8, Some(true));
        foreign.metadata.owner_references = None;
        jobs.push(foreign);
        let p = plan(&cj, &jobs, at(20)).unwrap();
        let name = |m: i64| format!("check-{}", at(m).as_second() / 60);
        assert_eq!(p.prune, [name(1), name(2), name(5), name(6)]);
        assert_eq!(p.status.last_successful_time, Some(Time(at(5))));
        assert_eq!(p.status.active, None);
    }

    #[test]
    fn defaults_keep_three_successful_and_one_failed() {
        let cj = cronjob("* * * * *", json!({"suspend": true}));
        let jobs: Vec<Job> = (1..=5).map(|m| job_of(&cj, m, Some(m % 2 == 1))).collect();
        let p = plan(&cj, &jobs, at(20)).unwrap();
        let name = |m: i64| format!("check-{}", at(m).as_second() / 60);
        assert_eq!(p.prune, [name(2)]);
        let _ = JobTemplateSpec::default();
    }
}
