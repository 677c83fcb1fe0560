//! Throttled fan-out: at most N configure workflows of one Promise's resource requests
//! are in flight at a time (`workflows.maxInFlightPerPromise` in the `kratix` ConfigMap;
//! 0 means no limit), so a change to a Promise with many requests does not start a Job
//! for every one of them at once. Beyond Kratix, which starts them all.
//!
//! A request whose workflow needs a new run (first run, changed spec or revision, a
//! reconciliation label) is admitted only while fewer than N other requests of the
//! Promise have a run in flight (a running Job, or a run whose later pipelines are still
//! to start); otherwise it queues, and a request whose run ends wakes the next one in the
//! queue. Admission and Job creation happen under one lock per Promise, so N is never
//! exceeded. The Promise's `status.resourceRequests` reports how many of the requests that
//! follow its latest revision have run with it (k of n).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::binding;
use crate::Error;
use crate::context::Context;
use crate::request::caches::{RequestCaches, request_of_job};
use crate::support as status;
use crate::workflow::Workflow;
use crate::workflow::engine::{self, JobState};
use plinth_api::constants::VERSION_LATEST;
use plinth_api::constants::labels;
use plinth_api::constants::labels::{HASH as LABEL_HASH, PIPELINE_NAME as LABEL_PIPELINE_NAME};

/// The fan-out state of one Promise's request controller.
pub struct FanOut {
    promise: String,
    gate: tokio::sync::Mutex<()>,
    waiting: Mutex<Queue>,
    /// Requests admitted to start a run, by `namespace/name`, with when: counted as in
    /// flight until their step reports the run over, since the Job cache may not show
    /// their new Job yet. An entry older than [`LAUNCH_GRACE`] is left to the cache.
    launched: Mutex<HashMap<String, Instant>>,
    /// The requests with a run in flight as last counted from the Job cache, and when:
    /// counting goes through every cached Job, so it is redone only after [`BUSY_TTL`];
    /// a request whose run ended leaves it at once.
    busy: Mutex<Option<(Instant, HashSet<String>)>>,
    wake: UnboundedSender<ObjectRef<DynamicObject>>,
    progress: tokio::sync::Notify,
}

/// How long a count of the requests with a run in flight is reused.
const BUSY_TTL: Duration = Duration::from_millis(500);

/// The requests waiting for a slot, first come first served (one that left and queued
/// again goes to the back). Membership is a map; the order is a deque that may hold
/// entries of requests that left (skipped when popped), so queueing and leaving are
/// O(1) however many requests wait.
#[derive(Default)]
struct Queue {
    order: VecDeque<(u64, ObjectRef<DynamicObject>)>,
    /// `namespace/name` → the number its latest entry in `order` was queued with.
    members: HashMap<String, u64>,
    next: u64,
}

impl Queue {
    fn push(&mut self, r: ObjectRef<DynamicObject>) {
        let key = key_of(&r);
        if self.members.contains_key(&key) {
            return;
        }
        self.next += 1;
        self.members.insert(key, self.next);
        self.order.push_back((self.next, r));
    }

    fn remove(&mut self, r: &ObjectRef<DynamicObject>) {
        if self.members.remove(&key_of(r)).is_some() && self.members.is_empty() {
            self.order.clear();
        }
    }

    fn pop(&mut self) -> Option<ObjectRef<DynamicObject>> {
        while let Some((n, r)) = self.order.pop_front() {
            let key = key_of(&r);
            if self.members.get(&key) == Some(&n) {
                self.members.remove(&key);
                return Some(r);
            }
        }
        None
    }
}

/// How long an admitted request counts as in flight without its Job in the cache: far
/// longer than a watch event takes to arrive, so its Job is in the cache by then.
const LAUNCH_GRACE: Duration = Duration::from_secs(60);

/// Whether a request may go on to its workflow step now.
pub enum Admission<'a> {
    /// Go on; hold the guard (if any) until the workflow step has created its Job.
    Go(Option<tokio::sync::MutexGuard<'a, ()>>),
    /// Queued: a request whose run ends will wake it.
    Wait,
}

