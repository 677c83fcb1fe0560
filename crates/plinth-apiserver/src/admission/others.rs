//! Admission of the Kratix kinds besides Promise and Destination: state stores,
//! PromiseRelease, PromiseRevision, ResourceBinding, HealthSource and HealthDefinition.
//! Each refuses at apply time what its controller would otherwise only report on the
//! object's status at every reconcile: missing references, paths that leave the store,
//! identity fields changed after creation, polling below the floor, and schedules that
//! do not parse.

use std::time::Duration;

use serde_json::Value;

use super::{cause, normalize, str_at};
use crate::resource::Cause;

pub(super) fn validate_bucket_store(obj: &Value) -> Vec<Cause> {
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

/// A `spec.path` that stays inside its store (no `..`).
pub(super) fn path_causes(obj: &Value) -> Vec<Cause> {
    match str_at(obj, "/spec/path") {
        Some(path) if normalize(path).is_none() => vec![cause(
            "spec.path",
            "FieldValueInvalid",
            format!("Invalid value: {path:?}: must not contain \"..\""),
        )],
        _ => vec![],
    }
}

/// A GitStateStore names its repository.
pub(super) fn validate_git_store(obj: &Value) -> Vec<Cause> {
    if str_at(obj, "/spec/url").is_none_or(str::is_empty) {
        return vec![cause(
            "spec.url",
            "FieldValueRequired",
            "Required value: the Git repository's URL",
        )];
    }
    vec![]
}

/// A PromiseRelease names where its Promise is fetched from.
pub(super) fn validate_release(obj: &Value) -> Vec<Cause> {
    if str_at(obj, "/spec/sourceRef/url").is_none_or(str::is_empty) {
        return vec![cause(
            "spec.sourceRef.url",
            "FieldValueRequired",
            "Required value",
        )];
    }
    vec![]
}

/// Fields that name what an object is about and so never change after creation.
fn immutable_causes(obj: &Value, old: Option<&Value>, fields: &[(&str, &str)]) -> Vec<Cause> {
    let Some(old) = old else {
        return vec![];
    };
    fields
        .iter()
        .filter(|(_, ptr)| old.pointer(ptr) != obj.pointer(ptr))
        .map(|(field, _)| {
            cause(
                field,
                "FieldValueForbidden",
                "Forbidden: field is immutable",
            )
        })
        .collect()
}

/// Fields that must be non-empty strings.
fn required_causes(obj: &Value, fields: &[(&str, &str)]) -> Vec<Cause> {
    fields
        .iter()
        .filter(|(_, ptr)| str_at(obj, ptr).is_none_or(str::is_empty))
        .map(|(field, _)| cause(field, "FieldValueRequired", "Required value"))
        .collect()
}

/// A PromiseRevision is the Promise `spec.promiseRef.name` at `spec.version`: both are
/// required and, since they make its name, immutable (its `promiseSpec` is rewritten
/// while the Promise carries no version label).
pub(super) fn validate_revision(obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let fields = [
        ("spec.promiseRef.name", "/spec/promiseRef/name"),
        ("spec.version", "/spec/version"),
    ];
    let mut causes = required_causes(obj, &fields);
    causes.extend(immutable_causes(obj, old, &fields));
    causes
}

/// A ResourceBinding ties one resource request to a Promise version: the Promise and
/// request it names are required and immutable; `spec.version` is required (it is what
/// changes, to move the request to another revision).
pub(super) fn validate_binding(obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = required_causes(
        obj,
        &[
            ("spec.version", "/spec/version"),
            ("spec.promiseRef.name", "/spec/promiseRef/name"),
            ("spec.resourceRef.name", "/spec/resourceRef/name"),
        ],
    );
    causes.extend(immutable_causes(
        obj,
        old,
        &[
            ("spec.promiseRef", "/spec/promiseRef"),
            ("spec.resourceRef.name", "/spec/resourceRef/name"),
            ("spec.resourceRef.namespace", "/spec/resourceRef/namespace"),
        ],
    ));
    causes
}

/// A HealthSource reads exactly one backend, no more often than every
/// [`plinth_api::MIN_HEALTH_POLL_INTERVAL_SECS`] seconds, below a path inside it.
pub(super) fn validate_health_source(obj: &Value) -> Vec<Cause> {
    const BACKENDS: [&str; 6] = ["bucket", "azure", "gcs", "git", "redis", "nats"];
    let mut causes = Vec::new();
    let set: Vec<&str> = BACKENDS
        .into_iter()
        .filter(|b| {
            obj.pointer(&format!("/spec/{b}"))
                .is_some_and(|v| !v.is_null())
        })
        .collect();
    if set.len() != 1 {
        let what = if set.is_empty() {
            "none is set".to_string()
        } else {
            format!("{} are set", set.join(", "))
        };
        causes.push(cause(
            "spec",
            "FieldValueInvalid",
            format!(
                "Invalid value: exactly one of spec.bucket, spec.azure, spec.gcs, spec.git, \
                 spec.redis, spec.nats must be set; {what}"
            ),
        ));
    }
    if let Some(text) = str_at(obj, "/spec/pollInterval") {
        let floor = Duration::from_secs(plinth_api::MIN_HEALTH_POLL_INTERVAL_SECS);
        match plinth_api::duration::parse_go_duration(text) {
            Err(_) => causes.push(cause(
                "spec.pollInterval",
                "FieldValueInvalid",
                format!("Invalid value: {text:?}: not a duration such as \"30s\" or \"5m\""),
            )),
            Ok(d) if d < floor => causes.push(cause(
                "spec.pollInterval",
                "FieldValueInvalid",
                format!(
                    "Invalid value: {text:?}: must be at least {}s",
                    floor.as_secs()
                ),
            )),
            Ok(_) => {}
        }
    }
    causes.extend(path_causes(obj));
    causes
}

/// A HealthDefinition names its request and Promise and has a schedule a CronJob can
/// run (5 fields or a macro).
pub(super) fn validate_health_definition(obj: &Value) -> Vec<Cause> {
    let mut causes = required_causes(
        obj,
        &[
            ("spec.promiseRef.name", "/spec/promiseRef/name"),
            ("spec.resourceRef.name", "/spec/resourceRef/name"),
            ("spec.schedule", "/spec/schedule"),
        ],
    );
    if let Some(schedule) = str_at(obj, "/spec/schedule").filter(|s| !s.is_empty())
        && let Err(e) = plinth_api::schedule::Schedule::parse(schedule, None)
    {
        causes.push(cause(
            "spec.schedule",
            "FieldValueInvalid",
            format!("Invalid value: {e}"),
        ));
    }
    causes
}
