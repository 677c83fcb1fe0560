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
pub(crate) mod messages;
mod structural;

pub use admission::{admit, unknown_fields};
pub use messages::{format_invalid, strict_decoding_error};
pub use structural::check_crd;

use crate::resource::ResourceInfo;

/// Why a request fails `fieldValidation` (answered 400 BadRequest).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FieldValidationError {
    /// `Strict`: the object has fields the schema does not know.
    #[error("{}", strict_decoding_error(paths))]
    UnknownFields {
        /// The unknown fields' paths (`spec.foo`).
        paths: Vec<String>,
    },
    /// The directive is not `Ignore`, `Warn` or `Strict`.
    #[error(
        "fieldValidation directive {} is not supported; valid values are \"Ignore\", \"Warn\", \"Strict\"",
        messages::quote(directive)
    )]
    UnsupportedDirective {
        /// The directive as given.
        directive: String,
    },
}

/// Apply the `fieldValidation` query parameter of a create/update/patch request to the
/// object as received (before [`admit`] prunes it; for a patch, the patched object).
///
/// * `Strict` — unknown fields fail the request: [`FieldValidationError::UnknownFields`]
///   for a `400 BadRequest` `Status` with `reason: BadRequest` and message
///   `strict decoding error: unknown field "spec.foo"`.
/// * `Warn` (and an absent parameter, the Kubernetes default since 1.27) — `Ok(warnings)`:
///   send each as a `Warning: 299 - "<warning>"` response header (`unknown field "spec.foo"`).
/// * `Ignore` — `Ok(vec![])`.
///
/// # Errors
/// [`FieldValidationError::UnknownFields`] under `Strict`;
/// [`FieldValidationError::UnsupportedDirective`] (Kubernetes' message for an invalid
/// directive) for any other value.
pub fn field_validation(
    info: &ResourceInfo,
    obj: &serde_json::Value,
    directive: Option<&str>,
) -> Result<Vec<String>, FieldValidationError> {
    match directive.unwrap_or("Warn") {
        "Ignore" => Ok(Vec::new()),
        "Warn" | "" => Ok(unknown_fields(info, obj)
            .iter()
            .map(|p| format!("unknown field {}", messages::quote(p)))
            .collect()),
        "Strict" => {
            let unknown = unknown_fields(info, obj);
            if unknown.is_empty() {
                Ok(Vec::new())
            } else {
                Err(FieldValidationError::UnknownFields { paths: unknown })
            }
        }
        other => Err(FieldValidationError::UnsupportedDirective {
            directive: other.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests;
