//! The embedded `Pipeline` object of Promise workflows and the
//! workflow type/action enums.

use crate::{API_VERSION, ApiError};
use k8s_openapi::api::core::v1::{Container, LocalObjectReference, Toleration, Volume};
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Workflow type: whose workflow a pipeline belongs to (`kratix.io/workflow-type`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub enum WorkflowType {
    /// Runs for the Promise itself.
    Promise,
    /// Runs for each resource request.
    Resource,
}

impl WorkflowType {
    /// `promise` or `resource`.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkflowType::Promise => "promise",
            WorkflowType::Resource => "resource",
        }
    }

    /// Source tag of workflow-produced destination selectors: `promise-workflow` or
    /// `resource-workflow`.
    pub fn selector_source(self) -> &'static str {
        match self {
            WorkflowType::Promise => crate::constants::selector_source::PROMISE_WORKFLOW,
            WorkflowType::Resource => crate::constants::selector_source::RESOURCE_WORKFLOW,
        }
    }
}

impl std::str::FromStr for WorkflowType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "promise" => Ok(WorkflowType::Promise),
            "resource" => Ok(WorkflowType::Resource),
            other => Err(format!(
                "unknown workflow type {other:?} (expected promise or resource)"
            )),
        }
    }
}

impl std::fmt::Display for WorkflowType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Workflow action (`kratix.io/workflow-action`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub enum WorkflowAction {
    /// Create/update/periodic.
    Configure,
    /// Deletion.
    Delete,
}

impl WorkflowAction {
    /// `configure` or `delete`.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkflowAction::Configure => "configure",
            WorkflowAction::Delete => "delete",
        }
    }
}

impl std::str::FromStr for WorkflowAction {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "configure" => Ok(WorkflowAction::Configure),
            "delete" => Ok(WorkflowAction::Delete),
            other => Err(format!(
                "unknown workflow action {other:?} (expected configure or delete)"
            )),
        }
    }
}

impl std::fmt::Display for WorkflowAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A Pipeline: `apiVersion: platform.kratix.io/v1alpha1`, `kind: Pipeline`.
///
/// Not a CRD; it lives inside `Promise.spec.workflows`. Parse with [`Pipeline::parse`],
/// which, like Kratix, rejects any other apiVersion/kind and any unknown field.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Pipeline {
    /// Always `platform.kratix.io/v1alpha1`.
    pub api_version: String,
    /// Always `Pipeline`.
    pub kind: String,
    /// Name, labels (merged over Kratix's Job/pod labels), annotations (pod template only).
    #[serde(default)]
    pub metadata: PipelineMetadata,
    /// Containers and pod settings.
    #[serde(default)]
    pub spec: PipelineSpec,
}

/// `metadata` of a Pipeline.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PipelineMetadata {
    /// Pipeline name (unique within a type + action).
    #[serde(default)]
    pub name: String,
    /// Extra Job/pod labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Extra pod-template annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// `spec` of a Pipeline.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PipelineSpec {
    /// User containers, run in order as init containers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containers: Option<Vec<Container>>,
    /// Appended after the adapter's pull secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_secrets: Option<Vec<LocalObjectReference>>,
    /// Job options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_options: Option<JobOptions>,
    /// Pod nodeSelector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Pod tolerations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// Pod restartPolicy (default `OnFailure`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
    /// Volumes added after Kratix's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Vec<Volume>>,
    /// Service account and extra permissions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rbac: Option<PipelineRbac>,
}

/// `spec.jobOptions` of a Pipeline.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobOptions {
    /// Job backoffLimit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
}

/// `spec.rbac` of a Pipeline.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PipelineRbac {
    /// Use this ServiceAccount instead of the generated one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
    /// Extra RBAC rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<Vec<PipelinePermission>>,
}

/// `spec.rbac.permissions[]`: a PolicyRule plus `resourceNamespace`
/// (absent = pipeline namespace, `*` = cluster-wide).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PipelinePermission {
    /// PolicyRule `apiGroups`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_groups: Option<Vec<String>>,
    /// PolicyRule `resources`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<String>>,
    /// PolicyRule `resourceNames`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_names: Option<Vec<String>>,
    /// PolicyRule `nonResourceURLs`.
    #[serde(
        rename = "nonResourceURLs",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub non_resource_urls: Option<Vec<String>>,
    /// PolicyRule `verbs`.
    #[serde(default)]
    pub verbs: Vec<String>,
    /// Target namespace of the rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_namespace: Option<String>,
}

