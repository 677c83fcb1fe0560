//! Resource requests: one dynamic controller per Promise API, started and
//! stopped with the Promise, running each request's configure and delete workflows.
//!
//! Beyond Kratix: the controller is restarted on the API's currently served version when
//! the Promise's CRD changes, and it is truly stopped when the Promise goes.

pub mod binding;
pub mod caches;
pub mod delete;
pub mod fanout;
mod shared;

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::Error;
use crate::context::Context;
use crate::dynamic::RequestApi;
use crate::support::harness::{Harness, Start};
use crate::support::resources::promise_resource;
use crate::support::status::{PatchTarget, guarded_patch};
use crate::support::works::classify_works;
use crate::support::{self, condition_true, set_condition, set_field};
use crate::workflow::Workflow;
use crate::workflow::engine::{self, Progress};
use caches::RequestCaches;
use plinth_api::WorkflowAction;
use plinth_api::constants::{
    annotations, condition_types, finalizers, labels, messages, reasons, requirement_state,
};
use shared::{COMPONENT, RequestCtx, request_workflow};

const FINALIZERS: [&str; 4] = [
    finalizers::WORK_CLEANUP,
    finalizers::WORKFLOWS_CLEANUP,
    finalizers::DELETE_WORKFLOWS,
    finalizers::RESOURCE_BINDING_CLEANUP,
];

/// Starts (or restarts on a changed API) the request controller of `promise` on `api`
/// in the context's registry.
pub fn start(ctx: &Arc<Context>, promise: &str, api: RequestApi) {
    let (ctx2, name) = (ctx.clone(), promise.to_string());
    ctx.request_controllers
        .ensure(promise, api, move |api| tokio::spawn(run(ctx2, name, api)));
}

async fn run(ctx: Arc<Context>, promise_name: String, api: RequestApi) {
    let ar = api.resource();
    let requests: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &ar);
    // Promises and requests advance one step per reconcile and are woken by their own
    // status writes; those writes are no-ops once nothing changes, so they settle.
    // The store keeps requests without `managedFields`, which nothing here reads.
    let writer = reflector::store::Writer::new(ar.clone());
    let store = writer.as_reader();
    let main = watcher(requests, watcher::Config::default())
        .default_backoff()
        .modify(|o| o.managed_fields_mut().clear())
        .reflect(writer)
        .applied_objects();
    let controller =
        Controller::for_stream_with(main, store, ar.clone()).with_config(ctx.config().runtime());
    let requests_store = controller.store();
    let jobs_by_request = Arc::new(caches::JobIndex::default());
    let (controller, jobs) = watch_workflow_outputs(
        controller,
        &ctx.client,
        &promise_name,
        &ar,
        jobs_by_request.clone(),
    );
    let bindings_by_request = Arc::new(caches::BindingIndex::default());
    let (controller, bindings, revisions) = watch_versions(
        controller,
        &ctx.client,
        &promise_name,
        &ar,
        bindings_by_request.clone(),
    );
    let (controller, promise) = watch_promise(controller, &ctx.client, &promise_name, &ar);
    let (fanout, wakes) = fanout::FanOut::new(&promise_name);
    let rctx = Arc::new(RequestCtx {
        ctx,
        promise: promise_name.clone(),
        api,
        fanout,
        caches: RequestCaches {
            promise,
            revisions,
            bindings,
            bindings_by_request,
            jobs,
            jobs_by_request,
            requests: requests_store,
        },
    });
    let reporter = rctx.clone();
    let requests = controller
        // Requests queued by the fan-out limit, woken when a run ends.
        .reconcile_on(futures::stream::unfold(wakes, |mut rx| async move {
            rx.recv().await.map(|r| (r, rx))
        }))
        .start(
            Harness::for_promise("request", rctx.promise.clone()),
            crate::announce::with_condition_events(COMPONENT, context_of, reconcile),
            rctx,
        );
    let pause = reporter.ctx.config().requeue_short;
    let progress = reporter
        .fanout
        .report_progress(&reporter.ctx, &reporter.caches, pause);
    tokio::select! {
        _ = requests => {}
        _ = progress => {}
    }
}

