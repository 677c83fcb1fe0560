//! Building a pipeline's Job and the objects it needs.
//!
//! Everything here is a pure function of the workflow description and the controller
//! configuration, returning Kubernetes objects as JSON values.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use plinth_api::constants::{annotations, labels};
use plinth_api::contract::{self, env};
use plinth_api::pipeline_pod::{self, Adapter};

use super::{Workflow, WorkflowAction, WorkflowType};
use crate::Error;
use crate::context::ControllerConfig;

/// Which run of the workflow a Job belongs to (Plinth's own; orders Jobs exactly even
/// when several start within one second).
pub const ANNOTATION_RUN: &str = "plinth.dev/workflow-run";

/// One pipeline, read strictly from its raw form (wrong apiVersion/kind is
/// "unsupported pipeline").
#[derive(Clone, Debug)]
pub struct PipelineDef {
    /// `metadata.name` of the Pipeline.
    pub name: String,
    /// The Pipeline object as written in the Promise.
    pub raw: Value,
}

impl PipelineDef {
    /// Parses a raw pipeline entry found at `location` (which errors name, e.g.
    /// `Promise redis spec.workflows.resource.configure[0]`).
    pub fn parse(raw: &Value, location: &str) -> Result<PipelineDef, Error> {
        let field = location.to_string();
        if raw["apiVersion"] != "platform.kratix.io/v1alpha1" || raw["kind"] != "Pipeline" {
            return Err(Error::InvalidPipeline {
                field,
                message: format!(
                    "unsupported pipeline: apiVersion {} kind {} (want platform.kratix.io/v1alpha1 Pipeline)",
                    raw["apiVersion"], raw["kind"]
                ),
            });
        }
        let name = raw["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if name.is_empty() {
            return Err(Error::InvalidPipeline {
                field: format!("{field}.metadata.name"),
                message: "Required value".into(),
            });
        }
        if raw["spec"]["containers"]
            .as_array()
            .is_none_or(|c| c.is_empty())
        {
            return Err(Error::InvalidPipeline {
                field: format!("{field}.spec.containers"),
                message: "a pipeline needs at least one container".into(),
            });
        }
        // Admission decodes the same way; this catches a Promise stored before it did.
        if let Err(e) = plinth_api::Pipeline::decode(raw) {
            return Err(Error::InvalidPipeline {
                field: e.field_under(&field),
                message: e.message,
            });
        }
        Ok(PipelineDef {
            name,
            raw: raw.clone(),
        })
    }

    fn spec(&self) -> &Value {
        &self.raw["spec"]
    }
}

/// Pipeline ID `<promise>-<type>-<action>-<pipeline>`: names the ServiceAccount
/// and the default Roles.
pub fn pipeline_id(wf: &Workflow, pipeline: &str) -> String {
    plinth_api::names::pipeline_id(
        &wf.promise_name,
        wf.workflow_type.as_str(),
        wf.action.as_str(),
        pipeline,
    )
}

/// The ServiceAccount a pipeline's pod runs as (`rbac.serviceAccount`, else the ID).
pub fn service_account_name(wf: &Workflow, p: &PipelineDef) -> String {
    p.spec()["rbac"]["serviceAccount"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| pipeline_id(wf, &p.name))
}

/// The workflow hash, as Kratix labels its Jobs: md5 of the Promise spec in Kratix's typed
/// form for promise workflows, md5(`<md5(that spec)>-<md5(request spec)>`) for resource
/// workflows.
pub fn workflow_hash(wf: &Workflow) -> String {
    match wf.workflow_type {
        WorkflowType::Promise => plinth_api::hash::promise_workflow_hash(&wf.promise_spec),
        WorkflowType::Resource => plinth_api::hash::resource_workflow_hash(
            &wf.promise_spec,
            &wf.subject.spec,
            wf.is_dry_run(),
        ),
    }
}

/// Every hash label that marks a Job as a run of this workflow's current spec:
/// [`workflow_hash`] first, then the forms earlier releases wrote where they differ.
pub fn workflow_hashes(wf: &Workflow) -> Vec<String> {
    match wf.workflow_type {
        WorkflowType::Promise => plinth_api::hash::promise_workflow_hashes(&wf.promise_spec),
        WorkflowType::Resource => plinth_api::hash::resource_workflow_hashes(
            &wf.promise_spec,
            &wf.subject.spec,
            wf.is_dry_run(),
        ),
    }
}

