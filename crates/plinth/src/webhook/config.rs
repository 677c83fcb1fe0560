//! The ValidatingWebhookConfiguration and MutatingWebhookConfiguration that send the
//! admitted kinds to the operator: printed by `plinth manifests` (Service clientConfig,
//! no caBundle) and applied by the operator at start (with the CA it serves from, or
//! `url:` clientConfig with `--webhook-url`). Kratix's configuration names, so a
//! switch from Kratix replaces its webhooks rather than adding a second set.

use plinth_apiserver::admission::{self, AdmittedKind};
use serde_json::{Value, json};

/// Name of the ValidatingWebhookConfiguration.
pub const VALIDATING: &str = "kratix-platform-validating-webhook-configuration";
/// Name of the MutatingWebhookConfiguration.
pub const MUTATING: &str = "kratix-platform-mutating-webhook-configuration";
/// The Service in front of the operator's webhook port.
pub const SERVICE: &str = "kratix-platform-webhook-service";
/// The webhook port (Service and container).
pub const PORT: u16 = 9443;

/// Where the API server reaches the webhooks.
#[derive(Debug, Clone)]
pub enum Target {
    /// The Service in `namespace` on [`PORT`].
    Service {
        /// The operator's namespace.
        namespace: String,
    },
    /// A base URL (`https://127.0.0.1:9443`), for an operator outside the cluster.
    Url(String),
}

fn client_config(target: &Target, path: &str, ca_bundle: Option<&str>) -> Value {
    let mut c = match target {
        Target::Service { namespace } => json!({"service": {
            "name": SERVICE, "namespace": namespace, "path": path, "port": PORT}}),
        Target::Url(base) => json!({"url": format!("{}{path}", base.trim_end_matches('/'))}),
    };
    if let Some(ca) = ca_bundle {
        use base64::Engine as _;
        c["caBundle"] = json!(base64::engine::general_purpose::STANDARD.encode(ca));
    }
    c
}

fn hook(kind: &AdmittedKind, prefix: &str, path: &str, target: &Target, ca: Option<&str>) -> Value {
    json!({
        "name": format!("{prefix}{}.kb.io", kind.kind.to_ascii_lowercase()),
        "admissionReviewVersions": ["v1"],
        "clientConfig": client_config(target, path, ca),
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "timeoutSeconds": 10,
        "matchPolicy": "Equivalent",
        "rules": [{
            "apiGroups": [kind.group],
            "apiVersions": ["v1alpha1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": [kind.plural],
            "scope": if kind.cluster_scoped { "Cluster" } else { "Namespaced" },
        }],
    })
}

/// The two configurations (validating, mutating) for `target`, with `ca_bundle` (PEM)
/// as their `caBundle` when given.
pub fn configurations(target: &Target, ca_bundle: Option<&str>) -> [Value; 2] {
    let validating: Vec<Value> = admission::KINDS
        .iter()
        .map(|k| hook(k, "v", &k.validate_path(), target, ca_bundle))
        .collect();
    let mutating: Vec<Value> = admission::KINDS
        .iter()
        .filter(|k| k.mutates)
        .map(|k| {
            let mut h = hook(k, "m", &k.mutate_path(), target, ca_bundle);
            h["reinvocationPolicy"] = json!("IfNeeded");
            h
        })
        .collect();
    let labels =
        json!({"app.kubernetes.io/name": "plinth", "app.kubernetes.io/component": "operator"});
    [
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
               "metadata": {"name": VALIDATING, "labels": labels}, "webhooks": validating}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
               "metadata": {"name": MUTATING, "labels": labels}, "webhooks": mutating}),
    ]
}

/// The Service on the webhook port and a NetworkPolicy letting the API server (any
/// source: its address is not known in advance) reach it.
pub fn service_documents(namespace: &str, selector: &Value) -> Vec<Value> {
    vec![
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": SERVICE, "namespace": namespace},
               "spec": {"selector": selector, "ports": [{"name": "webhook", "port": PORT, "targetPort": "webhook", "protocol": "TCP"}]}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
               "metadata": {"name": "plinth-webhook", "namespace": namespace},
               "spec": {"podSelector": {"matchLabels": selector}, "policyTypes": ["Ingress"],
                        "ingress": [{"ports": [{"port": PORT, "protocol": "TCP"}]}]}}),
    ]
}

/// The cluster-wide RBAC the webhook server needs beyond the controllers': reading and
/// applying its webhook configurations.
pub fn cluster_rules() -> Vec<Value> {
    vec![json!({"apiGroups": ["admissionregistration.k8s.io"],
               "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"],
               "verbs": ["get", "list", "watch", "create", "update", "patch"]})]
}

/// A Role and RoleBinding letting `service_account` create its CA Secret in its own
/// namespace only (reading Secrets the controllers' ClusterRole already grants).
pub fn namespace_rbac_documents(namespace: &str, service_account: &str) -> Vec<Value> {
    vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "plinth-webhook-ca", "namespace": namespace},
               "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "plinth-webhook-ca", "namespace": namespace},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "plinth-webhook-ca"},
               "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}]}),
    ]
}

/// The DNS names of the Service.
pub fn service_names(namespace: &str) -> Vec<String> {
    vec![
        SERVICE.to_string(),
        format!("{SERVICE}.{namespace}"),
        format!("{SERVICE}.{namespace}.svc"),
        format!("{SERVICE}.{namespace}.svc.cluster.local"),
    ]
}
