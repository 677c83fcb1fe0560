//! Admission for Kratix kinds (`platform.kratix.io`): the checks Kratix's validating
//! webhooks make, answered as 422 `Invalid` with field
//! causes at apply time, so a bad Promise never reaches the controllers.
//!
//! Beyond Kratix: a Destination whose effective root overlaps another Destination's on
//! the same state store is rejected (Kratix only rejects identical paths; overlapping
//! roots clobber each other's files).

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

use crate::app::App;
use crate::error::ApiError;
use crate::registry::rkey;
use crate::resource::{Cause, ResourceInfo};
use crate::store::ObjKey;

/// Kratix's floor for every user-supplied interval (`MinReconciliationInterval`).
const MIN_INTERVAL: Duration = Duration::from_secs(60);
/// Longest pipeline ID `<promise>-<type>-<action>-<pipeline>` (webhook rule 3).
const MAX_PIPELINE_ID: usize = 60;

fn cause(field: &str, reason: &str, message: impl Into<String>) -> Cause {
    Cause {
        reason: reason.into(),
        message: message.into(),
        field: field.into(),
    }
}

/// Validates a Kratix object of `kind` on create (`old` None) or update. `others` are the
/// stored objects of the same kind (used for Destination overlap checks); `store_path`
/// resolves a Destination's state store to its `spec.path` (None when it does not exist).
pub fn validate(
    kind: &str,
    obj: &Value,
    old: Option<&Value>,
    others: &[Value],
    store_path: &dyn Fn(&str, &str) -> Option<String>,
) -> Result<(), Vec<Cause>> {
    let causes = match kind {
        "Promise" => validate_promise(obj, old),
        "Destination" => validate_destination(obj, others, store_path),
        "BucketStateStore" => validate_bucket_store(obj),
        "PromiseRelease" => {
            let url = obj
                .pointer("/spec/sourceRef/url")
                .and_then(Value::as_str)
                .unwrap_or("");
            if url.is_empty() {
                vec![cause(
                    "spec.sourceRef.url",
                    "FieldValueRequired",
                    "Required value",
                )]
            } else {
                vec![]
            }
        }
        _ => vec![],
    };
    if causes.is_empty() {
        Ok(())
    } else {
        Err(causes)
    }
}

/// The admission step for a Kratix object about to be stored: reads what [`validate`]
/// needs from the store and answers 422 `Invalid` with the causes.
pub(crate) async fn admit(
    app: &App,
    info: &ResourceInfo,
    obj: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mut others = Vec::new();
    let mut stores: Vec<(String, String, Option<String>)> = Vec::new();
    if info.kind == "Destination" {
        let store_err =
            |e: crate::store::StoreError| ApiError::internal(format!("reading Destinations: {e}"));
        others = app
            .store
            .list(
                rkey(&info.group, &info.plural),
                None,
                None,
                0,
                Box::new(|_| true),
            )
            .await
            .map_err(store_err)?
            .items;
        for (kind, plural) in [
            ("GitStateStore", "gitstatestores"),
            ("BucketStateStore", "bucketstatestores"),
        ] {
            let sname = obj
                .pointer("/spec/stateStoreRef/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let key = ObjKey {
                rkey: rkey(&info.group, plural),
                ns: String::new(),
                name: sname.clone(),
            };
            let found = app.store.get(key).await.map_err(store_err)?;
            stores.push((
                kind.to_string(),
                sname,
                found.and_then(|s| {
                    s.pointer("/spec/path")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                }),
            ));
        }
    }
    let lookup = |kind: &str, name: &str| {
        stores
            .iter()
            .find(|(k, n, _)| k == kind && n == name)
            .and_then(|(_, _, p)| p.clone())
    };
    validate(&info.kind, obj, old, &others, &lookup)
        .map_err(|causes| ApiError::invalid(info, &name, causes))
}