/// Whether `job` ran this workflow's current spec.
pub fn runs_current_spec(job: &k8s_openapi::api::batch::v1::Job, hashes: &[String]) -> bool {
    kube::ResourceExt::labels(job)
        .get(labels::HASH)
        .is_some_and(|h| hashes.contains(h))
}

/// Labels identifying every Job of this object's workflow of this action (all pipelines).
pub fn workflow_selector(wf: &Workflow) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    labels.insert(labels::PROMISE_NAME.into(), wf.promise_name.clone());
    labels.insert(
        labels::WORKFLOW_TYPE.into(),
        wf.workflow_type.as_str().into(),
    );
    labels.insert(labels::WORKFLOW_ACTION.into(), wf.action.as_str().into());
    if wf.workflow_type == WorkflowType::Resource {
        labels.insert(labels::RESOURCE_NAME.into(), wf.subject.object.name.clone());
        if wf.pipeline_namespace_set {
            labels.insert(
                labels::RESOURCE_NAMESPACE.into(),
                wf.subject.object.namespace.clone().unwrap_or_default(),
            );
        }
    }
    labels
}

/// Renders a label map as a label selector string (`a=b,c=d`).
pub fn selector_string(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The Job for `pipelines[index]` in run number `run`. Job names are
/// deterministic and unique per run: a hash of the workflow hash and the run number
/// replaces Kratix's random suffix.
pub fn build_job(
    wf: &Workflow,
    pipelines: &[PipelineDef],
    index: usize,
    run: u64,
    config: &ControllerConfig,
) -> Value {
    let p = &pipelines[index];
    let hash = workflow_hash(wf);
    let ns = &wf.namespace;
    let labels = job_labels(wf, p, &hash);
    let (annotations, pod_annotations) = job_annotations(wf, p, run);
    let is_configure = wf.action == WorkflowAction::Configure;
    let is_last = !is_configure || index + 1 == pipelines.len();
    let pod_spec = pod_spec(wf, p, config, is_last);
    let mut job_spec = json!({
        "template": {
            "metadata": {"labels": labels, "annotations": pod_annotations},
            "spec": pod_spec,
        }
    });
    let job_options = &p.spec()["jobOptions"];
    if let Some(limit) = job_options["backoffLimit"]
        .as_i64()
        .or(config.default_backoff_limit.map(i64::from))
    {
        job_spec["backoffLimit"] = json!(limit);
    }
    if let Some(deadline) = job_options["activeDeadlineSeconds"].as_i64() {
        job_spec["activeDeadlineSeconds"] = json!(deadline);
    }
    let mut job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(wf, p, &hash, run),
            "namespace": ns,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": job_spec,
    });
    // Promise Jobs are controlled by the Promise; resource Jobs are owned (not controlled)
    // by the request when they share its namespace.
    let same_ns = wf
        .subject
        .object
        .namespace
        .as_deref()
        .is_none_or(|n| n == ns);
    if same_ns {
        job["metadata"]["ownerReferences"] = json!([{
            "apiVersion": wf.subject.object.api_version(),
            "kind": wf.subject.object.kind,
            "name": wf.subject.object.name,
            "uid": wf.subject.uid,
            "controller": wf.workflow_type == WorkflowType::Promise,
            "blockOwnerDeletion": true,
        }]);
    }
    job
}

/// The deterministic Job name of pipeline `p` in run `run`.
fn job_name(wf: &Workflow, p: &PipelineDef, hash: &str, run: u64) -> String {
    let resource =
        (wf.workflow_type == WorkflowType::Resource).then_some(wf.subject.object.name.as_str());
    let resource_ns = if wf.pipeline_namespace_set {
        wf.subject.object.namespace.as_deref()
    } else {
        None
    };
    plinth_api::names::job_name(
        &wf.promise_name,
        resource,
        resource_ns,
        &p.name,
        &format!("{hash}-{run}"),
    )
}

/// The string entries of the pipeline's `metadata.<field>` map.
fn string_map(p: &PipelineDef, field: &str) -> BTreeMap<String, String> {
    p.raw["metadata"][field]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The Job's (and its Pods') labels: the pipeline's, then Kratix's, which win so Job
