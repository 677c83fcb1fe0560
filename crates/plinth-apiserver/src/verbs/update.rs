//! update (PUT), patch (PATCH, server-side apply) and the internal read-modify-write.

use serde_json::{Value, json};

use super::create::create;
use super::{
    MODIFIED, check_metadata, check_mutated, check_namespace_field, check_type, decode_body,
    field_validation, normalize_metadata, record_fields, write,
};
use crate::app::{
    App, Query, RequestContext, cause, dry_run, finalizers, get_object, key_for, meta, meta_mut,
    meta_str, present, rv_of, storage_info, truthy,
};
use crate::error::ApiError;
use crate::resource::ResourceInfo;
use crate::ssa::Owner;
use crate::store::WriteOp;
use crate::webhook::{Attributes, Operation};

/// Everything but metadata (and status, when it is a subresource): what `generation` tracks.
fn spec_part(info: &ResourceInfo, obj: &Value) -> Value {
    let mut m = obj.as_object().cloned().unwrap_or_default();
    m.remove("metadata");
    m.remove("apiVersion");
    m.remove("kind");
    if info.status_subresource {
        m.remove("status");
    }
    Value::Object(m)
}

/// Applies the update rules of the API conventions to `new` given the stored `old`.
async fn prepare_update(
    app: &App,
    info: &ResourceInfo,
    old: &Value,
    mut new: Value,
    status_only: bool,
) -> Result<Value, ApiError> {
    let name = meta_str(old, "name").unwrap_or_default().to_string();
    if status_only {
        return status_update(info, old, new, &name);
    }
    normalize_metadata(&mut new);
    check_metadata(info, &new)?;
    check_no_new_finalizers(info, old, &new, &name)?;
    check_same_uid(info, old, &new, &name)?;
    keep_system_metadata(info, old, &mut new);
    crate::kinds::prepare(app, info, &mut new, Some(old)).await?;
    crate::schema::admit(info, &mut new, Some(old))
        .map_err(|c| ApiError::invalid(info, &name, c))?;
    crate::kinds::validate(app, info, &new, Some(old)).await?;
    if spec_part(info, &new) != spec_part(info, &present(info, old.clone())) {
        let g = meta(old)
            .get("generation")
            .and_then(|g| g.as_i64())
            .unwrap_or(0);
        meta_mut(&mut new).insert("generation".into(), json!(g + 1));
    }
    Ok(new)
}

/// An update through `/status`: only status changes; everything else comes from the
/// stored object.
fn status_update(
    info: &ResourceInfo,
    old: &Value,
    mut new: Value,
    name: &str,
) -> Result<Value, ApiError> {
    let status = new.as_object_mut().and_then(|m| m.remove("status"));
    let mut merged = old.clone();
    if let Some(m) = merged.as_object_mut() {
        match status {
            Some(s) => {
                m.insert("status".into(), s);
            }
            None => {
                m.remove("status");
            }
        }
    }
    merged = present(info, merged);
    crate::schema::admit(info, &mut merged, Some(old))
        .map_err(|c| ApiError::invalid(info, name, c))?;
    Ok(merged)
}

/// An object being deleted may lose finalizers but not gain any (422).
fn check_no_new_finalizers(
    info: &ResourceInfo,
    old: &Value,
    new: &Value,
    name: &str,
) -> Result<(), ApiError> {
    let deleting = meta(old)
        .get("deletionTimestamp")
        .is_some_and(|d| !d.is_null());
    if !deleting {
        return Ok(());
    }
    let old_fin = finalizers(old);
    let added: Vec<String> = finalizers(new)
        .into_iter()
        .filter(|f| !old_fin.contains(f))
        .collect();
    if added.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(
        info,
        name,
        vec![cause(
            "FieldValueForbidden",
            "metadata.finalizers",
            format!(
                "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
            ),
        )],
    ))
}

/// `metadata.uid` is immutable (422 when a body names another one).
fn check_same_uid(
    info: &ResourceInfo,
    old: &Value,
    new: &Value,
    name: &str,
) -> Result<(), ApiError> {
    match meta_str(new, "uid") {
        Some(uid) if Some(uid) != meta(old).get("uid").and_then(|u| u.as_str()) => {
            Err(ApiError::invalid(
                info,
                name,
                vec![cause(
                    "FieldValueInvalid",
                    "metadata.uid",
                    format!("Invalid value: {uid:?}: field is immutable"),
                )],
            ))
        }
        _ => Ok(()),
    }
}

