//! Resource requests: one dynamic controller per Promise API, started and
//! stopped with the Promise, running each request's configure and delete workflows.
//!
//! Beyond Kratix: the controller is restarted on the API's currently served version when
//! the Promise's CRD changes, and it is truly stopped when the Promise goes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::Error;
use crate::context::Context;
use crate::promise::{classify_works, promise_resource};
use crate::support::{self, condition_true, set_condition, set_field};
use crate::support::{remove_finalizer, set_finalizers};
use crate::workflow::engine::{self, Progress};
use crate::workflow::{Subject, Workflow, WorkflowAction, WorkflowType};
use crate::{fanout, resourcebinding};
use plinth_api::constants::{
    annotations, condition_types, finalizers, labels, messages, reasons, requirement_state,
};

const COMPONENT: &str = plinth_api::constants::events::RESOURCE_REQUEST_CONTROLLER;
const FINALIZERS: [&str; 4] = [
    finalizers::WORK_CLEANUP,
    finalizers::WORKFLOWS_CLEANUP,
    finalizers::DELETE_WORKFLOWS,
    finalizers::RESOURCE_BINDING_CLEANUP,
];

/// A Promise API as the request controller watches it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestApi {
    pub group: String,
    pub kind: String,
    pub plural: String,
    /// The CRD's storage version (reported as the Promise's `status.apiVersion`).
    pub storage_version: String,
    /// The version the controller watches: served now.
    pub served_version: String,
}

impl RequestApi {
    /// The dynamic API resource at the watched version.
    pub fn resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(&self.group, &self.served_version, &self.kind),
            &self.plural,
        )
    }
}

struct Running {
    api: RequestApi,
    task: JoinHandle<()>,
}

/// The running request controllers keyed by Promise name.
#[derive(Default)]
pub struct RequestControllers {
    inner: Mutex<HashMap<String, Running>>,
}

impl RequestControllers {
    /// Starts the controller for `promise`, or restarts it when its API changed.
    pub fn ensure(&self, ctx: &Arc<Context>, promise: &str, api: RequestApi) {
        let mut map = self.inner.lock().expect("request controllers poisoned");
        if let Some(r) = map.get(promise) {
            if r.api == api && !r.task.is_finished() {
                return;
            }
            r.task.abort();
        }
        tracing::info!(promise, kind = %api.kind, version = %api.served_version, "starting resource request controller");
        let task = tokio::spawn(run(ctx.clone(), promise.to_string(), api.clone()));
        map.insert(promise.to_string(), Running { api, task });
    }

    /// Stops the controller for `promise` (Promise deleted or API unusable).
    pub fn stop(&self, promise: &str) {
        if let Some(r) = self
            .inner
            .lock()
            .expect("request controllers poisoned")
            .remove(promise)
        {
            r.task.abort();
            tracing::info!(promise, "stopped resource request controller");
        }
    }

    /// The API the controller for `promise` watches, if running.
    pub fn api_of(&self, promise: &str) -> Option<RequestApi> {
        self.inner
            .lock()
            .expect("request controllers poisoned")
            .get(promise)
            .map(|r| r.api.clone())
    }
}

struct RequestCtx {
    ctx: Arc<Context>,
    promise: String,
    api: RequestApi,
    fanout: fanout::FanOut,
}

