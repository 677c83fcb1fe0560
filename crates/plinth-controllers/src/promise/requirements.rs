//! The Promise's revision and requirements: the PromiseRevision of its current version,
//! and `spec.requiredPromises` evaluated into `status.requiredPromises` and the
//! `RequirementsFulfilled` condition, with this Promise recorded in each required
//! Promise's `status.requiredBy`.

use kube::ResourceExt;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use super::observed::{COMPONENT, Observed};
use crate::Error;
use crate::context::Context;
use crate::support::{self, set_condition, set_field};
use crate::workflow::engine;
use plinth_api::constants::{condition_types, labels, messages, reasons, requirement_state};
use plinth_api::{PromiseRevision, RequiredPromise};

/// Creates or updates the PromiseRevision of the Promise's version (`not-set` without
/// the version label) and moves the latest label and `status.latest` to it.
pub(super) async fn ensure_revision(ctx: &Context, p: &Observed) -> Result<(), Error> {
    let version = p.obj.labels().get(labels::PROMISE_VERSION).cloned();
    let version = version.as_deref().unwrap_or("not-set");
    let name = &p.name;
    let rev_name = plinth_api::names::promise_revision_name(name, version);
    let obj = json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "PromiseRevision",
        "metadata": {
            "name": rev_name,
            "labels": {labels::PROMISE_NAME: name, labels::LATEST_REVISION: "true"},
            "ownerReferences": [{"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Promise", "name": name, "uid": p.obj.metadata.uid, "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {"promiseRef": {"name": name}, "promiseSpec": p.raw_spec, "version": version},
    });
    if crate::apply::create_or_update_reporting(&ctx.client, &obj).await? {
        let note = format!("PromiseRevision {rev_name} created for version {version}");
        support::publish(
            &ctx.recorder(COMPONENT),
            &support::reference(p.obj.as_ref()),
            plinth_api::events::EventType::Normal,
            plinth_api::constants::events::REVISION_CREATED,
            note,
        )
        .await;
    }
    mark_latest_revision(ctx, name, &rev_name).await
}

/// Only the current revision keeps the latest label; `status.latest` says the same
/// (kubectl's LATEST column), written only when it differs.
async fn mark_latest_revision(ctx: &Context, promise: &str, current: &str) -> Result<(), Error> {
    let revisions: Api<PromiseRevision> = Api::all(ctx.client.clone());
    let lp = ListParams::default().labels(&format!("{}={promise}", labels::PROMISE_NAME));
    for r in revisions.list(&lp).await?.items {
        let latest = r.name_any() == current;
        if !latest && r.labels().contains_key(labels::LATEST_REVISION) {
            engine::remove_labels(&revisions, &r, &[labels::LATEST_REVISION]).await?;
        }
        if r.status.as_ref().and_then(|s| s.latest) != Some(latest) {
            support::update_status(&revisions, &r.name_any(), |st, _| {
                set_field(st, "latest", json!(latest))
            })
            .await?;
        }
    }
    Ok(())
}

/// The requirements step: evaluates `spec.requiredPromises`, writes their states and
/// conditions, and warns when a formerly Available Promise loses a requirement.
/// Returns whether all requirements are installed and Available.
pub(super) async fn reconcile(ctx: &Context, p: &Observed) -> Result<bool, Error> {
    let mut states = Vec::new();
    for req in p.spec.required_promises.iter().flatten() {
        states.push(evaluate(ctx, p, req).await?);
    }
    let fulfilled = states
        .iter()
        .all(|s| s["state"] == requirement_state::INSTALLED);
    if states.is_empty() && p.status.get("requiredPromises").is_none() {
        return Ok(fulfilled);
    }
    let updated = support::update_status(&p.api, &p.name, |s, _| {
        let c = set_field(s, "requiredPromises", Value::Array(states.clone()));
        if fulfilled {
            c | set_condition(
                s,
                condition_types::REQUIREMENTS_FULFILLED,
                "True",
                reasons::REQUIREMENTS_INSTALLED,
                messages::REQUIREMENTS_FULFILLED,
                None,
            )
        } else {
            c | set_unfulfilled(s, &states)
        }
    })
    .await?;
    p.latest.remember(Some(updated.clone()));
    if !fulfilled && p.is_available() {
        support::publish(
            &ctx.recorder(COMPONENT),
            &support::reference(&updated),
            plinth_api::events::EventType::Warning,
            plinth_api::constants::events::UNAVAILABLE,
            "Promise no longer available: Requirements have changed",
        )
        .await;
    }
    Ok(fulfilled)
}

/// Sets `RequirementsFulfilled` False naming each unmet requirement, and the Promise
/// Unavailable; true when anything changed.
fn set_unfulfilled(s: &mut Value, states: &[Value]) -> bool {
    let only_unavailable = states
        .iter()
        .any(|x| x["state"] == requirement_state::NOT_AVAILABLE)
        && !states.iter().any(|x| {
            x["state"]
                .as_str()
                .is_some_and(|t| t.contains("not installed"))
        });
    let reason = if only_unavailable {
        "RequirementsNotAvailable"
    } else {
        "RequirementsNotInstalled"
    };
    let detail: Vec<String> = states
        .iter()
        .filter(|x| x["state"] != requirement_state::INSTALLED)
        .map(|x| {
            format!(
                "{}@{}: {}",
                x["name"].as_str().unwrap_or_default(),
                x["version"].as_str().unwrap_or("any"),
                x["state"].as_str().unwrap_or_default()
            )
        })
        .collect();
    let message = format!("Requirements not fulfilled: {}", detail.join("; "));
    let mut c = set_condition(
        s,
        condition_types::REQUIREMENTS_FULFILLED,
        "False",
        reason,
        &message,
        None,
    );
    c |= set_condition(
        s,
        condition_types::RECONCILED,
        "Unknown",
        reasons::REQUIREMENTS_NOT_FULFILLED,
        messages::PENDING,
        None,
    );
    c |= set_condition(
        s,
        condition_types::AVAILABLE,
        "False",
        reasons::PROMISE_UNAVAILABLE,
        messages::CANNOT_FULFIL,
        None,
    );
    c | set_field(s, "status", json!("Unavailable"))
}

/// One requirement's `{name, version, state}` entry; records this Promise in the
/// required Promise's `status.requiredBy` when it exists.
async fn evaluate(ctx: &Context, p: &Observed, req: &RequiredPromise) -> Result<Value, Error> {
    let rname = req.name.clone();
    let rversion = req.version.clone().unwrap_or_default();
    let state = match p.api.get_opt(&rname).await {
        Err(_) => requirement_state::UNKNOWN.to_string(),
        Ok(None) => requirement_state::NOT_INSTALLED.to_string(),
        Ok(Some(required)) => {
            let installed = required
                .labels()
                .get(labels::PROMISE_VERSION)
                .cloned()
                .unwrap_or_default();
            let version_ok = rversion.is_empty()
                || installed == rversion
                || has_revision(ctx, &rname, &rversion).await?;
            record_required_by(p, &rname, &rversion).await?;
            if !version_ok {
                format!(
                    "{} (installed: {})",
                    requirement_state::NOT_INSTALLED_AT_VERSION,
                    if installed.is_empty() {
                        plinth_api::constants::VERSION_NOT_SET
                    } else {
                        &installed
                    }
                )
            } else if !plinth_api::constants::promise_status::is_available(&required.data["status"])
            {
                requirement_state::NOT_AVAILABLE.to_string()
            } else {
                requirement_state::INSTALLED.to_string()
            }
        }
    };
    Ok(json!({"name": rname, "version": rversion, "state": state}))
}

/// True if Promise `promise` has a PromiseRevision of `version`.
async fn has_revision(ctx: &Context, promise: &str, version: &str) -> Result<bool, Error> {
    let revisions: Api<PromiseRevision> = Api::all(ctx.client.clone());
    let lp = ListParams::default().labels(&format!("{}={promise}", labels::PROMISE_NAME));
    Ok(revisions
        .list(&lp)
        .await?
        .items
        .iter()
        .any(|r| r.spec.version == version))
}

/// Records who requires `required` in its `status.requiredBy`, so its own events can
/// reach us too.
async fn record_required_by(p: &Observed, required: &str, version: &str) -> Result<(), Error> {
    let me = p.name.clone();
    let my_version = p
        .obj
        .labels()
        .get(labels::PROMISE_VERSION)
        .cloned()
        .unwrap_or_default();
    let entry = json!({"promise": {"name": me, "version": my_version}, "requiredVersion": version});
    support::update_status(&p.api, required, |s, _| {
        let list = support::ensure_object(s)
            .entry("requiredBy")
            .or_insert_with(|| json!([]));
        if !list.is_array() {
            *list = json!([]);
        }
        let arr = list.as_array_mut().expect("array");
        if let Some(existing) = arr.iter_mut().find(|e| e["promise"]["name"] == me.as_str()) {
            if *existing == entry {
                return false;
            }
            *existing = entry.clone();
        } else {
            arr.push(entry.clone());
        }
        true
    })
    .await?;
    Ok(())
}
