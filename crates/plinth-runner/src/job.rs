//! The Job controller: runs `batch/v1` Jobs as local Pods, writing Pod and Job status like
//! the Kubernetes kubelet and Job controller (Kubernetes API reference, Job v1 and Pod v1).
//!
//! Behaviour:
//! * one Pod per attempt, named `<job>-<5 chars>` where the suffix is derived from the
//!   Job's uid and the attempt number (deterministic; a restarted runner finds its Pods);
//!   labels `job-name`, `controller-uid`, `batch.kubernetes.io/job-name`,
//!   `batch.kubernetes.io/controller-uid` plus the template's labels and annotations;
//!   controller owner reference to the Job;
//! * attempts run one at a time per Job; a Job is complete after `completions` (default 1)
//!   successful Pods and fails after more than `backoffLimit` (default 6) failed Pods
//!   (`Failed`, reason `BackoffLimitExceeded`) or when `activeDeadlineSeconds` passed since
//!   `startTime` (reason `DeadlineExceeded`; the running Pod is killed);
//! * `restartPolicy` `OnFailure` and `Never` (and `Always`, which Kubernetes rejects for
//!   Jobs) all mean "a failed Pod is followed by a new Pod" — the runner never restarts
//!   containers in place, so `restartCount` stays 0; retries wait
//!   `retry_backoff * 2^(failures-1)`, capped at `max_retry_backoff`;
//! * `spec.suspend: true` starts no new Pod; a running Pod always finishes (a pipeline is
//!   never killed because its Job changed), then the Job gets `Suspended=True`;
//! * at most `max_parallel_jobs` Pods run at a time, across all Jobs; within one Job the
//!   attempts run one after the other (`parallelism` is treated as 1 and `completions`
//!   are reached sequentially; `completionMode: Indexed`, `podFailurePolicy`,
//!   `successPolicy` and `ttlSecondsAfterFinished` are not implemented);
//! * on start, Pods still `Pending`/`Running` from an earlier runner process are marked
//!   `Failed` with reason `NodeRestart` and count as failed attempts;
//! * every status write goes through the status subresource, re-read and retried on 409.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::{ContainerState, ContainerStateTerminated, Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::config::RunnerConfig;
use crate::ctx::{Ctx, Running};
use crate::error::{RunnerError, not_found};
use crate::pod_status::write_pod_status;
use k8s_openapi::api::core::v1::ObjectReference;
use plinth_api::events::{EventRecorder, EventType};

/// Label with the Job's name on its Pods (Kubernetes Job controller).
pub const LABEL_JOB_NAME: &str = "job-name";
/// Label with the Job's uid on its Pods.
pub const LABEL_CONTROLLER_UID: &str = "controller-uid";
/// Namespaced form of [`LABEL_JOB_NAME`].
pub const LABEL_BATCH_JOB_NAME: &str = "batch.kubernetes.io/job-name";
/// Namespaced form of [`LABEL_CONTROLLER_UID`].
pub const LABEL_BATCH_CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";

/// Pod status reason for attempts that were running when the runner stopped.
pub const REASON_NODE_RESTART: &str = "NodeRestart";

const MAX_CONFLICT_RETRIES: usize = 20;

fn now() -> Time {
    Time(jiff::Timestamp::now())
}

/// The name of attempt `attempt` (0-based) of the Job with `job_name` and `uid`:
/// `<job name, cut to 57 chars>-<5 chars>`, at most 63 characters, the suffix from
/// sha256(uid/attempt) in the alphabet Kubernetes uses for generated names.
pub fn pod_name(job_name: &str, uid: &str, attempt: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let digest = Sha256::digest(format!("{uid}/{attempt}").as_bytes());
    let suffix: String = digest[..5]
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect();
    let mut prefix: String = job_name.chars().take(57).collect();
    while prefix.ends_with(['-', '.']) {
        prefix.pop();
    }
    format!("{prefix}-{suffix}")
}

