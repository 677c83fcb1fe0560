//! Admission for Kratix kinds: one implementation, two transports. The embedded API
//! server calls it in-process before storing an object (`kinds::prepare`); `plinth
//! operator` serves it as `admission.k8s.io/v1` webhooks on a real cluster. Both answer
//! with the same field causes (field path, reason, message), so `kubectl` shows the same
//! 422 message in either mode.
//!
//! The rules are pure: they read the object, the old object on update, and what a
//! [`Lookup`] answers about other objects (the stored Destinations, a state store's
//! `spec.path`). They need no storage and no client, which is what lets the two
//! transports share them. They live in the API server crate because the Promise rules
//! check pipeline containers as a Pod's (`validation`), the reserved API groups
//! (`reserved`) and the Promise API's CRD as kube-apiserver would (`schema::check_crd`).
//!
//! What is covered: the checks Kratix's webhooks make (Promise, Destination,
//! BucketStateStore, PromiseRelease, PromiseRevision; Destination and Promise defaulting),
//! and for every kind (also GitStateStore, ResourceBinding, HealthSource,
//! HealthDefinition) what its controller would otherwise refuse at every reconcile:
//! the spec decoded as the controller reads it (with the failing field's path),
//! identity fields that never change, interval floors and paths that leave the store.

mod destination;
mod others;
mod promise;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::time::Duration;

use serde_json::Value;

use crate::resource::Cause;

/// Kratix's floor for every user-supplied interval (`MinReconciliationInterval`).
const MIN_INTERVAL: Duration = Duration::from_secs(60);
/// Longest pipeline ID `<promise>-<type>-<action>-<pipeline>` (webhook rule 3).
const MAX_PIPELINE_ID: usize = 60;

/// A kind this module admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmittedKind {
    /// API group.
    pub group: &'static str,
    /// Kind, e.g. `Promise`.
    pub kind: &'static str,
    /// Resource (plural), e.g. `promises`.
    pub plural: &'static str,
    /// Cluster-scoped (else namespaced).
    pub cluster_scoped: bool,
    /// Has defaulting (a mutating webhook).
    pub mutates: bool,
}

/// Every kind admitted here, in the order their webhooks are registered.
pub const KINDS: [AdmittedKind; 9] = [
    kind(plinth_api::GROUP, "Promise", "promises", true, false),
    kind(plinth_api::GROUP, "Destination", "destinations", true, true),
    kind(
        plinth_api::GROUP,
        "GitStateStore",
        "gitstatestores",
        true,
        false,
    ),
    kind(
        plinth_api::GROUP,
        "BucketStateStore",
        "bucketstatestores",
        true,
        false,
    ),
    kind(
        plinth_api::GROUP,
        "PromiseRelease",
        "promisereleases",
        true,
        false,
    ),
    kind(
        plinth_api::GROUP,
        "PromiseRevision",
        "promiserevisions",
        true,
        false,
    ),
    kind(
        plinth_api::GROUP,
        "ResourceBinding",
        "resourcebindings",
        false,
        false,
    ),
    kind(
        plinth_api::HEALTH_SOURCE_GROUP,
        "HealthSource",
        "healthsources",
        true,
        false,
    ),
    kind(
        plinth_api::GROUP,
        "HealthDefinition",
        "healthdefinitions",
        false,
        false,
    ),
];

const fn kind(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    cluster_scoped: bool,
    mutates: bool,
) -> AdmittedKind {
    AdmittedKind {
        group,
        kind,
        plural,
        cluster_scoped,
        mutates,
    }
}

impl AdmittedKind {
    /// The kind admitted here for `group` and `kind`, if any.
    pub fn find(group: &str, kind: &str) -> Option<AdmittedKind> {
        KINDS
            .into_iter()
            .find(|k| k.group == group && k.kind == kind)
    }

    /// The validating webhook's path, kubebuilder's form Kratix uses
    /// (`/validate-platform-kratix-io-v1alpha1-promise`).
    pub fn validate_path(&self) -> String {
        self.path("validate")
    }

    /// The mutating webhook's path (`/mutate-platform-kratix-io-v1alpha1-destination`).
    pub fn mutate_path(&self) -> String {
        self.path("mutate")
    }