/// Copies the server-owned metadata (and status, where it is a subresource) from the
/// stored object onto the proposed one; drops managedFields and selfLink.
fn keep_system_metadata(info: &ResourceInfo, old: &Value, new: &mut Value) {
    let old_meta = meta(old);
    let m = meta_mut(new);
    for k in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "namespace",
        "name",
        "generation",
        "resourceVersion",
    ] {
        match old_meta.get(k) {
            Some(v) => {
                m.insert(k.into(), v.clone());
            }
            None => {
                m.remove(k);
            }
        }
    }
    m.remove("managedFields");
    m.remove("selfLink");
    if info.status_subresource
        && let Some(m) = new.as_object_mut()
    {
        match old.get("status") {
            Some(s) => {
                m.insert("status".into(), s.clone());
            }
            None => {
                m.remove("status");
            }
        }
    }
}

/// How one update is made: which part of the object it writes, whether it is stored,
/// what its resourceVersion means, and whose change it is.
#[derive(Clone, Copy)]
pub(crate) struct UpdateMode<'a> {
    /// Only the status subresource changes.
    pub status_only: bool,
    /// Admission runs and the result is returned, but nothing is stored.
    pub dry_run: bool,
    /// The proposal's resourceVersion, when it carries one, is a precondition (the client
    /// sent it); otherwise storage races are retried.
    pub explicit_rv: bool,
    /// Whose change it is, for managedFields.
    pub owner: &'a Owner,
}

impl<'a> UpdateMode<'a> {
    /// A change of the whole object by `owner`, stored, without a precondition.
    pub(crate) fn by(owner: &'a Owner) -> Self {
        Self {
            status_only: false,
            dry_run: false,
            explicit_rv: false,
            owner,
        }
    }
}

/// Runs an update: `mutate` turns the stored object into the proposed new one. Retries
/// on storage conflicts unless the proposal carried its own resourceVersion.
async fn update_with<F>(
    app: &App,
    info: &ResourceInfo,
    ns: Option<&str>,
    name: &str,
    mode: UpdateMode<'_>,
    mut mutate: F,
) -> Result<Value, ApiError>
where
    F: FnMut(&Value) -> Result<Value, ApiError>,
{
    let UpdateMode {
        status_only,
        dry_run,
        explicit_rv,
        owner,
    } = mode;
    let key = key_for(info, ns, name);
    let storage = storage_info(app, info);
    for _ in 0..16 {
        let old = present(info, get_object(app, info, ns, name).await?);
        let mut new = mutate(&old)?;
        let applied_fields = match owner {
            Owner::Apply => meta_mut(&mut new).remove("managedFields"),
            _ => None,
        };
        check_type(info, &mut new)?;
        check_body_name(&new, name)?;
        check_namespace_field(info, ns, &mut new)?;
        let old_rv = rv_of(&old);
        // Only a resourceVersion the client sent is a precondition (a patch result carries
        // the stored one).
        let wanted_rv = meta_str(&new, "resourceVersion").map(String::from);
        let conditional = explicit_rv && wanted_rv.is_some();
        if conditional && wanted_rv.and_then(|w| w.parse::<u64>().ok()) != Some(old_rv) {
            return Err(ApiError::conflict(info, name, MODIFIED));
        }
        let admission = Attributes::of(info, Operation::Update, ns, name, dry_run, Some(owner));
        if let Some(a) = &admission {
            crate::webhook::mutate(app, a, Some(&mut new), Some(&old)).await?;
            check_mutated(info, ns, name, &mut new)?;
        }
        let mut new = prepare_update(app, info, &old, new, status_only).await?;
        if !status_only {
            record_fields(info, Some(&old), &mut new, owner, applied_fields);
        }
        if let Some(a) = &admission {
            if !status_only {
                crate::escalation::check(app, a, &new, Some(&old)).await?;
            }
            crate::webhook::validate(app, a, Some(&new), Some(&old)).await?;
        }
        if new == old {
            return Ok(old);
        }
        if dry_run {
            return Ok(new);
        }
        let op = WriteOp::Update {
            key: key.clone(),
            obj: present(&storage, new),
            expected_rv: old_rv,
        };
        if let Some(v) = write(app, info, name, op, !conditional).await? {
            crate::kinds::after_write(app, info, &v).await?;
            return Ok(present(info, v));
        }
    }
    Err(ApiError::conflict(
        info,
        name,
        "too many concurrent writers; try again",
    ))
}

