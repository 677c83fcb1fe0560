//! The objects the health agent creates for one HealthDefinition: a CronJob running the
//! check, its ServiceAccount, and RBAC. Pure functions of the definition, returning
//! Kubernetes objects as JSON values.
//!
//! The check's Pod mirrors a Kratix workflow Pod: the agent's `reader` (writes the
//! definition's `spec.input` as `/kratix/input/object.yaml`), the pipeline's containers,
//! then the agent's `health-state-creator` (turns `/kratix/output/health-status.yaml` into a
//! HealthRecord). The ServiceAccount and RBAC follow a workflow's: `rbac.serviceAccount`
//! names an existing account to use instead of the agent's, and `rbac.permissions` become a
//! Role in the definition's namespace (rules without `resourceNamespace`), a ClusterRole
//! bound in each named namespace, and a ClusterRoleBinding for `*`. The agent's own Role
//! lets the Pod write HealthRecords in the definition's namespace.

use std::collections::BTreeMap;

use plinth_api::HealthDefinition;
use plinth_api::constants::{health as names, labels};
use plinth_api::contract::{self, env};
use plinth_api::pipeline_pod::{self, Adapter};
use serde_json::{Value, json};

const RBAC: &str = "rbac.authorization.k8s.io/v1";

/// Why a HealthDefinition's objects cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// `spec.workflow` is not a Kratix Pipeline (the message names the field).
    #[error(transparent)]
    Pipeline(#[from] plinth_api::ApiError),
    /// `spec.workflow.spec.containers` is missing or empty.
    #[error("spec.workflow.spec.containers: a health check needs at least one container")]
    NoContainers,
}

/// How the check's Pods are built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckSettings {
    /// Image of the agent-injected containers (holding `plinth`, run as
    /// `/bin/pipeline-adapter`).
    pub adapter_image: String,
}

impl Default for CheckSettings {
    fn default() -> Self {
        CheckSettings {
            adapter_image: plinth_api::constants::DEFAULT_ADAPTER_IMAGE.to_string(),
        }
    }
}

/// Identity of a HealthDefinition: `(namespace, name)`.
pub type DefinitionId = (String, String);

/// The definition's identity.
pub fn definition_id(hd: &HealthDefinition) -> DefinitionId {
    (
        hd.metadata.namespace.clone().unwrap_or_default(),
        hd.metadata.name.clone().unwrap_or_default(),
    )
}

/// Labels on every object built for `id` (the CronJob, its Jobs and Pods, RBAC).
pub fn object_labels(id: &DefinitionId, promise: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (names::DEFINITION_LABEL.to_string(), id.1.clone()),
        (names::DEFINITION_NAMESPACE_LABEL.to_string(), id.0.clone()),
        (
            labels::MANAGED_BY.to_string(),
            names::AGENT_MANAGER.to_string(),
        ),
        (labels::PROMISE_NAME.to_string(), promise.to_string()),
    ])
}

/// Every object for `hd`: ServiceAccount (unless the pipeline names its own), Role and
/// RoleBinding for HealthRecords, the pipeline's `rbac.permissions`, then the CronJob.
///
/// # Errors
/// [`BuildError::Pipeline`] naming `spec.workflow` when it is not a Kratix Pipeline,
/// [`BuildError::NoContainers`] when it has no containers.
pub fn build_objects(
    hd: &HealthDefinition,
    settings: &CheckSettings,
) -> Result<Vec<Value>, BuildError> {
    let pipeline = hd.pipeline()?;
    let raw = &hd.spec.workflow;
    if raw["spec"]["containers"]
        .as_array()
        .is_none_or(|c| c.is_empty())
    {
        return Err(BuildError::NoContainers);
    }
    let id = definition_id(hd);
    let base = plinth_api::names::health_cronjob_name(&id.0, &id.1);
    let labels = object_labels(&id, &hd.spec.promise_ref.name);
    let own_sa = raw["spec"]["rbac"]["serviceAccount"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let sa = own_sa.clone().unwrap_or_else(|| base.clone());
    let subject = json!([{"kind": "ServiceAccount", "name": sa, "namespace": id.0}]);
    let meta = |name: &str, ns: Option<&str>| {
        let mut m = json!({"name": name, "labels": labels});
        if let Some(ns) = ns {
            m["namespace"] = json!(ns);
        }
        m
    };
    let mut out = Vec::new();
    if own_sa.is_none() {
        out.push(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(&sa, Some(&id.0))}));
    }
    out.push(json!({
        "apiVersion": RBAC, "kind": "Role", "metadata": meta(&base, Some(&id.0)),
        "rules": [{"apiGroups": [plinth_api::GROUP], "resources": ["healthrecords"],
                   "verbs": ["get", "create", "update", "patch"]}],
    }));
    out.push(json!({
        "apiVersion": RBAC, "kind": "RoleBinding", "metadata": meta(&base, Some(&id.0)),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": base},
        "subjects": subject,
    }));
    out.extend(permission_objects(raw, &base, &id.0, &subject, &meta));
    out.push(cronjob(
        hd,
        &pipeline.metadata.name,
        &base,
        &sa,
        &labels,
        settings,
    ));
    Ok(out)
}

