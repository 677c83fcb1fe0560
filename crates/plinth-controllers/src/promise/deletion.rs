//! Promise deletion: one step per reconcile, in Kratix's finalizer order. Each
//! finalizer has one step ([`ORDER`]); the first finalizer still present runs its step,
//! and when the step reports its work done the finalizer is removed, whose watch event
//! starts the next.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use super::api;
use super::observed::Observed;
use crate::context::Context;
use crate::support::api_errors::ignore_not_found;
use crate::support::{self, remove_finalizer};
use crate::workflow::engine::{self, Progress};
use crate::{Error, request};
use plinth_api::constants::{finalizers, labels};
use plinth_api::{PromiseRevision, Work, WorkflowAction};

/// The deletion steps, one per finalizer.
#[derive(Clone, Copy, Debug)]
enum DeletionStep {
    /// Runs the promise delete workflow.
    DeleteWorkflow,
    /// Deletes the promise workflows' Jobs.
    WorkflowJobs,
    /// Deletes every resource request (their own finalizers run their delete workflows).
    ResourceRequests,
    /// Deletes the PromiseRevisions.
    Revisions,
    /// Deletes the RBAC, ServiceAccounts and ConfigMaps labelled with the Promise.
    DependantResources,
    /// Deletes the Promise's Works (static dependencies and promise workflow output).
    Works,
    /// Deletes the API CRD.
    ApiCrd,
}

/// Kratix's finalizer order. The request controller is stopped before any step after
/// [`DeletionStep::Revisions`] runs.
const ORDER: [(&str, DeletionStep); 7] = [
    (finalizers::DELETE_WORKFLOWS, DeletionStep::DeleteWorkflow),
    (finalizers::WORKFLOWS_CLEANUP, DeletionStep::WorkflowJobs),
    (
        finalizers::RESOURCE_REQUEST_CLEANUP,
        DeletionStep::ResourceRequests,
    ),
    (finalizers::REVISION_CLEANUP, DeletionStep::Revisions),
    (
        finalizers::DYNAMIC_CONTROLLER_DEPENDANT_RESOURCES_CLEANUP,
        DeletionStep::DependantResources,
    ),
    (finalizers::DEPENDENCIES_CLEANUP, DeletionStep::Works),
    (finalizers::API_CRD_CLEANUP, DeletionStep::ApiCrd),
];

/// What a step found.
enum Outcome {
    /// The step's work is done: remove its finalizer.
    Done,
    /// Not done yet: end the reconcile with this action.
    Wait(Action),
}

impl DeletionStep {
    /// True for the steps that run with the request controller stopped.
    fn after_requests(self) -> bool {
        matches!(
            self,
            DeletionStep::DependantResources | DeletionStep::Works | DeletionStep::ApiCrd
        )
    }
}

/// Runs the step of the first finalizer still present.
pub(super) async fn reconcile(ctx: &Context, p: &Observed) -> Result<Action, Error> {
    let has = |f: &str| p.obj.finalizers().iter().any(|x| x == f);
    let Some((finalizer, step)) = ORDER.iter().find(|(f, _)| has(f)) else {
        ctx.request_controllers.stop(&p.name);
        return Ok(Action::await_change());
    };
    if step.after_requests() {
        ctx.request_controllers.stop(&p.name);
    }
    let outcome = match step {
        DeletionStep::DeleteWorkflow => run_delete_workflow(ctx, p).await?,
        DeletionStep::WorkflowJobs => delete_workflow_jobs(ctx, p).await?,
        DeletionStep::ResourceRequests => delete_requests(ctx, p).await?,
        DeletionStep::Revisions => delete_revisions(ctx, p).await?,
        DeletionStep::DependantResources => delete_dependant_resources(ctx, p).await?,
        DeletionStep::Works => delete_works(ctx, p).await?,
        DeletionStep::ApiCrd => delete_api_crd(ctx, p).await?,
    };
    match outcome {
        Outcome::Done => {
            remove_finalizer(&p.api, &p.obj, finalizer).await?;
            Ok(Action::await_change())
        }
        Outcome::Wait(action) => Ok(action),
    }
}

/// The `<promise-name label>=<name>` selector.
fn selector(p: &Observed) -> String {
    format!("{}={}", labels::PROMISE_NAME, p.name)
}

/// Not done yet: wait `requeue_short` for the deleted objects to go.
fn wait_short(ctx: &Context) -> Outcome {
    Outcome::Wait(Action::requeue(ctx.config().requeue_short))
}

async fn run_delete_workflow(ctx: &Context, p: &Observed) -> Result<Outcome, Error> {
    let wf = p.workflow(WorkflowAction::Delete);
    let configure = p.workflow(WorkflowAction::Configure);
    let progress = engine::reconcile_delete(&p.workflow_parent(ctx, &wf), &configure).await?;
    Ok(match progress {
        Progress::Done => Outcome::Done,
        // A retrying delete pipeline runs again at its nextRetryAt.
        Progress::Suspended { retry_at: Some(at) } => {
            Outcome::Wait(Action::requeue(support::until(at)))
        }
        _ => Outcome::Wait(Action::await_change()),
    })
}