/// The Pod for attempt `attempt` of `job` (see the module documentation for labels and
/// owner reference); `node_name` goes to `spec.nodeName`.
pub fn build_pod(job: &Job, attempt: usize, node_name: &str) -> Result<Pod, RunnerError> {
    let name = job.metadata.name.clone().unwrap_or_default();
    let ns = job
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let invalid = |field: &str, message: &str| RunnerError::InvalidSpec {
        object: format!("Job {ns}/{name}"),
        field: field.into(),
        message: message.into(),
    };
    let uid = job
        .metadata
        .uid
        .clone()
        .ok_or_else(|| invalid("metadata.uid", "must be set"))?;
    let spec = job
        .spec
        .as_ref()
        .ok_or_else(|| invalid("spec", "must be set"))?;
    let template = &spec.template;
    let mut pod_spec = template
        .spec
        .clone()
        .ok_or_else(|| invalid("spec.template.spec", "must be set"))?;
    pod_spec.node_name = Some(node_name.to_string());
    let tmeta = template.metadata.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = tmeta.labels.unwrap_or_default();
    labels.insert(LABEL_JOB_NAME.into(), name.clone());
    labels.insert(LABEL_BATCH_JOB_NAME.into(), name.clone());
    labels.insert(LABEL_CONTROLLER_UID.into(), uid.clone());
    labels.insert(LABEL_BATCH_CONTROLLER_UID.into(), uid.clone());
    Ok(Pod {
        metadata: ObjectMeta {
            name: Some(pod_name(&name, &uid, attempt)),
            namespace: Some(ns),
            labels: Some(labels),
            annotations: tmeta.annotations,
            owner_references: Some(vec![OwnerReference {
                api_version: "batch/v1".into(),
                kind: "Job".into(),
                name,
                uid,
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        spec: Some(pod_spec),
        status: None,
    })
}

fn is_finished(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(|cs| {
            cs.iter()
                .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        })
        .unwrap_or(false)
}

fn is_suspended(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false)
}

fn set_condition(status: &mut JobStatus, type_: &str, value: bool, reason: &str, message: &str) {
    let t = now();
    let conds = status.conditions.get_or_insert_with(Vec::new);
    if let Some(c) = conds.iter_mut().find(|c| c.type_ == type_) {
        let new_status = if value { "True" } else { "False" };
        if c.status != new_status {
            c.last_transition_time = Some(t.clone());
        }
        c.status = new_status.into();
        c.reason = Some(reason.into());
        c.message = Some(message.into());
        c.last_probe_time = Some(t);
    } else {
        conds.push(JobCondition {
            type_: type_.into(),
            status: if value { "True" } else { "False" }.into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            last_probe_time: Some(t.clone()),
            last_transition_time: Some(t),
        });
    }
}

fn conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_conflict())
}

/// Re-reads the Job, applies `f` to its status and writes it through the status
/// subresource, retrying on 409. Returns the stored Job (`None` when it is gone).
pub async fn update_job_status(
    api: &Api<Job>,
    name: &str,
    f: impl Fn(&mut JobStatus),
) -> Result<Option<Job>, RunnerError> {
    for _ in 0..MAX_CONFLICT_RETRIES {
        let Some(mut job) = api
            .get_opt(name)
            .await
            .map_err(|e| RunnerError::kube(format!("get Job {name}"), e))?
        else {
            return Ok(None);
        };
        let mut status = job.status.clone().unwrap_or_default();
        f(&mut status);
        if job.status.as_ref() == Some(&status) {
            return Ok(Some(job));
        }
        job.status = Some(status);
        match api.replace_status(name, &PostParams::default(), &job).await {
            Ok(j) => return Ok(Some(j)),
            Err(e) if conflict(&e) => continue,
            Err(e) if not_found(&e) => return Ok(None),
            Err(e) => return Err(RunnerError::kube(format!("update status of Job {name}"), e)),
        }
    }
    Err(RunnerError::Config(format!(
        "update status of Job {name}: still conflicting after {MAX_CONFLICT_RETRIES} attempts"
    )))
}
/// Aborts every Job task when the runner stops (their processes die with them:
/// `kill_on_drop` and bwrap's `--die-with-parent`).
struct AbortOnDrop(Arc<Ctx>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Ok(mut m) = self.0.running.lock() {
            for (_, r) in m.drain() {
                if let Some(h) = r.handle {
                    h.abort();
                }
            }
        }
    }
}

/// Runs the Job runner: watches Jobs in all namespaces through `client` and executes them
/// (see the module documentation). Returns when the Job watch stream ends; aborting the
/// task stops every running Pod.
///
/// Errors: an unusable configuration (`max_parallel_jobs` 0, `SandboxMode::Bwrap`
/// without bwrap, an unreadable image map).
pub async fn run(client: kube::Client, config: RunnerConfig) -> Result<(), RunnerError> {
    if config.max_parallel_jobs == 0 {
        return Err(RunnerError::Config(
            "max_parallel_jobs must be at least 1".into(),
        ));
    }
    let sandbox = crate::backend::detect_sandbox(config.sandbox)
        .map_err(|e| RunnerError::Config(e.to_string()))?;
    if sandbox.is_none() && config.sandbox == crate::config::SandboxMode::Auto {
        // Said once, at start: without it a pipeline fails later on a path it cannot
        // see (`/kratix/output` exists only as a link under $PLINTH_CONTAINER_ROOT).
        tracing::warn!(
            "bwrap is not on PATH: pipeline containers run as host processes without a sandbox, and images that use absolute paths such as /kratix/output fail; install bubblewrap (apt-get install bubblewrap) to run them as on a cluster"
        );
    }
    if let Some(p) = &config.image_map {
        crate::image::ImageMap::load(p)?;
    }
    std::fs::create_dir_all(&config.data_dir)
        .map_err(|e| RunnerError::io("create directory", config.data_dir.clone(), e))?;
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        slots: Semaphore::new(config.max_parallel_jobs),
        jobs_events: EventRecorder::new(client.clone(), "job-controller"),
        kubelet: EventRecorder::new(client.clone(), "kubelet").with_host(config.node_name.clone()),
        scheduler: EventRecorder::new(client.clone(), "default-scheduler"),
        config,
        running: Mutex::new(HashMap::new()),
        stops: Mutex::new(HashMap::new()),
    });
    let _guard = AbortOnDrop(ctx.clone());
    let pod_watch = AbortTaskOnDrop(Some(tokio::spawn(crate::pods::watch_pods(ctx.clone()))));
    let jobs: Api<Job> = Api::all(client);
    let (store, writer) = reflector::store::<Job>();
    let main = watcher(jobs, watcher::Config::default())
        .default_backoff()
        .modify(slim)
        .reflect(writer)
        .applied_objects();
    Controller::for_stream(main, store)
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(error = %e, "job runner reconcile");
            }
        })
        .await;
    drop(pod_watch);
    Ok(())
}