/// RBAC from `rbac.permissions`, as a workflow's: local rules → Role, each
/// `resourceNamespace` → a ClusterRole bound there, `*` → a ClusterRoleBinding.
fn permission_objects(
    raw: &Value,
    base: &str,
    ns: &str,
    subject: &Value,
    meta: &dyn Fn(&str, Option<&str>) -> Value,
) -> Vec<Value> {
    let (local, by_ns) = plinth_api::pipeline::permission_rules(&raw["spec"]);
    let mut out = Vec::new();
    if !local.is_empty() {
        let name = plinth_api::names::user_role_name(base);
        out.push(json!({"apiVersion": RBAC, "kind": "Role", "metadata": meta(&name, Some(ns)), "rules": local}));
        out.push(json!({"apiVersion": RBAC, "kind": "RoleBinding", "metadata": meta(&name, Some(ns)),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}, "subjects": subject}));
    }
    for (target, rules) in by_ns {
        let role = plinth_api::names::user_cluster_role_name(base, &target);
        out.push(json!({"apiVersion": RBAC, "kind": "ClusterRole", "metadata": meta(&role, None), "rules": rules}));
        let binding = plinth_api::names::user_binding_name(base, ns);
        let role_ref =
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role});
        if target == "*" {
            out.push(json!({"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": meta(&binding, None),
                "roleRef": role_ref, "subjects": subject}));
        } else {
            out.push(json!({"apiVersion": RBAC, "kind": "RoleBinding", "metadata": meta(&binding, Some(&target)),
                "roleRef": role_ref, "subjects": subject}));
        }
    }
    out
}

