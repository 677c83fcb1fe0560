//! Health at the Destination, end to end on real processes: `plinth up` (with a
//! HealthSource reading the health store) and `plinth worker worker-1 --health`. A
//! Promise's resource pipeline outputs a Deployment and a HealthDefinition; the worker's
//! agent applies both, its health agent runs the check as a CronJob, the check reads a
//! ConfigMap in the worker, `health-state-creator` writes a HealthRecord, the health
//! writer puts it in the store (a moto bucket, or a Git repository), the platform's
//! HealthSource applies it, and the request's healthStatus follows: healthy, then
//! unhealthy once the ConfigMap says so, with both transitions in its history.

use crate::support;

use std::path::Path;

use serde_json::Value;
use support::*;

/// Checks run every minute (the finest cron schedule); a change is seen by the next run,
/// written after the flush window and applied at the next poll.
const CHECK_INTERVAL_SECS: u64 = 60;
const POLL_INTERVAL_SECS: u64 = 10;

/// The README's health example (`examples/health/`): the Promise, its request, the
/// worker's health store and probe, and the platform's HealthSource.
fn example(name: &str) -> String {
    let f = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/health")
        .join(name);
    std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()))
}

/// The Git URL the example files name, replaced by each test's own repository.
const EXAMPLE_URL: &str = "file:///tmp/plinth-health.git";

/// Where the worker's health agent writes, and how the platform reads it.
struct Store {
    /// Documents applied to the worker: its health store (and Secret) and the probe.
    worker: String,
    /// Extra `plinth worker` flags (where the health-store ConfigMap is).
    worker_args: Vec<&'static str>,
    /// Documents applied to the platform: the HealthSource (and its Secret).
    platform: String,
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
    let mut args = vec![
        "--health",
        "--health-flush-window",
        "1s",
        "--interval-secs",
        "2",
    ];
    args.extend(&store.worker_args);
    let w = Worker::start(&p, "worker-1", &args);
    let wk = |args: &[&str]| {
        let out = w.kubectl_raw(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} in the worker: {out:?}"
        );
    };

    // The worker's health store and the probe the check reads; the platform reads the
    // store with a HealthSource.
    wk(&["apply", "-f", &write(&files, "worker.yaml", &store.worker)]);
    p.kubectl(&[
        "apply",
        "-f",
        &write(&files, "source.yaml", &store.platform),
    ]);

    p.kubectl(&[
        "apply",
        "-f",
        &write(&files, "promise.yaml", &example("promise.yaml")),
    ]);
    p.kubectl(&[
        "wait",
        "--for=condition=Available",
        "promise/web",
        "--timeout=120s",
    ]);
    wait_until(90, "the Web API", || async {
        p.kubectl_raw(&["get", "webs", "-A"]).status.success()
    })
    .await;
    p.kubectl(&[
        "apply",
        "-f",
        &write(&files, "request.yaml", &example("request.yaml")),
    ]);

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
    let store_config = configmap_yaml(
        "health-state-store-config",
        &[
            ("stateStoreKind", "BucketStateStore".into()),
            ("endpoint", endpoint.clone()),
            ("bucketName", "health".into()),
            ("authMethod", "accessKey".into()),
            ("insecure", "true".into()),
            ("path", "health".into()),
            ("secretName", "health-writer".into()),
        ],
    );
    let probe = configmap_yaml("one-probe", &[("state", "healthy".into())]);
    let source = serde_json::json!({
        "apiVersion": "platform.syntasso.io/v1alpha1", "kind": "HealthSource",
        "metadata": {"name": "worker-1"},
        "spec": {"path": "health", "pollInterval": format!("{POLL_INTERVAL_SECS}s"),
                 "bucket": {
            "endpoint": endpoint, "bucketName": "health", "insecure": true,
            "authMethod": "accessKey",
            "secretRef": {"name": "health-reader", "namespace": "default"}}},
    });
    scenario(Store {
        worker: format!(
            "{}---\n{store_config}---\n{probe}",
            secret_yaml("health-writer", ("test", "test"))
        ),
        worker_args: vec!["--health-config", "default/health-state-store-config"],
        platform: format!(
            "{}---\n{source}\n",
            secret_yaml("health-reader", ("test", "test"))
        ),
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
    // The README's example files, unchanged but for the repository's path.
    let worker = example("worker.yaml").replace(EXAMPLE_URL, &url);
    let platform = example("healthsource.yaml").replace(EXAMPLE_URL, &url);
    assert!(worker.contains(&url) && platform.contains(&url));
    scenario(Store {
        worker,
        worker_args: vec![],
        platform,
        has_record: Box::new(move || repo_file(&bare, "main", RECORD).is_some()),
    })
    .await;
}
