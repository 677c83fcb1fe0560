//! PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902, incl. `test`) and
//! strategic merge patch for the built-in kinds (merge keys as declared by the Kubernetes
//! API types' `patchMergeKey`/`patchStrategy` tags; `$patch: delete|replace|merge`,
//! `$retainKeys`, `$deleteFromPrimitiveList/<field>`, `$setElementOrder/<field>`).
//! Server-side apply (`application/apply-patch+yaml`) is handled by `ssa`.

use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::resource::ResourceInfo;

/// Supported patch types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/strategic-merge-patch+json` (built-in kinds only).
    Strategic,
}

impl PatchKind {
    /// Picks the patch type from the Content-Type; 415 for apply patches, unknown
    /// types, and strategic merge patch on custom resources.
    pub fn from_content_type(ct: &str, info: &ResourceInfo) -> Result<PatchKind, ApiError> {
        let ct = ct.split(';').next().unwrap_or("").trim();
        match ct {
            "application/merge-patch+json" => Ok(PatchKind::Merge),
            "application/json-patch+json" => Ok(PatchKind::Json),
            "application/strategic-merge-patch+json" if info.builtin => Ok(PatchKind::Strategic),
            "application/strategic-merge-patch+json" => Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "strategic merge patch is not supported for custom resources ({}); use application/merge-patch+json or application/json-patch+json",
                    crate::error::group_resource(info)
                ),
            )),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                "server-side apply (application/apply-patch+yaml) is not supported by this API server; use client-side apply (kubectl apply without --server-side), a merge patch or a JSON patch",
            )),
            other => Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format ({other}); accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"
                ),
            )),
        }
    }
}

/// Whether a patch document mentions `metadata.finalizers` (a JSON patch op on
/// `/metadata/finalizers...`, or a `finalizers` key, or a strategic-merge directive on it,
/// under `metadata`). Only such a patch may remove finalizers; any other patch keeps them,
/// so replacing `/metadata` wholesale cannot drop a finalizer by accident.
pub fn names_finalizers(kind: PatchKind, patch: &Value) -> bool {
    match kind {
        PatchKind::Json => patch.as_array().is_some_and(|ops| {
            ops.iter().any(|op| {
                op.get("path").and_then(Value::as_str).is_some_and(|p| {
                    p == "/metadata/finalizers" || p.starts_with("/metadata/finalizers/")
                })
            })
        }),
        PatchKind::Merge | PatchKind::Strategic => patch
            .get("metadata")
            .and_then(Value::as_object)
            .is_some_and(|m| {
                m.keys()
                    .any(|k| k == "finalizers" || k.ends_with("/finalizers"))
            }),
    }
}

/// Applies a patch document to `old`, returning the patched object.
pub fn apply(kind: PatchKind, old: &Value, patch: &Value) -> Result<Value, ApiError> {
    let mut doc = old.clone();
    match kind {
        PatchKind::Merge => {
            if !patch.is_object() {
                return Err(ApiError::bad_request("a merge patch must be a JSON object"));
            }
            json_patch::merge(&mut doc, patch);
        }
        PatchKind::Json => {
            let p: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
            json_patch::patch(&mut doc, &p.0).map_err(|e| {
                ApiError::new(
                    422,
                    "Invalid",
                    format!("the server rejected our request due to an error in our request: {e}"),
                )
            })?;
        }
        PatchKind::Strategic => {
            if !patch.is_object() {
                return Err(ApiError::bad_request(
                    "a strategic merge patch must be a JSON object",
                ));
            }
            strategic_merge(&mut doc, patch, "")
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
        }
    }
    Ok(doc)
}

