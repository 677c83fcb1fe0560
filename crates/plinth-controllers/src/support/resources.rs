//! Dynamic API resources of the Kratix kinds the controllers read as `DynamicObject`s
//! (group `platform.kratix.io`, version `v1alpha1`).

use kube::api::{ApiResource, GroupVersionKind};

/// The `platform.kratix.io/v1alpha1` resource of `kind`, served as `plural`.
pub fn kratix_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(plinth_api::GROUP, plinth_api::VERSION, kind),
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

/// The `resourcebindings` resource.
pub fn binding_resource() -> ApiResource {
    kratix_resource("ResourceBinding", "resourcebindings")
}

/// The `promisereleases` resource.
pub fn release_resource() -> ApiResource {
    kratix_resource("PromiseRelease", "promisereleases")
}

/// The API resource of `promise`'s requests, from its `spec.api`; `None` when it has no
/// API (or not a valid one).
pub fn request_resource_of(promise: &plinth_api::Promise) -> Option<ApiResource> {
    let api = promise.spec.api.as_ref()?;
    let gvk = plinth_api::request_crd::request_gvk(api).ok()?;
    Some(ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&gvk.group, &gvk.version, &gvk.kind),
        &gvk.plural,
    ))
}