    fn path(&self, what: &str) -> String {
        format!(
            "/{what}-{}-v1alpha1-{}",
            self.group.replace('.', "-"),
            self.kind.to_ascii_lowercase()
        )
    }
}

/// The operation being admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A new object.
    Create,
    /// A change of a stored object (`old` is the stored one).
    Update,
    /// A deletion (nothing is refused).
    Delete,
}

/// Reading other objects failed while admitting one.
#[derive(Debug, thiserror::Error)]
#[error("reading {what}: {message}")]
pub struct LookupError {
    /// What was being read (`Destinations`, `GitStateStore "default"`).
    pub what: String,
    /// The cause.
    pub message: String,
}

/// What the rules read about other objects: the embedded server answers from its store,
/// the operator through its Kubernetes client.
pub trait Lookup {
    /// Every stored Destination.
    ///
    /// # Errors
    /// The Destinations cannot be read.
    fn destinations(&self) -> impl Future<Output = Result<Vec<Value>, LookupError>> + Send;

    /// The `spec.path` of the state store `kind`/`name` (`GitStateStore`,
    /// `BucketStateStore`); None when it does not exist or has no path.
    ///
    /// # Errors
    /// The store cannot be read.
    fn store_path(
        &self,
        kind: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<String>, LookupError>> + Send;
}

/// What the rules need to know besides the object itself.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// The stored Destinations (read for a Destination only).
    pub destinations: Vec<Value>,
    /// The `spec.path` of a Destination's state store.
    pub store_path: Option<String>,
}

/// Reads the [`Facts`] that admitting `obj` of `kind` needs.
///
/// # Errors
/// The lookup failed.
pub async fn facts<L: Lookup>(kind: &str, obj: &Value, lookup: &L) -> Result<Facts, LookupError> {
    if kind != "Destination" {
        return Ok(Facts::default());
    }
    let store_kind = str_at(obj, "/spec/stateStoreRef/kind").unwrap_or("GitStateStore");
    let store = str_at(obj, "/spec/stateStoreRef/name").unwrap_or_default();
    Ok(Facts {
        destinations: lookup.destinations().await?,
        store_path: if store.is_empty() {
            None
        } else {
            lookup.store_path(store_kind, store).await?
        },
    })
}

/// The outcome of admitting one object.
#[derive(Debug, Clone)]
pub struct Decision {
    /// The object after defaulting.
    pub object: Value,
    /// The JSON patch from the object as sent to [`Decision::object`] (empty when
    /// defaulting changed nothing).
    pub patch: json_patch::Patch,
    /// Why the object is refused (empty: allowed).
    pub causes: Vec<Cause>,
}

impl Decision {
    /// Whether the object is allowed.
    pub fn allowed(&self) -> bool {
        self.causes.is_empty()
    }
}

/// Admits `obj` of `kind` for `op`: defaulting, then validation of the defaulted object.
/// `old` is the stored object on update.
///
/// # Errors
/// The lookup failed.
pub async fn review<L: Lookup>(
    kind: &str,
    op: Operation,
    obj: &Value,
    old: Option<&Value>,
    lookup: &L,
) -> Result<Decision, LookupError> {
    let mut object = obj.clone();
    if op == Operation::Delete {
        return Ok(Decision {
            object,
            patch: json_patch::Patch(vec![]),
            causes: vec![],
        });
    }
    default(kind, &mut object);
    let patch = json_patch::diff(obj, &object);
    let facts = facts(kind, &object, lookup).await?;
    let old = old.filter(|_| op == Operation::Update);
    let causes = validate(kind, &object, old, &facts);
    Ok(Decision {
        object,
        patch,
        causes,
    })
}

/// Defaulting of `kind`, in place (Destination: the cleanup finalizer).
pub fn default(kind: &str, obj: &mut Value) {
    if kind == "Destination" {
        destination::default_destination(obj);
    }
}

