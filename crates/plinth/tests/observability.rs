//! What an operator sees of a running platform: `/metrics` (Prometheus text format),
//! Kratix's Events and JSON log lines with Kratix's keys, after one resource request ran a pipeline and was
//! written to the Git state store; and that the request's and its Promise's series go
//! when they are deleted.

use crate::support;

use std::os::unix::fs::PermissionsExt;

use serde_json::Value;
use support::*;

const PROMISE: &str = r#"
apiVersion: platform.kratix.io/v1alpha1
kind: Promise
metadata:
  name: widget
spec:
  api:
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata:
      name: widgets.example.test
    spec:
      group: example.test
      names: {kind: Widget, plural: widgets, singular: widget}
      scope: Namespaced
      versions:
      - name: v1
        served: true
        storage: true
        schema:
          openAPIV3Schema:
            type: object
            properties:
              spec:
                type: object
                properties:
                  size: {type: string}
  workflows:
    promise:
      configure:
      - apiVersion: platform.kratix.io/v1alpha1
        kind: Pipeline
        metadata:
          name: promise-configure
        spec:
          containers:
          - name: render
            image: example.test/widget-pipeline:v1
    resource:
      configure:
      - apiVersion: platform.kratix.io/v1alpha1
        kind: Pipeline
        metadata:
          name: instance-configure
        spec:
          containers:
          - name: render
            image: example.test/widget-pipeline:v1
"#;

const PIPELINE: &str = r#"#!/bin/sh
set -eu
cat > /kratix/output/widget.yaml <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: widget-$KRATIX_WORKFLOW_TYPE-$KRATIX_OBJECT_NAME
  namespace: default
EOF
"#;

const REQUEST: &str = r#"
apiVersion: example.test/v1
kind: Widget
metadata:
  name: w1
  namespace: default
spec:
  size: small
"#;

/// The name of the request's Work (`kubectl get works`).
fn work_name(p: &Plinth) -> String {
    p.kubectl(&[
        "get",
        "works",
        "-n",
        "default",
        "-l",
        "kratix.io/resource-name=w1",
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ])
    .trim()
    .to_string()
}

