//! Dynamic API resources of the Kratix kinds the controllers read as `DynamicObject`s
//! (group `platform.kratix.io`, version `v1alpha1`).

use kube::api::{ApiResource, GroupVersionKind};

/// The `platform.kratix.io/v1alpha1` resource of `kind`, served as `plural`.
pub fn kratix_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("platform.kratix.io", "v1alpha1", kind),
        plural,
    )
}

/// The `promises` resource.
pub fn promise_resource() -> ApiResource {
    kratix_resource("Promise", "promises")
}

/// The `works` resource.
pub fn work_resource() -> ApiResource {
    kratix_resource("Work", "works")
}

/// The `promiserevisions` resource.
pub fn revision_resource() -> ApiResource {
    kratix_resource("PromiseRevision", "promiserevisions")
}