/// The variables every container of the check sees.
fn check_env(hd: &HealthDefinition, pipeline: &str) -> Vec<Value> {
    let id = definition_id(hd);
    let r = &hd.spec.resource_ref;
    // A reference without a namespace means the definition's own.
    let request_ns = r.namespace.as_deref().unwrap_or(id.0.as_str());
    [
        (env::PROMISE_NAME, hd.spec.promise_ref.name.as_str()),
        (env::PIPELINE_NAME, pipeline),
        (env::OBJECT_NAME, r.name.as_str()),
        (env::OBJECT_NAMESPACE, request_ns),
        (names::DEFINITION_NAME_ENV, id.1.as_str()),
        (names::DEFINITION_NAMESPACE_ENV, id.0.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| json!({"name": k, "value": v}))
    .collect()
}

fn cronjob(
    hd: &HealthDefinition,
    pipeline: &str,
    name: &str,
    sa: &str,
    labels: &BTreeMap<String, String>,
    settings: &CheckSettings,
) -> Value {
    let spec = &hd.spec.workflow["spec"];
    let env = check_env(hd, pipeline);
    let adapter = Adapter {
        image: &settings.adapter_image,
        pull_policy: "IfNotPresent",
        security_context: plinth_api::security::injected_container(None),
        resources: None,
    };
    let mut reader_env =
        vec![json!({"name": names::INPUT_ENV, "value": hd.spec.input.clone().unwrap_or_default()})];
    reader_env.extend(env.clone());
    let mut init = vec![adapter.container(
        "reader",
        ["reader", "--input-env", names::INPUT_ENV],
        pipeline_pod::reader_mounts(),
        reader_env,
    )];
    // The user's containers keep what the Promise says; only the contract is added.
    for c in spec["containers"].as_array().into_iter().flatten() {
        init.push(pipeline_pod::user_container(c, &env));
    }
    let creator = adapter.container(
        "health-state-creator",
        ["health-state-creator"],
        json!([{"name": pipeline_pod::OUTPUT_VOLUME, "mountPath": contract::OUTPUT_DIR, "readOnly": true}]),
        env,
    );
    let mut volumes = pipeline_pod::shared_volumes();
    volumes.extend(spec["volumes"].as_array().cloned().unwrap_or_default());
    let mut pod = json!({
        "serviceAccountName": sa,
        "restartPolicy": "Never",
        "securityContext": plinth_api::security::health_pod(),
        "initContainers": init,
        "containers": [creator],
        "volumes": volumes,
    });
    pipeline_pod::copy_pod_fields(spec, &mut pod);
    let mut job = json!({
        "backoffLimit": spec["jobOptions"]["backoffLimit"].as_i64().unwrap_or(0),
        "template": {"metadata": {"labels": labels}, "spec": pod},
    });
    if let Some(d) = spec["jobOptions"]["activeDeadlineSeconds"].as_i64() {
        job["activeDeadlineSeconds"] = json!(d);
    }
    json!({
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": definition_id(hd).0, "labels": labels},
        "spec": {
            "schedule": hd.spec.schedule,
            // A check still running when the next one is due is not doubled up.
            "concurrencyPolicy": "Forbid",
            "successfulJobsHistoryLimit": 1,
            "failedJobsHistoryLimit": 1,
            "jobTemplate": {"metadata": {"labels": labels}, "spec": job},
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn definition(name: &str, rbac: Value) -> HealthDefinition {
        serde_json::from_value(json!({
            "apiVersion": "platform.kratix.io/v1alpha1", "kind": "HealthDefinition",
            "metadata": {"name": name, "namespace": "apps"},
            "spec": {
                "resourceRef": {"name": "one", "namespace": "default"},
                "promiseRef": {"name": "app"},
                "schedule": "* * * * *",
                "input": "kind: App\n",
                "workflow": {"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Pipeline",
                    "metadata": {"name": "check"},
                    "spec": {"rbac": rbac, "containers": [{"name": "probe", "image": "busybox",
                        "securityContext": {"runAsUser": 0}}]}},
            }
        }))
        .unwrap()
    }

    fn kinds(objs: &[Value]) -> Vec<String> {
        objs.iter()
            .map(|o| o["kind"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn long_names_stay_unique_overrides_pass_through_and_input_is_optional() {
        let cronjob_of = |hd: &HealthDefinition| {
            build_objects(hd, &CheckSettings::default())
                .unwrap()
                .into_iter()
                .find(|o| o["kind"] == "CronJob")
                .unwrap()
        };
        let base = "a".repeat(59);
        let mut one = definition(&format!("{base}1"), json!({}));
        let two = definition(&format!("{base}2"), json!({}));
        let (n1, n2) = (
            cronjob_of(&one)["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string(),
            cronjob_of(&two)["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string(),
        );
        assert_ne!(n1, n2);
        for n in [&n1, &n2] {
            assert!(n.len() <= 52, "{n}");
            assert!(plinth_api::names::is_dns1123_label(n, 52), "{n}");
        }
        // A container that must not default to non-root says so, and keeps it.
        one.spec.workflow["spec"]["containers"][0]["securityContext"] =
            json!({"runAsNonRoot": false});
        one.spec.input = None;
        let cj = cronjob_of(&one);
        let pod = &cj["spec"]["jobTemplate"]["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"], plinth_api::security::health_pod());
        assert_eq!(
            pod["initContainers"][1]["securityContext"],
            json!({"runAsNonRoot": false})
        );
        // No input: the reader gets an empty one.
        assert_eq!(pod["initContainers"][0]["env"][0]["value"], "");
    }

    #[test]
    fn the_cronjob_runs_reader_the_check_and_the_state_creator_hardened() {
        let hd = definition(
            "db-health-with-a-rather-long-name-that-keeps-going-on",
            json!({}),
        );
        let objs = build_objects(&hd, &CheckSettings::default()).unwrap();
        assert_eq!(
            kinds(&objs),
            ["ServiceAccount", "Role", "RoleBinding", "CronJob"]
        );
        let cj = objs.last().unwrap();
        let name = cj["metadata"]["name"].as_str().unwrap();
        assert!(name.len() <= 52, "{name}");
        assert_eq!(
            name,
            plinth_api::names::health_cronjob_name("apps", hd.metadata.name.as_deref().unwrap())
        );
        assert_eq!(cj["spec"]["schedule"], "* * * * *");
        let pod = &cj["spec"]["jobTemplate"]["spec"]["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], name);
        let init: Vec<&str> = pod["initContainers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(init, ["reader", "probe"]);
        assert_eq!(pod["containers"][0]["name"], "health-state-creator");
        for c in [&pod["initContainers"][0], &pod["containers"][0]] {
            let sc = &c["securityContext"];
            assert_eq!(sc["runAsNonRoot"], true);
            assert_eq!(sc["readOnlyRootFilesystem"], true);
            assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
            assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
        }
        assert_eq!(
            pod["containers"][0]["securityContext"],
            plinth_api::security::injected_container(None)
        );
        // The Pod defaults to non-root with the runtime's seccomp profile...
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        // ...and the user's container keeps what the Promise says, overriding it.
        assert_eq!(
            pod["initContainers"][1]["securityContext"],
            json!({"runAsUser": 0})
        );
        let reader_env = &pod["initContainers"][0]["env"][0];
        assert_eq!(reader_env["name"], names::INPUT_ENV);
        assert_eq!(reader_env["value"], "kind: App\n");
        let env: BTreeMap<&str, &str> = pod["containers"][0]["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["name"].as_str().unwrap(), e["value"].as_str().unwrap()))
            .collect();
        assert_eq!(env["KRATIX_OBJECT_NAME"], "one");
        assert_eq!(env["KRATIX_OBJECT_NAMESPACE"], "default");
        assert_eq!(env["KRATIX_PROMISE_NAME"], "app");
        assert_eq!(env[names::DEFINITION_NAMESPACE_ENV], "apps");
        for o in &objs {
            assert_eq!(
                o["metadata"]["labels"][labels::MANAGED_BY],
                names::AGENT_MANAGER
            );
            assert_eq!(
                o["metadata"]["labels"][names::DEFINITION_NAMESPACE_LABEL],
                "apps"
            );
        }
        // Deterministic.
        assert_eq!(objs, build_objects(&hd, &CheckSettings::default()).unwrap());
    }

    #[test]
    fn rbac_follows_the_pipeline() {
        let hd = definition(
            "db",
            json!({
                "serviceAccount": "checker",
                "permissions": [
                    {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]},
                    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNamespace": "shared"},
                    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"], "resourceNamespace": "*"},
                ]
            }),
        );
        let objs = build_objects(&hd, &CheckSettings::default()).unwrap();
        assert_eq!(
            kinds(&objs),
            [
                "Role",
                "RoleBinding",
                "Role",
                "RoleBinding",
                "ClusterRole",
                "ClusterRoleBinding",
                "ClusterRole",
                "RoleBinding",
                "CronJob"
            ]
        );
        assert_eq!(objs[2]["rules"][0]["resources"], json!(["deployments"]));
        assert_eq!(objs[7]["metadata"]["namespace"], "shared");
        assert!(objs[4]["rules"][0].get("resourceNamespace").is_none());
        for o in &objs[..8] {
            if let Some(s) = o.get("subjects") {
                assert_eq!(s[0]["name"], "checker");
            }
        }
        assert_eq!(
            objs[8]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["serviceAccountName"],
            "checker"
        );
    }

    #[test]
    fn a_workflow_that_is_not_a_pipeline_is_refused_by_field() {
        let mut hd = definition("db", json!({}));
        hd.spec.workflow["kind"] = json!("Job");
        assert!(
            build_objects(&hd, &CheckSettings::default())
                .unwrap_err()
                .to_string()
                .contains("spec.workflow")
        );
        let mut hd = definition("db", json!({}));
        hd.spec.workflow["spec"]["containers"] = json!([]);
        assert!(
            build_objects(&hd, &CheckSettings::default())
                .unwrap_err()
                .to_string()
                .contains("containers")
        );
    }
}
