//! Hand-written schema fragments for fields whose Rust type (`serde_json::Value`) carries no
//! structure, so that the generated CRDs stay structural (Kubernetes API convention).

use schemars::{Schema, SchemaGenerator, json_schema};

/// An arbitrary Kubernetes object kept verbatim: `x-kubernetes-embedded-resource` +
/// `x-kubernetes-preserve-unknown-fields` (Promise `spec.api`).
pub(crate) fn embedded_resource(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "nullable": true,
        "x-kubernetes-embedded-resource": true,
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// A list of arbitrary objects kept verbatim (pipelines, static dependencies).
pub(crate) fn preserved_object_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true
        }
    })
}

/// Any object kept verbatim (HealthRecord `data.details`, PromiseRevision `spec.promiseSpec`).
pub(crate) fn preserved_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// A list of `metav1.Condition`, written out so the CRD does not depend on how k8s-openapi's
/// schemars feature spells `Time` (`listType: map` keyed by `type`, as Kratix declares it).
pub(crate) fn conditions(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["lastTransitionTime", "message", "reason", "status", "type"],
            "properties": {
                "lastTransitionTime": {"type": "string", "format": "date-time"},
                "message": {"type": "string", "maxLength": 32768},
                "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
                "reason": {"type": "string", "maxLength": 1024},
                "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                "type": {"type": "string", "maxLength": 316}
            }
        }
    })
}

/// An RFC 3339 timestamp (`metav1.Time`).
pub(crate) fn time(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "string", "format": "date-time", "nullable": true})
}
