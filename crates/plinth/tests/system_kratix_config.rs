//! Kratix's `kratix_config` system test on a real
//! `plinth up`: the corpus `kratix` ConfigMap (`defaultBackoffLimit: 4`, a default
//! container securityContext with `runAsUserName: setInKratixConfig`) and the corpus
//! Promise `configtest`, whose pipeline 0 sets its own securityContext (`setInPromise`)
//! and `jobOptions.backoffLimit: 3`.
//!
//! Kratix reads the ConfigMap once at start-up; Plinth watches it, so the test applies it
//! *after* `plinth up` started and the first request shows it took effect without a
//! restart. The pipelines use the stock `busybox` image (host userland in the sandbox).

use crate::support;

use kube::api::ListParams;
use serde_json::Value;
use support::*;

fn jobs_of(p: &Plinth, pipeline: &str) -> Vec<Value> {
    let out = p.kubectl(&[
        "get",
        "jobs",
        "-n",
        "default",
        "-l",
        &format!("kratix.io/pipeline-name={pipeline}"),
        "-o",
        "json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    v["items"].as_array().cloned().unwrap_or_default()
}

fn user_container(pod_spec: &Value) -> Value {
    pod_spec["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "do-nothing-with-care")
        .cloned()
        .expect("user container in the pod spec")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn kratix_config_defaults_apply_without_restart() {
    let p = Plinth::up(&[]).await;
    let client = p.client().await;
    // Applied after start: the controllers pick it up from their watch.
    let cfg = support::corpus("kratix-system-tests/kratix-config.yaml");
    p.kubectl(&["apply", "-f", cfg.to_str().unwrap()]);

    let promises = promise_api(&client);
    create_available(
        &promises,
        &corpus_docs("kratix-system-tests/kratix-config/promise.yaml").remove(0),
        "configtest",
        90,
    )
    .await;
    let requests = dynamic(
        &client,
        "test.kratix.io",
        "v1alpha1",
        "Configtest",
        "configtest",
        Some("default"),
    );
    create(
        &requests,
        &corpus_docs("kratix-system-tests/kratix-config/resource-request.yaml").remove(0),
    )
    .await;
    wait_until(120, "example-config ConfigureWorkflowCompleted", || async {
        requests.get("example-config").await.is_ok_and(|o| {
            condition(&o, "ConfigureWorkflowCompleted").is_some_and(|c| c.0 == "True")
        })
    })
    .await;

    // Pipeline 0: its own backoffLimit and securityContext win over the config's.
    let j0 = jobs_of(&p, "resource-pipeline0");
    assert_eq!(j0.len(), 1, "one Job for pipeline 0");
    assert_eq!(j0[0]["spec"]["backoffLimit"], 3);
    let c0 = user_container(&j0[0]["spec"]["template"]["spec"]);
    assert_eq!(
        c0["securityContext"]["windowsOptions"]["runAsUserName"],
        "setInPromise"
    );
    // Pipeline 1: the config's defaults.
    let j1 = jobs_of(&p, "resource-pipeline1");
    assert_eq!(j1.len(), 1, "one Job for pipeline 1");
    assert_eq!(j1[0]["spec"]["backoffLimit"], 4);
    let c1 = user_container(&j1[0]["spec"]["template"]["spec"]);
    assert_eq!(
        c1["securityContext"]["windowsOptions"]["runAsUserName"],
        "setInKratixConfig"
    );

    // The Pods the runner created carry the same security contexts (what Kratix's test greps).
    let pods = dynamic(&client, "", "v1", "Pod", "pods", Some("default"));
    for (pipeline, want, not) in [
        ("resource-pipeline0", "setInPromise", "setInKratixConfig"),
        ("resource-pipeline1", "setInKratixConfig", "setInPromise"),
    ] {
        let list = pods
            .list(&ListParams::default().labels(&format!("kratix.io/pipeline-name={pipeline}")))
            .await
            .unwrap();
        assert!(!list.items.is_empty(), "a Pod for {pipeline}");
        let user = user_container(&list.items[0].data["spec"]);
        let text = user.to_string();
        assert!(
            text.contains(want) && !text.contains(not),
            "{pipeline}: {text}"
        );
    }

    // A later change of the ConfigMap applies to the next run, still without a restart.
    let patch = r#"{"data":{"config":"workflows:\n  jobOptions:\n    defaultBackoffLimit: 2\n"}}"#;
    p.kubectl(&[
        "patch",
        "configmap",
        "kratix",
        "-n",
        "kratix-platform-system",
        "--type",
        "merge",
        "-p",
        patch,
    ]);
    // Give the watch a moment by waiting for the value through the API, then re-run.
    wait_until(30, "ConfigMap updated", || async {
        p.kubectl(&[
            "get",
            "configmap",
            "kratix",
            "-n",
            "kratix-platform-system",
            "-o",
            "jsonpath={.data.config}",
        ])
        .contains("defaultBackoffLimit: 2")
    })
    .await;
    let mut attempt = 0;
    wait_until(120, "a pipeline 1 Job with backoffLimit 2", || {
        attempt += 1;
        // Each manual reconciliation re-runs the workflow with the configuration in force.
        if attempt % 40 == 1 {
            p.kubectl(&[
                "label",
                "configtest",
                "example-config",
                "-n",
                "default",
                "kratix.io/manual-reconciliation=true",
                "--overwrite",
            ]);
        }
        let jobs = jobs_of(&p, "resource-pipeline1");
        async move { jobs.iter().any(|j| j["spec"]["backoffLimit"] == 2) }
    })
    .await;
    let j0 = jobs_of(&p, "resource-pipeline0");
    assert!(
        j0.iter().all(|j| j["spec"]["backoffLimit"] == 3),
        "pipeline 0 keeps its own limit"
    );
}
