//! What every controller shares: conditions ([`conditions`]), the one status writer
//! ([`status`]), the one finalizer editor ([`finalizers`]), Events ([`events`]), the
//! Kratix kinds' dynamic resources ([`resources`]), Works readiness ([`works`]), a failed
//! reconcile reported on its object ([`outcome`]), one way to start a controller
//! ([`harness`]), tests on API errors ([`api_errors`]) and the wait until a
//! timestamp.

pub mod api_errors;
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

pub use api_errors::{is_already_exists, is_conflict, is_invalid, is_not_found};
pub use conditions::{
    ConditionList, ConditionStatus, condition, condition_is_false, condition_is_true,
    condition_true, ensure_object, get_condition, now_rfc3339, set_condition, set_field,
};
pub use events::{event_type, publish, reference, typed_reference};
pub use finalizers::{edit_finalizers, remove_finalizer, set_finalizers};
pub use status::{
    Basis, CONFLICT_RETRIES, Latest, patch_status, patch_status_from, update_status,
    update_status_from, update_status_known,
};

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
