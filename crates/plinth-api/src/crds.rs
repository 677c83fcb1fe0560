//! CRD manifests of the Kratix kinds, and the transformation a Promise's `spec.api`
//! goes through before it is installed.

use crate::ApiError;
use crate::constants::labels;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::{Map, Value, json};

/// The CustomResourceDefinitions of every `platform.kratix.io/v1alpha1` kind Plinth serves,
/// generated from the Rust types: Promise, Destination, GitStateStore, BucketStateStore,
/// Work, WorkPlacement, PromiseRelease, PromiseRevision, ResourceBinding, HealthRecord,
/// HealthDefinition, DryRun (preview), and Plinth's HealthSource (`platform.syntasso.io/v1alpha1`).
///
/// Scopes, short names, printer columns, the `kratix` category and status subresources are
/// as Kratix defines them (HealthRecord has no status subresource).
pub fn all_crds() -> Vec<CustomResourceDefinition> {
    [
        crate::Promise::crd(),
        crate::Destination::crd(),
        crate::GitStateStore::crd(),
        crate::BucketStateStore::crd(),
        crate::Work::crd(),
        crate::WorkPlacement::crd(),
        crate::PromiseRelease::crd(),
        crate::PromiseRevision::crd(),
        crate::ResourceBinding::crd(),
        crate::HealthRecord::crd(),
        crate::HealthDefinition::crd(),
        crate::DryRun::crd(),
        crate::HealthSource::crd(),
    ]
    .into_iter()
    .map(user_facing_descriptions)
    .map(strict_schemas)
    .collect()
}

/// Makes the published schemas as strict, and as lenient, as Kratix's generated CRDs:
///
/// * the `extra` maps that keep unmodelled fields in Rust round trips are not part of the
///   schema, so an unknown field (`spec.destinationSelector`) is pruned, reported by
///   `kubectl` as `unknown field` (a warning, or an error with `--validate=strict`), and
///   never reaches a controller; unknown fields are kept only where Kratix keeps them
///   (`spec.api`, pipelines, static dependencies, embedded objects) and in `status`,
///   which only controllers write;
/// * the top-level `spec` is optional, as Kratix declares it: a Promise with no `spec` is
///   a valid marker Promise.
fn strict_schemas(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    fn closed(v: &mut Value) {
        match v {
            Value::Object(m) => {
                // The `extra` catch-all shows up as `additionalProperties: true` or
                // `x-kubernetes-preserve-unknown-fields` next to typed properties.
                if m.contains_key("properties") {
                    if m.get("additionalProperties") == Some(&json!(true)) {
                        m.remove("additionalProperties");
                    }
                    m.remove("x-kubernetes-preserve-unknown-fields");
                }
                m.values_mut().for_each(closed);
            }
            Value::Array(a) => a.iter_mut().for_each(closed),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(&crd).expect("a CRD serialises");
    for version in v
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        let Some(root) = version.pointer_mut("/schema/openAPIV3Schema") else {
            continue;
        };
        // Status is written by controllers, not users: it keeps what it had, so a status
        // field a schema does not list is never pruned from under its writer.
        for (name, prop) in root
            .get_mut("properties")
            .and_then(Value::as_object_mut)
            .into_iter()
            .flatten()
        {
            if name != "status" {
                closed(prop);
            }
        }
        if let Some(m) = root.as_object_mut()
            && m.get("additionalProperties") == Some(&json!(true))
        {
            m.remove("additionalProperties");
        }
        // Kratix's controllers read a missing spec as an empty one and write it back as
        // `spec: {}`; defaulting it gives every reader the same object at once.
        if let Some(spec) = root
            .pointer_mut("/properties/spec")
            .and_then(Value::as_object_mut)
        {
            spec.entry("default").or_insert_with(|| json!({}));
        }
        if let Some(Value::Array(required)) = root.get_mut("required") {
            required.retain(|r| r != "spec");
            if required.is_empty() {
                root.as_object_mut().map(|m| m.remove("required"));
            }
        }
    }
    serde_json::from_value(v).unwrap_or(crd)
}

/// The schema descriptions come from the types' doc comments; should one carry a
/// section-number citation, `kubectl explain` readers have no use for it, so citations
/// are dropped from the published CRDs.
fn user_facing_descriptions(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    fn clean(v: &mut Value) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(d)) = m.get_mut("description") {
                    *d = strip_citations(d);
                }
                m.values_mut().for_each(clean);
            }
            Value::Array(a) => a.iter_mut().for_each(clean),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(&crd).expect("a CRD serialises");
    clean(&mut v);
    serde_json::from_value(v).unwrap_or(crd)
}

