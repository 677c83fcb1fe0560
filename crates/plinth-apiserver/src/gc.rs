//! Garbage collection and namespace cleanup (what Kubernetes' garbage-collector and
//! namespace controllers do, driven here by the committed event stream):
//!
//! * An owner is removed → each dependent loses that owner reference; a dependent with
//!   no remaining live owner is deleted (background propagation).
//! * An owner carries `deletionTimestamp` + the `foregroundDeletion` finalizer → its
//!   dependents are deleted (foreground); when none remain the finalizer is removed.
//! * An owner carries `deletionTimestamp` + the `orphan` finalizer → the owner references
//!   are removed from its dependents, then the finalizer.
//! * A namespace carries `deletionTimestamp` → everything in it is deleted; when it is
//!   empty the namespace itself is removed.

use std::sync::{Arc, Weak};

use serde_json::Value;
use tokio::sync::mpsc;

use crate::app::{App, finalizers, meta, meta_str, set_finalizers};
use crate::error::ApiError;
use crate::resource::ResourceInfo;
use crate::store::{Event, EventType, ObjKey, WriteOp};
use crate::verbs::{self, DeleteOptions};

/// Whether the collector needs to look at an event.
pub(crate) fn interesting(e: &Event) -> bool {
    match e.kind {
        EventType::Deleted => true,
        _ => being_deleted(&e.object),
    }
}

/// Whether `o` carries a `deletionTimestamp`.
fn being_deleted(o: &Value) -> bool {
    meta(o)
        .get("deletionTimestamp")
        .is_some_and(|d| !d.is_null())
}

/// Deletes `key` with `propagation`, unless it is gone or already being deleted.
async fn delete_dependent(
    app: &App,
    info: &ResourceInfo,
    key: &ObjKey,
    propagation: &str,
) -> Result<(), ApiError> {
    match app.store.get(key.clone()).await? {
        Some(o) if !being_deleted(&o) => {}
        _ => return Ok(()),
    }
    let options = DeleteOptions {
        propagation: Some(propagation.into()),
        ..Default::default()
    };
    ignore_missing(verbs::delete(app, info, ns_opt(key), &key.name, &options).await)
}

fn info_of(app: &App, rkey: &str) -> Option<Arc<ResourceInfo>> {
    let (group, plural) = rkey.split_once('/')?;
    app.registry.storage_of(group, plural)
}

fn ns_opt(k: &ObjKey) -> Option<&str> {
    if k.ns.is_empty() { None } else { Some(&k.ns) }
}

/// Runs the collector until the server goes away.
pub(crate) async fn run(app: Weak<App>, mut rx: mpsc::UnboundedReceiver<Event>) {
    while let Some(ev) = rx.recv().await {
        let Some(app) = app.upgrade() else { return };
        if let Err(e) = handle(&app, &ev).await {
            tracing::warn!(
                "garbage collection after {} {}/{}: {}",
                ev.kind.as_str(),
                ev.key.rkey,
                ev.key.name,
                e.message
            );
        }
    }
}

async fn handle(app: &App, ev: &Event) -> Result<(), ApiError> {
    let obj = &ev.object;
    let uid = meta_str(obj, "uid").unwrap_or_default().to_string();
    match ev.kind {
        EventType::Deleted => {
            // Dependents of the removed owner.
            for dep in app.store.dependents(uid.clone()).await? {
                release_dependent(app, &dep, &uid).await?;
            }
            // Owners waiting in foreground deletion for this dependent.
            for owner_uid in owner_uids(obj) {
                if let Some((okey, owner)) = app.store.find_by_uid(owner_uid.clone()).await?
                    && finalizers(&owner).iter().any(|f| f == "foregroundDeletion")
                {
                    foreground(app, &okey, &owner).await?;
                }
            }
            // The last object of a terminating namespace.
            if !ev.key.ns.is_empty() {
                let ns_key = ObjKey {
                    rkey: crate::registry::rkey("", "namespaces"),
                    ns: String::new(),
                    name: ev.key.ns.clone(),
                };
                if let Some(ns) = app.store.get(ns_key.clone()).await?
                    && being_deleted(&ns)
                {
                    namespace_cleanup(app, &ns_key, &ns).await?;
                }
            }
        }
        _ => {
            if ev.key.rkey == crate::registry::rkey("", "namespaces") {
                namespace_cleanup(app, &ev.key, obj).await?;
                return Ok(());
            }
            let f = finalizers(obj);
            if f.iter().any(|f| f == "orphan") {
                orphan(app, &ev.key, obj).await?;
            } else if f.iter().any(|f| f == "foregroundDeletion") {
                foreground(app, &ev.key, obj).await?;
            }
        }
    }
    Ok(())
}

