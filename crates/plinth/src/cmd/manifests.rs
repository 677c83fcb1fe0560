//! `plinth manifests`: print the manifests a real cluster needs, as multi-document YAML.

use anyhow::Context;
use clap::Subcommand;
use serde_json::{Value, json};

/// Arguments of `plinth manifests`.
#[derive(clap::Args)]
pub struct ManifestsArgs {
    /// Which manifests to print.
    #[command(subcommand)]
    pub what: ManifestsCommand,
}

/// The manifest sets `plinth manifests` can print. Each variant maps to a function
/// returning a list of JSON documents (see [`documents`]).
#[derive(Subcommand, Clone, Debug)]
pub enum ManifestsCommand {
    /// CustomResourceDefinitions of every platform.kratix.io/v1alpha1 kind.
    Crds,
    /// The operator: namespace, ServiceAccount, RBAC, a Deployment running `plinth
    /// operator`, and its admission webhooks' Service, NetworkPolicy and configurations.
    Operator(OperatorOptions),
    /// Everything a cluster needs: the CRDs, then the operator.
    All(OperatorOptions),
    /// `plinth agent` for a worker cluster: namespace, ServiceAccount, RBAC, Deployment.
    Agent(super::agent_manifests::AgentManifestOptions),
    /// Flux objects (GitRepository, Kustomizations, Secret) syncing one Destination's
    /// directory, read from the running platform.
    Flux(super::gitops::GitOpsArgs),
    /// Argo CD objects (Applications, repository Secret) syncing one Destination's
    /// directory, read from the running platform.
    Argocd(super::gitops::GitOpsArgs),
}

/// Options of the operator manifests.
#[derive(clap::Args, Clone, Debug)]
pub struct OperatorOptions {
    /// Image containing the `plinth` binary (also used as the pipeline adapter image).
    #[arg(long, default_value = "ghcr.io/plinth-dev/plinth:latest", value_parser = super::image::parse_image)]
    pub image: String,
    /// Replicas of the operator Deployment (at least 1); one holds the leader Lease at a
    /// time, and every one serves the admission webhooks.
    #[arg(long, default_value_t = 2, value_parser = parse_replicas)]
    pub replicas: u32,
}

/// `--replicas`: a positive count. Zero is refused rather than printed: the webhook
/// configurations printed beside the Deployment have `failurePolicy: Fail`, so with no
/// replica to answer them every create and update of a Kratix object would be refused
/// (and no controller would run).
fn parse_replicas(s: &str) -> Result<u32, String> {
    let n: u32 = s
        .parse()
        .map_err(|e| format!("{e}: expected a whole number of replicas, at least 1"))?;
    if n == 0 {
        return Err(format!(
            "0 replicas would run no controllers and serve no admission webhooks, while the \
             webhook configurations printed with the Deployment (failurePolicy: Fail) would \
             refuse every create and update of a Kratix object; print at least 1 replica. \
             To stop the operator later, scale the Deployment down (kubectl -n \
             {OPERATOR_NAMESPACE} scale deployment plinth-operator --replicas 0) and delete \
             the ValidatingWebhookConfiguration {} and MutatingWebhookConfiguration {}",
            crate::webhook::config::VALIDATING,
            crate::webhook::config::MUTATING,
        ));
    }
    Ok(n)
}

/// Namespace of the operator (Kratix's system namespace).
pub const OPERATOR_NAMESPACE: &str = "kratix-platform-system";
/// The operator's ServiceAccount: Kratix's name, so per-Promise controller ClusterRoles
/// (`<promise>-promise-controller`) bind to it unchanged.
pub const OPERATOR_SERVICE_ACCOUNT: &str = "kratix-platform-controller-manager";

/// The documents of one manifest set, in apply order. Flux and Argo CD read the
/// Destination from the platform the kubeconfig names.
pub async fn documents(what: &ManifestsCommand) -> anyhow::Result<Vec<Value>> {
    match what {
        ManifestsCommand::Agent(o) => Ok(super::agent_manifests::agent_documents(o)),
        ManifestsCommand::Flux(a) => super::gitops::documents(a, false).await,
        ManifestsCommand::Argocd(a) => super::gitops::documents(a, true).await,
        ManifestsCommand::Crds => crd_documents(),
        ManifestsCommand::Operator(o) => Ok(with_webhooks(operator_documents(o))),
        ManifestsCommand::All(o) => {
            let mut docs = crd_documents()?;
            docs.extend(with_webhooks(operator_documents(o)));
            Ok(docs)
        }
    }
}

