//! The one status writer of the controllers.
//!
//! Every status write is a JSON merge patch of the status subresource that carries the
//! object's `metadata.resourceVersion`, which the API server treats as a precondition
//! (409 Conflict when the object moved on). On a conflict the object is read again and
//! the change recomputed from the fresh copy, at most [`CONFLICT_RETRIES`] times, so a
//! status key written meanwhile by someone else (a pipeline's status-writer) is never
//! lost and a reconcile never hot-loops on 409. A change that changes nothing is not
//! sent.
//!
//! A writer that already holds a copy of the object (the watch cache's one its reconcile
//! was handed, or what its previous write returned) gives it as `known`: a change
//! computed from it is sent at once with its `resourceVersion`, which saves the read
//! whenever the copy is current. A copy behind the stored object only costs the 409 and
//! then the fresh read. That nothing needs changing is decided on a fresh read: a copy
//! that is one already ([`Basis::Fresh`]: what this reconcile just listed, read or wrote)
//! decides it itself, a watch cache's copy ([`Basis::Cached`]) only through a read. Only
//! [`update_status_known`] and the callers that check their copy first decide it on a
//! cached copy, for steps whose skipped write the newer object's own watch event brings
//! back to the reconcile.
//!
//! A reconcile that writes one object several times keeps its copies in a [`Latest`], so
//! each write starts from what the previous one returned:
//!
//! ```ignore
//! let latest = Latest::new(&cached);
//! latest.update_status(&api, |s, _| set_field(s, "message", json!("Pending"))).await?;
//! // Sent with the resourceVersion the first write returned; and had it nothing to
//! // change, that answer would say so without a read.
//! latest.update_status(&api, |s, _| set_field(s, "workflows", json!(1))).await?;
//! ```

use std::fmt::Debug;
use std::sync::Mutex;

use kube::Resource;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::api_errors::{is_conflict, is_not_found};
use crate::Error;

/// How many times a status or finalizer write is recomputed from a fresh read after a
/// 409 Conflict before the reconcile gives up and lets its error policy requeue it (a
/// first attempt from a known copy comes on top).
pub const CONFLICT_RETRIES: usize = 8;

/// Where a guarded merge patch goes.
#[derive(Clone, Copy)]
pub(crate) enum PatchTarget {
    /// The object itself (metadata: finalizers, labels).
    Object,
    /// The status subresource.
    Status,
}

/// A copy of the object a write starts from (module docs).
#[derive(Debug)]
pub enum Basis<'a, K> {
    /// A watch cache's copy, which may be behind the stored object: a change computed
    /// from it is sent at once, "nothing to change" is checked on a fresh read.
    Cached(&'a K),
    /// A copy as current as a read would be (what this reconcile just listed, read or
    /// wrote): it decides both.
    Fresh(&'a K),
}

impl<K> Clone for Basis<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Basis<'_, K> {}

impl<'a, K> From<&'a K> for Basis<'a, K> {
    fn from(copy: &'a K) -> Self {
        Basis::Cached(copy)
    }
}

impl<'a, K> Basis<'a, K> {
    fn copy(self) -> &'a K {
        match self {
            Basis::Cached(k) | Basis::Fresh(k) => k,
        }
    }
}

