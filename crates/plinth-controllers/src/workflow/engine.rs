//! The workflow engine: runs an object's pipelines serially as
//! Jobs, one at a time, and reports where the workflow stands.
//!
//! Differences from Kratix, keeping its labels, statuses and Job shape:
//! - a running Job is never suspended or killed because the object changed or a manual
//!   reconciliation was asked for: it finishes, then the workflow restarts from the
//!   first pipeline once;
//! - Jobs are ordered by a run annotation, not by creation second, and named
//!   deterministically per run;
//! - nothing sleeps: the caller is woken by Job events.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::job::{self, ANNOTATION_RUN, PipelineDef};
use super::{Workflow, WorkflowAction};
use crate::Error;
use crate::context::Context;
use crate::support::{self, set_condition, set_field};
use plinth_api::constants::{condition_types, labels, messages, reasons};

/// Where a workflow stands after one engine step.
#[derive(Clone, Debug, PartialEq)]
pub enum Progress {
    /// Every pipeline finished successfully for the current spec.
    Done,
    /// A Job is running or was just started; a Job event will wake the caller.
    Running,
    /// A pipeline failed; later pipelines were not started.
    Failed {
        /// Name of the pipeline whose Job failed.
        pipeline: String,
    },
    /// A pipeline suspended itself (workflow-control.yaml); retry at the given time, if any.
    Suspended {
        /// When the pipeline asked to be retried; `None` waits for a change to the object
        /// or a manual reconcile.
        retry_at: Option<Timestamp>,
    },
}

/// Observed state of one Job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Neither condition is set yet.
    Running,
    /// The Job has the `Complete` condition.
    Succeeded,
    /// The Job has the `Failed` condition.
    Failed,
}

/// A Job's state from its status: `Complete` (or `succeeded > 0`) is success, `Failed`
/// is failure, anything else is still running.
pub fn job_state(job: &Job) -> JobState {
    let Some(status) = &job.status else {
        return JobState::Running;
    };
    let has = |t: &str| {
        status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == t && c.status == "True")
    };
    if has("Complete") || status.succeeded.unwrap_or(0) > 0 {
        JobState::Succeeded
    } else if has("Failed") {
        JobState::Failed
    } else {
        JobState::Running
    }
}

/// When a finished Job finished: `completionTime`, else the latest `Complete`/`Failed`
/// condition's transition time, never earlier than its creation; `None` while it runs.
pub fn finished_at(job: &Job) -> Option<Timestamp> {
    if job_state(job) == JobState::Running {
        return None;
    }
    let created = job.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let status = job.status.as_ref()?;
    let finished = status.completion_time.as_ref().map(|t| t.0).or_else(|| {
        status
            .conditions
            .iter()
            .flatten()
            .filter(|c| c.type_ == "Complete" || c.type_ == "Failed")
            .filter_map(|c| c.last_transition_time.as_ref().map(|t| t.0))
            .max()
    });
    finished.max(created).or(created)
}

fn run_number(job: &Job) -> u64 {
    job.annotations()
        .get(ANNOTATION_RUN)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// Lists this workflow's Jobs (all pipelines, any hash), oldest run first and, within a
/// run, in pipeline order.
pub async fn list_jobs(ctx: &Context, wf: &Workflow) -> Result<Vec<Job>, Error> {
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), &wf.namespace);
    let lp = ListParams::default().labels(&job::selector_string(&job::workflow_selector(wf)));
    Ok(order_jobs(wf, api.list(&lp).await?.items))
}

/// This workflow's Jobs among `jobs` (a cache of Jobs in any namespace), in the order of
/// [`list_jobs`].
pub fn workflow_jobs<'a>(wf: &Workflow, jobs: impl IntoIterator<Item = &'a Job>) -> Vec<Job> {
    let selector = job::workflow_selector(wf);
    let mine = jobs
        .into_iter()
        .filter(|j| j.metadata.namespace.as_deref() == Some(wf.namespace.as_str()))
        .filter(|j| {
            let l = j.labels();
            selector.iter().all(|(k, v)| l.get(k) == Some(v))
        })
        .cloned()
        .collect();
    order_jobs(wf, mine)
}

