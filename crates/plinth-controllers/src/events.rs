//! Kubernetes Events with Kratix's reporting components and reasons (reference §8.4).
//! Publishing is best effort: a failed Event is logged, never fails a reconcile.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::DynamicObject;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Resource, ResourceExt};

use crate::context::Context;

/// Publishes an Event about `reference` from `component` (e.g. `PromiseController`).
pub async fn publish(
    ctx: &Context,
    component: &str,
    reference: &ObjectReference,
    warning: bool,
    reason: &str,
    note: impl Into<String>,
) {
    let recorder = Recorder::new(
        ctx.client.clone(),
        Reporter {
            controller: component.to_string(),
            instance: None,
        },
    );
    let note = note.into();
    let event = Event {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.to_string(),
        note: Some(note.clone()),
        action: reason.to_string(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, reference).await {
        tracing::debug!(reason, %note, error = %e, "could not publish event");
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