/// What the Job store keeps: no `managedFields` (half of a Job's size), and for a
/// finished Job no Pod template either, since a finished Job is never run again. With
/// every request's last Jobs kept, these are most of the runner's memory.
fn slim(job: &mut Job) {
    job.metadata.managed_fields = None;
    if is_finished(job)
        && let Some(spec) = job.spec.as_mut()
    {
        spec.template = Default::default();
    }
}

fn error_policy(_job: Arc<Job>, err: &RunnerError, ctx: Arc<Ctx>) -> Action {
    tracing::warn!(error = %err, "job runner");
    Action::requeue(ctx.config.retry_backoff.max(Duration::from_millis(100)))
}

async fn reconcile(job: Arc<Job>, ctx: Arc<Ctx>) -> Result<Action, RunnerError> {
    let Some(uid) = job.metadata.uid.clone() else {
        return Ok(Action::await_change());
    };
    if is_finished(&job) || job.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let mut running = ctx.running.lock().expect("lock");
    if let Some(r) = running.get_mut(&uid) {
        r.dirty = true;
        return Ok(Action::await_change());
    }
    running.insert(
        uid.clone(),
        Running {
            handle: None,
            dirty: false,
        },
    );
    let task_ctx = ctx.clone();
    let job = (*job).clone();
    let key = uid.clone();
    let handle = tokio::spawn(async move {
        let name = job.metadata.name.clone().unwrap_or_default();
        let ns = job.metadata.namespace.clone().unwrap_or_default();
        loop {
            if let Err(e) = run_job(&task_ctx, &job).await {
                tracing::warn!(job = %format!("{ns}/{name}"), error = %e, "job runner; retrying");
                // API trouble: try again after the retry interval.
                tokio::time::sleep(
                    task_ctx
                        .config
                        .retry_backoff
                        .max(Duration::from_millis(100)),
                )
                .await;
                continue;
            }
            let mut running = task_ctx.running.lock().expect("lock");
            match running.get_mut(&key) {
                // The Job changed while this task ran (e.g. it was resumed): look again.
                Some(r) if r.dirty => r.dirty = false,
                _ => {
                    running.remove(&key);
                    return;
                }
            }
        }
    });
    if let Some(r) = running.get_mut(&uid) {
        r.handle = Some(handle);
    }
    Ok(Action::await_change())
}

/// Counts of the Job's Pods by phase, and the names already used.
struct PodCounts {
    succeeded: i32,
    failed: i32,
    attempts: usize,
    last_finish: Option<jiff::Timestamp>,
}

async fn recover_and_count(
    pods: &Api<Pod>,
    job: &Job,
    uid: &str,
) -> Result<PodCounts, RunnerError> {
    let ns = job.metadata.namespace.clone().unwrap_or_default();
    let list = pods
        .list(&ListParams::default().labels(&format!("{LABEL_CONTROLLER_UID}={uid}")))
        .await
        .map_err(|e| {
            RunnerError::kube(
                format!(
                    "list Pods of Job {ns}/{}",
                    job.metadata.name.as_deref().unwrap_or("")
                ),
                e,
            )
        })?;
    let mut c = PodCounts {
        succeeded: 0,
        failed: 0,
        attempts: list.items.len(),
        last_finish: None,
    };
    for p in list.items {
        let name = p.metadata.name.clone().unwrap_or_default();
        let mut status = p.status.clone().unwrap_or_default();
        match status.phase.as_deref() {
            Some("Succeeded") => c.succeeded += 1,
            Some("Failed") => c.failed += 1,
            _ => {
                // No task of this process runs it: it was running under an earlier process.
                mark_node_restart(&mut status);
                write_pod_status(pods, &name, &status).await?;
                c.failed += 1;
            }
        }
        let finished = status
            .container_statuses
            .iter()
            .chain(status.init_container_statuses.iter())
            .flatten()
            .filter_map(|s| {
                s.state
                    .as_ref()?
                    .terminated
                    .as_ref()?
                    .finished_at
                    .as_ref()
                    .map(|t| t.0)
            })
            .max();
        c.last_finish = c.last_finish.max(finished);
    }
    Ok(c)
}

