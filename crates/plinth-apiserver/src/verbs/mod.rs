//! The resource verbs: get and list (`read`), create, update and patch (with
//! server-side apply), delete and deletecollection, with the object lifecycle rules of
//! the Kubernetes API conventions (generation, finalizers, deletionTimestamp, status
//! subresource, optimistic concurrency). Storage errors reach clients through one
//! mapping, [`store_error`].

mod create;
mod delete;
mod read;
pub(crate) mod scale;
mod update;

pub(crate) use create::{create, namespace_defaults};
pub(crate) use delete::{DeleteOptions, delete, delete_collection};
pub(crate) use read::list;
pub(crate) use update::{UpdateMode, apply_request, modify, modify_as, patch, update};

use serde_json::{Value, json};

use crate::app::{Query, meta, meta_mut, meta_str};
use crate::error::{ApiError, group_resource};
use crate::resource::ResourceInfo;
use crate::ssa::Owner;
use crate::store::{StoreError, WriteOp, WriteOutcome};

/// The message of a 409 for a write against a stale resourceVersion (Kubernetes' text).
pub(super) const MODIFIED: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// The one mapping of storage errors to API errors for writes of object `name`:
/// AlreadyExists → 409 AlreadyExists, Conflict → 409 Conflict, NotFound → 404, anything
/// else → 500.
pub(super) fn store_error(info: &ResourceInfo, name: &str, e: StoreError) -> ApiError {
    match e {
        StoreError::AlreadyExists => ApiError::already_exists(info, name),
        StoreError::Conflict { .. } => ApiError::conflict(info, name, MODIFIED),
        StoreError::NotFound => ApiError::not_found(&info.group, &info.plural, name),
        e => e.into(),
    }
}

/// Runs one storage write of object `name` and returns the object as stored (or as last
/// stored, for a delete). `Ok(None)` when the write lost a resourceVersion race and
/// `retry_conflict` says the caller will read again and retry; errors otherwise go
/// through [`store_error`].
pub(super) async fn write(
    app: &crate::app::App,
    info: &ResourceInfo,
    name: &str,
    op: WriteOp,
    retry_conflict: bool,
) -> Result<Option<Value>, ApiError> {
    match app.store.write(op).await {
        Ok(WriteOutcome::Stored(v)) | Ok(WriteOutcome::Deleted(v)) => Ok(Some(v)),
        Ok(WriteOutcome::Removed(_)) => Err(ApiError::internal("unexpected storage outcome")),
        Err(StoreError::Conflict { .. }) if retry_conflict => Ok(None),
        Err(e) => Err(store_error(info, name, e)),
    }
}

/// Decodes the body of a create or update of `info`'s kind; a body that does not decode is
/// answered as kube-apiserver does: `the object provided is unrecognized (must be of type
/// <Kind>): <cause>` (kubectl and clients match on that text).
pub(crate) fn decode_object(
    info: &ResourceInfo,
    content_type: &str,
    bytes: &[u8],
) -> Result<Value, ApiError> {
    decode_body(content_type, bytes).map_err(|e| {
        if e.code == 400 {
            ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {}): {}",
                info.kind, e.message
            ))
        } else {
            e
        }
    })
}

/// Decodes a JSON or YAML request body into an object.
pub(crate) fn decode_body(content_type: &str, bytes: &[u8]) -> Result<Value, ApiError> {
    let ct = content_type.split(';').next().unwrap_or("").trim();
    let v: Value = if ct.ends_with("yaml") {
        let s = std::str::from_utf8(bytes)
            .map_err(|e| ApiError::bad_request(format!("request body is not UTF-8: {e}")))?;
        serde_saphyr::from_str(s)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML request body: {e}")))?
    } else if ct == "application/vnd.kubernetes.protobuf" {
        crate::protobuf::decode(bytes).map_err(|e| {
            if matches!(e, crate::protobuf::ProtobufError::UnsupportedKind { .. }) {
                ApiError::new(415, "UnsupportedMediaType", e.to_string())
            } else {
                ApiError::bad_request(format!("error decoding protobuf request body: {e}"))
            }
        })?
    } else if ct.is_empty() || ct.ends_with("json") || ct == "*/*" {
        serde_json::from_slice(bytes)
            .map_err(|e| ApiError::bad_request(format!("error decoding JSON request body: {e}")))?
    } else {
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format ({ct}); accepted media types include: application/json, application/yaml"
            ),
        ));
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON or YAML object",
        ));
    }
    Ok(v)
}

