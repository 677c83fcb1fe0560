//! The types more than one kind is made of: references to a Promise and a Secret, a
//! destination selector, the unmodelled-fields map, and the condition lookup.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Fields Plinth does not model, kept verbatim for lossless round-trips.
pub type Extra = BTreeMap<String, Value>;

/// `{name}` reference to a Promise (`promiseRef` in PromiseRevision, ResourceBinding,
/// HealthRecord).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromiseRef {
    /// Promise name.
    pub name: String,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `{name, namespace}` reference to a Secret (state stores, PromiseRelease).
/// `namespace` defaults to `default` where the consumer says so.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    /// Secret name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Secret namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// `{matchLabels}` destination selector (Promise `spec.destinationSelectors[]`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DestinationSelector {
    /// Labels a Destination must carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<BTreeMap<String, String>>,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

/// Finds a condition by type in an optional list (helper for every status type).
pub fn find_condition<'a>(
    conditions: &'a Option<Vec<Condition>>,
    type_: &str,
) -> Option<&'a Condition> {
    conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}
