//! Executor tests: Pods built by hand, run with fixed objects instead of an API server.

use crate::common;

use common::*;
use plinth_runner::{EngineMode, RunOptions, RunnerConfig, SandboxMode, run_pod_once};
use serde_json::json;

fn config(dir: &std::path::Path) -> RunnerConfig {
    let mut c = RunnerConfig::new(
        dir.join("data"),
        "127.0.0.1",
        6443,
        "-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n",
    );
    c.engine = EngineMode::Disabled;
    c.sandbox = SandboxMode::Bwrap;
    c
}

#[tokio::test]
async fn init_container_output_is_read_by_the_next_container() {
    if !have_bwrap("init_container_output_is_read_by_the_next_container") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let p = pod(json!({
        "metadata": {"name": "pipe-abcde", "namespace": "team-a"},
        "spec": {
            "restartPolicy": "Never",
            "volumes": [{"name": "shared-output", "emptyDir": {}}],
            "initContainers": [{
                "name": "writer", "image": "busybox",
                "command": ["sh", "-c"], "args": ["echo hello from init > /kratix/output/greeting; echo wrote"],
                "volumeMounts": [{"name": "shared-output", "mountPath": "/kratix/output"}]
            }],
            "containers": [{
                "name": "reader", "image": "docker.io/library/busybox:1.36",
                "command": ["sh", "-c", "cat /kratix/output/greeting; touch /kratix/input-x 2>/dev/null && echo root-writable || echo root-ro"],
                "volumeMounts": [{"name": "shared-output", "mountPath": "/kratix/output", "readOnly": true}]
            }]
        }
    }));
    let (tx, rx) = tokio::sync::watch::channel(Default::default());
    let st = run_pod_once(
        &FakeAccess::default(),
        &cfg,
        &p,
        RunOptions {
            deadline: None,
            status: Some(tx),
            stop: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(st.phase.as_deref(), Some("Succeeded"), "{st:?}");
    assert_eq!(exit_code(container(&st, true, "writer")), 0);
    let reader = container(&st, false, "reader");
    let term = reader.state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!(term.reason.as_deref(), Some("Completed"));
    assert!(term.started_at.is_some() && term.finished_at.is_some());
    assert_eq!(rx.borrow().phase.as_deref(), Some("Succeeded"));
    assert_eq!(
        read(&cfg.log_path("team-a", "pipe-abcde", "writer")),
        "wrote\n"
    );
    assert_eq!(
        read(&cfg.log_path("team-a", "pipe-abcde", "reader")),
        "hello from init\nroot-writable\n"
    );
    // Volumes and tokens are removed after the run; logs stay.
    assert!(!cfg.pod_dir("team-a", "pipe-abcde").exists());
}

#[tokio::test]
async fn env_and_env_from_config_map_and_secret() {
    if !have_bwrap("env_and_env_from_config_map_and_secret") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let access = FakeAccess::default()
        .with_config_map(
            "team-a",
            json!({"metadata": {"name": "settings"}, "data": {"COLOUR": "blue", "SIZE": "3"}}),
        )
        .with_secret(
            "team-a",
            json!({"metadata": {"name": "creds"}, "data": {"PASSWORD": "czNjcjN0"}}),
        );
    let p = pod(json!({
        "metadata": {"name": "env-pod", "namespace": "team-a", "labels": {"app": "w"}, "annotations": {"kratix.io/trace-parent": "00-abc"}},
        "spec": {
            "containers": [{
                "name": "show", "image": "alpine",
                "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}, {"secretRef": {"name": "creds"}}],
                "env": [
                    {"name": "GREETING", "value": "hi-$(CFG_COLOUR)"},
                    {"name": "ONE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "SIZE"}}},
                    {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "PASSWORD"}}},
                    {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                    {"name": "TRACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['kratix.io/trace-parent']"}}},
                    {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                    {"name": "MISSING", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "x", "optional": true}}}
                ],
                "workingDir": "/tmp",
                "command": ["sh", "-c", "echo \"$GREETING $ONE $PW $POD $NS $TRACE $APP ${MISSING:-unset} $CFG_SIZE $PASSWORD\"; echo '$(GREETING)' '$$(GREETING)'; pwd; echo $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"]
            }]
        }
    }));
    let st = run_pod_once(&access, &cfg, &p, RunOptions::default())
        .await
        .unwrap();
    assert_eq!(st.phase.as_deref(), Some("Succeeded"), "{st:?}");
    assert_eq!(
        read(&cfg.log_path("team-a", "env-pod", "show")),
        "hi-blue 3 s3cr3t env-pod team-a 00-abc w unset 3 s3cr3t\nhi-blue $(GREETING)\n/tmp\n127.0.0.1:6443\n"
    );
}

