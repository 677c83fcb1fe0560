//! Small helpers shared by the scheduler, WorkPlacement, Destination and state store
//! controllers: `metav1.Condition` bookkeeping, status writes through the status
//! subresource with conflict retry, finalizer edits with an optimistic-concurrency
//! precondition, and event publishing.
//!
//! Conventions (ARCHITECTURE.md "Writes"): objects are changed with JSON merge patches;
//! every patch carries `metadata.resourceVersion`, which the API server treats as a
//! precondition (409 Conflict when the object moved on). On a conflict the helpers re-read
//! the object and recompute the change from the fresh copy, a bounded number of times, so
//! a reconcile never hot-loops on 409.

use std::fmt::Debug;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// How many times a status or finalizer write is recomputed after a 409 Conflict
/// before the reconcile gives up and lets its error policy requeue it.
pub const CONFLICT_RETRIES: usize = 5;

/// Errors of the Work, WorkPlacement, Destination and state store controllers.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// A call to the Kubernetes API failed.
    #[error("{action} {object}: {source}")]
    Kube {
        /// What the controller was doing, e.g. `listing WorkPlacements of`.
        action: &'static str,
        /// `<Kind> <namespace>/<name>` or `<Kind> <name>`.
        object: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A state store operation failed.
    #[error("state store {store}: {message}")]
    Store {
        /// `<Kind>/<name>` of the state store.
        store: String,
        /// The writer's error text.
        message: String,
    },
    /// The object is malformed in a way that needs a user fix.
    #[error("{object}: {message}")]
    Invalid {
        /// `<Kind> <namespace>/<name>`.
        object: String,
        /// The field and cause.
        message: String,
    },
}

impl ReconcileError {
    /// Wraps a client error with what was being done to which object.
    pub fn kube(action: &'static str, object: impl Into<String>, source: kube::Error) -> Self {
        ReconcileError::Kube {
            action,
            object: object.into(),
            source,
        }
    }
}

/// True if the error is an API `409 Conflict`.
pub fn is_conflict(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 409)
}

/// True if the error is an API `404 Not Found`.
pub fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 404)
}

/// The condition of `type_`, if present.
pub fn get_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// True if the condition `type_` is present with status `"False"`.
pub fn condition_is_false(conditions: &[Condition], type_: &str) -> bool {
    get_condition(conditions, type_).is_some_and(|c| c.status == "False")
}

/// True if the condition `type_` is present with status `"True"`.
pub fn condition_is_true(conditions: &[Condition], type_: &str) -> bool {
    get_condition(conditions, type_).is_some_and(|c| c.status == "True")
}

/// Sets condition `type_` (Kubernetes API conventions for `metav1.Condition`):
/// `lastTransitionTime` changes only when the status flips; reason, message and
/// `observedGeneration` are updated in place. Returns whether anything changed.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    observed_generation: Option<i64>,
) -> bool {
    let status = if status { "True" } else { "False" };
    if let Some(c) = conditions.iter_mut().find(|c| c.type_ == type_) {
        let changed = c.status != status
            || c.reason != reason
            || c.message != message
            || c.observed_generation != observed_generation;
        if c.status != status {
            c.last_transition_time = Time(jiff::Timestamp::now());
        }
        c.status = status.into();
        c.reason = reason.into();
        c.message = message.into();
        c.observed_generation = observed_generation;
        changed
    } else {
        conditions.push(Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation,
            last_transition_time: Time(jiff::Timestamp::now()),
        });
        true
    }
}

/// `<Kind> <namespace>/<name>` (or `<Kind> <name>` for cluster-scoped objects), for
/// error messages.
pub fn describe<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    match obj.namespace() {
        Some(ns) => format!("{} {}/{}", K::kind(&()), ns, obj.name_any()),
        None => format!("{} {}", K::kind(&()), obj.name_any()),
    }
}

