//! The Promise controller: installs a Promise's API as a CRD, delivers
//! its static dependencies, runs its promise workflows, tracks required Promises,
//! starts one resource-request controller per Promise API, and tears everything down
//! in Kratix's finalizer order on deletion.
//!
//! A reconcile is a short sequence of steps ([`reconcile`]); a step that wrote
//! something the next one depends on ends the reconcile, and the write's watch event
//! starts the next. The API CRD and its RBAC are in [`api`], requirements in
//! [`requirements`], the static-dependency Work in [`dependencies`] and the deletion
//! table in [`deletion`].
//!
//! Beyond Kratix: no fixed 5-second polling for the CRD (CRD events wake the Promise),
//! requirement changes are noticed from any Promise's events, and the request
//! controller follows the API's served versions without a restart.

mod api;
mod deletion;
mod dependencies;
mod observed;
mod requirements;

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::context::Context;
use crate::dynamic::RequestApi;
use crate::support::harness::{Harness, Start};
use crate::support::works::{WorksState, classify_works};
use crate::support::{self, set_condition, set_field, set_finalizers};
use crate::workflow::Workflow;
use crate::workflow::engine::{self, Progress};
use crate::{Error, request};
use observed::{COMPONENT, Observed, Step, promise_api};
use plinth_api::WorkflowAction;
use plinth_api::constants::{condition_types, finalizers, labels, messages, reasons};
use plinth_api::constants::{promise_status, work_type};

use crate::support::resources::promise_resource;

/// Runs the Promise controller until the client's watches end.
pub async fn run(ctx: Arc<Context>) {
    let ar = promise_resource();
    let promises: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &ar);
    // Promises and requests advance one step per reconcile and are woken by their own
    // status writes; those writes are no-ops once nothing changes, so they settle.
    let controller = Controller::new_with(promises.clone(), watcher::Config::default(), ar.clone());
    let requires_store = controller.store();
    let promise_jobs = format!(
        "{}={}",
        labels::WORKFLOW_TYPE,
        plinth_api::WorkflowType::Promise.as_str()
    );
    controller
        // A Promise's API CRD carries the promise-name label: its Established condition wakes the Promise.
        .watches(
            Api::<CustomResourceDefinition>::all(ctx.client.clone()),
            watcher::Config::default().labels(labels::PROMISE_NAME),
            |crd| labelled_promise(&crd),
        )
        .watches(
            Api::<Job>::all(ctx.client.clone()),
            watcher::Config::default().labels(&promise_jobs),
            |job| labelled_promise(&job),
        )
        // Only the Promise's own Works: its requests' Works (one or more per request)
        // are their controller's business, and waking the Promise for each made every
        // request cost a Promise reconcile.
        .watches(
            Api::<plinth_api::Work>::all(ctx.client.clone()),
            watcher::Config::default().labels(&format!(
                "{},{}!={}",
                labels::PROMISE_NAME,
                labels::WORK_TYPE,
                work_type::RESOURCE
            )),
            |w| labelled_promise(&w),
        )
        // Requirements resolve through PromiseRevisions: a revision created or deleted
        // (with nothing else about its Promise changing) wakes the Promises requiring it.
        .watches(
            Api::<plinth_api::PromiseRevision>::all(ctx.client.clone()),
            watcher::Config::default().labels(labels::PROMISE_NAME),
            {
                let store = requires_store.clone();
                move |rev| {
                    rev.labels()
                        .get(labels::PROMISE_NAME)
                        .map(|p| requirers(&store, p))
                        .unwrap_or_default()
                }
            },
        )
        // Any Promise change wakes the Promises that require it, whether or not they have
        // written themselves into its requiredBy yet.
        .watches_with(promises, ar, watcher::Config::default(), move |changed| {
            requirers(&requires_store, &changed.name_any())
        })
        .start(
            Harness::new("promise"),
            crate::announce::with_condition_events(COMPONENT, crate::announce::itself, reconcile),
            ctx,
        )
        .await;
}

/// The Promise named by an object's promise-name label.
fn labelled_promise<K: ResourceExt>(obj: &K) -> Option<ObjectRef<DynamicObject>> {
    obj.labels()
        .get(labels::PROMISE_NAME)
        .map(|p| ObjectRef::new_with(p, promise_resource()))
}