/// Removes section-number citations (a section sign and number, optionally after
/// `kratix-spec` and in parentheses).
fn strip_citations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let hit = ["kratix-spec §", "(§"]
            .iter()
            .filter_map(|p| rest.find(p))
            .min();
        let Some(i) = hit else { break };
        let (before, after) = rest.split_at(i);
        let end = after.find([')', ';', ',', '\n']).unwrap_or(after.len());
        out.push_str(before.strip_suffix('(').unwrap_or(before).trim_end());
        rest = &after[end..];
        if let Some(r) = rest.strip_prefix(')') {
            rest = r;
        }
    }
    out.push_str(rest);
    out
}

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

    #[test]
    fn published_descriptions_have_no_reference_citations() {
        for crd in all_crds() {
            let text = serde_json::to_string(&crd).unwrap();
            assert!(
                !text.contains("kratix-spec") && !text.contains('§'),
                "{:?}",
                crd.metadata.name
            );
        }
        assert_eq!(
            strip_citations("A Promise (kratix-spec §1.1). More."),
            "A Promise. More."
        );
        assert_eq!(strip_citations("Required first (§2.3)."), "Required first.");
    }

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

    #[test]
    fn generated_crds_have_the_kratix_shape() {
        let crds = all_crds();
        assert_eq!(crds.len(), 13);

        for crd in crds.iter().filter(|c| c.spec.names.kind != "HealthSource") {
            assert_eq!(crd.spec.group, "platform.kratix.io");
            assert_eq!(
                crd.spec.names.categories.as_deref(),
                Some(&["kratix".to_string()][..])
            );
        }
        let by = |name: &str| {
            crds.iter()
                .find(|c| c.metadata.name.as_deref() == Some(name))
                .unwrap()
        };
        assert_eq!(by("promises.platform.kratix.io").spec.scope, "Cluster");
        assert_eq!(by("works.platform.kratix.io").spec.scope, "Namespaced");
        let dest = by("destinations.platform.kratix.io");
        assert_eq!(
            dest.spec.names.short_names.as_deref(),
            Some(&["dest".to_string(), "dests".to_string()][..])
        );
        let wp = by("workplacements.platform.kratix.io");
        assert_eq!(
            wp.spec.names.short_names.as_deref(),
            Some(&["wp".to_string(), "wps".to_string()][..])
        );
        assert_eq!(
            by("healthdefinitions.platform.kratix.io").spec.scope,
            "Namespaced"
        );
        let hr = by("healthrecords.platform.kratix.io");
        assert!(
            hr.spec.versions[0]
                .subresources
                .as_ref()
                .is_none_or(|s| s.status.is_none())
        );
        let hr_schema = serde_json::to_value(&hr.spec.versions[0].schema).unwrap();
        assert!(
            hr_schema
                .pointer("/openAPIV3Schema/properties/data/properties/state")
                .is_some(),
            "{hr_schema}"
        );
        let p = by("promises.platform.kratix.io");
        assert!(
            p.spec.versions[0]
                .subresources
                .as_ref()
                .unwrap()
                .status
                .is_some()
        );
        let cols: Vec<_> = p.spec.versions[0]
            .additional_printer_columns
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            cols,
            ["Status", "Kind", "API Version", "Version", "Message"]
        );
        let schema = serde_json::to_value(&p.spec.versions[0].schema).unwrap();
        let api = schema
            .pointer("/openAPIV3Schema/properties/spec/properties/api")
            .unwrap();
        assert_eq!(api["x-kubernetes-embedded-resource"], true);
        assert_eq!(api["x-kubernetes-preserve-unknown-fields"], true);
        let d = serde_json::to_value(&dest.spec.versions[0].schema).unwrap();
        assert_eq!(
            d.pointer("/openAPIV3Schema/properties/spec/properties/filepath/default/mode")
                .unwrap(),
            "nestedByMetadata"
        );
        let rb = by("resourcebindings.platform.kratix.io");
        assert_eq!(
            rb.spec.versions[0].selectable_fields.as_ref().unwrap()[0].json_path,
            ".spec.version"
        );
    }
}