async fn delete_workflow_jobs(ctx: &Context, p: &Observed) -> Result<Outcome, Error> {
    let jobs: Api<Job> = Api::all(ctx.client.clone());
    let lp =
        ListParams::default().labels(&format!("{},kratix.io/workflow-type=promise", selector(p)));
    let list = jobs.list(&lp).await?.items;
    if list.is_empty() {
        return Ok(Outcome::Done);
    }
    for j in list {
        let ns_api: Api<Job> =
            Api::namespaced(ctx.client.clone(), &j.namespace().unwrap_or_default());
        ignore_not_found(
            ns_api
                .delete(&j.name_any(), &DeleteParams::background())
                .await,
        )?;
    }
    Ok(wait_short(ctx))
}

async fn delete_requests(ctx: &Context, p: &Observed) -> Result<Outcome, Error> {
    if !serves_own_api(ctx, p).await? {
        return Ok(Outcome::Done);
    }
    match ctx.request_controllers.api_of(&p.name) {
        Some(r) => {
            if request::delete::delete_all(ctx, &r).await? > 0 {
                return Ok(wait_short(ctx));
            }
        }
        None => {
            if api::start_for_deletion(ctx, p).await? {
                return Ok(wait_short(ctx));
            }
        }
    }
    Ok(Outcome::Done)
}

async fn delete_revisions(ctx: &Context, p: &Observed) -> Result<Outcome, Error> {
    let revisions: Api<PromiseRevision> = Api::all(ctx.client.clone());
    let lp = ListParams::default().labels(&selector(p));
    for r in revisions.list(&lp).await?.items {
        ignore_not_found(
            revisions
                .delete(&r.name_any(), &DeleteParams::background())
                .await,
        )?;
    }
    Ok(Outcome::Done)
}

/// The kinds the dependant-resources step deletes, as (apiVersion, kind, plural).
const DEPENDANT_KINDS: [(&str, &str, &str); 6] = [
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
    ),
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        "clusterroles",
    ),
    (
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        "rolebindings",
    ),
    ("rbac.authorization.k8s.io/v1", "Role", "roles"),
    ("v1", "ServiceAccount", "serviceaccounts"),
    ("v1", "ConfigMap", "configmaps"),
];

async fn delete_dependant_resources(ctx: &Context, p: &Observed) -> Result<Outcome, Error> {
    let lp = ListParams::default().labels(&selector(p));
    let mut remaining = 0;
    for (api_version, kind, plural) in DEPENDANT_KINDS {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let ar =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        let all: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &ar);
        for o in all.list(&lp).await?.items {
            remaining += 1;
            let scoped: Api<DynamicObject> = match o.namespace() {
                Some(ns) => Api::namespaced_with(ctx.client.clone(), &ns, &ar),
                None => Api::all_with(ctx.client.clone(), &ar),
            };
            ignore_not_found(
                scoped
                    .delete(&o.name_any(), &DeleteParams::background())
                    .await,
            )?;
        }
    }
    Ok(if remaining > 0 {
        wait_short(ctx)
    } else {
        Outcome::Done
    })
}

async fn delete_works(ctx: &Context, p: &Observed) -> Result<Outcome, Error> {
    let works: Api<Work> = Api::all(ctx.client.clone());
    let list = works
        .list(&ListParams::default().labels(&selector(p)))
        .await?
        .items;
    if list.is_empty() {
        return Ok(Outcome::Done);
    }
    for w in list
        .iter()
        .filter(|w| w.meta().deletion_timestamp.is_none())
    {
        let scoped: Api<Work> =
            Api::namespaced(ctx.client.clone(), &w.namespace().unwrap_or_default());
        ignore_not_found(
            scoped
                .delete(&w.name_any(), &DeleteParams::background())
                .await,
        )?;
    }
    Ok(wait_short(ctx))
}

/// False when the Promise's API CRD is another Promise's or was made by hand: its
/// requests and the CRD are not this Promise's to delete.
async fn serves_own_api(ctx: &Context, p: &Observed) -> Result<bool, Error> {
    Ok(matches!(
        api::crd_owner(ctx, p).await?,
        api::CrdOwner::This | api::CrdOwner::Absent
    ))
}

async fn delete_api_crd(ctx: &Context, p: &Observed) -> Result<Outcome, Error> {
    if !serves_own_api(ctx, p).await? {
        return Ok(Outcome::Done);
    }
    let Some(crd) = api::request_crd(p).ok().flatten() else {
        return Ok(Outcome::Done);
    };
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let crd_name = crd["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if crds.get_opt(&crd_name).await?.is_none() {
        return Ok(Outcome::Done);
    }
    ignore_not_found(
        crds.delete(&crd_name, &DeleteParams::background())
            .await
            .map(|_| ()),
    )?;
    Ok(wait_short(ctx))
}