async fn run(ctx: Arc<Context>, promise_name: String, api: RequestApi) {
    let ar = api.resource();
    let requests: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &ar);
    // Promises and requests advance one step per reconcile and are woken by their own
    // status writes; those writes are no-ops once nothing changes, so they settle.
    let controller = Controller::new_with(requests, watcher::Config::default(), ar.clone());
    let store = controller.store();
    let jobs: Api<Job> = Api::all(ctx.client.clone());
    let works: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &work_resource());
    let promises: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &promise_resource());
    let (ar_jobs, ar_works) = (ar.clone(), ar.clone());
    let (ar_bindings, ar_revisions, revision_store) = (ar.clone(), ar.clone(), store.clone());
    let job_sel = format!(
        "{}={promise_name},kratix.io/workflow-type=resource",
        labels::PROMISE_NAME
    );
    let work_sel = format!(
        "{}={promise_name},{}",
        labels::PROMISE_NAME,
        labels::RESOURCE_NAME
    );
    let ctx_client = ctx.client.clone();
    let (fanout, wakes) = fanout::FanOut::new(&promise_name);
    let rctx = Arc::new(RequestCtx {
        ctx,
        promise: promise_name.clone(),
        api,
        fanout,
    });
    let reporter = rctx.clone();
    let requests = controller
        .watches(
            jobs,
            watcher::Config::default().labels(&job_sel),
            move |job| {
                let a = job.annotations();
                let name = a.get(annotations::JOB_RESOURCE_NAME)?;
                let ns = a.get(annotations::JOB_RESOURCE_NAMESPACE)?;
                Some(ObjectRef::new_with(name, ar_jobs.clone()).within(ns))
            },
        )
        .watches_with(
            works,
            work_resource(),
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
        )
        // A request's binding (created, moved, deleted) wakes it.
        .watches_with(
            Api::<DynamicObject>::all_with(
                ctx_client.clone(),
                &resourcebinding::binding_resource(),
            ),
            resourcebinding::binding_resource(),
            watcher::Config::default().labels(&format!("{}={promise_name}", labels::PROMISE_NAME)),
            move |b| {
                let (name, ns) = resourcebinding::request_of(&b)?;
                Some(ObjectRef::new_with(&name, ar_bindings.clone()).within(&ns))
            },
        )
        // A new latest revision wakes all of the Promise's requests.
        .watches_with(
            Api::<DynamicObject>::all_with(
                ctx_client.clone(),
                &resourcebinding::revision_resource(),
            ),
            resourcebinding::revision_resource(),
            watcher::Config::default().labels(&format!("{}={promise_name}", labels::PROMISE_NAME)),
            move |_| {
                revision_store
                    .state()
                    .into_iter()
                    .map(|r| ObjectRef::from_obj_with(r.as_ref(), ar_revisions.clone()))
                    .collect::<Vec<_>>()
            },
        )
        // The Promise turning (un)available or pausing wakes all of its requests.
        .watches_stream_with(
            watcher(
                promises,
                watcher::Config::default().fields(&format!("metadata.name={promise_name}")),
            )
            .default_backoff()
            .touched_objects()
            .predicate_filter(
                |p: &DynamicObject| Some(fanout::promise_inputs(p)),
                Default::default(),
            ),
            move |_| {
                store
                    .state()
                    .into_iter()
                    .map(|r| ObjectRef::from_obj_with(r.as_ref(), ar.clone()))
                    .collect::<Vec<_>>()
            },
            promise_resource(),
        )
        // Requests queued by the fan-out limit, woken when a run ends.
        .reconcile_on(futures::stream::unfold(wakes, |mut rx| async move {
            rx.recv().await.map(|r| (r, rx))
        }))
        .run(
            crate::instrument::instrument(
                rctx.ctx.metrics.clone(),
                "request",
                Some(rctx.promise.clone()),
                crate::announce::with_condition_events(COMPONENT, context_of, reconcile),
            ),
            error_policy,
            rctx,
        )
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(error = %e, "resource request reconcile");
            }
        });
    let pause = reporter.ctx.config().requeue_short;
    let progress = reporter
        .fanout
        .report_progress(&reporter.ctx, &reporter.api, pause);
    tokio::select! {
        _ = requests => {}
        _ = progress => {}
    }
}

fn work_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("platform.kratix.io", "v1alpha1", "Work"),
        "works",
    )
}

fn error_policy(rr: Arc<DynamicObject>, err: &Error, rctx: Arc<RequestCtx>) -> Action {
    tracing::warn!(promise = %rctx.promise, request = %rr.name_any(), namespace = %rr.namespace().unwrap_or_default(), error = %err, "resource request reconcile failed");
    Action::requeue(rctx.ctx.config().requeue_default)
}

