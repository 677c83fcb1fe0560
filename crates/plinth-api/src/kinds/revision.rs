//! PromiseRevision.

use super::common::{Extra, PromiseRef};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// `spec` of a PromiseRevision: a Promise spec frozen at one version.
/// Cluster-scoped, status subresource, category `kratix`. Name:
/// [`crate::names::promise_revision_name`].
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "platform.kratix.io",
    version = "v1alpha1",
    kind = "PromiseRevision",
    plural = "promiserevisions",
    status = "PromiseRevisionStatus",
    category = "kratix",
    printcolumn(
        name = "Promise",
        type_ = "string",
        json_path = ".spec.promiseRef.name"
    ),
    printcolumn(name = "Version", type_ = "string", json_path = ".spec.version"),
    printcolumn(name = "Latest", type_ = "boolean", json_path = ".status.latest")
)]
#[serde(rename_all = "camelCase")]
pub struct PromiseRevisionSpec {
    /// The Promise.
    pub promise_ref: PromiseRef,
    /// Full copy of the Promise `spec` at that version (kept verbatim; parse with
    /// `serde_json::from_value::<PromiseSpec>` when needed).
    #[schemars(schema_with = "crate::schema::preserved_object")]
    pub promise_spec: Value,
    /// `kratix.io/promise-version` label value, or `not-set`.
    pub version: String,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `status` of a PromiseRevision.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromiseRevisionStatus {
    /// Whether this is the most recently applied version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest: Option<bool>,
    /// Conditions (currently unused by Kratix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}