fn mark_node_restart(status: &mut PodStatus) {
    let t = now();
    for s in status
        .init_container_statuses
        .iter_mut()
        .chain(status.container_statuses.iter_mut())
        .flatten()
    {
        let st = s.state.get_or_insert_with(Default::default);
        if st.terminated.is_none() {
            let started = st.running.as_ref().and_then(|r| r.started_at.clone());
            *st = ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: 137,
                    reason: Some(REASON_NODE_RESTART.into()),
                    message: Some(
                        "the runner stopped while this container was pending or running".into(),
                    ),
                    started_at: started,
                    finished_at: Some(t.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            };
            s.ready = false;
            s.started = Some(false);
        }
    }
    status.phase = Some("Failed".into());
    status.reason = Some(REASON_NODE_RESTART.into());
    status.message = Some("the Job runner restarted while this Pod was pending or running".into());
}

fn backoff_delay(config: &RunnerConfig, failed: i32) -> Duration {
    if failed <= 0 {
        return Duration::ZERO;
    }
    let factor = 1u32
        .checked_shl((failed - 1).min(30) as u32)
        .unwrap_or(u32::MAX);
    config
        .retry_backoff
        .saturating_mul(factor)
        .min(config.max_retry_backoff)
}

/// One Job being driven by [`run_job`]: its identity and the APIs it writes through.
struct JobRun<'a> {
    ctx: &'a Ctx,
    name: String,
    ns: String,
    uid: String,
    jobs: Api<Job>,
    pods: Api<Pod>,
}

/// The success and failure counts of a Job, from its Pods and its status (whichever is
/// higher), with the limits they are compared to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tally {
    succeeded: i32,
    failed: i32,
    /// `spec.completions`, at least 1.
    completions: i32,
    /// `spec.backoffLimit` (default 6).
    backoff_limit: i32,
}

impl Tally {
    /// The tally once one more attempt ended, succeeded or not.
    fn counting(&self, succeeded: bool) -> Tally {
        Tally {
            succeeded: self.succeeded + i32::from(succeeded),
            failed: self.failed + i32::from(!succeeded),
            ..*self
        }
    }

    fn of(job: &Job, counts: &PodCounts) -> Tally {
        let spec = job.spec.clone().unwrap_or_default();
        let status = job.status.clone().unwrap_or_default();
        Tally {
            succeeded: counts.succeeded.max(status.succeeded.unwrap_or(0)),
            failed: counts.failed.max(status.failed.unwrap_or(0)),
            completions: spec.completions.unwrap_or(1).max(1),
            backoff_limit: spec.backoff_limit.unwrap_or(6),
        }
    }
}

/// What a Job needs next, decided from its spec, status and tally at `now`.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Decision {
    /// Enough Pods succeeded: the Job is Complete.
    Complete,
    /// The Job failed with this reason and message.
    Fail(&'static str, &'static str),
    /// `spec.suspend`: no new Pod; the Job gets `Suspended=True`.
    Suspend,
    /// Run another attempt; `Some(d)` is the time left before `activeDeadlineSeconds`.
    Run(Option<Duration>),
}

/// The decision, in the Job controller's order: completions reached, backoff limit
/// exceeded, active deadline passed (counted from `startTime`, or from `now` before the
/// first Pod), suspended, else run.
fn decide(job: &Job, tally: &Tally, now: jiff::Timestamp) -> Decision {
    if tally.succeeded >= tally.completions {
        return Decision::Complete;
    }
    if tally.failed > tally.backoff_limit {
        return Decision::Fail(
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
        );
    }
    let deadline = job.spec.as_ref().and_then(|s| s.active_deadline_seconds);
    let start = job
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| t.0);
    let left = match (deadline, start) {
        (Some(secs), Some(start)) => {
            let left = now.duration_until(start + jiff::SignedDuration::from_secs(secs));
            if left.is_negative() || left.is_zero() {
                return Decision::Fail(
                    "DeadlineExceeded",
                    "Job was active longer than specified deadline",
                );
            }
            Some(left.unsigned_abs())
        }
        (Some(secs), None) => Some(Duration::from_secs(secs.max(0) as u64)),
        _ => None,
    };
    if is_suspended(job) {
        return Decision::Suspend;
    }
    Decision::Run(left)
}

/// How long to wait before the next attempt after `failed` failures, the last attempt
/// having finished at `last_finish`: the backoff delay less the time already passed.
fn backoff_wait(
    config: &RunnerConfig,
    failed: i32,
    last_finish: Option<jiff::Timestamp>,
    now: jiff::Timestamp,
) -> Option<Duration> {
    let delay = backoff_delay(config, failed);
    let since = last_finish
        .map(|t| t.duration_until(now).unsigned_abs())
        .unwrap_or(Duration::ZERO);
    (delay > since).then(|| delay - since)
}