impl FanOut {
    /// The fan-out of `promise` and the stream of requests it wakes (to be fed to the
    /// request controller's `reconcile_on`).
    pub fn new(promise: &str) -> (FanOut, UnboundedReceiver<ObjectRef<DynamicObject>>) {
        let (wake, rx) = unbounded_channel();
        let f = FanOut {
            promise: promise.to_string(),
            gate: tokio::sync::Mutex::new(()),
            waiting: Mutex::new(Queue::default()),
            launched: Mutex::new(HashMap::new()),
            busy: Mutex::new(None),
            wake,
            progress: tokio::sync::Notify::new(),
        };
        (f, rx)
    }

    /// Decides whether the request may run its workflow step now (see the module docs).
    pub async fn admit<'a>(
        &'a self,
        ctx: &Context,
        caches: &RequestCaches,
        wf: &Workflow,
        rr: &DynamicObject,
        me: ObjectRef<DynamicObject>,
    ) -> Result<Admission<'a>, Error> {
        let limit = ctx.config().max_in_flight_per_promise;
        if limit == 0 || !needs_new_run(caches, wf, rr) {
            self.dequeue(&me);
            return Ok(Admission::Go(None));
        }
        let guard = self.gate.lock().await;
        let others = self.in_flight(caches, wf, &me);
        if others >= limit {
            self.waiting.lock().expect("fan-out queue").push(me);
            return Ok(Admission::Wait);
        }
        self.dequeue(&me);
        self.launched
            .lock()
            .expect("fan-out launches")
            .insert(key_of(&me), Instant::now());
        // More than one slot free (several runs ended at once): pass the wake on.
        if others + 1 < limit {
            self.release();
        }
        Ok(Admission::Go(Some(guard)))
    }

    fn dequeue(&self, me: &ObjectRef<DynamicObject>) {
        self.waiting.lock().expect("fan-out queue").remove(me);
    }

    /// A request's run ended (or it was not running): wakes the first queued request.
    pub fn release(&self) {
        let next = self.waiting.lock().expect("fan-out queue").pop();
        if let Some(next) = next {
            let _ = self.wake.send(next);
        }
    }

    /// After request `me`'s workflow step: a run that is not running any more frees its
    /// slot for the next queued request, and the Promise's progress is counted again.
    pub fn ran(&self, me: &ObjectRef<DynamicObject>, progress: &engine::Progress) {
        if *progress != engine::Progress::Running {
            self.launched
                .lock()
                .expect("fan-out launches")
                .remove(&key_of(me));
            // Only this request leaves the last count: a recount goes through every
            // cached Job, and runs end many times a second with thousands of requests.
            // Others that ended meanwhile leave it at the next recount ([`BUSY_TTL`]).
            if let Some((_, busy)) = self.busy.lock().expect("fan-out count").as_mut() {
                busy.remove(&key_of(me));
            }
            self.release();
        }
        self.progress_changed();
    }

    /// How many requests of the Promise, other than `me`, have a run in flight: their
    /// latest configure Job in the cache is running, or succeeded in a pipeline that is
    /// not the workflow's last, or they were admitted and their Job is not cached yet.
    fn in_flight(
        &self,
        caches: &RequestCaches,
        wf: &Workflow,
        me: &ObjectRef<DynamicObject>,
    ) -> usize {
        let mine = key_of(me);
        let mut busy = {
            let mut last = self.busy.lock().expect("fan-out count");
            match last.as_ref() {
                Some((at, busy)) if at.elapsed() < BUSY_TTL => busy.clone(),
                _ => {
                    let busy = cached_in_flight(&caches.jobs.state(), wf);
                    *last = Some((Instant::now(), busy.clone()));
                    busy
                }
            }
        };
        let mut launched = self.launched.lock().expect("fan-out launches");
        launched.retain(|_, at| at.elapsed() < LAUNCH_GRACE);
        busy.extend(launched.keys().cloned());
        busy.remove(&mine);
        busy.len()
    }

    /// Asks for the Promise's progress to be counted again (coalesced).
    pub fn progress_changed(&self) {
        self.progress.notify_one();
    }

    /// Counts the Promise's progress whenever asked, at most once per `pause`, and writes
    /// `status.resourceRequests` when it changed. Runs for the life of the controller.
    pub async fn report_progress(&self, ctx: &Context, caches: &RequestCaches, pause: Duration) {
        loop {
            self.progress.notified().await;
            if let Err(e) = write_progress(ctx, caches, &self.promise).await {
                tracing::debug!(promise = %self.promise, error = %e, "resource request progress");
            }
            tokio::time::sleep(pause).await;
        }
    }
}

