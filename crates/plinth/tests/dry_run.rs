//! DryRun on a real `plinth up`: with `featureFlags.dryRun` off a DryRun is told so by
//! its `Completed` condition; turning the flag on in the `kratix` ConfigMap runs the
//! request's configure workflow against the proposed spec (the pipeline sees the real
//! request's name), lists its output files in the DryRun's status and schedules nothing:
//! the state store holds only the real request's output, unchanged.

use crate::support;

use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::*;

fn promise() -> Value {
    let script = "size=$(sed -n 's/^ *size: *//p' /kratix/input/object.yaml); name=$(sed -n 's/^  name: *//p' /kratix/input/object.yaml | head -1); printf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: %s\\n  namespace: default\\ndata:\\n  size: %s\\n' \"$name\" \"$size\" > /kratix/output/configmap.yaml";
    json!({
        "apiVersion": "platform.kratix.io/v1alpha1", "kind": "Promise", "metadata": {"name": "previews"},
        "spec": {
            "api": {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "previews.test.kratix.io"},
                "spec": {"group": "test.kratix.io", "scope": "Namespaced", "names": {"kind": "Preview", "plural": "previews", "singular": "preview"},
                    "versions": [{"name": "v1alpha1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "string"}}}}}}}]}},
            "workflows": {"resource": {"configure": [{"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Pipeline", "metadata": {"name": "render"},
                "spec": {"jobOptions": {"backoffLimit": 0}, "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c"], "args": [script]}]}}]}}
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_lists_outputs_without_scheduling_them_and_only_when_enabled() {
    let p = Plinth::up(&[]).await;
    let client = p.client().await;
    let promises = promise_api(&client);
    let previews = dynamic(
        &client,
        "test.kratix.io",
        "v1alpha1",
        "Preview",
        "previews",
        Some("default"),
    );
    let dry_runs = dynamic(
        &client,
        "platform.kratix.io",
        "v1alpha1",
        "DryRun",
        "dryruns",
        Some("default"),
    );
    create_available(&promises, &promise(), "previews", 90).await;
    create(&previews, &json!({"apiVersion": "test.kratix.io/v1alpha1", "kind": "Preview", "metadata": {"name": "real", "namespace": "default"}, "spec": {"size": "small"}})).await;
    let repo = p.repo();
    let real_file = || {
        repo_files(&repo, "main")
            .into_iter()
            .find(|f| f.ends_with("/previews/real/render/5058f/configmap.yaml"))
    };
    wait_until(120, "the real request's output", || async {
        real_file().is_some()
    })
    .await;
    let real_path = real_file().unwrap();
    assert!(
        repo_file(&repo, "main", &real_path)
            .unwrap()
            .contains("size: small")
    );

    // Off by default: the DryRun says how to turn it on.
    create(&dry_runs, &json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "DryRun", "metadata": {"name": "bigger", "namespace": "default"},
        "spec": {"promiseRef": {"name": "previews"}, "resourceRequestRef": {"name": "real"}, "resource": {"size": "large"}}})).await;
    wait_until(60, "DryRun disabled", || async {
        dry_runs
            .get("bigger")
            .await
            .is_ok_and(|o| condition(&o, "Completed").is_some_and(|c| c.1 == "DryRunDisabled"))
    })
    .await;
    let (status, _, message) =
        condition(&dry_runs.get("bigger").await.unwrap(), "Completed").unwrap();
    assert_eq!(status, "False");
    assert!(message.contains("featureFlags.dryRun"), "{message}");

    // On: the workflow runs with the proposed spec and the real request's name.
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "kratix-platform-system");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kratix", "namespace": "kratix-platform-system"},
        "data": {"config": "featureFlags:\n  dryRun: true\n"}});
    if cms.get_opt("kratix").await.unwrap().is_some() {
        cms.patch("kratix", &PatchParams::default(), &Patch::Merge(&cm))
            .await
            .unwrap();
    } else {
        cms.create(&PostParams::default(), &serde_json::from_value(cm).unwrap())
            .await
            .unwrap();
    }
    for _ in 0..1200 {
        let d = dry_runs.get("bigger").await.unwrap();
        if condition(&d, "Completed").is_some_and(|c| c.0 == "True") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let d = dry_runs.get("bigger").await.unwrap();
    assert!(
        condition(&d, "Completed").is_some_and(|c| c.0 == "True"),
        "DryRun not completed: {:#}\nrequests: {}\njobs: {}\nlog: {}",
        d.data["status"],
        p.kubectl(&["get", "previews", "-n", "default", "-o", "yaml"]),
        p.kubectl(&["get", "jobs", "-n", "default", "-o", "wide"]),
        p.log()
            .lines()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .join("\n")
    );
    let d = dry_runs.get("bigger").await.unwrap();
    assert_eq!(condition(&d, "Completed").unwrap().1, "OutputsListed");
    let outputs = d.data["status"]["outputs"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(outputs.len(), 1, "{:#}", d.data["status"]);
    assert_eq!(outputs[0]["pipeline"], "render");
    assert_eq!(outputs[0]["filepath"], "configmap.yaml");
    assert_eq!(d.data["status"]["components"][0]["phase"], "Succeeded");
    assert_eq!(d.data["status"]["components"][0]["request"], "real");
    // The dry run's Work holds the proposed output under the real request's name ...
    let works = p.kubectl(&[
        "get",
        "works",
        "-n",
        "default",
        "-l",
        "kratix.io/dry-run=true",
        "-o",
        "name",
    ]);
    assert_eq!(works.lines().count(), 1, "{works}");
    // ... and nothing of it reaches the state store.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let files = repo_files(&repo, "main");
    assert!(
        files.iter().all(|f| !f.contains("kratix-dry-run")),
        "{files:?}"
    );
    for f in &files {
        assert!(
            !repo_file(&repo, "main", f)
                .unwrap_or_default()
                .contains("size: large"),
            "{f}"
        );
    }
    assert!(
        repo_file(&repo, "main", &real_path)
            .unwrap()
            .contains("size: small")
    );
    assert_settled_silent(&client, SILENCE).await;
}