#[tokio::test]
async fn missing_config_map_key_fails_the_pod_with_create_container_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let p = pod(json!({
        "metadata": {"name": "bad-env", "namespace": "team-a"},
        "spec": {"containers": [{
            "name": "c", "image": "busybox", "command": ["true"],
            "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "k"}}}]
        }]}
    }));
    let st = run_pod_once(&FakeAccess::default(), &cfg, &p, RunOptions::default())
        .await
        .unwrap();
    assert_eq!(st.phase.as_deref(), Some("Failed"));
    let w = container(&st, false, "c")
        .state
        .as_ref()
        .unwrap()
        .waiting
        .as_ref()
        .unwrap();
    assert_eq!(w.reason.as_deref(), Some("CreateContainerConfigError"));
    assert!(
        w.message
            .as_ref()
            .unwrap()
            .contains("configmap \"absent\" not found"),
        "{w:?}"
    );
}

#[tokio::test]
async fn failing_container_reports_exit_code_and_keeps_logs() {
    if !have_bwrap("failing_container_reports_exit_code_and_keeps_logs") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let p = pod(json!({
        "metadata": {"name": "fails", "namespace": "team-a"},
        "spec": {
            "initContainers": [
                {"name": "first", "image": "busybox", "command": ["sh", "-c", "echo about to fail >&2; exit 3"]},
                {"name": "second", "image": "busybox", "command": ["sh", "-c", "echo must not run"]}
            ],
            "containers": [{"name": "main", "image": "busybox", "command": ["true"]}]
        }
    }));
    let st = run_pod_once(&FakeAccess::default(), &cfg, &p, RunOptions::default())
        .await
        .unwrap();
    assert_eq!(st.phase.as_deref(), Some("Failed"));
    let first = container(&st, true, "first")
        .state
        .as_ref()
        .unwrap()
        .terminated
        .as_ref()
        .unwrap();
    assert_eq!(first.exit_code, 3);
    assert_eq!(first.reason.as_deref(), Some("Error"));
    let second = container(&st, true, "second").state.as_ref().unwrap();
    assert_eq!(
        second.waiting.as_ref().unwrap().reason.as_deref(),
        Some("PodInitializing")
    );
    assert_eq!(
        read(&cfg.log_path("team-a", "fails", "first")),
        "about to fail\n"
    );
    assert!(!cfg.log_path("team-a", "fails", "second").exists());
}

#[tokio::test]
async fn image_without_engine_or_map_fails_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.image_map = Some(dir.path().join("images.yaml"));
    std::fs::write(dir.path().join("images.yaml"), "images: []\n").unwrap();
    let p = pod(json!({
        "metadata": {"name": "noimg", "namespace": "team-a"},
        "spec": {"containers": [{"name": "c", "image": "ghcr.io/x/y:v1"}]}
    }));
    let st = run_pod_once(&FakeAccess::default(), &cfg, &p, RunOptions::default())
        .await
        .unwrap();
    assert_eq!(st.phase.as_deref(), Some("Failed"));
    assert_eq!(st.reason.as_deref(), Some("ErrImagePull"));
    let w = container(&st, false, "c")
        .state
        .as_ref()
        .unwrap()
        .waiting
        .as_ref()
        .unwrap();
    assert_eq!(w.reason.as_deref(), Some("ErrImagePull"));
    assert_eq!(
        w.message.as_deref().unwrap(),
        format!(
            "image \"ghcr.io/x/y:v1\" cannot be run: no container engine (podman/docker) found and no image-map entry matches; add one to {} or install podman",
            dir.path().join("images.yaml").display()
        )
    );
}