/// `fieldValidation=Strict|Warn|Ignore` (Kubernetes server-side field validation):
/// Strict answers 400 for fields the schema does not know; Warn returns them as
/// `Warning` headers; Ignore (and no parameter) prunes silently.
pub(crate) fn field_validation(
    info: &ResourceInfo,
    q: &Query,
    obj: &Value,
) -> Result<Vec<String>, ApiError> {
    let mode = q
        .get("fieldValidation")
        .map(String::as_str)
        .unwrap_or("Ignore");
    if mode != "Strict" && mode != "Warn" {
        return Ok(Vec::new());
    }
    let unknown = crate::schema::unknown_fields(info, obj);
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    if mode == "Strict" {
        return Err(ApiError::bad_request(crate::schema::strict_decoding_error(
            &unknown,
        )));
    }
    Ok(unknown
        .iter()
        .map(|p| format!("299 - \"unknown field \\\"{p}\\\"\""))
        .collect())
}

pub(super) fn check_type(info: &ResourceInfo, obj: &mut Value) -> Result<(), ApiError> {
    let av = info.api_version();
    match obj.get("apiVersion").and_then(|v| v.as_str()) {
        Some(a) if a != av => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({a}) does not match the expected API version ({av})"
            )));
        }
        _ => {}
    }
    match obj.get("kind").and_then(|v| v.as_str()) {
        Some(k) if k != info.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({}) for {}",
                info.kind,
                group_resource(info)
            )));
        }
        _ => {}
    }
    obj["apiVersion"] = json!(av);
    obj["kind"] = json!(info.kind);
    if obj
        .get("metadata")
        .is_some_and(|m| !m.is_object() && !m.is_null())
    {
        return Err(ApiError::bad_request("metadata must be an object"));
    }
    Ok(())
}

pub(super) fn check_namespace_field(
    info: &ResourceInfo,
    ns: Option<&str>,
    obj: &mut Value,
) -> Result<(), ApiError> {
    if info.namespaced {
        let url_ns = ns.unwrap_or_default();
        if let Some(bns) = meta_str(obj, "namespace")
            && bns != url_ns
        {
            return Err(ApiError::bad_request(format!(
                "the namespace of the provided object ({bns}) does not match the namespace sent on the request ({url_ns})"
            )));
        }
        meta_mut(obj).insert("namespace".into(), json!(url_ns));
    } else {
        meta_mut(obj).remove("namespace");
    }
    Ok(())
}

/// Drops empty metadata collections, as Kubernetes' `omitempty` serialization does.
pub(super) fn normalize_metadata(obj: &mut Value) {
    if let Some(m) = obj.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        for k in ["labels", "annotations", "finalizers", "ownerReferences"] {
            let empty = match m.get(k) {
                Some(Value::Null) => true,
                Some(Value::Array(a)) => a.is_empty(),
                Some(Value::Object(o)) => o.is_empty(),
                _ => false,
            };
            if empty {
                m.remove(k);
            }
        }
    }
}

/// Checks that ObjectMeta's fields have their types (a body that does not decode is a 400
/// in kube-apiserver's words: `Pod in version "v1" cannot be handled as a Pod: json: cannot
/// unmarshal string into Go struct field ObjectMeta.metadata.labels of type
/// map[string]string`), then the labels/annotations/finalizers rules.
pub(super) fn check_metadata(info: &ResourceInfo, obj: &Value) -> Result<(), ApiError> {
    if let Some(e) = crate::meta_decode::meta_type_error(&info.kind, obj) {
        return Err(crate::meta_decode::undecodable_body(info, &e.json));
    }
    let name = meta_str(obj, "name").unwrap_or_default().to_string();
    let causes = crate::validation::object_meta_causes(meta(obj));
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(info, &name, causes))
    }
}

/// Checks an object again after mutating admission webhooks patched it: its apiVersion,
/// kind, namespace and name stay those of the request (400 otherwise) and its metadata
/// keeps the ObjectMeta rules (422).
pub(super) fn check_mutated(
    info: &ResourceInfo,
    ns: Option<&str>,
    name: &str,
    obj: &mut Value,
) -> Result<(), ApiError> {
    check_type(info, obj)?;
    check_namespace_field(info, ns, obj)?;
    if meta_str(obj, "name") != Some(name) {
        return Err(ApiError::bad_request(format!(
            "admission webhooks may not change metadata.name (from {name:?} to {:?})",
            meta_str(obj, "name").unwrap_or_default()
        )));
    }
    normalize_metadata(obj);
    check_metadata(info, obj)
}

/// Sets `managedFields` on a proposed object: the ones server-side apply computed, or
/// the ownership of a non-apply write.
pub(super) fn record_fields(
    info: &ResourceInfo,
    old: Option<&Value>,
    new: &mut Value,
    owner: &Owner,
    applied: Option<Value>,
) {
    match (owner, applied) {
        (Owner::Apply, Some(mf)) => {
            meta_mut(new).insert("managedFields".into(), mf);
        }
        _ => crate::ssa::record_update(info, old, new, owner),
    }
}

/// Whether a PATCH body is a server-side apply configuration.
pub(crate) fn is_apply(content_type: &str) -> bool {
    content_type.split(';').next().unwrap_or("").trim() == "application/apply-patch+yaml"
}
