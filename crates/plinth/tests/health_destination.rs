//! Health at the Destination, end to end on real processes: `plinth up` (with a
//! HealthSource reading the health store) and `plinth worker worker-1 --health`. A
//! Promise's resource pipeline outputs a Deployment and a HealthDefinition; the worker's
//! agent applies both, its health agent runs the check as a CronJob, the check reads a
//! ConfigMap in the worker, `health-state-creator` writes a HealthRecord, the health
//! writer puts it in the store (a moto bucket, or a Git repository), the platform's
//! HealthSource applies it, and the request's healthStatus follows: healthy, then
//! unhealthy once the ConfigMap says so, with both transitions in its history.

mod support;

use std::path::Path;

use serde_json::Value;
use support::*;

/// Checks run every minute (the finest cron schedule); a change is seen by the next run,
/// written after the flush window and applied at the next poll.
const CHECK_INTERVAL_SECS: u64 = 60;
const POLL_INTERVAL_SECS: u64 = 10;

const PROMISE: &str = r#"
apiVersion: platform.kratix.io/v1alpha1
kind: Promise
metadata:
  name: web
spec:
  destinationSelectors:
    - matchLabels: {environment: worker-1}
  api:
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata: {name: webs.health.plinth.dev}
    spec:
      group: health.plinth.dev
      names: {kind: Web, plural: webs, singular: web}
      scope: Namespaced
      versions:
        - name: v1alpha1
          served: true
          storage: true
          schema:
            openAPIV3Schema:
              type: object
              properties:
                spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
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
                    cat > /kratix/output/deployment.yaml <<'YAML'
                    apiVersion: apps/v1
                    kind: Deployment
                    metadata: {name: one, namespace: default}
                    spec:
                      selector: {matchLabels: {app: one}}
                      template:
                        metadata: {labels: {app: one}}
                        spec:
                          containers: [{name: app, image: nginx:1.27}]
                    YAML
                    cat > /kratix/output/health.yaml <<'YAML'
                    apiVersion: platform.kratix.io/v1alpha1
                    kind: HealthDefinition
                    metadata: {name: one-health, namespace: default}
                    spec:
                      resourceRef: {name: one, namespace: default}
                      promiseRef: {name: web}
                      schedule: "* * * * *"
                      input: |
                        apiVersion: apps/v1
                        kind: Deployment
                        metadata: {name: one, namespace: default}
                      workflow:
                        apiVersion: platform.kratix.io/v1alpha1
                        kind: Pipeline
                        metadata: {name: probe}
                        spec:
                          volumes:
                            - name: probe
                              configMap: {name: one-probe}
                          containers:
                            - name: probe
                              image: busybox
                              command: [sh, -c]
                              args:
                                - |
                                  set -eu
                                  grep -q 'kind: Deployment' /kratix/input/object.yaml
                                  state=$(cat /probe/state)
                                  printf 'state: %s\ndetails: {probe: %s}\n' "$state" "$state" > /kratix/output/health-status.yaml
                              volumeMounts:
                                - {name: probe, mountPath: /probe}
                    YAML
"#;

const REQUEST: &str = "apiVersion: health.plinth.dev/v1alpha1\nkind: Web\nmetadata:\n  name: one\n  namespace: default\nspec: {}\n";

/// Where the worker's health agent writes, and how the platform reads it.
struct Store {
    /// `data` of the worker's health-state-store-config ConfigMap.
    config: Vec<(&'static str, String)>,
    /// Secret keys for the worker's writer and the platform's reader (bucket only).
    secret: Option<(&'static str, &'static str)>,
    /// `spec` of the platform's HealthSource, without `path` and `pollInterval`.
    source: Value,
    /// Whether the record file exists in the store.
    has_record: Box<dyn Fn() -> bool>,
}

const RECORD: &str = "health/default/web/one/one-health.yaml";

fn write(dir: &Path, name: &str, text: &str) -> String {
    let f = dir.join(name);
    std::fs::write(&f, text).unwrap();
    f.to_string_lossy().into_owned()
}

fn configmap_yaml(name: &str, pairs: &[(&str, String)]) -> String {
    let mut y = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: default}}\ndata:\n"
    );
    for (k, v) in pairs {
        y.push_str(&format!("  {k}: {}\n", serde_json::to_string(v).unwrap()));
    }
    y
}

fn secret_yaml(name: &str, keys: (&str, &str)) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: default}}\nstringData: {{accessKeyID: {}, secretAccessKey: {}}}\n",
        keys.0, keys.1
    )
}