/// tracking cannot break.
fn job_labels(wf: &Workflow, p: &PipelineDef, hash: &str) -> BTreeMap<String, String> {
    let mut labels = string_map(p, "labels");
    labels.extend(workflow_selector(wf));
    labels.insert(labels::PIPELINE_NAME.into(), p.name.clone());
    labels.insert(labels::MANAGED_BY.into(), "Kratix".into());
    labels.insert(labels::HASH.into(), hash.to_string());
    labels
}

/// The Job's annotations (the subject it runs for, the run number, trace context) and
/// its Pods' (the pipeline's own plus the trace context).
fn job_annotations(
    wf: &Workflow,
    p: &PipelineDef,
    run: u64,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let mut job = BTreeMap::from([
        (
            annotations::JOB_RESOURCE_NAMESPACE.to_string(),
            wf.subject.object.namespace.clone().unwrap_or_default(),
        ),
        (
            annotations::JOB_RESOURCE_NAME.to_string(),
            wf.subject.object.name.clone(),
        ),
        (
            annotations::JOB_RESOURCE_KIND.to_string(),
            wf.subject.object.kind.clone(),
        ),
        (
            annotations::JOB_RESOURCE_API_VERSION.to_string(),
            wf.subject.object.api_version(),
        ),
        (ANNOTATION_RUN.to_string(), run.to_string()),
    ]);
    let mut pod = string_map(p, "annotations");
    for key in [annotations::TRACE_PARENT, annotations::TRACE_STATE] {
        if let Some(v) = wf.subject.annotations.get(key) {
            job.insert(key.to_string(), v.clone());
            pod.insert(key.to_string(), v.clone());
        }
    }
    (job, pod)
}

/// How this platform's adapter containers are built.
fn adapter(config: &ControllerConfig) -> Adapter<'_> {
    Adapter {
        image: &config.adapter_image,
        pull_policy: config
            .default_image_pull_policy
            .as_deref()
            .unwrap_or("IfNotPresent"),
        security_context: plinth_api::security::injected_container(
            config.default_security_context.as_ref(),
        ),
        resources: Some(default_resources(config)),
    }
}

/// The Pod spec: init containers reader → the pipeline's containers → work-writer
/// (configure only), the status-writer as the one container, and the volumes.
fn pod_spec(wf: &Workflow, p: &PipelineDef, config: &ControllerConfig, is_last: bool) -> Value {
    let kratix_env = kratix_env(wf, &p.name);
    let is_configure = wf.action == WorkflowAction::Configure;
    let adapter = adapter(config);
    let mut init = vec![adapter.container(
        "reader",
        ["reader"],
        pipeline_pod::reader_mounts(),
        kratix_env.clone(),
    )];
    for c in p.spec()["containers"].as_array().into_iter().flatten() {
        init.push(user_container(c, &kratix_env, config));
    }
    if is_configure {
        init.push(work_writer(wf, p, &adapter));
    }
    let mut status_env = vec![json!({"name": env::IS_LAST_PIPELINE, "value": is_last.to_string()})];
    status_env.extend(kratix_env);
    let status_writer = adapter.container(
        "status-writer",
        ["update-status"],
        json!([pipeline_pod::mount(
            pipeline_pod::METADATA_VOLUME,
            contract::WORK_CREATOR_METADATA_DIR
        )]),
        status_env,
    );
    let mut pod_spec = json!({
        "serviceAccountName": service_account_name(wf, p),
        "restartPolicy": p.spec()["restartPolicy"].as_str().unwrap_or("OnFailure"),
        "initContainers": init,
        "containers": [status_writer],
        "volumes": volumes(wf, p, is_configure),
    });
    pipeline_pod::copy_pod_fields(p.spec(), &mut pod_spec);
    pod_spec
}

/// A pipeline container with the `/kratix` mounts and `KRATIX_*` variables first, and
/// the configured image pull policy, security context and resources where it has none.
fn user_container(c: &Value, kratix_env: &[Value], config: &ControllerConfig) -> Value {
    let mut c = pipeline_pod::user_container(c, kratix_env);
    if c.get("imagePullPolicy").is_none()
        && let Some(policy) = &config.default_image_pull_policy
    {
        c["imagePullPolicy"] = json!(policy);
    }
    if c.get("securityContext").is_none()
        && let Some(sc) = &config.default_security_context
    {
        c["securityContext"] = sc.clone();
    }
    if c.get("resources").is_none() {
        c["resources"] = default_resources(config);
    }
    c
}