/// The cached Promises whose `spec.requiredPromises` name `name`.
fn requirers(store: &Store<DynamicObject>, name: &str) -> Vec<ObjectRef<DynamicObject>> {
    store
        .state()
        .into_iter()
        .filter(|p| {
            p.data["spec"]["requiredPromises"]
                .as_array()
                .is_some_and(|r| r.iter().any(|x| x["name"] == name))
        })
        .map(|p| ObjectRef::new_with(&p.name_any(), promise_resource()))
        .collect()
}

/// One reconcile, a failure of it reported on the Promise ([`support::outcome`]).
async fn reconcile(promise: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, Error> {
    let result = reconcile_steps(promise.clone(), ctx.clone()).await;
    support::outcome::report(&ctx, COMPONENT, &promise_api(&ctx), &promise, result).await
}

/// The steps of Kratix's Promise controller in order. Each step either passes (the
/// next runs) or ends the reconcile with the action it returns.
async fn reconcile_steps(promise: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, Error> {
    let p = Observed::new(&ctx, promise)?;
    if p.label_is_true(labels::PAUSED) {
        return mark_paused(&p).await;
    }
    if p.obj.meta().deletion_timestamp.is_some() {
        return deletion::reconcile(&ctx, &p).await;
    }
    let crd = api::request_crd(&p)?;
    // Resumed: run the configure workflow from its first pipeline, then every request.
    if engine::resume_after_pause(&p.api, &p.obj, &[(labels::RECONCILE_RESOURCES, "true")]).await?
        || ensure_finalizers(&p, crd.is_some()).await?
        || record_version(&p).await?
    {
        return Ok(Action::await_change());
    }
    requirements::ensure_revision(&ctx, &p).await?;
    let fulfilled = requirements::reconcile(&ctx, &p).await?;
    let request_api = match api::reconcile(&ctx, &p, crd.as_ref()).await? {
        Step::Next(r) => r,
        Step::Stop(action) => return Ok(action),
    };
    dependencies::reconcile(&ctx, &p).await?;
    let wf = p.workflow(WorkflowAction::Configure);
    if let Step::Stop(action) = run_configure_workflow(&ctx, &p, &wf).await? {
        return Ok(action);
    }
    // One request controller per Promise API (it holds requests while requirements are unmet).
    if let Some(r) = &request_api {
        request::start(&ctx, &p.name, r.clone());
    }
    if !fulfilled {
        return Ok(Action::await_change());
    }
    if let Some(r) = &request_api {
        rerun_requests_on_change(&ctx, &p, r).await?;
    }
    if reschedule(&ctx, &p).await? {
        return Ok(Action::await_change());
    }
    let stored = mark_available(&ctx, &p, &wf, request_api.as_ref()).await?;
    engine::periodic_rerun(
        &ctx,
        &wf,
        &p.api,
        &stored,
        ctx.config().reconciliation_interval,
    )
    .await
}

/// Paused Promises report `PausedReconciliation` and wait for the label to go.
async fn mark_paused(p: &Observed) -> Result<Action, Error> {
    support::update_status(&p.api, &p.name, |s, _| {
        let mut c = set_condition(
            s,
            condition_types::AVAILABLE,
            "False",
            reasons::PAUSED_RECONCILIATION,
            messages::PAUSED,
            None,
        );
        c |= set_condition(
            s,
            condition_types::RECONCILED,
            "Unknown",
            reasons::PAUSED_RECONCILIATION,
            messages::PAUSED,
            None,
        );
        c |= set_field(s, "status", json!(promise_status::UNAVAILABLE));
        c
    })
    .await?;
    Ok(Action::await_change())
}

/// The finalizers this Promise needs, in Kratix's order: the API's three when it has
/// one, dependencies and workflow cleanup always, the delete workflow's while it has
/// one, revision cleanup last.
fn wanted_finalizers(p: &Observed, has_api: bool) -> Vec<&'static str> {
    let mut desired: Vec<&str> = Vec::new();
    if has_api {
        desired.extend([
            finalizers::RESOURCE_REQUEST_CLEANUP,
            finalizers::DYNAMIC_CONTROLLER_DEPENDANT_RESOURCES_CLEANUP,
            finalizers::API_CRD_CLEANUP,
        ]);
    }
    desired.extend([
        finalizers::DEPENDENCIES_CLEANUP,
        finalizers::WORKFLOWS_CLEANUP,
    ]);
    if p.has_delete_workflow() {
        desired.push(finalizers::DELETE_WORKFLOWS);
    }
    desired.push(finalizers::REVISION_CLEANUP);
    desired
}

/// Adds missing finalizers (and drops the delete workflow's when there is none);
/// true when it wrote.
async fn ensure_finalizers(p: &Observed, has_api: bool) -> Result<bool, Error> {
    let current = p.obj.finalizers().to_vec();
    let mut wanted = current.clone();
    for f in wanted_finalizers(p, has_api) {
        if !wanted.iter().any(|c| c == f) {
            wanted.push(f.to_string());
        }
    }
    if !p.has_delete_workflow() {
        wanted.retain(|f| f != finalizers::DELETE_WORKFLOWS);
    }
    if wanted == current {
        return Ok(false);
    }
    set_finalizers(&p.api, &p.obj, wanted).await?;
    Ok(true)
}

/// Copies the promise-version label into `status.version` and `status.kratix.version`;
/// true when it wrote.
async fn record_version(p: &Observed) -> Result<bool, Error> {
    let Some(v) = p.obj.labels().get(labels::PROMISE_VERSION).cloned() else {
        return Ok(false);
    };
    if p.status["version"].as_str() == Some(&v) {
        return Ok(false);
    }
    support::update_status(&p.api, &p.name, |s, _| {
        let mut c = set_field(s, "version", json!(v));
        let k = support::ensure_object(s)
            .entry("kratix")
            .or_insert_with(|| json!({}));
        c |= set_field(k, "version", json!(v));
        c
    })
    .await?;
    Ok(true)
}

/// Runs the promise configure workflow; until it is done, reports the Promise
/// Unavailable (unless a re-run of an Available Promise) and ends the reconcile.
async fn run_configure_workflow(
    ctx: &Context,
    p: &Observed,
    wf: &Workflow,
) -> Result<Step<()>, Error> {
    if wf.pipelines.is_empty() {
        return Ok(Step::Next(()));
    }
    let progress = engine::reconcile_configure(&p.workflow_parent(ctx, wf)).await?;
    if progress == Progress::Done {
        return Ok(Step::Next(()));
    }
    // A re-run after the Promise was Available keeps it Available: requests are not
    // held while the promise workflow refreshes (no flicker).
    let keep_available = p.is_available() && progress == Progress::Running;
    support::update_status(&p.api, &p.name, |s, _| {
        if keep_available {
            return false;
        }
        let (reason, message) = if matches!(progress, Progress::Suspended { .. }) {
            (reasons::WORKFLOW_SUSPENDED, messages::SUSPENDED)
        } else {
            (reasons::PROMISE_UNAVAILABLE, messages::CANNOT_FULFIL)
        };
        let mut c = set_condition(
            s,
            condition_types::AVAILABLE,
            "False",
            reason,
            message,
            None,
        );
        c |= set_field(s, "status", json!(promise_status::UNAVAILABLE));
        c
    })
    .await?;
    let config = ctx.config();
    Ok(Step::Stop(match progress {
        Progress::Suspended { retry_at: Some(at) } => Action::requeue(support::until(at)),
        Progress::Failed { .. } if config.reconcile_after_failure => {
            engine::periodic_rerun(ctx, wf, &p.api, &p.obj, config.reconciliation_interval).await?
        }
        _ => Action::await_change(),
    }))
}

/// Re-runs every request's workflow when the Promise spec changed or the
/// reconcile-resources label asks for it (the label is then removed).
async fn rerun_requests_on_change(
    ctx: &Context,
    p: &Observed,
    request_api: &RequestApi,
) -> Result<(), Error> {
    let generation = p.obj.meta().generation.unwrap_or(1);
    let observed = p.status["observedGeneration"].as_i64().unwrap_or(0);
    let reconcile_resources = p.label_is_true(labels::RECONCILE_RESOURCES);
    if !(reconcile_resources || (generation != observed && generation != 1 && observed != 0)) {
        return Ok(());
    }
    request::label_all_run_from_start(ctx, request_api).await?;
    support::publish(
        &ctx.recorder(COMPONENT),
        &support::reference(p.obj.as_ref()),
        plinth_api::events::EventType::Normal,
        plinth_api::constants::events::RECONCILING_RESOURCES,
        "Reconciling all resource requests",
    )
    .await;
    if reconcile_resources {
        engine::remove_labels(&p.api, &p.obj, &[labels::RECONCILE_RESOURCES]).await?;
    }
    Ok(())
}

/// Writes the Available status: the API's kind and version, the observed generation,
/// `WorksSucceeded` from the Promise's own Works and `Reconciled` from that and the
/// configure workflow; announces the first transition to Available. Returns the
/// Promise as stored.
async fn mark_available(
    ctx: &Context,
    p: &Observed,
    wf: &Workflow,
    request_api: Option<&RequestApi>,
) -> Result<DynamicObject, Error> {
    let work_state = works_state(ctx, &p.name).await?;
    let generation = p.obj.meta().generation.unwrap_or(1);
    let (kind, api_version) = request_api
        .map(|r| (r.kind.clone(), format!("{}/{}", r.group, r.storage_version)))
        .unwrap_or_default();
    let became_available = !p.is_available();
    let no_workflow = wf.pipelines.is_empty();
    let stored = support::update_status(&p.api, &p.name, |s, _| {
        let mut c = set_condition(
            s,
            condition_types::AVAILABLE,
            "True",
            reasons::PROMISE_AVAILABLE,
            messages::READY_TO_FULFIL,
            None,
        );
        c |= set_field(s, "status", json!(promise_status::AVAILABLE));
        c |= set_field(s, "observedGeneration", json!(generation));
        if !kind.is_empty() {
            c |= set_field(s, "kind", json!(kind));
            c |= set_field(s, "apiVersion", json!(api_version));
        }
        if became_available {
            c |= set_field(s, "lastAvailableTime", json!(support::now_rfc3339()));
        }
        if no_workflow {
            c |= set_field(s, "workflows", json!(0));
            c |= set_field(s, "workflowsSucceeded", json!(0));
            c |= set_field(s, "workflowsFailed", json!(0));
        }
        c | work_state.set_conditions(s, "promise", no_workflow)
    })
    .await?;
    if became_available {
        support::publish(
            &ctx.recorder(COMPONENT),
            &support::reference(&stored),
            plinth_api::events::EventType::Normal,
            plinth_api::constants::events::AVAILABLE,
            "Promise is available",
        )
        .await;
    }
    Ok(stored)
}

/// `plinth.dev/reschedule=true` on the Promise: removes the misplaced WorkPlacements of
/// its own Works so they are placed again, then the label; true when it acted.
async fn reschedule(ctx: &Context, p: &Observed) -> Result<bool, Error> {
    if !p.label_is_true(labels::RESCHEDULE) {
        return Ok(false);
    }
    let works = own_works(ctx, &p.name).await?;
    let n = support::works::reschedule_misplaced(&ctx.client, &works).await?;
    engine::remove_labels(&p.api, &p.obj, &[labels::RESCHEDULE]).await?;
    support::publish(
        &ctx.recorder(COMPONENT),
        &support::reference(&p.obj),
        plinth_api::events::EventType::Normal,
        plinth_api::constants::events::WORKS_RESCHEDULED,
        format!("Removed {n} misplaced WorkPlacement(s); their Works are placed again on matching Destinations"),
    )
    .await;
    Ok(true)
}

/// Readiness of the Promise's own Works: those of its promise workflows and its static
/// dependencies (an unscheduled dependency Work is not "ready", whatever Kratix says).
async fn works_state(ctx: &Context, promise: &str) -> Result<WorksState, Error> {
    Ok(classify_works(&own_works(ctx, promise).await?))
}

/// The Promise's own Works (promise workflows and static dependencies).
async fn own_works(ctx: &Context, promise: &str) -> Result<Vec<plinth_api::Work>, Error> {
    let works: Api<plinth_api::Work> = Api::all(ctx.client.clone());
    let mut own = Vec::new();
    // One list per type, each selecting by equality only, so neither reads the Works of
    // the Promise's requests.
    for kind in [work_type::PROMISE, work_type::STATIC_DEPENDENCY] {
        let sel = format!(
            "{}={promise},{}={kind}",
            labels::PROMISE_NAME,
            labels::WORK_TYPE
        );
        own.extend(works.list(&ListParams::default().labels(&sel)).await?.items);
    }
    Ok(own)
}
