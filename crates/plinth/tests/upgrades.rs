//! Promise upgrades on a real `plinth up`: each request gets a ResourceBinding shown by
//! `kubectl get promiserevisions,resourcebindings`; a new version replaces the outputs of
//! requests that follow the latest revision and leaves a pinned request's outputs alone;
//! a failing version keeps the outputs and the binding on the last good version, with a
//! failed-upgrade condition naming the failed version; the platform then settles silent.

use crate::support;

use kube::ResourceExt;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use support::*;

/// The `upgrades` Promise at `version`: its pipeline writes a ConfigMap naming the
/// version, or fails when `fail`.
fn promise(version: &str, fail: bool) -> Value {
    let script = if fail {
        "exit 1".to_string()
    } else {
        format!(
            "printf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: cm\\n  namespace: default\\ndata:\\n  version: {version}\\n' > /kratix/output/configmap.yaml"
        )
    };
    json!({
        "apiVersion": "platform.kratix.io/v1alpha1", "kind": "Promise",
        "metadata": {"name": "upgrades", "labels": {"kratix.io/promise-version": version}},
        "spec": {
            "api": {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "gizmos.test.kratix.io"},
                "spec": {"group": "test.kratix.io", "scope": "Namespaced", "names": {"kind": "Gizmo", "plural": "gizmos", "singular": "gizmo"},
                    "versions": [{"name": "v1alpha1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}},
            "workflows": {"resource": {"configure": [{"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Pipeline", "metadata": {"name": "instance"},
                "spec": {"jobOptions": {"backoffLimit": 0}, "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c"], "args": [script]}]}}]}}
        }
    })
}

/// The request's ConfigMap as written to the state store, if any.
fn output_of(p: &Plinth, request: &str) -> Option<String> {
    let suffix = format!("/upgrades/{request}/instance/5058f/configmap.yaml");
    let repo = p.repo();
    repo_files(&repo, "main")
        .into_iter()
        .find(|f| f.ends_with(&suffix))
        .and_then(|f| repo_file(&repo, "main", &f))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_requests_upgrade_pin_and_hold_a_failed_version() {
    let p = Plinth::up(&[]).await;
    let client = p.client().await;
    let promises = promise_api(&client);
    let bindings = dynamic(
        &client,
        "platform.kratix.io",
        "v1alpha1",
        "ResourceBinding",
        "resourcebindings",
        Some("default"),
    );
    let gizmos = dynamic(
        &client,
        "test.kratix.io",
        "v1alpha1",
        "Gizmo",
        "gizmos",
        Some("default"),
    );
    let binding = |r: &'static str| {
        let bindings = bindings.clone();
        async move {
            bindings
                .list(&ListParams::default().labels(&format!("kratix.io/resource-name={r}")))
                .await
                .unwrap()
                .items
                .pop()
        }
    };
    create_available(&promises, &promise("v1", false), "upgrades", 90).await;
    for r in ["one", "two"] {
        create(&gizmos, &json!({"apiVersion": "test.kratix.io/v1alpha1", "kind": "Gizmo", "metadata": {"name": r, "namespace": "default"}, "spec": {}})).await;
    }
    for r in ["one", "two"] {
        wait_until(120, &format!("{r} written at v1"), || async {
            output_of(&p, r).is_some_and(|c| c.contains("version: v1"))
        })
        .await;
        wait_until(60, &format!("{r} bound at v1"), || async {
            binding(r)
                .await
                .is_some_and(|b| b.data["status"]["lastAppliedVersion"] == "v1")
        })
        .await;
    }
    let table = p.kubectl(&["get", "promiserevisions,resourcebindings", "-n", "default"]);
    for column in [
        "PROMISE", "VERSION", "LATEST", "RESOURCE", "DESIRED", "APPLIED",
    ] {
        assert!(table.contains(column), "no {column} column: {table}");
    }
    let row = table
        .lines()
        .find(|l| l.contains("resourcebinding") && l.contains(" one "))
        .unwrap_or_default();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cells[1..], ["one", "upgrades", "latest", "v1"], "{table}");

    // Pin two; v2 replaces one's output and leaves two's.
    let two = binding("two").await.unwrap().name_any();
    p.kubectl(&[
        "patch",
        "resourcebinding",
        &two,
        "-n",
        "default",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"version":"v1"}}"#,
    ]);
    promises
        .patch(
            "upgrades",
            &PatchParams::default(),
            &Patch::Merge(&promise("v2", false)),
        )
        .await
        .unwrap();
    wait_until(120, "one written at v2", || async {
        output_of(&p, "one").is_some_and(|c| c.contains("version: v2"))
    })
    .await;
    wait_until(60, "one bound at v2", || async {
        binding("one").await.is_some_and(|b| {
            b.data["status"]["lastAppliedVersion"] == "v2"
                && condition(&b, "UpgradeSucceeded").is_some_and(|c| c.0 == "True")
        })
    })
    .await;
    wait_until(60, "two re-run with its pinned v1", || async {
        gizmos
            .get("two")
            .await
            .is_ok_and(|o| condition(&o, "Reconciled").is_some_and(|c| c.0 == "True"))
    })
    .await;
    assert!(output_of(&p, "two").unwrap().contains("version: v1"));

    // A failing v3: one keeps its v2 output and binding, the condition names v3.
    promises
        .patch(
            "upgrades",
            &PatchParams::default(),
            &Patch::Merge(&promise("v3", true)),
        )
        .await
        .unwrap();
    wait_until(120, "one's upgrade to v3 failed", || async {
        binding("one")
            .await
            .is_some_and(|b| condition(&b, "UpgradeSucceeded").is_some_and(|c| c.0 == "False"))
    })
    .await;
    let one = binding("one").await.unwrap();
    let (_, reason, message) = condition(&one, "UpgradeSucceeded").unwrap();
    assert_eq!(reason, "UpgradeFailed");
    assert!(message.contains("v3"), "{message}");
    assert_eq!(one.data["status"]["failedVersion"], "v3");
    assert_eq!(one.data["status"]["lastAppliedVersion"], "v2");
    assert!(output_of(&p, "one").unwrap().contains("version: v2"));
    assert_settled_silent(&client, SILENCE).await;
}
