//! GitStateStore and BucketStateStore.

use super::common::{Extra, SecretRef};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `spec` of a GitStateStore. Cluster-scoped, status subresource, category `kratix`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "platform.kratix.io",
    version = "v1alpha1",
    kind = "GitStateStore",
    plural = "gitstatestores",
    status = "StateStoreStatus",
    category = "kratix",
    printcolumn(name = "URL", type_ = "string", json_path = ".spec.url"),
    printcolumn(name = "Branch", type_ = "string", json_path = ".spec.branch"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.status")
)]
#[serde(rename_all = "camelCase")]
pub struct GitStateStoreSpec {
    /// Repository URL: `https://...` (basicAuth/githubApp) or SSH (`[ssh://]user@host...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Top-level directory in the repository; prefix for all Destinations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Credentials Secret (namespace defaults to `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretRef>,
    /// Branch to clone and push (default `main`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "main"))]
    pub branch: Option<String>,
    /// `basicAuth` (default), `ssh` or `githubApp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "basicAuth"))]
    pub auth_method: Option<GitAuthMethod>,
    /// Commit author (default name `kratix`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_author: Option<GitAuthor>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `spec.authMethod` of a GitStateStore.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum GitAuthMethod {
    /// Secret keys `username` (optional) and `password`.
    #[default]
    BasicAuth,
    /// Secret keys `sshPrivateKey`, `knownHosts`.
    Ssh,
    /// Secret keys `appID`, `installationID`, `privateKey`.
    GithubApp,
}

/// `spec.gitAuthor` of a GitStateStore.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitAuthor {
    /// Author name (default `kratix`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Author email.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `spec` of a BucketStateStore. Cluster-scoped, status subresource, category `kratix`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "platform.kratix.io",
    version = "v1alpha1",
    kind = "BucketStateStore",
    plural = "bucketstatestores",
    status = "StateStoreStatus",
    category = "kratix",
    printcolumn(name = "Name", type_ = "string", json_path = ".spec.bucketName"),
    printcolumn(name = "Endpoint", type_ = "string", json_path = ".spec.endpoint"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.status")
)]
#[serde(rename_all = "camelCase")]
pub struct BucketStateStoreSpec {
    /// Bucket name. Required.
    pub bucket_name: String,
    /// `host[:port]` of the S3-compatible API (no scheme). Required.
    pub endpoint: String,
    /// Object key prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Credentials Secret (keys `accessKeyID`, `secretAccessKey`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretRef>,
    /// `true` = plain HTTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
    /// Use AWS dual-stack endpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_dual_stack: Option<bool>,
    /// `accessKey` (default) or `IAM`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "accessKey"))]
    pub auth_method: Option<BucketAuthMethod>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `spec.authMethod` of a BucketStateStore.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum BucketAuthMethod {
    /// Static keys from the Secret.
    #[default]
    #[serde(rename = "accessKey")]
    AccessKey,
    /// Ambient credentials.
    #[serde(rename = "IAM")]
    Iam,
}

/// `status` shared by GitStateStore and BucketStateStore.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StateStoreStatus {
    /// `Ready` or `NotReady`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Conditions (`Ready`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    /// Generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}
