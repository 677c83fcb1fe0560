//! Sandbox start cost per container: mean wall time of 100 runs of `true`.
//!
//! `cargo run --release -p plinth-runner --example bench_sandbox`
//!
//! Prints three numbers: a plain host spawn of `true` (baseline), the bubblewrap sandbox
//! as the runner builds it (host view, three /kratix volume binds), and a whole Pod
//! through `run_pod_once` (volume directories, status tracking, log file, cleanup).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use plinth_runner::backend::{
    BwrapSandbox, ContainerBackend, EffectiveSecurity, PreparedContainer,
};
use plinth_runner::config::find_on_path;
use plinth_runner::mount::Mount;
use plinth_runner::{
    ClusterAccess, EngineMode, RunOptions, RunnerConfig, RunnerError, SandboxMode, run_pod_once,
};

const RUNS: u32 = 100;

struct NoApi;

impl ClusterAccess for NoApi {
    async fn config_map(&self, _: &str, _: &str) -> Result<Option<ConfigMap>, RunnerError> {
        Ok(None)
    }
    async fn secret(&self, _: &str, _: &str) -> Result<Option<Secret>, RunnerError> {
        Ok(None)
    }
    async fn service_account_token(
        &self,
        _: &str,
        _: &str,
        _: &Pod,
        _: Vec<String>,
        _: i64,
    ) -> Result<String, RunnerError> {
        Ok("token".into())
    }
}

async fn mean(mut f: impl AsyncFnMut()) -> Duration {
    for _ in 0..5 {
        f().await;
    }
    let start = Instant::now();
    for _ in 0..RUNS {
        f().await;
    }
    start.elapsed() / RUNS
}

#[tokio::main]
async fn main() {
    let Some(bwrap) = find_on_path("bwrap") else {
        eprintln!("bwrap is not installed (apt-get install bubblewrap)");
        std::process::exit(1);
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let vols: Vec<Mount> = ["input", "output", "metadata"]
        .iter()
        .map(|v| {
            let p = dir.path().join(v);
            std::fs::create_dir_all(&p).unwrap();
            Mount {
                host_path: p,
                container_path: format!("/kratix/{v}"),
                read_only: *v == "input",
            }
        })
        .collect();
    let prepared = PreparedContainer {
        namespace: "bench".into(),
        pod: "bench".into(),
        name: "c".into(),
        image: "busybox".into(),
        pull_policy: None,
        argv: vec!["true".into()],
        engine_args: vec![],
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        working_dir: None,
        mounts: vols,
        host_binds: vec![],
        security: EffectiveSecurity::default(),
        pod_dir: dir.path().to_path_buf(),
    };
    let sandbox = BwrapSandbox {
        bwrap,
        network: true,
        hidden: vec![],
    };

    let host = mean(async || {
        let s = tokio::process::Command::new("true").status().await.unwrap();
        assert!(s.success());
    })
    .await;
    let sandboxed = mean(async || {
        let s = sandbox.command(&prepared).unwrap().status().await.unwrap();
        assert!(s.success());
    })
    .await;

    let mut cfg = RunnerConfig::new(dir.path().join("data"), "127.0.0.1", 6443, "");
    cfg.sandbox = SandboxMode::Bwrap;
    cfg.engine = EngineMode::Disabled;
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "bench-pod", "namespace": "bench"},
        "spec": {
            "volumes": [{"name": "in", "emptyDir": {}}, {"name": "out", "emptyDir": {}}, {"name": "md", "emptyDir": {}}],
            "containers": [{"name": "c", "image": "busybox", "command": ["true"], "volumeMounts": [
                {"name": "in", "mountPath": "/kratix/input", "readOnly": true},
                {"name": "out", "mountPath": "/kratix/output"},
                {"name": "md", "mountPath": "/kratix/metadata"}]}]
        }
    }))
    .unwrap();
    let whole_pod = mean(async || {
        let st = run_pod_once(&NoApi, &cfg, &pod, RunOptions::default())
            .await
            .unwrap();
        assert_eq!(st.phase.as_deref(), Some("Succeeded"));
    })
    .await;

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("runs per measurement: {RUNS}");
    println!("host `true` (baseline):                 {:.2} ms", ms(host));
    println!(
        "bwrap sandbox `true` (3 volume binds):  {:.2} ms",
        ms(sandboxed)
    );
    println!(
        "sandbox start cost per container:       {:.2} ms",
        ms(sandboxed.saturating_sub(host))
    );
    println!(
        "whole Pod via run_pod_once (1 container, identity files, log): {:.2} ms",
        ms(whole_pod)
    );
}