/// What [`JobRun::attempt`] found.
enum Pass {
    /// The Job is gone or finished: stop driving it.
    Stop,
    /// Look at the Job again.
    Again,
}

/// Drives one Job to completion, failure or suspension: per pass, re-read the Job,
/// count its Pods, decide, back off after a failure, then run one attempt.
async fn run_job(ctx: &Ctx, initial: &Job) -> Result<(), RunnerError> {
    let r = JobRun::new(ctx, initial);
    let mut waited_for_failures = -1;
    loop {
        let Some(job) = r.current().await? else {
            return Ok(());
        };
        if !r.drives(&job) {
            return Ok(());
        }
        let counts = recover_and_count(&r.pods, &job, &r.uid).await?;
        let tally = Tally::of(&job, &counts);
        let left = match decide(&job, &tally, jiff::Timestamp::now()) {
            Decision::Complete => return r.complete(&job, &tally).await,
            Decision::Fail(reason, message) => return r.fail(&job, &tally, reason, message).await,
            Decision::Suspend => return r.suspend(&tally).await,
            Decision::Run(left) => left,
        };
        let deadline = left.map(|d| tokio::time::Instant::now() + d);
        // Back off before a retry (once per failure count), then re-read the Job: it may
        // have been suspended or deleted meanwhile.
        if tally.failed > 0 && waited_for_failures != tally.failed {
            waited_for_failures = tally.failed;
            let wait = backoff_wait(
                &ctx.config,
                tally.failed,
                counts.last_finish,
                jiff::Timestamp::now(),
            );
            if let Some(wait) = wait {
                sleep_until_either(wait, deadline).await;
                continue;
            }
        }
        if let Pass::Stop = r.attempt(&tally, counts.attempts, deadline).await? {
            return Ok(());
        }
    }
}

/// Sleeps `wait`, or until `deadline` if that comes first.
async fn sleep_until_either(wait: Duration, deadline: Option<tokio::time::Instant>) {
    let wait = tokio::time::sleep(wait);
    match deadline {
        Some(d) => {
            tokio::select! { _ = wait => {}, _ = tokio::time::sleep_until(d) => {} }
        }
        None => wait.await,
    }
}

impl<'a> JobRun<'a> {
    fn new(ctx: &'a Ctx, job: &Job) -> Self {
        let ns = job
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        JobRun {
            ctx,
            name: job.metadata.name.clone().unwrap_or_default(),
            uid: job.metadata.uid.clone().unwrap_or_default(),
            jobs: Api::namespaced(ctx.client.clone(), &ns),
            pods: Api::namespaced(ctx.client.clone(), &ns),
            ns,
        }
    }

    /// True while `job` is this run's Job (same uid), unfinished and not being deleted.
    fn drives(&self, job: &Job) -> bool {
        job.metadata.uid.as_deref() == Some(self.uid.as_str())
            && !is_finished(job)
            && job.metadata.deletion_timestamp.is_none()
    }

    /// The Job as stored now, `None` once deleted.
    async fn current(&self) -> Result<Option<Job>, RunnerError> {
        self.jobs
            .get_opt(&self.name)
            .await
            .map_err(|e| RunnerError::kube(format!("get Job {}/{}", self.ns, self.name), e))
    }

    /// Marks the Job Complete (with `SuccessCriteriaMet`) and records `Completed`.
    async fn complete(&self, job: &Job, tally: &Tally) -> Result<(), RunnerError> {
        self.ctx.jobs_events.record_queued(
            &job_reference(job),
            EventType::Normal,
            "Completed",
            "Job completed",
        );
        let reached = "Reached expected number of succeeded pods";
        update_job_status(&self.jobs, &self.name, |s| {
            s.active = Some(0);
            s.ready = Some(0);
            s.succeeded = Some(tally.succeeded);
            s.failed = Some(tally.failed);
            s.start_time.get_or_insert_with(now);
            s.completion_time = Some(now());
            set_condition(s, "SuccessCriteriaMet", true, "CompletionsReached", reached);
            set_condition(s, "Complete", true, "CompletionsReached", reached);
        })
        .await?;
        Ok(())
    }

    async fn fail(
        &self,
        job: &Job,
        tally: &Tally,
        reason: &str,
        message: &str,
    ) -> Result<(), RunnerError> {
        // The Event first: whoever sees the Job failed also finds why among its Events.
        self.ctx
            .jobs_events
            .record(&job_reference(job), EventType::Warning, reason, message)
            .await;
        let (succeeded, failed) = (tally.succeeded, tally.failed);
        update_job_status(&self.jobs, &self.name, |s| {
            s.active = Some(0);
            s.ready = Some(0);
            s.succeeded = Some(succeeded);
            s.failed = Some(failed);
            s.start_time.get_or_insert_with(now);
            set_condition(s, "FailureTarget", true, reason, message);
            set_condition(s, "Failed", true, reason, message);
        })
        .await?;
        Ok(())
    }

