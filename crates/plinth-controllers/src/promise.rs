//! The Promise controller: installs a Promise's API as a CRD, delivers
//! its static dependencies, runs its promise workflows, tracks required Promises,
//! starts one resource-request controller per Promise API, and tears everything down
//! in Kratix's finalizer order on deletion.
//!
//! Beyond Kratix: no fixed 5-second polling for the CRD (CRD events wake the Promise),
//! requirement changes are noticed from any Promise's events, and the request
//! controller follows the API's served versions without a restart.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use base64::Engine;
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::context::Context;
use crate::support::{
    self, condition_true, remove_finalizer, set_condition, set_field, set_finalizers,
};
use crate::workflow::engine::{self, Progress};
use crate::workflow::{Subject, Workflow, WorkflowAction, WorkflowType};
use crate::{Error, request};
use plinth_api::constants::work_type;
use plinth_api::constants::{
    condition_types, finalizers, labels, messages, reasons, requirement_state,
};

/// Reporting component of Promise events.
const COMPONENT: &str = plinth_api::constants::events::PROMISE_CONTROLLER;
pub use plinth_api::constants::SYSTEM_NAMESPACE;

/// The `promises` resource.
pub fn promise_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("platform.kratix.io", "v1alpha1", "Promise"),
        "promises",
    )
}

fn kratix_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("platform.kratix.io", "v1alpha1", kind),
        plural,
    )
}

/// Runs the Promise controller until the client's watches end.
pub async fn run(ctx: Arc<Context>) {
    let ar = promise_resource();
    let promises: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &ar);
    // Promises and requests advance one step per reconcile and are woken by their own
    // status writes; those writes are no-ops once nothing changes, so they settle.
    let controller = Controller::new_with(promises.clone(), watcher::Config::default(), ar.clone());
    let store = controller.store();
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let jobs: Api<Job> = Api::all(ctx.client.clone());
    let works: Api<DynamicObject> =
        Api::all_with(ctx.client.clone(), &kratix_resource("Work", "works"));
    let requires_store = store.clone();
    controller
        // A Promise's API CRD carries the promise-name label: its Established condition wakes the Promise.
        .watches(
            crds,
            watcher::Config::default().labels(labels::PROMISE_NAME),
            |crd| {
                crd.labels()
                    .get(labels::PROMISE_NAME)
                    .map(|p| ObjectRef::new_with(p, promise_resource()))
            },
        )
        .watches(
            jobs,
            watcher::Config::default().labels(&format!(
                "{}={}",
                labels::WORKFLOW_TYPE,
                plinth_api::WorkflowType::Promise.as_str()
            )),
            |job| {
                job.labels()
                    .get(labels::PROMISE_NAME)
                    .map(|p| ObjectRef::new_with(p, promise_resource()))
            },
        )
        .watches_with(
            works,
            kratix_resource("Work", "works"),
            watcher::Config::default().labels(labels::PROMISE_NAME),
            |w| {
                w.labels()
                    .get(labels::PROMISE_NAME)
                    .map(|p| ObjectRef::new_with(p, promise_resource()))
            },
        )
        // Any Promise change wakes the Promises that require it, whether or not they have
        // written themselves into its requiredBy yet.
        .watches_with(
            promises,
            ar.clone(),
            watcher::Config::default(),
            move |changed| {
                let name = changed.name_any();
                requires_store
                    .state()
                    .into_iter()
                    .filter(|p| {
                        p.data["spec"]["requiredPromises"]
                            .as_array()
                            .is_some_and(|r| r.iter().any(|x| x["name"] == name.as_str()))
                    })
                    .map(|p| ObjectRef::new_with(&p.name_any(), promise_resource()))
                    .collect::<Vec<_>>()
            },
        )
        .run(
            crate::instrument::instrument(
                ctx.metrics.clone(),
                "promise",
                None,
                crate::announce::with_condition_events(
                    COMPONENT,
                    crate::announce::itself,
                    reconcile,
                ),
            ),
            error_policy,
            ctx,
        )
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(error = %e, "promise reconcile");
            }
        })
        .await;
}

fn error_policy(promise: Arc<DynamicObject>, err: &Error, ctx: Arc<Context>) -> Action {
    tracing::warn!(promise = %promise.name_any(), error = %err, "Promise reconcile failed");
    Action::requeue(ctx.config().requeue_default)
}

fn promise_api(ctx: &Context) -> Api<DynamicObject> {
    Api::all_with(ctx.client.clone(), &promise_resource())
}