fn validate_promise(obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let mut causes = Vec::new();
    for wtype in ["promise", "resource"] {
        for action in ["configure", "delete"] {
            if let Some(list) = spec
                .pointer(&format!("/workflows/{wtype}/{action}"))
                .and_then(Value::as_array)
            {
                causes.extend(pipeline_list_causes(name, wtype, action, list));
            }
        }
    }
    // The Promise controller reads `spec` typed; refuse what it could not read.
    if !spec.is_null()
        && let Err(e) = plinth_api::decode::typed::<plinth_api::PromiseSpec>(&spec)
        && !causes
            .iter()
            .any(|c| c.field.starts_with(&e.field_under("spec")))
    {
        causes.push(cause(
            &e.field_under("spec"),
            "FieldValueInvalid",
            format!("Invalid value: {}", e.message),
        ));
    }
    causes.extend(promise_interval_causes(obj, &spec, old));
    let api = promise_api(&spec);
    if let Some(api) = api {
        causes.extend(api_causes(name, api));
    }
    if let Some(old) = old {
        causes.extend(api_change_causes(promise_api(&old["spec"]), api));
    }
    causes
}

/// A Promise's `spec.api`, unless absent, `null` or `{}`.
fn promise_api(spec: &Value) -> Option<&Value> {
    spec.get("api")
        .filter(|a| !a.is_null() && a.as_object().is_none_or(|m| !m.is_empty()))
}

/// The pipelines of `spec.workflows.<wtype>.<action>`: Kratix's kind, a name unique
/// within the list, a pipeline ID of at most [`MAX_PIPELINE_ID`] characters, at least
/// one container, and containers valid as a Pod's.
fn pipeline_list_causes(promise: &str, wtype: &str, action: &str, list: &[Value]) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, p) in list.iter().enumerate() {
        let field = format!("spec.workflows.{wtype}.{action}[{i}]");
        if p["apiVersion"] != "platform.kratix.io/v1alpha1" || p["kind"] != "Pipeline" {
            causes.push(cause(&field, "FieldValueInvalid", format!(
                "Invalid value: unsupported pipeline {}/{}: must be apiVersion platform.kratix.io/v1alpha1, kind Pipeline",
                p["apiVersion"].as_str().unwrap_or(""), p["kind"].as_str().unwrap_or("")
            )));
            continue;
        }
        let pname = p
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let name_field = format!("{field}.metadata.name");
        if pname.is_empty() {
            causes.push(cause(&name_field, "FieldValueRequired", "Required value"));
            continue;
        }
        if !seen.insert(pname.to_string()) {
            causes.push(cause(&name_field, "FieldValueDuplicate", format!("Duplicate value: {pname:?}: pipeline names must be unique within {wtype}.{action}")));
        }
        let id = format!("{promise}-{wtype}-{action}-{pname}");
        if id.len() > MAX_PIPELINE_ID {
            causes.push(cause(&name_field, "FieldValueTooLong", format!(
                "Too long: the pipeline ID {id:?} is {} characters; at most {MAX_PIPELINE_ID} are allowed (shorten the Promise or pipeline name)", id.len()
            )));
        }
        // Decode it exactly as the controllers will, so a wrong type (`command: "echo
        // hi"`) is refused here with its path instead of failing every reconcile. A
        // value of the wrong type is named as such, not also as missing by the checks
        // below (`image: [busybox]` is not a "Required value").
        let type_error = plinth_api::Pipeline::decode(p)
            .err()
            .map(|e| (e.field_under(&field), e.message));
        let under = |inner: &str, outer: &str| {
            inner == outer
                || inner
                    .strip_prefix(outer)
                    .is_some_and(|rest| rest.starts_with(['.', '[']))
        };
        // Only a value of the wrong type hides the checks of its field (an unknown field,
        // a typo, leaves the real one missing).
        let mistyped = |f: &str| {
            type_error.as_ref().is_some_and(|(at, message)| {
                message.starts_with("invalid type") && (under(f, at) || under(at, f))
            })
        };
        let containers = format!("{field}.spec.containers");
        if p.pointer("/spec/containers")
            .and_then(Value::as_array)
            .is_none_or(|c| c.is_empty())
            && !mistyped(&containers)
        {
            causes.push(cause(
                &containers,
                "FieldValueRequired",
                "Required value: a pipeline needs at least one container",
            ));
        }
        let pod: Vec<Cause> = pipeline_pod_causes(p, &field, action)
            .into_iter()
            .filter(|c| !mistyped(&c.field))
            .collect();
        if let Some((at, message)) = &type_error {
            causes.push(cause(
                at,
                "FieldValueInvalid",
                format!("Invalid value: {message}"),
            ));
        }
        causes.extend(pod);
    }
    causes
}

