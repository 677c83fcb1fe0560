//! Jobs are one-off runs. Drift correction must not resurrect a finished Job that the
//! cluster removed after its `ttlSecondsAfterFinished` (or someone deleted), or the task
//! (a migration, a notification) runs again on every pass that re-plans the directory.
//! The agent remembers, per Job, the hash of the `spec` it created it with
//! ([`crate::inventory::Entry::job_spec_hash`]) and runs that spec once.

use serde_json::Value;

use crate::inventory::Entry;
use crate::object_ref::ObjectRef;

/// Status message of a Job that ran with the current spec and has left the cluster.
pub(crate) const ALREADY_RAN: &str = "already ran with this spec and was removed from the cluster; not re-applied until its spec changes";

/// What to do with a planned document that needs a write.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Apply as any other object.
    Apply,
    /// A Job already created with this spec and gone since: leave it gone.
    AlreadyRan,
    /// A Job whose spec changed while the old one still exists: delete it, then apply.
    Recreate,
}

/// SHA-256 of a `batch` Job document's `spec`; None for every other kind.
pub(crate) fn spec_hash(id: &ObjectRef, object: &Value) -> Option<String> {
    (id.kind == "Job" && id.group() == "batch")
        .then(|| crate::documents::hash_value(object.get("spec").unwrap_or(&Value::Null)))
}

/// The decision for a document whose apply is not a no-op. `spec` is [`spec_hash`] of the
/// document (None: not a Job).
pub(crate) fn decide(known: Option<&Entry>, live: Option<&Value>, spec: Option<&str>) -> Decision {
    let Some(spec) = spec else {
        return Decision::Apply;
    };
    let same_spec = known.and_then(|e| e.job_spec_hash.as_deref()) == Some(spec);
    match (live, same_spec) {
        (None, true) => Decision::AlreadyRan,
        // Created by this agent with another spec (its template is immutable).
        (Some(_), false) if known.and_then(|e| e.job_spec_hash.as_ref()).is_some() => {
            Decision::Recreate
        }
        _ => Decision::Apply,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(spec: Option<&str>) -> Entry {
        Entry {
            object: id("Job", "batch/v1"),
            hash: "h".into(),
            generation: Some(1),
            source: "resources/a.yaml#0".into(),
            job_spec_hash: spec.map(str::to_string),
        }
    }

    fn id(kind: &str, api_version: &str) -> ObjectRef {
        ObjectRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: Some("team-a".into()),
            name: "once".into(),
        }
    }

    #[test]
    fn only_batch_jobs_have_a_spec_hash() {
        let doc = json!({"spec": {"template": {}}});
        assert!(spec_hash(&id("Job", "batch/v1"), &doc).is_some());
        assert!(spec_hash(&id("Job", "example.org/v1"), &doc).is_none());
        assert!(spec_hash(&id("ConfigMap", "v1"), &doc).is_none());
    }

    #[test]
    fn a_job_runs_once_per_spec() {
        let live = json!({});
        // Never created: created.
        assert_eq!(decide(None, None, Some("s1")), Decision::Apply);
        // Created with this spec and gone (TTL, hand delete): left gone.
        assert_eq!(
            decide(Some(&entry(Some("s1"))), None, Some("s1")),
            Decision::AlreadyRan
        );
        // Gone, and the spec changed: the new spec runs.
        assert_eq!(
            decide(Some(&entry(Some("s1"))), None, Some("s2")),
            Decision::Apply
        );
        // Still there with an old spec: replaced.
        assert_eq!(
            decide(Some(&entry(Some("s1"))), Some(&live), Some("s2")),
            Decision::Recreate
        );
        // Still there with this spec (a label changed): patched in place.
        assert_eq!(
            decide(Some(&entry(Some("s1"))), Some(&live), Some("s1")),
            Decision::Apply
        );
        // An inventory from before spec hashes were kept: applied as before.
        assert_eq!(
            decide(Some(&entry(None)), Some(&live), Some("s1")),
            Decision::Apply
        );
        // Not a Job.
        assert_eq!(
            decide(Some(&entry(Some("s1"))), None, None),
            Decision::Apply
        );
    }
}
