//! ResourceBindings and Promise upgrades: which PromiseRevision each resource request
//! runs with, as Kratix does it.
//!
//! Every request gets a ResourceBinding in its namespace, found by the labels
//! `kratix.io/promise-name` and `kratix.io/resource-name` (its name does not matter, so a
//! binding created before its request is adopted). Its `spec.version` is `latest` (follow
//! the Promise's latest revision) or an exact Promise version (stay on that revision).
//! The request's workflows run with the bound revision's Promise spec, so moving a binding
//! re-runs the request with that spec. The binding's status records the outcome:
//! `lastAppliedVersion`, `failedVersion` and the `UpgradeSucceeded` condition. A version
//! whose workflow failed is not retried by itself (no oscillation); the
//! manual-reconciliation label on the binding retries it.

pub mod ownership;

use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams,
    Preconditions,
};
use kube::{Resource, ResourceExt};
use plinth_api::{PromiseRef, PromiseRevision, ResourceBinding, ResourceBindingSpec, ResourceRef};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

use ownership::Found;

use crate::Error;
use crate::context::Context;
use crate::request::caches::RequestCaches;
use crate::support::{self as status, set_condition, set_field};
use crate::workflow::engine::Progress;
use plinth_api::constants::labels;
use plinth_api::constants::{
    VERSION_LATEST, VERSION_NOT_SET, annotations, condition_types, events as event_reasons, reasons,
};

/// The PromiseRevision a request runs with.
#[derive(Clone, Debug, PartialEq)]
pub struct BoundRevision {
    /// The revision's name.
    pub name: String,
    /// Its Promise version (`not-set` for an unversioned Promise).
    pub version: String,
    /// The Promise spec frozen in it.
    pub spec: Value,
}

/// The label selector of a request's binding.
fn selector(promise: &str, request: &str) -> String {
    format!(
        "{}={promise},{}={}",
        labels::PROMISE_NAME,
        labels::RESOURCE_NAME,
        plinth_api::names::resource_name_label_value(request)
    )
}

/// The request's binding, if any (see [`find_all`]): the one binding with its labels, or
/// the one a user or an output made beside the platform's own. More than one binding
/// made by others is an error naming them.
pub async fn find(
    ctx: &Context,
    promise: &str,
    caches: Option<&RequestCaches>,
    rr: &DynamicObject,
) -> Result<Option<ResourceBinding>, Error> {
    Ok(find_all(ctx, promise, caches, rr).await?.map(|(b, _)| b))
}

/// The bindings carrying the request's labels, whatever their names: from the
/// controller's cache (`caches`, indexed by request), else (no cache, or none cached yet,
/// so a binding is never created twice) listed through the API; sorted out by
/// [`ownership::choose`]: the request's binding and the platform's own ones it replaces.
/// A conflict (more than one binding not made by the platform) is an error naming them.
pub async fn find_all(
    ctx: &Context,
    promise: &str,
    caches: Option<&RequestCaches>,
    rr: &DynamicObject,
) -> Result<Option<(ResourceBinding, Vec<ResourceBinding>)>, Error> {
    let ns = rr.namespace().unwrap_or_default();
    let name_label = plinth_api::names::resource_name_label_value(&rr.name_any());
    let cached: Vec<ResourceBinding> = caches
        .map(|c| {
            c.bindings_by_request
                .of(&c.bindings, &format!("{ns}/{name_label}"))
        })
        .unwrap_or_default()
        .into_iter()
        .filter(|b| b.labels().get(labels::PROMISE_NAME).map(String::as_str) == Some(promise))
        .map(|b| b.as_ref().clone())
        .collect();
    let found = if cached.is_empty() {
        let api: Api<ResourceBinding> = Api::namespaced(ctx.client.clone(), &ns);
        api.list(&ListParams::default().labels(&selector(promise, &rr.name_any())))
            .await?
            .items
    } else {
        cached
    };
    match ownership::choose(found) {
        Found::None => Ok(None),
        Found::One(b) => Ok(Some((b, Vec::new()))),
        Found::Adopt { keep, replaced } => Ok(Some((keep, replaced))),
        Found::Conflict(names) => Err(Error::Invalid {
            object: format!("resource request {ns}/{}", rr.name_any()),
            message: format!(
                "more than one ResourceBinding carries its labels: {}",
                names.join(", ")
            ),
        }),
    }
}

