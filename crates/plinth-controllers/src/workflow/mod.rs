//! Workflows: turning a Promise's pipelines into Kubernetes Jobs and
//! driving them serially for one object (the workflow engine).
//!
//! The Jobs are exactly Kratix's shape, so the same Jobs run on a real cluster and on the
//! embedded runner.

pub mod engine;
pub mod failure;
pub mod job;

use serde_json::Value;

use plinth_api::contract::ObjectRef;
use plinth_api::{WorkflowAction, WorkflowType};

/// The object a workflow runs for (a Promise or a resource request) and how to reach it.
#[derive(Clone, Debug)]
pub struct Subject {
    /// Its coordinates, as its pipelines' `KRATIX_OBJECT_*` variables name them.
    pub object: ObjectRef,
    /// Object UID (Jobs' owner references point at it).
    pub uid: String,
    /// The object's `spec` (hash input).
    pub spec: Value,
    /// The object's annotations (trace annotations are copied to Jobs).
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// Everything needed to build and drive one object's workflow of one action.
#[derive(Clone, Debug)]
pub struct Workflow {
    /// Name of the Promise the workflow belongs to.
    pub promise_name: String,
    /// The Promise spec in force (the bound revision's spec for resource requests).
    pub promise_spec: Value,
    /// Whether these are the Promise's own workflows or a resource request's.
    pub workflow_type: WorkflowType,
    /// `configure` or `delete`.
    pub action: WorkflowAction,
    /// The object the workflow runs for.
    pub subject: Subject,
    /// Raw pipeline objects in order (`apiVersion: platform.kratix.io/v1alpha1, kind: Pipeline`).
    pub pipelines: Vec<Value>,
    /// Namespace the Jobs and their objects live in.
    pub namespace: String,
    /// True when `spec.workflows.config.pipelineNamespace` moved a resource workflow out
    /// of the request's namespace (adds `kratix.io/resource-namespace`).
    pub pipeline_namespace_set: bool,
}

impl Workflow {
    /// True for the workflow of an ephemeral dry-run request (it carries the real
    /// request's name annotation): its Jobs get `KRATIX_DRY_RUN=true` and a `-dry-run`
    /// hash.
    pub fn is_dry_run(&self) -> bool {
        self.workflow_type == WorkflowType::Resource
            && self
                .subject
                .annotations
                .contains_key(plinth_api::constants::annotations::DRY_RUN_RESOURCE_NAME)
    }
}
