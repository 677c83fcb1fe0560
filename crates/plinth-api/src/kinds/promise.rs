//! Promise.

use super::common::{DestinationSelector, Extra};
use crate::ApiError;
use crate::constants::labels;
use crate::pipeline::{Pipeline, WorkflowAction, WorkflowType};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// `spec` of a Promise. Cluster-scoped, status subresource, category
/// `kratix`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "platform.kratix.io",
    version = "v1alpha1",
    kind = "Promise",
    plural = "promises",
    status = "PromiseStatus",
    category = "kratix",
    printcolumn(name = "Status", type_ = "string", json_path = ".status.status"),
    printcolumn(name = "Kind", type_ = "string", json_path = ".status.kind"),
    printcolumn(
        name = "API Version",
        type_ = "string",
        json_path = ".status.apiVersion"
    ),
    printcolumn(name = "Version", type_ = "string", json_path = ".status.version"),
    printcolumn(name = "Message", type_ = "string", json_path = ".status.message")
)]
#[serde(rename_all = "camelCase")]
pub struct PromiseSpec {
    /// The Promise API: a full `apiextensions.k8s.io/v1` CustomResourceDefinition.
    /// Absent, `null` or `{}` means "no API" (a dependency-only Promise). See
    /// [`Promise::api_crd`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::embedded_resource")]
    pub api: Option<Value>,
    /// Workflows run for the Promise and for each resource request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflows: Option<PromiseWorkflows>,
    /// Other Promises that must be installed and Available first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_promises: Option<Vec<RequiredPromise>>,
    /// Static dependencies: arbitrary Kubernetes objects bundled into one Work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserved_object_list")]
    pub dependencies: Option<Vec<Value>>,
    /// Promise-level scheduling labels; see [`PromiseSpec::squashed_destination_selectors`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_selectors: Option<Vec<DestinationSelector>>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `spec.workflows` of a Promise.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromiseWorkflows {
    /// Workflow-wide settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<WorkflowsConfig>,
    /// Promise workflows (run once per Promise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promise: Option<WorkflowActions>,
    /// Resource workflows (run per resource request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<WorkflowActions>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `spec.workflows.config`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowsConfig {
    /// Namespace for every workflow Job (and its SA/RBAC/ConfigMap/Works) of this Promise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_namespace: Option<String>,
    /// Per-Promise workflow re-run interval (Go duration string, ≥ 1m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconciliation_interval: Option<String>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `configure` / `delete` pipeline lists of one workflow type. Entries are kept raw
/// (preserve-unknown in the CRD); parse them with [`Pipeline::parse`].
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowActions {
    /// Pipelines run in order on create/update/periodic reconcile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserved_object_list")]
    pub configure: Option<Vec<Value>>,
    /// Pipelines run on deletion (only the first is used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserved_object_list")]
    pub delete: Option<Vec<Value>>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `spec.requiredPromises[]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequiredPromise {
    /// Required Promise name.
    #[serde(default)]
    pub name: String,
    /// Required `kratix.io/promise-version`; empty means any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `status` of a Promise.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromiseStatus {
    /// `Available`, `RequirementsFulfilled`, `ConfigureWorkflowCompleted`, `WorksSucceeded`,
    /// `Reconciled`, `DeleteWorkflowCompleted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    /// `Available` or `Unavailable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Copied from label `kratix.io/promise-version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Kind of the Promise API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Lower-cased `group/storageVersion` of the Promise API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Last generation for which resource requests were re-triggered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Message; the only field a promise pipeline's `status.yaml` can set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Deprecated counter of promise configure pipelines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflows: Option<i64>,
    /// Deprecated counter of succeeded promise configure pipelines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflows_succeeded: Option<i64>,
    /// Deprecated counter of failed promise configure pipelines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflows_failed: Option<i64>,
    /// Kratix-owned sub-object (pipelines, copies of status/version/kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kratix: Option<KratixStatus>,
    /// State of each required Promise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_promises: Option<Vec<RequiredPromiseStatus>>,
    /// Promises that require this one (written by the dependent Promise's reconcile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_by: Option<Vec<RequiredBy>>,
    /// Time of the last transition to Available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::time")]
    pub last_available_time: Option<Time>,
    /// Plinth: how far the Promise's resource requests are in running with its latest
    /// revision (written by the request controller's throttled fan-out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_requests: Option<ResourceRequestsProgress>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `status.resourceRequests` of a Promise (Plinth): of the `total` requests that follow
/// the latest revision, `updated` have run their configure workflow successfully with it
/// and their current spec. Counted at `observedGeneration` of the Promise.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRequestsProgress {
    /// The Promise generation the counts were taken at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Requests that follow the latest revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
    /// Of those, requests whose last configure workflow succeeded with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated: Option<i64>,
}

/// `status.kratix` of a Promise or resource request: fields only Kratix writes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KratixStatus {
    /// Copy of `status.status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Copy of `status.version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Copy of `status.kind`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Copy of `status.apiVersion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Copy of `status.lastAvailableTime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::time")]
    pub last_available_time: Option<Time>,
    /// Per-pipeline workflow state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflows: Option<WorkflowsStatus>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `status.kratix.workflows`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowsStatus {
    /// One entry per pipeline of the running workflow, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipelines: Option<Vec<PipelineStatus>>,
    /// Object generation at which a pipeline suspended itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspended_generation: Option<i64>,
    /// Transition time of `ConfigureWorkflowCompleted` (resource requests only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::time")]
    pub last_successful_configure_workflow_time: Option<Time>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// Phase of one pipeline in `status.kratix.workflows.pipelines[]`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PipelinePhase {
    /// Not started in this run.
    Pending,
    /// Its Job exists and has not finished.
    Running,
    /// Its Job completed.
    Succeeded,
    /// Its Job failed.
    Failed,
    /// The pipeline asked to suspend or retry (workflow-control.yaml).
    Suspended,
}

