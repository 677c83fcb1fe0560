//! Cluster mode without a cluster: `plinth operator` runs the controllers against a
//! `plinth up --no-controllers` over HTTPS with a kubeconfig, exactly as it would against
//! a real API server. This proves the controllers need nothing embedded. Two replicas
//! share a Lease; only the holder reconciles, and the other takes over when it dies.

use crate::support;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use serde_json::Value;
use support::*;

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt("plinth-operator")
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec?.holder_identity)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_reconciles_against_an_external_api_server_with_leader_election() {
    let p = Plinth::up(&["--no-controllers"]).await;
    let client = p.client().await;
    let promises = promise_api(&client);
    create(&promises, &webapp_sample("promise.yaml")).await;

    // Nothing reconciles without an operator.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert!(promises.get("webapp").await.unwrap().data["status"]["status"].is_null());

    let mut a = p.operator("replica-a", 3);
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kratix-platform-system");
    wait_until(30, "replica-a holds the Lease", || async {
        holder(&leases).await.as_deref() == Some("replica-a")
    })
    .await;
    let mut b = p.operator("replica-b", 3);

    wait_until(60, "Promise webapp Available", || async {
        promises
            .get("webapp")
            .await
            .is_ok_and(|o| o.data["status"]["status"] == "Available")
    })
    .await;
    let webapps = dynamic(
        &client,
        "quickstart.plinth.dev",
        "v1alpha1",
        "WebApp",
        "webapps",
        Some("default"),
    );
    create(&webapps, &webapp_sample("request.yaml")).await;
    let file = "local/resources/default/webapp/hello/render/5058f/deployment.yaml";
    wait_until(60, file, || async {
        repo_file(&p.repo(), "main", file).is_some()
    })
    .await;
    assert_eq!(
        holder(&leases).await.as_deref(),
        Some("replica-a"),
        "the follower never took the Lease"
    );

    // The leader dies; the follower takes over and keeps reconciling.
    a.kill().unwrap();
    a.wait().unwrap();
    wait_until(30, "replica-b takes the Lease", || async {
        holder(&leases).await.as_deref() == Some("replica-b")
    })
    .await;
    let mut second = webapp_sample("request.yaml");
    second["metadata"]["name"] = "second".into();
    create(&webapps, &second).await;
    let file = "local/resources/default/webapp/second/render/5058f/deployment.yaml";
    wait_until(60, file, || async {
        repo_file(&p.repo(), "main", file).is_some()
    })
    .await;
    b.kill().unwrap();
    b.wait().unwrap();
}

