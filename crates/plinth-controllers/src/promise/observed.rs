//! What every step of a Promise's reconcile shares: the Promise as observed, the
//! outcome of a step, and the component name its Events carry.

use std::sync::Arc;

use kube::api::{Api, DynamicObject};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use plinth_api::PromiseSpec;
use serde_json::Value;

use crate::Error;
use crate::context::Context;
use crate::support;
use crate::support::resources::promise_resource;
use crate::workflow::engine;
use crate::workflow::{Subject, Workflow};
use plinth_api::contract::ObjectRef;
use plinth_api::{WorkflowAction, WorkflowType};

/// The component the Promise controller's Events name.
pub(super) const COMPONENT: &str = plinth_api::constants::events::PROMISE_CONTROLLER;

/// The `promises` API, read as stored rather than as [`plinth_api::Promise`]: the spec as
/// stored is the workflows' input and what the hash labels of Jobs run by earlier
/// releases were taken over (a typed round trip writes defaults in, which would change
/// them), and a spec the typed struct refuses must still reach [`Observed::new`], to be
/// reported on the Promise rather than fail the whole watch.
pub(super) fn promise_api(ctx: &Context) -> Api<DynamicObject> {
    Api::all_with(ctx.client.clone(), &promise_resource())
}

/// A Promise as one reconcile sees it.
pub(crate) struct Observed {
    /// The object as the watch delivered it.
    pub(super) obj: Arc<DynamicObject>,
    /// `metadata.name`.
    pub(super) name: String,
    /// The `promises` API, for status and finalizer writes.
    pub(super) api: Api<DynamicObject>,
    /// `spec`, typed.
    pub(super) spec: PromiseSpec,
    /// `spec` as written (the workflows' input and the hash over it).
    pub(super) raw_spec: Value,
    /// `status` as read (`null` when absent).
    pub(super) status: Value,
    /// The newest copy of the Promise this reconcile holds (its writes' results), where
    /// the workflow engine's writes start.
    pub(super) latest: support::Latest<DynamicObject>,
}

impl Observed {
    /// This Promise as the parent of a step of `wf`.
    pub(super) fn workflow_parent<'a>(
        &'a self,
        ctx: &'a Context,
        wf: &'a Workflow,
    ) -> engine::Parent<'a> {
        engine::Parent {
            ctx,
            wf,
            api: &self.api,
            obj: &self.obj,
            latest: &self.latest,
            api_group: plinth_api::GROUP,
            component: COMPONENT,
        }
    }

    /// Reads the typed spec; a spec that does not parse is an [`Error::InvalidPromise`]
    /// naming the cause.
    pub(super) fn new(ctx: &Context, obj: Arc<DynamicObject>) -> Result<Self, Error> {
        let name = obj.name_any();
        let raw_spec = obj.data.get("spec").cloned().unwrap_or(Value::Null);
        let spec: PromiseSpec = if raw_spec.is_null() {
            PromiseSpec::default()
        } else {
            serde_json::from_value(raw_spec.clone()).map_err(|e| Error::InvalidPromise {
                promise: name.clone(),
                message: format!("spec: {e}"),
            })?
        };
        let status = obj.data.get("status").cloned().unwrap_or(Value::Null);
        Ok(Observed {
            api: promise_api(ctx),
            latest: support::Latest::new(obj.as_ref()),
            obj,
            name,
            spec,
            raw_spec,
            status,
        })
    }

    pub(super) fn label_is_true(&self, key: &str) -> bool {
        self.obj.labels().get(key).is_some_and(|v| v == "true")
    }

    pub(super) fn is_available(&self) -> bool {
        plinth_api::constants::promise_status::is_available(&self.status)
    }

    pub(super) fn has_delete_workflow(&self) -> bool {
        !self
            .spec
            .raw_pipelines(WorkflowType::Promise, WorkflowAction::Delete)
            .is_empty()
    }

    /// The promise workflow of `action`.
    pub(super) fn workflow(&self, action: WorkflowAction) -> Workflow {
        Workflow {
            promise_name: self.name.clone(),
            promise_spec: self.raw_spec.clone(),
            workflow_type: WorkflowType::Promise,
            action,
            subject: Subject {
                object: ObjectRef {
                    group: plinth_api::GROUP.into(),
                    version: plinth_api::VERSION.into(),
                    kind: "Promise".into(),
                    plural: "promises".into(),
                    name: self.name.clone(),
                    namespace: None,
                },
                uid: self.obj.meta().uid.clone().unwrap_or_default(),
                spec: self.raw_spec.clone(),
                annotations: self.obj.annotations().clone(),
            },
            pipelines: self
                .spec
                .raw_pipelines(WorkflowType::Promise, action)
                .to_vec(),
            namespace: self
                .spec
                .pipeline_namespace()
                .unwrap_or(plinth_api::constants::SYSTEM_NAMESPACE)
                .to_string(),
            pipeline_namespace_set: false,
        }
    }
}

/// The outcome of a step that may end the reconcile.
pub(super) enum Step<T> {
    /// Go on with the next step, with what this one found.
    Next(T),
    /// End the reconcile with this action.
    Stop(Action),
}
