//! The container-engine backend with podman: a local image named
//! like a registry image, run with `--pull=never`, volumes, env and the identity files.

use crate::common;

use std::process::Command;

use common::*;
use plinth_runner::{EngineMode, RunOptions, RunnerConfig, SandboxMode, run_pod_once};
use serde_json::json;

const IMAGE: &str = "ghcr.io/example/plinth-engine-test:v1";

/// Imports a busybox rootfs as [`IMAGE`]; `None` (with a SKIPPED line) when podman or a
/// static busybox is missing.
fn local_image(dir: &std::path::Path, conf: &std::path::Path) -> Option<()> {
    let podman = plinth_runner::config::find_on_path("podman");
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    let (Some(podman), Some(busybox)) = (podman, busybox) else {
        println!(
            "SKIPPED: engine tests: podman and busybox-static are needed (scripts/install-test-deps.sh installs them)"
        );
        return None;
    };
    let root = dir.join("rootfs");
    for d in ["bin", "tmp", "etc", "proc", "dev", "sys", "root"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::copy(busybox, root.join("bin/busybox")).unwrap();
    for c in ["sh", "cat", "echo", "id", "ls", "true", "sleep"] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(c)).unwrap();
    }
    std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    std::fs::write(root.join("etc/group"), "root:x:0:\n").unwrap();
    let tar = dir.join("rootfs.tar");
    assert!(
        Command::new("tar")
            .arg("-C")
            .arg(&root)
            .arg("-cf")
            .arg(&tar)
            .arg(".")
            .status()
            .unwrap()
            .success()
    );
    let out = Command::new(podman)
        .env("CONTAINERS_CONF", conf)
        .args(["import"])
        .arg(&tar)
        .arg(IMAGE)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "podman import: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(())
}

/// A runner that runs images through podman, with its `containers.conf`, and
/// [`IMAGE`] imported; `None` when podman or busybox is missing.
fn engine_runner(dir: &std::path::Path) -> Option<(RunnerConfig, std::path::PathBuf)> {
    let mut cfg = RunnerConfig::new(dir.join("data"), "127.0.0.1", 6443, "ca");
    cfg.engine = EngineMode::Auto;
    cfg.sandbox = SandboxMode::Bwrap;
    let conf = plinth_runner::backend::write_containers_conf(&cfg.data_dir).unwrap();
    local_image(dir, &conf)?;
    Some((cfg, conf))
}

#[tokio::test]
async fn podman_runs_an_image_with_volumes_env_and_identity() {
    let dir = tempfile::tempdir().unwrap();
    let Some((cfg, _)) = engine_runner(dir.path()) else {
        return;
    };
    let access = FakeAccess {
        token: "tok".into(),
        ..Default::default()
    }
    .with_config_map(
        "team-a",
        json!({"metadata": {"name": "obj"}, "data": {"object.yaml": "kind: Widget\n"}}),
    );
    let p = pod(json!({
        "metadata": {"name": "engine-pod", "namespace": "team-a"},
        "spec": {
            "volumes": [{"name": "in", "configMap": {"name": "obj"}}, {"name": "out", "emptyDir": {}}],
            "containers": [{
                "name": "c", "image": IMAGE, "imagePullPolicy": "Never",
                "env": [{"name": "FOO", "value": "bar"}],
                "securityContext": {"runAsUser": 1000},
                "command": ["sh", "-c"],
                "args": ["cat /kratix/input/object.yaml; echo $FOO $(id -u); cat /var/run/secrets/kubernetes.io/serviceaccount/token; echo; echo made > /kratix/output/f"],
                "volumeMounts": [{"name": "in", "mountPath": "/kratix/input"}, {"name": "out", "mountPath": "/kratix/output"}]
            }]
        }
    }));
    let mut keep = cfg.clone();
    keep.keep_pod_dirs = true;
    let st = run_pod_once(&access, &keep, &p, RunOptions::default())
        .await
        .unwrap();
    let log = read(&cfg.log_path("team-a", "engine-pod", "c"));
    assert_eq!(st.phase.as_deref(), Some("Succeeded"), "{log}");
    assert_eq!(log, "kind: Widget\nbar 1000\ntok:team-a:default\n");
    assert_eq!(
        read(&cfg.volume_dir("team-a", "engine-pod", "out").join("f")),
        "made\n"
    );

    // A missing image with pull policy Never is not started: the container waits with the
    // kubelet's reason, naming the image and the remedies.
    let missing = pod(json!({
        "metadata": {"name": "engine-missing", "namespace": "team-a"},
        "spec": {"automountServiceAccountToken": false,
                 "containers": [{"name": "c", "image": "ghcr.io/example/not-there:v9", "imagePullPolicy": "Never"}]}
    }));
    let st = run_pod_once(&access, &cfg, &missing, RunOptions::default())
        .await
        .unwrap();
    let waiting = container(&st, false, "c")
        .state
        .as_ref()
        .and_then(|s| s.waiting.clone())
        .unwrap_or_else(|| panic!("container not waiting: {st:?}"));
    assert_eq!(
        waiting.reason.as_deref(),
        Some("ErrImageNeverPull"),
        "{st:?}"
    );
    let message = waiting.message.unwrap_or_default();
    assert!(message.contains("not-there"), "{message}");
    assert!(
        message.contains("map the image to a local command"),
        "{message}"
    );
}

/// At the active deadline the engine's container is stopped through the engine: killing
/// the `podman run` client alone would leave it running.
#[tokio::test]
async fn podman_stops_the_container_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let Some((cfg, conf)) = engine_runner(dir.path()) else {
        return;
    };
    let p = pod(json!({
        "metadata": {"name": "engine-slow", "namespace": "team-a"},
        "spec": {"automountServiceAccountToken": false,
                 "containers": [{"name": "c", "image": IMAGE, "imagePullPolicy": "Never",
                                 "command": ["sleep", "120"]}]}
    }));
    let opts = RunOptions {
        deadline: Some(tokio::time::Instant::now() + std::time::Duration::from_secs(3)),
        ..Default::default()
    };
    let st = run_pod_once(&FakeAccess::default(), &cfg, &p, opts)
        .await
        .unwrap();
    let terminated = container(&st, false, "c")
        .state
        .as_ref()
        .and_then(|s| s.terminated.clone())
        .unwrap_or_else(|| panic!("container not terminated: {st:?}"));
    assert_eq!(
        terminated.reason.as_deref(),
        Some("DeadlineExceeded"),
        "{st:?}"
    );
    let running = Command::new("podman")
        .env("CONTAINERS_CONF", &conf)
        .args([
            "ps",
            "--filter",
            "name=plinth-team-a-engine-slow-c",
            "--format",
            "{{.Names}}",
        ])
        .output()
        .unwrap();
    assert!(
        running.status.success(),
        "{}",
        String::from_utf8_lossy(&running.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&running.stdout).trim(),
        "",
        "the container outlived its deadline"
    );
}
