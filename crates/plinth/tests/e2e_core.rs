//! Kratix's own core test assets (`kratix-system-tests/core`: Promise `testbundle`, a
//! Destination, request v1 then v2) end to end through a real `plinth up`, to files in a
//! Git state store in Kratix's layout — then the update replaces them and deletion
//! removes them.
//!
//! The Promise's image `syntasso/test-bundle-image` cannot be pulled here, so the test
//! maps it (`--image-map`) onto local scripts that do what the image's scripts do:
//! `promise-configure.sh` writes a Namespace and a ConfigMap (with `$VALUE`),
//! `resource-configure-0.sh` writes per-destination directories with
//! `destination-selectors.yaml` and `status.yaml` `stage: one`, and
//! `resource-configure-1.sh` fails unless it sees pipeline 0's status in its input.

use crate::support;

use std::os::unix::fs::PermissionsExt;

use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use support::*;

const PROMISE_CONFIGURE: &str = r#"#!/bin/sh
set -eu
cat > /kratix/output/namespace.yaml <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: testbundle-ns
EOF
cat > /kratix/output/configmap.yaml <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: testbundle-cm
  namespace: testbundle-ns
data:
  promiseEnv: "${VALUE:-first}"
EOF
"#;

const RESOURCE_CONFIGURE_0: &str = r#"#!/bin/sh
set -eu
field() { sed -n "s/^ *$1: *//p" /kratix/input/object.yaml | head -n1 | tr -d "\"'"; }
ns=$(field namespaceName)
cm=$(field configMapName)
mkdir -p /kratix/output/dest1 /kratix/output/dest2
cat > /kratix/output/dest1/namespace.yaml <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: $ns
EOF
for i in 1 2; do
cat > /kratix/output/dest$i/configmap.yaml <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: $cm-$i
  namespace: $ns
EOF
done
cat > /kratix/metadata/destination-selectors.yaml <<EOF
- directory: dest1
  matchLabels:
    target: worker-1
- directory: dest2
  matchLabels:
    target: worker-2
EOF
echo "stage: one" > /kratix/metadata/status.yaml
"#;

const RESOURCE_CONFIGURE_1: &str = r#"#!/bin/sh
set -eu
if ! grep -q "stage: one" /kratix/input/object.yaml; then
  echo "pipeline 0's status is not in object.yaml" >&2
  exit 1
fi
cat > /kratix/output/pipeline1.yaml <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: $KRATIX_OBJECT_NAME-pipeline1
  namespace: default
EOF
cat > /kratix/metadata/destination-selectors.yaml <<EOF
- matchLabels:
    target: worker-1
EOF
printf 'stage: two\ncompleted: true\n' > /kratix/metadata/status.yaml
"#;

