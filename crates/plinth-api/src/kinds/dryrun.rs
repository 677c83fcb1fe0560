//! DryRun — a preview feature behind `featureFlags.dryRun`.

use super::common::{Extra, PromiseRef};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// `spec` of a DryRun: run a resource request's configure workflow against a proposed
/// spec without scheduling its output. Namespaced, status subresource, category `kratix`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "platform.kratix.io",
    version = "v1alpha1",
    kind = "DryRun",
    plural = "dryruns",
    namespaced,
    status = "DryRunStatus",
    category = "kratix"
)]
#[serde(rename_all = "camelCase")]
pub struct DryRunSpec {
    /// The Promise whose API the request belongs to.
    pub promise_ref: PromiseRef,
    /// The (existing or new) resource request; namespace defaults to the DryRun's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_request_ref: Option<DryRunResourceRequestRef>,
    /// The proposed resource request `spec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserved_object")]
    pub resource: Option<Value>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `spec.resourceRequestRef` of a DryRun.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DryRunResourceRequestRef {
    /// Request name.
    #[serde(default)]
    pub name: String,
    /// Request namespace (default: the DryRun's namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `status` of a DryRun.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DryRunStatus {
    /// `Completed`, `ComponentsSucceeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    /// One entry per (compound) component run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub components: Option<Vec<DryRunComponent>>,
    /// Plinth: every file the dry run's workflow produced, not scheduled anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Vec<DryRunOutput>>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `status.components[]` of a DryRun.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DryRunComponent {
    /// Promise name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promise: Option<String>,
    /// Request name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// Request namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name of the ephemeral dry-run request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<String>,
    /// `Pending`, `Succeeded` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `status.outputs[]` of a DryRun (Plinth): one output file of the dry run's workflow.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DryRunOutput {
    /// The pipeline that wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<String>,
    /// The (unscheduled) Work holding it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<String>,
    /// Its path relative to the pipeline's output directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filepath: Option<String>,
    /// The destination selectors of its workload group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserved_object_list")]
    pub destination_selectors: Option<Value>,
}
