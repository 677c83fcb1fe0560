//! The CustomResourceDefinition a Promise's `spec.api` defines for its resource
//! requests, and the transformation it goes through before it is installed: checked,
//! its `apiVersion` normalised, `metadata.name` bounded, the request status schema and
//! printer columns added, as Kratix does.

use crate::ApiError;
use crate::constants::labels;
use serde_json::{Map, Value, json};

/// Group, storage version, kind and plural of a resource-request CRD.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestGvk {
    /// `spec.group`.
    pub group: String,
    /// The storage version (first version when none is flagged `storage: true`).
    pub version: String,
    /// `spec.names.kind`.
    pub kind: String,
    /// `spec.names.plural`.
    pub plural: String,
}

impl RequestGvk {
    /// `group/version`.
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }
}

fn invalid(field: &str, reason: impl Into<String>) -> ApiError {
    ApiError::InvalidApi {
        field: field.to_string(),
        reason: reason.into(),
    }
}

/// Checks that `crd` is a CustomResourceDefinition with a name, group, kind, plural and at
/// least one version.
///
/// Kratix decodes `spec.api` into the `apiextensions.k8s.io/v1` type without looking at
/// `apiVersion`, and real Promises carry e.g. `apiextensions.k8s.io/v1alpha1`; so any
/// `apiextensions.k8s.io/*` version is accepted here and [`normalise_api_version`] rewrites
/// it to `v1`.
pub fn validate_api_crd(crd: &Value) -> Result<(), ApiError> {
    let obj = crd
        .as_object()
        .ok_or_else(|| invalid("spec.api", "not an object"))?;
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    if !api_version.starts_with("apiextensions.k8s.io/") || kind != "CustomResourceDefinition" {
        return Err(invalid(
            "spec.api",
            format!(
                "apiVersion {api_version:?} kind {kind:?}; expected apiextensions.k8s.io/v1 CustomResourceDefinition"
            ),
        ));
    }
    for (path, ptr) in [
        ("spec.api.metadata.name", "/metadata/name"),
        ("spec.api.spec.group", "/spec/group"),
        ("spec.api.spec.names.kind", "/spec/names/kind"),
        ("spec.api.spec.names.plural", "/spec/names/plural"),
    ] {
        if crd
            .pointer(ptr)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(invalid(path, "required"));
        }
    }
    match crd.pointer("/spec/versions").and_then(Value::as_array) {
        Some(v) if !v.is_empty() => Ok(()),
        _ => Err(invalid(
            "spec.api.spec.versions",
            "at least one version is required",
        )),
    }
}

/// Sets `apiVersion: apiextensions.k8s.io/v1` (see [`validate_api_crd`]).
pub fn normalise_api_version(crd: &mut Value) {
    if let Some(obj) = crd.as_object_mut() {
        obj.insert("apiVersion".into(), json!("apiextensions.k8s.io/v1"));
    }
}

