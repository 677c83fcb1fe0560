//! What every reconcile of one Promise's request controller shares: the controller's
//! state (its Promise, API, fan-out and caches), the workflow a request runs and the
//! component its Events name.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DynamicObject};
use kube::{Resource, ResourceExt};
use serde_json::Value;

use super::caches::RequestCaches;
use super::fanout;
use crate::context::Context;
use crate::dynamic::RequestApi;
use crate::workflow::engine;
use crate::workflow::{Subject, Workflow};
use plinth_api::contract::ObjectRef;
use plinth_api::{WorkflowAction, WorkflowType};

/// The component the request controller's Events name.
pub(super) const COMPONENT: &str = plinth_api::constants::events::RESOURCE_REQUEST_CONTROLLER;

/// The state of one Promise's request controller.
pub(super) struct RequestCtx {
    pub(super) ctx: Arc<Context>,
    pub(super) promise: String,
    pub(super) api: RequestApi,
    pub(super) fanout: fanout::FanOut,
    pub(super) caches: RequestCaches,
}

impl RequestCtx {
    /// The request `rr` (reached through `api`, its newest copy in `latest`) as the
    /// parent of a step of `wf`.
    pub(super) fn workflow_parent<'a>(
        &'a self,
        wf: &'a Workflow,
        api: &'a Api<DynamicObject>,
        rr: &'a DynamicObject,
        latest: &'a crate::support::Latest<DynamicObject>,
    ) -> engine::Parent<'a> {
        engine::Parent {
            ctx: &self.ctx,
            wf,
            api,
            obj: rr,
            latest,
            api_group: &self.api.group,
            component: COMPONENT,
        }
    }
}

impl crate::support::harness::Shared for RequestCtx {
    fn context(&self) -> &Context {
        &self.ctx
    }
}

/// The workflow of `action` a request runs with `promise_spec`.
pub(super) fn request_workflow(
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
            object: ObjectRef {
                group: rctx.api.group.clone(),
                version: rctx.api.served_version.clone(),
                kind: rctx.api.kind.clone(),
                plural: rctx.api.plural.clone(),
                name: rr.name_any(),
                namespace: Some(rr_ns.clone()),
            },
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

impl RequestCtx {
    /// The workflow's Jobs as the Job cache holds them (finished Jobs only change by
    /// being pruned, so the re-run timer can read them there).
    pub(super) fn cached_jobs(&self, wf: &Workflow) -> Vec<Job> {
        self.caches.workflow_jobs(wf)
    }
}