async fn reconcile(promise: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, Error> {
    let api = promise_api(&ctx);
    let name = promise.name_any();
    let config = ctx.config();

    if promise
        .labels()
        .get(labels::PAUSED)
        .is_some_and(|v| v == "true")
    {
        support::update_status(&api, &name, |s, _| {
            let mut c = set_condition(
                s,
                condition_types::AVAILABLE,
                "False",
                reasons::PAUSED_RECONCILIATION,
                messages::PAUSED,
                None,
            );
            c |= set_condition(
                s,
                condition_types::RECONCILED,
                "Unknown",
                reasons::PAUSED_RECONCILIATION,
                messages::PAUSED,
                None,
            );
            c |= set_field(s, "status", json!("Unavailable"));
            c
        })
        .await?;
        return Ok(Action::await_change());
    }

    if promise.meta().deletion_timestamp.is_some() {
        return delete(&ctx, &api, &promise).await;
    }
    // Resumed: run the configure workflow from its first pipeline, then every request.
    if engine::resume_after_pause(&api, &promise, &[(labels::RECONCILE_RESOURCES, "true")]).await? {
        return Ok(Action::await_change());
    }

    // Finalizers.
    let spec = promise.data.get("spec").cloned().unwrap_or(Value::Null);
    let api_crd = request_crd(&name, &spec)?;
    let has_delete = spec["workflows"]["promise"]["delete"]
        .as_array()
        .is_some_and(|a| !a.is_empty());
    let mut desired: Vec<&str> = Vec::new();
    if api_crd.is_some() {
        desired.extend([
            finalizers::RESOURCE_REQUEST_CLEANUP,
            finalizers::DYNAMIC_CONTROLLER_DEPENDANT_RESOURCES_CLEANUP,
            finalizers::API_CRD_CLEANUP,
        ]);
    }
    desired.extend([
        finalizers::DEPENDENCIES_CLEANUP,
        finalizers::WORKFLOWS_CLEANUP,
    ]);
    if has_delete {
        desired.push(finalizers::DELETE_WORKFLOWS);
    }
    desired.push(finalizers::REVISION_CLEANUP);
    let current = promise.finalizers().to_vec();
    let mut wanted = current.clone();
    for f in &desired {
        if !wanted.iter().any(|c| c == f) {
            wanted.push(f.to_string());
        }
    }
    if !has_delete {
        wanted.retain(|f| f != finalizers::DELETE_WORKFLOWS);
    }
    if wanted != current {
        set_finalizers(&api, &promise, wanted).await?;
        return Ok(Action::await_change());
    }

    // Version and revision.
    let version = promise.labels().get(labels::PROMISE_VERSION).cloned();
    let status_now = promise.data.get("status").cloned().unwrap_or(Value::Null);
    if let Some(v) = &version {
        if status_now["version"].as_str() != Some(v) {
            let v = v.clone();
            support::update_status(&api, &name, |s, _| {
                let mut c = set_field(s, "version", json!(v));
                let k = support::ensure_object(s)
                    .entry("kratix")
                    .or_insert_with(|| json!({}));
                c |= set_field(k, "version", json!(v));
                c
            })
            .await?;
            return Ok(Action::await_change());
        }
    }
    ensure_revision(
        &ctx,
        &promise,
        version.as_deref().unwrap_or("not-set"),
        &spec,
    )
    .await?;

    // Requirements.
    let (fulfilled, requirement_states) = evaluate_requirements(&ctx, &promise, &spec).await?;
    if !requirement_states.is_empty() || status_now.get("requiredPromises").is_some() {
        let states = requirement_states.clone();
        let was_available = status_now["status"] == "Available";
        let updated = support::update_status(&api, &name, |s, _| {
            let mut c = set_field(s, "requiredPromises", Value::Array(states.clone()));
            if fulfilled {
                c |= set_condition(
                    s,
                    condition_types::REQUIREMENTS_FULFILLED,
                    "True",
                    reasons::REQUIREMENTS_INSTALLED,
                    messages::REQUIREMENTS_FULFILLED,
                    None,
                );
            } else {
                let reason = if states
                    .iter()
                    .any(|x| x["state"] == requirement_state::NOT_AVAILABLE)
                    && !states.iter().any(|x| {
                        x["state"]
                            .as_str()
                            .is_some_and(|t| t.contains("not installed"))
                    }) {
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
                c |= set_condition(
                    s,
                    condition_types::REQUIREMENTS_FULFILLED,
                    "False",
                    reason,
                    &format!("Requirements not fulfilled: {}", detail.join("; ")),
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
                c |= set_field(s, "status", json!("Unavailable"));
            }
            c
        })
        .await?;
        if !fulfilled && was_available {
            support::publish(
                &ctx.recorder(COMPONENT),
                &support::reference(&updated),
                support::EventType::Warning,
                plinth_api::constants::events::UNAVAILABLE,
                "Promise no longer available: Requirements have changed",
            )
            .await;
        }
    }

    // API.
    let mut request_api: Option<request::RequestApi> = None;
    if let Some(crd) = &api_crd {
        match install_api(&ctx, &api, &promise, crd).await? {
            ApiState::Waiting => return Ok(Action::await_change()),
            ApiState::NoServedVersion(msg) => {
                support::update_status(&api, &name, |s, _| {
                    let mut c = set_condition(
                        s,
                        condition_types::AVAILABLE,
                        "False",
                        reasons::NO_SERVED_VERSION,
                        &msg,
                        None,
                    );
                    c |= set_field(s, "status", json!("Unavailable"));
                    c
                })
                .await?;
                ctx.request_controllers.stop(&name);
                return Ok(Action::await_change());
            }
            ApiState::Ready(r) => request_api = Some(r),
        }
    }

    // Static dependencies.
    reconcile_static_dependencies(&ctx, &promise, &spec).await?;

    // Promise configure workflow.
    let wf = promise_workflow(&promise, &spec, WorkflowAction::Configure);
    let progress = if wf.pipelines.is_empty() {
        Progress::Done
    } else {
        engine::reconcile_configure(&ctx, &wf, &api, &promise, "platform.kratix.io", COMPONENT)
            .await?
    };

    if progress != Progress::Done {
        // A re-run after the Promise was Available keeps it Available: requests are not
        // held while the promise workflow refreshes (no flicker).
        let keep_available = status_now["status"] == "Available" && progress == Progress::Running;
        let msg = match &progress {
            Progress::Failed { pipeline } => format!("A Configure Pipeline has failed: {pipeline}"),
            Progress::Suspended { .. } => "Suspended".to_string(),
            _ => "Pipelines are still in progress".to_string(),
        };
        support::update_status(&api, &name, |s, _| {
            if keep_available {
                return false;
            }
            let mut c = if matches!(progress, Progress::Suspended { .. }) {
                set_condition(
                    s,
                    condition_types::AVAILABLE,
                    "False",
                    reasons::WORKFLOW_SUSPENDED,
                    messages::SUSPENDED,
                    None,
                )
            } else {
                set_condition(
                    s,
                    condition_types::AVAILABLE,
                    "False",
                    reasons::PROMISE_UNAVAILABLE,
                    messages::CANNOT_FULFIL,
                    None,
                )
            };
            c |= set_field(s, "status", json!("Unavailable"));
            let _ = &msg;
            c
        })
        .await?;
        return Ok(match progress {
            Progress::Suspended { retry_at: Some(at) } => Action::requeue(support::until(at)),
            Progress::Failed { .. } if config.reconcile_after_failure => {
                engine::periodic_rerun(&ctx, &wf, &api, &promise, config.reconciliation_interval)
                    .await?
            }
            _ => Action::await_change(),
        });
    }
    // Resource requests: one controller per Promise API (held by the controller while
    // requirements are unmet).
    if let Some(r) = &request_api {
        ctx.request_controllers
            .ensure(&ctx_arc(&ctx), &name, r.clone());
    }
    if !fulfilled {
        return Ok(Action::await_change());
    }

    // Re-run every request's workflow when the Promise spec changed.
    let generation = promise.meta().generation.unwrap_or(1);
    let observed = status_now["observedGeneration"].as_i64().unwrap_or(0);
    let reconcile_resources = promise
        .labels()
        .get(labels::RECONCILE_RESOURCES)
        .is_some_and(|v| v == "true");
    if let Some(r) = &request_api {
        if reconcile_resources || (generation != observed && generation != 1 && observed != 0) {
            request::label_all_run_from_start(&ctx, r).await?;
            support::publish(
                &ctx.recorder(COMPONENT),
                &support::reference(&promise),
                support::EventType::Normal,
                plinth_api::constants::events::RECONCILING_RESOURCES,
                "Reconciling all resource requests",
            )
            .await;
            if reconcile_resources {
                engine::remove_labels(&api, &promise, &[labels::RECONCILE_RESOURCES]).await?;
            }
        }
    }

    // Available.
    let work_state = works_state(&ctx, &name).await?;
    let (kind, api_version) = request_api
        .as_ref()
        .map(|r| (r.kind.clone(), format!("{}/{}", r.group, r.storage_version)))
        .unwrap_or_default();
    let became_available = status_now["status"] != "Available";
    let stored = support::update_status(&api, &name, |s, _| {
        let mut c = set_condition(
            s,
            condition_types::AVAILABLE,
            "True",
            reasons::PROMISE_AVAILABLE,
            messages::READY_TO_FULFIL,
            None,
        );
        c |= set_field(s, "status", json!("Available"));
        c |= set_field(s, "observedGeneration", json!(generation));
        if !kind.is_empty() {
            c |= set_field(s, "kind", json!(kind));
            c |= set_field(s, "apiVersion", json!(api_version));
        }
        if became_available {
            c |= set_field(s, "lastAvailableTime", json!(support::now_rfc3339()));
        }
        if wf.pipelines.is_empty() {
            c |= set_field(s, "workflows", json!(0));
            c |= set_field(s, "workflowsSucceeded", json!(0));
            c |= set_field(s, "workflowsFailed", json!(0));
        }
        let (ws, wr, wm) = work_state.condition("promise");
        c |= set_condition(s, condition_types::WORKS_SUCCEEDED, ws, wr, &wm, None);
        let workflow_done = wf.pipelines.is_empty()
            || condition_true(s, condition_types::CONFIGURE_WORKFLOW_COMPLETED);
        if workflow_done && ws == "True" {
            c |= set_condition(
                s,
                condition_types::RECONCILED,
                "True",
                reasons::RECONCILED,
                messages::RECONCILED,
                None,
            );
        } else if ws == "False" {
            c |= set_condition(
                s,
                condition_types::RECONCILED,
                "False",
                wr,
                messages::FAILING,
                None,
            );
        } else {
            c |= set_condition(
                s,
                condition_types::RECONCILED,
                "Unknown",
                reasons::WORKS_PENDING,
                messages::PENDING,
                None,
            );
        }
        c
    })
    .await?;
    if became_available {
        support::publish(
            &ctx.recorder(COMPONENT),
            &support::reference(&stored),
            support::EventType::Normal,
            plinth_api::constants::events::AVAILABLE,
            "Promise is available",
        )
        .await;
    }
    engine::periodic_rerun(&ctx, &wf, &api, &stored, config.reconciliation_interval).await
}

fn ctx_arc(ctx: &Context) -> Arc<Context> {
    ctx.self_arc()
}

/// The resource-request CRD a Promise's `spec.api` installs, if it has an API.
fn request_crd(promise: &str, spec: &Value) -> Result<Option<Value>, Error> {
    let api = &spec["api"];
    if api.is_null() || api.as_object().is_some_and(|m| m.is_empty()) {
        return Ok(None);
    }
    plinth_api::crds::build_request_crd(promise, api)
        .map(Some)
        .map_err(|e| Error::InvalidPromise {
            promise: promise.to_string(),
            message: e.to_string(),
        })
}

enum ApiState {
    Waiting,
    NoServedVersion(String),
    Ready(request::RequestApi),
}

async fn install_api(
    ctx: &Context,
    api: &Api<DynamicObject>,
    promise: &DynamicObject,
    crd: &Value,
) -> Result<ApiState, Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let name = crd["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let desired: CustomResourceDefinition =
        serde_json::from_value(crd.clone()).map_err(Error::Json)?;
    let existing = match crds.get_opt(&name).await? {
        None => crds.create(&PostParams::default(), &desired).await?,
        Some(mut existing) => {
            let want_versions =
                serde_json::to_value(&desired.spec.versions).map_err(Error::Json)?;
            let have_versions =
                serde_json::to_value(&existing.spec.versions).map_err(Error::Json)?;
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
            if changed {
                existing.spec.versions = desired.spec.versions.clone();
                existing.spec.conversion = desired.spec.conversion.clone();
                existing.spec.preserve_unknown_fields = desired.spec.preserve_unknown_fields;
                crds.replace(&name, &PostParams::default(), &existing)
                    .await?
            } else {
                existing
            }
        }
    };
    let established = existing
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        });
    if !established {
        return Ok(ApiState::Waiting);
    }
    let group = existing.spec.group.clone();
    let kind = existing.spec.names.kind.clone();
    let plural = existing.spec.names.plural.clone();
    let storage = existing
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .or(existing.spec.versions.first())
        .map(|v| v.name.clone())
        .unwrap_or_default();
    // Watch a version that is served now: the storage version if served, else the first served one.
    let served = existing
        .spec
        .versions
        .iter()
        .find(|v| v.served && v.name == storage)
        .or_else(|| existing.spec.versions.iter().find(|v| v.served));
    let Some(served) = served else {
        return Ok(ApiState::NoServedVersion(format!(
            "CRD {name} serves no version: resource requests cannot be watched"
        )));
    };
    let _ = (api, promise);
    // Controller RBAC, kept for compatibility with Kratix's objects.
    let promise_name = promise.name_any();
    let cr_name = plinth_api::names::promise_controller_name(&promise_name);
    let label = json!({labels::PROMISE_NAME: promise_name});
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
    .await?;
    crate::user_roles::ensure(&ctx.client, &promise_name, &group, &plural).await?;
    Ok(ApiState::Ready(request::RequestApi {
        group,
        kind,
        plural,
        storage_version: storage,
        served_version: served.name.clone(),
    }))
}

/// The promise workflow of `action` for this Promise.
fn promise_workflow(promise: &DynamicObject, spec: &Value, action: WorkflowAction) -> Workflow {
    let pipelines = spec["workflows"]["promise"][action.as_str()]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let namespace = spec["workflows"]["config"]["pipelineNamespace"]
        .as_str()
        .filter(|s| !s.is_empty())
        .unwrap_or(SYSTEM_NAMESPACE)
        .to_string();
    Workflow {
        promise_name: promise.name_any(),
        promise_spec: spec.clone(),
        workflow_type: WorkflowType::Promise,
        action,
        subject: Subject {
            group: "platform.kratix.io".into(),
            version: "v1alpha1".into(),
            kind: "Promise".into(),
            plural: "promises".into(),
            name: promise.name_any(),
            namespace: None,
            uid: promise.meta().uid.clone().unwrap_or_default(),
            spec: spec.clone(),
            annotations: promise.annotations().clone(),
        },
        pipelines,
        namespace,
        pipeline_namespace_set: false,
    }
}

async fn ensure_revision(
    ctx: &Context,
    promise: &DynamicObject,
    version: &str,
    spec: &Value,
) -> Result<(), Error> {
    let name = promise.name_any();
    let rev_name = plinth_api::names::promise_revision_name(&name, version);
    let obj = json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "PromiseRevision",
        "metadata": {
            "name": rev_name,
            "labels": {labels::PROMISE_NAME: name, labels::LATEST_REVISION: "true"},
            "ownerReferences": [{"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Promise", "name": name, "uid": promise.meta().uid, "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {"promiseRef": {"name": name}, "promiseSpec": spec, "version": version},
    });
    if crate::apply::create_or_update_reporting(&ctx.client, &obj).await? {
        let note = format!("PromiseRevision {rev_name} created for version {version}");
        support::publish(
            &ctx.recorder(COMPONENT),
            &support::reference(promise),
            support::EventType::Normal,
            plinth_api::constants::events::REVISION_CREATED,
            note,
        )
        .await;
    }
    // Only the current revision keeps the latest label.
    let revisions: Api<DynamicObject> = Api::all_with(
        ctx.client.clone(),
        &kratix_resource("PromiseRevision", "promiserevisions"),
    );
    // `status.latest` says the same: true on the current revision, false on the others
    // (kubectl's LATEST column). Written only when it differs.
    let lp = ListParams::default().labels(&format!("{}={name}", labels::PROMISE_NAME));
    for r in revisions.list(&lp).await?.items {
        let latest = r.name_any() == rev_name;
        if !latest && r.labels().contains_key(labels::LATEST_REVISION) {
            engine::remove_labels(&revisions, &r, &[labels::LATEST_REVISION]).await?;
        }
        if r.data["status"]["latest"].as_bool() != Some(latest) {
            crate::support::update_status(&revisions, &r.name_any(), |st, _| {
                crate::support::set_field(st, "latest", json!(latest))
            })
            .await?;
        }
    }
    Ok(())
}

/// Evaluates `spec.requiredPromises` and records this Promise in each required
/// Promise's `status.requiredBy`. Returns whether all are installed and the states.
async fn evaluate_requirements(
    ctx: &Context,
    promise: &DynamicObject,
    spec: &Value,
) -> Result<(bool, Vec<Value>), Error> {
    let api = promise_api(ctx);
    let revisions: Api<DynamicObject> = Api::all_with(
        ctx.client.clone(),
        &kratix_resource("PromiseRevision", "promiserevisions"),
    );
    let my_version = promise
        .labels()
        .get(labels::PROMISE_VERSION)
        .cloned()
        .unwrap_or_default();
    let mut all = true;
    let mut states = Vec::new();
    for req in spec["requiredPromises"].as_array().into_iter().flatten() {
        let rname = req["name"].as_str().unwrap_or_default().to_string();
        let rversion = req["version"].as_str().unwrap_or_default().to_string();
        let state = match api.get_opt(&rname).await {
            Err(_) => requirement_state::UNKNOWN.to_string(),
            Ok(None) => requirement_state::NOT_INSTALLED.to_string(),
            Ok(Some(required)) => {
                let installed_version = required
                    .labels()
                    .get(labels::PROMISE_VERSION)
                    .cloned()
                    .unwrap_or_default();
                let version_ok = rversion.is_empty() || installed_version == rversion || {
                    let lp =
                        ListParams::default().labels(&format!("{}={rname}", labels::PROMISE_NAME));
                    revisions
                        .list(&lp)
                        .await?
                        .items
                        .iter()
                        .any(|r| r.data["spec"]["version"] == rversion.as_str())
                };
                // Record who requires it, so its own events can reach us too.
                let me = promise.name_any();
                let my_v = my_version.clone();
                let rv = rversion.clone();
                support::update_status(&api, &rname, |s, _| {
                    let list = support::ensure_object(s)
                        .entry("requiredBy")
                        .or_insert_with(|| json!([]));
                    if !list.is_array() {
                        *list = json!([]);
                    }
                    let arr = list.as_array_mut().expect("array");
                    let entry =
                        json!({"promise": {"name": me, "version": my_v}, "requiredVersion": rv});
                    if let Some(existing) =
                        arr.iter_mut().find(|e| e["promise"]["name"] == me.as_str())
                    {
                        if *existing == entry {
                            return false;
                        }
                        *existing = entry;
                    } else {
                        arr.push(entry);
                    }
                    true
                })
                .await?;
                if !version_ok {
                    format!(
                        "{} (installed: {})",
                        requirement_state::NOT_INSTALLED_AT_VERSION,
                        if installed_version.is_empty() {
                            plinth_api::constants::VERSION_NOT_SET
                        } else {
                            &installed_version
                        }
                    )
                } else if required.data["status"]["status"] != "Available" {
                    requirement_state::NOT_AVAILABLE.to_string()
                } else {
                    requirement_state::INSTALLED.to_string()
                }
            }
        };
        if state != requirement_state::INSTALLED {
            all = false;
        }
        states.push(json!({"name": rname, "version": rversion, "state": state}));
    }
    Ok((all, states))
}

/// gzip + standard base64, the Work content encoding.
pub fn encode_content(bytes: &[u8]) -> String {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).expect("in-memory gzip");
    base64::engine::general_purpose::STANDARD.encode(enc.finish().expect("in-memory gzip"))
}

/// The static-dependency Work: created or updated while `spec.dependencies` is
/// non-empty, deleted when it becomes empty.
async fn reconcile_static_dependencies(
    ctx: &Context,
    promise: &DynamicObject,
    spec: &Value,
) -> Result<(), Error> {
    let name = promise.name_any();
    let works: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        SYSTEM_NAMESPACE,
        &kratix_resource("Work", "works"),
    );
    let work_name = plinth_api::names::static_dependency_work_name(&name);
    let deps = spec["dependencies"].as_array().cloned().unwrap_or_default();
    if deps.is_empty() {
        return ignore_not_found(works.delete(&work_name, &DeleteParams::background()).await);
    }
    let mut yaml = String::new();
    for (i, d) in deps.iter().enumerate() {
        if i > 0 {
            yaml.push_str("---\n");
        }
        yaml.push_str(
            &serde_saphyr::to_string(d).map_err(|e| Error::InvalidPromise {
                promise: name.to_string(),
                message: format!("spec.dependencies[{i}]: {e}"),
            })?,
        );
    }
    let selectors: BTreeMap<String, String> = squash_selectors(spec);
    let mut group = json!({
        "id": plinth_api::hash::md5_hex("."),
        "directory": ".",
        "workloads": [{"filepath": format!("static/{name}-dependencies.yaml"), "content": encode_content(yaml.as_bytes())}],
    });
    if !selectors.is_empty() {
        group["destinationSelectors"] = json!([{"matchLabels": selectors, "source": "promise"}]);
    }
    let work = json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Work",
        "metadata": {
            "name": work_name,
            "namespace": SYSTEM_NAMESPACE,
            "labels": {labels::PROMISE_NAME: name, labels::WORK_TYPE: work_type::STATIC_DEPENDENCY},
        },
        "spec": {"promiseName": name, "workloadGroups": [group]},
    });
    crate::apply::create_or_update(&ctx.client, &work).await
}

