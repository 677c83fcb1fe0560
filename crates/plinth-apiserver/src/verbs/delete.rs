//! delete and deletecollection, following finalizers and the propagation policy.

use axum::response::Response;
use http::StatusCode;
use serde_json::{Value, json};

use super::write;
use crate::app::{
    App, Filter, PROTECTED_NAMESPACES, Query, Render, dry_run, finalizers, get_object, is_crd,
    key_for, meta, meta_mut, meta_str, present, respond_objects, rv_of, set_finalizers,
    storage_info, storage_rkey,
};
use crate::error::ApiError;
use crate::resource::ResourceInfo;
use crate::store::{ListRange, WriteOp};
use crate::timestamp::now;
use crate::webhook::{Attributes, Operation};

/// Parsed `DeleteOptions` (body or query).
#[derive(Debug, Default, Clone)]
pub(crate) struct DeleteOptions {
    pub propagation: Option<String>,
    pub precondition_rv: Option<u64>,
    pub precondition_uid: Option<String>,
    pub dry_run: bool,
    /// `gracePeriodSeconds`: for a Pod, how long its containers get between SIGTERM and
    /// SIGKILL (the Pod's `terminationGracePeriodSeconds` when not given).
    pub grace_period: Option<i64>,
}

impl DeleteOptions {
    /// Reads DeleteOptions from a request body (JSON) and query; 400 on a bad body or
    /// propagation policy.
    pub(crate) fn parse(bytes: &[u8], q: &Query) -> Result<DeleteOptions, ApiError> {
        let mut o = DeleteOptions {
            propagation: q.get("propagationPolicy").cloned(),
            dry_run: dry_run(q),
            // Negative is allowed: for a Pod it means "at once", as in Kubernetes.
            grace_period: crate::app::query_int(q, "gracePeriodSeconds")?,
            ..Default::default()
        };
        if q.get("orphanDependents").is_some_and(|v| v == "true") {
            o.propagation = Some("Orphan".into());
        }
        if !bytes.iter().all(|b| b.is_ascii_whitespace()) {
            let v: Value = serde_json::from_slice(bytes)
                .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?;
            if let Some(p) = v.get("propagationPolicy").and_then(|p| p.as_str()) {
                o.propagation = Some(p.into());
            }
            if v.get("orphanDependents").and_then(|p| p.as_bool()) == Some(true) {
                o.propagation = Some("Orphan".into());
            }
            if let Some(rv) = v
                .pointer("/preconditions/resourceVersion")
                .and_then(|p| p.as_str())
            {
                o.precondition_rv = Some(crate::store::parse_revision(rv).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "invalid DeleteOptions preconditions.resourceVersion {rv:?}: {}",
                        crate::store::INVALID_REVISION
                    ))
                })?);
            }
            if let Some(uid) = v.pointer("/preconditions/uid").and_then(|p| p.as_str()) {
                o.precondition_uid = Some(uid.into());
            }
            if let Some(g) = v.get("gracePeriodSeconds").and_then(Value::as_i64) {
                o.grace_period = Some(g);
            }
            if v.get("dryRun")
                .and_then(|d| d.as_array())
                .is_some_and(|a| a.iter().any(|x| x == "All"))
            {
                o.dry_run = true;
            }
        }
        if let Some(p) = &o.propagation
            && !matches!(p.as_str(), "Background" | "Foreground" | "Orphan")
        {
            return Err(ApiError::bad_request(format!(
                "propagationPolicy {p:?} is not one of Background, Foreground, Orphan"
            )));
        }
        Ok(o)
    }
}

/// Deletes an object following finalizers and the propagation policy.
pub(crate) async fn delete(
    app: &App,
    info: &ResourceInfo,
    ns: Option<&str>,
    name: &str,
    opts: &DeleteOptions,
) -> Result<Value, ApiError> {
    let is_ns = info.group.is_empty() && info.plural == "namespaces";
    if is_ns && PROTECTED_NAMESPACES.contains(&name) {
        return Err(ApiError {
            code: 403,
            reason: "Forbidden",
            message: format!(
                "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
            ),
            details: Some(json!({"name": name, "group": "", "kind": "namespaces"})),
        });
    }
    // Retry on resourceVersion races unless the client made the version a precondition.
    let retry = opts.precondition_rv.is_none();
    for _ in 0..16 {
        let old = present(info, get_object(app, info, ns, name).await?);
        check_preconditions(info, name, opts, &old)?;
        if let Some(a) = Attributes::of(info, Operation::Delete, ns, name, opts.dry_run, None) {
            crate::webhook::mutate(app, &a, None, Some(&old)).await?;
            crate::webhook::validate(app, &a, None, Some(&old)).await?;
        }
        let already = meta(&old)
            .get("deletionTimestamp")
            .is_some_and(|d| !d.is_null());
        let mut fins = finalizers(&old);
        match opts.propagation.as_deref() {
            Some("Foreground") if !fins.iter().any(|f| f == "foregroundDeletion") => {
                fins.push("foregroundDeletion".into())
            }
            Some("Orphan") if !fins.iter().any(|f| f == "orphan") => fins.push("orphan".into()),
            _ => {}
        }
        // A namespace is only marked: the namespace lifecycle empties and removes it.
        if is_ns {
            if already {
                return Ok(old);
            }
            let mut new = mark_deleting(&old);
            new["status"] = json!({"phase": "Terminating"});
            if opts.dry_run {
                return Ok(new);
            }
            return write_update(app, info, ns, name, new, rv_of(&old), false)
                .await?
                .ok_or_else(|| ApiError::internal("unexpected storage outcome"));
        }
        // Finalizers pending: mark the object and leave it to their owners.
        if !fins.is_empty() {
            if already && fins == finalizers(&old) {
                return Ok(old);
            }
            let mut new = old.clone();
            set_finalizers(&mut new, fins);
            if !already {
                new = mark_deleting(&new);
            }
            if opts.dry_run {
                return Ok(new);
            }
            match write_update(app, info, ns, name, new, rv_of(&old), retry).await? {
                Some(v) => return Ok(v),
                None => continue,
            }
        }
        if opts.dry_run {
            return Ok(old);
        }
        // A Pod deleted with a grace period is removed as marked with it (an update that
        // sets deletionTimestamp on an object without finalizers removes it, and the
        // removal event carries the update), so whoever runs its containers (the
        // embedded runner, which watches Pods) stops them with that period and not the
        // Pod's own. Still one write.
        if let Some(grace) = opts.grace_period.filter(|_| is_pod(info))
            && !already
        {
            let mut new = mark_deleting(&old);
            meta_mut(&mut new).insert("deletionGracePeriodSeconds".into(), json!(grace.max(0)));
            match write_update(app, info, ns, name, new, rv_of(&old), retry).await? {
                Some(v) => return Ok(v),
                None => continue,
            }
        }
        if let Some(v) = remove_now(app, info, ns, name, &old, retry).await? {
            return Ok(v);
        }
    }
    Err(ApiError::conflict(
        info,
        name,
        "too many concurrent writers; try again",
    ))
}

