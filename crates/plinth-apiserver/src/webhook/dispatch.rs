//! The two admission phases. Mutating webhooks run one after another, each JSONPatch
//! applied before the next is called; when one changed the object, the webhooks with
//! `reinvocationPolicy: IfNeeded` called before that change are called once more, in
//! order. Validating webhooks run in parallel on the final object; any denial refuses
//! the write. A call that fails is refused (500) under `failurePolicy: Fail` and
//! logged under `Ignore`; a denial always refuses. A dry-run request reaching a webhook
//! whose `sideEffects` is not None or NoneOnDryRun is refused (400).

use std::collections::HashSet;

use serde_json::Value;

use super::attributes::Attributes;
use super::client::{CallError, call};
use super::config::Hook;
use super::matching::{NamespaceLabels, object_matches, rules_match};
use super::review::{denial, failed_call, request, verify};
use crate::app::App;
use crate::error::ApiError;

/// Why a webhook did not admit the request.
enum Failure {
    /// The call failed: the failurePolicy decides.
    Call(CallError),
    /// The request is refused whatever the failurePolicy (a denial, dry-run refusal, a
    /// patch that cannot be applied).
    Refused(ApiError),
}

/// Runs the mutating webhooks that match the write on `obj` (None for a DELETE, where
/// a webhook may not patch). `old` is the stored object of an UPDATE or DELETE.
///
/// # Errors
/// The first refusal: a webhook's denial, a failed call under `failurePolicy: Fail`, a
/// dry-run request to a webhook with side effects, a patch that does not apply; 404
/// when the object's Namespace is gone; storage errors.
pub(crate) async fn mutate(
    app: &App,
    attrs: &Attributes<'_>,
    mut obj: Option<&mut Value>,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let registered = app.webhooks.registered(&app.store).await?;
    if registered.mutating.is_empty() {
        return Ok(());
    }
    let mut ns = NamespaceLabels::new(attrs);
    let mut previously: HashSet<&str> = HashSet::new();
    let mut reinvoke: HashSet<&str> = HashSet::new();
    for round in 0..2 {
        if round == 1 && reinvoke.is_empty() {
            break;
        }
        for hook in &registered.mutating {
            if round == 1 && !reinvoke.contains(hook.key.as_str()) {
                continue;
            }
            if !should_call(app, hook, attrs, obj.as_deref(), old, &mut ns).await? {
                continue;
            }
            let changed = settle(
                hook,
                call_mutating(app, hook, attrs, obj.as_deref_mut(), old).await,
            )?;
            if changed && round == 0 {
                reinvoke.extend(previously.drain());
            }
            if hook.reinvoke && round == 0 {
                previously.insert(hook.key.as_str());
            }
        }
    }
    Ok(())
}

/// Runs the validating webhooks that match the write, in parallel. `new` is the object
/// to be stored (None for a DELETE), `old` the stored one.
///
/// # Errors
/// As [`mutate`]: the first refusal in webhook order.
pub(crate) async fn validate(
    app: &App,
    attrs: &Attributes<'_>,
    new: Option<&Value>,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let registered = app.webhooks.registered(&app.store).await?;
    if registered.validating.is_empty() {
        return Ok(());
    }
    let mut ns = NamespaceLabels::new(attrs);
    let mut chosen = Vec::new();
    for hook in &registered.validating {
        if should_call(app, hook, attrs, new, old, &mut ns).await? {
            chosen.push(hook.clone());
        }
    }
    let calls = chosen
        .iter()
        .map(|hook| async move { settle(hook, call_validating(app, hook, attrs, new, old).await) });
    for outcome in futures::future::join_all(calls).await {
        outcome?;
    }
    Ok(())
}

/// Whether the hook is called for this request (rules, objectSelector, then
/// namespaceSelector, which may read the Namespace).
async fn should_call(
    app: &App,
    hook: &Hook,
    attrs: &Attributes<'_>,
    new: Option<&Value>,
    old: Option<&Value>,
    ns: &mut NamespaceLabels<'_>,
) -> Result<bool, ApiError> {
    Ok(rules_match(hook, attrs)
        && object_matches(hook, new, old)
        && ns.matches(app, hook, new).await?)
}

/// Applies the failurePolicy to a call's outcome: an ignored failure is logged and
/// admits the request (as unchanged).
fn settle<T: Default>(hook: &Hook, outcome: Result<T, Failure>) -> Result<T, ApiError> {
    match outcome {
        Ok(v) => Ok(v),
        Err(Failure::Call(e)) if hook.ignore_failures => {
            tracing::warn!(
                "failed calling webhook {:?} of {:?}, failing open (failurePolicy Ignore): {e}",
                hook.name,
                hook.configuration
            );
            Ok(T::default())
        }
        Err(Failure::Call(e)) => {
            tracing::warn!(
                "failed calling webhook {:?} of {:?}, failing closed: {e}",
                hook.name,
                hook.configuration
            );
            Err(failed_call(&hook.name, &e))
        }
        Err(Failure::Refused(e)) => Err(e),
    }
}

/// One call of a mutating webhook; returns whether its patch changed the object.
async fn call_mutating(
    app: &App,
    hook: &Hook,
    attrs: &Attributes<'_>,
    obj: Option<&mut Value>,
    old: Option<&Value>,
) -> Result<bool, Failure> {
    let verdict = exchange(app, hook, attrs, obj.as_deref(), old, true).await?;
    let Some(patch) = verdict.filter(|p| !p.0.is_empty()) else {
        return Ok(false);
    };
    let Some(obj) = obj else {
        return Err(Failure::Refused(ApiError::internal(format!(
            "admission webhook {:?} attempted to modify the object, which is not supported for this operation",
            hook.name
        ))));
    };
    let mut patched = obj.clone();
    json_patch::patch(&mut patched, &patch).map_err(|e| {
        Failure::Refused(ApiError::internal(format!(
            "admission webhook {:?} returned a patch that does not apply: {e}",
            hook.name
        )))
    })?;
    let changed = patched != *obj;
    *obj = patched;
    Ok(changed)
}

/// One call of a validating webhook.
async fn call_validating(
    app: &App,
    hook: &Hook,
    attrs: &Attributes<'_>,
    new: Option<&Value>,
    old: Option<&Value>,
) -> Result<(), Failure> {
    exchange(app, hook, attrs, new, old, false)
        .await
        .map(|_| ())
}

/// Sends the AdmissionReview and checks the answer; passes warnings on; a denial is
/// refused. Returns the patch of an admitting answer.
async fn exchange(
    app: &App,
    hook: &Hook,
    attrs: &Attributes<'_>,
    new: Option<&Value>,
    old: Option<&Value>,
    mutating: bool,
) -> Result<Option<json_patch::Patch>, Failure> {
    if attrs.dry_run && !hook.dry_run_safe {
        return Err(Failure::Refused(ApiError::bad_request(format!(
            "admission webhook {:?} does not support dry run",
            hook.name
        ))));
    }
    let uid = uuid::Uuid::new_v4().to_string();
    let review = request(attrs, &uid, new, old);
    let body = call(app, hook, &review).await.map_err(Failure::Call)?;
    let verdict = verify(body, &uid, mutating).map_err(Failure::Call)?;
    for w in &verdict.warnings {
        super::attributes::add_warning(w);
    }
    if !verdict.allowed {
        return Err(Failure::Refused(denial(
            &hook.name,
            verdict.status.as_ref(),
        )));
    }
    Ok(verdict.patch)
}