impl PipelinePhase {
    /// The wire spelling (`Pending`, `Running`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            PipelinePhase::Pending => "Pending",
            PipelinePhase::Running => "Running",
            PipelinePhase::Succeeded => "Succeeded",
            PipelinePhase::Failed => "Failed",
            PipelinePhase::Suspended => "Suspended",
        }
    }
}

/// `status.kratix.workflows.pipelines[]`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PipelineStatus {
    /// Pipeline name.
    pub name: String,
    /// Current phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<PipelinePhase>,
    /// Message from workflow-control.yaml, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When a retrying pipeline runs again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::time")]
    pub next_retry_at: Option<Time>,
    /// Number of retries so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<i64>,
    /// Last phase change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::time")]
    pub last_transition_time: Option<Time>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `status.requiredPromises[]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequiredPromiseStatus {
    /// Required Promise name.
    #[serde(default)]
    pub name: String,
    /// Required version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// One of the `REQUIREMENT_*` strings in [`crate::constants::requirement_state`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `status.requiredBy[]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequiredBy {
    /// The dependent Promise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promise: Option<PromiseSummary>,
    /// The version it requires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_version: Option<String>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `{name, version}` of a Promise.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromiseSummary {
    /// Promise name.
    #[serde(default)]
    pub name: String,
    /// Promise version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

impl PromiseSpec {
    /// Promise `destinationSelectors` squashed into one map; on a key conflict the **first**
    /// entry wins.
    pub fn squashed_destination_selectors(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for sel in self.destination_selectors.iter().flatten() {
            for (k, v) in sel.match_labels.iter().flatten() {
                out.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        out
    }

    /// The raw pipeline entries of one workflow type and action (empty when absent).
    pub fn raw_pipelines(&self, workflow_type: WorkflowType, action: WorkflowAction) -> &[Value] {
        let Some(w) = &self.workflows else { return &[] };
        let actions = match workflow_type {
            WorkflowType::Promise => &w.promise,
            WorkflowType::Resource => &w.resource,
        };
        let Some(actions) = actions else { return &[] };
        let list = match action {
            WorkflowAction::Configure => &actions.configure,
            WorkflowAction::Delete => &actions.delete,
        };
        list.as_deref().unwrap_or(&[])
    }

    /// Parses the pipelines of one workflow type and action with [`Pipeline::parse`]
    /// (strict: wrong apiVersion/kind or unknown fields → [`ApiError::UnsupportedPipeline`]).
    pub fn pipelines(
        &self,
        workflow_type: WorkflowType,
        action: WorkflowAction,
    ) -> Result<Vec<Pipeline>, ApiError> {
        self.raw_pipelines(workflow_type, action)
            .iter()
            .enumerate()
            .map(|(i, raw)| {
                let location = format!(
                    "spec.workflows.{}.{}[{i}]",
                    workflow_type.as_str(),
                    action.as_str()
                );
                Pipeline::parse_at(raw, &location)
            })
            .collect()
    }

    /// `spec.workflows.config.pipelineNamespace`, if set and non-empty.
    pub fn pipeline_namespace(&self) -> Option<&str> {
        self.workflows
            .as_ref()?
            .config
            .as_ref()?
            .pipeline_namespace
            .as_deref()
            .filter(|s| !s.is_empty())
    }

    /// True when `spec.api` means "no API" (absent, `null` or `{}`).
    pub fn has_api(&self) -> bool {
        match &self.api {
            None | Some(Value::Null) => false,
            Some(Value::Object(m)) => !m.is_empty(),
            Some(_) => true,
        }
    }
}

impl Promise {
    /// The Promise API CRD as JSON, or `None` for a dependency-only Promise
    /// (`spec.api` absent, `null` or `{}`).
    ///
    /// As Kratix's `GetAPI()` does, the storage version's schema gets
    /// `metadata.name` with `maxLength: 63`, so resource request names fit in labels.
    ///
    /// `apiVersion` is normalised to `apiextensions.k8s.io/v1` (Kratix ignores it).
    ///
    /// Errors: [`ApiError::InvalidApi`] when `spec.api` is not an `apiextensions.k8s.io`
    /// `CustomResourceDefinition` with at least one version.
    pub fn api_crd(&self) -> Result<Option<Value>, ApiError> {
        if !self.spec.has_api() {
            return Ok(None);
        }
        let mut crd = self.spec.api.clone().unwrap_or_default();
        crate::request_crd::validate_api_crd(&crd)?;
        crate::request_crd::normalise_api_version(&mut crd);
        crate::request_crd::inject_name_max_length(&mut crd)?;
        Ok(Some(crd))
    }

    /// The `kratix.io/promise-version` label, if set.
    pub fn version_label(&self) -> Option<&str> {
        self.metadata
            .labels
            .as_ref()?
            .get(labels::PROMISE_VERSION)
            .map(String::as_str)
    }
}
