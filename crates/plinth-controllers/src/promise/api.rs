//! The Promise's API: its resource-request CRD (from `spec.api`), the controller RBAC
//! kept for compatibility with Kratix's objects, and the user roles per Promise API.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use plinth_api::constants::SYSTEM_NAMESPACE;

use super::observed::{Observed, Step};
use crate::context::Context;
use crate::dynamic::RequestApi;
use crate::support::{self, set_condition, set_field};
use crate::{Error, request};
use plinth_api::constants::{condition_types, labels, reasons};

/// Where the Promise's API stands.
pub(super) enum ApiState {
    /// The CRD is not Established yet: its watch event wakes the Promise.
    Waiting,
    /// The CRD serves no version (the message says so): requests cannot be watched.
    NoServedVersion(String),
    /// The CRD is served: requests can be watched at this API.
    Ready(RequestApi),
}

/// Why the Promise's CRD cannot be watched; the message is the Promise's status message.
#[derive(Debug, thiserror::Error)]
enum CrdError {
    /// No version of the CRD is served.
    #[error("CRD {crd} serves no version: resource requests cannot be watched")]
    NoServedVersion { crd: String },
}

/// The API step: installs the CRD and RBAC. Passes the request API on (`None` for a
/// Promise without one); ends the reconcile while the CRD is not Established, and
/// reports the Promise Unavailable (stopping its request controller) when no version
/// is served.
pub(super) async fn reconcile(
    ctx: &Context,
    p: &Observed,
    crd: Option<&Value>,
) -> Result<Step<Option<RequestApi>>, Error> {
    let Some(crd) = crd else {
        return Ok(Step::Next(None));
    };
    match install(ctx, p, crd).await? {
        ApiState::Waiting => Ok(Step::Stop(Action::await_change())),
        ApiState::NoServedVersion(msg) => {
            support::update_status(&p.api, &p.name, |s, _| {
                let mut c = set_condition(
                    s,
                    condition_types::AVAILABLE,
                    "False",
                    reasons::NO_SERVED_VERSION,
                    &msg,
                    None,
                );
                c |= set_field(
                    s,
                    "status",
                    json!(plinth_api::constants::promise_status::UNAVAILABLE),
                );
                c
            })
            .await?;
            ctx.request_controllers.stop(&p.name);
            Ok(Step::Stop(Action::await_change()))
        }
        ApiState::Ready(r) => Ok(Step::Next(Some(r))),
    }
}

/// The resource-request CRD a Promise's `spec.api` installs, if it has an API.
pub(super) fn request_crd(p: &Observed) -> Result<Option<Value>, Error> {
    let Some(api) = p.spec.api.as_ref().filter(|_| p.spec.has_api()) else {
        return Ok(None);
    };
    plinth_api::request_crd::build_request_crd(&p.name, api)
        .map(Some)
        .map_err(|e| Error::InvalidPromise {
            promise: p.name.clone(),
            message: e.to_string(),
        })
}

/// Creates or updates the CRD, then, once it is Established and serves a version,
/// the RBAC and user roles of its resource.
pub(super) async fn install(ctx: &Context, p: &Observed, crd: &Value) -> Result<ApiState, Error> {
    let applied = apply_crd(ctx, p, crd).await?;
    if !established(&applied) {
        return Ok(ApiState::Waiting);
    }
    let api = match served_api(&applied) {
        Ok(api) => api,
        Err(e) => return Ok(ApiState::NoServedVersion(e.to_string())),
    };
    ensure_rbac(ctx, &p.name, &api).await?;
    crate::user_roles::ensure(&ctx.client, &p.name, &api.group, &api.plural).await?;
    Ok(ApiState::Ready(api))
}

/// Whose a resource-request CRD is, by its promise-name label.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum CrdOwner {
    /// No such CRD.
    Absent,
    /// Installed by this Promise.
    This,
    /// Installed by another Promise, named.
    Other(String),
    /// Not installed by a Promise (no promise-name label).
    Unmanaged,
}

impl CrdOwner {
    fn of(crd: &CustomResourceDefinition, promise: &str) -> Self {
        let label = crd.metadata.labels.as_ref();
        match label.and_then(|l| l.get(labels::PROMISE_NAME)) {
            Some(owner) if owner == promise => CrdOwner::This,
            Some(owner) => CrdOwner::Other(owner.clone()),
            None => CrdOwner::Unmanaged,
        }
    }
}

/// Whose the CRD of Promise `p`'s `spec.api` is (`Absent` for a Promise without one).
pub(super) async fn crd_owner(ctx: &Context, p: &Observed) -> Result<CrdOwner, Error> {
    let Some(name) = request_crd(p)?.and_then(|c| c["metadata"]["name"].as_str().map(String::from))
    else {
        return Ok(CrdOwner::Absent);
    };
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    Ok(match crds.get_opt(&name).await? {
        None => CrdOwner::Absent,
        Some(existing) => CrdOwner::of(&existing, &p.name),
    })
}