/// The operator's RBAC rules: what the controllers do on a cluster —
/// Kratix kinds, CRDs, pipeline Jobs and Pods, the objects pipelines need (including
/// granting their RBAC, hence `bind`/`escalate`), Secrets of state stores, Events and the
/// leader Lease. Resource requests of Promise APIs are granted per Promise at run time by
/// `<promise>-promise-controller` ClusterRoles bound to this ServiceAccount; the operator
/// needs to read every API group to discover them, hence the `*` get/list/watch rule.
/// The admission webhooks add reading and applying their webhook configurations.
pub fn operator_rules() -> Value {
    let all = [
        "get",
        "list",
        "watch",
        "create",
        "update",
        "patch",
        "delete",
        "deletecollection",
    ];
    let mut rules = json!([
        {"apiGroups": [plinth_api::GROUP, plinth_api::HEALTH_SOURCE_GROUP], "resources": ["*"], "verbs": all},
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": all},
        {"apiGroups": ["batch"], "resources": ["jobs", "jobs/status"], "verbs": all},
        {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch", "delete"]},
        {"apiGroups": [""], "resources": ["configmaps", "serviceaccounts", "namespaces"], "verbs": all},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch", "update", "get", "list", "watch"]},
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update", "get", "list", "watch"]},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings", "clusterroles", "clusterrolebindings"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "bind", "escalate"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": all},
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]},
    ]);
    if let Some(rules) = rules.as_array_mut() {
        rules.extend(crate::webhook::config::cluster_rules());
    }
    rules
}

/// Namespace, ServiceAccount, ClusterRole + binding, the Deployment running
/// `plinth operator` with leader election (each replica's Lease identity is its Pod
/// name, from the downward API), and with more than one replica a PodDisruptionBudget
/// keeping one running through voluntary disruptions (node drains).
pub fn operator_documents(o: &OperatorOptions) -> Vec<Value> {
    let labels =
        json!({"app.kubernetes.io/name": "plinth", "app.kubernetes.io/component": "operator"});
    let mut docs = operator_base_documents(o, &labels);
    if o.replicas > 1 {
        docs.push(json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "plinth-operator", "namespace": OPERATOR_NAMESPACE, "labels": labels},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}}}));
    }
    docs
}

/// The operator's documents every replica count has.
fn operator_base_documents(o: &OperatorOptions, labels: &Value) -> Vec<Value> {
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NAMESPACE}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": OPERATOR_SERVICE_ACCOUNT, "namespace": OPERATOR_NAMESPACE, "labels": labels}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "plinth-operator", "labels": labels}, "rules": operator_rules()}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "plinth-operator", "labels": labels},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "plinth-operator"},
               "subjects": [{"kind": "ServiceAccount", "name": OPERATOR_SERVICE_ACCOUNT, "namespace": OPERATOR_NAMESPACE}]}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "plinth-operator", "namespace": OPERATOR_NAMESPACE, "labels": labels},
        "spec": {
            "replicas": o.replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": OPERATOR_SERVICE_ACCOUNT,
                    "containers": [{
                        "name": "operator",
                        "image": o.image,
                        "args": ["operator", "--data-dir", "/var/lib/plinth", "--adapter-image", o.image],
                        // `plinth operator` takes its Lease identity from POD_NAME.
                        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                        "volumeMounts": [{"name": "data", "mountPath": "/var/lib/plinth"}],
                        "ports": [{"name": "webhook", "containerPort": crate::webhook::config::PORT, "protocol": "TCP"}],
                        "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
                                            "runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
                    }],
                    "volumes": [{"name": "data", "emptyDir": {}}],
                }
            }
        }}),
    ]
}