    /// Records the counts and `Suspended=True`.
    async fn suspend(&self, tally: &Tally) -> Result<(), RunnerError> {
        update_job_status(&self.jobs, &self.name, |s| {
            s.active = Some(0);
            s.succeeded = Some(tally.succeeded);
            s.failed = Some(tally.failed);
            set_condition(s, "Suspended", true, "JobSuspended", "Job suspended");
        })
        .await?;
        Ok(())
    }

    /// Runs one attempt in a slot of `max_parallel_jobs`: creates its Pod, marks the
    /// Job active (resuming a suspended one), runs the Pod until it ends or the
    /// deadline (the Job's or the Pod's, whichever is first), and counts the result.
    async fn attempt(
        &self,
        tally: &Tally,
        attempts: usize,
        job_deadline: Option<tokio::time::Instant>,
    ) -> Result<Pass, RunnerError> {
        let permit = self
            .ctx
            .slots
            .acquire()
            .await
            .expect("semaphore never closed");
        // The Job may have changed while waiting for a slot.
        let Some(job) = self.current().await? else {
            return Ok(Pass::Stop);
        };
        if is_suspended(&job) || is_finished(&job) {
            return Ok(Pass::Again);
        }
        let pod = match build_pod(&job, attempts, &self.ctx.config.node_name) {
            Ok(p) => p,
            Err(e) => {
                self.fail(&job, tally, "InvalidJobSpec", &e.to_string())
                    .await?;
                return Ok(Pass::Stop);
            }
        };
        let Some(created) = self.create_pod(&pod).await? else {
            return Ok(Pass::Again);
        };
        self.mark_active(&job, &created, tally).await?;
        let pod_deadline = created
            .spec
            .as_ref()
            .and_then(|s| s.active_deadline_seconds)
            .map(|secs| tokio::time::Instant::now() + Duration::from_secs(secs.max(0) as u64));
        let deadline = match (job_deadline, pod_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let final_status = run_attempt(self.ctx, &self.pods, &created, deadline).await?;
        drop(permit);
        let after = tally.counting(final_status.phase.as_deref() == Some("Succeeded"));
        self.count(&job, &after).await
    }

    /// Records the attempt's count. When that count completes or fails the Job, the
    /// count and the end go in one status write, as the next pass would have decided.
    async fn count(&self, job: &Job, after: &Tally) -> Result<Pass, RunnerError> {
        // Only the ends the count itself decides; a deadline is the next pass's to find.
        let decision = match decide(job, after, jiff::Timestamp::now()) {
            Decision::Fail(..) if after.failed <= after.backoff_limit => None,
            d @ (Decision::Complete | Decision::Fail(..)) => Some(d),
            _ => None,
        };
        // Deleted or replaced while its Pod ran: nothing to end.
        if decision.is_some() && !self.current().await?.is_some_and(|j| self.drives(&j)) {
            return Ok(Pass::Stop);
        }
        match decision {
            Some(Decision::Complete) => self.complete(job, after).await.map(|_| Pass::Stop),
            Some(Decision::Fail(reason, message)) => self
                .fail(job, after, reason, message)
                .await
                .map(|_| Pass::Stop),
            _ => {
                update_job_status(&self.jobs, &self.name, |s| {
                    s.active = Some(0);
                    s.succeeded = Some(after.succeeded);
                    s.failed = Some(after.failed);
                })
                .await?;
                Ok(Pass::Again)
            }
        }
    }

    /// Creates the attempt's Pod; `None` when a Pod of that name exists already (an
    /// earlier process created it): it is marked failed if unfinished, and counted on
    /// the next pass.
    async fn create_pod(&self, pod: &Pod) -> Result<Option<Pod>, RunnerError> {
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let ns = &self.ns;
        match self.pods.create(&PostParams::default(), pod).await {
            Ok(p) => Ok(Some(p)),
            Err(e) if conflict(&e) => {
                if let Some(mut existing) = self
                    .pods
                    .get_opt(&pod_name)
                    .await
                    .map_err(|e| RunnerError::kube(format!("get Pod {ns}/{pod_name}"), e))?
                    && !matches!(
                        existing.status.as_ref().and_then(|s| s.phase.as_deref()),
                        Some("Succeeded" | "Failed")
                    )
                {
                    let mut st = existing.status.take().unwrap_or_default();
                    mark_node_restart(&mut st);
                    write_pod_status(&self.pods, &pod_name, &st).await?;
                }
                Ok(None)
            }
            Err(e) => Err(RunnerError::kube(
                format!("create Pod {ns}/{pod_name} for Job {}", self.name),
                e,
            )),
        }
    }

    /// Records `SuccessfulCreate` and marks the Job active; a suspended Job is resumed
    /// (`Suspended=False/JobResumed`), and as in Kubernetes its `activeDeadlineSeconds`
    /// counts again from the resume.
    async fn mark_active(&self, job: &Job, pod: &Pod, tally: &Tally) -> Result<(), RunnerError> {
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        self.ctx.jobs_events.record_queued(
            &job_reference(job),
            EventType::Normal,
            "SuccessfulCreate",
            format!("Created pod: {pod_name}"),
        );
        update_job_status(&self.jobs, &self.name, |s| {
            s.start_time.get_or_insert_with(now);
            s.active = Some(1);
            s.succeeded = Some(tally.succeeded);
            s.failed = Some(tally.failed);
            if let Some(c) = s.conditions.as_mut().and_then(|cs| {
                cs.iter_mut()
                    .find(|c| c.type_ == "Suspended" && c.status == "True")
            }) {
                c.status = "False".into();
                c.reason = Some("JobResumed".into());
                c.message = Some("Job resumed".into());
                c.last_transition_time = Some(now());
                s.start_time = Some(now());
            }
        })
        .await?;
        Ok(())
    }
}

/// A reference to `job` for Events.
pub fn job_reference(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        ..Default::default()
    }
}

