//! Promise admission: pipelines checked as the workflow engine will run them, the spec
//! decoded as the Promise controller reads it, interval floors, and the Promise API's
//! CRD checked as the request CRD it becomes (namespaced, not in a reserved group,
//! structural) with its identity immutable once installed.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{MAX_PIPELINE_ID, cause, interval_cause};
use crate::resource::Cause;

pub(super) fn validate_promise(obj: &Value, old: Option<&Value>) -> Vec<Cause> {
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
        if p["apiVersion"] != plinth_api::API_VERSION || p["kind"] != "Pipeline" {
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
    if let Err(e) = plinth_api::request_crd::validate_api_crd(api) {
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
    match plinth_api::request_crd::build_request_crd(promise, api) {
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
    use plinth_api::pipeline_pod;
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