/// Promise `destinationSelectors` squashed into one map; the first entry wins on a key
/// conflict.
pub fn squash_selectors(spec: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for s in spec["destinationSelectors"]
        .as_array()
        .into_iter()
        .flatten()
    {
        for (k, v) in s["matchLabels"].as_object().into_iter().flatten() {
            out.entry(k.clone())
                .or_insert_with(|| v.as_str().unwrap_or_default().to_string());
        }
    }
    out
}

/// Readiness of a set of Works (priority: Failing > Pending > Misplaced > Ready).
pub struct WorksState {
    pub failing: Vec<String>,
    pub pending: Vec<String>,
    pub misplaced: Vec<String>,
}

impl WorksState {
    /// The `WorksSucceeded` condition (status, reason, message) for `what` ("promise" or "resource").
    pub fn condition(&self, what: &str) -> (&'static str, &'static str, String) {
        if !self.failing.is_empty() {
            (
                "False",
                "WorksFailing",
                format!(
                    "Some works associated with this {what} failed: [{}]",
                    self.failing.join(",")
                ),
            )
        } else if !self.pending.is_empty() {
            (
                "Unknown",
                "WorksPending",
                format!(
                    "Some works associated with this {what} are not ready: [{}]",
                    self.pending.join(",")
                ),
            )
        } else if !self.misplaced.is_empty() {
            (
                "False",
                "WorksMisplaced",
                format!(
                    "Some works associated with this {what} are misplaced: [{}]",
                    self.misplaced.join(",")
                ),
            )
        } else {
            (
                "True",
                "WorksSucceeded",
                format!("All works associated with this {what} are ready"),
            )
        }
    }
}