struct AbortTaskOnDrop(Option<JoinHandle<()>>);

impl Drop for AbortTaskOnDrop {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            h.abort();
        }
    }
}

/// Runs one Pod of a Job (stopped when the Pod is deleted), streaming its status.
async fn run_attempt(
    ctx: &Ctx,
    pods: &Api<Pod>,
    pod: &Pod,
    deadline: Option<tokio::time::Instant>,
) -> Result<PodStatus, RunnerError> {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let stop = ctx.register_stop(pod);
    let result = crate::pods::execute(ctx, pods, pod, deadline, stop, 0, None).await;
    ctx.unregister_stop(&uid);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_names_are_deterministic_and_bounded() {
        let a = pod_name("kratix-redis-example-instance-configure-abcde", "uid-1", 0);
        assert_eq!(
            a,
            pod_name("kratix-redis-example-instance-configure-abcde", "uid-1", 0)
        );
        assert_ne!(
            a,
            pod_name("kratix-redis-example-instance-configure-abcde", "uid-1", 1)
        );
        assert_ne!(
            a,
            pod_name("kratix-redis-example-instance-configure-abcde", "uid-2", 0)
        );
        assert!(a.starts_with("kratix-redis-example-instance-configure-abcde-"));
        assert_eq!(
            a.len(),
            "kratix-redis-example-instance-configure-abcde".len() + 6
        );
        let long = "x".repeat(63);
        let n = pod_name(&long, "u", 3);
        assert_eq!(n.len(), 63);
        let trailing = format!("{}-.-y", "a".repeat(55));
        let n = pod_name(&trailing, "u", 0);
        assert!(!n.contains("-.") && !n.contains("--"), "{n}");
    }

    #[test]
    fn pods_carry_job_labels_and_owner() {
        let job: Job = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "j", "namespace": "n", "uid": "u1"},
            "spec": {"template": {
                "metadata": {"labels": {"kratix.io/promise-name": "redis"}, "annotations": {"a": "b"}},
                "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}
            }}
        }))
        .unwrap();
        let p = build_pod(&job, 2, "plinth").unwrap();
        let l = p.metadata.labels.as_ref().unwrap();
        assert_eq!(l["job-name"], "j");
        assert_eq!(l["batch.kubernetes.io/job-name"], "j");
        assert_eq!(l["controller-uid"], "u1");
        assert_eq!(l["kratix.io/promise-name"], "redis");
        assert_eq!(p.metadata.annotations.as_ref().unwrap()["a"], "b");
        let o = &p.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (
                o.kind.as_str(),
                o.name.as_str(),
                o.uid.as_str(),
                o.controller
            ),
            ("Job", "j", "u1", Some(true))
        );
        assert_eq!(p.metadata.name.as_deref().unwrap(), pod_name("j", "u1", 2));
        assert_eq!(p.spec.unwrap().node_name.as_deref(), Some("plinth"));
        let no_uid: Job = serde_json::from_value(serde_json::json!({"metadata": {"name": "j", "namespace": "n"}, "spec": {"template": {}}})).unwrap();
        let e = build_pod(&no_uid, 0, "x").unwrap_err().to_string();
        assert!(e.contains("Job n/j") && e.contains("metadata.uid"), "{e}");
    }

    fn job_with(spec: serde_json::Value, status: serde_json::Value) -> Job {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "j", "namespace": "n", "uid": "u1"},
            "spec": spec,
            "status": status,
        }))
        .unwrap()
    }

    fn counts(succeeded: i32, failed: i32) -> PodCounts {
        PodCounts {
            succeeded,
            failed,
            attempts: (succeeded + failed) as usize,
            last_finish: None,
        }
    }

    #[test]
    fn tally_takes_the_higher_of_pods_and_status_and_defaults_the_limits() {
        let job = job_with(
            serde_json::json!({"template": {}}),
            serde_json::json!({"succeeded": 0, "failed": 3}),
        );
        let t = Tally::of(&job, &counts(1, 2));
        assert_eq!(
            t,
            Tally {
                succeeded: 1,
                failed: 3,
                completions: 1,
                backoff_limit: 6
            }
        );
        let job = job_with(
            serde_json::json!({"template": {}, "completions": 0, "backoffLimit": 2}),
            serde_json::json!({}),
        );
        let t = Tally::of(&job, &counts(0, 0));
        assert_eq!(
            (t.completions, t.backoff_limit),
            (1, 2),
            "completions at least 1"
        );
    }

    #[test]
    fn decisions_follow_the_job_controller_order() {
        let now: jiff::Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let tally = |succeeded, failed| Tally {
            succeeded,
            failed,
            completions: 1,
            backoff_limit: 1,
        };
        let plain = job_with(serde_json::json!({"template": {}}), serde_json::json!({}));
        assert_eq!(decide(&plain, &tally(1, 5), now), Decision::Complete);
        assert_eq!(
            decide(&plain, &tally(0, 2), now),
            Decision::Fail(
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit"
            )
        );
        assert_eq!(decide(&plain, &tally(0, 1), now), Decision::Run(None));

        // Deadline counted from startTime: 60 s after a start one minute ago has passed.
        let started = serde_json::json!({"startTime": "2026-01-01T00:00:00Z"});
        let expired = job_with(
            serde_json::json!({"template": {}, "activeDeadlineSeconds": 60, "suspend": true}),
            started.clone(),
        );
        assert_eq!(
            decide(&expired, &tally(0, 0), now),
            Decision::Fail(
                "DeadlineExceeded",
                "Job was active longer than specified deadline"
            ),
            "an expired deadline wins over suspension"
        );
        let running = job_with(
            serde_json::json!({"template": {}, "activeDeadlineSeconds": 90}),
            started,
        );
        assert_eq!(
            decide(&running, &tally(0, 0), now),
            Decision::Run(Some(Duration::from_secs(30)))
        );
        // Not started yet: the whole deadline is left.
        let fresh = job_with(
            serde_json::json!({"template": {}, "activeDeadlineSeconds": 90}),
            serde_json::json!({}),
        );
        assert_eq!(
            decide(&fresh, &tally(0, 0), now),
            Decision::Run(Some(Duration::from_secs(90)))
        );
        let suspended = job_with(
            serde_json::json!({"template": {}, "suspend": true}),
            serde_json::json!({}),
        );
        assert_eq!(decide(&suspended, &tally(0, 1), now), Decision::Suspend);
        assert_eq!(
            decide(&suspended, &tally(1, 0), now),
            Decision::Complete,
            "a suspended Job that reached its completions is complete"
        );
    }

    #[test]
    fn backoff_wait_subtracts_the_time_since_the_last_attempt() {
        let mut c = RunnerConfig::new("/d", "h", 1, "");
        c.retry_backoff = Duration::from_secs(10);
        c.max_retry_backoff = Duration::from_secs(60);
        let now: jiff::Timestamp = "2026-01-01T00:00:30Z".parse().unwrap();
        let at = |s: &str| Some(s.parse::<jiff::Timestamp>().unwrap());
        assert_eq!(backoff_wait(&c, 0, None, now), None, "no failure, no wait");
        assert_eq!(
            backoff_wait(&c, 1, None, now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            backoff_wait(&c, 2, at("2026-01-01T00:00:25Z"), now),
            Some(Duration::from_secs(15)),
            "20 s backoff, 5 s already passed"
        );
        assert_eq!(
            backoff_wait(&c, 2, at("2026-01-01T00:00:00Z"), now),
            None,
            "the backoff passed while nothing ran"
        );
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let mut c = RunnerConfig::new("/d", "h", 1, "");
        c.retry_backoff = Duration::from_secs(10);
        c.max_retry_backoff = Duration::from_secs(60);
        assert_eq!(backoff_delay(&c, 0), Duration::ZERO);
        assert_eq!(backoff_delay(&c, 1), Duration::from_secs(10));
        assert_eq!(backoff_delay(&c, 2), Duration::from_secs(20));
        assert_eq!(backoff_delay(&c, 3), Duration::from_secs(40));
        assert_eq!(backoff_delay(&c, 4), Duration::from_secs(60));
        assert_eq!(backoff_delay(&c, 40), Duration::from_secs(60));
    }

    #[test]
    fn node_restart_marks_unfinished_containers() {
        let mut st: PodStatus = serde_json::from_value(serde_json::json!({
            "phase": "Running",
            "initContainerStatuses": [{"name": "a", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
            "containerStatuses": [{"name": "b", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
                "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]
        }))
        .unwrap();
        mark_node_restart(&mut st);
        assert_eq!(st.phase.as_deref(), Some("Failed"));
        assert_eq!(st.reason.as_deref(), Some("NodeRestart"));
        let a = st.init_container_statuses.as_ref().unwrap()[0]
            .state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap();
        assert_eq!(a.reason.as_deref(), Some("Completed"));
        let b = st.container_statuses.as_ref().unwrap()[0]
            .state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap();
        assert_eq!(b.reason.as_deref(), Some("NodeRestart"));
        assert!(b.started_at.is_some());
    }
}
