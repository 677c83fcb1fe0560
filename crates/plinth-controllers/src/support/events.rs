//! Kubernetes Events with Kratix's reporting components and reasons. Every controller
//! records through its own [`EventRecorder`] (from [`crate::Context::recorder`]), which
//! fills first/last timestamps and counts and folds repeats into one Event. Publishing
//! is best effort: a failed Event is logged, never fails a reconcile.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::DynamicObject;
use kube::{Resource, ResourceExt};
use plinth_api::events::{EventRecorder, EventType};

/// Longest Event message recorded; longer notes are cut at a character boundary.
const MAX_NOTE_BYTES: usize = 1000;

/// Records an Event about `regarding` through `recorder`.
pub async fn publish(
    recorder: &EventRecorder,
    regarding: &ObjectReference,
    type_: EventType,
    reason: &str,
    note: impl Into<String>,
) {
    recorder
        .record(
            regarding,
            type_,
            reason,
            truncate(note.into(), MAX_NOTE_BYTES),
        )
        .await;
}

/// `Warning` when `warning`, else `Normal`.
pub fn event_type(warning: bool) -> EventType {
    if warning {
        EventType::Warning
    } else {
        EventType::Normal
    }
}

/// An `ObjectReference` for a dynamic object (kind and apiVersion from its type meta).
pub fn reference(obj: &DynamicObject) -> ObjectReference {
    let types = obj.types.clone().unwrap_or_default();
    ObjectReference {
        api_version: Some(types.api_version),
        kind: Some(types.kind),
        name: Some(obj.name_any()),
        namespace: obj.namespace(),
        uid: obj.meta().uid.clone(),
        resource_version: obj.resource_version(),
        ..Default::default()
    }
}

/// An `ObjectReference` for a typed object.
pub fn typed_reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    obj.object_ref(&())
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