/// Writes a status change through the status subresource with a JSON merge patch.
///
/// `compute` gets the current object and returns the merge-patch body for `status`
/// (`None` = nothing to change). The patch carries the object's `resourceVersion`; on a
/// 409 Conflict the object is re-read and `compute` runs again, at most
/// [`CONFLICT_RETRIES`] times. Returns the patched object, the unchanged object, or
/// `None` if the object no longer exists.
pub async fn patch_status<K, F>(
    api: &Api<K>,
    name: &str,
    mut compute: F,
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
    F: FnMut(&K) -> Option<Value>,
{
    let mut last_err = None;
    for _ in 0..=CONFLICT_RETRIES {
        let Some(current) = api.get_opt(name).await? else {
            return Ok(None);
        };
        let Some(status) = compute(&current) else {
            return Ok(Some(current));
        };
        let body = json!({
            "metadata": { "resourceVersion": current.meta().resource_version },
            "status": status,
        });
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(obj) => return Ok(Some(obj)),
            Err(e) if is_conflict(&e) => last_err = Some(e),
            Err(e) if is_not_found(&e) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    Err(last_err.expect("loop ran at least once"))
}

/// Adds and removes finalizers with a merge patch preconditioned on the object's
/// `resourceVersion`, retrying from a fresh read on conflict. Returns `Ok(None)` if the
/// object is gone, `Ok(Some(obj))` otherwise (unchanged when nothing needed doing).
pub async fn edit_finalizers<K>(
    api: &Api<K>,
    name: &str,
    add: &[&str],
    remove: &[&str],
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let mut last_err = None;
    for _ in 0..=CONFLICT_RETRIES {
        let Some(current) = api.get_opt(name).await? else {
            return Ok(None);
        };
        let existing = current.meta().finalizers.clone().unwrap_or_default();
        let mut wanted: Vec<String> = existing
            .iter()
            .filter(|f| !remove.contains(&f.as_str()))
            .cloned()
            .collect();
        if current.meta().deletion_timestamp.is_none() {
            // The API server refuses new finalizers on an object being deleted.
            for f in add {
                if !wanted.iter().any(|w| w == f) {
                    wanted.push((*f).to_string());
                }
            }
        }
        if wanted == existing {
            return Ok(Some(current));
        }
        let body = json!({
            "metadata": {
                "resourceVersion": current.meta().resource_version,
                "finalizers": wanted,
            }
        });
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(obj) => return Ok(Some(obj)),
            Err(e) if is_conflict(&e) => last_err = Some(e),
            Err(e) if is_not_found(&e) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    Err(last_err.expect("loop ran at least once"))
}

/// Publishes an event about `obj`; failures are logged, never fatal (events are
/// best-effort in Kubernetes). Reasons are Kratix's (reference §8.4).
///
/// Goes through the one recorder ([`plinth_api::events::EventRecorder`]), so repeats are
/// folded into one Event with a count. `_action` (what the controller was doing) is kept
/// for callers; core/v1 Events carry the reason and message only.
pub async fn publish<K>(
    recorder: &plinth_api::events::EventRecorder,
    obj: &K,
    type_: EventType,
    reason: &str,
    _action: &str,
    note: String,
) where
    K: Resource<DynamicType = ()>,
{
    let reference = obj.object_ref(&());
    let type_ = match type_ {
        EventType::Normal => plinth_api::events::EventType::Normal,
        EventType::Warning => plinth_api::events::EventType::Warning,
    };
    recorder
        .record(&reference, type_, reason, truncate(note, 1000))
        .await;
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_condition_keeps_transition_time_when_status_unchanged() {
        let mut conds = Vec::new();
        assert!(set_condition(
            &mut conds, "Ready", false, "Pending", "Pending", None
        ));
        let t0 = conds[0].last_transition_time.clone();
        assert!(set_condition(
            &mut conds, "Ready", false, "Other", "Other", None
        ));
        assert_eq!(conds[0].last_transition_time, t0);
        assert!(!set_condition(
            &mut conds, "Ready", false, "Other", "Other", None
        ));
        assert!(set_condition(
            &mut conds,
            "Ready",
            true,
            "Ok",
            "Ok",
            Some(2)
        ));
        assert_eq!(conds.len(), 1);
        assert_eq!(conds[0].status, "True");
        assert!(condition_is_true(&conds, "Ready"));
        assert!(!condition_is_false(&conds, "Ready"));
    }
}