/// A request's Jobs (by their annotations) and Works (by their labels) wake it; the Jobs
/// are cached.
fn watch_workflow_outputs(
    controller: Controller<DynamicObject>,
    client: &kube::Client,
    promise_name: &str,
    ar: &ApiResource,
    index: Arc<caches::JobIndex>,
) -> (Controller<DynamicObject>, Store<Job>) {
    let job_sel = format!(
        "{}={promise_name},kratix.io/workflow-type=resource",
        labels::PROMISE_NAME
    );
    let work_sel = format!(
        "{}={promise_name},{}",
        labels::PROMISE_NAME,
        labels::RESOURCE_NAME
    );
    let (ar_jobs, ar_works) = (ar.clone(), ar.clone());
    let (jobs, job_stream) = caches::reflect_jobs(
        Api::<Job>::all(client.clone()),
        watcher::Config::default().labels(&job_sel),
        index,
    );
    let controller = controller
        .watches_stream(job_stream, move |job| {
            let a = job.annotations();
            let name = a.get(annotations::JOB_RESOURCE_NAME)?;
            let ns = a.get(annotations::JOB_RESOURCE_NAMESPACE)?;
            Some(ObjectRef::new_with(name, ar_jobs.clone()).within(ns))
        })
        .watches(
            Api::<plinth_api::Work>::all(client.clone()),
            watcher::Config::default().labels(&work_sel),
            move |w| {
                let name = w.labels().get(labels::RESOURCE_NAME)?;
                let ns = w
                    .labels()
                    .get(labels::RESOURCE_NAMESPACE)
                    .cloned()
                    .or(w.namespace())?;
                Some(ObjectRef::new_with(name, ar_works.clone()).within(&ns))
            },
        );
    (controller, jobs)
}

/// A request's binding (created, moved, deleted) wakes it; a new latest revision wakes
/// all of the Promise's requests. Both are cached.
fn watch_versions(
    controller: Controller<DynamicObject>,
    client: &kube::Client,
    promise_name: &str,
    ar: &ApiResource,
    index: Arc<caches::BindingIndex>,
) -> (
    Controller<DynamicObject>,
    Store<plinth_api::ResourceBinding>,
    Store<plinth_api::PromiseRevision>,
) {
    let by_promise = format!("{}={promise_name}", labels::PROMISE_NAME);
    let (ar_bindings, ar_revisions, store) = (ar.clone(), ar.clone(), controller.store());
    let ((bindings, binding_stream), (revisions, revision_stream)) =
        caches::reflect_versions(client, &by_promise, index);
    let controller = controller
        .watches_stream_with(
            binding_stream,
            move |b| {
                let (name, ns) = binding::request_of(&b)?;
                Some(ObjectRef::new_with(&name, ar_bindings.clone()).within(&ns))
            },
            (),
        )
        .watches_stream_with(
            revision_stream,
            move |_| all_requests(&store, &ar_revisions),
            (),
        );
    (controller, bindings, revisions)
}

/// The Promise turning (un)available or pausing wakes all of its requests; it is cached.
fn watch_promise(
    controller: Controller<DynamicObject>,
    client: &kube::Client,
    promise_name: &str,
    ar: &ApiResource,
) -> (Controller<DynamicObject>, Store<DynamicObject>) {
    let (ar, store) = (ar.clone(), controller.store());
    let (promise, stream) = caches::reflect_promise(client, promise_name);
    let controller = controller.watches_stream_with(
        stream.predicate_filter(
            |p: &DynamicObject| Some(fanout::promise_inputs(p)),
            Default::default(),
        ),
        move |_| all_requests(&store, &ar),
        promise_resource(),
    );
    (controller, promise)
}

/// Every cached request of the API.
fn all_requests(store: &Store<DynamicObject>, ar: &ApiResource) -> Vec<ObjectRef<DynamicObject>> {
    store
        .state()
        .into_iter()
        .map(|r| ObjectRef::from_obj_with(r.as_ref(), ar.clone()))
        .collect()
}

/// The shared context of a request controller's state.
fn context_of(rctx: &RequestCtx) -> &Context {
    &rctx.ctx
}

/// A resource request as one reconcile sees it, with the API it writes through.
struct Reconciling<'a> {
    rctx: &'a RequestCtx,
    rr: &'a DynamicObject,
    ns: String,
    name: String,
    api: Api<DynamicObject>,
    /// The newest copy of the request this reconcile holds: each write starts from it
    /// and leaves its result there (`support::status`).
    latest: support::Latest<DynamicObject>,
}

impl<'a> Reconciling<'a> {
    fn new(rctx: &'a RequestCtx, rr: &'a DynamicObject) -> Self {
        let ns = rr.namespace().unwrap_or_else(|| "default".into());
        Reconciling {
            api: Api::namespaced_with(rctx.ctx.client.clone(), &ns, &rctx.api.resource()),
            name: rr.name_any(),
            rctx,
            rr,
            ns,
            latest: support::Latest::new(rr),
        }
    }