/// The error of a Promise whose `spec.api` names a CRD it did not install: another
/// Promise's API, or one created by hand. Taking it over would give the requests two
/// Promises' pipelines and, at the Promise's deletion, delete them and the CRD.
fn foreign_crd(p: &Observed, name: &str, owner: &CrdOwner) -> Error {
    let whose = match owner {
        CrdOwner::Other(other) => format!("is the API of Promise {other}"),
        _ => "was not installed by a Promise".to_string(),
    };
    Error::InvalidPromise {
        promise: p.name.clone(),
        message: format!(
            "spec.api: CustomResourceDefinition {name} {whose}; a Promise only serves an API it installs (give spec.api another group or kind, or delete the other first)"
        ),
    }
}

/// Creates the CRD, or replaces it when its versions or labels differ from `crd`;
/// returns it as stored. A CRD this Promise did not install is left alone and refused.
async fn apply_crd(
    ctx: &Context,
    p: &Observed,
    crd: &Value,
) -> Result<CustomResourceDefinition, Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let name = crd["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let desired: CustomResourceDefinition =
        serde_json::from_value(crd.clone()).map_err(Error::Json)?;
    let Some(mut existing) = crds.get_opt(&name).await? else {
        return Ok(crds.create(&PostParams::default(), &desired).await?);
    };
    let owner = CrdOwner::of(&existing, &p.name);
    if owner != CrdOwner::This {
        return Err(foreign_crd(p, &name, &owner));
    }
    let want_versions = serde_json::to_value(&desired.spec.versions).map_err(Error::Json)?;
    let have_versions = serde_json::to_value(&existing.spec.versions).map_err(Error::Json)?;
    let mut changed = want_versions != have_versions;
    let labels = existing
        .metadata
        .labels
        .get_or_insert_with(Default::default);
    for (k, v) in desired.metadata.labels.clone().unwrap_or_default() {
        if labels.get(&k) != Some(&v) {
            labels.insert(k, v);
            changed = true;
        }
    }
    if !changed {
        return Ok(existing);
    }
    existing.spec.versions = desired.spec.versions.clone();
    existing.spec.conversion = desired.spec.conversion.clone();
    existing.spec.preserve_unknown_fields = desired.spec.preserve_unknown_fields;
    Ok(crds
        .replace(&name, &PostParams::default(), &existing)
        .await?)
}

/// True once the CRD's `Established` condition is True.
fn established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

/// The API to watch: the storage version if served, else the first served one.
/// Errors with [`CrdError::NoServedVersion`] when no version is served.
fn served_api(crd: &CustomResourceDefinition) -> Result<RequestApi, CrdError> {
    let versions = &crd.spec.versions;
    let storage = versions
        .iter()
        .find(|v| v.storage)
        .or(versions.first())
        .map(|v| v.name.clone())
        .unwrap_or_default();
    let served = versions
        .iter()
        .find(|v| v.served && v.name == storage)
        .or_else(|| versions.iter().find(|v| v.served))
        .ok_or_else(|| CrdError::NoServedVersion {
            crd: crd.metadata.name.clone().unwrap_or_default(),
        })?;
    Ok(RequestApi {
        group: crd.spec.group.clone(),
        kind: crd.spec.names.kind.clone(),
        plural: crd.spec.names.plural.clone(),
        storage_version: storage,
        served_version: served.name.clone(),
    })
}

/// The controller's ClusterRole and ClusterRoleBinding over the request resource,
/// kept for compatibility with Kratix's objects.
async fn ensure_rbac(ctx: &Context, promise: &str, api: &RequestApi) -> Result<(), Error> {
    let cr_name = plinth_api::names::promise_controller_name(promise);
    let label = json!({labels::PROMISE_NAME: promise});
    let (group, plural) = (&api.group, &api.plural);
    crate::apply::create_or_update(&ctx.client, &json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": cr_name, "labels": label},
        "rules": [
            {"apiGroups": [group], "resources": [plural], "verbs": ["*"]},
            {"apiGroups": [group], "resources": [format!("{plural}/finalizers")], "verbs": ["update"]},
            {"apiGroups": [group], "resources": [format!("{plural}/status")], "verbs": ["get", "update", "patch"]},
        ],
    }))
    .await?;
    crate::apply::create_or_update(&ctx.client, &json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": cr_name, "labels": label},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cr_name},
        "subjects": [{"kind": "ServiceAccount", "name": "kratix-platform-controller-manager", "namespace": SYSTEM_NAMESPACE}],
    }))
    .await
}

/// Starts the request controller of a Promise whose controller was never started in
/// this process, so the requests' own finalizers (delete pipelines) can run; true
/// when it started one.
pub(super) async fn start_for_deletion(ctx: &Context, p: &Observed) -> Result<bool, Error> {
    let Some(crd) = request_crd(p)? else {
        return Ok(false);
    };
    let ApiState::Ready(r) = install(ctx, p, &crd).await? else {
        return Ok(false);
    };
    request::start(&ctx.self_arc(), &p.name, r);
    Ok(true)
}