/// The one write loop: reads `name`, lets `compute` build a merge-patch body from it
/// (`None` = nothing to change), adds the read's `metadata.resourceVersion` as the
/// precondition and sends it; on 409 Conflict starts again from a fresh read, at most
/// [`CONFLICT_RETRIES`] times. With `basis` (a copy the caller holds, carrying a
/// `resourceVersion`), a change computed from it is sent first, without the read, and a
/// [`Basis::Fresh`] copy with nothing to change is the answer. Returns the written
/// object, the unchanged object, or `None` if the object no longer exists.
pub(crate) async fn guarded_patch<K, F>(
    api: &Api<K>,
    name: &str,
    target: PatchTarget,
    basis: Option<Basis<'_, K>>,
    mut compute: F,
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
    F: FnMut(&K) -> Option<Value>,
{
    let mut last_err = None;
    let basis = basis.filter(|b| {
        let k = b.copy();
        debug_assert_eq!(
            k.meta().name.as_deref(),
            Some(name),
            "a copy of another object"
        );
        k.meta()
            .resource_version
            .as_deref()
            .is_some_and(|v| !v.is_empty())
    });
    if let Some(basis) = basis {
        let copy = basis.copy();
        match (compute(copy), basis) {
            (Some(body), _) => match send(api, name, target, copy, body).await {
                Err(e) if is_conflict(&e) => last_err = Some(e),
                sent => return sent,
            },
            (None, Basis::Fresh(_)) => return Ok(Some(copy.clone())),
            (None, Basis::Cached(_)) => {}
        }
    }
    for _ in 0..=CONFLICT_RETRIES {
        let Some(current) = api.get_opt(name).await? else {
            return Ok(None);
        };
        let Some(body) = compute(&current) else {
            return Ok(Some(current));
        };
        match send(api, name, target, &current, body).await {
            Err(e) if is_conflict(&e) => last_err = Some(e),
            sent => return sent,
        }
    }
    Err(last_err.expect("loop ran at least once"))
}

/// Sends `body` as a merge patch of `target`, preconditioned on `basis`'s
/// `resourceVersion`; a 404 is `None`.
async fn send<K>(
    api: &Api<K>,
    name: &str,
    target: PatchTarget,
    basis: &K,
    mut body: Value,
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    body["metadata"]["resourceVersion"] = json!(basis.meta().resource_version);
    let params = PatchParams::default();
    let sent = match target {
        PatchTarget::Object => api.patch(name, &params, &Patch::Merge(&body)).await,
        PatchTarget::Status => api.patch_status(name, &params, &Patch::Merge(&body)).await,
    };
    match sent {
        Ok(obj) => Ok(Some(obj)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes a status change of a typed object.
///
/// `compute` gets the current object and returns the merge-patch body for `status`
/// (`None` = nothing to change). Returns the patched object, the unchanged object, or
/// `None` if the object no longer exists.
pub async fn patch_status<K, F>(
    api: &Api<K>,
    name: &str,
    mut compute: F,
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
    F: FnMut(&K) -> Option<Value>,
{
    guarded_patch(api, name, PatchTarget::Status, None, |current| {
        compute(current).map(|status| json!({ "status": status }))
    })
    .await
}

/// [`patch_status`] of the object `known` is a copy of (a `&K` is a [`Basis::Cached`]
/// one), starting from that copy (module docs).
pub async fn patch_status_from<'a, K, F>(
    api: &Api<K>,
    known: impl Into<Basis<'a, K>>,
    mut compute: F,
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + 'a,
    F: FnMut(&K) -> Option<Value>,
{
    let basis = known.into();
    let name = basis.copy().meta().name.clone().unwrap_or_default();
    guarded_patch(api, &name, PatchTarget::Status, Some(basis), |current| {
        compute(current).map(|status| json!({ "status": status }))
    })
    .await
}

/// An object whose `status` the controllers change as JSON: a request or another kind
/// read as a [`DynamicObject`], or a Kratix kind typed in `plinth-api`.
pub trait JsonStatus: Resource + Clone + DeserializeOwned + Serialize + Debug {
    /// The object's `status` as JSON, `None` when it has none.
    fn status_json(&self) -> Option<Value>;

    /// Whether the object has a `status` that is not a JSON object (it is replaced
    /// whole).
    fn status_is_not_object(&self) -> bool {
        self.status_json().is_some_and(|s| !s.is_object())
    }
}

impl JsonStatus for DynamicObject {
    fn status_json(&self) -> Option<Value> {
        self.data.get("status").cloned()
    }

    fn status_is_not_object(&self) -> bool {
        self.data.get("status").is_some_and(|s| !s.is_object())
    }
}

macro_rules! json_status {
    ($($kind:ty),+) => {$(
        impl JsonStatus for $kind {
            fn status_json(&self) -> Option<Value> {
                self.status
                    .as_ref()
                    .and_then(|s| serde_json::to_value(s).ok())
            }

            // A typed status is an object or absent.
            fn status_is_not_object(&self) -> bool {
                false
            }
        }
    )+};
}

json_status!(
    plinth_api::PromiseRevision,
    plinth_api::ResourceBinding,
    plinth_api::PromiseRelease,
    plinth_api::DryRun
);

/// Reads `name`, lets `mutate` change its `status` (a JSON object, created if absent)
/// and writes the difference with [`patch_status`]. `mutate` returns false to skip the
/// write. Returns the object as stored after the write (or as read when nothing
/// changed); a missing object is the API's 404 error.
pub async fn update_status<K, F>(api: &Api<K>, name: &str, mutate: F) -> Result<K, Error>
where
    K: JsonStatus,
    F: FnMut(&mut Value, &K) -> bool,
{
    status_update(api, name, None, mutate).await
}

/// [`update_status`] of the object `known` is a copy of (a `&K` is a [`Basis::Cached`]
/// one), starting from that copy (module docs).
pub async fn update_status_from<'a, K, F>(
    api: &Api<K>,
    known: impl Into<Basis<'a, K>>,
    mutate: F,
) -> Result<K, Error>
where
    K: JsonStatus + 'a,
    F: FnMut(&mut Value, &K) -> bool,
{
    let basis = known.into();
    let name = basis.copy().meta().name.clone().unwrap_or_default();
    status_update(api, &name, Some(basis), mutate).await
}

async fn status_update<K, F>(
    api: &Api<K>,
    name: &str,
    basis: Option<Basis<'_, K>>,
    mut mutate: F,
) -> Result<K, Error>
where
    K: JsonStatus,
    F: FnMut(&mut Value, &K) -> bool,
{
    let written = guarded_patch(api, name, PatchTarget::Status, basis, |obj| {
        let (before, status) = mutated_status(obj, &mut mutate)?;
        let mut patch = merge_diff(&before, &status);
        if obj.status_is_not_object() {
            // A non-object status is replaced whole.
            patch = status;
        }
        Some(json!({ "status": patch }))
    })
    .await?;
    written.ok_or_else(|| {
        Error::Kube(kube::Error::Api(Box::new(
            kube::core::Status::failure(&format!("{name} not found"), "NotFound").with_code(404),
        )))
    })
}

/// `obj`'s status (an empty object when absent or not an object) before and after
/// `mutate`; `None` when `mutate` declines or changes nothing.
fn mutated_status<K, F>(obj: &K, mutate: &mut F) -> Option<(Value, Value)>
where
    K: JsonStatus,
    F: FnMut(&mut Value, &K) -> bool,
{
    let before = match obj.status_json() {
        Some(s) if s.is_object() => s,
        _ => json!({}),
    };
    let mut status = before.clone();
    if !mutate(&mut status, obj) || status == before {
        return None;
    }
    Some((before, status))
}

/// [`update_status`] that first applies `mutate` to `known`, a copy of the object the
/// caller already has (a watch cache's): when that changes nothing, nothing is read or
/// written and `known` is returned. Otherwise it is [`update_status_from`]. For the steps
/// a reconcile repeats on every wake, which have nothing to change once done; a copy
/// behind the stored object can only skip a write that the newer object's own watch
/// event will bring back to the reconcile.
pub async fn update_status_known<K, F>(api: &Api<K>, known: &K, mut mutate: F) -> Result<K, Error>
where
    K: JsonStatus,
    F: FnMut(&mut Value, &K) -> bool,
{
    if mutated_status(known, &mut mutate).is_none() {
        return Ok(known.clone());
    }
    update_status_from(api, known, mutate).await
}

/// The JSON merge patch (RFC 7386) that turns `before` into `after`: changed keys with
/// their new value (objects recursively), removed keys as `null`.
pub fn merge_diff(before: &Value, after: &Value) -> Value {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            let mut patch = Map::new();
            for (k, v) in a {
                match b.get(k) {
                    Some(old) if old == v => {}
                    Some(old) if old.is_object() && v.is_object() => {
                        patch.insert(k.clone(), merge_diff(old, v));
                    }
                    _ => {
                        patch.insert(k.clone(), v.clone());
                    }
                }
            }
            for k in b.keys() {
                if !a.contains_key(k) {
                    patch.insert(k.clone(), Value::Null);
                }
            }
            Value::Object(patch)
        }
        _ => after.clone(),
    }
}

/// The newest copy of one object a reconcile holds: the one it was handed (a
/// [`Basis::Cached`] copy), then what each of its writes returned (a [`Basis::Fresh`]
/// one), so that the next write starts from a current `resourceVersion` instead of
/// costing a 409, and a write with nothing to change costs no read (module docs).
pub struct Latest<K>(Mutex<(K, bool)>);

impl<K: Clone> Latest<K> {
    /// Starts from `first`, the copy the reconcile was handed.
    pub fn new(first: &K) -> Self {
        Latest(Mutex::new((first.clone(), false)))
    }

    /// The newest copy.
    pub fn get(&self) -> K {
        self.0.lock().expect("poisoned").0.clone()
    }

    /// Keeps what a write returned (`None`: nothing written, the copy stays).
    pub fn remember(&self, written: Option<K>) {
        if let Some(w) = written {
            *self.0.lock().expect("poisoned") = (w, true);
        }
    }

    /// The newest copy and whether it is a write's answer.
    fn held(&self) -> (K, bool) {
        self.0.lock().expect("poisoned").clone()
    }
}

fn basis_of<K>((copy, fresh): &(K, bool)) -> Basis<'_, K> {
    if *fresh {
        Basis::Fresh(copy)
    } else {
        Basis::Cached(copy)
    }
}

impl<K> Latest<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    /// [`patch_status_from`] the newest copy, keeping what it returns.
    ///
    /// # Errors
    ///
    /// The API's error other than a 409 within the retries, or the last 409.
    pub async fn patch_status<F>(&self, api: &Api<K>, compute: F) -> Result<Option<K>, kube::Error>
    where
        F: FnMut(&K) -> Option<Value>,
    {
        let held = self.held();
        let written = patch_status_from(api, basis_of(&held), compute).await?;
        self.remember(written.clone());
        Ok(written)
    }
}