fn request_workflow(
    rctx: &RequestCtx,
    rr: &DynamicObject,
    promise_spec: &Value,
    action: WorkflowAction,
) -> Workflow {
    let rr_ns = rr.namespace().unwrap_or_else(|| "default".into());
    let pipeline_ns = promise_spec["workflows"]["config"]["pipelineNamespace"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    Workflow {
        promise_name: rctx.promise.clone(),
        promise_spec: promise_spec.clone(),
        workflow_type: WorkflowType::Resource,
        action,
        subject: Subject {
            group: rctx.api.group.clone(),
            version: rctx.api.served_version.clone(),
            kind: rctx.api.kind.clone(),
            plural: rctx.api.plural.clone(),
            name: rr.name_any(),
            namespace: Some(rr_ns.clone()),
            uid: rr.meta().uid.clone().unwrap_or_default(),
            spec: rr.data.get("spec").cloned().unwrap_or(Value::Null),
            annotations: rr.annotations().clone(),
        },
        pipelines: promise_spec["workflows"]["resource"][action.as_str()]
            .as_array()
            .cloned()
            .unwrap_or_default(),
        namespace: pipeline_ns.clone().unwrap_or(rr_ns.clone()),
        pipeline_namespace_set: pipeline_ns.is_some_and(|p| p != rr_ns),
    }
}

/// The shared context of a request controller's state.
fn context_of(rctx: &RequestCtx) -> &Context {
    &rctx.ctx
}

async fn reconcile(rr: Arc<DynamicObject>, rctx: Arc<RequestCtx>) -> Result<Action, Error> {
    let ctx = &rctx.ctx;
    let config = ctx.config();
    let ns = rr.namespace().unwrap_or_else(|| "default".into());
    let name = rr.name_any();
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &ns, &rctx.api.resource());
    let promises: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &promise_resource());
    let Some(promise) = promises.get_opt(&rctx.promise).await? else {
        return Ok(Action::await_change());
    };
    let promise_spec = promise.data.get("spec").cloned().unwrap_or(Value::Null);

    let paused = |o: &DynamicObject| o.labels().get(labels::PAUSED).is_some_and(|v| v == "true");
    if paused(&promise) || paused(&rr) {
        support::update_status(&api, &name, |s, _| {
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
        return Ok(Action::await_change());
    }
    if rr.labels().get(labels::PROMISE_NAME) != Some(&rctx.promise) {
        let patch = json!({"metadata": {"labels": {labels::PROMISE_NAME: rctx.promise}}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        return Ok(Action::await_change());
    }

    if rr.meta().deletion_timestamp.is_some() {
        return delete(&rctx, &api, &rr, &promise_spec).await;
    }
    // Resumed (the request's or its Promise's pause lifted): run from the first pipeline.
    if engine::resume_after_pause(&api, &rr, &[]).await? {
        return Ok(Action::await_change());
    }

    // Hold requests while the Promise cannot fulfil them.
    let promise_status = promise.data.get("status").cloned().unwrap_or(Value::Null);
    let requirements_met = promise_status["requiredPromises"]
        .as_array()
        .is_none_or(|r| r.iter().all(|x| x["state"] == requirement_state::INSTALLED));
    let promise_available = promise_status["status"] == "Available";
    let rr_status = rr.data.get("status").cloned().unwrap_or(Value::Null);
    if !requirements_met || !promise_available {
        support::update_status(&api, &name, |s, _| {
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
        return Ok(Action::await_change());
    }
    if support::condition(&rr_status, condition_types::PROMISE_AVAILABLE)
        .is_some_and(|c| c["status"] == "False")
    {
        support::update_status(&api, &name, |s, _| {
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
        return Ok(Action::await_change());
    }

    // Finalizers.
    let current = rr.finalizers().to_vec();
    if FINALIZERS.iter().any(|f| !current.iter().any(|c| c == f)) {
        let mut wanted = current.clone();
        for f in FINALIZERS {
            if !wanted.iter().any(|c| c == f) {
                wanted.push(f.to_string());
            }
        }
        set_finalizers(&api, &rr, wanted).await?;
        return Ok(Action::await_change());
    }
    if fanout::promise_catching_up(&promise) {
        return Ok(Action::await_change());
    }
    // ResourceBinding: the revision whose Promise spec the request runs with (§3.7).
    let Some((binding, bound)) =
        resourcebinding::bind(ctx, COMPONENT, &rctx.promise, &api, &rr).await?
    else {
        return Ok(Action::await_change());
    };
    let promise_spec = bound.spec.clone();
    if promise.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }

    // Configure workflow.
    let wf = request_workflow(&rctx, &rr, &promise_spec, WorkflowAction::Configure);
    // At most N workflows of the Promise's requests in flight (fan-out).
    let me = ObjectRef::from_obj_with(rr.as_ref(), rctx.api.resource());
    let fanout::Admission::Go(slot) = rctx.fanout.admit(ctx, &wf, &rr, me).await? else {
        return Ok(Action::requeue(config.requeue_slow));
    };
    let progress =
        engine::reconcile_configure(ctx, &wf, &api, &rr, &rctx.api.group, COMPONENT).await?;
    drop(slot);
    rctx.fanout.ran(&progress);
    resourcebinding::record_outcome(ctx, &binding, &bound, &progress).await?;
    match progress {
        Progress::Done => {}
        Progress::Running => return Ok(Action::await_change()),
        Progress::Suspended { retry_at } => {
            return Ok(match retry_at {
                Some(at) => Action::requeue(std::time::Duration::from_secs(
                    (at.as_second() - jiff::Timestamp::now().as_second()).max(1) as u64,
                )),
                None => Action::await_change(),
            });
        }
        Progress::Failed { .. } => {
            return if config.reconcile_after_failure {
                engine::periodic_rerun(ctx, &wf, &api, &rr, config.reconciliation_interval).await
            } else {
                Ok(Action::await_change())
            };
        }
    }

    // Works and Reconciled.
    let works: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &wf.namespace, &work_resource());
    let mut sel = format!(
        "{}={},{}={name},{}=resource",
        labels::PROMISE_NAME,
        rctx.promise,
        labels::RESOURCE_NAME,
        labels::WORK_TYPE
    );
    if wf.pipeline_namespace_set {
        sel.push_str(&format!(",kratix.io/resource-namespace={ns}"));
    }
    let state = classify_works(&works.list(&ListParams::default().labels(&sel)).await?.items);
    let generation = rr.meta().generation.unwrap_or(1);
    let no_pipelines = wf.pipelines.is_empty();
    let version = bound.version.clone();
    let stored = support::update_status(&api, &name, |s, _| {
        let mut c = set_field(s, "observedGeneration", json!(generation));
        c |= resourcebinding::set_request_versions(s, &binding, &bound);
        let (ws, wr, wm) = state.condition("resource");
        c |= set_condition(s, condition_types::WORKS_SUCCEEDED, ws, wr, &wm, None);
        let workflow_done =
            no_pipelines || condition_true(s, condition_types::CONFIGURE_WORKFLOW_COMPLETED);
        if workflow_done && ws == "True" {
            c |= set_condition(
                s,
                condition_types::RECONCILED,
                "True",
                reasons::RECONCILED,
                messages::RECONCILED,
                None,
            );
        } else if ws == "False" {
            c |= set_condition(
                s,
                condition_types::RECONCILED,
                "False",
                reasons::WORKS_FAILING,
                messages::FAILING,
                None,
            );
        } else {
            c |= set_condition(
                s,
                condition_types::RECONCILED,
                "Unknown",
                reasons::WORKS_PENDING,
                messages::PENDING,
                None,
            );
        }
        if let Some(t) = support::condition(s, condition_types::CONFIGURE_WORKFLOW_COMPLETED)
            .filter(|c| c["status"] == "True")
            .and_then(|c| c["lastTransitionTime"].as_str())
            .map(str::to_string)
        {
            c |= set_field(s, "lastSuccessfulConfigureWorkflowTime", json!(t));
            let k = support::ensure_object(s)
                .entry("kratix")
                .or_insert_with(|| json!({}));
            let w = support::ensure_object(k)
                .entry("workflows")
                .or_insert_with(|| json!({}));
            c |= set_field(w, "lastSuccessfulConfigureWorkflowTime", json!(t));
        }
        c
    })
    .await?;
    let was = support::condition(&rr_status, condition_types::RECONCILED)
        .is_some_and(|c| c["status"] == "True");
    if !was
        && condition_true(
            stored.data.get("status").unwrap_or(&Value::Null),
            "Reconciled",
        )
    {
        support::publish(
            &ctx.recorder(COMPONENT),
            &support::reference(&stored),
            support::EventType::Normal,
            plinth_api::constants::events::RECONCILE_SUCCEEDED,
            format!(
                "Resource request reconciled with promise {} version {version}",
                rctx.promise
            ),
        )
        .await;
    }
    engine::periodic_rerun(ctx, &wf, &api, &stored, config.reconciliation_interval).await
}

/// Deletion, one step per reconcile: delete pipeline, then Works, then Jobs.
async fn delete(
    rctx: &RequestCtx,
    api: &Api<DynamicObject>,
    rr: &DynamicObject,
    promise_spec: &Value,
) -> Result<Action, Error> {
    let ctx = &rctx.ctx;
    let config = ctx.config();
    let has = |f: &str| rr.finalizers().iter().any(|x| x == f);
    // The request's HealthRecords go with it.
    let target = crate::health::record::Target {
        promise: rctx.promise.clone(),
        namespace: rr.namespace().unwrap_or_default(),
        name: rr.name_any(),
    };
    crate::health::record::delete_records_of(ctx, &target).await?;
    let promise_spec =
        &resourcebinding::spec_for_delete(ctx, &rctx.promise, rr, promise_spec).await?;
    let wf = request_workflow(rctx, rr, promise_spec, WorkflowAction::Delete);
    if has(finalizers::DELETE_WORKFLOWS) {
        let configure = request_workflow(rctx, rr, promise_spec, WorkflowAction::Configure);
        match engine::reconcile_delete(ctx, &wf, &configure, api, rr, &rctx.api.group, COMPONENT)
            .await?
        {
            Progress::Done => remove_finalizer(api, rr, finalizers::DELETE_WORKFLOWS).await?,
            // A retrying delete pipeline runs again at its nextRetryAt.
            Progress::Suspended { retry_at: Some(at) } => {
                return Ok(Action::requeue(support::until(at)));
            }
            _ => return Ok(Action::await_change()),
        }
        return Ok(Action::await_change());
    }
    let sel = format!(
        "{}={},{}={}",
        labels::PROMISE_NAME,
        rctx.promise,
        labels::RESOURCE_NAME,
        rr.name_any()
    );
    if has(finalizers::WORK_CLEANUP) {
        let works: Api<DynamicObject> =
            Api::namespaced_with(ctx.client.clone(), &wf.namespace, &work_resource());
        let list = works.list(&ListParams::default().labels(&sel)).await?.items;
        if list.is_empty() {
            remove_finalizer(api, rr, finalizers::WORK_CLEANUP).await?;
            return Ok(Action::await_change());
        }
        for w in list
            .iter()
            .filter(|w| w.meta().deletion_timestamp.is_none())
        {
            match works
                .delete(&w.name_any(), &DeleteParams::background())
                .await
            {
                Ok(_) => {}
                Err(ref e) if crate::support::is_not_found(e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        // Work deletion events wake this request (Works are watched).
        return Ok(Action::requeue(config.requeue_default));
    }
    if has(finalizers::WORKFLOWS_CLEANUP) {
        let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &wf.namespace);
        for j in jobs
            .list(&ListParams::default().labels(&format!("{sel},kratix.io/workflow-type=resource")))
            .await?
            .items
        {
            match jobs
                .delete(&j.name_any(), &DeleteParams::background())
                .await
            {
                Ok(_) => {}
                Err(ref e) if crate::support::is_not_found(e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        remove_finalizer(api, rr, finalizers::WORKFLOWS_CLEANUP).await?;
        return Ok(Action::await_change());
    }
    if has(finalizers::RESOURCE_BINDING_CLEANUP) {
        let bindings: Api<DynamicObject> = Api::namespaced_with(
            ctx.client.clone(),
            &rr.namespace().unwrap_or_default(),
            &ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("platform.kratix.io", "v1alpha1", "ResourceBinding"),
                "resourcebindings",
            ),
        );
        for b in bindings
            .list(&ListParams::default().labels(&sel))
            .await?
            .items
        {
            let _ = bindings
                .delete(&b.name_any(), &DeleteParams::background())
                .await;
        }
        remove_finalizer(api, rr, finalizers::RESOURCE_BINDING_CLEANUP).await?;
    }
    Ok(Action::await_change())
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

/// Deletes every request of the API (their finalizers run their delete workflows);
/// returns how many still exist.
pub async fn delete_all(ctx: &Context, api: &RequestApi) -> Result<usize, Error> {
    let all: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &api.resource());
    let items = all.list(&ListParams::default()).await?.items;
    for rr in items
        .iter()
        .filter(|r| r.meta().deletion_timestamp.is_none())
    {
        let scoped: Api<DynamicObject> = Api::namespaced_with(
            ctx.client.clone(),
            &rr.namespace().unwrap_or_default(),
            &api.resource(),
        );
        match scoped
            .delete(&rr.name_any(), &DeleteParams::background())
            .await
        {
            Ok(_) => {}
            Err(ref e) if crate::support::is_not_found(e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(items.len())
}