/// Sorts a workflow's Jobs oldest run first and, within a run, in pipeline order.
fn order_jobs(wf: &Workflow, mut jobs: Vec<Job>) -> Vec<Job> {
    // Within a run, pipelines run in workflow order; creation times have a one-second
    // resolution, so the pipeline's position orders Jobs created in the same second.
    let position = |j: &Job| {
        let name = j.labels().get(labels::PIPELINE_NAME);
        wf.pipelines
            .iter()
            .position(|p| p["metadata"]["name"].as_str() == name.map(String::as_str))
            .unwrap_or(0)
    };
    jobs.sort_by_key(|j| {
        (
            run_number(j),
            position(j),
            j.metadata.creation_timestamp.clone().map(|t| t.0),
            j.name_any(),
        )
    });
    jobs
}

/// The object a workflow step works on (a Promise or a resource request), its workflow,
/// and how to reach and report on it: what every step of the engine takes.
pub struct Parent<'a> {
    /// The controller's shared context.
    pub ctx: &'a Context,
    /// The workflow this step runs.
    pub wf: &'a Workflow,
    /// The API of the object's kind.
    pub api: &'a Api<DynamicObject>,
    /// The object as last read.
    pub obj: &'a DynamicObject,
    /// The newest copy of the object this reconcile holds; every write of the step
    /// starts from it and leaves its result there.
    pub latest: &'a support::Latest<DynamicObject>,
    /// The API group the workflow's objects belong to.
    pub api_group: &'a str,
    /// The component named on the Events the step records.
    pub component: &'a str,
}

impl Parent<'_> {
    fn label_is_true(&self, key: &str) -> bool {
        self.obj.labels().get(key).is_some_and(|v| v == "true")
    }

    /// [`support::update_status_from`] the newest copy, keeping what it returns.
    async fn update_status<F>(&self, mutate: F) -> Result<DynamicObject, Error>
    where
        F: FnMut(&mut Value, &DynamicObject) -> bool,
    {
        self.latest.update_status(self.api, mutate).await
    }

    /// [`remove_labels`] from the newest copy, keeping what it returns.
    async fn remove_labels(&self, keys: &[&str]) -> Result<(), Error> {
        let written = remove_labels(self.api, &self.latest.get(), keys).await?;
        self.latest.remember(written);
        Ok(())
    }
}

/// One step of the configure workflow of `parent` (ReconcileConfigure): wait for a
/// running Job, handle a suspension, then start the next pipeline (or report the
/// workflow failed or done).
pub async fn reconcile_configure(p: &Parent<'_>) -> Result<Progress, Error> {
    let (ctx, wf) = (p.ctx, p.wf);
    let pipelines = parse_pipelines(wf)?;
    if pipelines.is_empty() {
        return Ok(Progress::Done);
    }
    let jobs = list_jobs(ctx, wf).await?;
    if let Some(running) = jobs.iter().find(|j| job_state(j) == JobState::Running) {
        if wf.action == WorkflowAction::Configure {
            report_retry(p, running).await?;
        }
        return Ok(Progress::Running);
    }
    let restart = match check_suspension(p, &pipelines).await? {
        Suspension::Stop(progress) => return Ok(progress),
        Suspension::Restart => true,
        Suspension::None => {
            p.label_is_true(labels::MANUAL_RECONCILIATION)
                || p.label_is_true(labels::RUN_FROM_START)
        }
    };
    let (index, run) = match next_pipeline(p, &pipelines, &jobs, restart).await? {
        Next::Start { index, run } => (index, run),
        Next::Report(progress) => return Ok(progress),
    };
    start_job(p, &pipelines, index, run).await?;
    Ok(Progress::Running)
}

/// What a suspended workflow does next.
enum Suspension {
    /// Not suspended.
    None,
    /// Restart from the first pipeline (the spec changed or a manual reconciliation).
    Restart,
    /// End the step with this progress.
    Stop(Progress),
}