/// True when the request's next workflow step would start a new run: no Job of it is
/// running, and it has no run of its current spec yet or carries a reconciliation label
/// (as the Job cache shows it; the workflow step itself reads its Jobs from the API).
fn needs_new_run(caches: &RequestCaches, wf: &Workflow, rr: &DynamicObject) -> bool {
    if wf.pipelines.is_empty() {
        return false;
    }
    let jobs = caches.workflow_jobs(wf);
    if jobs
        .iter()
        .any(|j| engine::job_state(j) == JobState::Running)
    {
        return false;
    }
    let labelled = [labels::MANUAL_RECONCILIATION, labels::RUN_FROM_START]
        .iter()
        .any(|l| rr.labels().get(*l).is_some_and(|v| v == "true"));
    let hashes = crate::workflow::job::workflow_hashes(wf);
    labelled
        || !jobs
            .iter()
            .any(|j| crate::workflow::job::runs_current_spec(j, &hashes))
}

fn run_of(job: &Job) -> u64 {
    job.annotations()
        .get(crate::workflow::job::ANNOTATION_RUN)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// The requests (`namespace/name`) whose latest configure Job among `jobs` is running,
/// or succeeded in a pipeline that is not the workflow's last.
fn cached_in_flight(jobs: &[Arc<Job>], wf: &Workflow) -> HashSet<String> {
    let names: Vec<&str> = wf
        .pipelines
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str())
        .collect();
    let position = |j: &Job| {
        let name = j.labels().get(LABEL_PIPELINE_NAME).map(String::as_str);
        names.iter().position(|n| Some(*n) == name).unwrap_or(0)
    };
    let mut latest: HashMap<String, &Job> = HashMap::new();
    for j in jobs.iter().filter(|j| is_configure(j)) {
        let Some(key) = request_of_job(j) else {
            continue;
        };
        let order = |j: &Job| (run_of(j), position(j));
        if latest.get(&key).is_none_or(|l| order(l) < order(j)) {
            latest.insert(key, j);
        }
    }
    latest
        .into_iter()
        .filter(|(_, j)| match engine::job_state(j) {
            JobState::Running => true,
            JobState::Succeeded => position(j) + 1 < names.len(),
            JobState::Failed => false,
        })
        .map(|(k, _)| k)
        .collect()
}

/// True for a configure Job (the cache holds the delete Jobs too).
fn is_configure(job: &Job) -> bool {
    job.labels()
        .get(labels::WORKFLOW_ACTION)
        .map(String::as_str)
        == Some("configure")
}

/// `namespace/name` of a request.
fn key_of(r: &ObjectRef<DynamicObject>) -> String {
    format!("{}/{}", r.namespace.clone().unwrap_or_default(), r.name)
}

