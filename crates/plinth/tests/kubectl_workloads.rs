//! Black-box tests of workloads as a user drives them with the real `kubectl` against
//! `plinth up`: Jobs select only their own Pods, Events sort by `.lastTimestamp`, a bare
//! Pod from `kubectl run` runs, and a failing pipeline says why in its request's
//! condition.

use crate::support;

use std::time::Duration;

use support::*;

fn have_kubectl() -> bool {
    let ok = std::process::Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        println!("SKIPPED: kubectl not found");
    }
    ok
}

fn job(name: &str, text: &str) -> String {
    format!(
        r#"apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: default
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        command: [sh, -c, "echo {text}"]
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_job_shows_its_own_pod_and_events_sort_by_last_timestamp() {
    if !have_kubectl() {
        return;
    }
    let p = Plinth::up(&[]).await;
    for (name, text) in [("alpha", "from-alpha"), ("beta", "from-beta")] {
        let path = p.dir.path().join(format!("{name}.yaml"));
        std::fs::write(&path, job(name, text)).unwrap();
        p.kubectl(&["apply", "-f", path.to_str().unwrap()]);
    }
    p.kubectl(&[
        "wait",
        "--for=condition=complete",
        "job/alpha",
        "job/beta",
        "--timeout=90s",
    ]);
    assert_eq!(p.kubectl(&["logs", "job/beta"]), "from-beta\n");
    assert_eq!(p.kubectl(&["logs", "job/alpha"]), "from-alpha\n");
    let pods = p.kubectl(&["get", "pods", "-l", "job-name=beta", "-o", "name"]);
    assert_eq!(pods.lines().count(), 1, "{pods}");
    assert!(pods.starts_with("pod/beta-"), "{pods}");
    let selector = p.kubectl(&[
        "get",
        "job",
        "beta",
        "-o",
        "jsonpath={.spec.selector.matchLabels}",
    ]);
    assert!(
        selector.contains("batch.kubernetes.io/controller-uid"),
        "{selector}"
    );

    let events = p.kubectl(&["get", "events", "-A", "--sort-by=.lastTimestamp"]);
    for reason in ["SuccessfulCreate", "Completed", "Scheduled", "Started"] {
        assert!(events.contains(reason), "no {reason} event:\n{events}");
    }
    let job_events = p.kubectl(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.kind=Job,involvedObject.name=beta",
        "-o",
        "jsonpath={range .items[*]}{.reason} {.count} {.lastTimestamp}{\"\\n\"}{end}",
    ]);
    assert!(job_events.contains("SuccessfulCreate 1 20"), "{job_events}");
    assert!(job_events.contains("Completed 1 20"), "{job_events}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_run_runs_a_bare_pod() {
    if !have_kubectl() {
        return;
    }
    let p = Plinth::up(&[]).await;
    p.kubectl(&[
        "run",
        "debug",
        "--image=busybox",
        "--restart=Never",
        "--",
        "sh",
        "-c",
        "echo hi",
    ]);
    p.kubectl(&[
        "wait",
        "--for=jsonpath={.status.phase}=Succeeded",
        "pod/debug",
        "--timeout=90s",
    ]);
    assert_eq!(p.kubectl(&["logs", "debug"]), "hi\n");
    let describe = p.kubectl(&["describe", "pod", "debug"]);
    for needle in [
        "Scheduled",
        "Started",
        "sandbox://default/debug/debug",
        "host-userland:busybox",
    ] {
        assert!(describe.contains(needle), "no {needle:?} in:\n{describe}");
    }
    // Deleting it afterwards is immediate and leaves nothing behind.
    p.kubectl(&["delete", "pod", "debug", "--wait=true"]);
    let pod_logs = p.data.join("pod-logs/default/debug");
    wait_until(10, "the deleted Pod's log directory to go", || {
        let gone = !pod_logs.exists();
        async move { gone }
    })
    .await;
}

const FAILING_PROMISE: &str = r#"
apiVersion: platform.kratix.io/v1alpha1
kind: Promise
metadata:
  name: failing
spec:
  api:
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata:
      name: failings.test.plinth.dev
    spec:
      group: test.plinth.dev
      names: {kind: Failing, plural: failings, singular: failing}
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
                x-kubernetes-preserve-unknown-fields: true
  workflows:
    resource:
      configure:
      - apiVersion: platform.kratix.io/v1alpha1
        kind: Pipeline
        metadata:
          name: breaks
        spec:
          containers:
          - name: breaker
            image: busybox
            command: [sh, -c, 'echo preparing; echo "boom: database unreachable"; exit 3']
"#;

const FAILING_REQUEST: &str = r#"
apiVersion: test.plinth.dev/v1alpha1
kind: Failing
metadata:
  name: example
  namespace: default
spec: {}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_pipeline_says_why_in_the_requests_condition() {
    if !have_kubectl() {
        return;
    }
    let p = Plinth::up(&[]).await;
    let promise = p.dir.path().join("promise.yaml");
    std::fs::write(&promise, FAILING_PROMISE).unwrap();
    p.kubectl(&["apply", "-f", promise.to_str().unwrap()]);
    p.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/failings.test.plinth.dev",
        "--timeout=90s",
    ]);
    let request = p.dir.path().join("request.yaml");
    std::fs::write(&request, FAILING_REQUEST).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !p
        .kubectl_raw(&["apply", "-f", request.to_str().unwrap()])
        .status
        .success()
    {
        assert!(std::time::Instant::now() < deadline, "request not accepted");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let jsonpath =
        "jsonpath={.status.conditions[?(@.type==\"ConfigureWorkflowCompleted\")].message}";
    let mut message = String::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while !message.contains("attempt 1 of 7") {
        assert!(
            std::time::Instant::now() < deadline,
            "no failure in the condition; last message: {message:?}\n{}",
            p.log()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        message = p.kubectl(&["get", "failing", "example", "-o", jsonpath]);
    }
    assert_eq!(
        message,
        "Pipelines are still in progress; retrying after a failure: pipeline \"breaks\": \
         container \"breaker\" exited with code 3 (attempt 1 of 7); last log lines:\n\
         preparing\nboom: database unreachable"
    );
}

/// The README's kubectl walk-through: the example Promise and request in `examples/`
/// apply unchanged on `plinth up`, and the request is Reconciled with its files written
/// to the bootstrap Destination `local`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_example_reconciles_on_plinth_up() {
    if !have_kubectl() {
        return;
    }
    let p = Plinth::up(&[]).await;
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/webapp");
    let file = |name: &str| examples.join(name).to_string_lossy().into_owned();
    p.kubectl(&["apply", "-f", &file("promise.yaml")]);
    wait_until(90, "the WebApp API", || async {
        p.kubectl_raw(&["get", "webapps", "-A"]).status.success()
    })
    .await;
    p.kubectl(&["apply", "-f", &file("request.yaml")]);
    let reconciled = r#"jsonpath={.status.conditions[?(@.type=="Reconciled")].status}"#;
    wait_until(120, "WebApp default/hello Reconciled", || async {
        let out = p.kubectl_raw(&["get", "webapp", "hello", "-n", "default", "-o", reconciled]);
        String::from_utf8_lossy(&out.stdout) == "True"
    })
    .await;
    let files = repo_files(&p.repo(), "main");
    assert!(
        files
            .iter()
            .any(|f| f.contains("resources/default/webapp/hello/render/")),
        "{files:?}"
    );
}