/// The name in a body must be the name on the URL (400).
fn check_body_name(new: &Value, name: &str) -> Result<(), ApiError> {
    let body_name = meta_str(new, "name").unwrap_or(name);
    if body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    Ok(())
}

/// PUT.
pub(crate) async fn update(
    app: &App,
    info: &ResourceInfo,
    ns: Option<&str>,
    name: &str,
    obj: Value,
    status_only: bool,
    cx: &RequestContext,
) -> Result<Value, ApiError> {
    // kube-apiserver reads a resourceVersion of "0" as none: an unconditional update.
    let explicit = meta_str(&obj, "resourceVersion").is_some_and(|rv| !rv.is_empty() && rv != "0");
    let mode = UpdateMode {
        status_only,
        dry_run: cx.dry_run(),
        explicit_rv: explicit,
        owner: &cx.owner,
    };
    update_with(app, info, ns, name, mode, |_| Ok(obj.clone())).await
}

/// PATCH with one of the supported patch types (`cx.content_type`).
pub(crate) async fn patch(
    app: &App,
    info: &ResourceInfo,
    ns: Option<&str>,
    name: &str,
    bytes: &[u8],
    status_only: bool,
    cx: &RequestContext,
) -> Result<Value, ApiError> {
    let q = &cx.q;
    let kind = crate::patch::PatchKind::from_content_type(&cx.content_type, info)?;
    let patch_doc: Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch body: {e}")))?;
    let strict = q.get("fieldValidation").is_some_and(|v| v == "Strict");
    let explicit = match kind {
        crate::patch::PatchKind::Json => patch_doc.as_array().is_some_and(|ops| {
            ops.iter().any(|op| {
                op["path"] == "/metadata/resourceVersion"
                    && op["op"] != "test"
                    && op["op"] != "remove"
            })
        }),
        _ => patch_doc
            .pointer("/metadata/resourceVersion")
            .is_some_and(|v| !v.is_null()),
    };
    let mode = UpdateMode {
        status_only,
        dry_run: cx.dry_run(),
        explicit_rv: explicit,
        owner: &cx.owner,
    };
    update_with(app, info, ns, name, mode, |old| {
        let mut new = crate::patch::apply(kind, old, &patch_doc)?;
        patched_metadata_decodes(info, kind, &patch_doc, &new)?;
        check_patched_identity(old, &new)?;
        if !crate::patch::names_finalizers(kind, &patch_doc)
            && let Some(kept) = meta(old).get("finalizers").cloned()
        {
            meta_mut(&mut new).insert("finalizers".into(), kept);
        }
        if strict {
            field_validation(info, q, &new)?;
        }
        Ok(new)
    })
    .await
}

/// A patched object whose ObjectMeta fields do not have their types fails as in
/// kube-apiserver, where it is decoded again: a strategic merge patch's result by the
/// unstructured converter (422, the patch quoted as Go prints it, `cannot restore map from
/// string`), a JSON or merge patch's by the JSON decoder (422, the patched JSON quoted).
fn patched_metadata_decodes(
    info: &ResourceInfo,
    kind: crate::patch::PatchKind,
    patch_doc: &Value,
    new: &Value,
) -> Result<(), ApiError> {
    use crate::meta_decode::{go_format, invalid_patch, meta_type_error};
    let Some(e) = meta_type_error(&info.kind, new) else {
        return Ok(());
    };
    Err(match kind {
        crate::patch::PatchKind::Strategic => invalid_patch(&go_format(patch_doc), &e.converter),
        _ => invalid_patch(&serde_json::to_string(new).unwrap_or_default(), &e.json),
    })
}