impl PipelinePermission {
    /// The rule without `resourceNamespace`.
    pub fn policy_rule(&self) -> PolicyRule {
        PolicyRule {
            api_groups: self.api_groups.clone(),
            resources: self.resources.clone(),
            resource_names: self.resource_names.clone(),
            non_resource_urls: self.non_resource_urls.clone(),
            verbs: self.verbs.clone(),
        }
    }
}

/// The rules of a pipeline's `spec.rbac.permissions`, sorted by where they apply (as
/// Kratix grants them): the rules without `resourceNamespace` (the pipeline's namespace,
/// a Role), and the rest by their `resourceNamespace` (a ClusterRole bound there; `*`
/// cluster-wide). Each rule is returned without its `resourceNamespace`.
///
/// ```
/// let spec = serde_json::json!({"rbac": {"permissions": [
///     {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
///     {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNamespace": "team-a"},
/// ]}});
/// let (local, by_namespace) = plinth_api::pipeline::permission_rules(&spec);
/// assert_eq!(local.len(), 1);
/// assert_eq!(by_namespace["team-a"][0]["resources"][0], "secrets");
/// assert!(by_namespace["team-a"][0].get("resourceNamespace").is_none());
/// ```
pub fn permission_rules(pipeline_spec: &Value) -> (Vec<Value>, BTreeMap<String, Vec<Value>>) {
    let mut local = Vec::new();
    let mut by_namespace: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for perm in pipeline_spec["rbac"]["permissions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let mut rule = perm.clone();
        let target = rule
            .as_object_mut()
            .and_then(|m| m.remove("resourceNamespace"));
        match target.as_ref().and_then(Value::as_str) {
            None | Some("") => local.push(rule),
            Some(t) => by_namespace.entry(t.to_string()).or_default().push(rule),
        }
    }
    (local, by_namespace)
}

impl Pipeline {
    /// Parses one raw `spec.workflows.*.*[]` entry strictly.
    ///
    /// Errors ([`ApiError::UnsupportedPipeline`]): apiVersion other than
    /// `platform.kratix.io/v1alpha1`, kind other than `Pipeline`, an empty name, or any
    /// field Kratix does not know (including inside containers, volumes and tolerations).
    pub fn parse(raw: &Value) -> Result<Pipeline, ApiError> {
        Self::parse_at(raw, "pipeline")
    }

    /// As [`Pipeline::parse`], naming `location` (e.g. `spec.workflows.resource.configure[0]`)
    /// in errors.
    pub fn parse_at(raw: &Value, location: &str) -> Result<Pipeline, ApiError> {
        let err = |reason: String| ApiError::UnsupportedPipeline {
            location: location.to_string(),
            reason,
        };
        let obj = raw.as_object().ok_or_else(|| err("not an object".into()))?;
        let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
        if api_version != API_VERSION || kind != "Pipeline" {
            return Err(err(format!(
                "apiVersion {api_version:?} kind {kind:?} (expected {API_VERSION} Pipeline)"
            )));
        }
        let pipeline = Self::decode(raw).map_err(|e| err(e.to_string()))?;
        if pipeline.metadata.name.is_empty() {
            return Err(err("metadata.name is empty".into()));
        }
        Ok(pipeline)
    }

    /// Decodes one raw entry as the controllers read it: strict types and no unknown
    /// field. The error names the field below the entry (`spec.containers[0].command`).
    /// Does not check apiVersion, kind or name (see [`Pipeline::parse_at`]).
    pub fn decode(raw: &Value) -> Result<Pipeline, crate::decode::FieldError> {
        let pipeline: Pipeline = crate::decode::typed(raw)?;
        // k8s-openapi types ignore unknown fields; Kratix decodes strictly, so compare the
        // input with what was understood and name the first field that was dropped.
        let understood =
            serde_json::to_value(&pipeline).map_err(|e| crate::decode::FieldError {
                field: String::new(),
                message: e.to_string(),
            })?;
        if let Some(path) = first_dropped_field(raw, &understood, "") {
            return Err(crate::decode::FieldError {
                field: path,
                message: "unknown field".into(),
            });
        }
        Ok(pipeline)
    }

