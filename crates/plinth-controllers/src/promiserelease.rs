//! The PromiseRelease controller: installs the Promise published at an
//! http(s) URL, optionally with an `Authorization` header taken from a Secret, and
//! removes it when the PromiseRelease is deleted. Fetch errors surface as a condition
//! and a Warning event quoting the cause.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::Error;
use crate::context::Context;
use crate::support::harness::{Harness, Start};
use crate::support::resources::promise_resource;
use crate::support::{self, set_condition, set_field};
use crate::support::{remove_finalizer, set_finalizers};
use plinth_api::constants::{condition_types, finalizers, labels, messages, reasons};
use plinth_api::{Promise, PromiseRelease};

const COMPONENT: &str = plinth_api::constants::events::PROMISE_RELEASE_CONTROLLER;

/// Runs the PromiseRelease controller.
pub async fn run(ctx: Arc<Context>) {
    let api: Api<PromiseRelease> = Api::all(ctx.client.clone());
    // A Promise the release installed that is deleted or changed by hand wakes it, so it
    // is put back.
    let promises: Api<Promise> = Api::all(ctx.client.clone());
    Controller::new(api, watcher::Config::default())
        .owns(
            promises,
            watcher::Config::default().labels(labels::PROMISE_RELEASE_NAME),
        )
        .start(Harness::new("promiserelease"), reconcile, ctx)
        .await;
}

/// One reconcile, a failure of it reported on the PromiseRelease
/// ([`crate::support::outcome`]).
async fn reconcile(pr: Arc<PromiseRelease>, ctx: Arc<Context>) -> Result<Action, Error> {
    let result = reconcile_steps(pr.clone(), ctx.clone()).await;
    crate::support::outcome::report_typed(&ctx, COMPONENT, pr.as_ref(), result).await
}

/// Deletion, or finalizer, the already-installed check, the fetch and its version
/// checks, then the Promise's create or update.
async fn reconcile_steps(pr: Arc<PromiseRelease>, ctx: Arc<Context>) -> Result<Action, Error> {
    let api: Api<PromiseRelease> = Api::all(ctx.client.clone());
    let owned = owned_promises(&ctx, &pr.name_any()).await?;
    if pr.meta().deletion_timestamp.is_some() {
        return delete(&ctx, &api, &pr, &owned).await;
    }
    if add_finalizer(&api, &pr).await? {
        return Ok(Action::await_change());
    }
    if is_installed(&pr, &owned) {
        installed(&api, &pr.name_any()).await?;
        return Ok(Action::await_change());
    }
    match fetch_checked(&ctx, &api, &pr, &owned).await? {
        Checked::Install(fetched) => install(&ctx, &api, &pr, fetched).await,
        Checked::Stop(action) => Ok(action),
    }
}

/// The Promises this release installed (labelled with its name).
async fn owned_promises(ctx: &Context, name: &str) -> Result<Vec<Promise>, Error> {
    let selector = format!("{}={}", labels::PROMISE_RELEASE_NAME, name);
    Ok(Api::<Promise>::all(ctx.client.clone())
        .list(&ListParams::default().labels(&selector))
        .await?
        .items)
}

/// Whether the one Promise this release owns already has the version it asks for.
fn is_installed(pr: &PromiseRelease, owned: &[Promise]) -> bool {
    let want_version = pr.spec.version.as_deref().unwrap_or_default();
    owned.len() == 1
        && !want_version.is_empty()
        && owned[0]
            .labels()
            .get(labels::PROMISE_VERSION)
            .map(String::as_str)
            == Some(want_version)
}

/// What the checks before an install decided.
enum Checked {
    /// Install this fetched Promise.
    Install(Value),
    /// Stop with this action: a failure was reported, or the fetched version was written
    /// to the spec.
    Stop(Action),
}