/// Deletes the platform's own bindings of a request that a binding made by a user or an
/// output replaced (`keep`), and says so on the request. Deleted with a UID
/// precondition, so a binding re-created under the same name meanwhile stays.
async fn replace_auto_created(
    ctx: &Context,
    component: &str,
    rr: &DynamicObject,
    keep: &ResourceBinding,
    replaced: &[ResourceBinding],
) -> Result<(), Error> {
    let ns = rr.namespace().unwrap_or_default();
    let api: Api<ResourceBinding> = Api::namespaced(ctx.client.clone(), &ns);
    for b in replaced {
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: b.uid(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&b.name_any(), &dp).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        crate::support::publish(
            &ctx.recorder(component),
            &crate::support::reference(rr),
            crate::support::event_type(false),
            event_reasons::BINDING_ADOPTED,
            format!(
                "Adopted ResourceBinding {} at version {}; deleted ResourceBinding {} the platform had created",
                keep.name_any(),
                keep.spec.version,
                b.name_any()
            ),
        )
        .await;
    }
    Ok(())
}

/// The labels a binding mirrors from its request: all of the request's labels except the
/// reconciliation triggers, plus the two identifying labels. A manual-reconciliation label
/// already on the binding is kept (it is the user's request to retry).
fn desired_labels(
    promise: &str,
    rr: &DynamicObject,
    binding: Option<&ResourceBinding>,
) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = rr
        .labels()
        .iter()
        .filter(|(k, _)| *k != labels::MANUAL_RECONCILIATION && *k != labels::RUN_FROM_START)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    out.insert(labels::PROMISE_NAME.into(), promise.into());
    out.insert(
        labels::RESOURCE_NAME.into(),
        plinth_api::names::resource_name_label_value(&rr.name_any()),
    );
    if let Some(v) = binding.and_then(|b| b.labels().get(labels::MANUAL_RECONCILIATION)) {
        out.insert(labels::MANUAL_RECONCILIATION.into(), v.clone());
    }
    out
}

/// The version a new binding starts with: the version the request last ran with through
/// a binding (`status.resourceBindingVersion`, so a deleted binding comes back as it was),
/// else the latest version under the `pinned` strategy, else `latest`.
fn initial_version(ctx: &Context, rr: &DynamicObject, latest_version: &str) -> String {
    if let Some(v) = rr.data["status"]["resourceBindingVersion"]
        .as_str()
        .filter(|v| !v.is_empty())
    {
        return v.to_string();
    }
    if ctx.config().resource_binding_version_strategy == "pinned" {
        return latest_version.to_string();
    }
    VERSION_LATEST.to_string()
}

/// Creates the request's binding, or brings an existing one (including one created by a
/// user before the request) up to date: mirrored labels, `promiseRef`, `resourceRef`, and
/// `spec.version` when it is empty. Writes only what differs; returns the binding.
pub async fn ensure(
    ctx: &Context,
    component: &str,
    promise: &str,
    caches: &RequestCaches,
    rr: &DynamicObject,
    latest_version: &str,
) -> Result<ResourceBinding, Error> {
    match ensure_from(ctx, component, promise, Some(caches), rr, latest_version).await {
        // The cached binding was behind the stored one: start again from the API.
        Err(Error::Kube(e)) if crate::support::is_conflict(&e) => {
            ensure_from(ctx, component, promise, None, rr, latest_version).await
        }
        other => other,
    }
}

