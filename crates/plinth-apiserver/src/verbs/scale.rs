//! The `scale` subresource (`autoscaling/v1` Scale) of Deployments, ReplicaSets,
//! StatefulSets, ReplicationControllers and CRDs that declare `subresources.scale`:
//! GET reads the replica counts and selector out of the parent object; PUT and PATCH
//! (merge, JSON, strategic) change only the parent's desired replicas, recorded in its
//! managedFields under the request's field manager, as on Kubernetes. So `kubectl scale`
//! and autoscalers work, and a server-side applier that does not declare `replicas` never
//! takes them back.

use serde_json::{Map, Value, json};

use crate::app::{App, RequestContext, cause, get_object, meta, meta_mut, meta_str};
use crate::error::ApiError;
use crate::registry::ScalePaths;
use crate::resource::ResourceInfo;

/// The parent object at `name` as a Scale.
pub(crate) async fn get(
    app: &App,
    info: &ResourceInfo,
    paths: &ScalePaths,
    ns: Option<&str>,
    name: &str,
) -> Result<Value, ApiError> {
    let obj = get_object(app, info, ns, name).await?;
    Ok(to_scale(info, paths, &obj))
}

/// The body of a write to the `scale` subresource.
pub(crate) enum ScaleWrite<'a> {
    /// PUT: a whole Scale.
    Put(&'a [u8]),
    /// PATCH: a patch of the current Scale, of the request's content type.
    Patch(&'a [u8]),
}

/// PUT of a Scale, or PATCH of the current Scale.
pub(crate) async fn write(
    app: &App,
    info: &ResourceInfo,
    paths: &ScalePaths,
    ns: Option<&str>,
    name: &str,
    cx: &RequestContext,
    body: ScaleWrite<'_>,
) -> Result<Value, ApiError> {
    let scale = match body {
        ScaleWrite::Patch(body) => {
            let kind = crate::patch::PatchKind::from_content_type(&cx.content_type, info)?;
            let doc: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch body: {e}")))?;
            let current = get(app, info, paths, ns, name).await?;
            let mut patched = crate::patch::apply(kind, &current, &doc)?;
            // A patch result carries the stored resourceVersion; only the patch's own is a
            // precondition.
            if doc
                .pointer("/metadata/resourceVersion")
                .is_none_or(Value::is_null)
            {
                meta_mut(&mut patched).remove("resourceVersion");
            }
            patched
        }
        ScaleWrite::Put(body) => super::decode_body(&cx.content_type, body)?,
    };
    let replicas = desired_replicas(info, name, &scale)?;
    let wanted_rv = meta_str(&scale, "resourceVersion").map(String::from);
    let mode = super::UpdateMode {
        dry_run: cx.dry_run(),
        explicit_rv: wanted_rv.is_some(),
        ..super::UpdateMode::by(&cx.owner)
    };
    let updated = super::modify_as(app, info, ns, name, mode, |old| {
        let mut new = old.clone();
        set_path(&mut new, &paths.spec_replicas, json!(replicas));
        if let Some(rv) = &wanted_rv {
            meta_mut(&mut new).insert("resourceVersion".into(), json!(rv));
        }
        Ok(new)
    })
    .await?;
    Ok(to_scale(info, paths, &updated))
}

/// `spec.replicas` of a Scale body: a non-negative integer (422 naming the field).
fn desired_replicas(info: &ResourceInfo, name: &str, scale: &Value) -> Result<i64, ApiError> {
    match scale.pointer("/spec/replicas") {
        Some(Value::Number(n)) if n.as_i64().is_some_and(|r| r >= 0) => Ok(n.as_i64().unwrap_or(0)),
        None | Some(Value::Null) => Ok(0),
        Some(v) => Err(ApiError::invalid(
            info,
            name,
            vec![cause(
                "FieldValueInvalid",
                "spec.replicas",
                format!("Invalid value: {v}: must be a non-negative integer"),
            )],
        )),
    }
}

/// The Scale view of a parent object.
fn to_scale(info: &ResourceInfo, paths: &ScalePaths, obj: &Value) -> Value {
    let m = meta(obj);
    let mut metadata = Map::new();
    for k in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = m.get(k) {
            metadata.insert(k.into(), v.clone());
        }
    }
    let int = |p: &str| get_path(obj, p).and_then(Value::as_i64).unwrap_or(0);
    let mut status = json!({"replicas": int(&paths.status_replicas)});
    let selector = paths
        .label_selector
        .as_deref()
        .and_then(|p| get_path(obj, p))
        .map(|v| {
            if info.builtin {
                selector_string(v)
            } else {
                v.as_str().unwrap_or_default().to_string()
            }
        });
    if let Some(s) = selector.filter(|s| !s.is_empty()) {
        status["selector"] = json!(s);
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": int(&paths.spec_replicas)},
        "status": status,
    })
}

/// A LabelSelector (`matchLabels`, `matchExpressions`) or a plain label map in
/// label-selector syntax: `a=b,c in (d,e),!f`.
fn selector_string(v: &Value) -> String {
    let is_selector = v.get("matchLabels").is_some() || v.get("matchExpressions").is_some();
    let labels = if is_selector { &v["matchLabels"] } else { v };
    let mut parts: Vec<String> = labels
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    for e in v["matchExpressions"].as_array().into_iter().flatten() {
        let key = e["key"].as_str().unwrap_or_default();
        let values = crate::validation::str_items(&e["values"]);
        parts.push(match e["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "DoesNotExist" => format!("!{key}"),
            _ => key.to_string(),
        });
    }
    parts.sort();
    parts.join(",")
}

/// The value at a `.a.b` path.
fn get_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .filter(|s| !s.is_empty())
        .try_fold(obj, |v, k| v.get(k))
}

/// Sets the value at a `.a.b` path, creating objects on the way.
fn set_path(obj: &mut Value, path: &str, value: Value) {
    let keys: Vec<&str> = path.split('.').filter(|s| !s.is_empty()).collect();
    let mut cur = obj;
    for k in &keys[..keys.len().saturating_sub(1)] {
        if !cur.get(*k).is_some_and(Value::is_object) {
            cur[*k] = json!({});
        }
        cur = &mut cur[*k];
    }
    if let Some(last) = keys.last() {
        cur[*last] = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_render_in_label_selector_syntax() {
        let s = json!({"matchLabels": {"app": "web"}, "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["a", "b"]},
            {"key": "old", "operator": "DoesNotExist"}]});
        assert_eq!(selector_string(&s), "!old,app=web,tier in (a,b)");
        assert_eq!(selector_string(&json!({"app": "web"})), "app=web");
    }

    #[test]
    fn paths_read_and_write_nested_fields() {
        let mut o = json!({"spec": {}});
        set_path(&mut o, ".spec.replicas", json!(3));
        set_path(&mut o, ".spec.deep.count", json!(1));
        assert_eq!(get_path(&o, ".spec.replicas"), Some(&json!(3)));
        assert_eq!(o["spec"]["deep"]["count"], 1);
        assert_eq!(get_path(&o, ".status.replicas"), None);
    }
}