/// Counts `{observedGeneration, total, updated}`: of the requests that follow the latest
/// revision (`total`), those whose last configure workflow succeeded with the latest
/// revision's Promise spec and their current spec (`updated`). Reads only the request
/// controller's caches.
pub fn count_progress(promise: &DynamicObject, caches: &RequestCaches) -> Value {
    let live = promise.data.get("spec").cloned().unwrap_or(Value::Null);
    let last = live["workflows"]["resource"]["configure"]
        .as_array()
        .and_then(|a| a.last())
        .and_then(|p| p["metadata"]["name"].as_str())
        .map(str::to_string);
    let Some(latest) = binding::latest_revision(caches) else {
        return Value::Null;
    };
    let spec = latest.spec;
    let latest = latest.version;
    let versions: HashMap<String, String> = caches
        .bindings
        .state()
        .iter()
        .filter_map(|b| {
            let (rr, ns) = binding::request_of(b)?;
            Some((format!("{ns}/{rr}"), b.spec.version.clone()))
        })
        .collect();
    let mut succeeded: HashMap<String, Vec<String>> = HashMap::new();
    for j in caches.jobs.state().iter().filter(|j| is_configure(j)) {
        let last_pipeline = j.labels().get(LABEL_PIPELINE_NAME) == last.as_ref();
        if !last_pipeline || engine::job_state(j) != JobState::Succeeded {
            continue;
        }
        if let (Some(key), Some(h)) = (request_of_job(j), j.labels().get(LABEL_HASH)) {
            succeeded.entry(key).or_default().push(h.clone());
        }
    }
    let (mut total, mut updated) = (0, 0);
    for rr in caches.requests.state() {
        if rr.meta().deletion_timestamp.is_some() {
            continue;
        }
        let key = format!("{}/{}", rr.namespace().unwrap_or_default(), rr.name_any());
        let version = versions
            .get(&key)
            .map(String::as_str)
            .unwrap_or(VERSION_LATEST);
        if version != VERSION_LATEST && version != latest {
            continue;
        }
        total += 1;
        let rr_spec = rr.data.get("spec").unwrap_or(&Value::Null);
        let hashes = plinth_api::hash::resource_workflow_hashes(&spec, rr_spec, false);
        let ran = |done: &Vec<String>| hashes.iter().any(|h| done.contains(h));
        if last.is_none() || succeeded.get(&key).is_some_and(ran) {
            updated += 1;
        }
    }
    json!({
        "observedGeneration": promise.meta().generation.unwrap_or(0),
        "total": total,
        "updated": updated,
    })
}

async fn write_progress(ctx: &Context, caches: &RequestCaches, promise: &str) -> Result<(), Error> {
    caches.ready(promise, ctx.config().network_timeout).await?;
    let Some(p) = caches.promise() else {
        return Ok(());
    };
    let progress = count_progress(&p, caches);
    if progress.is_null() {
        return Ok(());
    }
    let promises: Api<DynamicObject> = Api::all_with(
        ctx.client.clone(),
        &crate::support::resources::promise_resource(),
    );
    status::update_status(&promises, promise, |s, _| {
        status::set_field(s, "resourceRequests", progress.clone())
    })
    .await?;
    Ok(())
}

/// What of a Promise its requests read: spec (generation), deletion, labels (pause,
/// version), availability and requirements. A request controller's watch of its Promise
/// passes only changes to these, so the progress this module writes into the Promise's
/// status does not wake every request.
pub fn promise_inputs(promise: &DynamicObject) -> u64 {
    let status = promise.data.get("status").cloned().unwrap_or(Value::Null);
    crate::triggers::inputs_hash(
        promise,
        (
            promise.labels().clone(),
            status["status"].to_string(),
            status["requiredPromises"].to_string(),
            status["observedGeneration"].as_i64(),
        ),
    )
}

/// True while the Promise has a spec change it has not finished reconciling (its
/// `status.observedGeneration` is behind its generation): its requests wait, so that
/// they move to the new spec once, after the Promise has updated its revision and
/// labelled them, instead of once for the revision and again for the label.
pub fn promise_catching_up(promise: &DynamicObject) -> bool {
    let observed = promise.data["status"]["observedGeneration"]
        .as_i64()
        .unwrap_or(0);
    observed != 0 && promise.meta().generation.is_some_and(|g| g != observed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::resources::promise_resource;

    fn r(name: &str) -> ObjectRef<DynamicObject> {
        ObjectRef::new_with(name, promise_resource()).within("team")
    }

    #[test]
    fn queue_keeps_arrival_order_and_skips_requests_that_left() {
        let mut q = Queue::default();
        for n in ["a", "b", "c", "a"] {
            q.push(r(n));
        }
        q.remove(&r("b"));
        q.push(r("d"));
        q.push(r("b"));
        let order: Vec<String> = std::iter::from_fn(|| q.pop()).map(|r| r.name).collect();
        assert_eq!(order, ["a", "c", "d", "b"]);
        assert!(q.pop().is_none());
        assert!(q.order.is_empty() && q.members.is_empty());
    }

    #[test]
    fn queue_forgets_stale_entries_once_empty() {
        let mut q = Queue::default();
        for i in 0..100 {
            q.push(r(&format!("r{i}")));
            q.remove(&r(&format!("r{i}")));
        }
        assert!(
            q.order.is_empty(),
            "leaving an empty queue clears its order"
        );
        assert!(q.pop().is_none());
    }
}