/// Classifies Works by the message of their `Ready` condition.
pub fn classify_works(items: &[DynamicObject]) -> WorksState {
    let mut st = WorksState {
        failing: vec![],
        pending: vec![],
        misplaced: vec![],
    };
    for w in items {
        let ready =
            support::condition(w.data.get("status").unwrap_or(&Value::Null), "Ready").cloned();
        let msg = ready
            .as_ref()
            .and_then(|c| c["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| "Pending".into());
        let is_true = ready.as_ref().is_some_and(|c| c["status"] == "True");
        match msg.as_str() {
            _ if is_true => {}
            "Failing" => st.failing.push(w.name_any()),
            "Misplaced" => st.misplaced.push(w.name_any()),
            _ => st.pending.push(w.name_any()),
        }
    }
    st
}

async fn works_state(ctx: &Context, promise: &str) -> Result<WorksState, Error> {
    let works: Api<DynamicObject> =
        Api::all_with(ctx.client.clone(), &kratix_resource("Work", "works"));
    // The Promise's own Works: those of its promise workflows and its static
    // dependencies (an unscheduled dependency Work is not "ready", whatever Kratix says).
    let lp = ListParams::default().labels(&format!("{}={promise}", labels::PROMISE_NAME));
    let own: Vec<DynamicObject> = works
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|w| {
            matches!(
                w.labels().get(labels::WORK_TYPE).map(String::as_str),
                Some(work_type::PROMISE | work_type::STATIC_DEPENDENCY)
            )
        })
        .collect();
    Ok(classify_works(&own))
}

/// Deletion, one step per reconcile in Kratix's order.
async fn delete(
    ctx: &Context,
    api: &Api<DynamicObject>,
    promise: &DynamicObject,
) -> Result<Action, Error> {
    let name = promise.name_any();
    let config = ctx.config();
    let spec = promise.data.get("spec").cloned().unwrap_or(Value::Null);
    let has = |f: &str| promise.finalizers().iter().any(|x| x == f);
    let label_sel = format!("{}={name}", labels::PROMISE_NAME);

    if has(finalizers::DELETE_WORKFLOWS) {
        let wf = promise_workflow(promise, &spec, WorkflowAction::Delete);
        let configure = promise_workflow(promise, &spec, WorkflowAction::Configure);
        match engine::reconcile_delete(
            ctx,
            &wf,
            &configure,
            api,
            promise,
            "platform.kratix.io",
            COMPONENT,
        )
        .await?
        {
            Progress::Done => remove_finalizer(api, promise, finalizers::DELETE_WORKFLOWS).await?,
            // A retrying delete pipeline runs again at its nextRetryAt.
            Progress::Suspended { retry_at: Some(at) } => {
                return Ok(Action::requeue(support::until(at)));
            }
            Progress::Failed { .. } => return Ok(Action::await_change()),
            _ => return Ok(Action::await_change()),
        }
        return Ok(Action::await_change());
    }
    if has(finalizers::WORKFLOWS_CLEANUP) {
        let jobs: Api<Job> = Api::all(ctx.client.clone());
        let lp =
            ListParams::default().labels(&format!("{label_sel},kratix.io/workflow-type=promise"));
        let list = jobs.list(&lp).await?.items;
        if list.is_empty() {
            remove_finalizer(api, promise, finalizers::WORKFLOWS_CLEANUP).await?;
        } else {
            for j in list {
                let ns_api: Api<Job> =
                    Api::namespaced(ctx.client.clone(), &j.namespace().unwrap_or_default());
                ignore_not_found(
                    ns_api
                        .delete(&j.name_any(), &DeleteParams::background())
                        .await,
                )?;
            }
            return Ok(Action::requeue(config.requeue_short));
        }
        return Ok(Action::await_change());
    }
    if has(finalizers::RESOURCE_REQUEST_CLEANUP) {
        match ctx.request_controllers.api_of(&name) {
            Some(r) => {
                let remaining = request::delete_all(ctx, &r).await?;
                if remaining > 0 {
                    return Ok(Action::requeue(config.requeue_short));
                }
            }
            None => {
                if let Some(crd) = request_crd(&name, &spec)? {
                    // The controller was never started in this process: start it so the
                    // requests' own finalizers (delete pipelines) can run.
                    if let ApiState::Ready(r) = install_api(ctx, api, promise, &crd).await? {
                        ctx.request_controllers.ensure(&ctx_arc(ctx), &name, r);
                        return Ok(Action::requeue(config.requeue_short));
                    }
                }
            }
        }
        remove_finalizer(api, promise, finalizers::RESOURCE_REQUEST_CLEANUP).await?;
        return Ok(Action::await_change());
    }
    if has(finalizers::REVISION_CLEANUP) {
        let revisions: Api<DynamicObject> = Api::all_with(
            ctx.client.clone(),
            &kratix_resource("PromiseRevision", "promiserevisions"),
        );
        for r in revisions
            .list(&ListParams::default().labels(&label_sel))
            .await?
            .items
        {
            ignore_not_found(
                revisions
                    .delete(&r.name_any(), &DeleteParams::background())
                    .await,
            )?;
        }
        remove_finalizer(api, promise, finalizers::REVISION_CLEANUP).await?;
        return Ok(Action::await_change());
    }
    ctx.request_controllers.stop(&name);
    if has(finalizers::DYNAMIC_CONTROLLER_DEPENDANT_RESOURCES_CLEANUP) {
        let mut remaining = 0;
        for (api_version, kind, plural) in [
            (
                "rbac.authorization.k8s.io/v1",
                "ClusterRoleBinding",
                "clusterrolebindings",
            ),
            (
                "rbac.authorization.k8s.io/v1",
                "ClusterRole",
                "clusterroles",
            ),
            (
                "rbac.authorization.k8s.io/v1",
                "RoleBinding",
                "rolebindings",
            ),
            ("rbac.authorization.k8s.io/v1", "Role", "roles"),
            ("v1", "ServiceAccount", "serviceaccounts"),
            ("v1", "ConfigMap", "configmaps"),
        ] {
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            let ar = ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(group, version, kind),
                plural,
            );
            let all: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &ar);
            for o in all
                .list(&ListParams::default().labels(&label_sel))
                .await?
                .items
            {
                remaining += 1;
                let scoped: Api<DynamicObject> = match o.namespace() {
                    Some(ns) => Api::namespaced_with(ctx.client.clone(), &ns, &ar),
                    None => Api::all_with(ctx.client.clone(), &ar),
                };
                ignore_not_found(
                    scoped
                        .delete(&o.name_any(), &DeleteParams::background())
                        .await,
                )?;
            }
        }
        if remaining > 0 {
            return Ok(Action::requeue(config.requeue_short));
        }
        remove_finalizer(
            api,
            promise,
            finalizers::DYNAMIC_CONTROLLER_DEPENDANT_RESOURCES_CLEANUP,
        )
        .await?;
        return Ok(Action::await_change());
    }
    if has(finalizers::DEPENDENCIES_CLEANUP) {
        let works: Api<DynamicObject> =
            Api::all_with(ctx.client.clone(), &kratix_resource("Work", "works"));
        let list = works
            .list(&ListParams::default().labels(&label_sel))
            .await?
            .items;
        if list.is_empty() {
            remove_finalizer(api, promise, finalizers::DEPENDENCIES_CLEANUP).await?;
            return Ok(Action::await_change());
        }
        for w in list {
            let scoped: Api<DynamicObject> = Api::namespaced_with(
                ctx.client.clone(),
                &w.namespace().unwrap_or_default(),
                &kratix_resource("Work", "works"),
            );
            if w.meta().deletion_timestamp.is_none() {
                ignore_not_found(
                    scoped
                        .delete(&w.name_any(), &DeleteParams::background())
                        .await,
                )?;
            }
        }
        return Ok(Action::requeue(config.requeue_short));
    }
    if has(finalizers::API_CRD_CLEANUP) {
        if let Some(crd) = request_crd(&name, &spec).ok().flatten() {
            let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
            let crd_name = crd["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if crds.get_opt(&crd_name).await?.is_some() {
                ignore_not_found(
                    crds.delete(&crd_name, &DeleteParams::background())
                        .await
                        .map(|_| ()),
                )?;
                return Ok(Action::requeue(config.requeue_short));
            }
        }
        remove_finalizer(api, promise, finalizers::API_CRD_CLEANUP).await?;
    }
    Ok(Action::await_change())
}

fn ignore_not_found<T>(r: Result<T, kube::Error>) -> Result<(), Error> {
    match r {
        Ok(_) => Ok(()),
        Err(ref e) if crate::support::is_not_found(e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
