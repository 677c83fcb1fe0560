//! Work and WorkPlacement.

use super::common::Extra;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `spec` of a Work: the documents one pipeline run produced, in workload groups.
/// Namespaced, status subresource, category `kratix`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "platform.kratix.io",
    version = "v1alpha1",
    kind = "Work",
    plural = "works",
    namespaced,
    status = "WorkStatus",
    category = "kratix",
    printcolumn(
        name = "STATUS",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].message"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct WorkSpec {
    /// Set to "now" (RFC 3339) on every work-creator run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_execution_timestamp: Option<String>,
    /// The workload groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_groups: Option<Vec<WorkloadGroup>>,
    /// Owning Promise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promise_name: Option<String>,
    /// Owning resource request; empty for Promise and dependency Works.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_name: Option<String>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `spec.workloadGroups[]` of a Work.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadGroup {
    /// md5 hex of `directory`.
    #[serde(default)]
    pub id: String,
    /// Top-level output directory of the group, `.` for the default group.
    #[serde(default)]
    pub directory: String,
    /// The documents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workloads: Option<Vec<Workload>>,
    /// Scheduling selectors with their source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_selectors: Option<Vec<WorkloadGroupScheduling>>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// One document of a workload group (Work) or WorkPlacement.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Workload {
    /// Path relative to the pipeline output root.
    #[serde(default)]
    pub filepath: String,
    /// File bytes, gzip-compressed then standard-base64-encoded.
    #[serde(default)]
    pub content: String,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `destinationSelectors[]` of a workload group.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadGroupScheduling {
    /// Labels a Destination must carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<BTreeMap<String, String>>,
    /// `promise`, `promise-workflow` or `resource-workflow` (see [`crate::constants::selector_source`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `status` of a Work.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkStatus {
    /// `Ready`, `ScheduleSucceeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    /// Number of workload groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_placements: Option<i64>,
    /// Groups minus unscheduled groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_placements_created: Option<i64>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `spec` of a WorkPlacement: one workload group placed on one Destination.
/// Namespaced, status subresource, shortNames `wp`/`wps`, category `kratix`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "platform.kratix.io",
    version = "v1alpha1",
    kind = "WorkPlacement",
    plural = "workplacements",
    namespaced,
    status = "WorkPlacementStatus",
    category = "kratix",
    shortname = "wp",
    shortname = "wps",
    printcolumn(
        name = "DESTINATION",
        type_ = "string",
        json_path = ".spec.targetDestinationName"
    ),
    printcolumn(
        name = "STATUS",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].message"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct WorkPlacementSpec {
    /// Destination name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_destination_name: Option<String>,
    /// Copy of the group's workloads (compressed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workloads: Option<Vec<Workload>>,
    /// Copied from the Work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promise_name: Option<String>,
    /// Copied from the Work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_name: Option<String>,
    /// Workload group id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Work generation at the last update (Kratix Go field `WorkGeneration`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `status` of a WorkPlacement.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkPlacementStatus {
    /// `ScheduleSucceeded`, `WriteSucceeded`, `Ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    /// Git commit SHA of the last write (bucket: usually empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "versionID")]
    pub version_id: Option<String>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}