#[tokio::test]
async fn image_map_entry_runs_a_local_command() {
    if !have_bwrap("image_map_entry_runs_a_local_command") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    let scripts = dir.path().join("scripts");
    let script = scripts.join("configure.sh");
    write_script(
        &script,
        "#!/bin/sh\necho \"configure $* level=$LOG_LEVEL in $(pwd)\"\ncat /kratix/input/object.yaml > /kratix/output/out.yaml\n",
    );
    let map = dir.path().join("images.yaml");
    std::fs::write(
        &map,
        "images:\n  - image: \"ghcr.io/syntasso/kratix-marketplace/redis-configure-pipeline:*\"\n    command: [scripts/configure.sh, --mode]\n    workingDir: /kratix\n    env: {LOG_LEVEL: debug}\n",
    )
    .unwrap();
    cfg.image_map = Some(map);
    let access = FakeAccess::default().with_config_map(
        "team-a",
        json!({"metadata": {"name": "obj"}, "data": {"object.yaml": "kind: Redis\n"}}),
    );
    let p = pod(json!({
        "metadata": {"name": "mapped", "namespace": "team-a"},
        "spec": {
            "volumes": [{"name": "input", "configMap": {"name": "obj"}}, {"name": "out", "emptyDir": {}}],
            "containers": [{
                "name": "redis", "image": "ghcr.io/syntasso/kratix-marketplace/redis-configure-pipeline:v0.1.0",
                "args": ["fast"],
                "volumeMounts": [{"name": "input", "mountPath": "/kratix/input"}, {"name": "out", "mountPath": "/kratix/output"}]
            }]
        }
    }));
    let mut keep = cfg.clone();
    keep.keep_pod_dirs = true;
    let st = run_pod_once(&access, &keep, &p, RunOptions::default())
        .await
        .unwrap();
    assert_eq!(
        st.phase.as_deref(),
        Some("Succeeded"),
        "{st:?} {}",
        read(&cfg.log_path("team-a", "mapped", "redis"))
    );
    assert_eq!(
        read(&cfg.log_path("team-a", "mapped", "redis")),
        "configure --mode fast level=debug in /kratix\n"
    );
    assert_eq!(
        read(&cfg.volume_dir("team-a", "mapped", "out").join("out.yaml")),
        "kind: Redis\n"
    );
}

#[tokio::test]
async fn service_account_identity_is_mounted_and_in_kubeconfig() {
    if !have_bwrap("service_account_identity_is_mounted_and_in_kubeconfig") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let access = FakeAccess {
        token: "tok".into(),
        ..Default::default()
    };
    let p = pod(json!({
        "metadata": {"name": "sa-pod", "namespace": "team-b"},
        "spec": {
            "serviceAccountName": "pipeline-sa",
            "containers": [{"name": "c", "image": "bash", "command": ["sh", "-c",
                "d=/var/run/secrets/kubernetes.io/serviceaccount; cat $d/token; echo; cat $d/namespace; echo; head -1 $d/ca.crt; grep -c tok:team-b:pipeline-sa \"$KUBECONFIG\""]}]
        }
    }));
    let st = run_pod_once(&access, &cfg, &p, RunOptions::default())
        .await
        .unwrap();
    assert_eq!(
        st.phase.as_deref(),
        Some("Succeeded"),
        "{}",
        read(&cfg.log_path("team-b", "sa-pod", "c"))
    );
    assert_eq!(
        read(&cfg.log_path("team-b", "sa-pod", "c")),
        "tok:team-b:pipeline-sa\nteam-b\n-----BEGIN CERTIFICATE-----\n1\n"
    );
}