fn owner_uids(obj: &Value) -> Vec<String> {
    meta(obj)
        .get("ownerReferences")
        .and_then(|o| o.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|r| r.get("uid").and_then(|u| u.as_str()).map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Removes the reference to a gone owner; deletes the dependent when no live owner remains.
async fn release_dependent(app: &App, dep: &ObjKey, gone_uid: &str) -> Result<(), ApiError> {
    let Some(info) = info_of(app, &dep.rkey) else {
        return Ok(());
    };
    let Some(obj) = app.store.get(dep.clone()).await? else {
        return Ok(());
    };
    let mut live = false;
    for u in owner_uids(&obj) {
        if u != gone_uid && app.store.uid_exists(u).await? {
            live = true;
        }
    }
    if live {
        let gone = gone_uid.to_string();
        ignore_missing(
            verbs::modify(app, &info, ns_opt(dep), &dep.name, move |o| {
                Ok(without_owner(o, &gone))
            })
            .await,
        )
    } else {
        ignore_missing(
            verbs::delete(
                app,
                &info,
                ns_opt(dep),
                &dep.name,
                &DeleteOptions {
                    propagation: Some("Background".into()),
                    ..Default::default()
                },
            )
            .await,
        )
    }
}

fn without_owner(o: &Value, uid: &str) -> Value {
    let mut o = o.clone();
    if let Some(refs) = o
        .get_mut("metadata")
        .and_then(|m| m.get_mut("ownerReferences"))
        .and_then(|r| r.as_array_mut())
    {
        refs.retain(|r| r.get("uid").and_then(|u| u.as_str()) != Some(uid));
        if refs.is_empty() {
            o["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("ownerReferences");
        }
    }
    o
}

fn ignore_missing<T>(r: Result<T, ApiError>) -> Result<(), ApiError> {
    match r {
        Ok(_) => Ok(()),
        Err(e) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

async fn remove_finalizer(app: &App, key: &ObjKey, fin: &str) -> Result<(), ApiError> {
    let Some(info) = info_of(app, &key.rkey) else {
        return Ok(());
    };
    let fin = fin.to_string();
    ignore_missing(
        verbs::modify(app, &info, ns_opt(key), &key.name, move |o| {
            let mut o = o.clone();
            let f: Vec<String> = finalizers(&o).into_iter().filter(|x| *x != fin).collect();
            set_finalizers(&mut o, f);
            Ok(o)
        })
        .await,
    )
}

async fn foreground(app: &App, key: &ObjKey, owner: &Value) -> Result<(), ApiError> {
    let uid = meta_str(owner, "uid").unwrap_or_default().to_string();
    let deps = app.store.dependents(uid).await?;
    if deps.is_empty() {
        return remove_finalizer(app, key, "foregroundDeletion").await;
    }
    for dep in deps {
        let Some(info) = info_of(app, &dep.rkey) else {
            continue;
        };
        delete_dependent(app, &info, &dep, "Foreground").await?;
    }
    Ok(())
}

async fn orphan(app: &App, key: &ObjKey, owner: &Value) -> Result<(), ApiError> {
    let uid = meta_str(owner, "uid").unwrap_or_default().to_string();
    for dep in app.store.dependents(uid.clone()).await? {
        let Some(info) = info_of(app, &dep.rkey) else {
            continue;
        };
        let u = uid.clone();
        ignore_missing(
            verbs::modify(app, &info, ns_opt(&dep), &dep.name, move |o| {
                Ok(without_owner(o, &u))
            })
            .await,
        )?;
    }
    remove_finalizer(app, key, "orphan").await
}

async fn namespace_cleanup(app: &App, ns_key: &ObjKey, ns: &Value) -> Result<(), ApiError> {
    if !being_deleted(ns) {
        return Ok(());
    }
    let keys = app.store.keys_in_namespace(ns_key.name.clone()).await?;
    let mut remaining = 0;
    for k in keys {
        remaining += 1;
        let Some(info) = info_of(app, &k.rkey) else {
            // A resource whose CRD is gone: remove the row directly.
            let _ = app
                .store
                .write(WriteOp::Delete {
                    key: k.clone(),
                    expected_rv: None,
                    expected_uid: None,
                })
                .await;
            continue;
        };
        delete_dependent(app, &info, &k, "Background").await?;
    }
    if remaining == 0
        || app
            .store
            .keys_in_namespace(ns_key.name.clone())
            .await?
            .is_empty()
    {
        // Empty: the namespace finalizer is done; remove the namespace.
        let r = app
            .store
            .write(WriteOp::Delete {
                key: ns_key.clone(),
                expected_rv: None,
                expected_uid: None,
            })
            .await;
        match r {
            Ok(_) | Err(crate::store::StoreError::NotFound) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
