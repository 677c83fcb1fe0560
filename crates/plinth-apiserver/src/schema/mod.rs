//! CustomResourceDefinition checks and custom-resource admission.
//!
//! Two entry points, both returning Kubernetes-style field [`Cause`]s so the server can
//! answer `422 Invalid` exactly as a real API server would:
//!
//! * [`check_crd`] — the apiextensions.k8s.io/v1 validation run when a CRD is created or
//!   updated (names, scope, versions, structural schema rules, printer columns, CEL rules
//!   that do not compile).
//! * [`admit`] — what the API server does to a custom resource on create/update: prune
//!   unknown fields, apply `default`s, drop non-nullable nulls, then validate (keywords,
//!   `x-kubernetes-*` extensions, `x-kubernetes-validations` CEL rules incl. transition
//!   rules with `oldSelf`).
//!
//! [`unknown_fields`] lists what pruning would drop, for `fieldValidation=Strict|Warn`.
//!
//! Sources: Kubernetes "Extend the Kubernetes API with CustomResourceDefinitions"
//! (structural schemas, pruning, defaulting, nullable, validation rules) and the message
//! formats of `k8s.io/apimachinery/pkg/util/validation/field`.

mod admission;
mod messages;
mod structural;

pub use admission::{admit, unknown_fields};
pub use messages::{format_invalid, strict_decoding_error};
pub use structural::check_crd;

#[cfg(test)]
mod tests;