fn storage_version_index(versions: &[Value]) -> usize {
    versions
        .iter()
        .position(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .unwrap_or(0)
}

/// Group, storage version, kind and plural of a resource-request CRD (the
/// storage version, or the first version if none is flagged).
///
/// Errors: [`ApiError::InvalidApi`] naming the missing field.
pub fn request_gvk(crd: &Value) -> Result<RequestGvk, ApiError> {
    validate_api_crd(crd)?;
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let idx = storage_version_index(versions);
    let version = versions[idx]
        .get("name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| invalid(&format!("spec.api.spec.versions[{idx}].name"), "required"))?;
    let s = |p: &str| {
        crd.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    Ok(RequestGvk {
        group: s("/spec/group"),
        version: version.to_string(),
        kind: s("/spec/names/kind"),
        plural: s("/spec/names/plural"),
    })
}

/// Makes sure `path` in `root` is an object, creating empty objects on the way.
fn ensure_object<'a>(
    root: &'a mut Value,
    path: &[&str],
    field: &str,
) -> Result<&'a mut Map<String, Value>, ApiError> {
    let mut cur = root;
    for key in path {
        let obj = cur
            .as_object_mut()
            .ok_or_else(|| invalid(field, "not an object"))?;
        cur = obj.entry(key.to_string()).or_insert_with(|| json!({}));
        if cur.is_null() {
            *cur = json!({});
        }
    }
    cur.as_object_mut()
        .ok_or_else(|| invalid(field, "not an object"))
}

/// Injects `metadata.name` `{type: string, maxLength: 63}` into the storage version's
/// schema (Kratix `GetAPI()`), so request names fit in label values.
pub fn inject_name_max_length(crd: &mut Value) -> Result<(), ApiError> {
    let Some(versions) = crd
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
    else {
        return Err(invalid(
            "spec.api.spec.versions",
            "at least one version is required",
        ));
    };
    if versions.is_empty() {
        return Err(invalid(
            "spec.api.spec.versions",
            "at least one version is required",
        ));
    }
    let idx = storage_version_index(versions);
    let field = format!("spec.api.spec.versions[{idx}].schema.openAPIV3Schema");
    let version = &mut versions[idx];
    let props = ensure_object(
        version,
        &["schema", "openAPIV3Schema", "properties"],
        &field,
    )?;
    let metadata = props
        .entry("metadata")
        .or_insert_with(|| json!({"type": "object"}));
    let metadata = metadata
        .as_object_mut()
        .ok_or_else(|| invalid(&field, "properties.metadata is not an object"))?;
    metadata.entry("type").or_insert_with(|| json!("object"));
    let mprops = metadata.entry("properties").or_insert_with(|| json!({}));
    let mprops = mprops
        .as_object_mut()
        .ok_or_else(|| invalid(&field, "properties.metadata.properties is not an object"))?;
    let name = mprops
        .entry("name")
        .or_insert_with(|| json!({"type": "string"}));
    let name = name.as_object_mut().ok_or_else(|| {
        invalid(
            &field,
            "properties.metadata.properties.name is not an object",
        )
    })?;
    name.insert("type".into(), json!("string"));
    name.insert("maxLength".into(), json!(63));
    Ok(())
}

/// The status schema Kratix injects into every version of a resource-request CRD.
pub fn request_status_schema() -> Value {
    let time = json!({"type": "string", "format": "date-time"});
    json!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "properties": {
            "message": {"type": "string"},
            "observedGeneration": {"type": "integer", "format": "int64"},
            "workflows": {"type": "integer", "format": "int64"},
            "workflowsSucceeded": {"type": "integer", "format": "int64"},
            "workflowsFailed": {"type": "integer", "format": "int64"},
            "conditions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "lastTransitionTime": time,
                        "message": {"type": "string"},
                        "reason": {"type": "string"},
                        "status": {"type": "string"},
                        "type": {"type": "string"}
                    }
                }
            },
            "kratix": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": true,
                "properties": {
                    "workflows": {
                        "type": "object",
                        "properties": {
                            "lastSuccessfulConfigureWorkflowTime": time,
                            "suspendedGeneration": {"type": "integer", "format": "int64"},
                            "pipelines": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "properties": {
                                        "name": {"type": "string"},
                                        "phase": {"type": "string"},
                                        "message": {"type": "string"},
                                        "nextRetryAt": time,
                                        "attempts": {"type": "integer", "format": "int64"},
                                        "lastTransitionTime": time
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    })
}

/// Renames `additionalPrinterColumns` keys to their `apiextensions.k8s.io/v1` spelling
/// when they differ only in case (e.g. v1beta1's `JSONPath` → `jsonPath`). Kratix decodes
/// `spec.api` with Go's case-insensitive JSON decoder, so marketplace Promises written
/// with the old spelling install there; they must install here too.
fn normalise_printer_column_keys(version: &mut serde_json::Map<String, Value>) {
    const KEYS: [&str; 6] = [
        "name",
        "type",
        "format",
        "description",
        "priority",
        "jsonPath",
    ];
    let Some(columns) = version
        .get_mut("additionalPrinterColumns")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for column in columns.iter_mut().filter_map(Value::as_object_mut) {
        let renames: Vec<(String, &str)> = column
            .keys()
            .filter_map(|k| {
                KEYS.iter()
                    .find(|want| want.eq_ignore_ascii_case(k) && *want != k)
                    .map(|want| (k.clone(), *want))
            })
            .collect();
        for (from, to) in renames {
            if let Some(v) = column.remove(&from) {
                column.entry(to.to_string()).or_insert(v);
            }
        }
    }
}

/// Builds the resource-request CRD a Promise installs from its `spec.api`:
///
/// * label `kratix.io/promise-name: <promise_name>`;
/// * every version gets `subresources.status: {}`;
/// * a version without `additionalPrinterColumns` gets `message` (`.status.message`),
///   `status` (`.status.conditions[?(@.type=="Reconciled")].message`) and, Plinth's
///   addition, `health` (`.status.healthStatus.state`);
/// * every version's `properties.status` is replaced with [`request_status_schema`];
/// * the storage version's `metadata.name` gets `maxLength: 63`;
/// * `apiVersion` is normalised to `apiextensions.k8s.io/v1`, and printer-column keys to
///   their v1 spelling (`JSONPath` → `jsonPath`, as Go's decoder accepts).
///
/// Errors: [`ApiError::InvalidApi`] when `api` is not a usable v1 CRD.
pub fn build_request_crd(promise_name: &str, api: &Value) -> Result<Value, ApiError> {
    validate_api_crd(api)?;
    let mut crd = api.clone();
    normalise_api_version(&mut crd);
    {
        let meta_labels = ensure_object(
            &mut crd,
            &["metadata", "labels"],
            "spec.api.metadata.labels",
        )?;
        meta_labels.insert(labels::PROMISE_NAME.into(), json!(promise_name));
    }
    let versions = crd
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| invalid("spec.api.spec.versions", "must be a list"))?;
    for (i, version) in versions.iter_mut().enumerate() {
        let field = format!("spec.api.spec.versions[{i}]");
        let v = version
            .as_object_mut()
            .ok_or_else(|| invalid(&field, "not an object"))?;
        normalise_printer_column_keys(v);
        let sub = v.entry("subresources").or_insert_with(|| json!({}));
        if sub.is_null() {
            *sub = json!({});
        }
        sub.as_object_mut()
            .ok_or_else(|| invalid(&format!("{field}.subresources"), "not an object"))?
            .insert("status".into(), json!({}));
        let has_columns = v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        if !has_columns {
            v.insert(
                "additionalPrinterColumns".into(),
                json!([
                    {"name": "message", "type": "string", "jsonPath": ".status.message"},
                    {"name": "status", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Reconciled\")].message"},
                    {"name": "health", "type": "string", "jsonPath": ".status.healthStatus.state"}
                ]),
            );
        }
        let props = ensure_object(
            version,
            &["schema", "openAPIV3Schema", "properties"],
            &format!("{field}.schema.openAPIV3Schema"),
        )?;
        props.insert("status".into(), request_status_schema());
    }
    inject_name_max_length(&mut crd)?;
    Ok(crd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "redis.marketplace.kratix.io"},
            "spec": {
                "group": "marketplace.kratix.io",
                "names": {"kind": "redis", "plural": "redis", "singular": "redis"},
                "scope": "Namespaced",
                "versions": [
                    {"name": "v1alpha1", "served": true, "storage": false,
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object"}}}}},
                    {"name": "v1", "served": true, "storage": true,
                     "additionalPrinterColumns": [{"name": "Size", "type": "string", "jsonPath": ".spec.size"}],
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {"status": {"type": "string"}}}}}
                ]
            }
        })
    }

    #[test]
    fn request_crd_is_transformed_as_kratix_does() {
        let crd = build_request_crd("redis", &api()).unwrap();
        assert_eq!(crd["metadata"]["labels"]["kratix.io/promise-name"], "redis");
        for v in crd["spec"]["versions"].as_array().unwrap() {
            assert_eq!(v["subresources"]["status"], json!({}));
            let status = &v["schema"]["openAPIV3Schema"]["properties"]["status"];
            assert_eq!(status["x-kubernetes-preserve-unknown-fields"], true);
            assert!(status["properties"]["kratix"]["properties"]["workflows"].is_object());
        }
        let v0 = &crd["spec"]["versions"][0];
        assert_eq!(
            v0["additionalPrinterColumns"][0]["jsonPath"],
            ".status.message"
        );
        assert!(
            v0["schema"]["openAPIV3Schema"]["properties"]["metadata"].is_null(),
            "only the storage version"
        );
        let v1 = &crd["spec"]["versions"][1];
        assert_eq!(
            v1["additionalPrinterColumns"].as_array().unwrap().len(),
            1,
            "own columns kept"
        );
        assert_eq!(
            v1["schema"]["openAPIV3Schema"]["properties"]["metadata"]["properties"]["name"]["maxLength"],
            63
        );
    }

    #[test]
    fn gvk_uses_the_storage_version() {
        let g = request_gvk(&api()).unwrap();
        assert_eq!(
            g,
            RequestGvk {
                group: "marketplace.kratix.io".into(),
                version: "v1".into(),
                kind: "redis".into(),
                plural: "redis".into()
            }
        );
        let mut a = api();
        a["spec"]["versions"][1]["storage"] = json!(false);
        assert_eq!(request_gvk(&a).unwrap().version, "v1alpha1");
    }

    #[test]
    fn bad_api_is_named() {
        let mut a = api();
        a["kind"] = json!("Deployment");
        assert!(
            build_request_crd("p", &a)
                .unwrap_err()
                .to_string()
                .contains("spec.api")
        );
        let mut a = api();
        a["spec"]["versions"] = json!([]);
        assert!(
            request_gvk(&a)
                .unwrap_err()
                .to_string()
                .contains("spec.api.spec.versions")
        );
    }
}
