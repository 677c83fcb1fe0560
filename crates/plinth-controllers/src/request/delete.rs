//! A request's deletion, one step per reconcile in finalizer order (the delete pipeline,
//! the Works, the Jobs, the ResourceBinding), and the deletion of every request of a
//! Promise's API when the Promise goes.

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use plinth_api::constants::{finalizers, labels};
use serde_json::Value;

use super::binding;
use super::shared::{RequestCtx, request_workflow};
use crate::Error;
use crate::context::Context;
use crate::dynamic::RequestApi;
use crate::support::api_errors::ignore_not_found;
use crate::support::{self, remove_finalizer};
use crate::workflow::Workflow;
use crate::workflow::engine::{self, Progress};
use plinth_api::WorkflowAction;

/// Deletion, one step per reconcile in finalizer order: delete pipeline, then Works,
/// then Jobs, then the ResourceBinding. The request's HealthRecords go first.
pub(super) async fn delete(
    rctx: &RequestCtx,
    api: &Api<DynamicObject>,
    rr: &DynamicObject,
    promise_spec: &Value,
) -> Result<Action, Error> {
    let ctx = &rctx.ctx;
    let has = |f: &str| rr.finalizers().iter().any(|x| x == f);
    let target = crate::health::target::Target {
        promise: rctx.promise.clone(),
        namespace: rr.namespace().unwrap_or_default(),
        name: rr.name_any(),
    };
    crate::health::record::delete_records_of(ctx, &target).await?;
    let promise_spec =
        &binding::spec_for_delete(ctx, &rctx.promise, &rctx.caches, rr, promise_spec).await?;
    let wf = request_workflow(rctx, rr, promise_spec, WorkflowAction::Delete);
    let sel = format!(
        "{}={},{}={}",
        labels::PROMISE_NAME,
        rctx.promise,
        labels::RESOURCE_NAME,
        rr.name_any()
    );
    if has(finalizers::DELETE_WORKFLOWS) {
        let configure = request_workflow(rctx, rr, promise_spec, WorkflowAction::Configure);
        return run_delete_workflow(rctx, api, rr, &wf, &configure).await;
    }
    if has(finalizers::WORK_CLEANUP) {
        return delete_works(rctx, api, rr, &wf, &sel).await;
    }
    if has(finalizers::WORKFLOWS_CLEANUP) {
        delete_jobs(ctx, &wf, &sel).await?;
        remove_finalizer(api, rr, finalizers::WORKFLOWS_CLEANUP).await?;
        return Ok(Action::await_change());
    }
    if has(finalizers::RESOURCE_BINDING_CLEANUP) {
        delete_bindings(ctx, rr, &sel).await;
        remove_finalizer(api, rr, finalizers::RESOURCE_BINDING_CLEANUP).await?;
    }
    Ok(Action::await_change())
}

/// Deletes the request's resource workflow Jobs (`sel` selects the request's objects).
async fn delete_jobs(ctx: &Context, wf: &Workflow, sel: &str) -> Result<(), Error> {
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &wf.namespace);
    let lp = ListParams::default().labels(&format!(
        "{sel},{}={}",
        labels::WORKFLOW_TYPE,
        plinth_api::WorkflowType::Resource.as_str()
    ));
    for j in jobs.list(&lp).await?.items {
        ignore_not_found(
            jobs.delete(&j.name_any(), &DeleteParams::background())
                .await,
        )?;
    }
    Ok(())
}

/// Deletes the request's ResourceBindings, best effort: a binding that cannot be deleted
/// must not keep the request for ever.
async fn delete_bindings(ctx: &Context, rr: &DynamicObject, sel: &str) {
    let bindings: Api<plinth_api::ResourceBinding> =
        Api::namespaced(ctx.client.clone(), &rr.namespace().unwrap_or_default());
    let Ok(list) = bindings.list(&ListParams::default().labels(sel)).await else {
        return;
    };
    for b in list.items {
        let _ = bindings
            .delete(&b.name_any(), &DeleteParams::background())
            .await;
    }
}

/// The delete pipeline; its finalizer goes once it is done.
async fn run_delete_workflow(
    rctx: &RequestCtx,
    api: &Api<DynamicObject>,
    rr: &DynamicObject,
    wf: &Workflow,
    configure: &Workflow,
) -> Result<Action, Error> {
    let latest = crate::support::Latest::new(rr);
    let parent = rctx.workflow_parent(wf, api, rr, &latest);
    let progress = engine::reconcile_delete(&parent, configure).await?;
    match progress {
        Progress::Done => remove_finalizer(api, rr, finalizers::DELETE_WORKFLOWS).await?,
        // A retrying delete pipeline runs again at its nextRetryAt.
        Progress::Suspended { retry_at: Some(at) } => {
            return Ok(Action::requeue(support::until(at)));
        }
        _ => {}
    }
    Ok(Action::await_change())
}

/// Deletes the request's Works; their finalizer goes once none is left. Work deletion
/// events wake the request (Works are watched), `requeue_default` is the fallback.
async fn delete_works(
    rctx: &RequestCtx,
    api: &Api<DynamicObject>,
    rr: &DynamicObject,
    wf: &Workflow,
    sel: &str,
) -> Result<Action, Error> {
    let works: Api<plinth_api::Work> = Api::namespaced(rctx.ctx.client.clone(), &wf.namespace);
    let list = works.list(&ListParams::default().labels(sel)).await?.items;
    if list.is_empty() {
        remove_finalizer(api, rr, finalizers::WORK_CLEANUP).await?;
        return Ok(Action::await_change());
    }
    for w in list
        .iter()
        .filter(|w| w.meta().deletion_timestamp.is_none())
    {
        ignore_not_found(
            works
                .delete(&w.name_any(), &DeleteParams::background())
                .await,
        )?;
    }
    Ok(Action::requeue(rctx.ctx.config().requeue_default))
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