/// The operator's own identity with exactly the RBAC `plinth manifests operator` grants:
/// with RBAC enforced by the embedded API server, any missing grant shows up here
/// before it would on a real cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_needs_only_the_rbac_its_manifests_grant() {
    let p = Plinth::up(&["--no-controllers"]).await;
    let client = p.client().await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_plinth"))
        .args(["manifests", "operator"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&String::from_utf8_lossy(&out.stdout)).unwrap();
    // Everything but the Deployment (the embedded server runs no Deployments).
    let manifest = p.dir.path().join("operator-rbac.yaml");
    let kept: Vec<String> = docs
        .iter()
        .filter(|d| {
            // The operator registers its webhook configurations itself, pointing at the
            // address it serves on here rather than at the Service.
            ![
                "Deployment",
                "ValidatingWebhookConfiguration",
                "MutatingWebhookConfiguration",
            ]
            .contains(&d["kind"].as_str().unwrap_or_default())
                && !d.is_null()
        })
        .map(|d| serde_json::to_string(d).unwrap())
        .collect();
    std::fs::write(&manifest, kept.join("\n---\n")).unwrap();
    p.kubectl(&["apply", "-f", &manifest.to_string_lossy()]);

    // A kubeconfig for the operator's ServiceAccount, with a token from the TokenRequest API.
    let token = p.kubectl(&[
        "create",
        "token",
        "kratix-platform-controller-manager",
        "-n",
        "kratix-platform-system",
    ]);
    let admin = std::fs::read_to_string(&p.kubeconfig).unwrap();
    let mut kc: Value = serde_saphyr::from_str(&admin).unwrap();
    kc["users"][0]["user"] = serde_json::json!({"token": token.trim()});
    let sa_kubeconfig = p.dir.path().join("operator.kubeconfig");
    std::fs::write(&sa_kubeconfig, serde_json::to_string(&kc).unwrap()).unwrap();
    let allowed = p.kubectl_raw(&[
        "--kubeconfig",
        &sa_kubeconfig.to_string_lossy(),
        "create",
        "namespace",
        "team-x",
    ]);
    assert!(
        allowed.status.success(),
        "the operator may create namespaces: {}",
        String::from_utf8_lossy(&allowed.stderr)
    );
    let denied = p.kubectl_raw(&[
        "--kubeconfig",
        &sa_kubeconfig.to_string_lossy(),
        "create",
        "secret",
        "generic",
        "x",
        "-n",
        "default",
    ]);
    assert!(
        !denied.status.success(),
        "RBAC is enforced: the operator cannot write Secrets"
    );

    let log = std::fs::File::create(p.dir.path().join("operator-sa.log")).unwrap();
    let mut op = std::process::Command::new(env!("CARGO_BIN_EXE_plinth"))
        .args(["operator", "--lease-duration", "3", "--kubeconfig"])
        .arg(&sa_kubeconfig)
        .args(support::webhook_flags(&support::free_port()))
        .arg("--data-dir")
        .arg(p.dir.path().join("operator-sa"))
        .env("RUST_BACKTRACE", "0")
        .stderr(log)
        .spawn()
        .unwrap();
    let promises = promise_api(&client);
    create(&promises, &webapp_sample("promise.yaml")).await;
    let webapps = dynamic(
        &client,
        "quickstart.plinth.dev",
        "v1alpha1",
        "WebApp",
        "webapps",
        Some("default"),
    );
    wait_until(
        60,
        "Promise webapp Available under the operator's identity",
        || async {
            promises
                .get("webapp")
                .await
                .is_ok_and(|o| o.data["status"]["status"] == "Available")
        },
    )
    .await;
    create(&webapps, &webapp_sample("request.yaml")).await;
    let file = "local/resources/default/webapp/hello/render/5058f/deployment.yaml";
    let oplog = p.dir.path().join("operator-sa.log");
    wait_until(90, file, || async {
        repo_file(&p.repo(), "main", file).is_some()
    })
    .await;
    let log = std::fs::read_to_string(&oplog).unwrap_or_default();
    assert!(
        !log.contains("is forbidden"),
        "the operator hit a missing grant:\n{log}"
    );
    op.kill().unwrap();
    op.wait().unwrap();
}

