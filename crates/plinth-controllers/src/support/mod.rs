//! What every controller shares: conditions ([`conditions`]), the one status writer
//! ([`status`]), the one finalizer editor ([`finalizers`]), Events ([`events`]), the
//! Kratix kinds' dynamic resources ([`resources`]), Works readiness ([`works`]), a failed
//! reconcile reported on its object ([`outcome`]), one way to start a controller
//! ([`harness`]), tests on API errors and the wait
//! until a timestamp.

pub mod conditions;
pub mod events;
pub mod finalizers;
pub mod harness;
pub mod outcome;
pub mod resources;
pub mod status;
pub mod works;

use std::time::Duration;

use jiff::Timestamp;
use kube::Resource;
use kube::ResourceExt;

pub use conditions::{
    ConditionList, ConditionStatus, condition, condition_is_false, condition_is_true,
    condition_true, ensure_object, get_condition, now_rfc3339, set_condition, set_field,
};
pub use events::{EventRecorder, EventType, event_type, publish, reference, typed_reference};
pub use finalizers::{edit_finalizers, remove_finalizer, set_finalizers};
pub use status::{CONFLICT_RETRIES, patch_status, update_status, update_status_known};

/// True if the error is the API's 409 Conflict (a stale resourceVersion).
pub fn is_conflict(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.is_conflict())
}

/// True if the error is the API's 404 Not Found.
pub fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.is_not_found())
}

/// True if the error is the API's 409 AlreadyExists (a create of an existing name).
pub fn is_already_exists(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.is_already_exists())
}

/// Time from now until `at`, at least one second: the requeue wait for a retry or a
/// periodic re-run due at `at`.
pub fn until(at: Timestamp) -> Duration {
    Duration::from_secs((at.as_second() - Timestamp::now().as_second()).max(1) as u64)
}

/// `<Kind> <namespace>/<name>` (or `<Kind> <name>` for cluster-scoped objects), for
/// error messages.
pub fn describe<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    match obj.namespace() {
        Some(ns) => format!("{} {}/{}", K::kind(&()), ns, obj.name_any()),
        None => format!("{} {}", K::kind(&()), obj.name_any()),
    }
}

/// True if the error is the API's 422 Invalid (admission refused the object).
pub fn is_invalid(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.is_invalid())
}