    /// [`support::update_status_from`] the newest copy, keeping what it returns.
    async fn update_status<F>(&self, mutate: F) -> Result<DynamicObject, Error>
    where
        F: FnMut(&mut Value, &DynamicObject) -> bool,
    {
        self.latest.update_status(&self.api, mutate).await
    }

    fn ctx(&self) -> &Context {
        &self.rctx.ctx
    }
}

fn paused(o: &DynamicObject) -> bool {
    o.labels().get(labels::PAUSED).is_some_and(|v| v == "true")
}

/// One reconcile, a failure of it reported on the request ([`support::outcome`]).
async fn reconcile(rr: Arc<DynamicObject>, rctx: Arc<RequestCtx>) -> Result<Action, Error> {
    let result = reconcile_steps(rr.clone(), rctx.clone()).await;
    let api = Reconciling::new(&rctx, &rr).api;
    support::outcome::report(&rctx.ctx, COMPONENT, &api, &rr, result).await
}

/// The steps of Kratix's resource request controller in order. A step that wrote what
/// the next depends on ends the reconcile; the write wakes the next.
async fn reconcile_steps(rr: Arc<DynamicObject>, rctx: Arc<RequestCtx>) -> Result<Action, Error> {
    let r = Reconciling::new(&rctx, &rr);
    let timeout = r.ctx().config().network_timeout;
    rctx.caches.ready(&rctx.promise, timeout).await?;
    let Some(promise) = rctx.caches.promise() else {
        return Ok(Action::await_change());
    };
    if paused(&promise) || paused(&rr) {
        mark_paused(&r).await?;
        return Ok(Action::await_change());
    }
    let deleting = rr.meta().deletion_timestamp.is_some();
    if ensure_metadata(&r, !deleting && promise_ready(&promise)).await? {
        return Ok(Action::await_change());
    }
    if deleting {
        let promise_spec = promise.data.get("spec").cloned().unwrap_or(Value::Null);
        return delete::delete(&rctx, &r.api, &rr, &promise_spec).await;
    }
    // Resumed (the request's or its Promise's pause lifted): run from the first pipeline.
    if engine::resume_after_pause(&r.api, &rr, &[]).await?
        || hold_for_promise(&r, &promise).await?
        || fanout::promise_catching_up(&promise)
    {
        return Ok(Action::await_change());
    }
    // ResourceBinding: the revision whose Promise spec the request runs with.
    let Some((binding, bound)) =
        binding::bind(r.ctx(), COMPONENT, &rctx.promise, &rctx.caches, &r.api, &rr).await?
    else {
        return Ok(Action::await_change());
    };
    if promise.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let wf = request_workflow(&rctx, &rr, &bound.spec, WorkflowAction::Configure);
    if let Some(action) = run_configure(&r, &wf, &binding, &bound).await? {
        return Ok(action);
    }
    if reschedule(&r, &wf).await? {
        return Ok(Action::await_change());
    }
    let stored = record_reconciled(&r, &wf, &binding, &bound).await?;
    let interval = r.ctx().config().reconciliation_interval;
    engine::periodic_rerun_after(&rctx.cached_jobs(&wf), &r.api, &stored, interval).await
}

/// A paused request (or Promise) reports `Reconciled=Unknown/PausedReconciliation`.
async fn mark_paused(r: &Reconciling<'_>) -> Result<(), Error> {
    r.update_status(|s, _| {
        set_condition(
            s,
            condition_types::RECONCILED,
            "Unknown",
            reasons::PAUSED_RECONCILIATION,
            messages::PAUSED,
            None,
        )
    })
    .await?;
    Ok(())
}

/// Labels the request with its Promise's name and, when it is to run (`runs`), adds the
/// request finalizers it lacks, in one write; true when it wrote.
async fn ensure_metadata(r: &Reconciling<'_>, runs: bool) -> Result<bool, Error> {
    let promise = r.rctx.promise.as_str();
    let changes = |current: &DynamicObject| {
        let mut meta = serde_json::Map::new();
        if current
            .labels()
            .get(labels::PROMISE_NAME)
            .map(String::as_str)
            != Some(promise)
        {
            meta.insert("labels".into(), json!({ labels::PROMISE_NAME: promise }));
        }
        let existing = current.finalizers();
        if runs && current.meta().deletion_timestamp.is_none() {
            let missing = FINALIZERS
                .iter()
                .filter(|f| !existing.iter().any(|e| e == *f));
            let wanted: Vec<&str> = existing
                .iter()
                .map(String::as_str)
                .chain(missing.copied())
                .collect();
            if wanted.len() > existing.len() {
                meta.insert("finalizers".into(), json!(wanted));
            }
        }
        (!meta.is_empty()).then(|| json!({ "metadata": meta }))
    };
    if changes(r.rr).is_none() {
        return Ok(false);
    }
    guarded_patch(
        &r.api,
        &r.name,
        PatchTarget::Object,
        Some(r.rr.into()),
        changes,
    )
    .await?;
    Ok(true)
}

