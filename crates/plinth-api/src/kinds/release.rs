//! PromiseRelease.

use super::common::{Extra, SecretRef};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `spec` of a PromiseRelease: install a Promise fetched from a URL.
/// Cluster-scoped, status subresource, category `kratix`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "platform.kratix.io",
    version = "v1alpha1",
    kind = "PromiseRelease",
    plural = "promisereleases",
    status = "PromiseReleaseStatus",
    category = "kratix",
    printcolumn(name = "Status", type_ = "string", json_path = ".status.status"),
    printcolumn(name = "Version", type_ = "string", json_path = ".spec.version")
)]
#[serde(rename_all = "camelCase")]
pub struct PromiseReleaseSpec {
    /// Expected `kratix.io/promise-version` of the fetched Promise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Where to fetch the Promise from (default `{type: http}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"type": "http"}))]
    pub source_ref: Option<PromiseReleaseSource>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `spec.sourceRef` of a PromiseRelease.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromiseReleaseSource {
    /// Only `http`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<PromiseReleaseSourceType>,
    /// URL of a single-document Promise YAML/JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Secret whose key `authorizationHeader` is sent as `Authorization`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretRef>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `spec.sourceRef.type` of a PromiseRelease.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum PromiseReleaseSourceType {
    /// Plain HTTP(S) GET.
    #[default]
    Http,
}

/// `status` of a PromiseRelease.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromiseReleaseStatus {
    /// `Installed` or `Error installing`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// `Installed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}
