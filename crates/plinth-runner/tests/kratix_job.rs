//! A Pod in the exact shape Kratix gives pipeline Jobs, with the user
//! container taken from a corpus Promise, run through the executor: reader → user container
//! → work-writer as init containers, status-writer as the container, `/kratix` volumes.

use crate::common;

use common::*;
use plinth_runner::{EngineMode, RunOptions, RunnerConfig, SandboxMode, run_pod_once};
use serde_json::json;

const CORPUS_PROMISE: &str = concat!(
    env!("PLINTH_CORPUS_DIR"),
    "/kratix-system-tests/destination/promise.yaml"
);

#[tokio::test]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn kratix_shaped_promise_pipeline_runs_end_to_end() {
    if !have_bwrap("kratix_shaped_promise_pipeline_runs_end_to_end") {
        return;
    }
    if plinth_runner::config::find_on_path("kubectl").is_none() {
        println!(
            "SKIPPED: kratix_shaped_promise_pipeline_runs_end_to_end: kubectl is not installed"
        );
        return;
    }
    let text = match std::fs::read_to_string(CORPUS_PROMISE) {
        Ok(t) => t,
        Err(e) => panic!("corpus Promise {CORPUS_PROMISE}: {e}"),
    };
    let promise: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    let user_containers =
        promise["spec"]["workflows"]["promise"]["configure"][0]["spec"]["containers"].clone();
    assert_eq!(
        user_containers[0]["image"],
        "ghcr.io/syntasso/kratix-pipeline-utility:v0.0.1"
    );

    let dir = tempfile::tempdir().unwrap();
    // kubectl parses the kubeconfig's CA even for client-side dry runs: use a real PEM.
    let ca = std::fs::read_to_string("/etc/ssl/certs/ca-certificates.crt").unwrap_or_default();
    let first_cert = ca
        .split_inclusive("-----END CERTIFICATE-----\n")
        .next()
        .unwrap_or("")
        .to_string();
    let mut cfg = RunnerConfig::new(dir.path().join("data"), "127.0.0.1", 6443, first_cert);
    cfg.engine = EngineMode::Disabled;
    cfg.sandbox = SandboxMode::Bwrap;
    // Stand-in for `plinth pipeline-adapter`: the reader writes object.yaml, the
    // work-writer shows what the pipeline produced, the status-writer reports its env.
    let exe = dir.path().join("bin/plinth");
    write_script(
        &exe,
        r#"#!/bin/sh
shift
case "$1" in
  reader) echo "kind: Promise" > /kratix/input/object.yaml; echo "reader for $KRATIX_PROMISE_NAME" ;;
  work-creator) echo "$*"; cat /work-creator-files/input/ns.yaml | grep -E '^(kind|  name):'; cat /work-creator-files/kratix-system/promise-scheduling ;;
  update-status) echo "status-writer IS_LAST_PIPELINE=$IS_LAST_PIPELINE" ;;
