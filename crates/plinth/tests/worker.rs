//! `plinth up` + `plinth worker worker-1` as two processes on one machine: a request's
//! files land in the platform's Git state store, then as objects in the worker; editing
//! the request updates them; deleting it prunes exactly them while a hand-made object in
//! the same namespace survives.

use crate::support;

use std::process::{Command, Stdio};

use serde_json::Value;
use support::*;

/// A Promise whose request renders a ConfigMap and a Deployment into namespace `apps`
/// (a dependency), scheduled to Destinations labelled `environment: worker-1`.
const PROMISE: &str = r#"
apiVersion: platform.kratix.io/v1alpha1
kind: Promise
metadata:
  name: app
spec:
  destinationSelectors:
    - matchLabels: {environment: worker-1}
  api:
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata: {name: apps.worker.plinth.dev}
    spec:
      group: worker.plinth.dev
      names: {kind: App, plural: apps, singular: app}
      scope: Namespaced
      versions:
        - name: v1alpha1
          served: true
          storage: true
          schema:
            openAPIV3Schema:
              type: object
              properties:
                spec:
                  type: object
                  properties:
                    value: {type: string}
  dependencies:
    - apiVersion: v1
      kind: Namespace
      metadata: {name: apps}
  workflows:
    resource:
      configure:
        - apiVersion: platform.kratix.io/v1alpha1
          kind: Pipeline
          metadata: {name: render}
          spec:
            containers:
              - name: render
                image: busybox
                command: [sh, -c]
                args:
                  - |
                    set -eu
                    value=$(sed -n 's/^ *value: *//p' /kratix/input/object.yaml | head -n1 | tr -d "'\"")
                    cat > /kratix/output/config.yaml <<YAML
                    apiVersion: v1
                    kind: ConfigMap
                    metadata:
                      name: ${KRATIX_OBJECT_NAME}-config
                      namespace: apps
                    data:
                      value: "${value}"
                    YAML
                    cat > /kratix/output/deployment.yaml <<YAML
                    apiVersion: apps/v1
                    kind: Deployment
                    metadata:
                      name: ${KRATIX_OBJECT_NAME}
                      namespace: apps
                    spec:
                      selector:
                        matchLabels: {app: ${KRATIX_OBJECT_NAME}}
                      template:
                        metadata:
                          labels: {app: ${KRATIX_OBJECT_NAME}}
                        spec:
                          containers:
                            - name: app
                              image: nginx:1.27
                    YAML
"#;

fn request(value: &str) -> String {
    format!(
        "apiVersion: worker.plinth.dev/v1alpha1\nkind: App\nmetadata:\n  name: one\n  namespace: default\nspec:\n  value: {value}\n"
    )
}

fn apply(p: &Plinth, dir: &std::path::Path, name: &str, yaml: &str) {
    let f = dir.join(name);
    std::fs::write(&f, yaml).unwrap();
    p.kubectl(&["apply", "-f", f.to_str().unwrap()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_applies_its_destination_updates_and_prunes_only_its_objects() {
    let p = Plinth::up(&[]).await;
    let w = Worker::start(&p, "worker-1", &[]);
    let dest: Value =
        serde_json::from_str(&p.kubectl(&["get", "destination", "worker-1", "-o", "json"]))
            .unwrap();
    assert_eq!(dest["metadata"]["labels"]["environment"], "worker-1");
    assert_eq!(dest["spec"]["stateStoreRef"]["name"], "local");
    assert_eq!(dest["spec"]["path"], "worker-1");

    let files = p.dir.path().to_path_buf();
    apply(&p, &files, "promise.yaml", PROMISE);
    wait_until(60, "Promise app Available", || async {
        p.kubectl_raw(&["get", "promise", "app", "-o", "jsonpath={.status.status}"])
            .stdout
            == b"Available"
    })
    .await;
    apply(&p, &files, "request.yaml", &request("first"));

    // Files in Git, then objects in the worker.
    let repo = p.repo();
    wait_until(45, "the request's files in Git", || async {
        repo_files(&repo, "main").iter().any(|f| {
            f.starts_with("worker-1/resources/default/app/one/render/")
                && f.ends_with("config.yaml")
        })
    })
    .await;
    wait_until(30, "ConfigMap apps/one-config in the worker", || async {
        w.get(&["cm", "one-config", "-n", "apps"])
            .is_some_and(|cm| cm["data"]["value"] == "first")
    })
    .await;
    assert!(
        w.get(&["deploy", "one", "-n", "apps"]).is_some(),
        "Deployment in the worker: {}",
        w.log()
    );
    let handmade = w.kubectl_raw(&["create", "configmap", "handmade", "-n", "apps"]);
    assert!(handmade.status.success(), "{:?}", handmade);

    // Editing the request updates the objects.
    apply(&p, &files, "request.yaml", &request("second"));
    wait_until(
        45,
        "ConfigMap apps/one-config updated in the worker",
        || async {
            w.get(&["cm", "one-config", "-n", "apps"])
                .is_some_and(|cm| cm["data"]["value"] == "second")
        },
    )
    .await;

    // Deleting it prunes exactly what it produced.
    p.kubectl(&["delete", "app", "one", "-n", "default", "--wait=false"]);
    wait_until(
        45,
        "the request's objects pruned from the worker",
        || async {
            w.get(&["cm", "one-config", "-n", "apps"]).is_none()
                && w.get(&["deploy", "one", "-n", "apps"]).is_none()
        },
    )
    .await;
    assert!(
        w.get(&["cm", "handmade", "-n", "apps"]).is_some(),
        "the hand-made ConfigMap survives"
    );
    assert!(
        w.get(&["ns", "apps"]).is_some(),
        "the Promise's dependency (namespace apps) stays"
    );
    // A second worker with its own labels, on the store named explicitly: registered as
    // given.
    let w2 = Worker::start(
        &p,
        "worker-2",
        &[
            "--label",
            "team=a",
            "--label",
            "environment=edge",
            "--state-store",
            "GitStateStore/local",
        ],
    );
    let d2: Value =
        serde_json::from_str(&p.kubectl(&["get", "destination", "worker-2", "-o", "json"]))
            .unwrap();
    assert_eq!(d2["metadata"]["labels"]["team"], "a");
    assert_eq!(d2["metadata"]["labels"]["environment"], "edge");
    assert_eq!(d2["spec"]["stateStoreRef"]["kind"], "GitStateStore");
    drop(w2);
    assert!(
        !w.log().contains("ERROR"),
        "worker log has errors:\n{}",
        w.log()
    );
}

#[test]
fn worker_help_says_the_destination_is_left_on_the_platform() {
    let out = Command::new(env!("CARGO_BIN_EXE_plinth"))
        .args(["worker", "--help"])
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("The Destination is left on the platform"),
        "{text}"
    );
}

#[test]
fn a_worker_without_a_platform_kubeconfig_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let out = Command::new(env!("CARGO_BIN_EXE_plinth"))
        .args(["worker", "w", "--platform"])
        .arg(&missing)
        .arg("--data-dir")
        .arg(dir.path().join("w"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no such kubeconfig") && err.contains(&missing.display().to_string()),
        "{err}"
    );
}