/// Suspension: the status-writer labelled the object; a spec change or a manual
/// reconciliation restarts from the first pipeline, otherwise wait for the retry time
/// (or for the label's removal).
async fn check_suspension(p: &Parent<'_>, pipelines: &[PipelineDef]) -> Result<Suspension, Error> {
    if !p.label_is_true(labels::WORKFLOW_SUSPENDED) {
        return Ok(Suspension::None);
    }
    let status = p.obj.data.get("status").cloned().unwrap_or(Value::Null);
    let generation = p.obj.meta().generation.unwrap_or(0);
    let suspended_generation = status["kratix"]["workflows"]["suspendedGeneration"]
        .as_i64()
        .unwrap_or(0);
    if p.label_is_true(labels::MANUAL_RECONCILIATION) || generation > suspended_generation {
        p.remove_labels(&[labels::WORKFLOW_SUSPENDED]).await?;
        return Ok(Suspension::Restart);
    }
    let retry_at = suspended_index(&status, pipelines)
        .and_then(|i| pipeline_entry(&status, &pipelines[i].name))
        .and_then(|e| {
            e["nextRetryAt"]
                .as_str()
                .and_then(|s| s.parse::<Timestamp>().ok())
        });
    if retry_at.is_some_and(|at| at <= Timestamp::now()) {
        p.remove_labels(&[labels::WORKFLOW_SUSPENDED]).await?;
        // The label's removal is an object event: the next reconcile resumes.
        return Ok(Suspension::Stop(Progress::Running));
    }
    let condition = (
        condition_types::RECONCILED,
        "Unknown",
        reasons::WORKFLOW_SUSPENDED,
        messages::SUSPENDED,
    );
    let warning = (
        plinth_api::constants::events::WORKFLOW_SUSPENDED,
        "Workflow is suspended".to_string(),
    );
    set_condition_and_warn(p, condition, warning).await?;
    Ok(Suspension::Stop(Progress::Suspended { retry_at }))
}

/// The position of the pipeline whose phase is `Suspended`, if any.
fn suspended_index(status: &Value, pipelines: &[PipelineDef]) -> Option<usize> {
    let phases = pipeline_phases(status);
    pipelines
        .iter()
        .position(|p| phases.get(&p.name).is_some_and(|ph| ph == "Suspended"))
}

/// What the configure workflow does after its latest Job of the current hash.
enum Next {
    /// Start `pipelines[index]` as run `run`.
    Start { index: usize, run: u64 },
    /// Report this progress (the failure or the completion was recorded).
    Report(Progress),
}

/// From the latest Job of the current spec: restart from the first pipeline, record a
/// failure, wait, re-run a suspended pipeline, start the next one, or finish.
async fn next_pipeline(
    p: &Parent<'_>,
    pipelines: &[PipelineDef],
    jobs: &[Job],
    restart: bool,
) -> Result<Next, Error> {
    let hashes = job::workflow_hashes(p.wf);
    let max_run = jobs.iter().map(run_number).max().unwrap_or(0);
    let from_start = Next::Start {
        index: 0,
        run: max_run + 1,
    };
    let latest = jobs.iter().rfind(|j| job::runs_current_spec(j, &hashes));
    let Some(latest) = latest.filter(|_| !restart) else {
        return Ok(from_start);
    };
    let name = latest
        .labels()
        .get(labels::PIPELINE_NAME)
        .cloned()
        .unwrap_or_default();
    let Some(i) = pipelines.iter().position(|p| p.name == name) else {
        return Ok(from_start);
    };
    match job_state(latest) {
        JobState::Failed => {
            let why = super::failure::describe(p.ctx, latest).await;
            record_failure(p, pipelines, i, why).await?;
            prune_jobs(p.ctx, p.wf, jobs).await?;
            Ok(Next::Report(Progress::Failed { pipeline: name }))
        }
        JobState::Running => Ok(Next::Report(Progress::Running)),
        JobState::Succeeded => {
            let status = p.obj.data.get("status").unwrap_or(&Value::Null);
            if suspended_index(status, pipelines) == Some(i) {
                // The suspension label was removed (or the retry is due): run the
                // suspended pipeline again, as a new run so that its Job gets a new
                // name (Job names are deterministic per run).
                Ok(Next::Start {
                    index: i,
                    run: max_run + 1,
                })
            } else if i + 1 < pipelines.len() {
                Ok(Next::Start {
                    index: i + 1,
                    run: run_number(latest),
                })
            } else {
                prune_jobs(p.ctx, p.wf, jobs).await?;
                Ok(Next::Report(finish(p, pipelines).await?))
            }
        }
    }
}