#[tokio::test]
async fn volumes_secret_items_read_only_and_security_context() {
    if !have_bwrap("volumes_secret_items_read_only_and_security_context") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let access = FakeAccess::default()
        .with_secret(
            "team-a",
            json!({"metadata": {"name": "s"}, "data": {"a": "QQ==", "b": "Qg=="}}),
        )
        .with_config_map(
            "team-a",
            json!({"metadata": {"name": "c"}, "data": {"x": "X"}}),
        );
    let p = pod(json!({
        "metadata": {"name": "vols", "namespace": "team-a"},
        "spec": {
            "securityContext": {"runAsUser": 1000},
            "volumes": [
                {"name": "sec", "secret": {"secretName": "s", "items": [{"key": "a", "path": "nested/a.txt"}]}},
                {"name": "proj", "projected": {"sources": [{"configMap": {"name": "c"}}, {"downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}},
                {"name": "scratch", "emptyDir": {}}
            ],
            "containers": [{
                "name": "c", "image": "debian:12",
                "securityContext": {"readOnlyRootFilesystem": true},
                "command": ["sh", "-c", "id -u; cat /s/nested/a.txt; ls /s; cat /p/x /p/name; echo; touch /s/new 2>/dev/null || echo secret-ro; echo ok > /scratch/sub/f && cat /scratch/sub/f; touch /newfile 2>/dev/null || echo root-ro"],
                "volumeMounts": [
                    {"name": "sec", "mountPath": "/s"},
                    {"name": "proj", "mountPath": "/p"},
                    {"name": "scratch", "mountPath": "/scratch/sub", "subPath": "deep"}
                ]
            }]
        }
    }));
    let st = run_pod_once(&access, &cfg, &p, RunOptions::default())
        .await
        .unwrap();
    assert_eq!(
        st.phase.as_deref(),
        Some("Succeeded"),
        "{}",
        read(&cfg.log_path("team-a", "vols", "c"))
    );
    assert_eq!(
        read(&cfg.log_path("team-a", "vols", "c")),
        "1000\nAnested\nXvols\nsecret-ro\nok\nroot-ro\n"
    );
}

#[tokio::test]
async fn deadline_kills_the_running_container() {
    if !have_bwrap("deadline_kills_the_running_container") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let p = pod(json!({
        "metadata": {"name": "slow", "namespace": "team-a"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "30"]}]}
    }));
    let opts = RunOptions {
        deadline: Some(tokio::time::Instant::now() + std::time::Duration::from_millis(300)),
        status: None,
        stop: None,
    };
    let st = run_pod_once(&FakeAccess::default(), &cfg, &p, opts)
        .await
        .unwrap();
    assert_eq!(st.phase.as_deref(), Some("Failed"));
    assert_eq!(st.reason.as_deref(), Some("DeadlineExceeded"));
    let t = container(&st, false, "c")
        .state
        .as_ref()
        .unwrap()
        .terminated
        .as_ref()
        .unwrap();
    assert_eq!(t.exit_code, 137);
}

#[tokio::test]
async fn host_mode_exposes_mounts_under_the_container_root() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.sandbox = SandboxMode::None;
    let p = pod(json!({
        "metadata": {"name": "hosted", "namespace": "team-a"},
        "spec": {
            "automountServiceAccountToken": false,
            "volumes": [{"name": "out", "emptyDir": {}}],
            "containers": [{"name": "c", "image": "busybox", "workingDir": "/kratix/output",
                "command": ["sh", "-c", "echo data > $PLINTH_CONTAINER_ROOT/kratix/output/f; cat f; [ -z \"$KUBECONFIG\" ] && echo no-identity"],
                "volumeMounts": [{"name": "out", "mountPath": "/kratix/output"}]}]
        }
    }));
    let st = run_pod_once(&FakeAccess::default(), &cfg, &p, RunOptions::default())
        .await
        .unwrap();
    assert_eq!(
        st.phase.as_deref(),
        Some("Succeeded"),
        "{}",
        read(&cfg.log_path("team-a", "hosted", "c"))
    );
    assert_eq!(
        read(&cfg.log_path("team-a", "hosted", "c")),
        "data\nno-identity\n"
    );
}