/// Validates `obj` of `kind` on create (`old` None) or update; the causes why it is
/// refused (empty when it is valid). An update of an object being deleted is never
/// refused: its finalizers must be releasable even when it does not pass today's rules
/// (an object admitted before them, or while admission was off).
pub fn validate(kind: &str, obj: &Value, old: Option<&Value>, facts: &Facts) -> Vec<Cause> {
    if old.is_some() && obj.pointer("/metadata/deletionTimestamp").is_some() {
        return vec![];
    }
    let rules = match kind {
        "Promise" => return promise::validate_promise(obj, old),
        "Destination" => {
            destination::validate_destination(obj, &facts.destinations, facts.store_path.as_deref())
        }
        "GitStateStore" => {
            let mut c = others::validate_git_store(obj);
            c.extend(others::path_causes(obj));
            c
        }
        "BucketStateStore" => {
            let mut c = others::validate_bucket_store(obj);
            c.extend(others::path_causes(obj));
            c
        }
        "PromiseRelease" => others::validate_release(obj),
        "PromiseRevision" => others::validate_revision(obj, old),
        "ResourceBinding" => others::validate_binding(obj, old),
        "HealthSource" => others::validate_health_source(obj),
        "HealthDefinition" => others::validate_health_definition(obj),
        _ => return vec![],
    };
    if !rules.is_empty() {
        return rules;
    }
    spec_decode_causes(kind, obj)
}

/// The spec decoded as the kind's controller reads it (`plinth_api`'s types), the
/// failing field named; checked after the kind's own rules pass, so that a missing
/// field is reported by them as "Required value" rather than by serde.
fn spec_decode_causes(kind: &str, obj: &Value) -> Vec<Cause> {
    use plinth_api::decode::typed;
    let Some(spec) = obj.get("spec").filter(|s| !s.is_null()) else {
        return vec![];
    };
    let result = match kind {
        "Destination" => typed::<plinth_api::DestinationSpec>(spec).map(drop),
        "GitStateStore" => typed::<plinth_api::GitStateStoreSpec>(spec).map(drop),
        "BucketStateStore" => typed::<plinth_api::BucketStateStoreSpec>(spec).map(drop),
        "PromiseRelease" => typed::<plinth_api::PromiseReleaseSpec>(spec).map(drop),
        "PromiseRevision" => typed::<plinth_api::PromiseRevisionSpec>(spec).map(drop),
        "ResourceBinding" => typed::<plinth_api::ResourceBindingSpec>(spec).map(drop),
        "HealthSource" => typed::<plinth_api::HealthSourceSpec>(spec).map(drop),
        "HealthDefinition" => typed::<plinth_api::HealthDefinitionSpec>(spec).map(drop),
        _ => Ok(()),
    };
    match result {
        Ok(()) => vec![],
        Err(e) => vec![cause(
            &e.field_under("spec"),
            "FieldValueInvalid",
            format!("Invalid value: {}", e.message),
        )],
    }
}

/// The message of a 422 `Invalid` answer, as kube-apiserver words it:
/// `<Kind>.<group> "<name>" is invalid: <field>: <message>` (several causes in brackets).
/// The embedded server and the operator's webhooks both answer with it.
pub fn invalid_message(group: &str, kind: &str, name: &str, causes: &[Cause]) -> String {
    let summary: Vec<String> = causes
        .iter()
        .map(|c| {
            if c.field.is_empty() || c.message.starts_with(&c.field) {
                c.message.clone()
            } else {
                format!("{}: {}", c.field, c.message)
            }
        })
        .collect();
    let summary = if summary.len() == 1 {
        summary[0].clone()
    } else {
        format!("[{}]", summary.join(", "))
    };
    let gk = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    format!("{gk} \"{name}\" is invalid: {summary}")
}

fn cause(field: &str, reason: &str, message: impl Into<String>) -> Cause {
    Cause {
        reason: reason.into(),
        message: message.into(),
        field: field.into(),
    }
}

fn str_at<'a>(obj: &'a Value, pointer: &str) -> Option<&'a str> {
    obj.pointer(pointer).and_then(Value::as_str)
}

fn interval_cause(field: &str, value: &str) -> Option<Cause> {
    match plinth_api::duration::parse_go_duration(value).ok() {
        None => Some(cause(
            field,
            "FieldValueInvalid",
            format!("Invalid value: {value:?}: not a duration such as \"10m\" or \"1h30m\""),
        )),
        Some(d) if d < MIN_INTERVAL => Some(cause(
            field,
            "FieldValueInvalid",
            format!("Invalid value: {value:?}: must be at least 1m"),
        )),
        _ => None,
    }
}

fn normalize(path: &str) -> Option<String> {
    plinth_api::paths::normalize(path).ok()
}
