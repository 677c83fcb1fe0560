//! HealthSource (`platform.syntasso.io/v1alpha1`): a store the platform polls for
//! HealthRecords that Destinations write, applying them onto the platform itself,
//! and the health history Plinth keeps on each resource request.

use super::common::{Extra, SecretRef};
use super::statestore::{BucketStateStoreSpec, GitStateStoreSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// API group of HealthSource.
pub const HEALTH_SOURCE_GROUP: &str = "platform.syntasso.io";
/// `apiVersion` of HealthSource.
pub const HEALTH_SOURCE_API_VERSION: &str = "platform.syntasso.io/v1alpha1";
/// Shortest accepted `spec.pollInterval`, in seconds.
pub const MIN_HEALTH_POLL_INTERVAL_SECS: u64 = 10;
/// `spec.pollInterval` when unset, in seconds (1 minute).
pub const DEFAULT_HEALTH_POLL_INTERVAL_SECS: u64 = 60;

/// `spec` of a HealthSource. Cluster-scoped, status subresource.
///
/// Exactly one of `bucket` (S3-compatible), `azure`, `gcs` or `git` (polled), or `redis` or
/// `nats` (streams, consumed as messages arrive) names the store; the reader needs only read
/// access to a polled store. Records are read from under `path` (polled stores).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "platform.syntasso.io",
    version = "v1alpha1",
    kind = "HealthSource",
    plural = "healthsources",
    status = "HealthSourceStatus",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(name = "Records", type_ = "integer", json_path = ".status.records"),
    printcolumn(name = "Rejected", type_ = "integer", json_path = ".status.rejected"),
    printcolumn(name = "Interval", type_ = "string", json_path = ".spec.pollInterval"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct HealthSourceSpec {
    /// An S3-compatible bucket, with the fields of a BucketStateStore (`endpoint`,
    /// `bucketName`, `authMethod`, `secretRef` with `accessKeyID`/`secretAccessKey`,
    /// `insecure`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<BucketStateStoreSpec>,
    /// An Azure Blob Storage container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure: Option<AzureBlobSource>,
    /// A Google Cloud Storage bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcs: Option<GcsSource>,
    /// A Git repository, with the fields and auth methods of a GitStateStore (`url`,
    /// `branch`, `authMethod`, `secretRef`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitStateStoreSpec>,
    /// A Redis stream, read in a consumer group (not polled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis: Option<RedisSource>,
    /// A NATS JetStream stream, read by a durable pull consumer (not polled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nats: Option<NatsSource>,
    /// Key prefix (directory) the records are read from; every `.yaml`/`.yml`/`.json` file
    /// under it is one record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// How often the store is polled: a Go duration of at least 10s (default `1m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "1m"))]
    pub poll_interval: Option<String>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `spec.azure` of a HealthSource. Secret keys: `sasToken` (a read-only SAS is enough)
/// or `accountKey`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AzureBlobSource {
    /// Storage account name.
    pub account: String,
    /// Container name.
    pub container: String,
    /// Blob service URL, e.g. an emulator's `http://127.0.0.1:10000/devstoreaccount1`
    /// (default: the public Azure endpoint of the account).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Credentials Secret (namespace defaults to `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretRef>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `spec.redis` of a HealthSource: a stream the health writer `XADD`s records to. Secret
/// keys (all optional): `username`, `password`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RedisSource {
    /// `redis://host:port`, or `rediss://host:port` for TLS.
    pub address: String,
    /// The stream's key.
    pub stream: String,
    /// Consumer group shared by the platform's replicas (default `plinth`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Credentials Secret (namespace defaults to `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretRef>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `spec.nats` of a HealthSource: a JetStream stream the health writer publishes records
/// to. Secret keys (all optional): `token`, or `username` and `password`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NatsSource {
    /// Server URLs (`nats://host:port`, `tls://host:port`).
    pub servers: Vec<String>,
    /// The JetStream stream (created with `subject` if missing).
    pub stream: String,
    /// The subject the records are published on.
    pub subject: String,
    /// Durable pull consumer shared by the platform's replicas (default `plinth`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer: Option<String>,
    /// Credentials Secret (namespace defaults to `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretRef>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `spec.gcs` of a HealthSource. Secret key `serviceAccountKey` (JSON).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GcsSource {
    /// Bucket name.
    pub bucket_name: String,
    /// Service URL override (default: the public Google endpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Credentials Secret (namespace defaults to `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretRef>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `status` of a HealthSource. Written only when something other than the poll time
/// changed (see the HealthSource controller), so a settled source is silent.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthSourceStatus {
    /// `Ready` with reasons `Polled` (`Consuming` for a stream), `InvalidSpec`,
    /// `SecretNotFound`, `StoreError`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    /// The generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When the store was last polled (RFC 3339). Refreshed together with any other status
    /// change, on a manual trigger, and otherwise at most once an hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_poll_time: Option<String>,
    /// Records on the platform from this source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records: Option<i64>,
    /// Records applied (created or changed) by the last poll that found a change; for a
    /// stream source, since its consumer started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<i64>,
    /// Records found unchanged by the last poll that found a change; for a stream source,
    /// messages since its consumer started that changed nothing (redelivered or older).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unchanged: Option<i64>,
    /// Records currently rejected (listed in `rejectedRecords`, at most 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<i64>,
    /// The rejected object keys and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected_records: Option<Vec<RejectedRecord>>,
    /// The manual-trigger annotation value handled last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_trigger: Option<String>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// One rejected record of a HealthSource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RejectedRecord {
    /// Object key (path) in the store, relative to `spec.path`.
    pub key: String,
    /// Why it was skipped.
    pub reason: String,
}