/// One step of the delete workflow (ReconcileDelete): only the first delete
/// pipeline runs, after any running configure Job of the object has finished.
pub async fn reconcile_delete(p: &Parent<'_>, configure: &Workflow) -> Result<Progress, Error> {
    let (ctx, wf) = (p.ctx, p.wf);
    let pipelines = parse_pipelines(wf)?;
    let Some(first) = pipelines.first().cloned() else {
        return Ok(Progress::Done);
    };
    let pipelines = vec![first];
    let hashes = job::workflow_hashes(wf);
    let jobs = list_jobs(ctx, wf).await?;
    let running = |jobs: &[Job]| jobs.iter().any(|j| job_state(j) == JobState::Running);
    if running(&jobs) || running(&list_jobs(ctx, configure).await?) {
        return Ok(Progress::Running);
    }
    let manual = p.label_is_true(labels::MANUAL_RECONCILIATION);
    let latest = jobs.iter().rfind(|j| job::runs_current_spec(j, &hashes));
    let max_run = jobs.iter().map(run_number).max().unwrap_or(0);
    match latest.map(job_state) {
        Some(JobState::Succeeded) if !manual => {
            retry_suspended_delete(p, &pipelines, max_run + 1).await
        }
        Some(JobState::Failed) if !manual => report_delete_failure(p, &pipelines[0].name).await,
        Some(JobState::Running) => Ok(Progress::Running),
        _ => {
            start_job(p, &pipelines, 0, max_run + 1).await?;
            Ok(Progress::Running)
        }
    }
}

/// After a succeeded delete Job: done, unless its pipeline suspended itself; then it
/// runs again once its retry is due (as run `run`), and waits while still labelled.
async fn retry_suspended_delete(
    p: &Parent<'_>,
    pipelines: &[PipelineDef],
    run: u64,
) -> Result<Progress, Error> {
    let status = p.obj.data.get("status").unwrap_or(&Value::Null);
    let name = &pipelines[0].name;
    if pipeline_phases(status)
        .get(name)
        .is_none_or(|ph| ph != "Suspended")
    {
        return Ok(Progress::Done);
    }
    let retry_at = pipeline_entry(status, name)
        .and_then(|e| e["nextRetryAt"].as_str())
        .and_then(|s| s.parse::<Timestamp>().ok());
    let labelled = p.label_is_true(labels::WORKFLOW_SUSPENDED);
    // A retry that is due: drop the label and run the pipeline again.
    if labelled && retry_at.is_some_and(|at| at <= Timestamp::now()) {
        p.remove_labels(&[labels::WORKFLOW_SUSPENDED]).await?;
    } else if labelled {
        p.update_status(|s, _| {
            set_condition(
                s,
                condition_types::DELETE_WORKFLOW_COMPLETED,
                "False",
                reasons::DELETE_WORKFLOW_SUSPENDED,
                messages::DELETE_WORKFLOW_SUSPENDED,
                None,
            )
        })
        .await?;
        return Ok(Progress::Suspended { retry_at });
    }
    start_job(p, pipelines, 0, run).await?;
    Ok(Progress::Running)
}

/// Sets one condition `(type, status, reason, message)` on the parent's status and
/// publishes a Warning Event `(reason, message)` about it.
async fn set_condition_and_warn(
    p: &Parent<'_>,
    (type_, status, reason, message): (&str, &str, &str, &str),
    (event_reason, event_message): (&str, String),
) -> Result<(), Error> {
    p.update_status(|s, _| set_condition(s, type_, status, reason, message, None))
        .await?;
    support::publish(
        &p.ctx.recorder(p.component),
        &support::reference(p.obj),
        plinth_api::events::EventType::Warning,
        event_reason,
        event_message,
    )
    .await;
    Ok(())
}

/// A failed delete pipeline: `DeleteWorkflowCompleted=False` and a Warning.
async fn report_delete_failure(p: &Parent<'_>, pipeline: &str) -> Result<Progress, Error> {
    let condition = (
        condition_types::DELETE_WORKFLOW_COMPLETED,
        "False",
        reasons::DELETE_WORKFLOW_FAILED,
        messages::DELETE_PIPELINE_FAILED,
    );
    let warning = (
        plinth_api::constants::events::FAILED_PIPELINE,
        format!("The Delete Pipeline has failed: {pipeline}"),
    );
    set_condition_and_warn(p, condition, warning).await?;
    Ok(Progress::Failed {
        pipeline: pipeline.to_string(),
    })
}