/// The fetch and its checks: one owned Promise at most, a fetched Promise with a version
/// label, matching `spec.version` (an empty one takes the fetched version).
async fn fetch_checked(
    ctx: &Context,
    api: &Api<PromiseRelease>,
    pr: &PromiseRelease,
    owned: &[Promise],
) -> Result<Checked, Error> {
    let name = pr.name_any();
    let want_version = pr.spec.version.clone().unwrap_or_default();
    let fail = async |reason: &str, message: String| -> Result<Checked, Error> {
        Ok(Checked::Stop(fail(ctx, api, pr, reason, message).await?))
    };
    if owned.len() > 1 {
        let msg = format!(
            "more than one Promise carries {}={}",
            labels::PROMISE_RELEASE_NAME,
            name
        );
        return fail(reasons::FAILED_TO_CREATE_OR_UPDATE_PROMISE, msg).await;
    }
    let fetched = match fetch(ctx, pr).await {
        Ok(p) => p,
        Err(cause) => {
            let msg = format!("Failed to fetch Promise from URL: {cause}");
            return fail(reasons::FAILED_TO_FETCH_PROMISE, msg).await;
        }
    };
    let Some(version) = fetched["metadata"]["labels"][labels::PROMISE_VERSION].as_str() else {
        let msg = format!(
            "the fetched Promise has no {} label",
            labels::PROMISE_VERSION
        );
        return fail(reasons::VERSION_LABEL_NOT_FOUND, msg).await;
    };
    if want_version.is_empty() {
        let patch = json!({"spec": {"version": version}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        return Ok(Checked::Stop(Action::await_change()));
    }
    if version != want_version {
        let msg =
            format!("Version labels do not match, found: {version}, expected: {want_version}");
        return fail(reasons::VERSION_NOT_MATCHING, msg).await;
    }
    Ok(Checked::Install(fetched))
}

/// Creates or updates the fetched Promise; a refusal is reported on the release.
async fn install(
    ctx: &Context,
    api: &Api<PromiseRelease>,
    pr: &PromiseRelease,
    fetched: Value,
) -> Result<Action, Error> {
    // The fetched Promise is written as fetched: its spec is not round-tripped through
    // the typed Promise.
    let raw: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &promise_resource());
    let fail = |reason, message| fail(ctx, api, pr, reason, message);
    let applied = match apply_promise(&raw, pr, fetched).await {
        // Another release's Promise: said on this release, and left to its owner.
        Err(Error::Invalid { message, .. }) => {
            return fail(reasons::FAILED_TO_CREATE_OR_UPDATE_PROMISE, message).await;
        }
        other => other?,
    };
    match applied {
        Ok(()) => {
            installed(api, &pr.name_any()).await?;
            Ok(Action::await_change())
        }
        Err(kube::Error::Api(e)) if e.is_invalid() => {
            support::publish(
                &ctx.recorder(COMPONENT),
                &support::typed_reference(pr),
                plinth_api::events::EventType::Warning,
                plinth_api::constants::events::INVALID_PROMISE,
                e.message.clone(),
            )
            .await;
            fail(reasons::FAILED_TO_CREATE_OR_UPDATE_PROMISE, e.message).await
        }
        Err(e) => fail(reasons::FAILED_TO_CREATE_OR_UPDATE_PROMISE, e.to_string()).await,
    }
}

/// Adds the promise-cleanup finalizer; true when it wrote.
async fn add_finalizer(api: &Api<PromiseRelease>, pr: &PromiseRelease) -> Result<bool, Error> {
    if pr
        .finalizers()
        .iter()
        .any(|f| f == finalizers::PROMISE_CLEANUP)
    {
        return Ok(false);
    }
    let mut f = pr.finalizers().to_vec();
    f.push(finalizers::PROMISE_CLEANUP.to_string());
    set_finalizers(api, pr, f).await?;
    Ok(true)
}

/// Deletion: deletes the Promises it installed, waits (`requeue_default`) until they
/// are gone, then removes the finalizer.
async fn delete(
    ctx: &Context,
    api: &Api<PromiseRelease>,
    pr: &PromiseRelease,
    owned: &[Promise],
) -> Result<Action, Error> {
    if owned.is_empty() {
        remove_finalizer(api, pr, finalizers::PROMISE_CLEANUP).await?;
        return Ok(Action::await_change());
    }
    let promises: Api<Promise> = Api::all(ctx.client.clone());
    for p in owned
        .iter()
        .filter(|p| p.meta().deletion_timestamp.is_none())
    {
        match promises
            .delete(&p.name_any(), &DeleteParams::background())
            .await
        {
            Ok(_) => {}
            Err(ref e) if crate::support::is_not_found(e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Action::requeue(ctx.config().requeue_default))
}

/// Creates the fetched Promise, labelled with and controlled by the release, or
/// replaces the spec, labels, annotations and owner of an existing one. The outer
/// error is a failed read; the inner result is the write's, which the caller reports.
async fn apply_promise(
    promises: &Api<DynamicObject>,
    pr: &PromiseRelease,
    fetched: Value,
) -> Result<Result<(), kube::Error>, Error> {
    let name = pr.name_any();
    let promise_name = fetched["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut desired = fetched;
    desired["metadata"]["labels"][labels::PROMISE_RELEASE_NAME] = json!(name);
    desired["metadata"]["ownerReferences"] = json!([{
        "apiVersion": plinth_api::API_VERSION, "kind": "PromiseRelease", "name": name,
        "uid": pr.meta().uid, "controller": true, "blockOwnerDeletion": true,
    }]);
    let Some(mut existing) = promises.get_opt(&promise_name).await? else {
        let obj: DynamicObject = serde_json::from_value(desired).map_err(Error::Json)?;
        return Ok(promises.create(&Default::default(), &obj).await.map(|_| ()));
    };
    if let Some(other) = controlling_release(&existing)
        .filter(|o| o.uid != pr.meta().uid.clone().unwrap_or_default())
    {
        return Err(Error::Invalid {
            object: format!("PromiseRelease {name}"),
            message: format!(
                "Promise {promise_name} is already installed by PromiseRelease {}; delete that release first",
                other.name
            ),
        });
    }
    existing.data["spec"] = desired["spec"].clone();
    let l = existing
        .metadata
        .labels
        .get_or_insert_with(Default::default);
    for (k, v) in desired["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
    {
        l.insert(k.clone(), v.as_str().unwrap_or_default().to_string());
    }
    let a = existing
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    for (k, v) in desired["metadata"]["annotations"]
        .as_object()
        .into_iter()
        .flatten()
    {
        a.insert(k.clone(), v.as_str().unwrap_or_default().to_string());
    }
    existing.metadata.owner_references =
        serde_json::from_value(desired["metadata"]["ownerReferences"].clone()).ok();
    Ok(promises
        .replace(&promise_name, &Default::default(), &existing)
        .await
        .map(|_| ()))
}

/// The PromiseRelease that controls `promise`, if one does (its controller owner).
fn controlling_release(
    promise: &DynamicObject,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    promise
        .owner_references()
        .iter()
        .find(|o| o.kind == "PromiseRelease" && o.controller == Some(true))
}

async fn installed(api: &Api<PromiseRelease>, name: &str) -> Result<(), Error> {
    support::update_status(api, name, |s, _| {
        let mut c = set_field(s, "status", json!("Installed"));
        c |= set_condition(
            s,
            condition_types::INSTALLED,
            "True",
            reasons::INSTALLED_SUCCESSFULLY,
            messages::INSTALLED_SUCCESSFULLY,
            None,
        );
        c
    })
    .await?;
    Ok(())
}

async fn fail(
    ctx: &Context,
    api: &Api<PromiseRelease>,
    pr: &PromiseRelease,
    reason: &str,
    message: String,
) -> Result<Action, Error> {
    let installed = pr
        .status
        .as_ref()
        .and_then(|s| plinth_api::find_condition(&s.conditions, condition_types::INSTALLED));
    let changed = installed.is_none_or(|c| c.reason != reason || c.message != message);
    support::update_status(api, &pr.name_any(), |s, _| {
        let mut c = set_field(s, "status", json!("Error installing"));
        c |= set_condition(
            s,
            condition_types::INSTALLED,
            "False",
            reason,
            &message,
            None,
        );
        c
    })
    .await?;
    if changed {
        support::publish(
            &ctx.recorder(COMPONENT),
            &support::typed_reference(pr),
            plinth_api::events::EventType::Warning,
            plinth_api::constants::events::FAILED,
            message.clone(),
        )
        .await;
    }
    Ok(Action::requeue(ctx.config().requeue_slow))
}

/// Why a release's Promise could not be fetched; the cause in its `Failed to fetch
/// Promise from URL` status message.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    /// `spec.sourceRef.url` is empty.
    #[error("spec.sourceRef.url is empty")]
    NoUrl,
    /// The URL is not http or https.
    #[error("unsupported URL {url:?}: only http and https sources are supported")]
    UnsupportedUrl { url: String },
    /// The HTTP client could not be built.
    #[error("{cause}")]
    Client { cause: String },
    /// The API refused the read of `spec.sourceRef.secretRef`.
    #[error("{cause}")]
    ReadSecret { cause: String },
    /// The Secret named by `spec.sourceRef.secretRef` does not exist.
    #[error("Secret {secret} not found in namespace {namespace}")]
    SecretNotFound { namespace: String, secret: String },
    /// The Secret has no `authorizationHeader`.
    #[error("Secret {namespace}/{secret} has no key authorizationHeader")]
    NoAuthorizationHeader { namespace: String, secret: String },
    /// The source did not answer within the network timeout.
    #[error("GET {url}: no answer within {secs}s")]
    Timeout { url: String, secs: u64 },
    /// The request failed.
    #[error("GET {url}: {cause}")]
    Request { url: String, cause: String },
    /// The source answered with an error status.
    #[error("GET {url}: HTTP {status}")]
    Status { url: String, status: String },
    /// The answer is larger than [`MAX_PROMISE_BYTES`].
    #[error("GET {url}: the answer is over {limit} bytes; a Promise is far smaller")]
    TooLarge { url: String, limit: usize },
    /// The answer is not YAML or JSON.
    #[error("{url}: not YAML or JSON: {cause}")]
    NotYaml { url: String, cause: String },
    /// The one document is not a Promise.
    #[error("{url}: expected a Promise, found kind {kind}")]
    NotAPromise { url: String, kind: String },
    /// The body holds no or several documents.
    #[error("{url}: expected exactly one document, found {count}")]
    DocumentCount { url: String, count: usize },
}

/// GETs `spec.sourceRef.url` and parses exactly one Promise document from it.
async fn fetch(ctx: &Context, pr: &PromiseRelease) -> Result<Value, FetchError> {
    let source = pr.spec.source_ref.clone().unwrap_or_default();
    let url = source
        .url
        .as_deref()
        .filter(|u| !u.is_empty())
        .ok_or(FetchError::NoUrl)?;
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(FetchError::UnsupportedUrl {
            url: url.to_string(),
        });
    }
    // Bounded: a source that accepts the connection and never answers must not hold
    // this release's reconcile (a later Secret or spec change is only seen once it returns).
    let timeout = ctx.config().network_timeout;
    plinth_statestore::install_tls_provider();
    let mut req = reqwest::Client::builder()
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .timeout(timeout)
        .build()
        .map_err(|e| FetchError::Client {
            cause: e.to_string(),
        })?
        .get(url);
    if let Some(header) = authorization_header(ctx, source.secret_ref.unwrap_or_default()).await? {
        req = req.header("Authorization", header);
    }
    let failed = |e: reqwest::Error| {
        if e.is_timeout() {
            FetchError::Timeout {
                url: url.to_string(),
                secs: timeout.as_secs(),
            }
        } else {
            FetchError::Request {
                url: url.to_string(),
                cause: plinth_api::cause_chain(&e),
            }
        }
    };
    let mut resp = req.send().await.map_err(&failed)?;
    if !resp.status().is_success() {
        return Err(FetchError::Status {
            url: url.to_string(),
            status: resp.status().to_string(),
        });
    }
    // Bounded too: a source that streams without end must not fill memory.
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(&failed)? {
        if body.len() + chunk.len() > MAX_PROMISE_BYTES {
            return Err(FetchError::TooLarge {
                url: url.to_string(),
                limit: MAX_PROMISE_BYTES,
            });
        }
        body.extend_from_slice(&chunk);
    }
    one_promise(url, &String::from_utf8_lossy(&body))
}

/// The largest answer a release reads from its source URL (a Promise is stored as one
/// object, which the API server caps far below this).
const MAX_PROMISE_BYTES: usize = 16 << 20;

/// The `Authorization` header from `spec.sourceRef.secretRef`'s `authorizationHeader`
/// key; `None` when the release names no Secret.
async fn authorization_header(
    ctx: &Context,
    secret_ref: plinth_api::SecretRef,
) -> Result<Option<String>, FetchError> {
    let Some(secret_name) = secret_ref.name.as_deref().filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let ns = secret_ref
        .namespace
        .as_deref()
        .filter(|s| !s.is_empty())
        .unwrap_or("default");
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    let secret = secrets
        .get_opt(secret_name)
        .await
        .map_err(|e| FetchError::ReadSecret {
            cause: e.to_string(),
        })?
        .ok_or_else(|| FetchError::SecretNotFound {
            namespace: ns.to_string(),
            secret: secret_name.to_string(),
        })?;
    let header = secret
        .data
        .as_ref()
        .and_then(|d| d.get("authorizationHeader"))
        .ok_or_else(|| FetchError::NoAuthorizationHeader {
            namespace: ns.to_string(),
            secret: secret_name.to_string(),
        })?;
    Ok(Some(String::from_utf8_lossy(&header.0).trim().to_string()))
}

/// The one Promise document of a fetched `body`.
fn one_promise(url: &str, body: &str) -> Result<Value, FetchError> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(body).map_err(|e| FetchError::NotYaml {
        url: url.to_string(),
        cause: e.to_string(),
    })?;
    let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
    match docs.as_slice() {
        [one] if one["kind"] == "Promise" => Ok(one.clone()),
        [one] => Err(FetchError::NotAPromise {
            url: url.to_string(),
            kind: one["kind"].to_string(),
        }),
        _ => Err(FetchError::DocumentCount {
            url: url.to_string(),
            count: docs.len(),
        }),
    }
}
