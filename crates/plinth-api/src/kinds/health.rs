//! HealthRecord.

use super::binding::ResourceRef;
use super::common::{Extra, PromiseRef};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Top-level fields of a HealthRecord (`data`, no `spec`, no status subresource).
/// Namespaced, category `kratix`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "platform.kratix.io",
    version = "v1alpha1",
    kind = "HealthRecord",
    plural = "healthrecords",
    namespaced,
    no_spec,
    category = "kratix",
    printcolumn(name = "Status", type_ = "string", json_path = ".data.state"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct HealthRecordFields {
    /// The health report.
    pub data: HealthRecordData,
}

/// `data` of a HealthRecord.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthRecordData {
    /// The Promise of the resource request.
    pub promise_ref: PromiseRef,
    /// The resource request.
    pub resource_ref: ResourceRef,
    /// Health state (default `unknown`).
    #[serde(default)]
    #[schemars(extend("default" = "unknown"))]
    pub state: HealthState,
    /// Unix seconds of the check run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<i64>,
    /// Arbitrary details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserved_object")]
    pub details: Option<Value>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `data.state` of a HealthRecord.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum HealthState {
    /// Not known (default).
    #[default]
    Unknown,
    /// Ready.
    Ready,
    /// Unhealthy.
    Unhealthy,
    /// Healthy.
    Healthy,
    /// Degraded.
    Degraded,
}

impl HealthState {
    /// Severity rank for aggregation: unhealthy < degraded < unknown < healthy < ready
    /// (the worst record wins).
    pub fn rank(self) -> u8 {
        match self {
            HealthState::Unhealthy => 0,
            HealthState::Degraded => 1,
            HealthState::Unknown => 2,
            HealthState::Healthy => 3,
            HealthState::Ready => 4,
        }
    }
}
