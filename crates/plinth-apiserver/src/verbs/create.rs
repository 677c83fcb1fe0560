//! create (POST) and the objects every new namespace gets.

use serde_json::{Value, json};

use super::{
    check_metadata, check_mutated, check_namespace_field, check_type, normalize_metadata,
    record_fields, write,
};
use crate::app::{
    App, cause, is_crd, key_for, meta, meta_mut, meta_str, name_error, present, storage_info,
};
use crate::error::{ApiError, group_resource};
use crate::registry::rkey;
use crate::resource::ResourceInfo;
use crate::ssa::Owner;
use crate::store::{ObjKey, WriteOp};
use crate::timestamp::now;
use crate::webhook::{Attributes, Operation};

/// Five characters of the alphabet Kubernetes uses for generated name suffixes.
fn random_suffix() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Creates an object (POST). Returns the stored object.
pub(crate) async fn create(
    app: &App,
    info: &ResourceInfo,
    ns: Option<&str>,
    mut obj: Value,
    dry_run: bool,
    owner: &Owner,
) -> Result<Value, ApiError> {
    check_type(info, &mut obj)?;
    let applied_fields = match owner {
        Owner::Apply => meta_mut(&mut obj).remove("managedFields"),
        _ => None,
    };
    check_namespace_field(info, ns, &mut obj)?;
    let name = resolve_name(info, &mut obj)?;
    normalize_metadata(&mut obj);
    check_metadata(info, &obj)?;
    if info.namespaced {
        check_namespace_open(app, info, ns.unwrap_or_default(), &name).await?;
    }
    let admission = Attributes::of(info, Operation::Create, ns, &name, dry_run, Some(owner));
    if let Some(a) = &admission {
        crate::webhook::mutate(app, a, Some(&mut obj), None).await?;
        check_mutated(info, ns, &name, &mut obj)?;
    }
    reset_system_metadata(info, &mut obj);
    crate::kinds::prepare(app, info, &mut obj, None).await?;
    crate::schema::admit(info, &mut obj, None).map_err(|c| ApiError::invalid(info, &name, c))?;
    crate::kinds::validate(app, info, &obj, None).await?;
    record_fields(info, None, &mut obj, owner, applied_fields);
    if let Some(a) = &admission {
        crate::escalation::check(app, a, &obj, None).await?;
        crate::webhook::validate(app, a, Some(&obj), None).await?;
    }
    if dry_run {
        return Ok(obj);
    }
    let storage = storage_info(app, info);
    let op = WriteOp::Create {
        key: key_for(info, ns, &name),
        obj: present(&storage, obj),
    };
    let Some(v) = write(app, info, &name, op, false).await? else {
        return Err(ApiError::internal("unexpected storage outcome"));
    };
    crate::kinds::after_write(app, info, &v).await?;
    if info.builtin && info.group.is_empty() && info.plural == "namespaces" {
        namespace_defaults(app, &name).await?;
    }
    Ok(v)
}

/// The new object's name: `metadata.name`, or `generateName` plus a random suffix
/// (written into the object). 422 when neither is given or the name breaks the
/// resource's name rule.
fn resolve_name(info: &ResourceInfo, obj: &mut Value) -> Result<String, ApiError> {
    let name = match (meta_str(obj, "name"), meta_str(obj, "generateName")) {
        (Some(n), _) => n.to_string(),
        (None, Some(g)) => {
            let causes = crate::validation::generate_name_causes(g, &|candidate| {
                let prefix = format!("Invalid value: {candidate:?}: ");
                name_error(info, candidate)
                    .map(|m| m.strip_prefix(&prefix).unwrap_or(&m).to_string())
                    .into_iter()
                    .collect()
            });
            if !causes.is_empty() {
                return Err(ApiError::invalid(info, "", causes));
            }
            let n = format!("{g}{}", random_suffix());
            meta_mut(obj).insert("name".into(), json!(n));
            n
        }
        (None, None) => {
            return Err(ApiError::invalid(
                info,
                "",
                vec![cause(
                    "FieldValueRequired",
                    "metadata.name",
                    "Required value: name or generateName is required",
                )],
            ));
        }
    };
    if let Some(msg) = name_error(info, &name) {
        return Err(ApiError::invalid(
            info,
            &name,
            vec![cause("FieldValueInvalid", "metadata.name", msg)],
        ));
    }
    Ok(name)
}

/// A namespaced object needs its namespace to exist (404) and not be terminating (403).
async fn check_namespace_open(
    app: &App,
    info: &ResourceInfo,
    ns: &str,
    name: &str,
) -> Result<(), ApiError> {
    let ns_obj = app
        .store
        .get(ObjKey {
            rkey: rkey("", "namespaces"),
            ns: String::new(),
            name: ns.to_string(),
        })
        .await?;
    match ns_obj {
        None => Err(ApiError::not_found("", "namespaces", ns)),
        Some(n)
            if meta(&n)
                .get("deletionTimestamp")
                .is_some_and(|d| !d.is_null()) =>
        {
            Err(ApiError {
                code: 403,
                reason: "Forbidden",
                message: format!(
                    "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                    group_resource(info)
                ),
                details: Some(
                    json!({"name": name, "group": info.group, "kind": info.plural, "causes": [{"reason": "NamespaceTerminating", "message": format!("namespace {ns} is being terminated"), "field": "metadata.namespace"}]}),
                ),
            })
        }
        _ => Ok(()),
    }
}

/// Sets the fields the server owns on a new object (uid, creationTimestamp,
/// generation 1) and drops what a client may not set; status is dropped where it is a
/// subresource (except on CRDs, whose status the server itself fills).
fn reset_system_metadata(info: &ResourceInfo, obj: &mut Value) {
    let m = meta_mut(obj);
    m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    m.insert("creationTimestamp".into(), json!(now()));
    m.insert("generation".into(), json!(1));
    for k in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
    ] {
        m.remove(k);
    }
    if info.status_subresource
        && !is_crd(info)
        && let Some(m) = obj.as_object_mut()
    {
        m.remove("status");
    }
}

/// What every namespace gets (Kubernetes' service-account controller and root-CA
/// publisher): a `default` ServiceAccount, so Pods without `serviceAccountName` can get
/// a token, and, when serving HTTPS, the ConfigMap `kube-root-ca.crt` holding the CA
/// (`ca.crt`) for in-cluster clients. Existing objects are left alone.
pub(crate) async fn namespace_defaults(app: &App, ns: &str) -> Result<(), ApiError> {
    let mut wanted = vec![(
        "serviceaccounts",
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}),
    )];
    if let Some(ca) = &app.ca_pem {
        wanted.push((
            "configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": ca}}),
        ));
    }
    for (plural, obj) in wanted {
        let Some(info) = app.registry.lookup("", "v1", plural) else {
            continue;
        };
        match Box::pin(create(app, &info, Some(ns), obj, false, &Owner::Internal)).await {
            Ok(_) => {}
            Err(e) if e.code == 409 || e.code == 403 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