/// The work-writer: the pipeline output → a Work, scheduled with the Promise's
/// selectors.
fn work_writer(wf: &Workflow, p: &PipelineDef, adapter: &Adapter) -> Value {
    let mut args = vec![
        "work-creator".to_string(),
        "--input-directory".into(),
        contract::WORK_CREATOR_ROOT.into(),
        "--promise-name".into(),
        wf.promise_name.clone(),
        "--pipeline-name".into(),
        p.name.clone(),
        "--namespace".into(),
        wf.namespace.clone(),
        "--workflow-type".into(),
        wf.workflow_type.as_str().into(),
    ];
    if wf.workflow_type == WorkflowType::Resource {
        args.push("--resource-name".into());
        args.push(wf.subject.object.name.clone());
        if wf.pipeline_namespace_set {
            args.push("--resource-namespace".into());
            args.push(wf.subject.object.namespace.clone().unwrap_or_default());
        }
    }
    let mut env = vec![
        json!({"name": env::TRACE_PARENT, "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['kratix.io/trace-parent']"}}}),
        json!({"name": env::TRACE_STATE, "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['kratix.io/trace-state']"}}}),
    ];
    // A dry run's Works are labelled as such (and scheduled only to dry-run Destinations).
    if wf.is_dry_run() {
        env.push(json!({"name": env::DRY_RUN, "value": "true"}));
    }
    adapter.container(
        "work-writer",
        args,
        json!([
            pipeline_pod::mount(
                pipeline_pod::OUTPUT_VOLUME,
                contract::WORK_CREATOR_INPUT_DIR
            ),
            pipeline_pod::mount(
                pipeline_pod::METADATA_VOLUME,
                contract::WORK_CREATOR_METADATA_DIR
            ),
            pipeline_pod::mount(
                pipeline_pod::SCHEDULING_VOLUME,
                contract::WORK_CREATOR_KRATIX_SYSTEM_DIR
            ),
        ]),
        env,
    )
}

/// The Pod's volumes: the Promise's scheduling ConfigMap (configure only), the three
/// shared `emptyDir`s, then the pipeline's own.
fn volumes(wf: &Workflow, p: &PipelineDef, is_configure: bool) -> Vec<Value> {
    let mut volumes = Vec::new();
    if is_configure {
        volumes.push(json!({
            "name": pipeline_pod::SCHEDULING_VOLUME,
            "configMap": {
                "name": scheduling_configmap_name(&wf.promise_name),
                "items": [{
                    "key": contract::PROMISE_SCHEDULING_CONFIGMAP_KEY,
                    "path": contract::PROMISE_SCHEDULING_FILE,
                }],
            }
        }));
    }
    volumes.extend(pipeline_pod::shared_volumes());
    volumes.extend(p.spec()["volumes"].as_array().cloned().unwrap_or_default());
    volumes
}

/// `KRATIX_*` variables in Kratix's order.
fn kratix_env(wf: &Workflow, pipeline: &str) -> Vec<Value> {
    let pairs = [
        (env::WORKFLOW_ACTION, wf.action.as_str().to_string()),
        (env::WORKFLOW_TYPE, wf.workflow_type.as_str().to_string()),
        (env::PROMISE_NAME, wf.promise_name.clone()),
        (env::PIPELINE_NAME, pipeline.to_string()),
    ];
    let mut env: Vec<Value> = pairs
        .into_iter()
        .chain(wf.subject.object.variables())
        .map(|(k, v)| json!({"name": k, "value": v}))
        .collect();
    if wf.is_dry_run() {
        env.push(json!({"name": env::DRY_RUN, "value": "true"}));
    }
    env
}

/// Kratix's default resources of its own containers, replaced wholesale by `workflows.defaultContainerResources`.
fn default_resources(config: &ControllerConfig) -> Value {
    config
        .default_container_resources
        .clone()
        .unwrap_or_else(|| {
            json!({
                "requests": {"cpu": "100m", "memory": "128Mi", "ephemeral-storage": "128Mi"},
                "limits": {"cpu": "200m", "memory": "256Mi", "ephemeral-storage": "256Mi"},
            })
        })
}

/// `destination-selectors-<promise>`.
pub fn scheduling_configmap_name(promise: &str) -> String {
    plinth_api::names::scheduling_configmap_name(promise)
}