/// Merge strategy of a list field, keyed by the field name (the built-in types use the
/// same key for a field name wherever it appears).
pub(crate) enum ListStrategy {
    /// Merge elements by this key.
    MergeKey(&'static str),
    /// Merge primitive lists as sets.
    MergePrimitive,
    /// Replace the list.
    Replace,
}

pub(crate) fn list_strategy(path: &str, field: &str) -> ListStrategy {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "secrets"
        | "resourceClaims"
        | "readinessGates" => {
            if field == "readinessGates" {
                ListStrategy::MergeKey("conditionType")
            } else {
                ListStrategy::MergeKey("name")
            }
        }
        "ports" if path.ends_with("containers[]") || path.contains("ontainers[]") => {
            ListStrategy::MergeKey("containerPort")
        }
        "ports" => ListStrategy::MergeKey("port"),
        "volumeMounts" => ListStrategy::MergeKey("mountPath"),
        "volumeDevices" => ListStrategy::MergeKey("devicePath"),
        "hostAliases" => ListStrategy::MergeKey("ip"),
        "conditions" => ListStrategy::MergeKey("type"),
        "ownerReferences" => ListStrategy::MergeKey("uid"),
        "finalizers" if path == ".metadata" => ListStrategy::MergePrimitive,
        _ => ListStrategy::Replace,
    }
}

/// Why a strategic merge patch cannot be applied (answered 400). Messages name the
/// path in the object.
#[derive(Debug, thiserror::Error)]
enum MergeError {
    /// `$patch` is not `replace`, `delete` or `merge`.
    #[error("unknown $patch directive {directive:?} at {path}")]
    UnknownDirective { directive: String, path: String },
    /// `$retainKeys` is not a list.
    #[error("$retainKeys at {path} must be a list")]
    RetainKeysNotAList { path: String },
    /// A map in a list merged by key lacks the key.
    #[error("map in list {path}.{field} is missing its merge key {key:?}")]
    MissingMergeKey {
        path: String,
        field: String,
        key: String,
    },
}

/// Strategic merge of `patch` into `doc` (both objects).
fn strategic_merge(doc: &mut Value, patch: &Value, path: &str) -> Result<(), MergeError> {
    let Some(pm) = patch.as_object() else {
        *doc = patch.clone();
        return Ok(());
    };
    match pm.get("$patch").and_then(|p| p.as_str()) {
        Some("replace") => {
            let mut m = pm.clone();
            m.remove("$patch");
            *doc = Value::Object(strip_directives(m));
            return Ok(());
        }
        Some("delete") => {
            *doc = Value::Null;
            return Ok(());
        }
        Some("merge") | None => {}
        Some(other) => {
            return Err(MergeError::UnknownDirective {
                directive: other.to_string(),
                path: path.to_string(),
            });
        }
    }
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let dm = doc.as_object_mut().unwrap();
    if let Some(keys) = pm.get("$retainKeys") {
        let keys: Vec<&str> = keys
            .as_array()
            .ok_or_else(|| MergeError::RetainKeysNotAList {
                path: path.to_string(),
            })?
            .iter()
            .filter_map(|k| k.as_str())
            .collect();
        dm.retain(|k, _| keys.contains(&k.as_str()));
    }
    for (k, pv) in pm {
        if k == "$patch" || k == "$retainKeys" || k.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            let remove: Vec<Value> = pv.as_array().cloned().unwrap_or_default();
            if let Some(list) = dm.get_mut(field).and_then(|l| l.as_array_mut()) {
                list.retain(|x| !remove.contains(x));
            }
            continue;
        }
        if pv.is_null() {
            dm.remove(k);
            continue;
        }
        let child_path = format!("{path}.{k}");
        match pv {
            Value::Object(_) => {
                let entry = dm.entry(k.clone()).or_insert(Value::Null);
                strategic_merge(entry, pv, &child_path)?;
                if entry.is_null() {
                    dm.remove(k);
                }
            }
            Value::Array(items) => {
                let merged = merge_list(dm.get(k), items, path, k)?;
                dm.insert(k.clone(), merged);
            }
            _ => {
                dm.insert(k.clone(), pv.clone());
            }
        }
    }
    Ok(())
}