/// [`ensure`] starting from the binding in `caches`, or as listed through the API.
async fn ensure_from(
    ctx: &Context,
    component: &str,
    promise: &str,
    caches: Option<&RequestCaches>,
    rr: &DynamicObject,
    latest_version: &str,
) -> Result<ResourceBinding, Error> {
    let ns = rr.namespace().unwrap_or_default();
    let api: Api<ResourceBinding> = Api::namespaced(ctx.client.clone(), &ns);
    let existing = match find_all(ctx, promise, caches, rr).await? {
        Some((keep, replaced)) if !replaced.is_empty() => {
            replace_auto_created(ctx, component, rr, &keep, &replaced).await?;
            Some(keep)
        }
        other => other.map(|(b, _)| b),
    };
    let labels = desired_labels(promise, rr, existing.as_ref());
    let resource_ref = ResourceRef {
        name: rr.name_any(),
        namespace: Some(ns.clone()),
        ..ResourceRef::default()
    };
    let Some(binding) = existing else {
        // A pinned binding keeps the version it starts with, so it is read from the API,
        // not from a revision cache that may not have the newest revision yet.
        let latest = if ctx.config().resource_binding_version_strategy == "pinned" {
            latest_version_from_api(ctx, promise)
                .await?
                .unwrap_or_else(|| latest_version.to_string())
        } else {
            latest_version.to_string()
        };
        let spec = ResourceBindingSpec {
            version: initial_version(ctx, rr, &latest),
            promise_ref: PromiseRef {
                name: promise.to_string(),
                ..PromiseRef::default()
            },
            resource_ref,
            ..ResourceBindingSpec::default()
        };
        return create(ctx, component, promise, rr, &api, labels, spec).await;
    };
    let mut patch = json!({"metadata": {"resourceVersion": binding.resource_version()}});
    let mut changed = false;
    let have = binding.labels();
    if *have != labels {
        let mut l: Map<String, Value> = labels.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        for k in have.keys().filter(|k| !labels.contains_key(*k)) {
            l.insert(k.clone(), Value::Null);
        }
        patch["metadata"]["labels"] = Value::Object(l);
        changed = true;
    }
    let spec = &binding.spec;
    if spec.version.is_empty() {
        patch["spec"]["version"] = json!(initial_version(ctx, rr, latest_version));
        changed = true;
    }
    if spec.promise_ref.name != promise {
        patch["spec"]["promiseRef"] = json!({"name": promise});
        changed = true;
    }
    if spec.resource_ref.name != resource_ref.name
        || spec.resource_ref.namespace != resource_ref.namespace
    {
        patch["spec"]["resourceRef"] = json!({"name": resource_ref.name, "namespace": ns});
        changed = true;
    }
    if !changed {
        return Ok(binding);
    }
    Ok(api
        .patch(
            &binding.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?)
}

/// Creates the request's binding with `labels` and `spec`, announced on the request and
/// annotated as the platform's (a binding with its labels arriving later replaces it).
async fn create(
    ctx: &Context,
    component: &str,
    promise: &str,
    rr: &DynamicObject,
    api: &Api<ResourceBinding>,
    labels: BTreeMap<String, String>,
    spec: ResourceBindingSpec,
) -> Result<ResourceBinding, Error> {
    let name = plinth_api::names::resource_binding_name(&rr.name_any(), promise);
    let obj = ResourceBinding {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: rr.namespace(),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(
                annotations::AUTO_CREATED_BINDING.to_string(),
                "true".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        spec,
        status: None,
    };
    let created = api.create(&PostParams::default(), &obj).await?;
    crate::support::publish(
        &ctx.recorder(component),
        &crate::support::reference(rr),
        crate::support::event_type(false),
        event_reasons::BINDING_CREATED,
        format!(
            "Created ResourceBinding {name} at version {}",
            created.spec.version
        ),
    )
    .await;
    Ok(created)
}

/// The Promise's revisions.
fn revisions(caches: &RequestCaches) -> Vec<PromiseRevision> {
    caches.revisions()
}

fn bound(r: &PromiseRevision) -> BoundRevision {
    BoundRevision {
        name: r.name_any(),
        version: r.spec.version.clone(),
        spec: r.spec.promise_spec.clone(),
    }
}

/// The latest revision: the one labelled latest whose status agrees; while the Promise
/// controller moves the label, the one labelled latest.
fn latest(revs: &[PromiseRevision]) -> Option<&PromiseRevision> {
    let labelled = |r: &&PromiseRevision| {
        r.labels()
            .get(labels::LATEST_REVISION)
            .is_some_and(|v| v == "true")
    };
    revs.iter()
        .filter(labelled)
        .find(|r| r.status.as_ref().and_then(|s| s.latest) == Some(true))
        .or_else(|| revs.iter().find(labelled))
}

/// The Promise's latest revision, if it has one yet.
pub fn latest_revision(caches: &RequestCaches) -> Option<BoundRevision> {
    latest(&revisions(caches)).map(bound)
}

/// The version of the Promise's latest revision as listed through the API now.
async fn latest_version_from_api(ctx: &Context, promise: &str) -> Result<Option<String>, Error> {
    let api: Api<PromiseRevision> = Api::all(ctx.client.clone());
    let revs = api
        .list(&ListParams::default().labels(&format!("{}={promise}", labels::PROMISE_NAME)))
        .await?
        .items;
    Ok(latest(&revs).map(|r| bound(r).version))
}

/// The version of the Promise's latest revision, if it has one yet.
pub fn latest_version(caches: &RequestCaches) -> Option<String> {
    latest(&revisions(caches)).map(|r| bound(r).version)
}

/// The revision for `version` (`latest` or an exact version). An exact version without a
/// revision is an error naming the request, the binding's field and the version.
fn resolve(
    caches: &RequestCaches,
    promise: &str,
    rr: &DynamicObject,
    version: &str,
) -> Result<BoundRevision, Error> {
    let revs = revisions(caches);
    let found = if version == VERSION_LATEST || version.is_empty() {
        latest(&revs)
    } else {
        revs.iter().find(|r| r.spec.version == version)
    };
    found.map(bound).ok_or_else(|| {
        Error::NotFound(format!(
            "PromiseRevision of Promise {promise} at version {version:?} (ResourceBinding spec.version of resource request {}/{})",
            rr.namespace().unwrap_or_default(),
            rr.name_any()
        ))
    })
}

/// The revision a request's configure workflow runs with: its binding's version; without
/// a binding (deleted), the version it last ran with, else the latest.
pub async fn resolve_for_configure(
    ctx: &Context,
    component: &str,
    promise: &str,
    caches: &RequestCaches,
    rr: &DynamicObject,
    binding: &ResourceBinding,
) -> Result<BoundRevision, Error> {
    let version = binding.spec.version.as_str();
    match resolve(caches, promise, rr, version) {
        Ok(b) => Ok(b),
        Err(e) => {
            crate::support::publish(
                &ctx.recorder(component),
                &crate::support::reference(rr),
                crate::support::event_type(true),
                event_reasons::FAILED_PROMISE_REVISION_LOOKUP,
                e.to_string(),
            )
            .await;
            Err(e)
        }
    }
}

/// The Promise spec a deleting request's delete workflow runs with: the revision it last
/// ran with (`status.promiseVersion`, else its binding's `lastAppliedVersion`), else the
/// latest; `live` when no revision is found, so deletion is never blocked.
pub async fn spec_for_delete(
    ctx: &Context,
    promise: &str,
    caches: &RequestCaches,
    rr: &DynamicObject,
    live: &Value,
) -> Result<Value, Error> {
    let mut version = rr.data["status"]["promiseVersion"]
        .as_str()
        .map(str::to_string);
    if version.is_none() {
        version = find(ctx, promise, Some(caches), rr)
            .await?
            .and_then(|b| b.status?.last_applied_version);
    }
    let version = version.unwrap_or_else(|| VERSION_LATEST.to_string());
    Ok(resolve(caches, promise, rr, &version)
        .map(|b| b.spec)
        .unwrap_or_else(|_| live.clone()))
}

fn is_versioned(v: Option<&str>) -> bool {
    v.is_some_and(|v| !v.is_empty() && v != VERSION_NOT_SET)
}

/// The version named at the end of an `UpgradeInProgress` message, if the binding is in
/// progress.
fn in_progress_version(status: &Value) -> Option<String> {
    status::condition(status, condition_types::UPGRADE_SUCCEEDED)
        .filter(|c| c["reason"] == reasons::UPGRADE_IN_PROGRESS)
        .and_then(|c| c["message"].as_str())
        .and_then(|m| m.rsplit("version ").next())
        .map(|v| v.split_whitespace().next().unwrap_or_default().to_string())
}

/// Starts an upgrade when the bound version differs from the version the request last
/// ran with, or when the binding carries the manual-reconciliation label (a retry): the
/// request gets the manual-reconciliation label and the binding
/// `UpgradeSucceeded=Unknown/UpgradeInProgress`. A version whose last attempt failed is
/// not started again by itself. Unversioned Promises have no upgrades. Returns true when
/// it wrote, and the reconcile should stop (the writes wake it again).
pub async fn start_upgrade(
    ctx: &Context,
    rr_api: &Api<DynamicObject>,
    rr: &DynamicObject,
    binding: &ResourceBinding,
    bound: &BoundRevision,
) -> Result<bool, Error> {
    let current = rr.data["status"]["promiseVersion"].as_str();
    if !is_versioned(current) {
        return Ok(false);
    }
    let ns = rr.namespace().unwrap_or_default();
    let bindings: Api<ResourceBinding> = Api::namespaced(ctx.client.clone(), &ns);
    let bstatus = crate::support::status::JsonStatus::status_json(binding).unwrap_or(Value::Null);
    let desired = bound.version.clone();
    let manual = binding
        .labels()
        .get(labels::MANUAL_RECONCILIATION)
        .is_some_and(|v| v == "true");
    let message = if manual {
        format!("Reconciliation requested for version {desired}")
    } else {
        if current == Some(desired.as_str()) {
            return Ok(false);
        }
        let failed_here = status::condition(&bstatus, condition_types::UPGRADE_SUCCEEDED)
            .is_some_and(|c| c["status"] == "False")
            && bstatus["failedVersion"] == desired.as_str();
        if failed_here || in_progress_version(&bstatus).as_deref() == Some(desired.as_str()) {
            return Ok(false);
        }
        format!("Upgrade to version {desired} is in progress")
    };
    let patch = json!({"metadata": {"labels": {labels::MANUAL_RECONCILIATION: "true"}}});
    rr_api
        .patch(
            &rr.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    if manual {
        crate::workflow::engine::remove_labels(
            &bindings,
            binding,
            &[labels::MANUAL_RECONCILIATION],
        )
        .await?;
    }
    status::update_status(&bindings, &binding.name_any(), |s, _| {
        let mut c = set_condition(
            s,
            condition_types::UPGRADE_SUCCEEDED,
            "Unknown",
            reasons::UPGRADE_IN_PROGRESS,
            &message,
            None,
        );
        if manual {
            c |= status::ensure_object(s).remove("failedVersion").is_some();
        }
        c
    })
    .await?;
    Ok(true)
}

/// Records a configure workflow's outcome on the binding. Success: `lastAppliedVersion`
/// is the bound version, `failedVersion` cleared, and `UpgradeSucceeded=True/UpgradeComplete`
/// when an upgrade was under way (in progress, failed before, or a different version was
/// applied). Failure of an upgrade: `UpgradeSucceeded=False/UpgradeFailed` naming the
/// failed version and pipeline, `failedVersion` set, `lastAppliedVersion` unchanged.
/// Writes only what changed.
pub async fn record_outcome(
    ctx: &Context,
    binding: &ResourceBinding,
    bound: &BoundRevision,
    progress: &Progress,
) -> Result<(), Error> {
    let ns = binding.namespace().unwrap_or_default();
    let api: Api<ResourceBinding> = Api::namespaced(ctx.client.clone(), &ns);
    let version = bound.version.clone();
    match progress {
        Progress::Done => {
            status::update_status_known(&api, binding, |s, _| {
                let last = s["lastAppliedVersion"].as_str().map(str::to_string);
                let upgrading = status::condition(s, condition_types::UPGRADE_SUCCEEDED)
                    .is_some_and(|c| c["status"] != "True")
                    || last.as_deref().is_some_and(|l| l != version);
                let mut c = set_field(s, "lastAppliedVersion", json!(version));
                c |= status::ensure_object(s).remove("failedVersion").is_some();
                if upgrading {
                    c |= set_condition(
                        s,
                        condition_types::UPGRADE_SUCCEEDED,
                        "True",
                        reasons::UPGRADE_COMPLETE,
                        &format!("Resource is at version {version}"),
                        None,
                    );
                }
                c
            })
            .await?;
        }
        Progress::Failed { pipeline } => {
            status::update_status(&api, &binding.name_any(), |s, _| {
                let last = s["lastAppliedVersion"].as_str().map(str::to_string);
                let upgrading = in_progress_version(s).is_some()
                    || last.as_deref().is_some_and(|l| l != version);
                if !upgrading && s["failedVersion"] != version.as_str() {
                    return false;
                }
                let mut c = set_field(s, "failedVersion", json!(version));
                c |= set_condition(
                    s,
                    condition_types::UPGRADE_SUCCEEDED,
                    "False",
                    reasons::UPGRADE_FAILED,
                    &format!("Upgrade to version {version} failed: A Configure Pipeline has failed: {pipeline}"),
                    None,
                );
                c
            })
            .await?;
        }
        Progress::Running | Progress::Suspended { .. } => {}
    }
    Ok(())
}

/// The request's status fields that record which binding version and Promise version it
/// last ran with (`status.resourceBindingVersion`, `status.promiseVersion`).
pub fn set_request_versions(
    status: &mut Value,
    binding: &ResourceBinding,
    bound: &BoundRevision,
) -> bool {
    let mut c = set_field(status, "promiseVersion", json!(bound.version));
    c |= set_field(
        status,
        "resourceBindingVersion",
        json!(binding.spec.version),
    );
    c
}

/// The binding step of a request's reconcile: ensures its binding, holds a version the
/// binding's applier did not declare ([`version_held`]), resolves the revision it is
/// bound to and starts an upgrade when one is due. `None` when it wrote to start an
/// upgrade, or holds, and the reconcile should stop (the label change, or the agent
/// taking the version back, wakes it again).
pub async fn bind(
    ctx: &Context,
    component: &str,
    promise: &str,
    caches: &RequestCaches,
    rr_api: &Api<DynamicObject>,
    rr: &DynamicObject,
) -> Result<Option<(ResourceBinding, BoundRevision)>, Error> {
    let latest = latest_version(caches).unwrap_or_else(|| VERSION_NOT_SET.to_string());
    let binding = ensure(ctx, component, promise, caches, rr, &latest).await?;
    if version_held(ctx, component, rr, &binding).await? {
        return Ok(None);
    }
    let bound = resolve_for_configure(ctx, component, promise, caches, rr, &binding).await?;
    if start_upgrade(ctx, rr_api, rr, &binding, &bound).await? {
        return Ok(None);
    }
    Ok(Some((binding, bound)))
}

/// Whether the request keeps the version it last ran with although its binding's
/// `spec.version` moved: the Destination agent applies the binding (a compound Promise's
/// output declares it) and another manager changed the version by hand
/// ([`ownership::version_taken_from_agent`]). The agent takes the field back on its next
/// pass, so no workflow runs with a version the output did not ask for; a Warning on the
/// binding names the manager. Only a version change is checked (the managed fields are
/// read through the API then, since the cache drops them).
async fn version_held(
    ctx: &Context,
    component: &str,
    rr: &DynamicObject,
    binding: &ResourceBinding,
) -> Result<bool, Error> {
    let last = rr.data["status"]["resourceBindingVersion"].as_str();
    let now = binding.spec.version.as_str();
    if last.is_none_or(str::is_empty) || last == Some(now) {
        return Ok(false);
    }
    // The caches keep bindings with their managed fields cleared (an empty list).
    let full = if binding
        .metadata
        .managed_fields
        .as_ref()
        .is_some_and(|m| !m.is_empty())
    {
        binding.clone()
    } else {
        let ns = binding.namespace().unwrap_or_default();
        let api: Api<ResourceBinding> = Api::namespaced(ctx.client.clone(), &ns);
        match api.get_opt(&binding.name_any()).await? {
            Some(b) => b,
            None => return Ok(false),
        }
    };
    let Some(manager) = ownership::version_taken_from_agent(&full) else {
        return Ok(false);
    };
    let regarding = full.object_ref(&());
    crate::support::publish(
        &ctx.recorder(component),
        &regarding,
        crate::support::event_type(true),
        event_reasons::BINDING_VERSION_HELD,
        format!(
            "spec.version {} was set by {manager}, but the destination agent applies this ResourceBinding from a resource request's output, which declares the version; resource request {}/{} stays at {} until the agent takes the field back",
            now,
            rr.namespace().unwrap_or_default(),
            rr.name_any(),
            last.unwrap_or_default()
        ),
    )
    .await;
    Ok(true)
}

/// The request a binding belongs to (for watches): `spec.resourceRef`, namespace
/// defaulting to the binding's.
pub fn request_of(binding: &ResourceBinding) -> Option<(String, String)> {
    let r = &binding.spec.resource_ref;
    let name = Some(r.name.clone()).filter(|n| !n.is_empty())?;
    let ns = r.namespace.clone().or_else(|| binding.namespace())?;
    Some((name, ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_progress_version_reads_both_messages() {
        let mut s = json!({});
        set_condition(
            &mut s,
            condition_types::UPGRADE_SUCCEEDED,
            "Unknown",
            reasons::UPGRADE_IN_PROGRESS,
            "Upgrade to version v2 is in progress",
            None,
        );
        assert_eq!(in_progress_version(&s).as_deref(), Some("v2"));
        set_condition(
            &mut s,
            condition_types::UPGRADE_SUCCEEDED,
            "Unknown",
            reasons::UPGRADE_IN_PROGRESS,
            "Reconciliation requested for version v0.3.0-FAILING",
            None,
        );
        assert_eq!(in_progress_version(&s).as_deref(), Some("v0.3.0-FAILING"));
        set_condition(
            &mut s,
            condition_types::UPGRADE_SUCCEEDED,
            "False",
            reasons::UPGRADE_FAILED,
            "Upgrade to version v3 failed",
            None,
        );
        assert_eq!(in_progress_version(&s), None);
    }
}