impl<K: JsonStatus> Latest<K> {
    /// [`update_status_from`] the newest copy, keeping what it returns.
    ///
    /// # Errors
    ///
    /// As [`update_status_from`]: the API's error, a 404 when the object is gone.
    pub async fn update_status<F>(&self, api: &Api<K>, mutate: F) -> Result<K, Error>
    where
        F: FnMut(&mut Value, &K) -> bool,
    {
        let held = self.held();
        let written = update_status_from(api, basis_of(&held), mutate).await?;
        self.remember(Some(written.clone()));
        Ok(written)
    }

    /// [`update_status_known`] from the newest copy, keeping what it returns.
    ///
    /// # Errors
    ///
    /// As [`update_status_from`].
    pub async fn update_status_known<F>(&self, api: &Api<K>, mut mutate: F) -> Result<K, Error>
    where
        F: FnMut(&mut Value, &K) -> bool,
    {
        let held = self.held();
        if mutated_status(&held.0, &mut mutate).is_none() {
            return Ok(held.0);
        }
        self.update_status(api, mutate).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applies a merge patch (RFC 7386) the way the API server does.
    fn apply(target: &mut Value, patch: &Value) {
        match (target.as_object_mut(), patch.as_object()) {
            (Some(t), Some(p)) => {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else if v.is_object() && t.get(k).is_some_and(Value::is_object) {
                        apply(t.get_mut(k).unwrap(), v);
                    } else {
                        t.insert(k.clone(), v.clone());
                    }
                }
            }
            _ => *target = patch.clone(),
        }
    }

    #[test]
    fn merge_diff_round_trips() {
        let before = json!({"a": 1, "b": {"c": 2, "d": 3}, "e": [1, 2], "gone": true});
        let after = json!({"a": 1, "b": {"c": 5}, "e": [2], "new": {"x": 1}});
        let patch = merge_diff(&before, &after);
        assert_eq!(
            patch,
            json!({"b": {"c": 5, "d": null}, "e": [2], "new": {"x": 1}, "gone": null})
        );
        let mut t = before.clone();
        apply(&mut t, &patch);
        assert_eq!(t, after);
    }
}
