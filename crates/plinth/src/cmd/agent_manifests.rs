//! `plinth manifests agent`: what a worker cluster needs to run `plinth agent` for one
//! Destination — a namespace, a ServiceAccount, RBAC and a one-replica Deployment.
//!
//! The agent applies whatever the Destination's directory holds (namespaces, CRDs, RBAC,
//! workloads), like Flux's kustomize-controller, so its ClusterRole allows every verb on
//! every resource; give the worker cluster a narrower role by editing it if its
//! directory is known to hold less.
//!
//! The command line of the agent is built from a table ([`agent_flags`]): each option of
//! this command that maps to an agent flag is listed once there, and anything after `--`
//! is passed to the agent unchanged (`-- --prune=false --force-conflicts`), so any agent
//! flag can be given. Credentials stay off the command line: the agent reads the named
//! Secret through the API.

use serde_json::{Value, json};

/// Options of `plinth manifests agent`.
#[derive(clap::Args, Clone, Debug)]
pub struct AgentManifestOptions {
    /// Name of the Destination the agent serves (names the Deployment and its objects).
    #[arg(long)]
    pub destination: String,
    /// Image containing the `plinth` binary.
    #[arg(long, default_value = plinth_api::constants::DEFAULT_ADAPTER_IMAGE, value_parser = super::image::parse_image)]
    pub image: String,
    /// Namespace of the agent.
    #[arg(long, default_value = AGENT_NAMESPACE)]
    pub namespace: String,
    /// Git repository URL of the state store (a Git source).
    #[arg(long, conflicts_with = "bucket", required_unless_present = "bucket")]
    pub git_url: Option<String>,
    /// Git branch.
    #[arg(long)]
    pub branch: Option<String>,
    /// Bucket of the state store (a bucket source).
    #[arg(long)]
    pub bucket: Option<String>,
    /// Bucket endpoint (`host:port` or a URL).
    #[arg(long, requires = "bucket")]
    pub endpoint: Option<String>,
    /// The state store's own path prefix (its `spec.path`).
    #[arg(long)]
    pub store_path: Option<String>,
    /// The Destination's directory inside the store (its `spec.path`).
    #[arg(long)]
    pub path: Option<String>,
    /// How often the agent checks the store (e.g. `30s`).
    #[arg(long)]
    pub interval: Option<String>,
    /// A Secret in the agent's namespace with the state store Secret's keys; the agent
    /// reads it through the API (`--credentials-secret NAMESPACE/NAME`).
    #[arg(long)]
    pub credentials_secret: Option<String>,
    /// Further `plinth agent` arguments, passed unchanged (after `--`).
    #[arg(last = true)]
    pub agent_args: Vec<String>,
}

/// Default namespace of the agent.
pub const AGENT_NAMESPACE: &str = "plinth-agent-system";
/// The agent's command line (after `plinth`), from the options: one row per flag, in a
/// table, then the verbatim extra arguments.
pub fn agent_flags(o: &AgentManifestOptions) -> Vec<String> {
    let credentials = o
        .credentials_secret
        .as_ref()
        .map(|name| format!("{}/{name}", o.namespace));
    let table: [(&str, Option<String>); 9] = [
        ("--name", Some(o.destination.clone())),
        ("--git-url", o.git_url.clone()),
        ("--branch", o.branch.clone()),
        ("--bucket", o.bucket.clone()),
        ("--endpoint", o.endpoint.clone()),
        ("--store-path", o.store_path.clone()),
        ("--path", o.path.clone()),
        ("--interval", o.interval.clone()),
        ("--credentials-secret", credentials),
    ];
    let mut args = vec!["agent".to_string()];
    for (flag, value) in table {
        if let Some(v) = value {
            args.push(format!("{flag}={v}"));
        }
    }
    args.extend(o.agent_args.iter().cloned());
    args
}

/// Namespace, ServiceAccount, ClusterRole + binding and the Deployment running
/// `plinth agent` (one replica, replaced rather than rolled: one agent per Destination).
pub fn agent_documents(o: &AgentManifestOptions) -> Vec<Value> {
    let name = format!("plinth-agent-{}", o.destination);
    let ns = &o.namespace;
    let labels = json!({"app.kubernetes.io/name": "plinth", "app.kubernetes.io/component": "agent",
                        "app.kubernetes.io/instance": o.destination});
    let container = json!({
        "name": "agent",
        "image": o.image,
        "args": agent_flags(o),
        "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
                            "readOnlyRootFilesystem": true,
                            "runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    });
    let volumes = vec![json!({"name": "tmp", "emptyDir": {}})];
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": name, "namespace": ns, "labels": labels}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": name, "labels": labels},
               "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                         {"nonResourceURLs": ["*"], "verbs": ["get"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": name, "labels": labels},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
               "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"serviceAccountName": name, "containers": [container], "volumes": volumes},
            },
        }}),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        o: AgentManifestOptions,
    }

    #[test]
    fn flags_come_from_the_options_and_extra_args_pass_through() {
        let cli = Cli::parse_from([
            "x",
            "--destination",
            "worker-1",
            "--git-url",
            "https://git.example/state.git",
            "--branch",
            "main",
            "--path",
            "worker-1",
            "--credentials-secret",
            "state-creds",
            "--",
            "--prune=false",
        ]);
        let docs = agent_documents(&cli.o);
        let kinds: Vec<_> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "Namespace",
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Deployment"
            ]
        );
        let pod = &docs[4]["spec"]["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], "plinth-agent-worker-1");
        assert_eq!(
            pod["containers"][0]["args"],
            json!([
                "agent",
                "--name=worker-1",
                "--git-url=https://git.example/state.git",
                "--branch=main",
                "--path=worker-1",
                format!("--credentials-secret={AGENT_NAMESPACE}/state-creds"),
                "--prune=false"
            ])
        );
        assert!(
            Cli::try_parse_from(["x", "--destination", "w"]).is_err(),
            "a Git URL or a bucket is required"
        );
        assert!(
            Cli::try_parse_from(["x", "--destination", "w", "--git-url", "u", "--bucket", "b"])
                .is_err()
        );
        assert_eq!(docs[3]["subjects"][0]["namespace"], AGENT_NAMESPACE);
    }
}
