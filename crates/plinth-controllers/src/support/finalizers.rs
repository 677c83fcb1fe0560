//! The one finalizer editor of the controllers: a JSON merge patch of
//! `metadata.finalizers` preconditioned on the object's `resourceVersion`, recomputed
//! from a fresh read on a 409 Conflict (a bounded number of times, see
//! [`super::status::CONFLICT_RETRIES`]). New
//! finalizers are never added to an object being deleted (the API server refuses them).

use std::fmt::Debug;

use kube::api::Api;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::status::{PatchTarget, guarded_patch};
use crate::Error;

/// Adds and removes finalizers. Returns `Ok(None)` if the object is gone,
/// `Ok(Some(obj))` otherwise (unchanged when nothing needed doing).
pub async fn edit_finalizers<K>(
    api: &Api<K>,
    name: &str,
    add: &[&str],
    remove: &[&str],
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    guarded_patch(api, name, PatchTarget::Object, None, |current| {
        let existing = current.meta().finalizers.clone().unwrap_or_default();
        let mut wanted: Vec<String> = existing
            .iter()
            .filter(|f| !remove.contains(&f.as_str()))
            .cloned()
            .collect();
        if current.meta().deletion_timestamp.is_none() {
            for f in add {
                if !wanted.iter().any(|w| w == f) {
                    wanted.push((*f).to_string());
                }
            }
        }
        (wanted != existing).then(|| json!({ "metadata": { "finalizers": wanted } }))
    })
    .await
}

/// Makes `obj`'s finalizers `finalizers`: the ones missing are added and the ones not
/// listed removed, with [`edit_finalizers`].
pub async fn set_finalizers<K>(api: &Api<K>, obj: &K, finalizers: Vec<String>) -> Result<(), Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let current = obj.finalizers();
    let add: Vec<&str> = finalizers
        .iter()
        .filter(|f| !current.contains(f))
        .map(String::as_str)
        .collect();
    let remove: Vec<&str> = current
        .iter()
        .filter(|f| !finalizers.contains(f))
        .map(String::as_str)
        .collect();
    edit_finalizers(api, &obj.name_any(), &add, &remove).await?;
    Ok(())
}

/// Removes one finalizer (a no-op when absent).
pub async fn remove_finalizer<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<(), Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    if !obj.finalizers().iter().any(|f| f == finalizer) {
        return Ok(());
    }
    edit_finalizers(api, &obj.name_any(), &[], &[finalizer]).await?;
    Ok(())
}
