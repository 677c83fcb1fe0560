//! Kubernetes Events with Kratix's reporting components and reasons (reference §8.4).
//! Publishing is best effort: a failed Event is logged, never fails a reconcile.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::DynamicObject;
use kube::{Resource, ResourceExt};
use plinth_api::events::EventType;

use crate::context::Context;

/// Publishes an Event about `reference` from `component` (e.g. `PromiseController`)
/// through the context's shared recorder, which fills first/last timestamps and counts
/// and folds repeats into one Event ([`plinth_api::events::EventRecorder`]).
pub async fn publish(
    ctx: &Context,
    component: &str,
    reference: &ObjectReference,
    warning: bool,
    reason: &str,
    note: impl Into<String>,
) {
    let type_ = if warning {
        EventType::Warning
    } else {
        EventType::Normal
    };
    ctx.recorder(component)
        .record(reference, type_, reason, note)
        .await;
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