fn strip_directives(mut m: Map<String, Value>) -> Map<String, Value> {
    m.retain(|k, _| !k.starts_with('$'));
    m
}

fn merge_list(
    old: Option<&Value>,
    items: &[Value],
    path: &str,
    field: &str,
) -> Result<Value, MergeError> {
    let old_items: Vec<Value> = old.and_then(|o| o.as_array()).cloned().unwrap_or_default();
    // `$patch: replace` as a list element replaces the whole list.
    if items
        .iter()
        .any(|i| i.get("$patch").and_then(|p| p.as_str()) == Some("replace"))
    {
        return Ok(Value::Array(
            items
                .iter()
                .filter(|i| i.get("$patch").is_none())
                .cloned()
                .collect(),
        ));
    }
    match list_strategy(path, field) {
        ListStrategy::Replace => Ok(Value::Array(
            items
                .iter()
                .map(|i| match i {
                    Value::Object(m) => Value::Object(strip_directives(m.clone())),
                    o => o.clone(),
                })
                .collect(),
        )),
        ListStrategy::MergePrimitive => {
            let mut out = old_items;
            for i in items {
                if !out.contains(i) {
                    out.push(i.clone());
                }
            }
            Ok(Value::Array(out))
        }
        ListStrategy::MergeKey(key) => {
            let mut out = old_items;
            let child_path = format!("{path}.{field}[]");
            for item in items {
                let Some(kv) = item.get(key) else {
                    if item.is_object() {
                        return Err(MergeError::MissingMergeKey {
                            path: path.to_string(),
                            field: field.to_string(),
                            key: key.to_string(),
                        });
                    }
                    out.push(item.clone());
                    continue;
                };
                let pos = out.iter().position(|o| o.get(key) == Some(kv));
                let delete = item.get("$patch").and_then(|p| p.as_str()) == Some("delete");
                match (pos, delete) {
                    (Some(p), true) => {
                        out.remove(p);
                    }
                    (None, true) => {}
                    (Some(p), false) => strategic_merge(&mut out[p], item, &child_path)?,
                    (None, false) => {
                        let mut fresh = Value::Object(Map::new());
                        strategic_merge(&mut fresh, item, &child_path)?;
                        out.push(fresh);
                    }
                }
            }
            Ok(Value::Array(out))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merges_containers_by_name() {
        let old = json!({"spec": {"containers": [
            {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
            {"name": "b", "image": "b:1"}]}});
        let p = json!({"spec": {"containers": [
            {"name": "a", "image": "a:2", "env": [{"name": "Y", "value": "2"}]},
            {"name": "b", "$patch": "delete"}]}});
        let mut d = old.clone();
        strategic_merge(&mut d, &p, "").unwrap();
        assert_eq!(
            d,
            json!({"spec": {"containers": [{"name": "a", "image": "a:2", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]}]}})
        );
    }

    #[test]
    fn retain_keys_and_null_and_primitive_lists() {
        let old = json!({"metadata": {"finalizers": ["a"], "labels": {"x": "1", "y": "2"}}, "spec": {"strategy": {"type": "Recreate", "rollingUpdate": {"m": 1}}}});
        let p = json!({"metadata": {"finalizers": ["b"], "labels": {"y": null}}, "spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}});
        let mut d = old.clone();
        strategic_merge(&mut d, &p, "").unwrap();
        assert_eq!(
            d,
            json!({"metadata": {"finalizers": ["a", "b"], "labels": {"x": "1"}}, "spec": {"strategy": {"type": "Recreate"}}})
        );
        let p = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}});
        strategic_merge(&mut d, &p, "").unwrap();
        assert_eq!(d["metadata"]["finalizers"], json!(["b"]));
    }

    #[test]
    fn json_patch_test_failure_is_422() {
        let old = json!({"metadata": {"resourceVersion": "1"}});
        let p = json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "2"}]);
        let e = apply(PatchKind::Json, &old, &p).unwrap_err();
        assert_eq!(e.code, 422);
    }
}