/// Runs `plinth manifests <args>` and returns its YAML stream.
fn manifests_yaml(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_plinth"))
        .arg("manifests")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "plinth manifests {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `kubectl apply --validate=strict --dry-run=server -f -` with `yaml` on stdin.
fn dry_run_apply(p: &Plinth, yaml: &str) -> std::process::Output {
    use std::io::Write as _;
    let mut child = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&p.kubeconfig)
        .arg("--cache-dir")
        .arg(p.dir.path().join("kube-cache"))
        .args(["apply", "--validate=strict", "--dry-run=server", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run kubectl");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(yaml.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// `doc` decoded as its Kubernetes type and encoded again: equal to `doc` unless `doc`
/// has a field the type does not know. The embedded server stores unknown fields of
/// built-in kinds rather than refusing them under `fieldValidation=Strict` as
/// kube-apiserver does, so this check stands in for that part of the dry run.
fn typed_round_trip(doc: &Value) -> Value {
    use k8s_openapi::api::{admissionregistration, apps, core, networking, policy, rbac};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    fn again<T: serde::de::DeserializeOwned + serde::Serialize>(doc: &Value) -> Value {
        let typed: T = serde_json::from_value(doc.clone())
            .unwrap_or_else(|e| panic!("{e}: {}", serde_json::to_string(doc).unwrap()));
        serde_json::to_value(typed).unwrap()
    }
    match doc["kind"].as_str().unwrap_or_default() {
        "CustomResourceDefinition" => again::<CustomResourceDefinition>(doc),
        "Namespace" => again::<core::v1::Namespace>(doc),
        "ServiceAccount" => again::<core::v1::ServiceAccount>(doc),
        "Service" => again::<core::v1::Service>(doc),
        "ClusterRole" => again::<rbac::v1::ClusterRole>(doc),
        "ClusterRoleBinding" => again::<rbac::v1::ClusterRoleBinding>(doc),
        "Role" => again::<rbac::v1::Role>(doc),
        "RoleBinding" => again::<rbac::v1::RoleBinding>(doc),
        "Deployment" => again::<apps::v1::Deployment>(doc),
        "PodDisruptionBudget" => again::<policy::v1::PodDisruptionBudget>(doc),
        "NetworkPolicy" => again::<networking::v1::NetworkPolicy>(doc),
        "ValidatingWebhookConfiguration" => {
            again::<admissionregistration::v1::ValidatingWebhookConfiguration>(doc)
        }
        "MutatingWebhookConfiguration" => {
            again::<admissionregistration::v1::MutatingWebhookConfiguration>(doc)
        }
        other => panic!("no type for a {other} in the manifests"),
    }
}

/// `plinth manifests all`, with its defaults and with `--replicas 1`, passes `kubectl
/// apply --dry-run=server` against an API server that validates built-in kinds and
/// webhook configurations as kube-apiserver does. No document is an object of the Kratix
/// CRDs, so the CRDs need not exist first; the namespaced documents need their Namespace,
/// which a dry run does not create: on a cluster without `kratix-platform-system` they
/// are refused (NotFound, as kube-apiserver answers) until it is created for real.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifests_all_pass_a_server_side_dry_run() {
    let p = Plinth::up(&["--no-controllers"]).await;
    let variants = [vec!["all"], vec!["all", "--replicas", "1"]];
    for args in &variants {
        let yaml = manifests_yaml(args);
        let docs: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
        for doc in &docs {
            assert_eq!(
                &typed_round_trip(doc),
                doc,
                "{} {} has a field its type does not know",
                doc["kind"],
                doc["metadata"]["name"]
            );
        }
        let out = dry_run_apply(&p, &yaml);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "manifests {}: {}{stdout}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        // One line per document, none of it stored.
        assert_eq!(
            stdout.matches("(server dry run)").count(),
            docs.len(),
            "{stdout}"
        );
        assert_eq!(
            stdout.contains("poddisruptionbudget.policy/plinth-operator"),
            args.len() == 1,
            "{stdout}"
        );
    }
    assert!(
        p.kubectl_raw(&[
            "get",
            "deployment",
            "plinth-operator",
            "-n",
            "kratix-platform-system"
        ])
        .status
        .code()
            != Some(0),
        "a dry run stores nothing"
    );
    assert!(
        p.get(&["validatingwebhookconfigurations"]).unwrap()["items"]
            .as_array()
            .unwrap()
            .is_empty(),
        "a dry run stores nothing"
    );

    // A fresh cluster: no operator namespace yet.
    p.kubectl(&["delete", "namespace", "kratix-platform-system"]);
    wait_until(30, "namespace kratix-platform-system gone", || async {
        p.get(&["namespace", "kratix-platform-system"]).is_none()
    })
    .await;
    let yaml = manifests_yaml(&["all"]);
    let out = dry_run_apply(&p, &yaml);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("namespaces \"kratix-platform-system\" not found"),
        "{stderr}"
    );
    // What a user does: create the namespace for real, then dry-run everything.
    p.kubectl(&["create", "namespace", "kratix-platform-system"]);
    for args in &variants {
        let out = dry_run_apply(&p, &manifests_yaml(args));
        assert!(
            out.status.success(),
            "manifests {} after creating the namespace: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