/// The `preconditions` of DeleteOptions (resourceVersion, uid): 409 when they do not hold.
fn check_preconditions(
    info: &ResourceInfo,
    name: &str,
    opts: &DeleteOptions,
    old: &Value,
) -> Result<(), ApiError> {
    if let Some(rv) = opts.precondition_rv
        && rv != rv_of(old)
    {
        return Err(ApiError::conflict(
            info,
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                rv_of(old)
            ),
        ));
    }
    if let Some(uid) = &opts.precondition_uid
        && Some(uid.as_str()) != meta_str(old, "uid")
    {
        return Err(ApiError::conflict(
            info,
            name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta_str(old, "uid").unwrap_or_default()
            ),
        ));
    }
    Ok(())
}

fn is_pod(info: &ResourceInfo) -> bool {
    info.group.is_empty() && info.plural == "pods"
}

/// A copy of `old` with deletionTimestamp (now) and a zero grace period.
fn mark_deleting(old: &Value) -> Value {
    let mut new = old.clone();
    let m = meta_mut(&mut new);
    m.insert("deletionTimestamp".into(), json!(now()));
    m.insert("deletionGracePeriodSeconds".into(), json!(0));
    new
}

/// Removes the object from storage, with what its kind needs around that (a CRD's
/// objects and served resource, ClusterRole aggregation). `Ok(None)` on a
/// resourceVersion race the caller retries.
async fn remove_now(
    app: &App,
    info: &ResourceInfo,
    ns: Option<&str>,
    name: &str,
    old: &Value,
    retry: bool,
) -> Result<Option<Value>, ApiError> {
    if is_crd(info) {
        crate::kinds::remove_crd_resources(app, old).await?;
    }
    let op = WriteOp::Delete {
        key: key_for(info, ns, name),
        expected_rv: Some(rv_of(old)),
        expected_uid: None,
    };
    let Some(v) = write(app, info, name, op, retry).await? else {
        return Ok(None);
    };
    if is_crd(info) {
        app.registry.unregister_crd(name);
    }
    Ok(Some(present(info, v)))
}

/// Stores `new` over the object at `expected_rv` and returns it as served.
async fn write_update(
    app: &App,
    info: &ResourceInfo,
    ns: Option<&str>,
    name: &str,
    new: Value,
    expected_rv: u64,
    retry: bool,
) -> Result<Option<Value>, ApiError> {
    let storage = storage_info(app, info);
    let op = WriteOp::Update {
        key: key_for(info, ns, name),
        obj: present(&storage, new),
        expected_rv,
    };
    Ok(write(app, info, name, op, retry)
        .await?
        .map(|v| present(info, v)))
}

/// DELETE on a collection: deletes every object the selectors match (objects that
/// disappear meanwhile are skipped) and lists what was deleted.
pub(crate) async fn delete_collection(
    app: &App,
    info: &ResourceInfo,
    ns: Option<String>,
    q: &Query,
    opts: &DeleteOptions,
) -> Result<Response, ApiError> {
    let filter = Filter::for_resource(info, q)?;
    let res = app
        .store
        .list(
            ListRange::all(storage_rkey(info)).in_namespace(ns),
            Box::new(move |o| filter.matches(o)),
        )
        .await?;
    let mut out = Vec::new();
    for o in res.items {
        let name = meta_str(&o, "name").unwrap_or_default().to_string();
        let ons = meta_str(&o, "namespace").map(String::from);
        match delete(app, info, ons.as_deref(), &name, opts).await {
            Ok(v) => out.push(v),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let lm = json!({"resourceVersion": app.store.head().to_string()});
    Ok(respond_objects(
        info,
        &Render::Plain,
        out,
        Some(lm),
        StatusCode::OK,
    ))
}

// ---------------------------------------------------------------- discovery