/// True when the Promise is Available and its required Promises are installed: its
/// requests may run.
fn promise_ready(promise: &DynamicObject) -> bool {
    let status = promise.data.get("status").unwrap_or(&Value::Null);
    let requirements_met = status["requiredPromises"]
        .as_array()
        .is_none_or(|r| r.iter().all(|x| x["state"] == requirement_state::INSTALLED));
    requirements_met && plinth_api::constants::promise_status::is_available(status)
}

/// Holds the request while its Promise is not Available or its requirements are not
/// installed (`PromiseAvailable=False`), and sets `PromiseAvailable=True` once they
/// are; true when the reconcile ends here.
async fn hold_for_promise(r: &Reconciling<'_>, promise: &DynamicObject) -> Result<bool, Error> {
    if !promise_ready(promise) {
        r.update_status(|s, _| {
            let mut c = set_condition(
                s,
                condition_types::PROMISE_AVAILABLE,
                "False",
                reasons::PROMISE_REQUIREMENTS_NOT_INSTALLED,
                messages::PROMISE_REQUIREMENTS_NOT_INSTALLED,
                None,
            );
            c |= set_field(s, "message", json!("Pending"));
            c
        })
        .await?;
        return Ok(true);
    }
    let rr_status = r.rr.data.get("status").unwrap_or(&Value::Null);
    if !support::condition(rr_status, condition_types::PROMISE_AVAILABLE)
        .is_some_and(|c| c["status"] == "False")
    {
        return Ok(false);
    }
    r.update_status(|s, _| {
        set_condition(
            s,
            condition_types::PROMISE_AVAILABLE,
            "True",
            reasons::PROMISE_AVAILABLE,
            messages::PROMISE_REQUIREMENTS_MET,
            None,
        )
    })
    .await?;
    Ok(true)
}

/// Runs the configure workflow within the Promise's fan-out limit and records the
/// outcome on the binding. `None` once it is done; otherwise the action that waits
/// (queued, running, a retry's `nextRetryAt`, or the periodic re-run after a failure).
async fn run_configure(
    r: &Reconciling<'_>,
    wf: &Workflow,
    binding: &plinth_api::ResourceBinding,
    bound: &binding::BoundRevision,
) -> Result<Option<Action>, Error> {
    let (ctx, rctx) = (r.ctx(), r.rctx);
    let config = ctx.config();
    // At most N workflows of the Promise's requests in flight (fan-out).
    let me = ObjectRef::from_obj_with(r.rr, rctx.api.resource());
    let fanout::Admission::Go(slot) = rctx
        .fanout
        .admit(ctx, &rctx.caches, wf, r.rr, me.clone())
        .await?
    else {
        return Ok(Some(Action::requeue(config.requeue_slow)));
    };
    let progress =
        engine::reconcile_configure(&rctx.workflow_parent(wf, &r.api, r.rr, &r.latest)).await?;
    drop(slot);
    rctx.fanout.ran(&me, &progress);
    binding::record_outcome(ctx, binding, bound, &progress).await?;
    Ok(match progress {
        Progress::Done => None,
        Progress::Running => Some(Action::await_change()),
        Progress::Suspended { retry_at } => Some(match retry_at {
            Some(at) => Action::requeue(support::until(at)),
            None => Action::await_change(),
        }),
        Progress::Failed { .. } if config.reconcile_after_failure => Some(
            engine::periodic_rerun_after(
                &rctx.cached_jobs(wf),
                &r.api,
                r.rr,
                config.reconciliation_interval,
            )
            .await?,
        ),
        Progress::Failed { .. } => Some(Action::await_change()),
    })
}

