//! Create-or-update of arbitrary objects given as JSON ("Objects are
//! applied as Create → on AlreadyExists, Update").

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::Value;

use crate::Error;

/// The dynamic API for an object's apiVersion/kind (namespaced when it has a namespace).
/// Plurals follow the regular `<kind>s` form, which holds for every kind Plinth applies
/// this way (ServiceAccount, ConfigMap, Role(Binding), ClusterRole(Binding), Work, ...).
pub fn dynamic_api(
    client: &Client,
    obj: &Value,
) -> Result<(Api<DynamicObject>, ApiResource), Error> {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, &format!("{}s", kind.to_ascii_lowercase()));
    let api = match obj["metadata"]["namespace"].as_str() {
        Some(ns) if !ns.is_empty() => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    };
    Ok((api, ar))
}

/// Creates `obj`, or replaces the existing object's content (keeping its metadata other
/// than labels and annotations) when it already exists. A ServiceAccount that exists
/// without the `kratix.io/promise-name` label belongs to someone else and is left alone.
pub async fn create_or_update(client: &Client, obj: &Value) -> Result<(), Error> {
    create_or_update_reporting(client, obj).await.map(|_| ())
}

/// [`create_or_update`], telling whether the object was created (`true`) or already
/// existed (`false`).
///
/// # Errors
/// As [`create_or_update`].
pub async fn create_or_update_reporting(client: &Client, obj: &Value) -> Result<bool, Error> {
    let (api, _) = dynamic_api(client, obj)?;
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let desired: DynamicObject = serde_json::from_value(obj.clone()).map_err(Error::Json)?;
    for _ in 0..5 {
        // Read first: every Job of a Promise applies the same objects again, so they
        // almost always exist already.
        let Some(mut existing) = api.get_opt(&name).await? else {
            match api.create(&PostParams::default(), &desired).await {
                Ok(_) => return Ok(true),
                Err(ref e) if crate::support::is_already_exists(e) => continue,
                Err(e) => return Err(e.into()),
            }
        };
        if obj["kind"] == "ServiceAccount"
            && !existing
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(plinth_api::constants::labels::PROMISE_NAME))
        {
            return Ok(false);
        }
        let mut changed = false;
        for (key, value) in obj.as_object().into_iter().flatten() {
            if matches!(key.as_str(), "apiVersion" | "kind" | "metadata" | "status") {
                continue;
            }
            if existing.data.get(key) != Some(value) {
                existing.data[key] = value.clone();
                changed = true;
            }
        }
        for (field, target) in [
            ("labels", &mut existing.metadata.labels),
            ("annotations", &mut existing.metadata.annotations),
        ] {
            if let Some(map) = obj["metadata"][field].as_object() {
                let t = target.get_or_insert_with(Default::default);
                for (k, v) in map {
                    let v = v.as_str().unwrap_or_default().to_string();
                    if t.get(k) != Some(&v) {
                        t.insert(k.clone(), v);
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            return Ok(false);
        }
        match api.replace(&name, &PostParams::default(), &existing).await {
            Ok(_) => return Ok(false),
            Err(ref e) if crate::support::is_conflict(e) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::Conflict(format!(
        "{} {name}: kept conflicting while updating",
        obj["kind"]
    )))
}