fn health_state(p: &Plinth) -> String {
    let out = p.kubectl_raw(&[
        "get",
        "web",
        "one",
        "-n",
        "default",
        "-o",
        "jsonpath={.status.healthStatus.state}",
    ]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The scenario, for one store.
async fn scenario(store: Store) {
    let p = Plinth::up(&[]).await;
    let files = p.dir.path().to_path_buf();
    let w = Worker::start(
        &p,
        "worker-1",
        &[
            "--health",
            "--health-config",
            "default/health-state-store-config",
            "--health-flush-window",
            "1s",
            "--interval-secs",
            "2",
        ],
    );
    let wk = |args: &[&str]| {
        let out = w.kubectl_raw(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} in the worker: {out:?}"
        );
    };

    // The worker's health store and the probe the check reads.
    if let Some(keys) = store.secret {
        wk(&[
            "apply",
            "-f",
            &write(&files, "w-secret.yaml", &secret_yaml("health-writer", keys)),
        ]);
    }
    wk(&[
        "apply",
        "-f",
        &write(
            &files,
            "w-store.yaml",
            &configmap_yaml("health-state-store-config", &store.config),
        ),
    ]);
    wk(&[
        "apply",
        "-f",
        &write(
            &files,
            "probe.yaml",
            &configmap_yaml("one-probe", &[("state", "healthy".into())]),
        ),
    ]);

    // The platform reads the store with a HealthSource.
    if let Some(keys) = store.secret {
        p.kubectl(&[
            "apply",
            "-f",
            &write(&files, "p-secret.yaml", &secret_yaml("health-reader", keys)),
        ]);
    }
    let mut spec = store.source.clone();
    spec["path"] = "health".into();
    spec["pollInterval"] = format!("{POLL_INTERVAL_SECS}s").into();
    let source = serde_json::json!({
        "apiVersion": "platform.syntasso.io/v1alpha1", "kind": "HealthSource",
        "metadata": {"name": "worker-1"}, "spec": spec,
    });
    p.kubectl(&[
        "apply",
        "-f",
        &write(&files, "source.yaml", &source.to_string()),
    ]);

    p.kubectl(&["apply", "-f", &write(&files, "promise.yaml", PROMISE)]);
    wait_until(90, "the Web API", || async {
        p.kubectl_raw(&["get", "webs", "-A"]).status.success()
    })
    .await;
    p.kubectl(&["apply", "-f", &write(&files, "request.yaml", REQUEST)]);

    // The pipeline's Deployment and HealthDefinition reach the worker; the check runs.
    wait_until(
        120,
        "Deployment and HealthDefinition in the worker",
        || async {
            w.get(&["deploy", "one", "-n", "default"]).is_some()
                && w.get(&["healthdefinition", "one-health", "-n", "default"])
                    .is_some()
        },
    )
    .await;
    let cronjob = w.get(&["cronjobs", "-n", "default"]).expect("cronjobs");
    assert_eq!(
        cronjob["items"].as_array().map(Vec::len),
        Some(1),
        "{cronjob}"
    );
    let to_healthy = CHECK_INTERVAL_SECS * 2 + POLL_INTERVAL_SECS * 2 + 30;
    wait_until(to_healthy, "the record in the store", || async {
        (store.has_record)()
    })
    .await;
    wait_until(60, "healthStatus healthy", || async {
        health_state(&p) == "healthy"
    })
    .await;

    // What the check sees changes: unhealthy within two check runs and two polls.
    wk(&[
        "apply",
        "-f",
        &write(
            &files,
            "probe.yaml",
            &configmap_yaml("one-probe", &[("state", "unhealthy".into())]),
        ),
    ]);
    let to_unhealthy = 2 * (CHECK_INTERVAL_SECS + POLL_INTERVAL_SECS) + 15;
    wait_until(to_unhealthy, "healthStatus unhealthy", || async {
        health_state(&p) == "unhealthy"
    })
    .await;

    let web: Value =
        serde_json::from_str(&p.kubectl(&["get", "web", "one", "-n", "default", "-o", "json"]))
            .unwrap();
    let states: Vec<&str> = web["status"]["healthHistory"]["transitions"]
        .as_array()
        .unwrap_or_else(|| panic!("no history: {}", web["status"]))
        .iter()
        .map(|t| t["state"].as_str().unwrap_or_default())
        .collect();
    assert!(
        states.ends_with(&["healthy", "unhealthy"]),
        "transitions {states:?}; worker log:\n{}",
        w.log()
    );
    let details = &web["status"]["healthStatus"]["healthRecords"][0]["details"];
    assert_eq!(
        details["probe"], "unhealthy",
        "{}",
        web["status"]["healthStatus"]
    );

    // Checks keep running in the worker; unchanged results write nothing to the store,
    // so the platform stays silent.
    assert_settled_silent(&p.client().await, SILENCE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_at_the_worker_reaches_the_request_through_a_bucket() {
    let Some(moto) = moto(&["health"]).await else {
        return;
    };
    let endpoint = format!("127.0.0.1:{}", moto.port);
    let moto = std::sync::Arc::new(moto);
    let m = moto.clone();
    scenario(Store {
        config: vec![
            ("stateStoreKind", "BucketStateStore".into()),
            ("endpoint", endpoint.clone()),
            ("bucketName", "health".into()),
            ("authMethod", "accessKey".into()),
            ("insecure", "true".into()),
            ("path", "health".into()),
            ("secretName", "health-writer".into()),
        ],
        secret: Some(("test", "test")),
        source: serde_json::json!({"bucket": {
            "endpoint": endpoint, "bucketName": "health", "insecure": true,
            "authMethod": "accessKey",
            "secretRef": {"name": "health-reader", "namespace": "default"}}}),
        has_record: Box::new(move || m.keys("health").iter().any(|k| k == RECORD)),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_at_the_worker_reaches_the_request_through_git() {
    let dir = tempfile::tempdir().unwrap();
    let bare = dir.path().join("health.git");
    git(&["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()]);
    let url = format!("file://{}", bare.display());
    scenario(Store {
        config: vec![
            ("stateStoreKind", "GitStateStore".into()),
            ("url", url.clone()),
            ("branch", "main".into()),
            ("path", "health".into()),
        ],
        secret: None,
        source: serde_json::json!({"git": {"url": url, "branch": "main"}}),
        has_record: Box::new(move || repo_file(&bare, "main", RECORD).is_some()),
    })
    .await;
}