/// The workflow's pipelines; an error names the Promise and the field
/// (`Promise redis spec.workflows.resource.configure[0].spec.containers[0].command`).
fn parse_pipelines(wf: &Workflow) -> Result<Vec<PipelineDef>, Error> {
    wf.pipelines
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let at = format!(
                "Promise {} spec.workflows.{}.{}[{i}]",
                wf.promise_name,
                wf.workflow_type.as_str(),
                wf.action.as_str()
            );
            PipelineDef::parse(p, &at)
        })
        .collect()
}

/// `status.kratix.workflows.pipelines[]` as name → phase.
fn pipeline_phases(status: &Value) -> BTreeMap<String, String> {
    status["kratix"]["workflows"]["pipelines"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            Some((
                p["name"].as_str()?.to_string(),
                p["phase"].as_str().unwrap_or_default().to_string(),
            ))
        })
        .collect()
}

fn pipeline_entry<'a>(status: &'a Value, name: &str) -> Option<&'a Value> {
    status["kratix"]["workflows"]["pipelines"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == name)
}

/// Sets every pipeline's phase: those before `index` Succeeded, `index` as given, the
/// rest Pending (`status.kratix.workflows.pipelines`).
fn set_pipeline_phases(status: &mut Value, pipelines: &[PipelineDef], index: usize, phase: &str) {
    let now = support::now_rfc3339();
    let old = status["kratix"]["workflows"]["pipelines"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let entries: Vec<Value> = pipelines
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let want = if i < index {
                "Succeeded"
            } else if i == index {
                phase
            } else {
                "Pending"
            };
            let prev = old.iter().find(|e| e["name"] == p.name.as_str());
            let mut e = prev.cloned().unwrap_or_else(|| json!({"name": p.name}));
            if e["phase"] != want {
                e["phase"] = json!(want);
                e["lastTransitionTime"] = json!(now);
            }
            if want != "Suspended"
                && let Some(m) = e.as_object_mut()
            {
                m.remove("nextRetryAt");
                if i != index {
                    m.remove("attempts");
                    m.remove("message");
                }
            }
            e
        })
        .collect();
    let s = support::ensure_object(status);
    let kratix = s.entry("kratix").or_insert_with(|| json!({}));
    let workflows = support::ensure_object(kratix)
        .entry("workflows")
        .or_insert_with(|| json!({}));
    support::ensure_object(workflows).insert("pipelines".into(), Value::Array(entries));
}

/// Starts `pipelines[index]` as run number `run`, and reports it on the parent.
async fn start_job(
    parent: &Parent<'_>,
    pipelines: &[PipelineDef],
    index: usize,
    run: u64,
) -> Result<(), Error> {
    let Parent {
        ctx,
        wf,
        obj: parent_obj,
        api_group,
        component,
        ..
    } = *parent;
    let config = ctx.config();
    let p = &pipelines[index];
    for obj in job::build_aux_objects(wf, p, api_group) {
        crate::apply::create_or_update(&ctx.client, &obj).await?;
    }
    let job_value = job::build_job(wf, pipelines, index, run, &config);
    let job: Job = serde_json::from_value(job_value).map_err(Error::Json)?;
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), &wf.namespace);
    match api.create(&PostParams::default(), &job).await {
        Ok(_) => {}
        // Created by an earlier reconcile that did not see it yet: nothing more to do.
        Err(ref e) if support::is_already_exists(e) => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    parent
        .remove_labels(&[labels::MANUAL_RECONCILIATION, labels::RUN_FROM_START])
        .await?;
    let configure = wf.action == WorkflowAction::Configure;
    let total = pipelines.len() as i64;
    // The status update compares before and after, so unconditional setters are fine here.
    parent
        .update_status(|s, _| {
            set_field(s, "message", json!("Pending"));
            if configure {
                set_condition(
                    s,
                    condition_types::CONFIGURE_WORKFLOW_COMPLETED,
                    "False",
                    reasons::PIPELINES_IN_PROGRESS,
                    messages::PIPELINES_IN_PROGRESS,
                    None,
                );
                set_condition(
                    s,
                    condition_types::RECONCILED,
                    "Unknown",
                    reasons::WORKFLOW_PENDING,
                    messages::PENDING,
                    None,
                );
                set_field(s, "workflows", json!(total));
                set_field(s, "workflowsSucceeded", json!(index as i64));
                set_field(s, "workflowsFailed", json!(0));
            }
            set_pipeline_phases(s, pipelines, index, "Running");
            true
        })
        .await?;
    let what = if configure { "Configure" } else { "Delete" };
    support::publish(
        &ctx.recorder(component),
        &support::reference(parent_obj),
        plinth_api::events::EventType::Normal,
        plinth_api::constants::events::PIPELINE_STARTED,
        format!("{what} Pipeline started: {}", p.name),
    )
    .await;
    tracing::info!(promise = %wf.promise_name, object = %parent_obj.name_any(), pipeline = %p.name, run, "pipeline started");
    Ok(())
}

