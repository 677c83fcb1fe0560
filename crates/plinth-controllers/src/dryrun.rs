//! DryRun: preview what a resource request's configure workflow would produce for a
//! proposed spec, as Kratix's feature-flagged preview does (`featureFlags.dryRun` in the
//! `kratix` ConfigMap; off by default).
//!
//! For a DryRun the controller creates an ephemeral request of the Promise's API in the
//! DryRun's namespace, named `kratix-dry-run-<dryrun>` (hashed), labelled
//! `kratix.io/dry-run: "true"` and `kratix.io/dry-run-owner`, annotated with the real
//! request's name and namespace, with the proposed spec and the DryRun as its controller
//! owner. The request controller runs its configure workflow with `KRATIX_DRY_RUN=true`:
//! the reader shows the pipeline the real request's metadata with the proposed spec, the
//! work-creator labels its Works `kratix.io/dry-run: "true"`, and the scheduler places
//! those only on Destinations labelled `kratix.io/dry-run: "true"` (so, usually, nowhere).
//! The DryRun's status then lists each output file with its pipeline and destination
//! selectors (`status.outputs`), and `Completed` says how it went. With the flag off a
//! DryRun gets `Completed=False/DryRunDisabled` naming the setting; turning the flag on
//! wakes every DryRun.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::Error;
use crate::context::Context;
use crate::support::harness::{Harness, Start};
use crate::support::{self as status, set_condition, set_field};
use plinth_api::constants::labels;
use plinth_api::constants::{annotations, labels as klabels};
use plinth_api::{DryRun, Work};

use plinth_api::constants::dry_run_reasons as reasons;

const COMPLETED: &str = plinth_api::constants::condition_types::COMPLETED;

/// Runs the DryRun controller until the client's watches end.
pub async fn run(ctx: Arc<Context>) {
    let api: Api<DryRun> = Api::all(ctx.client.clone());
    let controller = Controller::new(api, watcher::Config::default());
    let store = controller.store();
    let jobs: Api<Job> = Api::all(ctx.client.clone());
    // Once the new configuration is in place (not on the ConfigMap's own event, which
    // may arrive before it is applied).
    let config_changes = futures::stream::unfold(ctx.config_changes(), |mut rx| async move {
        rx.changed().await.ok().map(|_| ((), rx))
    });
    controller
        // The ephemeral request's Jobs wake its DryRun.
        .watches(
            jobs,
            watcher::Config::default().labels("kratix.io/workflow-type=resource"),
            move |job| {
                let a = job.annotations();
                let name = a.get(annotations::JOB_RESOURCE_NAME)?;
                let ns = a.get(annotations::JOB_RESOURCE_NAMESPACE)?;
                store
                    .state()
                    .into_iter()
                    .find(|d| {
                        d.namespace().as_ref() == Some(ns)
                            && plinth_api::names::dry_run_resource_name(&d.name_any()) == *name
                    })
                    .map(|d| ObjectRef::from_obj(d.as_ref()))
            },
        )
        // Turning the feature on or off re-evaluates every DryRun.
        .reconcile_all_on(config_changes)
        .start(Harness::new("dryrun"), reconcile, ctx)
        .await;
}

async fn set_completed(
    api: &Api<DryRun>,
    name: &str,
    state: &str,
    reason: &str,
    message: &str,
    outputs: Option<Value>,
) -> Result<(), Error> {
    status::update_status(api, name, |s, _| {
        let mut c = set_condition(s, COMPLETED, state, reason, message, None);
        if let Some(o) = &outputs {
            c |= set_field(s, "outputs", o.clone());
        }
        c
    })
    .await?;
    Ok(())
}

/// One reconcile, a failure of it reported on the DryRun ([`crate::support::outcome`]).
async fn reconcile(d: Arc<DryRun>, ctx: Arc<Context>) -> Result<Action, Error> {
    let result = reconcile_steps(d.clone(), ctx.clone()).await;
    let component = plinth_api::constants::events::DRY_RUN_CONTROLLER;
    crate::support::outcome::report_typed(&ctx, component, d.as_ref(), result).await
}