fn metrics_addr(p: &Plinth) -> String {
    let out = std::fs::read_to_string(p.dir.path().join("plinth.out")).unwrap_or_default();
    out.lines()
        .find_map(|l| l.strip_prefix("metrics: http://"))
        .and_then(|l| l.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("no metrics line in:\n{out}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_events_and_json_logs_after_a_request() {
    // Not under /tmp: the sandbox gives every container a private /tmp.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let script = dir.path().join("widget-pipeline.sh");
    std::fs::write(&script, PIPELINE).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let map = dir.path().join("images.yaml");
    std::fs::write(
        &map,
        format!(
            "images:\n  - image: \"example.test/widget-pipeline:*\"\n    command: [\"{}\"]\n",
            script.display()
        ),
    )
    .unwrap();
    let p = Plinth::up(&[
        "--image-map",
        map.to_str().unwrap(),
        "--metrics-addr",
        "127.0.0.1:0",
        "--log-format",
        "json",
        "--log",
        "info,plinth_controllers=debug",
    ])
    .await;
    let client = p.client().await;
    let promise = dir.path().join("promise.yaml");
    std::fs::write(&promise, PROMISE).unwrap();
    p.kubectl(&["apply", "-f", promise.to_str().unwrap()]);
    let promises = promise_api(&client);
    wait_until(90, "Promise widget Available", || async {
        promises
            .get("widget")
            .await
            .is_ok_and(|o| o.data["status"]["status"] == "Available")
    })
    .await;
    let request = dir.path().join("request.yaml");
    std::fs::write(&request, REQUEST).unwrap();
    p.kubectl(&["apply", "-f", request.to_str().unwrap()]);
    let widgets = dynamic(
        &client,
        "example.test",
        "v1",
        "Widget",
        "widgets",
        Some("default"),
    );
    wait_until(120, "Widget w1 Reconciled", || async {
        widgets
            .get("w1")
            .await
            .is_ok_and(|o| condition(&o, "Reconciled").is_some_and(|c| c.0 == "True"))
    })
    .await;

    // Metrics: reconciles, the pipeline's duration, the commit, Kratix's counters, the
    // API server's requests, watches and database.
    let addr = metrics_addr(&p);
    let text = scrape(&addr);
    let must = |series: &str| -> f64 {
        let v = sample(&text, series).unwrap_or_else(|| panic!("{series} missing:\n{text}"));
        assert!(v > 0.0, "{series} is {v}");
        v
    };
    must(r#"controller_runtime_reconcile_total{controller="request",result="success"}"#);
    must(r#"controller_runtime_reconcile_total{controller="promise",result="success"}"#);
    must(r#"controller_runtime_reconcile_time_seconds_count{controller="workplacement"}"#);
    let runs = must(
        r#"plinth_pipeline_runs_total{promise="widget",pipeline="instance-configure",result="succeeded"}"#,
    );
    assert_eq!(runs, 1.0, "one pipeline Job ran");
    must(
        r#"plinth_pipeline_runs_total{promise="widget",pipeline="promise-configure",result="succeeded"}"#,
    );
    must(
        r#"plinth_pipeline_duration_seconds_count{promise="widget",pipeline="instance-configure",result="succeeded"}"#,
    );
    must(
        r#"plinth_pipeline_duration_seconds_bucket{promise="widget",pipeline="instance-configure",result="succeeded",le="+Inf"}"#,
    );
    must(r#"plinth_statestore_commits_total{kind="GitStateStore",store="local"}"#);
    must(r#"plinth_statestore_written_bytes_total{kind="GitStateStore",store="local"}"#);
    must(r#"plinth_statestore_writes_total{kind="GitStateStore",store="local",result="success"}"#);
    must(
        r#"kratix_workplacement_writes_total{result="success",promise="widget",resource="w1",destination="local",pipeline="instance-configure"}"#,
    );
    must(
        r#"kratix_workplacement_outcomes_total{result="scheduled",promise="widget",resource="w1",namespace="default",destination="local"}"#,
    );
    must(
        r#"plinth_apiserver_requests_total{verb="create",resource="widgets.example.test",code="201"}"#,
    );
    must(
        r#"plinth_apiserver_request_duration_seconds_count{verb="list",resource="promises.platform.kratix.io"}"#,
    );
    must(r#"plinth_apiserver_watches{resource="workplacements.platform.kratix.io"}"#);
    must("plinth_apiserver_sqlite_size_bytes");
    must(r#"plinth_agent_passes_total{agent="platform",result="success"}"#);

    // Events: Kratix's reasons and types, one Event per repeated occurrence.
    use plinth_api::constants::events as ev;
    assert_kratix_events(
        &p,
        &[
            (
                ev::PROMISE_CONTROLLER,
                ev::REVISION_CREATED,
                "Promise",
                "widget",
            ),
            (ev::PROMISE_CONTROLLER, ev::AVAILABLE, "Promise", "widget"),
            (
                ev::PROMISE_CONTROLLER,
                ev::PIPELINE_STARTED,
                "Promise",
                "widget",
            ),
            (
                ev::PROMISE_CONTROLLER,
                ev::CONFIGURE_WORKFLOW_COMPLETED,
                "Promise",
                "widget",
            ),
            (
                ev::PROMISE_CONTROLLER,
                ev::WORKS_SUCCEEDED,
                "Promise",
                "widget",
            ),
            (
                ev::RESOURCE_REQUEST_CONTROLLER,
                ev::PIPELINE_STARTED,
                "Widget",
                "w1",
            ),
            (
                ev::RESOURCE_REQUEST_CONTROLLER,
                ev::WORKS_SUCCEEDED,
                "Widget",
                "w1",
            ),
            (
                ev::RESOURCE_REQUEST_CONTROLLER,
                ev::RECONCILE_SUCCEEDED,
                "Widget",
                "w1",
            ),
            (
                ev::DESTINATION_CONTROLLER,
                ev::DESTINATION_READY,
                "Destination",
                "local",
            ),
            (
                ev::GIT_STATE_STORE_CONTROLLER,
                ev::READY,
                "GitStateStore",
                "local",
            ),
            (
                ev::SCHEDULER,
                ev::ALL_WORKPLACEMENTS_SCHEDULED,
                "Work",
                &work_name(&p),
            ),
        ],
    )
    .await;
    let described = p.kubectl(&["describe", "widgets", "w1"]);
    for reason in [
        ev::PIPELINE_STARTED,
        ev::WORKS_SUCCEEDED,
        ev::RECONCILE_SUCCEEDED,
    ] {
        assert!(
            described.contains(reason),
            "describe shows {reason}:\n{described}"
        );
    }

    // Logs: every line is one JSON object; the request controller's reconciles carry
    // Kratix's keys.
    let log = std::fs::read_to_string(p.dir.path().join("plinth.log")).unwrap();
    let lines: Vec<Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let finished = lines
        .iter()
        .find(|v| {
            v["message"] == "reconciliation finished"
                && v["controller"] == "request"
                && v["name"] == "w1"
        })
        .unwrap_or_else(|| panic!("no finished reconcile of w1 in the log:\n{}", p.log()));
    assert_eq!(finished["namespace"], "default");
    assert_eq!(finished["promise"], "widget");
    assert_eq!(finished["resourceRequest"], "widget/default/w1");
    assert_eq!(finished["level"], "DEBUG");
    assert!(finished["duration"].is_string(), "{finished}");
    assert!(finished["timestamp"].is_string(), "{finished}");
    assert!(
        lines
            .iter()
            .any(|v| v["message"] == "reconciliation started"
                && v["controller"] == "workplacement"
                && v["promise"] == "widget"
                && v["resourceRequest"] == "widget/default/w1"),
        "a WorkPlacement reconcile names its Promise and request"
    );

    // A deleted request leaves no series naming it, a deleted Promise none naming it.
    p.kubectl(&["delete", "widgets", "w1", "--wait=false"]);
    wait_until(120, "w1's series gone from /metrics", || async {
        !scrape(&addr).contains(r#"resource="w1""#)
    })
    .await;
    p.kubectl(&["delete", "promise", "widget", "--wait=false"]);
    wait_until(120, "widget's series gone from /metrics", || async {
        !scrape(&addr).contains(r#"promise="widget""#)
    })
    .await;
}