/// The objects applied (create-or-update) before each Job: ServiceAccount,
/// scheduling ConfigMap (configure only), the default Role/ClusterRole and binding, and
/// the user-permission RBAC from `rbac.permissions`.
pub fn build_aux_objects(wf: &Workflow, p: &PipelineDef, api_group: &str) -> Vec<Value> {
    let ns = &wf.namespace;
    let id = pipeline_id(wf, &p.name);
    let sa = service_account_name(wf, p);
    let promise_label = json!({labels::PROMISE_NAME: wf.promise_name});
    let subject = json!([{"kind": "ServiceAccount", "name": sa, "namespace": ns}]);
    let mut out = vec![json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": sa, "namespace": ns, "labels": promise_label},
    })];
    if wf.action == WorkflowAction::Configure {
        let selectors: Vec<Value> = wf.promise_spec["destinationSelectors"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| json!({"matchLabels": s["matchLabels"].clone(), "source": "promise"}))
            .collect();
        let yaml = serde_saphyr::to_string(&selectors).unwrap_or_else(|_| "[]\n".into());
        out.push(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": scheduling_configmap_name(&wf.promise_name), "namespace": ns, "labels": promise_label},
            "data": {"destinationSelectors": yaml},
        }));
    }
    let rbac = "rbac.authorization.k8s.io/v1";
    match wf.workflow_type {
        WorkflowType::Promise => {
            out.push(json!({
                "apiVersion": rbac, "kind": "ClusterRole",
                "metadata": {"name": id, "labels": promise_label},
                "rules": [{"apiGroups": [plinth_api::GROUP], "resources": ["promises", "promises/status", "works"], "verbs": ["get", "list", "update", "create", "patch"]}],
            }));
            out.push(json!({
                "apiVersion": rbac, "kind": "ClusterRoleBinding",
                "metadata": {"name": id, "labels": promise_label},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": id},
                "subjects": subject,
            }));
        }
        WorkflowType::Resource => {
            let plural = &wf.subject.object.plural;
            let api_rule = json!({"apiGroups": [api_group], "resources": [plural, format!("{plural}/status")], "verbs": ["get", "list", "update", "create", "patch"]});
            out.push(json!({
                "apiVersion": rbac, "kind": "Role",
                "metadata": {"name": id, "namespace": ns, "labels": promise_label},
                "rules": [api_rule, {"apiGroups": ["platform.kratix.io"], "resources": ["works"], "verbs": ["*"]}],
            }));
            out.push(json!({
                "apiVersion": rbac, "kind": "RoleBinding",
                "metadata": {"name": id, "namespace": ns, "labels": promise_label},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": id},
                "subjects": subject,
            }));
            let rr_ns = wf.subject.object.namespace.clone().unwrap_or_default();
            if &rr_ns != ns {
                let name = plinth_api::names::object_name(&format!("{id}-{rr_ns}"), &[], 63);
                out.push(json!({
                    "apiVersion": rbac, "kind": "ClusterRole",
                    "metadata": {"name": name, "labels": promise_label},
                    "rules": [api_rule],
                }));
                out.push(json!({
                    "apiVersion": rbac, "kind": "ClusterRoleBinding",
                    "metadata": {"name": name, "labels": promise_label},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                    "subjects": subject,
                }));
            }
        }
    }
    out.extend(user_permission_objects(wf, p, &id, &subject));
    out
}

