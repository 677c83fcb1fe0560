//! Destination admission and defaulting: a path and a state store reference, a path
//! that stays inside the store, and (beyond Kratix, which only refuses identical paths)
//! a root disjoint from every other Destination's on the same store, since overlapping
//! roots clobber each other's files.

use serde_json::Value;

use super::{cause, normalize};
use crate::resource::Cause;

/// Defaulting for Kratix objects, before validation. A Destination carries the
/// `kratix.io/destination-cleanup` finalizer exactly when its `spec.cleanup` is `all`,
/// from the write that says so: a deletion right after `cleanup` changed then acts on
/// the spec the object had when it was deleted, not on whether the Destination
/// controller had seen the change yet. An object being deleted keeps its finalizers as
/// they are, so the controller can release them.
pub(super) fn default_destination(obj: &mut Value) {
    if obj.pointer("/metadata/deletionTimestamp").is_some() {
        return;
    }
    let cleanup = plinth_api::constants::finalizers::DESTINATION_CLEANUP;
    let want = obj.pointer("/spec/cleanup").and_then(Value::as_str) == Some("all");
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let list = meta
        .entry("finalizers")
        .or_insert_with(|| Value::Array(vec![]));
    let Some(items) = list.as_array_mut() else {
        return;
    };
    let has = items.iter().any(|f| f == cleanup);
    if want && !has {
        items.push(Value::String(cleanup.into()));
    } else if !want && has {
        items.retain(|f| f != cleanup);
    }
    if items.is_empty() {
        meta.remove("finalizers");
    }
}

/// Required fields, a safe path and a root disjoint from `others` (the stored
/// Destinations) on the same store; `store_path` is the store's `spec.path`.
pub(super) fn validate_destination(
    obj: &Value,
    others: &[Value],
    store_path: Option<&str>,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    let path = obj
        .pointer("/spec/path")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = obj
        .pointer("/spec/stateStoreRef/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    let store = obj
        .pointer("/spec/stateStoreRef/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if path.is_empty() {
        causes.push(cause(
            "spec.path",
            "FieldValueRequired",
            "Required value: the Destination's path in its state store (\".\" for the root)",
        ));
    }
    if obj
        .pointer("/spec/stateStoreRef")
        .is_none_or(Value::is_null)
    {
        causes.push(cause(
            "spec.stateStoreRef",
            "FieldValueRequired",
            "Required value",
        ));
    } else if store.is_empty() {
        causes.push(cause(
            "spec.stateStoreRef.name",
            "FieldValueRequired",
            "Required value",
        ));
    }
    let Some(mine) = normalize(path) else {
        causes.push(cause(
            "spec.path",
            "FieldValueInvalid",
            format!("Invalid value: {path:?}: must not contain \"..\""),
        ));
        return causes;
    };
    if !causes.is_empty() {
        return causes;
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let prefix = store_path.and_then(normalize).unwrap_or_default();
    let root = |p: &str| plinth_api::paths::join(&prefix, p);
    let my_root = root(&mine);
    for other in others {
        let oname = other
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if oname == name || other.pointer("/metadata/deletionTimestamp").is_some() {
            continue;
        }
        let same_store = other
            .pointer("/spec/stateStoreRef/kind")
            .and_then(Value::as_str)
            == Some(kind)
            && other
                .pointer("/spec/stateStoreRef/name")
                .and_then(Value::as_str)
                == Some(store);
        if !same_store {
            continue;
        }
        let Some(theirs) = other
            .pointer("/spec/path")
            .and_then(Value::as_str)
            .and_then(normalize)
        else {
            continue;
        };
        let their_root = root(&theirs);
        if plinth_api::paths::overlapping_roots(&my_root, &their_root) {
            causes.push(cause("spec.path", "FieldValueInvalid", format!(
                "Invalid value: {path:?}: its root {:?} in {kind}/{store} overlaps Destination {oname:?} (root {:?}); Destinations on one state store need disjoint paths",
                if my_root.is_empty() { "/" } else { &my_root },
                if their_root.is_empty() { "/" } else { &their_root },
            )));
        }
    }
    causes
}