/// Server-side apply (PATCH with `application/apply-patch+yaml`): creates the object when
/// absent, else merges the applied configuration under field ownership. Returns the
/// object and whether it was created. Errors: 400 without `fieldManager`, 409 on
/// ownership conflicts (unless `force=true`), as for create/update otherwise.
pub(crate) async fn apply_request(
    app: &App,
    info: &ResourceInfo,
    ns: Option<&str>,
    name: &str,
    bytes: &[u8],
    status_only: bool,
    q: &Query,
) -> Result<(Value, bool), ApiError> {
    let Some(manager) = q.get("fieldManager").filter(|m| !m.is_empty()) else {
        return Err(ApiError::bad_request(
            "fieldManager is required for apply requests",
        ));
    };
    if status_only {
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            "server-side apply of the status subresource is not supported by this API server; apply the object, or patch /status with a merge patch",
        ));
    }
    let force = truthy(q, "force")?;
    let config = decode_body("application/yaml", bytes)?;
    check_apply_config(info, name, &config)?;
    // Unknown fields: 400 under fieldValidation=Strict (kubectl's default), as for create.
    field_validation(info, q, &config)?;
    for _ in 0..4 {
        let live = match get_object(app, info, ns, name).await {
            Ok(v) => Some(present(info, v)),
            Err(e) if e.code == 404 => None,
            Err(e) => return Err(e),
        };
        if live.is_none() {
            let obj = crate::ssa::apply(info, None, &config, manager, force)?.object;
            match create(app, info, ns, obj, dry_run(q), &Owner::Apply).await {
                Err(e) if e.code == 409 && e.reason == "AlreadyExists" => continue,
                r => return r.map(|v| (v, true)),
            }
        }
        let mode = UpdateMode {
            dry_run: dry_run(q),
            ..UpdateMode::by(&Owner::Apply)
        };
        let updated = update_with(app, info, ns, name, mode, |old| {
            Ok(crate::ssa::apply(info, Some(old), &config, manager, force)?.object)
        })
        .await;
        match updated {
            Err(e) if e.code == 404 => continue,
            r => return r.map(|v| (v, false)),
        }
    }
    Err(ApiError::conflict(
        info,
        name,
        "the object was created and deleted concurrently; try again",
    ))
}

/// An applied configuration must name this resource's apiVersion and kind and the
/// object of the URL.
fn check_apply_config(info: &ResourceInfo, name: &str, config: &Value) -> Result<(), ApiError> {
    let av = config.get("apiVersion").and_then(|v| v.as_str());
    let kind = config.get("kind").and_then(|v| v.as_str());
    if av != Some(info.api_version().as_str()) || kind != Some(info.kind.as_str()) {
        return Err(ApiError::bad_request(format!(
            "the applied configuration has apiVersion {:?} and kind {:?}; this resource is {} {}",
            av.unwrap_or_default(),
            kind.unwrap_or_default(),
            info.api_version(),
            info.kind
        )));
    }
    match meta_str(config, "name") {
        Some(n) if n == name => Ok(()),
        Some(n) => Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        ))),
        None => Err(ApiError::bad_request(
            "metadata.name is required in an applied configuration",
        )),
    }
}

/// A patch may not remove an object's metadata or its name, and may not change its name
/// or namespace (Kubernetes answers 400 BadRequest); `uid` changes are rejected later as
/// an immutable field, and system fields (creationTimestamp, generation...) are reset
/// to the stored values as on any update.
fn check_patched_identity(old: &Value, new: &Value) -> Result<(), ApiError> {
    if !new.get("metadata").is_some_and(Value::is_object) {
        return Err(ApiError::bad_request(
            "metadata: Required value: a patch cannot remove an object's metadata".to_string(),
        ));
    }
    for field in ["name", "namespace"] {
        let (was, now) = (meta_str(old, field), meta_str(new, field));
        if was != now {
            return Err(ApiError::bad_request(format!(
                "metadata.{field}: Invalid value: {:?}: a patch cannot change the {field} of an object (was {:?})",
                now.unwrap_or_default(),
                was.unwrap_or_default()
            )));
        }
    }
    Ok(())
}

/// An update computed from the stored object by `f` (re-run on storage races), made as
/// `mode` says. Used by subresources that write one field of their parent (`scale`).
pub(crate) async fn modify_as(
    app: &App,
    info: &ResourceInfo,
    ns: Option<&str>,
    name: &str,
    mode: UpdateMode<'_>,
    f: impl FnMut(&Value) -> Result<Value, ApiError>,
) -> Result<Value, ApiError> {
    update_with(app, info, ns, name, mode, f).await
}

/// Internal update used by the garbage collector and lifecycle code.
pub(crate) async fn modify(
    app: &App,
    info: &ResourceInfo,
    ns: Option<&str>,
    name: &str,
    f: impl FnMut(&Value) -> Result<Value, ApiError>,
) -> Result<Value, ApiError> {
    update_with(app, info, ns, name, UpdateMode::by(&Owner::Internal), f).await
}

// ---------------------------------------------------------------- delete