/// A running configure Job whose earlier attempts failed: the object's
/// `ConfigureWorkflowCompleted` condition says which container failed how, on which
/// attempt, with its last log lines (written only when that description changes).
async fn report_retry(p: &Parent<'_>, job: &Job) -> Result<(), Error> {
    let Some(why) = super::failure::describe(p.ctx, job).await else {
        return Ok(());
    };
    let message = format!("Pipelines are still in progress; retrying after a failure: {why}");
    p.update_status(|s, _| {
        // The attempt still running may already have reported success through its
        // status-writer before its Job is marked complete: never take that back.
        if support::condition(s, condition_types::CONFIGURE_WORKFLOW_COMPLETED)
            .is_some_and(|c| c["status"] == "True")
        {
            return false;
        }
        set_condition(
            s,
            condition_types::CONFIGURE_WORKFLOW_COMPLETED,
            "False",
            reasons::PIPELINES_IN_PROGRESS,
            &message,
            None,
        )
    })
    .await?;
    Ok(())
}

async fn record_failure(
    p: &Parent<'_>,
    pipelines: &[PipelineDef],
    index: usize,
    why: Option<String>,
) -> Result<(), Error> {
    let Parent {
        ctx,
        wf,
        obj: parent,
        component,
        ..
    } = *p;
    let name = pipelines[index].name.clone();
    let detail = why.map(|w| format!(": {w}")).unwrap_or_default();
    let before = parent.data.get("status").cloned().unwrap_or(Value::Null);
    let already = support::condition(&before, condition_types::CONFIGURE_WORKFLOW_COMPLETED)
        .is_some_and(|c| c["reason"] == "ConfigureWorkflowFailed");
    p.update_status(|s, _| {
        set_condition(
            s,
            condition_types::CONFIGURE_WORKFLOW_COMPLETED,
            "False",
            reasons::CONFIGURE_WORKFLOW_FAILED,
            &format!("A Configure Pipeline has failed: {name}{detail}"),
            None,
        );
        set_condition(
            s,
            condition_types::RECONCILED,
            "False",
            reasons::CONFIGURE_WORKFLOW_FAILED,
            messages::FAILING,
            None,
        );
        set_field(s, "workflowsFailed", json!(1));
        set_pipeline_phases(s, pipelines, index, "Failed");
        true
    })
    .await?;
    if !already {
        support::publish(
            &ctx.recorder(component),
            &support::reference(parent),
            plinth_api::events::EventType::Warning,
            plinth_api::constants::events::CONFIGURE_WORKFLOW_FAILED,
            format!(
                "A {}/configure Pipeline has failed: {name}",
                wf.workflow_type.as_str()
            ),
        )
        .await;
    }
    Ok(())
}

async fn finish(p: &Parent<'_>, pipelines: &[PipelineDef]) -> Result<Progress, Error> {
    let total = pipelines.len() as i64;
    p.latest
        .update_status_known(p.api, |s, _| {
            let mut changed = set_field(s, "workflows", json!(total));
            changed |= set_field(s, "workflowsSucceeded", json!(total));
            changed |= set_field(s, "workflowsFailed", json!(0));
            let phases = pipeline_phases(s);
            if pipelines
                .iter()
                .any(|p| phases.get(&p.name).is_none_or(|ph| ph != "Succeeded"))
            {
                set_pipeline_phases(s, pipelines, pipelines.len(), "Succeeded");
                changed = true;
            }
            changed
        })
        .await?;
    Ok(Progress::Done)
}

