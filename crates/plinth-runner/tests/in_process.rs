//! Adapter containers run inside the runner's process: the same files, identity, logs and
//! status as a sandboxed process, and the sandbox whenever in-process would see more.

use crate::common;

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use futures::future::BoxFuture;
use plinth_runner::adapter::{AdapterCall, AdapterProgram};
use plinth_runner::{EngineMode, RunOptions, RunnerConfig, SandboxMode, run_pod_once};
use serde_json::json;

/// Stands in for Plinth's adapter roles: `reader` writes object.yaml into the container
/// path `/kratix/input`, `fail` exits 3, `hang` never ends; every call logs its arguments
/// and whether it was handed the Pod's own kubeconfig.
#[derive(Debug)]
struct Roles;

impl AdapterProgram for Roles {
    fn run(&self, mut call: AdapterCall) -> BoxFuture<'static, i32> {
        Box::pin(async move {
            // The kubeconfig the runner wrote for the Pod, handed over in memory.
            let own = call.var("KUBECONFIG").is_some_and(|path| {
                std::fs::read_to_string(path).is_ok_and(|text| text == call.kubeconfig)
            });
            let _ = writeln!(
                call.output,
                "in-process {} own-kubeconfig={own} token={}",
                call.args.join(" "),
                call.kubeconfig.contains("tok:team-a:pipeline")
            );
            match call.args.first().map(String::as_str) {
                Some("reader") => {
                    let path = call.host_path("/kratix/input/object.yaml".as_ref());
                    match std::fs::write(&path, "kind: App\n") {
                        Ok(()) => 0,
                        Err(e) => {
                            let _ = writeln!(call.output, "error: {e}");
                            1
                        }
                    }
                }
                Some("fail") => 3,
                Some("hang") => std::future::pending().await,
                _ => 0,
            }
        })
    }
}

fn config(dir: &std::path::Path) -> RunnerConfig {
    let mut c = RunnerConfig::new(
        dir.join("data"),
        "127.0.0.1",
        6443,
        "-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n",
    );
    c.engine = EngineMode::Disabled;
    c.sandbox = SandboxMode::Bwrap;
    c.adapter_program = Some(Arc::new(Roles));
    // The sandboxed stand-in for `plinth pipeline-adapter`, to tell the two ways apart.
    let exe = dir.join("bin/plinth");
    write_script(&exe, "#!/bin/sh\necho \"sandboxed $*\"\n");
    c.plinth_exe = exe;
    c
}

fn access() -> FakeAccess {
    FakeAccess {
        token: "tok".into(),
        ..FakeAccess::default()
    }
}

const ADAPTER: &str = "ghcr.io/syntasso/kratix-platform-pipeline-adapter:v0.5.0";

fn adapter(name: &str, role: &str) -> serde_json::Value {
    json!({"name": name, "image": ADAPTER, "command": ["/bin/pipeline-adapter"], "args": [role],
           "volumeMounts": [{"name": "input", "mountPath": "/kratix/input"},
                            {"name": "output", "mountPath": "/kratix/output"}]})
}

fn user(name: &str, script: &str) -> serde_json::Value {
    json!({"name": name, "image": "busybox", "command": ["sh", "-c", script],
           "volumeMounts": [{"name": "input", "mountPath": "/kratix/input"},
                            {"name": "output", "mountPath": "/kratix/output"}]})
}

fn pipeline_pod(
    name: &str,
    inits: Vec<serde_json::Value>,
    mains: Vec<serde_json::Value>,
) -> k8s_openapi::api::core::v1::Pod {
    pod(json!({
        "metadata": {"name": name, "namespace": "team-a", "uid": "u1"},
        "spec": {
            "serviceAccountName": "pipeline",
            "volumes": [{"name": "input", "emptyDir": {}}, {"name": "output", "emptyDir": {}}],
            "initContainers": inits,
            "containers": mains
        }
    }))
}

/// Runs `p` once with the fake API.
async fn run(
    cfg: &RunnerConfig,
    p: &k8s_openapi::api::core::v1::Pod,
) -> k8s_openapi::api::core::v1::PodStatus {
    run_pod_once(&access(), cfg, p, RunOptions::default())
        .await
        .unwrap()
}

fn id_of(st: &k8s_openapi::api::core::v1::PodStatus, init: bool, name: &str) -> String {
    container(st, init, name)
        .container_id
        .clone()
        .unwrap_or_default()
}

#[tokio::test]
async fn an_adapter_runs_in_process_with_the_pods_files_identity_and_log() {
    if !have_bwrap("an_adapter_runs_in_process_with_the_pods_files_identity_and_log") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let p = pipeline_pod(
        "configure",
        vec![adapter("reader", "reader")],
        vec![user("user", "cat /kratix/input/object.yaml")],
    );
    let st = run(&cfg, &p).await;
    let log = |c: &str| read(&cfg.log_path("team-a", "configure", c));
    assert_eq!(
        st.phase.as_deref(),
        Some("Succeeded"),
        "{st:?} {}",
        log("reader")
    );
    assert_eq!(
        log("reader"),
        "in-process reader own-kubeconfig=true token=true\n"
    );
    // What the in-process reader wrote is in the volume the user's container reads.
    assert_eq!(log("user"), "kind: App\n");
    assert_eq!(
        id_of(&st, true, "reader"),
        "plinth://team-a/configure/reader"
    );
    assert_eq!(
        container(&st, true, "reader").image_id,
        "plinth:pipeline-adapter"
    );
    assert!(id_of(&st, false, "user").starts_with("sandbox://"));
}