esac
"#,
    );
    cfg.plinth_exe = exe;

    let kratix_env = json!([
        {"name": "KRATIX_WORKFLOW_ACTION", "value": "configure"},
        {"name": "KRATIX_WORKFLOW_TYPE", "value": "promise"},
        {"name": "KRATIX_PROMISE_NAME", "value": "aggregate-promise"},
        {"name": "KRATIX_PIPELINE_NAME", "value": "promise"},
        {"name": "KRATIX_OBJECT_KIND", "value": "Promise"},
        {"name": "KRATIX_OBJECT_GROUP", "value": "platform.kratix.io"},
        {"name": "KRATIX_OBJECT_VERSION", "value": "v1alpha1"},
        {"name": "KRATIX_OBJECT_NAME", "value": "aggregate-promise"},
        {"name": "KRATIX_OBJECT_NAMESPACE", "value": ""},
        {"name": "KRATIX_CRD_PLURAL", "value": "promises"},
        {"name": "KRATIX_CLUSTER_SCOPED", "value": "true"}
    ]);
    let sc = json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": true,
                    "seccompProfile": {"type": "RuntimeDefault"}, "privileged": false});
    let adapter = "ghcr.io/syntasso/kratix-platform-pipeline-adapter:v0.1.0";
    let mut user = user_containers[0].clone();
    user["env"] = kratix_env.clone();
    user["volumeMounts"] = json!([
        {"name": "shared-input", "mountPath": "/kratix/input", "readOnly": true},
        {"name": "shared-output", "mountPath": "/kratix/output"},
        {"name": "shared-metadata", "mountPath": "/kratix/metadata"}
    ]);
    let mut status_env = kratix_env.as_array().unwrap().clone();
    status_env.push(json!({"name": "IS_LAST_PIPELINE", "value": "true"}));
    let access = FakeAccess::default().with_config_map(
        "kratix-platform-system",
        json!({"metadata": {"name": "destination-selectors-promise"},
               "data": {"promise-scheduling": "- matchLabels:\n    target: aggregated-yaml\n  source: promise\n"}}),
    );
    let p = pod(json!({
        "metadata": {"name": "kratix-aggregate-promise-promise-abcde-fghij", "namespace": "kratix-platform-system",
                     "labels": {"kratix.io/promise-name": "aggregate-promise", "kratix.io/workflow-type": "promise",
                                "kratix.io/workflow-action": "configure", "kratix.io/pipeline-name": "promise"}},
        "spec": {
            "serviceAccountName": "aggregate-promise-promise-configure-promise",
            "restartPolicy": "OnFailure",
            "volumes": [
                {"name": "promise-scheduling", "configMap": {"name": "destination-selectors-promise",
                    "items": [{"key": "promise-scheduling", "path": "promise-scheduling"}]}},
                {"name": "shared-input", "emptyDir": {}},
                {"name": "shared-output", "emptyDir": {}},
                {"name": "shared-metadata", "emptyDir": {}}
            ],
            "initContainers": [
                {"name": "reader", "image": adapter, "command": ["/bin/pipeline-adapter"], "args": ["reader"],
                 "env": kratix_env, "securityContext": sc,
                 "volumeMounts": [{"name": "shared-input", "mountPath": "/kratix/input"},
                                  {"name": "shared-output", "mountPath": "/kratix/output"}]},
                user,
                {"name": "work-writer", "image": adapter, "command": ["/bin/pipeline-adapter"],
                 "args": ["work-creator", "--input-directory", "/work-creator-files", "--promise-name", "aggregate-promise",
                          "--pipeline-name", "promise", "--namespace", "kratix-platform-system", "--workflow-type", "promise"],
                 "securityContext": sc,
                 "volumeMounts": [{"name": "shared-output", "mountPath": "/work-creator-files/input"},
                                  {"name": "shared-metadata", "mountPath": "/work-creator-files/metadata"},
                                  {"name": "promise-scheduling", "mountPath": "/work-creator-files/kratix-system"}]}
            ],
            "containers": [
                {"name": "status-writer", "image": adapter, "command": ["/bin/pipeline-adapter"], "args": ["update-status"],
                 "env": status_env, "securityContext": sc,
                 "volumeMounts": [{"name": "shared-metadata", "mountPath": "/work-creator-files/metadata"}]}
            ]
        }
    }));
    let st = run_pod_once(&access, &cfg, &p, RunOptions::default())
        .await
        .unwrap();
    let ns = "kratix-platform-system";
    let name = "kratix-aggregate-promise-promise-abcde-fghij";
    let log = |c: &str| read(&cfg.log_path(ns, name, c));
    assert_eq!(
        st.phase.as_deref(),
        Some("Succeeded"),
        "user container log:\n{}",
        log("do-commands")
    );
    assert_eq!(log("reader"), "reader for aggregate-promise\n");
    assert_eq!(
        log("work-writer"),
        "work-creator --input-directory /work-creator-files --promise-name aggregate-promise --pipeline-name promise \
         --namespace kratix-platform-system --workflow-type promise\nkind: Namespace\n  name: aggregate-test-ns\n\
         - matchLabels:\n    target: aggregated-yaml\n  source: promise\n"
    );
    assert_eq!(
        log("status-writer"),
        "status-writer IS_LAST_PIPELINE=true\n"
    );
    for c in ["reader", "do-commands", "work-writer"] {
        assert_eq!(exit_code(container(&st, true, c)), 0);
    }
}