/// RBAC from `rbac.permissions`: rules without `resourceNamespace` become a Role
/// in the pipeline namespace; each distinct `resourceNamespace` gets a ClusterRole bound
/// in that namespace, and `*` a ClusterRoleBinding.
fn user_permission_objects(
    wf: &Workflow,
    p: &PipelineDef,
    id: &str,
    subject: &Value,
) -> Vec<Value> {
    let rbac = "rbac.authorization.k8s.io/v1";
    let ns = &wf.namespace;
    let (local_rules, by_ns) = plinth_api::pipeline::permission_rules(p.spec());
    let base_labels = |extra: Option<(&str, &str)>| {
        let mut l = json!({
            labels::PROMISE_NAME: wf.promise_name,
            labels::WORKFLOW_TYPE: wf.workflow_type.as_str(),
            labels::WORKFLOW_ACTION: wf.action.as_str(),
            labels::PIPELINE_NAME: p.name,
            labels::PIPELINE_NAMESPACE: ns,
        });
        if let Some((k, v)) = extra {
            l[k] = json!(v);
        }
        l
    };
    let mut out = Vec::new();
    if !local_rules.is_empty() {
        let name = plinth_api::names::user_role_name(id);
        out.push(json!({"apiVersion": rbac, "kind": "Role", "metadata": {"name": name, "namespace": ns, "labels": base_labels(None)}, "rules": local_rules}));
        out.push(json!({"apiVersion": rbac, "kind": "RoleBinding", "metadata": {"name": name, "namespace": ns, "labels": base_labels(None)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}, "subjects": subject}));
    }
    for (target, rules) in by_ns {
        let label_value = if target == "*" {
            "kratix_all_namespaces".to_string()
        } else {
            target.clone()
        };
        let role_name = plinth_api::names::user_cluster_role_name(id, &target);
        let labels = base_labels(Some((labels::RESOURCE_NAMESPACE, &label_value)));
        out.push(json!({"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": role_name, "labels": labels}, "rules": rules}));
        let binding_name = plinth_api::names::user_binding_name(id, ns);
        let role_ref = json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name});
        if target == "*" {
            out.push(json!({"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": binding_name, "labels": labels}, "roleRef": role_ref, "subjects": subject}));
        } else {
            out.push(json!({"apiVersion": rbac, "kind": "RoleBinding", "metadata": {"name": binding_name, "namespace": target, "labels": labels}, "roleRef": role_ref, "subjects": subject}));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::Subject;
    use plinth_api::contract::ObjectRef;

    fn pipeline(name: &str) -> Value {
        json!({
            "apiVersion": "platform.kratix.io/v1alpha1",
            "kind": "Pipeline",
            "metadata": {"name": name, "labels": {"team": "a", "kratix.io/hash": "user-value"}},
            "spec": {"containers": [{"name": "make", "image": "example.org/make:1"}]},
        })
    }

    fn workflow(action: WorkflowAction, names: &[&str]) -> (Workflow, Vec<PipelineDef>) {
        let raw: Vec<Value> = names.iter().map(|n| pipeline(n)).collect();
        let defs = raw
            .iter()
            .enumerate()
            .map(|(i, r)| PipelineDef::parse(r, &format!("pipelines[{i}]")).unwrap())
            .collect();
        let wf = Workflow {
            promise_name: "redis".into(),
            promise_spec: json!({"api": {}}),
            workflow_type: WorkflowType::Resource,
            action,
            subject: Subject {
                object: ObjectRef {
                    group: "example.org".into(),
                    version: "v1".into(),
                    kind: "Redis".into(),
                    plural: "redis".into(),
                    name: "shop".into(),
                    namespace: Some("team-a".into()),
                },
                uid: "uid-1".into(),
                spec: json!({"size": 1}),
                annotations: [(annotations::TRACE_PARENT.to_string(), "tp".to_string())].into(),
            },
            pipelines: raw,
            namespace: "team-a".into(),
            pipeline_namespace_set: false,
        };
        (wf, defs)
    }

    fn names(list: &Value) -> Vec<&str> {
        list.as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn a_stored_pipeline_of_the_wrong_type_names_the_promise_and_field() {
        let raw = json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Pipeline",
                         "metadata": {"name": "p"},
                         "spec": {"containers": [{"name": "c", "image": "busybox", "command": "echo hi"}]}});
        let e = PipelineDef::parse(&raw, "Promise redis spec.workflows.resource.configure[0]")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid pipeline at Promise redis spec.workflows.resource.configure[0].spec.containers[0].command: \
             invalid type: string \"echo hi\", expected a sequence"
        );
    }

    #[test]
    fn kratix_labels_win_over_the_pipelines_own() {
        let (wf, defs) = workflow(WorkflowAction::Configure, &["first"]);
        let job = build_job(&wf, &defs, 0, 3, &ControllerConfig::default());
        let l = &job["metadata"]["labels"];
        assert_eq!(l[labels::PIPELINE_NAME], "first");
        assert_eq!(l[labels::PROMISE_NAME], "redis");
        assert_eq!(l[labels::RESOURCE_NAME], "shop");
        assert_eq!(l[labels::WORKFLOW_TYPE], "resource");
        assert_eq!(l[labels::WORKFLOW_ACTION], "configure");
        assert_eq!(l[labels::HASH], workflow_hash(&wf).as_str());
        assert_eq!(l["team"], "a");
        assert_eq!(job["spec"]["template"]["metadata"]["labels"], *l);
        let a = &job["metadata"]["annotations"];
        assert_eq!(a[ANNOTATION_RUN], "3");
        assert_eq!(a[annotations::JOB_RESOURCE_NAME], "shop");
        assert_eq!(a[annotations::JOB_RESOURCE_NAMESPACE], "team-a");
        assert_eq!(a[annotations::JOB_RESOURCE_KIND], "Redis");
        assert_eq!(a[annotations::JOB_RESOURCE_API_VERSION], "example.org/v1");
        assert_eq!(a[annotations::TRACE_PARENT], "tp");
        assert_eq!(
            job["spec"]["template"]["metadata"]["annotations"][annotations::TRACE_PARENT],
            "tp"
        );
    }

    #[test]
    fn configure_pod_reads_runs_the_users_containers_then_writes_works_and_status() {
        let (wf, defs) = workflow(WorkflowAction::Configure, &["first", "second"]);
        let config = ControllerConfig::default();
        let job = build_job(&wf, &defs, 0, 1, &config);
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(
            names(&pod["initContainers"]),
            ["reader", "make", "work-writer"]
        );
        assert_eq!(names(&pod["containers"]), ["status-writer"]);
        let volumes = names(&pod["volumes"]);
        assert!(volumes.contains(&"promise-scheduling"), "{volumes:?}");
        let make = &pod["initContainers"][1];
        let mounts: Vec<&str> = make["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["mountPath"].as_str().unwrap())
            .collect();
        assert_eq!(
            mounts,
            ["/kratix/input", "/kratix/output", "/kratix/metadata"]
        );
        assert_eq!(
            pod["initContainers"][0]["image"],
            config.adapter_image.as_str()
        );
        let is_last = |job: &Value| {
            job["spec"]["template"]["spec"]["containers"][0]["env"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == "IS_LAST_PIPELINE")
                .map(|e| e["value"].clone())
        };
        assert_eq!(is_last(&job), Some(json!("false")));
        assert_eq!(
            is_last(&build_job(&wf, &defs, 1, 1, &config)),
            Some(json!("true"))
        );
    }

    #[test]
    fn injected_containers_use_the_shared_pipeline_security_defaults() {
        let (wf, defs) = workflow(WorkflowAction::Configure, &["first"]);
        let config = ControllerConfig {
            default_security_context: Some(json!({"runAsUser": 1000})),
            ..ControllerConfig::default()
        };
        let job = build_job(&wf, &defs, 0, 1, &config);
        let pod = &job["spec"]["template"]["spec"];
        let expected = plinth_api::security::injected_container(Some(&json!({"runAsUser": 1000})));
        assert_eq!(expected["readOnlyRootFilesystem"], true);
        for c in [
            &pod["initContainers"][0],
            &pod["initContainers"][2],
            &pod["containers"][0],
        ] {
            assert_eq!(c["securityContext"], expected, "{}", c["name"]);
        }
        // The user's container gets the cluster default only; Kratix sets no Pod context.
        assert_eq!(
            pod["initContainers"][1]["securityContext"],
            json!({"runAsUser": 1000})
        );
        assert!(pod.get("securityContext").is_none());
    }

    #[test]
    fn delete_pod_writes_no_works() {
        let (wf, defs) = workflow(WorkflowAction::Delete, &["cleanup"]);
        let job = build_job(&wf, &defs, 0, 1, &ControllerConfig::default());
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(names(&pod["initContainers"]), ["reader", "make"]);
        assert!(!names(&pod["volumes"]).contains(&"promise-scheduling"));
        assert_eq!(job["metadata"]["labels"][labels::WORKFLOW_ACTION], "delete");
    }

    #[test]
    fn job_name_is_deterministic_per_run() {
        let (wf, defs) = workflow(WorkflowAction::Configure, &["first"]);
        let config = ControllerConfig::default();
        let name = |run| build_job(&wf, &defs, 0, run, &config)["metadata"]["name"].clone();
        assert_eq!(name(1), name(1));
        assert_ne!(name(1), name(2));
        assert!(name(1).as_str().unwrap().len() <= 63);
    }
}