/// `plinth.dev/reschedule=true` on the request: removes the misplaced WorkPlacements of
/// its Works so they are placed again, then the label; true when it acted.
async fn reschedule(r: &Reconciling<'_>, wf: &Workflow) -> Result<bool, Error> {
    if r.rr
        .labels()
        .get(labels::RESCHEDULE)
        .is_none_or(|v| v != "true")
    {
        return Ok(false);
    }
    let works = request_works(r, wf).await?;
    let n = support::works::reschedule_misplaced(&r.ctx().client, &works).await?;
    engine::remove_labels(&r.api, r.rr, &[labels::RESCHEDULE]).await?;
    support::publish(
        &r.ctx().recorder(COMPONENT),
        &support::reference(r.rr),
        plinth_api::events::EventType::Normal,
        plinth_api::constants::events::WORKS_RESCHEDULED,
        format!("Removed {n} misplaced WorkPlacement(s); their Works are placed again on matching Destinations"),
    )
    .await;
    Ok(true)
}

/// The request's Works, from its configure workflow's namespace.
async fn request_works(r: &Reconciling<'_>, wf: &Workflow) -> Result<Vec<plinth_api::Work>, Error> {
    let works: Api<plinth_api::Work> = Api::namespaced(r.ctx().client.clone(), &wf.namespace);
    let mut sel = format!(
        "{}={},{}={},{}=resource",
        labels::PROMISE_NAME,
        r.rctx.promise,
        labels::RESOURCE_NAME,
        r.name,
        labels::WORK_TYPE
    );
    if wf.pipeline_namespace_set {
        sel.push_str(&format!(",kratix.io/resource-namespace={}", r.ns));
    }
    Ok(works.list(&ListParams::default().labels(&sel)).await?.items)
}

/// Writes the observed generation, versions, `WorksSucceeded`, `Reconciled` and the last
/// successful configure time; announces the first `Reconciled=True`. Returns the request
/// as stored.
async fn record_reconciled(
    r: &Reconciling<'_>,
    wf: &Workflow,
    binding: &plinth_api::ResourceBinding,
    bound: &binding::BoundRevision,
) -> Result<DynamicObject, Error> {
    let state = classify_works(&request_works(r, wf).await?);
    let generation = r.rr.meta().generation.unwrap_or(1);
    let no_pipelines = wf.pipelines.is_empty();
    let stored = r
        .latest
        .update_status_known(&r.api, |s, _| {
            let mut c = set_field(s, "observedGeneration", json!(generation));
            c |= binding::set_request_versions(s, binding, bound);
            c |= state.set_conditions(s, "resource", no_pipelines);
            c | record_last_success(s)
        })
        .await?;
    let rr_status = r.rr.data.get("status").unwrap_or(&Value::Null);
    let was = support::condition(rr_status, condition_types::RECONCILED)
        .is_some_and(|c| c["status"] == "True");
    let now = condition_true(
        stored.data.get("status").unwrap_or(&Value::Null),
        "Reconciled",
    );
    if !was && now {
        support::publish(
            &r.ctx().recorder(COMPONENT),
            &support::reference(&stored),
            plinth_api::events::EventType::Normal,
            plinth_api::constants::events::RECONCILE_SUCCEEDED,
            format!(
                "Resource request reconciled with promise {} version {}",
                r.rctx.promise, bound.version
            ),
        )
        .await;
    }
    Ok(stored)
}

/// Copies the completed configure workflow's transition time into
/// `lastSuccessfulConfigureWorkflowTime` (top level and under `kratix.workflows`).
fn record_last_success(s: &mut Value) -> bool {
    let Some(t) = support::condition(s, condition_types::CONFIGURE_WORKFLOW_COMPLETED)
        .filter(|c| c["status"] == "True")
        .and_then(|c| c["lastTransitionTime"].as_str())
        .map(str::to_string)
    else {
        return false;
    };
    let mut c = set_field(s, "lastSuccessfulConfigureWorkflowTime", json!(t));
    let k = support::ensure_object(s)
        .entry("kratix")
        .or_insert_with(|| json!({}));
    let w = support::ensure_object(k)
        .entry("workflows")
        .or_insert_with(|| json!({}));
    c |= set_field(w, "lastSuccessfulConfigureWorkflowTime", json!(t));
    c
}

/// Labels every request of the API with the run-from-start label.
pub async fn label_all_run_from_start(ctx: &Context, api: &RequestApi) -> Result<(), Error> {
    let all: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &api.resource());
    for rr in all.list(&ListParams::default()).await?.items {
        let scoped: Api<DynamicObject> = Api::namespaced_with(
            ctx.client.clone(),
            &rr.namespace().unwrap_or_default(),
            &api.resource(),
        );
        let patch = json!({"metadata": {"labels": {labels::RUN_FROM_START: "true"}}});
        scoped
            .patch(
                &rr.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
    }
    Ok(())
}
