//! A failed reconcile is reported on the object it is about, not only in the log: the
//! condition `ReconcileSucceeded=False` (reason `ReconcileFailed`, the first error of a
//! run of failures as the message) and a Warning Event `ReconcileFailed` for each error.
//! The next reconcile that succeeds turns the condition True once; an object that never
//! failed never gets it, so a settled platform writes nothing here.
//!
//! Not reported: lost write races (409, retried at once) and caches that have not had
//! their first list, which are routine and say nothing about the object.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use plinth_api::constants::{condition_types, events as ev, reasons};
use serde::Serialize;

use super::conditions::{condition, set_condition};
use super::events::{publish, reference};
use super::status::update_status;
use crate::{Context, Error};
use plinth_api::events::EventType;

/// Message of `ReconcileSucceeded=True` after a failure.
const RECOVERED: &str = "The last reconcile succeeded";

/// Whether `err` is worth telling the object's owner about.
pub fn reportable(err: &Error) -> bool {
    !(err.is_conflict() || matches!(err, Error::NotReady(_)))
}

/// Reports `result` of reconciling `obj` (served by `api`) on `obj`, as the module
/// says, and passes it on. `component` is the Event's reporting component. A failure to
/// write the report is logged and does not replace the reconcile's own result.
pub async fn report(
    ctx: &Context,
    component: &str,
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
    result: Result<Action, Error>,
) -> Result<Action, Error> {
    let failed_before = obj
        .data
        .get("status")
        .and_then(|s| condition(s, condition_types::RECONCILE_SUCCEEDED))
        .is_some_and(|c| c["status"] == "False");
    let (status, reason, message) = match &result {
        Ok(_) if !failed_before => return result,
        Ok(_) => ("True", ev::RECONCILE_SUCCEEDED, RECOVERED.to_string()),
        Err(e) if !reportable(e) => return result,
        Err(e) => ("False", reasons::RECONCILE_FAILED, e.to_string()),
    };
    let generation = obj.meta().generation;
    // While the object keeps failing its condition keeps the first error: a message that
    // changes on every retry (a timing, a resourceVersion) would otherwise write the
    // object on every retry and wake its own reconcile at once. Events carry each error.
    let written = if status == "False" && failed_before {
        Ok(obj.clone())
    } else {
        update_status(api, &obj.name_any(), |s, _| {
            set_condition(
                s,
                condition_types::RECONCILE_SUCCEEDED,
                status,
                reason,
                &message,
                generation,
            )
        })
        .await
    };
    if let Err(e) = written {
        tracing::debug!(object = %obj.name_any(), error = %e, "could not report the reconcile's outcome on the object");
    }
    if status == "False" {
        let recorder = ctx.recorder(component);
        publish(
            &recorder,
            &reference(obj),
            EventType::Warning,
            ev::RECONCILE_FAILED,
            message,
        )
        .await;
    }
    result
}

/// A typed Kratix object whose status conditions [`report_typed`] reads without
/// serialising the whole object (a Work can be megabytes).
pub trait HasConditions {
    /// `status.conditions` (empty when absent).
    fn conditions(&self) -> &[Condition];
}

macro_rules! has_conditions {
    ($($kind:ty),+) => {$(
        impl HasConditions for $kind {
            fn conditions(&self) -> &[Condition] {
                self.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or(&[])
            }
        }
    )+};
}

has_conditions!(
    plinth_api::Work,
    plinth_api::WorkPlacement,
    plinth_api::Destination,
    plinth_api::GitStateStore,
    plinth_api::BucketStateStore,
    plinth_api::PromiseRelease,
    plinth_api::DryRun
);

/// [`report`] for a typed object: the same condition and Event through its dynamic form
/// (serialised only when there is something to write).
pub async fn report_typed<K>(
    ctx: &Context,
    component: &str,
    obj: &K,
    result: Result<Action, Error>,
) -> Result<Action, Error>
where
    K: Resource<DynamicType = ()> + Serialize + HasConditions,
{
    let failed_before = obj
        .conditions()
        .iter()
        .any(|c| c.type_ == condition_types::RECONCILE_SUCCEEDED && c.status == "False");
    match &result {
        Ok(_) if !failed_before => return result,
        Err(e) if !reportable(e) => return result,
        _ => {}
    }
    let Ok(dynamic) = serde_json::to_value(obj).and_then(serde_json::from_value::<DynamicObject>)
    else {
        return result;
    };
    let ar = ApiResource::erase::<K>(&());
    let api = match obj.namespace() {
        Some(ns) => Api::namespaced_with(ctx.client.clone(), &ns, &ar),
        None => Api::all_with(ctx.client.clone(), &ar),
    };
    report(ctx, component, &api, &dynamic, result).await
}