#[tokio::test]
async fn a_failing_adapter_fails_the_pod_with_its_exit_code() {
    if !have_bwrap("a_failing_adapter_fails_the_pod_with_its_exit_code") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let p = pipeline_pod(
        "fails",
        vec![adapter("reader", "fail")],
        vec![user("user", "true")],
    );
    let st = run(&cfg, &p).await;
    assert_eq!(st.phase.as_deref(), Some("Failed"));
    assert_eq!(exit_code(container(&st, true, "reader")), 3);
    assert!(
        st.message.as_deref().unwrap_or("").contains("\"reader\""),
        "{:?}",
        st.message
    );
}

#[tokio::test]
async fn the_deadline_ends_an_in_process_adapter() {
    if !have_bwrap("the_deadline_ends_an_in_process_adapter") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let p = pipeline_pod("slow", vec![], vec![adapter("status-writer", "hang")]);
    let started = std::time::Instant::now();
    let st = run_pod_once(
        &access(),
        &cfg,
        &p,
        RunOptions {
            deadline: Some(tokio::time::Instant::now() + Duration::from_millis(300)),
            ..RunOptions::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(st.reason.as_deref(), Some("DeadlineExceeded"), "{st:?}");
    assert_eq!(exit_code(container(&st, false, "status-writer")), 137);
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[tokio::test]
async fn an_adapter_beside_another_container_runs_in_the_sandbox() {
    if !have_bwrap("an_adapter_beside_another_container_runs_in_the_sandbox") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let p = pipeline_pod(
        "beside",
        vec![],
        vec![
            adapter("status-writer", "update-status"),
            user("user", "sleep 0.2"),
        ],
    );
    let st = run(&cfg, &p).await;
    assert_eq!(st.phase.as_deref(), Some("Succeeded"), "{st:?}");
    assert_eq!(
        read(&cfg.log_path("team-a", "beside", "status-writer")),
        "sandboxed pipeline-adapter update-status\n"
    );
}

#[tokio::test]
async fn a_link_out_of_the_pod_sends_the_adapter_to_the_sandbox() {
    if !have_bwrap("a_link_out_of_the_pod_sends_the_adapter_to_the_sandbox") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    // A user container leaves a link to the host's root (and one to a file that does not
    // exist yet) for the work-writer that follows it; any link at all would do.
    let p = pipeline_pod(
        "linked",
        vec![
            user(
                "user",
                "ln -s / /kratix/output/host-root; ln -s /nowhere /kratix/input/later",
            ),
            adapter("work-writer", "work-creator"),
        ],
        vec![user("after", "true")],
    );
    let st = run(&cfg, &p).await;
    assert_eq!(st.phase.as_deref(), Some("Succeeded"), "{st:?}");
    assert_eq!(
        read(&cfg.log_path("team-a", "linked", "work-writer")),
        "sandboxed pipeline-adapter work-creator\n"
    );
    assert!(
        id_of(&st, true, "work-writer").starts_with("sandbox://"),
        "the status says where it ran"
    );
}

#[tokio::test]
async fn without_an_adapter_program_adapters_run_in_the_sandbox() {
    if !have_bwrap("without_an_adapter_program_adapters_run_in_the_sandbox") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.adapter_program = None;
    let p = pipeline_pod(
        "plain",
        vec![adapter("reader", "reader")],
        vec![user("user", "true")],
    );
    let st = run(&cfg, &p).await;
    assert_eq!(st.phase.as_deref(), Some("Succeeded"), "{st:?}");
    assert_eq!(
        read(&cfg.log_path("team-a", "plain", "reader")),
        "sandboxed pipeline-adapter reader\n"
    );
    assert!(id_of(&st, true, "reader").starts_with("sandbox://"));
}

#[tokio::test]
async fn a_directory_left_by_an_earlier_run_sends_adapters_to_the_sandbox() {
    if !have_bwrap("a_directory_left_by_an_earlier_run_sends_adapters_to_the_sandbox") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    // An earlier Pod of this name may still be stopping and writing its volumes.
    std::fs::create_dir_all(cfg.pod_dir("team-a", "again")).unwrap();
    let p = pipeline_pod(
        "again",
        vec![adapter("reader", "reader")],
        vec![user("user", "true")],
    );
    let st = run(&cfg, &p).await;
    assert_eq!(st.phase.as_deref(), Some("Succeeded"), "{st:?}");
    assert_eq!(
        read(&cfg.log_path("team-a", "again", "reader")),
        "sandboxed pipeline-adapter reader\n"
    );
}