#[tokio::test]
async fn mount_point_under_a_read_only_host_directory() {
    if !have_bwrap("mount_point_under_a_read_only_host_directory") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let access = FakeAccess::default().with_config_map(
        "team-a",
        json!({"metadata": {"name": "c"}, "data": {"k": "v"}}),
    );
    let p = pod(json!({
        "metadata": {"name": "etc-mount", "namespace": "team-a"},
        "spec": {
            "volumes": [{"name": "cfg", "configMap": {"name": "c"}}, {"name": "out", "emptyDir": {}}],
            "containers": [{"name": "c", "image": "busybox",
                "command": ["sh", "-c", "cat /etc/plinth-test/cfg/k; echo; test -f /etc/hostname && echo host-etc-visible; echo x > /usr/local/plinth-out/f && cat /usr/local/plinth-out/f"],
                "volumeMounts": [{"name": "cfg", "mountPath": "/etc/plinth-test/cfg"}, {"name": "out", "mountPath": "/usr/local/plinth-out"}]}]
        }
    }));
    let st = run_pod_once(&access, &cfg, &p, RunOptions::default())
        .await
        .unwrap();
    assert_eq!(
        st.phase.as_deref(),
        Some("Succeeded"),
        "{}",
        read(&cfg.log_path("team-a", "etc-mount", "c"))
    );
    assert_eq!(
        read(&cfg.log_path("team-a", "etc-mount", "c")),
        "v\nhost-etc-visible\nx\n"
    );
    assert!(
        !std::path::Path::new("/etc/plinth-test").exists(),
        "nothing is created on the host"
    );
}

#[tokio::test]
async fn adapter_image_and_kratix_entrypoint_run_plinth_pipeline_adapter() {
    if !have_bwrap("adapter_image_and_kratix_entrypoint_run_plinth_pipeline_adapter") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    // A stand-in for the plinth executable that shows how it was called.
    let exe = dir.path().join("bin/plinth");
    write_script(
        &exe,
        "#!/bin/sh\necho \"$(id -u) $*\"\necho ok > /kratix/output/by-adapter\n",
    );
    cfg.plinth_exe = exe;
    // Kratix's containers run with this security context.
    let kratix_sc = json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": true,
                           "seccompProfile": {"type": "RuntimeDefault"}, "privileged": false});
    let p = pod(json!({
        "metadata": {"name": "adapter", "namespace": "team-a"},
        "spec": {
            "volumes": [{"name": "shared-output", "emptyDir": {}}],
            "initContainers": [{"name": "reader", "image": "ghcr.io/syntasso/kratix-platform-pipeline-adapter:v0.5.0",
                "command": ["/bin/pipeline-adapter"], "args": ["reader"], "securityContext": kratix_sc,
                "volumeMounts": [{"name": "shared-output", "mountPath": "/kratix/output"}]}],
            "containers": [{"name": "status-writer", "image": plinth_runner::DEFAULT_ADAPTER_IMAGE,
                "args": ["update-status"], "securityContext": kratix_sc,
                "volumeMounts": [{"name": "shared-output", "mountPath": "/kratix/output"}]}]
        }
    }));
    let st = run_pod_once(&FakeAccess::default(), &cfg, &p, RunOptions::default())
        .await
        .unwrap();
    assert_eq!(
        st.phase.as_deref(),
        Some("Succeeded"),
        "{}",
        read(&cfg.log_path("team-a", "adapter", "reader"))
    );
    assert_eq!(
        read(&cfg.log_path("team-a", "adapter", "reader")),
        "65534 pipeline-adapter reader\n"
    );
    assert_eq!(
        read(&cfg.log_path("team-a", "adapter", "status-writer")),
        "65534 pipeline-adapter update-status\n"
    );
}

#[tokio::test]
async fn runner_default_security_context_applies_to_every_container() {
    if !have_bwrap("runner_default_security_context_applies_to_every_container") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.default_security_context = Some(
        serde_json::from_value(json!({"runAsUser": 4242, "readOnlyRootFilesystem": true})).unwrap(),
    );
    let p = pod(json!({
        "metadata": {"name": "defaults", "namespace": "team-a"},
        "spec": {"containers": [
            {"name": "plain", "image": "busybox", "command": ["sh", "-c", "id -u; touch /x 2>/dev/null || echo ro"]},
            {"name": "own", "image": "busybox", "securityContext": {"runAsUser": 7}, "command": ["id", "-u"]}
        ]}
    }));
    let st = run_pod_once(&FakeAccess::default(), &cfg, &p, RunOptions::default())
        .await
        .unwrap();
    assert_eq!(st.phase.as_deref(), Some("Succeeded"));
    assert_eq!(
        read(&cfg.log_path("team-a", "defaults", "plain")),
        "4242\nro\n"
    );
    assert_eq!(read(&cfg.log_path("team-a", "defaults", "own")), "7\n");
}