async fn reconcile_steps(d: Arc<DryRun>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = d.namespace().unwrap_or_else(|| "default".into());
    let name = d.name_any();
    let api: Api<DryRun> = Api::namespaced(ctx.client.clone(), &ns);
    if d.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    if !ctx.config().feature_dry_run {
        let msg = format!(
            "DryRun is disabled: set featureFlags.dryRun: true in the config key of ConfigMap {}/{}",
            plinth_api::constants::SYSTEM_NAMESPACE,
            crate::config::CONFIG_MAP
        );
        set_completed(&api, &name, "False", reasons::DISABLED, &msg, None).await?;
        return Ok(Action::await_change());
    }
    let promise = d.spec.promise_ref.name.clone();
    let Some(request_api) = ctx.request_controllers.api_of(&promise) else {
        let msg = format!(
            "DryRun {ns}/{name}: spec.promiseRef.name: Promise {promise:?} is not installed or does not serve resource requests"
        );
        set_completed(
            &api,
            &name,
            "False",
            reasons::PROMISE_NOT_AVAILABLE,
            &msg,
            None,
        )
        .await?;
        return Ok(Action::requeue(ctx.config().requeue_slow));
    };
    let requests: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &ns, &request_api.resource());
    let rr = ensure_request(&requests, &d, &request_api).await?;
    let rr_status = rr.data.get("status").cloned().unwrap_or(Value::Null);
    let configure = status::condition(&rr_status, "ConfigureWorkflowCompleted");
    let failed = configure.is_some_and(|c| c["reason"] == "ConfigureWorkflowFailed");
    let done = configure.is_some_and(|c| c["status"] == "True");
    if failed {
        let msg = configure
            .and_then(|c| c["message"].as_str())
            .unwrap_or_default()
            .to_string();
        set_completed(&api, &name, "False", reasons::PIPELINE_FAILED, &msg, None).await?;
        set_component(&api, &d, &promise, &rr, "Failed", &msg).await?;
        return Ok(Action::await_change());
    }
    if !done {
        set_completed(
            &api,
            &name,
            "Unknown",
            reasons::RUNNING,
            "Dry run is running",
            None,
        )
        .await?;
        set_component(&api, &d, &promise, &rr, "Pending", "Dry run is running").await?;
        return Ok(Action::await_change());
    }
    let outputs = list_outputs(&ctx, &promise, &rr, &request_api).await?;
    let n = outputs.as_array().map_or(0, Vec::len);
    let msg = format!("Dry run completed: {n} output files, not scheduled");
    set_completed(
        &api,
        &name,
        "True",
        reasons::OUTPUTS_LISTED,
        &msg,
        Some(outputs),
    )
    .await?;
    set_component(&api, &d, &promise, &rr, "Succeeded", &msg).await?;
    Ok(Action::await_change())
}

/// Creates the ephemeral request, or brings its spec up to the DryRun's proposal.
async fn ensure_request(
    requests: &Api<DynamicObject>,
    d: &DryRun,
    request_api: &crate::dynamic::RequestApi,
) -> Result<DynamicObject, Error> {
    let ns = d.namespace().unwrap_or_default();
    let eph = plinth_api::names::dry_run_resource_name(&d.name_any());
    let real = d.spec.resource_request_ref.as_ref();
    let real_name = real
        .map(|r| r.name.clone())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| d.name_any());
    let real_ns = real
        .and_then(|r| r.namespace.clone())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| ns.clone());
    let spec = match &d.spec.resource {
        Some(v) if !v.is_null() => v.clone(),
        _ => json!({}),
    };
    if let Some(existing) = requests.get_opt(&eph).await? {
        if existing.data["spec"] == spec {
            return Ok(existing);
        }
        return Ok(requests
            .patch(
                &eph,
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": spec})),
            )
            .await?);
    }
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{}/{}", request_api.group, request_api.served_version),
        "kind": request_api.kind,
        "metadata": {
            "name": eph,
            "namespace": ns,
            "labels": {klabels::DRY_RUN: "true", klabels::DRY_RUN_OWNER: d.name_any()},
            "annotations": {
                annotations::DRY_RUN_RESOURCE_NAME: real_name,
                annotations::DRY_RUN_RESOURCE_NAMESPACE: real_ns,
            },
            "ownerReferences": [{"apiVersion": "platform.kratix.io/v1alpha1", "kind": "DryRun", "name": d.name_any(), "uid": d.meta().uid, "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": spec,
    }))
    .map_err(Error::Json)?;
    Ok(requests.create(&PostParams::default(), &obj).await?)
}

/// Every output file of the ephemeral request's Works: `{pipeline, work, filepath,
/// destinationSelectors}`, sorted.
async fn list_outputs(
    ctx: &Context,
    promise: &str,
    rr: &DynamicObject,
    _request_api: &crate::dynamic::RequestApi,
) -> Result<Value, Error> {
    let works: Api<Work> = Api::all(ctx.client.clone());
    let sel = format!(
        "{}={promise},{}={},{}=true",
        labels::PROMISE_NAME,
        labels::RESOURCE_NAME,
        rr.name_any(),
        klabels::DRY_RUN
    );
    let mut out = Vec::new();
    for w in works.list(&ListParams::default().labels(&sel)).await?.items {
        let pipeline = w
            .labels()
            .get("kratix.io/pipeline-name")
            .cloned()
            .unwrap_or_default();
        for g in w.spec.workload_groups.iter().flatten() {
            for wl in g.workloads.iter().flatten() {
                out.push(json!({
                    "pipeline": pipeline,
                    "work": w.name_any(),
                    "filepath": wl.filepath,
                    "destinationSelectors": g.destination_selectors,
                }));
            }
        }
    }
    out.sort_by_key(|o| (o["pipeline"].to_string(), o["filepath"].to_string()));
    Ok(Value::Array(out))
}

async fn set_component(
    api: &Api<DryRun>,
    d: &DryRun,
    promise: &str,
    rr: &DynamicObject,
    phase: &str,
    message: &str,
) -> Result<(), Error> {
    let real_ns = d
        .spec
        .resource_request_ref
        .as_ref()
        .and_then(|r| r.namespace.clone());
    let component = json!([{
        "promise": promise,
        "request": rr.annotations().get(annotations::DRY_RUN_RESOURCE_NAME).cloned().unwrap_or_default(),
        "namespace": real_ns.or(d.namespace()),
        "dryRun": rr.name_any(),
        "phase": phase,
        "message": message,
    }]);
    status::update_status(api, &d.name_any(), |s, _| {
        set_field(s, "components", component.clone())
    })
    .await?;
    Ok(())
}
