//! Destination.

use super::common::Extra;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `spec` of a Destination: where in which state store a cluster's documents are written.
/// Cluster-scoped, status subresource, shortNames `dest`/`dests`, category `kratix`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "platform.kratix.io",
    version = "v1alpha1",
    kind = "Destination",
    plural = "destinations",
    status = "DestinationStatus",
    category = "kratix",
    shortname = "dest",
    shortname = "dests",
    printcolumn(
        name = "StateStoreKind",
        type_ = "string",
        json_path = ".spec.stateStoreRef.kind"
    ),
    printcolumn(
        name = "StateStoreName",
        type_ = "string",
        json_path = ".spec.stateStoreRef.name"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DestinationSpec {
    /// Sub-path within the state store's path; `.` or `/` = the store root. Required.
    pub path: String,
    /// The backing state store. Required.
    pub state_store_ref: StateStoreRef,
    /// If true, Works with no selectors are not scheduled here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict_match_labels: Option<bool>,
    /// Layout in the store; defaults to `{mode: nestedByMetadata}`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"mode": "nestedByMetadata"}))]
    pub filepath: Option<DestinationFilepath>,
    /// `none` (default) or `all` (delete this Destination's files on deletion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "none"))]
    pub cleanup: Option<DestinationCleanup>,
    /// Canary-file settings; default `{}` (enabled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub init_workloads: Option<InitWorkloads>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `spec.stateStoreRef` of a Destination.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StateStoreRef {
    /// `GitStateStore` or `BucketStateStore`.
    pub kind: StateStoreKind,
    /// State store name.
    pub name: String,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// Kind of state store a Destination references.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum StateStoreKind {
    /// [`crate::GitStateStore`].
    #[default]
    GitStateStore,
    /// [`crate::BucketStateStore`].
    BucketStateStore,
}

impl StateStoreKind {
    /// The kind name.
    pub fn as_str(self) -> &'static str {
        match self {
            StateStoreKind::GitStateStore => "GitStateStore",
            StateStoreKind::BucketStateStore => "BucketStateStore",
        }
    }
}

/// `spec.filepath` of a Destination.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DestinationFilepath {
    /// Layout mode; default `nestedByMetadata`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "nestedByMetadata"))]
    pub mode: Option<FilepathMode>,
    /// File name for `aggregatedYAML` mode (default `aggregated.yaml`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// Layout of a Destination's files in its state store.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum FilepathMode {
    /// `<dest>/resources/<ns>/<promise>/<rr>/<pipeline>/<group5>/...` (default).
    #[default]
    NestedByMetadata,
    /// Everything in one YAML file.
    #[serde(rename = "aggregatedYAML")]
    AggregatedYaml,
    /// Files at the Destination root plus `.kratix/` index files.
    None,
}

/// `spec.cleanup` of a Destination.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum DestinationCleanup {
    /// Leave files in place on deletion (default).
    #[default]
    None,
    /// Delete all WorkPlacements (hence files) and canary files on deletion.
    All,
}

/// `spec.initWorkloads` of a Destination.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitWorkloads {
    /// Write canary files (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub enabled: Option<bool>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `status` of a Destination: one `Ready` condition.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DestinationStatus {
    /// Conditions (`Ready`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

impl DestinationSpec {
    /// Effective layout mode (default `nestedByMetadata`).
    pub fn filepath_mode(&self) -> FilepathMode {
        self.filepath
            .as_ref()
            .and_then(|f| f.mode)
            .unwrap_or_default()
    }

    /// Effective aggregated file name (default `aggregated.yaml`).
    pub fn aggregated_filename(&self) -> &str {
        self.filepath
            .as_ref()
            .and_then(|f| f.filename.as_deref())
            .filter(|s| !s.is_empty())
            .unwrap_or("aggregated.yaml")
    }

    /// Effective cleanup policy (default `none`).
    pub fn cleanup_policy(&self) -> DestinationCleanup {
        self.cleanup.unwrap_or_default()
    }

    /// Whether canary files are written (default true).
    pub fn init_workloads_enabled(&self) -> bool {
        self.init_workloads
            .as_ref()
            .and_then(|i| i.enabled)
            .unwrap_or(true)
    }

    /// Effective `strictMatchLabels` (default false).
    pub fn strict_match_labels(&self) -> bool {
        self.strict_match_labels.unwrap_or(false)
    }
}