#[tokio::test]
async fn network_off_leaves_only_loopback() {
    if !have_bwrap("network_off_leaves_only_loopback") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.network = false;
    let p = pod(json!({
        "metadata": {"name": "nonet", "namespace": "team-a"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "ls /sys/class/net 2>/dev/null || cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '"]}]}
    }));
    let st = run_pod_once(&FakeAccess::default(), &cfg, &p, RunOptions::default())
        .await
        .unwrap();
    assert_eq!(st.phase.as_deref(), Some("Succeeded"));
    assert_eq!(read(&cfg.log_path("team-a", "nonet", "c")), "lo\n");
}

#[tokio::test]
async fn sandbox_hides_the_data_dir_and_home_directories() {
    if !have_bwrap("sandbox_hides_the_data_dir_and_home_directories") {
        return;
    }
    // A data directory outside /tmp (which is private anyway), like `plinth up` uses.
    let base = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(base).unwrap();
    let dir = tempfile::tempdir_in(base).unwrap();
    let cfg = config(dir.path());
    std::fs::create_dir_all(&cfg.data_dir).unwrap();
    std::fs::write(cfg.data_dir.join("admin.token"), "secret").unwrap();
    let p = pod(json!({
        "metadata": {"name": "hidden", "namespace": "team-a"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c",
            "ls -A /root | wc -l; cat $0/admin.token 2>/dev/null || echo no-token; test -r \"$KUBECONFIG\" && echo kubeconfig-visible",
            cfg.data_dir.to_str().unwrap()]}]}
    }));
    let st = run_pod_once(&FakeAccess::default(), &cfg, &p, RunOptions::default())
        .await
        .unwrap();
    let log = read(&cfg.log_path("team-a", "hidden", "c"));
    assert_eq!(st.phase.as_deref(), Some("Succeeded"), "{log}");
    assert_eq!(log, "0\nno-token\nkubeconfig-visible\n");
}

/// A subPath whose directory an earlier container replaced with a link out of its volume
/// is not bound (binding resolves links on the host); a volume name that is not a DNS
/// label never becomes a directory.
#[tokio::test]
async fn mount_sources_stay_inside_their_volume() {
    if !have_bwrap("mount_sources_stay_inside_their_volume") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let p = pod(json!({
        "metadata": {"name": "subpath", "namespace": "team-a"},
        "spec": {
            "volumes": [{"name": "v", "emptyDir": {}}],
            "initContainers": [{"name": "swap", "image": "busybox",
                "command": ["sh", "-c", "rm -rf /v/sub && ln -s / /v/sub"],
                "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
            "containers": [{"name": "reader", "image": "busybox", "command": ["ls", "/data"],
                "volumeMounts": [{"name": "v", "mountPath": "/data", "subPath": "sub"}]}]
        }
    }));
    let st = run_pod_once(&FakeAccess::default(), &cfg, &p, RunOptions::default())
        .await
        .unwrap();
    assert_eq!(st.phase.as_deref(), Some("Failed"), "{st:?}");
    let reader = container(&st, false, "reader");
    let term = reader.state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!(term.reason.as_deref(), Some("StartError"));
    assert!(
        term.message.as_deref().unwrap_or("").contains("/data"),
        "{term:?}"
    );

    let bad = pod(json!({
        "metadata": {"name": "badname", "namespace": "team-a"},
        "spec": {
            "volumes": [{"name": "../../escape", "emptyDir": {}}],
            "containers": [{"name": "c", "image": "busybox", "command": ["true"]}]
        }
    }));
    let st = run_pod_once(&FakeAccess::default(), &cfg, &bad, RunOptions::default())
        .await
        .unwrap();
    assert_eq!(st.phase.as_deref(), Some("Failed"), "{st:?}");
    assert!(
        st.message.as_deref().unwrap_or("").contains("RFC 1123"),
        "{:?}",
        st.message
    );
    assert!(!cfg.data_dir.join("pods/escape").exists());
    assert!(!cfg.data_dir.join("escape").exists());
}