/// Deletes the oldest Jobs of each pipeline beyond `numberOfJobsToKeep` (pruning).
async fn prune_jobs(ctx: &Context, wf: &Workflow, jobs: &[Job]) -> Result<(), Error> {
    let keep = ctx.config().number_of_jobs_to_keep.max(1);
    let mut by_pipeline: BTreeMap<String, Vec<&Job>> = BTreeMap::new();
    for j in jobs {
        by_pipeline
            .entry(
                j.labels()
                    .get(labels::PIPELINE_NAME)
                    .cloned()
                    .unwrap_or_default(),
            )
            .or_default()
            .push(j);
    }
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), &wf.namespace);
    for list in by_pipeline.values() {
        if list.len() > keep {
            for j in &list[..list.len() - keep] {
                match api.delete(&j.name_any(), &DeleteParams::background()).await {
                    Ok(_) => {}
                    Err(ref e) if crate::support::is_not_found(e) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
    Ok(())
}

/// Removes labels from the parent with a merge patch (a no-op when none is present);
/// the patched object when it wrote.
pub async fn remove_labels<K>(api: &Api<K>, obj: &K, keys: &[&str]) -> Result<Option<K>, Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let present: Vec<&&str> = keys
        .iter()
        .filter(|k| obj.labels().contains_key(**k))
        .collect();
    if present.is_empty() {
        return Ok(None);
    }
    let mut labels = serde_json::Map::new();
    for k in present {
        labels.insert(k.to_string(), Value::Null);
    }
    let patch = json!({"metadata": {"labels": labels}});
    let written = api
        .patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(Some(written))
}

/// The global reconciliation interval (`reconciliationInterval`): once `interval`
/// has passed since the workflow's last Job finished, the object (Promise or request) is labelled to run
/// its configure workflow from the first pipeline again; until then it is requeued for
/// the remaining time.
pub async fn periodic_rerun(
    ctx: &Context,
    wf: &Workflow,
    api: &Api<DynamicObject>,
    parent: &DynamicObject,
    interval: std::time::Duration,
) -> Result<kube::runtime::controller::Action, Error> {
    periodic_rerun_after(&list_jobs(ctx, wf).await?, api, parent, interval).await
}

/// [`periodic_rerun`] with the workflow's Jobs already at hand (in [`list_jobs`] order).
pub async fn periodic_rerun_after(
    jobs: &[Job],
    api: &Api<DynamicObject>,
    parent: &DynamicObject,
    interval: std::time::Duration,
) -> Result<kube::runtime::controller::Action, Error> {
    let Some(done) = jobs.last().and_then(finished_at) else {
        return Ok(kube::runtime::controller::Action::requeue(interval));
    };
    let due = done + jiff::SignedDuration::try_from(interval).unwrap_or(jiff::SignedDuration::MAX);
    if jiff::Timestamp::now() < due {
        return Ok(kube::runtime::controller::Action::requeue(support::until(
            due,
        )));
    }
    let patch = json!({"metadata": {"labels": {labels::RUN_FROM_START: "true"}}});
    api.patch(
        &parent.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(kube::runtime::controller::Action::await_change())
}

/// Resuming from a pause. When the object (Promise or request) is no longer paused but
/// its `Reconciled` condition still says `PausedReconciliation`, labels it to run its
/// configure workflow from the first pipeline (clearing any suspension, plus `extra`
/// labels, e.g. the Promise's request to reconcile its resources) and sets
/// `Reconciled=Unknown/Unpaused`. Returns true when it did, and the reconcile should stop:
/// the label change wakes it again.
pub async fn resume_after_pause(
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
    extra: &[(&str, &str)],
) -> Result<bool, Error> {
    let status = obj.data.get("status").cloned().unwrap_or(Value::Null);
    let was_paused = support::condition(&status, condition_types::RECONCILED)
        .is_some_and(|c| c["reason"] == reasons::PAUSED_RECONCILIATION);
    if !was_paused {
        return Ok(false);
    }
    let mut labels = serde_json::Map::new();
    labels.insert(labels::RUN_FROM_START.into(), json!("true"));
    labels.insert(labels::WORKFLOW_SUSPENDED.into(), Value::Null);
    for (k, v) in extra {
        labels.insert((*k).into(), json!(v));
    }
    let labelled = api
        .patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": labels}})),
        )
        .await?;
    support::update_status_from(api, &labelled, |s, _| {
        set_condition(
            s,
            condition_types::RECONCILED,
            "Unknown",
            reasons::UNPAUSED,
            messages::PENDING,
            None,
        )
    })
    .await?;
    Ok(true)
}
