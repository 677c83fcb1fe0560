//! HealthDefinition (`platform.kratix.io/v1alpha1`, namespaced): a health check a resource
//! pipeline writes to `/kratix/output`, scheduled to a Destination like any document and
//! run there on a schedule by the health agent, which writes a HealthRecord per change.

use super::binding::ResourceRef;
use super::common::{Extra, PromiseRef};
use crate::ApiError;
use crate::pipeline::Pipeline;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// `spec` of a HealthDefinition. Namespaced, category `kratix`, no status.
///
/// The agent runs `workflow` as a CronJob on `schedule` in the HealthDefinition's own
/// namespace; the check reads `input` as `/kratix/input/object.yaml` and writes
/// `/kratix/output/health-status.yaml` (`state`, optional `details`), which becomes a
/// HealthRecord for `resourceRef` of `promiseRef`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "platform.kratix.io",
    version = "v1alpha1",
    kind = "HealthDefinition",
    plural = "healthdefinitions",
    namespaced,
    category = "kratix",
    printcolumn(name = "Schedule", type_ = "string", json_path = ".spec.schedule"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct HealthDefinitionSpec {
    /// The resource request whose health the check reports.
    pub resource_ref: ResourceRef,
    /// The Promise of that request.
    pub promise_ref: PromiseRef,
    /// When the check runs: a cron expression with the five standard fields, or a macro
    /// (`@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`, `@annually`, `@midnight`).
    pub schedule: String,
    /// The object the check reads as `/kratix/input/object.yaml` (a YAML document).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// The check: a Kratix Pipeline (`platform.kratix.io/v1alpha1`, `Pipeline`); parse it
    /// with [`HealthDefinition::pipeline`].
    #[schemars(schema_with = "crate::schema::preserved_object")]
    pub workflow: Value,
    /// Unmodelled fields.
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: Extra,
}

impl HealthDefinition {
    /// The check's Pipeline, parsed strictly.
    ///
    /// # Errors
    /// [`ApiError::UnsupportedPipeline`] naming `spec.workflow` when it is not a Kratix
    /// Pipeline (wrong apiVersion/kind, unknown fields).
    pub fn pipeline(&self) -> Result<Pipeline, ApiError> {
        Pipeline::parse_at(&self.spec.workflow, "spec.workflow")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"
apiVersion: platform.kratix.io/v1alpha1
kind: HealthDefinition
metadata: {name: db-health, namespace: default}
spec:
  resourceRef: {name: example, namespace: default}
  promiseRef: {name: postgresql}
  schedule: "*/5 * * * *"
  input: |
    apiVersion: marketplace.kratix.io/v1alpha1
    kind: postgresql
  workflow:
    apiVersion: platform.kratix.io/v1alpha1
    kind: Pipeline
    metadata: {name: check}
    spec:
      containers:
      - {name: check, image: ghcr.io/example/check:v1}
"#;

    #[test]
    fn parses_round_trips_and_exposes_its_pipeline() {
        let hd: HealthDefinition = serde_saphyr::from_str(DOC).unwrap();
        assert_eq!(hd.spec.schedule, "*/5 * * * *");
        assert_eq!(hd.spec.promise_ref.name, "postgresql");
        assert!(
            hd.spec
                .input
                .as_deref()
                .unwrap()
                .contains("kind: postgresql")
        );
        let p = hd.pipeline().unwrap();
        assert_eq!(p.metadata.name, "check");
        assert_eq!(p.spec.containers.as_deref().unwrap().len(), 1);
        let back: HealthDefinition =
            serde_json::from_value(serde_json::to_value(&hd).unwrap()).unwrap();
        assert_eq!(back.spec, hd.spec);
    }

    #[test]
    fn a_workflow_that_is_not_a_pipeline_names_the_field() {
        let mut hd: HealthDefinition = serde_saphyr::from_str(DOC).unwrap();
        hd.spec.workflow["kind"] = Value::String("Job".into());
        let e = hd.pipeline().unwrap_err().to_string();
        assert!(e.contains("spec.workflow"), "{e}");
    }
}