/// The operator's documents followed by what its admission webhooks need: the Role for
/// its CA Secret, the Service on the webhook port, a NetworkPolicy admitting the API
/// server to it, and the two webhook configurations (Service clientConfig; the operator
/// patches in the caBundle of the CA it keeps, or cert-manager injects it).
fn with_webhooks(mut docs: Vec<Value>) -> Vec<Value> {
    use crate::webhook::config;
    let selector =
        json!({"app.kubernetes.io/name": "plinth", "app.kubernetes.io/component": "operator"});
    docs.extend(config::namespace_rbac_documents(
        OPERATOR_NAMESPACE,
        OPERATOR_SERVICE_ACCOUNT,
    ));
    docs.extend(config::service_documents(OPERATOR_NAMESPACE, &selector));
    let target = config::Target::Service {
        namespace: OPERATOR_NAMESPACE.to_string(),
    };
    docs.extend(config::configurations(&target, None));
    docs
}

/// The Kratix CRDs as JSON documents.
pub fn crd_documents() -> anyhow::Result<Vec<Value>> {
    plinth_api::crds::all_crds()
        .iter()
        .map(|crd| serde_json::to_value(crd).context("serialising a CustomResourceDefinition"))
        .collect()
}

/// Renders documents as one YAML stream (documents separated by `---`).
pub fn to_yaml_stream(docs: &[Value]) -> anyhow::Result<String> {
    let mut out = String::new();
    for doc in docs {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(doc).context("rendering YAML")?);
    }
    Ok(out)
}

/// Runs `plinth manifests`.
pub async fn run(args: ManifestsArgs) -> anyhow::Result<()> {
    let docs = documents(&args.what).await?;
    print!("{}", to_yaml_stream(&docs)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn crds_render_as_a_parseable_yaml_stream() {
        let docs = documents(&ManifestsCommand::Crds).await.unwrap();
        let yaml = to_yaml_stream(&docs).unwrap();
        let back: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
        assert_eq!(back.len(), plinth_api::crds::all_crds().len());
        assert_eq!(back, docs);
        assert!(back.iter().all(|d| d["kind"] == "CustomResourceDefinition"));
    }

    #[tokio::test]
    async fn all_is_crds_then_the_operator() {
        let o = OperatorOptions {
            image: "example.test/plinth:v1".into(),
            replicas: 2,
        };
        let docs = documents(&ManifestsCommand::All(o)).await.unwrap();
        let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
        assert_eq!(
            &kinds[plinth_api::crds::all_crds().len()..],
            [
                "Namespace",
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Deployment",
                "PodDisruptionBudget",
                "Role",
                "RoleBinding",
                "Service",
                "NetworkPolicy",
                "ValidatingWebhookConfiguration",
                "MutatingWebhookConfiguration"
            ]
        );
        let deploy = &docs[docs.len() - 8];
        assert_eq!(deploy["spec"]["replicas"], 2);
        assert_eq!(
            deploy["spec"]["template"]["spec"]["containers"][0]["env"][0]["valueFrom"]["fieldRef"]
                ["fieldPath"],
            "metadata.name"
        );
        let pdb = &docs[docs.len() - 7];
        assert_eq!(pdb["spec"]["minAvailable"], 1);
        assert_eq!(pdb["spec"]["selector"], deploy["spec"]["selector"]);
        assert_eq!(
            deploy["spec"]["template"]["spec"]["serviceAccountName"],
            OPERATOR_SERVICE_ACCOUNT
        );
        assert_eq!(
            deploy["spec"]["template"]["spec"]["containers"][0]["args"][0],
            "operator"
        );
        let yaml = to_yaml_stream(&docs).unwrap();
        assert_eq!(serde_saphyr::from_multiple::<Value>(&yaml).unwrap(), docs);
    }

    #[test]
    fn zero_replicas_are_refused_with_the_reason() {
        let err = parse_replicas("0").unwrap_err();
        assert!(err.contains("failurePolicy: Fail"), "{err}");
        assert!(err.contains(crate::webhook::config::VALIDATING), "{err}");
        assert_eq!(parse_replicas("1"), Ok(1));
        assert!(parse_replicas("-1").is_err());
    }

    #[test]
    fn one_replica_has_no_disruption_budget() {
        let o = OperatorOptions {
            image: "example.test/plinth:v1".into(),
            replicas: 1,
        };
        let docs = operator_documents(&o);
        assert_eq!(docs.last().unwrap()["kind"], "Deployment");
        assert_eq!(docs.last().unwrap()["spec"]["replicas"], 1);
    }
}
