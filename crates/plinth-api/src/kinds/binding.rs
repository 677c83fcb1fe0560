//! ResourceBinding.

use super::common::{Extra, PromiseRef};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `spec` of a ResourceBinding: which Promise version a resource request is bound to.
/// Namespaced, status subresource, category `kratix`, selectable field `.spec.version`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "platform.kratix.io",
    version = "v1alpha1",
    kind = "ResourceBinding",
    plural = "resourcebindings",
    namespaced,
    status = "ResourceBindingStatus",
    category = "kratix",
    selectable = ".spec.version",
    printcolumn(
        name = "Resource",
        type_ = "string",
        json_path = ".spec.resourceRef.name"
    ),
    printcolumn(
        name = "Promise",
        type_ = "string",
        json_path = ".spec.promiseRef.name"
    ),
    printcolumn(name = "Desired", type_ = "string", json_path = ".spec.version"),
    printcolumn(
        name = "Applied",
        type_ = "string",
        json_path = ".status.lastAppliedVersion"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceBindingSpec {
    /// `latest` or an exact Promise version.
    pub version: String,
    /// The Promise.
    pub promise_ref: PromiseRef,
    /// The resource request.
    pub resource_ref: ResourceRef,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `{name, namespace, generation}` reference to a resource request.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRef {
    /// Resource request name.
    #[serde(default)]
    pub name: String,
    /// Resource request namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Generation (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `status` of a ResourceBinding.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceBindingStatus {
    /// `UpgradeSucceeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    /// Version last applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_version: Option<String>,
    /// Version that failed to apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_version: Option<String>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}