/// Intervals of at least one minute: `spec.workflows.config.reconciliationInterval`,
/// and the reconciliation-interval annotation when it is new or changed.
fn promise_interval_causes(obj: &Value, spec: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(v) = spec
        .pointer("/workflows/config/reconciliationInterval")
        .and_then(Value::as_str)
        && let Some(c) = interval_cause("spec.workflows.config.reconciliationInterval", v)
    {
        causes.push(c);
    }
    let annotation = |o: &Value| {
        o.pointer("/metadata/annotations/kratix.io~1reconciliation-interval")
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    if let Some(v) = annotation(obj)
        && old.is_none_or(|o| annotation(o).as_deref() != Some(v.as_str()))
        && let Some(c) = interval_cause(
            "metadata.annotations[kratix.io/reconciliation-interval]",
            &v,
        )
    {
        causes.push(c);
    }
    causes
}

/// The API: a valid, namespaced CRD that builds into a servable request CRD.
fn api_causes(promise: &str, api: &Value) -> Vec<Cause> {
    if let Err(e) = plinth_api::crds::validate_api_crd(api) {
        return vec![cause(
            "spec.api",
            "FieldValueInvalid",
            format!("Invalid value: {e}"),
        )];
    }
    let mut causes = Vec::new();
    if api.pointer("/spec/scope").and_then(Value::as_str) != Some("Namespaced") {
        causes.push(cause(
            "spec.api.spec.scope",
            "FieldValueNotSupported",
            "Unsupported value: a Promise API must be Namespaced",
        ));
    }
    match plinth_api::crds::build_request_crd(promise, api) {
        Ok(crd) => {
            causes.extend(crate::reserved::crd_causes(&crd, "spec.api."));
            if let Err(cs) = crate::schema::check_crd(&crd) {
                causes.extend(cs.into_iter().map(|c| Cause {
                    field: format!("spec.api.{}", c.field),
                    ..c
                }));
            }
        }
        Err(e) => causes.push(cause(
            "spec.api",
            "FieldValueInvalid",
            format!("Invalid value: {e}"),
        )),
    }
    causes
}

/// An installed API cannot be removed, and its name, group and names do not change.
fn api_change_causes(old_api: Option<&Value>, api: Option<&Value>) -> Vec<Cause> {
    match (old_api, api) {
        (Some(_), None) => vec![cause(
            "spec.api",
            "FieldValueForbidden",
            "Forbidden: the API of a Promise cannot be removed",
        )],
        (Some(o), Some(n)) => [
            ("spec.api.metadata.name", "/metadata/name"),
            ("spec.api.spec.group", "/spec/group"),
            ("spec.api.spec.names", "/spec/names"),
        ]
        .into_iter()
        .filter(|(_, ptr)| o.pointer(ptr) != n.pointer(ptr))
        .map(|(field, _)| {
            cause(
                field,
                "FieldValueForbidden",
                "Forbidden: field is immutable once the Promise is installed",
            )
        })
        .collect(),
        _ => vec![],
    }
}

/// A pipeline's containers and volumes checked as Kubernetes will check its Pod, so a
/// typo (`imag:`) is refused at apply time instead of failing the Job over and over.
fn pipeline_pod_causes(pipeline: &Value, field: &str, action: &str) -> Vec<Cause> {
    use plinth_api::constants::pipeline_pod;
    let mut volumes = pipeline_pod::VOLUMES.to_vec();
    if action == "configure" {
        volumes.push(pipeline_pod::SCHEDULING_VOLUME);
    }
    let frame = crate::validation::PodFrame {
        containers: &pipeline_pod::ADAPTER_CONTAINERS,
        volumes: &volumes,
        mount_paths: &pipeline_pod::MOUNT_PATHS,
    };
    let spec = pipeline.get("spec").cloned().unwrap_or_default();
    crate::validation::pipeline_pod_causes(&spec, field, &frame)
}

fn interval_cause(field: &str, value: &str) -> Option<Cause> {
    match plinth_api::duration::parse_go_duration(value).ok() {
        None => Some(cause(
            field,
            "FieldValueInvalid",
            format!("Invalid value: {value:?}: not a duration such as \"10m\" or \"1h30m\""),
        )),
        Some(d) if d < MIN_INTERVAL => Some(cause(
            field,
            "FieldValueInvalid",
            format!("Invalid value: {value:?}: must be at least 1m"),
        )),
        _ => None,
    }
}

fn normalize(path: &str) -> Option<String> {
    plinth_api::paths::normalize(path).ok()
}

/// Defaulting for Kratix objects, before validation. A Destination carries the
/// `kratix.io/destination-cleanup` finalizer exactly when its `spec.cleanup` is `all`,
/// from the write that says so: a deletion right after `cleanup` changed then acts on
/// the spec the object had when it was deleted, not on whether the Destination
/// controller had seen the change yet. An object being deleted keeps its finalizers as
/// they are, so the controller can release them.
pub(crate) fn default(kind: &str, obj: &mut Value) {
    if kind != "Destination" || obj.pointer("/metadata/deletionTimestamp").is_some() {
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

fn validate_destination(
    obj: &Value,
    others: &[Value],
    store_path: &dyn Fn(&str, &str) -> Option<String>,
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
    let prefix = store_path(kind, store)
        .and_then(|p| normalize(&p))
        .unwrap_or_default();
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

fn validate_bucket_store(obj: &Value) -> Vec<Cause> {
    let auth = obj
        .pointer("/spec/authMethod")
        .and_then(Value::as_str)
        .unwrap_or("accessKey");
    if auth != "accessKey" {
        return vec![];
    }
    let mut causes = Vec::new();
    for (field, ptr) in [
        ("spec.secretRef.name", "/spec/secretRef/name"),
        ("spec.secretRef.namespace", "/spec/secretRef/namespace"),
    ] {
        if obj
            .pointer(ptr)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            causes.push(cause(field, "FieldValueRequired", "Required value: authMethod accessKey needs a Secret with accessKeyID and secretAccessKey"));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn none(_: &str, _: &str) -> Option<String> {
        None
    }

    fn promise(pipelines: Value) -> Value {
        json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Promise", "metadata": {"name": "redis"},
               "spec": {"workflows": {"resource": {"configure": pipelines}}}})
    }

    fn pipe(name: &str) -> Value {
        json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Pipeline", "metadata": {"name": name}, "spec": {"containers": [{"name": "a", "image": "busybox"}]}})
    }

    #[test]
    fn pipelines_and_spec_are_decoded_as_the_controllers_read_them() {
        let mut p = pipe("a");
        p["spec"]["containers"][0]["command"] = json!("echo hi");
        let err = validate("Promise", &promise(json!([p])), None, &[], &none).unwrap_err();
        assert_eq!(err.len(), 1, "{err:?}");
        assert_eq!(
            err[0].field,
            "spec.workflows.resource.configure[0].spec.containers[0].command"
        );
        assert!(err[0].message.contains("expected a sequence"), "{err:?}");
        let mut obj = promise(json!([pipe("a")]));
        obj["spec"]["destinationSelectors"] = json!([{"matchLabels": "env=dev"}]);
        let err = validate("Promise", &obj, None, &[], &none).unwrap_err();
        assert_eq!(
            err[0].field, "spec.destinationSelectors[0].matchLabels",
            "{err:?}"
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_is_named_as_such_not_as_missing() {
        let at = "spec.workflows.resource.configure[0].spec.containers";
        for (field, value, expected) in [
            ("image", json!(["busybox"]), "expected a string"),
            ("image", json!(5), "expected a string"),
            ("name", json!(5), "expected a string"),
            (
                "resources",
                json!(5),
                "expected a mapping (ResourceRequirements)",
            ),
        ] {
            let mut p = pipe("a");
            p["spec"]["containers"][0][field] = value.clone();
            let err = validate("Promise", &promise(json!([p])), None, &[], &none).unwrap_err();
            assert_eq!(err.len(), 1, "{field}={value}: {err:?}");
            assert_eq!(err[0].field, format!("{at}[0].{field}"), "{err:?}");
            assert!(
                err[0].message.contains(expected),
                "{field}={value}: {err:?}"
            );
            assert!(!err[0].message.contains("Required"), "{err:?}");
        }
        let mut p = pipe("a");
        p["spec"]["containers"] = json!("x");
        let err = validate("Promise", &promise(json!([p])), None, &[], &none).unwrap_err();
        assert_eq!(
            err.len(),
            1,
            "not also 'needs at least one container': {err:?}"
        );
        assert_eq!(err[0].field, at);
    }

    #[test]
    fn duplicate_and_long_pipeline_names_are_rejected() {
        let err = validate(
            "Promise",
            &promise(json!([pipe("a"), pipe("a")])),
            None,
            &[],
            &none,
        )
        .unwrap_err();
        assert_eq!(err[0].reason, "FieldValueDuplicate");
        assert_eq!(
            err[0].field,
            "spec.workflows.resource.configure[1].metadata.name"
        );
        let long = "x".repeat(50);
        let err =
            validate("Promise", &promise(json!([pipe(&long)])), None, &[], &none).unwrap_err();
        assert_eq!(err[0].reason, "FieldValueTooLong");
        assert!(
            validate(
                "Promise",
                &promise(json!([pipe("a"), pipe("b")])),
                None,
                &[],
                &none
            )
            .is_ok()
        );
    }

    #[test]
    fn short_intervals_are_rejected() {
        let mut p = promise(json!([]));
        p["spec"]["workflows"]["config"] = json!({"reconciliationInterval": "30s"});
        let err = validate("Promise", &p, None, &[], &none).unwrap_err();
        assert_eq!(err[0].field, "spec.workflows.config.reconciliationInterval");
        p["spec"]["workflows"]["config"] = json!({"reconciliationInterval": "2m"});
        assert!(validate("Promise", &p, None, &[], &none).is_ok());
    }

    #[test]
    fn api_names_are_immutable_and_cluster_scope_rejected() {
        let api = |kind: &str, scope: &str| {
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.test"},
            "spec": {"group": "example.test", "scope": scope, "names": {"kind": kind, "plural": "widgets", "singular": "widget"},
                     "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]}})
        };
        let mut old = promise(json!([]));
        old["spec"]["api"] = api("Widget", "Namespaced");
        assert!(validate("Promise", &old, None, &[], &none).is_ok());
        let mut new = old.clone();
        new["spec"]["api"] = api("Gadget", "Namespaced");
        let err = validate("Promise", &new, Some(&old), &[], &none).unwrap_err();
        assert!(
            err.iter()
                .any(|c| c.field == "spec.api.spec.names" && c.reason == "FieldValueForbidden")
        );
        let mut cluster = promise(json!([]));
        cluster["spec"]["api"] = api("Widget", "Cluster");
        let err = validate("Promise", &cluster, None, &[], &none).unwrap_err();
        assert!(err.iter().any(|c| c.field == "spec.api.spec.scope"));
        let mut removed = old.clone();
        removed["spec"].as_object_mut().unwrap().remove("api");
        assert!(validate("Promise", &removed, Some(&old), &[], &none).is_err());
    }

    #[test]
    fn destinations_need_path_and_store_and_disjoint_roots() {
        let dest = |name: &str, path: &str| json!({"metadata": {"name": name}, "spec": {"path": path, "stateStoreRef": {"kind": "GitStateStore", "name": "s"}}});
        let err = validate(
            "Destination",
            &json!({"metadata": {"name": "d"}, "spec": {}}),
            None,
            &[],
            &none,
        )
        .unwrap_err();
        assert_eq!(
            err.iter().map(|c| c.field.as_str()).collect::<Vec<_>>(),
            ["spec.path", "spec.stateStoreRef"]
        );
        let others = vec![dest("a", "clusters/dev")];
        assert!(
            validate(
                "Destination",
                &dest("b", "clusters/dev/team"),
                None,
                &others,
                &none
            )
            .is_err()
        );
        assert!(
            validate(
                "Destination",
                &dest("b", "/clusters//dev/"),
                None,
                &others,
                &none
            )
            .is_err()
        );
        assert!(validate("Destination", &dest("b", "."), None, &others, &none).is_err());
        assert!(
            validate(
                "Destination",
                &dest("b", "clusters/devtest"),
                None,
                &others,
                &none
            )
            .is_ok()
        );
        let mut bucket = dest("b", "clusters/dev");
        bucket["spec"]["stateStoreRef"]["kind"] = json!("BucketStateStore");
        assert!(
            validate("Destination", &bucket, None, &others, &none).is_ok(),
            "another store"
        );
        assert!(
            validate(
                "Destination",
                &dest("a", "clusters/dev"),
                None,
                &others,
                &none
            )
            .is_ok(),
            "an update of itself"
        );
        assert!(validate("Destination", &dest("b", "../x"), None, &others, &none).is_err());
    }

    #[test]
    fn a_destination_has_the_cleanup_finalizer_exactly_when_cleanup_is_all() {
        let fin = plinth_api::constants::finalizers::DESTINATION_CLEANUP;
        let mut d = json!({"metadata": {"name": "a"}, "spec": {"cleanup": "all"}});
        default("Destination", &mut d);
        assert_eq!(d["metadata"]["finalizers"], json!([fin]));
        default("Destination", &mut d);
        assert_eq!(d["metadata"]["finalizers"], json!([fin]), "added once");
        d["metadata"]["finalizers"] = json!(["other", fin]);
        d["spec"]["cleanup"] = json!("none");
        default("Destination", &mut d);
        assert_eq!(d["metadata"]["finalizers"], json!(["other"]));
        d["metadata"]["finalizers"] = json!([fin]);
        d["spec"] = json!({});
        default("Destination", &mut d);
        assert!(d["metadata"].get("finalizers").is_none(), "{d}");
        // Being deleted: left for the controller to release.
        let mut gone = json!({"metadata": {"name": "a", "deletionTimestamp": "2026-01-01T00:00:00Z",
            "finalizers": [fin]}, "spec": {"cleanup": "none"}});
        default("Destination", &mut gone);
        assert_eq!(gone["metadata"]["finalizers"], json!([fin]));
        let mut store = json!({"metadata": {"name": "s"}, "spec": {"cleanup": "all"}});
        default("GitStateStore", &mut store);
        assert!(store["metadata"].get("finalizers").is_none());
    }

    #[test]
    fn access_key_bucket_stores_need_a_secret() {
        let err = validate(
            "BucketStateStore",
            &json!({"spec": {"bucketName": "b", "endpoint": "e"}}),
            None,
            &[],
            &none,
        )
        .unwrap_err();
        assert_eq!(err.len(), 2);
        assert!(
            validate(
                "BucketStateStore",
                &json!({"spec": {"authMethod": "IAM"}}),
                None,
                &[],
                &none
            )
            .is_ok()
        );
    }
}