fn write_script(dir: &std::path::Path, name: &str, body: &str) {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn destination(name: &str, target: &str) -> Value {
    // The corpus Destination points at a BucketStateStore `default`; here it is the
    // bootstrapped Git store `local`, everything else unchanged.
    let mut d = corpus_docs("kratix-system-tests/core/destination.yaml").remove(0);
    d["metadata"]["name"] = json!(name);
    d["metadata"]["labels"]["target"] = json!(target);
    d["spec"]["path"] = json!(name);
    d["spec"]["stateStoreRef"] = json!({"kind": "GitStateStore", "name": "local"});
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn kratix_core_assets_end_to_end_in_git() {
    // The runner finds mapped programs on the entry's PATH on the host and binds them into
    // the sandbox, so they may live anywhere, /tmp included.
    let scripts = tempfile::tempdir().unwrap();
    let bin = scripts.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    write_script(&bin, "promise-configure.sh", PROMISE_CONFIGURE);
    write_script(&bin, "resource-configure-0.sh", RESOURCE_CONFIGURE_0);
    write_script(&bin, "resource-configure-1.sh", RESOURCE_CONFIGURE_1);
    let map = scripts.path().join("images.yaml");
    std::fs::write(
        &map,
        format!("images:\n  - image: \"syntasso/test-bundle-image:*\"\n    env:\n      PATH: \"{}:/usr/local/bin:/usr/bin:/bin\"\n", bin.display()),
    )
    .unwrap();

    let p = Plinth::up(&["--image-map", map.to_str().unwrap()]).await;
    let client = p.client().await;
    let repo = p.repo();
    // Only the corpus Destinations: the bootstrapped one would also match environment=dev.
    let destinations = dynamic(
        &client,
        "platform.kratix.io",
        "v1alpha1",
        "Destination",
        "destinations",
        None,
    );
    destinations
        .delete("local", &DeleteParams::default())
        .await
        .unwrap();
    create(&destinations, &destination("worker-1", "worker-1")).await;
    create(&destinations, &destination("worker-2", "worker-2")).await;

    // C1–C6: the Promise installs, its configure pipeline's output goes to both Destinations.
    let promises = promise_api(&client);
    create_available(
        &promises,
        &corpus_docs("kratix-system-tests/core/promise.yaml").remove(0),
        "testbundle",
        90,
    )
    .await;
    for w in ["worker-1", "worker-2"] {
        let path = format!("{w}/dependencies/testbundle/setup-deps/5058f/configmap.yaml");
        wait_until(60, &path, || async {
            repo_file(&repo, "main", &path).is_some()
        })
        .await;
        assert!(
            repo_file(&repo, "main", &path)
                .unwrap()
                .contains("promiseEnv: \"first\"")
        );
        assert!(
            repo_file(
                &repo,
                "main",
                &format!("{w}/dependencies/kratix-canary-namespace.yaml")
            )
            .is_some()
        );
    }
    let promise = promises.get("testbundle").await.unwrap();
    assert_eq!(promise.data["status"]["workflows"], 1);
    assert_eq!(
        promise.data["status"]["kratix"]["workflows"]["pipelines"][0]["phase"],
        "Succeeded"
    );

    // C7–C9: the request runs both pipelines in order; directories go to their Destinations.
    let bundles = dynamic(
        &client,
        "test.kratix.io",
        "v1alpha1",
        "TestBundle",
        "testbundles",
        Some("default"),
    );
    create(
        &bundles,
        &corpus_docs("kratix-system-tests/core/example-resource.yaml").remove(0),
    )
    .await;
    wait_until(90, "TestBundle kratix-test Reconciled", || async {
        bundles
            .get("kratix-test")
            .await
            .is_ok_and(|o| condition(&o, "Reconciled").is_some_and(|c| c.0 == "True"))
    })
    .await;
    // The Events Kratix emits on this path, with Kratix's types, each once (repeats are
    // counted on one Event).
    use plinth_api::constants::events as ev;
    assert_kratix_events(
        &p,
        &[
            (
                ev::PROMISE_CONTROLLER,
                ev::REVISION_CREATED,
                "Promise",
                "testbundle",
            ),
            (
                ev::PROMISE_CONTROLLER,
                ev::PIPELINE_STARTED,
                "Promise",
                "testbundle",
            ),
            (
                ev::PROMISE_CONTROLLER,
                ev::AVAILABLE,
                "Promise",
                "testbundle",
            ),
            (
                ev::PROMISE_CONTROLLER,
                ev::CONFIGURE_WORKFLOW_COMPLETED,
                "Promise",
                "testbundle",
            ),
            (
                ev::PROMISE_CONTROLLER,
                ev::WORKS_SUCCEEDED,
                "Promise",
                "testbundle",
            ),
            (
                ev::RESOURCE_REQUEST_CONTROLLER,
                ev::PIPELINE_STARTED,
                "TestBundle",
                "kratix-test",
            ),
            (
                ev::RESOURCE_REQUEST_CONTROLLER,
                ev::WORKS_SUCCEEDED,
                "TestBundle",
                "kratix-test",
            ),
            (
                ev::RESOURCE_REQUEST_CONTROLLER,
                ev::RECONCILE_SUCCEEDED,
                "TestBundle",
                "kratix-test",
            ),
            (
                ev::DESTINATION_CONTROLLER,
                ev::DESTINATION_READY,
                "Destination",
                "worker-1",
            ),
            (
                ev::GIT_STATE_STORE_CONTROLLER,
                ev::READY,
                "GitStateStore",
                "local",
            ),
        ],
    )
    .await;
    let events = kubectl_events(&p);
    for (reason, kind) in [
        (ev::WORKPLACEMENT_RECONCILED, "Work"),
        (ev::ALL_WORKPLACEMENTS_SCHEDULED, "Work"),
        (ev::WORKLOADS_WRITTEN_TO_STATE_STORE, "WorkPlacement"),
    ] {
        assert!(
            events.iter().any(|e| e.reason == reason && e.kind == kind),
            "no {reason} Event on a {kind}: {events:?}"
        );
    }
    let described = p.kubectl(&["describe", "testbundles", "kratix-test"]);
    assert!(
        described.contains(ev::RECONCILE_SUCCEEDED) && described.contains(ev::PIPELINE_STARTED),
        "kubectl describe shows the request's Events:\n{described}"
    );

    let rr = bundles.get("kratix-test").await.unwrap();
    assert_eq!(rr.data["status"]["stage"], "two");
    assert_eq!(rr.data["status"]["completed"], true);
    assert_eq!(rr.data["status"]["workflowsSucceeded"], 2);
    assert_eq!(
        condition(&rr, "ConfigureWorkflowCompleted").unwrap().1,
        "PipelinesExecutedSuccessfully"
    );
    let dest1 = plinth_api::hash::workload_group_id("dest1")[..5].to_string();
    let dest2 = plinth_api::hash::workload_group_id("dest2")[..5].to_string();
    let ns_file = format!(
        "worker-1/resources/default/testbundle/kratix-test/resource-pipeline0/{dest1}/dest1/namespace.yaml"
    );
    let cm2_file = format!(
        "worker-2/resources/default/testbundle/kratix-test/resource-pipeline0/{dest2}/dest2/configmap.yaml"
    );
    let p1_file =
        "worker-1/resources/default/testbundle/kratix-test/resource-pipeline1/5058f/pipeline1.yaml"
            .to_string();
    for f in [&ns_file, &cm2_file, &p1_file] {
        wait_until(60, f, || async { repo_file(&repo, "main", f).is_some() }).await;
    }
    assert!(
        repo_file(&repo, "main", &ns_file)
            .unwrap()
            .contains("name: ksystest")
    );
    assert!(
        repo_file(&repo, "main", &cm2_file)
            .unwrap()
            .contains("name: ksystest-cm-2")
    );
    assert!(
        !repo_files(&repo, "main")
            .iter()
            .any(|f| f.starts_with("worker-2/") && f.contains("resource-pipeline1")),
        "pipeline 1 only targets worker-1"
    );

    // C10: request v2 replaces the files in place.
    let v2 = corpus_docs("kratix-system-tests/core/example-resource-v2.yaml").remove(0);
    bundles
        .patch(
            "kratix-test",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": v2["spec"]})),
        )
        .await
        .unwrap();
    wait_until(90, "namespace renamed to ksystest-updated", || async {
        repo_file(&repo, "main", &ns_file).is_some_and(|c| c.contains("name: ksystest-updated"))
    })
    .await;

    // C11: Promise v2 re-runs the promise pipeline with VALUE=second.
    let v2p = corpus_docs("kratix-system-tests/core/promise-v2.yaml").remove(0);
    promises
        .patch(
            "testbundle",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": v2p["spec"]})),
        )
        .await
        .unwrap();
    let cm = "worker-1/dependencies/testbundle/setup-deps/5058f/configmap.yaml";
    wait_until(90, "promiseEnv second", || async {
        repo_file(&repo, "main", cm).is_some_and(|c| c.contains("promiseEnv: \"second\""))
    })
    .await;

    // C12: deleting the request removes its files.
    bundles
        .delete("kratix-test", &DeleteParams::default())
        .await
        .unwrap();
    wait_until(90, "request files removed", || async {
        !repo_files(&repo, "main")
            .iter()
            .any(|f| f.contains("/resources/default/testbundle/"))
    })
    .await;

    // C13: deleting the Promise removes its dependencies and the CRD.
    promises
        .delete("testbundle", &DeleteParams::default())
        .await
        .unwrap();
    wait_until(90, "Promise gone", || async {
        promises.get_opt("testbundle").await.unwrap().is_none()
    })
    .await;
    let files = repo_files(&repo, "main");
    assert!(
        !files
            .iter()
            .any(|f| f.contains("/dependencies/testbundle/")),
        "{files:?}"
    );
    assert!(
        files
            .iter()
            .any(|f| f == "worker-1/dependencies/kratix-canary-namespace.yaml"),
        "canaries stay"
    );
    let crds = p.kubectl_raw(&["get", "crd", "testbundles.test.kratix.io"]);
    assert!(!crds.status.success(), "CRD removed");
    assert_settled_silent(&client, SILENCE).await;
}

/// Re-pointing the bootstrapped GitStateStore `local` at another repository with
/// `path: platform`, then adding a Destination on it: the Destination's canary files land
/// in the new repository under `platform/`, and nothing of it reaches the old one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repointed_bootstrap_store_writes_new_destinations_to_the_new_repository() {
    let p = Plinth::up(&[]).await;
    let client = p.client().await;
    let old_repo = p.repo();
    let new_repo = p.dir.path().join("new.git");
    git(&[
        "init",
        "--bare",
        "--initial-branch=main",
        new_repo.to_str().unwrap(),
    ]);
    assert!(new_repo.join("HEAD").exists(), "git init --bare failed");

    p.kubectl(&[
        "patch",
        "gitstatestore",
        "local",
        "--type",
        "merge",
        "-p",
        &json!({"spec": {"url": format!("file://{}", new_repo.display()), "path": "platform"}})
            .to_string(),
    ]);
    let stores = dynamic(
        &client,
        "platform.kratix.io",
        "v1alpha1",
        "GitStateStore",
        "gitstatestores",
        None,
    );
    wait_until(
        60,
        "GitStateStore local Ready at its new generation",
        || async {
            stores.get("local").await.is_ok_and(|s| {
                s.data["status"]["observedGeneration"] == json!(s.metadata.generation)
                    && condition(&s, "Ready").is_some_and(|c| c.0 == "True")
            })
        },
    )
    .await;

    let destinations = dynamic(
        &client,
        "platform.kratix.io",
        "v1alpha1",
        "Destination",
        "destinations",
        None,
    );
    create(
        &destinations,
        &json!({
            "apiVersion": "platform.kratix.io/v1alpha1",
            "kind": "Destination",
            "metadata": {"name": "second", "labels": {"target": "second"}},
            "spec": {"path": "second", "stateStoreRef": {"kind": "GitStateStore", "name": "local"}},
        }),
    )
    .await;
    wait_until(60, "Destination second Ready", || async {
        destinations
            .get("second")
            .await
            .is_ok_and(|d| condition(&d, "Ready").is_some_and(|c| c.0 == "True"))
    })
    .await;
    let new_files = repo_files(&new_repo, "main");
    assert!(
        new_files.iter().any(|f| f.starts_with("platform/second/")),
        "no canary files under platform/second/ in the new repository: {new_files:?}"
    );
    let old_files = repo_files(&old_repo, "main");
    assert!(
        !old_files
            .iter()
            .any(|f| f.starts_with("second/") || f.starts_with("platform/second/")),
        "the old repository received the new Destination's files: {old_files:?}"
    );
    assert_settled_silent(&client, SILENCE).await;
}