    /// Pipeline name.
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// User containers (empty when absent).
    pub fn containers(&self) -> &[Container] {
        self.spec.containers.as_deref().unwrap_or(&[])
    }
}

/// Path of the first key present (non-null) in `input` but absent from `understood`.
fn first_dropped_field(input: &Value, understood: &Value, path: &str) -> Option<String> {
    match (input, understood) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match b.get(k) {
                    None if !v.is_null() => return Some(p),
                    None => {}
                    Some(bv) => {
                        if let Some(found) = first_dropped_field(v, bv, &p) {
                            return Some(found);
                        }
                    }
                }
            }
            None
        }
        (Value::Array(a), Value::Array(b)) => a
            .iter()
            .zip(b.iter())
            .enumerate()
            .find_map(|(i, (x, y))| first_dropped_field(x, y, &format!("{path}[{i}]"))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Value {
        json!({
            "apiVersion": "platform.kratix.io/v1alpha1",
            "kind": "Pipeline",
            "metadata": {"name": "instance-configure", "labels": {"team": "a"}},
            "spec": {
                "containers": [{"name": "c", "image": "busybox", "command": ["sh"], "args": ["-c", "true"],
                                "env": [{"name": "A", "value": "1"}]}],
                "jobOptions": {"backoffLimit": 2},
                "rbac": {"serviceAccount": "sa", "permissions": [
                    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNamespace": "*"}]},
                "volumes": [{"name": "v", "emptyDir": {}}]
            }
        })
    }

    #[test]
    fn parses_a_full_pipeline_and_round_trips() {
        let p = Pipeline::parse(&sample()).unwrap();
        assert_eq!(p.name(), "instance-configure");
        assert_eq!(p.containers()[0].image.as_deref(), Some("busybox"));
        assert_eq!(p.spec.job_options.as_ref().unwrap().backoff_limit, Some(2));
        let perm = &p.spec.rbac.as_ref().unwrap().permissions.as_ref().unwrap()[0];
        assert_eq!(perm.resource_namespace.as_deref(), Some("*"));
        assert_eq!(perm.policy_rule().verbs, vec!["get"]);
        assert_eq!(serde_json::to_value(&p).unwrap(), sample());
    }

    #[test]
    fn wrong_kind_or_version_is_unsupported() {
        let mut v = sample();
        v["kind"] = json!("Job");
        let e = Pipeline::parse_at(&v, "spec.workflows.resource.configure[0]").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("unsupported pipeline at spec.workflows.resource.configure[0]"),
            "{msg}"
        );
        let mut v = sample();
        v["apiVersion"] = json!("platform.kratix.io/v1beta1");
        assert!(
            Pipeline::parse(&v)
                .unwrap_err()
                .to_string()
                .contains("unsupported pipeline")
        );
    }

    #[test]
    fn unknown_fields_are_rejected_even_inside_containers() {
        let mut v = sample();
        v["spec"]["containerz"] = json!([]);
        assert!(
            Pipeline::parse(&v)
                .unwrap_err()
                .to_string()
                .contains("containerz")
        );
        let mut v = sample();
        v["spec"]["containers"][0]["imagePullPolicyy"] = json!("Always");
        let msg = Pipeline::parse(&v).unwrap_err().to_string();
        assert!(msg.contains("spec.containers[0].imagePullPolicyy"), "{msg}");
    }

    #[test]
    fn a_wrong_type_names_its_field() {
        let mut v = sample();
        v["spec"]["containers"][0]["command"] = json!("echo hi");
        let e = Pipeline::decode(&v).unwrap_err();
        assert_eq!(e.field, "spec.containers[0].command");
        assert!(e.message.contains("expected a sequence"), "{e}");
        let msg = Pipeline::parse_at(&v, "spec.workflows.resource.configure[0]")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("spec.containers[0].command: invalid type"),
            "{msg}"
        );
    }

    #[test]
    fn empty_name_is_rejected() {
        let mut v = sample();
        v["metadata"]["name"] = json!("");
        assert!(
            Pipeline::parse(&v)
                .unwrap_err()
                .to_string()
                .contains("metadata.name")
        );
    }
}
