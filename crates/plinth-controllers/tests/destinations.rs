//! Destination and state store controller integration tests against the embedded API
//! server and a `file://` Git state store, using the Destinations of Kratix's
//! system-test corpus.

use crate::placement_support;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use placement_support::*;
use plinth_api::{Destination, GitStateStore, Work, WorkPlacement};
use serde_json::json;

const NS_YAML: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: filepathmode-none\n";
const CM_YAML: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: modenone-request-1\n  namespace: filepathmode-none\ndata:\n  key: modenone-request-1\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn corpus_destinations_produce_kratix_trees_for_all_three_modes() {
    let env = start().await;
    env.git_store("destination-git-test-store").await;
    let store = "destination-git-test-store";
    let nested = env
        .destination_from_yaml(
            &corpus("kratix-system-tests/destination/destination-worker-git.yaml"),
            store,
        )
        .await;
    let flat = env
        .destination_from_yaml(
            &corpus("kratix-system-tests/destination/destination-git-filepathmode-none.yaml"),
            store,
        )
        .await;
    let agg = env
        .destination_from_yaml(
            &corpus("kratix-system-tests/destination/destination-aggregated-yaml.yaml"),
            store,
        )
        .await;
    for d in [&nested, &flat, &agg] {
        env.destination_ready(&d.name_any()).await;
    }
    let d = Api::<Destination>::all(env.client.clone())
        .get(&nested.name_any())
        .await
        .unwrap();
    let ready = cond(&d.status.and_then(|s| s.conditions), "Ready").unwrap();
    assert_eq!(
        (ready.1.as_str(), ready.2.as_str()),
        (
            "TestDocumentsWritten",
            "Test documents written to State Store"
        )
    );

    let ev = wait_event(
        &env.client,
        "default",
        &nested.name_any(),
        "DestinationReady",
    )
    .await;
    assert_eq!(
        ev,
        (
            "Normal".to_string(),
            "DestinationController".to_string(),
            "Destination is Ready".to_string()
        )
    );
    let ev = wait_event(&env.client, "default", store, "Ready").await;
    assert_eq!(ev.1, "GitStateStoreController");
    assert_eq!(ev.2, format!("GitStateStore \"{store}\" is ready"));

    // Canary files per mode.
    let files = env.files();
    for f in [
        "worker-git/dependencies/kratix-canary-namespace.yaml",
        "worker-git/resources/kratix-canary-configmap.yaml",
        "filepathmode-none/kratix-canary-namespace.yaml",
        "filepathmode-none/kratix-canary-configmap.yaml",
        "aggregated-yaml/kratix-canary-namespace.yaml",
        "aggregated-yaml/kratix-canary-configmap.yaml",
    ] {
        assert!(files.iter().any(|x| x == f), "{f} missing from {files:?}");
    }
    assert_eq!(
        env.show("worker-git/dependencies/kratix-canary-namespace.yaml"),
        plinth_statestore::layout::CANARY_NAMESPACE_YAML
    );

    // Promise workflow output (dependency Works) and a resource request's output, as the
    // filepathmode-none Promise of the corpus produces them, scheduled by the
    // Destinations' `target` / `environment` labels.
    for (work, sel) in [
        ("fpn-promise-nested", ("environment", "dev")),
        ("fpn-promise-flat", ("target", "filepathmode-none")),
        ("fpn-promise-agg", ("target", "aggregated-yaml")),
    ] {
        env.create_work(
            "kratix-platform-system",
            work,
            "filepathmode-none",
            "",
            "promise",
            &[(
                ".",
                vec![("promise", labels(&[sel]))],
                vec![("filepathmode-none-ns.yaml", NS_YAML)],
            )],
        )
        .await;
    }
    env.create_work(
        "default",
        "fpn-r1-flat",
        "filepathmode-none",
        "modenone-request-1",
        "resource",
        &[(
            ".",
            vec![("promise", labels(&[("target", "filepathmode-none")]))],
            vec![("filepathmode-none-cm-modenone-request-1.yaml", CM_YAML)],
        )],
    )
    .await;
    env.create_work(
        "default",
        "fpn-r1-agg",
        "filepathmode-none",
        "modenone-request-1",
        "resource",
        &[(
            ".",
            vec![("promise", labels(&[("target", "aggregated-yaml")]))],
            vec![("cm.yaml", CM_YAML)],
        )],
    )
    .await;

    // nestedByMetadata: dependencies/<promise>/<pipeline>/<id5>/<file>.
    env.wait_file(
        "worker-git/dependencies/filepathmode-none/promise/5058f/filepathmode-none-ns.yaml",
        true,
    )
    .await;
    assert_eq!(
        env.show(
            "worker-git/dependencies/filepathmode-none/promise/5058f/filepathmode-none-ns.yaml"
        ),
        NS_YAML
    );
    // none: files at the Destination root + .kratix state files.
    env.wait_file("filepathmode-none/filepathmode-none-ns.yaml", true)
        .await;
    env.wait_file(
        "filepathmode-none/filepathmode-none-cm-modenone-request-1.yaml",
        true,
    )
    .await;
    let flat_wp = "fpn-r1-flat.test-worker-git-filepathmode-none-5058f";
    let state_file = format!("filepathmode-none/.kratix/default-{flat_wp}.yaml");
    env.wait_file(&state_file, true).await;
    assert_eq!(
        env.show(&state_file),
        "files:\n- filepathmode-none/filepathmode-none-cm-modenone-request-1.yaml\n"
    );
    let wp = Api::<WorkPlacement>::namespaced(env.client.clone(), "default")
        .get(flat_wp)
        .await
        .unwrap();
    assert!(
        wp.finalizers()
            .iter()
            .any(|f| f == "finalizers.workplacement.kratix.io/kratix-dot-files-cleanup")
    );
    // aggregatedYAML: one file, documents of every placement sorted by placement name.
    wait_for("aggregated file holds both documents", || async {
        env.files()
            .iter()
            .any(|f| f == "aggregated-yaml/catalog.yaml")
            && env.show("aggregated-yaml/catalog.yaml").contains("---")
    })
    .await;
    assert_eq!(
        env.show("aggregated-yaml/catalog.yaml"),
        format!("{NS_YAML}\n---\n{CM_YAML}"),
        "fpn-promise-agg.* sorts before fpn-r1-agg.*"
    );

    // Deleting removes exactly what each wrote.
    env.delete_work("default", "fpn-r1-flat").await;
    env.wait_file(
        "filepathmode-none/filepathmode-none-cm-modenone-request-1.yaml",
        false,
    )
    .await;
    env.wait_file(&state_file, false).await;
    assert!(
        env.files()
            .iter()
            .any(|f| f == "filepathmode-none/filepathmode-none-ns.yaml"),
        "other placement's file kept"
    );
    env.delete_work("default", "fpn-r1-agg").await;
    wait_for(
        "aggregated file regenerated without the deleted placement",
        || async { env.show("aggregated-yaml/catalog.yaml") == NS_YAML },
    )
    .await;
    env.delete_work("kratix-platform-system", "fpn-promise-nested")
        .await;
    env.wait_file(
        "worker-git/dependencies/filepathmode-none/promise/5058f/filepathmode-none-ns.yaml",
        false,
    )
    .await;
    assert!(
        env.files()
            .iter()
            .any(|f| f == "worker-git/dependencies/kratix-canary-namespace.yaml")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn cleanup_all_removes_placements_files_and_canaries() {
    let env = start().await;
    env.git_store("default").await;
    let d = env
        .destination_from_yaml(
            &corpus("kratix-system-tests/destination/destination-cleanup-all.yaml"),
            "default",
        )
        .await;
    env.destination_ready(&d.name_any()).await;
    let d = Api::<Destination>::all(env.client.clone())
        .get("cleanup-all")
        .await
        .unwrap();
    assert!(
        d.finalizers()
            .iter()
            .any(|f| f == "kratix.io/destination-cleanup")
    );
    env.create_work(
        "default",
        "ca-r1",
        "cleanup-all",
        "r1",
        "resource",
        &[(
            ".",
            vec![("promise", labels(&[("target", "cleanup-all")]))],
            vec![("cm.yaml", CM_YAML)],
        )],
    )
    .await;
    env.wait_file(
        "cleanup-all/resources/default/cleanup-all/r1/resource/5058f/cm.yaml",
        true,
    )
    .await;

    let dests: Api<Destination> = Api::all(env.client.clone());
    dests
        .delete("cleanup-all", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("Destination gone", || async {
        dests.get_opt("cleanup-all").await.unwrap().is_none()
    })
    .await;
    assert!(
        env.placements("default", "ca-r1").await.is_empty(),
        "placements deleted first"
    );
    assert!(
        !env.files().iter().any(|f| f.starts_with("cleanup-all/")),
        "directory removed: {:?}",
        env.files()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_secret_is_reported_and_recovered_when_it_appears() {
    let env = start().await;
    let api: Api<GitStateStore> = Api::all(env.client.clone());
    let s: GitStateStore = serde_json::from_value(json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "GitStateStore",
        "metadata": {"name": "needs-creds"},
        "spec": {"url": env.repo_url(), "branch": "main", "secretRef": {"name": "git-creds"}},
    }))
    .unwrap();
    api.create(&PostParams::default(), &s).await.unwrap();
    wait_for("SecretNotFound", || async {
        api.get("needs-creds").await.ok().is_some_and(|s| {
            let st = s.status.unwrap_or_default();
            st.status.as_deref() == Some("NotReady")
                && cond(&st.conditions, "Ready").is_some_and(|c| {
                    c.1 == "SecretNotFound"
                        && c.2 == "Secret git-creds not found in namespace default"
                })
        })
    })
    .await;

    // A Destination on it says why it is not ready.
    env.create_destination(json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Destination",
        "metadata": {"name": "waiting", "labels": {"target": "waiting"}},
        "spec": {"path": "waiting", "stateStoreRef": {"kind": "GitStateStore", "name": "needs-creds"}},
    }))
    .await;
    let dests: Api<Destination> = Api::all(env.client.clone());
    wait_for("Destination StateStoreNotReady", || async {
        dests.get("waiting").await.ok().is_some_and(|d| {
            cond(&d.status.and_then(|s| s.conditions), "Ready").is_some_and(|c| {
                c.1 == "StateStoreNotReady" && c.2 == "GitStateStore/needs-creds: not ready"
            })
        })
    })
    .await;

    // A placement on it is not left Pending without a reason: it names the store.
    env.create_work(
        "default",
        "waits-for-store",
        "p",
        "r1",
        "resource",
        &[(
            ".",
            vec![("promise", labels(&[("target", "waiting")]))],
            vec![("cm.yaml", "kind: ConfigMap\n")],
        )],
    )
    .await;
    let expected = "GitStateStore/needs-creds does not exist or is not ready (the Destination's Ready condition says which); the workloads are written once it is";
    wait_for("placement StateStoreNotReady", || async {
        let Some(wp) = env.placements("default", "waits-for-store").await.pop() else {
            return false;
        };
        let conds = wp.status.and_then(|s| s.conditions);
        cond(&conds, "WriteSucceeded")
            == Some(("False".into(), "StateStoreNotReady".into(), expected.into()))
            && cond(&conds, "Ready")
                == Some(("False".into(), "StateStoreNotReady".into(), expected.into()))
    })
    .await;

    // The Secret appears (basic auth over file:// is accepted and unused): store and
    // Destination become Ready without any other trigger.
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), "default");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "git-creds", "namespace": "default"},
        "stringData": {"username": "u", "password": "p"},
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    wait_for("store Ready after Secret creation", || async {
        api.get("needs-creds")
            .await
            .ok()
            .and_then(|s| s.status)
            .and_then(|s| s.status)
            .as_deref()
            == Some("Ready")
    })
    .await;
    env.destination_ready("waiting").await;
    // The placement is written without any other trigger.
    let wp = env
        .placements("default", "waits-for-store")
        .await
        .pop()
        .unwrap();
    env.placement_ready("default", &wp.name_any()).await;

    // A key removed from the Secret is named.
    secrets
        .patch(
            "git-creds",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"password": null}, "stringData": null})),
        )
        .await
        .unwrap();
    wait_for("missing key named", || async {
        api.get("needs-creds").await.ok().is_some_and(|s| {
            cond(&s.status.and_then(|s| s.conditions), "Ready").is_some_and(|c| {
                c.1 == "ErrorInitialisingWriter"
                    && c.2.contains("password")
                    && c.2.contains("default/git-creds")
            })
        })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_output_makes_no_new_commit_and_recreated_destination_needs_none() {
    let env = start().await;
    env.git_store("default").await;
    let dest = json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Destination",
        "metadata": {"name": "dev"},
        "spec": {"path": "dev", "stateStoreRef": {"kind": "GitStateStore", "name": "default"}},
    });
    env.create_destination(dest.clone()).await;
    env.destination_ready("dev").await;
    env.create_work(
        "team-a",
        "same",
        "widget",
        "r1",
        "configure",
        &[(".", vec![], vec![("a.yaml", "a: 1\n")])],
    )
    .await;
    env.work_condition(
        "team-a",
        "same",
        "Ready",
        "True",
        "AllWorkplacementsScheduled",
    )
    .await;
    let wp = env.placement_ready("team-a", "same.dev-5058f").await;
    let version = wp.status.unwrap().version_id.unwrap();
    let commits = env.commits();

    // B41b: the workflow runs again with identical output (new generation, same files).
    let works: Api<Work> = Api::namespaced(env.client.clone(), "team-a");
    works
        .patch(
            "same",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"lastExecutionTimestamp": "2026-11-29T10:00:00Z"}})),
        )
        .await
        .unwrap();
    let gen_ = works.get("same").await.unwrap().metadata.generation;
    let wps: Api<WorkPlacement> = Api::namespaced(env.client.clone(), "team-a");
    wait_for("placement rewritten at the new generation", || async {
        wps.get("same.dev-5058f").await.ok().is_some_and(|w| {
            w.spec.generation == gen_
                && cond(&w.status.clone().and_then(|s| s.conditions), "Ready")
                    .is_some_and(|c| c.0 == "True")
        })
    })
    .await;
    assert_eq!(
        env.commits(),
        commits,
        "no new commit for identical content"
    );
    assert_eq!(
        wps.get("same.dev-5058f")
            .await
            .unwrap()
            .status
            .unwrap()
            .version_id
            .unwrap(),
        version
    );

    // B41c: delete (cleanup none) and re-create the Destination over its existing canaries.
    let dests: Api<Destination> = Api::all(env.client.clone());
    dests.delete("dev", &DeleteParams::default()).await.unwrap();
    wait_for("Destination gone", || async {
        dests.get_opt("dev").await.unwrap().is_none()
    })
    .await;
    env.delete_work("team-a", "same").await;
    let commits = env.commits();
    env.create_destination(dest).await;
    env.destination_ready("dev").await;
    assert_eq!(env.commits(), commits, "Ready without an empty commit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn equivalent_path_spellings_give_the_same_tree() {
    // Store path "/" and Destination path "//platform//" are normalised.
    let env = start().await;
    let api: Api<GitStateStore> = Api::all(env.client.clone());
    let s: GitStateStore = serde_json::from_value(json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "GitStateStore",
        "metadata": {"name": "slashes"},
        "spec": {"url": env.repo_url(), "branch": "main", "path": "/"},
    }))
    .unwrap();
    api.create(&PostParams::default(), &s).await.unwrap();
    env.create_destination(json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Destination",
        "metadata": {"name": "platform"},
        "spec": {"path": "//platform//", "stateStoreRef": {"kind": "GitStateStore", "name": "slashes"}, "filepath": {"mode": "none"}},
    }))
    .await;
    env.destination_ready("platform").await;
    env.create_work(
        "team-a",
        "ns",
        "widget",
        "r1",
        "configure",
        &[(".", vec![], vec![("namespace.yaml", NS_YAML)])],
    )
    .await;
    env.wait_file("platform/namespace.yaml", true).await;
    let out = git(&env.repo, &["ls-tree", "main", "platform/namespace.yaml"]);
    assert!(
        out.starts_with("100644 blob "),
        "a regular file, not a directory: {out}"
    );
    assert_eq!(env.show("platform/namespace.yaml"), NS_YAML);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_rewrite_restores_files_removed_outside_plinth() {
    let env =
        start_with(|c| c.state_store_reconciliation_interval = std::time::Duration::from_secs(1))
            .await;
    env.git_store("default").await;
    env.create_destination(json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Destination",
        "metadata": {"name": "dev"},
        "spec": {"path": "dev", "stateStoreRef": {"kind": "GitStateStore", "name": "default"}},
    }))
    .await;
    env.destination_ready("dev").await;
    env.create_work(
        "team-a",
        "drift",
        "widget",
        "r1",
        "configure",
        &[(".", vec![], vec![("a.yaml", "a: 1\n")])],
    )
    .await;
    let file = "dev/resources/team-a/widget/r1/configure/5058f/a.yaml";
    env.wait_file(file, true).await;
    external_commit(&env.repo, "remove by hand", |wt| {
        std::fs::remove_file(wt.join(file)).unwrap()
    });
    assert!(!env.files().iter().any(|f| f == file));
    env.wait_file(file, true).await;
    assert_eq!(env.show(file), "a: 1\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn bucket_state_store_from_the_corpus_writes_and_reports_secret_problems() {
    let Some(moto) = moto().await else { return };
    moto.create_bucket("kratix").await;
    let env = start().await;
    let stores: Api<plinth_api::BucketStateStore> = Api::all(env.client.clone());

    // B16b: accessKey without a secretRef is rejected at admission, naming the field.
    let bad: plinth_api::BucketStateStore = serde_json::from_value(json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "BucketStateStore",
        "metadata": {"name": "no-secret"},
        "spec": {"bucketName": "kratix", "endpoint": format!("127.0.0.1:{}", moto.port), "insecure": true},
    }))
    .unwrap();
    match stores.create(&PostParams::default(), &bad).await {
        Err(kube::Error::Api(s)) => {
            assert!(s.code == 422 && s.message.contains("secretRef"), "{s:?}")
        }
        other => panic!("expected a 422 naming secretRef, got {other:?}"),
    }

    // The corpus store (endpoint pointed at moto): its Secret is missing, and says so.
    let mut store: serde_json::Value = serde_saphyr::from_str(&corpus(
        "kratix-system-tests/destination/destination-test-store.yaml",
    ))
    .unwrap();
    store["spec"]["endpoint"] = json!(format!("127.0.0.1:{}", moto.port));
    stores
        .create(
            &PostParams::default(),
            &serde_json::from_value(store).unwrap(),
        )
        .await
        .unwrap();
    wait_for("bucket store SecretNotFound", || async {
        stores
            .get("destination-test-store")
            .await
            .ok()
            .is_some_and(|s| {
                let st = s.status.unwrap_or_default();
                st.status.as_deref() == Some("NotReady")
                    && cond(&st.conditions, "Ready").is_some_and(|c| {
                        c.1 == "SecretNotFound"
                            && c.2 == "Secret minio-credentials not found in namespace default"
                    })
            })
    })
    .await;

    // The Secret appears: the store turns Ready, and the corpus Destination worker-3 writes.
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "minio-credentials", "namespace": "default"},
        "stringData": {"accessKeyID": "minioadmin", "secretAccessKey": "minioadmin"},
    }))
    .unwrap();
    Api::<Secret>::namespaced(env.client.clone(), "default")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    wait_for("bucket store Ready", || async {
        stores
            .get("destination-test-store")
            .await
            .ok()
            .and_then(|s| s.status)
            .and_then(|s| s.status)
            .as_deref()
            == Some("Ready")
    })
    .await;
    let d: Destination = serde_json::from_value(
        serde_saphyr::from_str::<serde_json::Value>(&corpus(
            "kratix-system-tests/destination/destination-worker-3.yaml",
        ))
        .unwrap(),
    )
    .unwrap();
    Api::<Destination>::all(env.client.clone())
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    env.destination_ready("worker-3").await;
    assert_eq!(
        moto.get("kratix", "worker-3/resources/kratix-canary-configmap.yaml")
            .await
            .as_deref(),
        Some(plinth_statestore::layout::CANARY_CONFIGMAP_YAML)
    );
    env.create_work(
        "default",
        "b-r1",
        "bucketed",
        "r1",
        "configure",
        &[(
            ".",
            vec![("promise", labels(&[("environment", "dev")]))],
            vec![("cm.yaml", CM_YAML)],
        )],
    )
    .await;
    let key = "worker-3/resources/default/bucketed/r1/configure/5058f/cm.yaml";
    wait_for("object written", || async {
        moto.get("kratix", key).await.is_some()
    })
    .await;
    assert_eq!(moto.get("kratix", key).await.unwrap(), CM_YAML);
    env.delete_work("default", "b-r1").await;
    assert_eq!(moto.get("kratix", key).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_state_store_makes_its_destinations_not_ready() {
    let env = start().await;
    env.git_store("short-lived").await;
    env.create_destination(json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Destination",
        "metadata": {"name": "orphan"},
        "spec": {"path": "orphan", "stateStoreRef": {"kind": "GitStateStore", "name": "short-lived"}},
    }))
    .await;
    env.destination_ready("orphan").await;
    Api::<GitStateStore>::all(env.client.clone())
        .delete("short-lived", &DeleteParams::default())
        .await
        .unwrap();
    let dests: Api<Destination> = Api::all(env.client.clone());
    wait_for("Destination StateStoreNotFound", || async {
        dests.get("orphan").await.ok().is_some_and(|d| {
            cond(&d.status.and_then(|s| s.conditions), "Ready").is_some_and(|c| {
                c.0 == "False"
                    && c.1 == "StateStoreNotFound"
                    && c.2 == "GitStateStore/short-lived: not found"
            })
        })
    })
    .await;
    // The store controller forgets the writer on its own watch event, which may come
    // after the Destination controller's.
    wait_for("the deleted store's writer dropped", || async {
        env.ctx.stores.get("GitStateStore", "short-lived").is_none()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn deleting_a_flat_placement_whose_state_file_was_removed_by_hand_completes() {
    // The `.kratix` index is gone; deletion neither hangs nor orphans the files.
    let env = start().await;
    env.git_store("default").await;
    env.destination_from_yaml(
        &corpus("kratix-system-tests/destination/destination-git-filepathmode-none.yaml"),
        "default",
    )
    .await;
    env.destination_ready("test-worker-git-filepathmode-none")
        .await;
    env.create_work(
        "kratix-platform-system",
        "fpn-promise",
        "filepathmode-none",
        "",
        "promise",
        &[(
            ".",
            vec![("promise", labels(&[("target", "filepathmode-none")]))],
            vec![("filepathmode-none-ns.yaml", NS_YAML)],
        )],
    )
    .await;
    let state_file = "filepathmode-none/.kratix/kratix-platform-system-fpn-promise.test-worker-git-filepathmode-none-5058f.yaml";
    env.wait_file(state_file, true).await;
    env.wait_file("filepathmode-none/filepathmode-none-ns.yaml", true)
        .await;
    external_commit(&env.repo, "remove the index by hand", |wt| {
        std::fs::remove_file(wt.join(state_file)).unwrap()
    });
    env.delete_work("kratix-platform-system", "fpn-promise")
        .await;
    assert!(
        env.placements("kratix-platform-system", "fpn-promise")
            .await
            .is_empty()
    );
    env.wait_file("filepathmode-none/filepathmode-none-ns.yaml", false)
        .await;
    assert!(
        env.files()
            .iter()
            .any(|f| f == "filepathmode-none/kratix-canary-namespace.yaml")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passphrase_protected_ssh_keys_are_reported_precisely() {
    // The Secret's `passphrase` decrypts the key; a wrong or missing one gets its own
    // message (checked locally, before any connection), and nothing waits on a prompt.
    let env = start().await;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("id");
    let out = std::process::Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "right-passphrase",
            "-C",
            "plinth-test",
            "-f",
        ])
        .arg(&key)
        .output()
        .expect("ssh-keygen runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let private_key = std::fs::read_to_string(&key).unwrap();
    let public_key = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    let known_hosts = format!(
        "[127.0.0.1]:1 {}",
        public_key
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    );

    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), "default");
    let put_secret = |passphrase: Option<&str>| {
        let mut data = json!({"sshPrivateKey": private_key, "knownHosts": known_hosts});
        if let Some(p) = passphrase {
            data["passphrase"] = json!(p);
        }
        json!({"metadata": {"name": "git-ssh", "namespace": "default"}, "stringData": data})
    };
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(put_secret(Some("wrong-passphrase"))).unwrap(),
        )
        .await
        .unwrap();
    let stores: Api<GitStateStore> = Api::all(env.client.clone());
    let s: GitStateStore = serde_json::from_value(json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "GitStateStore",
        "metadata": {"name": "ssh-store"},
        "spec": {
            "url": "ssh://git@127.0.0.1:1/org/state.git",
            "branch": "main",
            "authMethod": "ssh",
            "secretRef": {"name": "git-ssh", "namespace": "default"},
        },
    }))
    .unwrap();
    stores.create(&PostParams::default(), &s).await.unwrap();
    let wait_message = |what: &'static str, pred: fn(&str) -> bool| {
        let stores = stores.clone();
        async move {
            wait_for(what, || async {
                stores.get("ssh-store").await.ok().is_some_and(|s| {
                    cond(&s.status.and_then(|s| s.conditions), "Ready").is_some_and(|c| {
                        c.0 == "False" && c.1 == "ErrorInitialisingWriter" && pred(&c.2)
                    })
                })
            })
            .await
        }
    };
    wait_message("wrong passphrase reported", |m| {
        m.contains("wrong passphrase")
    })
    .await;

    // Secret changed: the store reloads it at once.
    secrets
        .replace(
            "git-ssh",
            &PostParams::default(),
            &serde_json::from_value(put_secret(None)).unwrap(),
        )
        .await
        .unwrap();
    wait_message("missing passphrase reported", |m| {
        m.contains("passphrase-protected")
    })
    .await;

    // The right passphrase gets past the key; the (closed) port is what fails now.
    secrets
        .replace(
            "git-ssh",
            &PostParams::default(),
            &serde_json::from_value(put_secret(Some("right-passphrase"))).unwrap(),
        )
        .await
        .unwrap();
    wait_message("key accepted, server unreachable", |m| {
        !m.contains("passphrase")
    })
    .await;
    let s = stores.get("ssh-store").await.unwrap();
    let msg = cond(&s.status.and_then(|s| s.conditions), "Ready")
        .unwrap()
        .2;
    assert!(
        !msg.contains("right-passphrase"),
        "the passphrase never appears in status: {msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_app_store_names_the_missing_secret_key() {
    // authMethod githubApp: a Secret without `installationID` is named precisely; once
    // the key is added the store gets as far as checking the App's private key.
    let env = start().await;
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), "default");
    let secret = |data: serde_json::Value| -> Secret {
        serde_json::from_value(json!({
            "metadata": {"name": "github-app", "namespace": "default"},
            "stringData": data,
        }))
        .unwrap()
    };
    secrets
        .create(
            &PostParams::default(),
            &secret(json!({"appID": "123", "privateKey": "not a key"})),
        )
        .await
        .unwrap();
    let stores: Api<GitStateStore> = Api::all(env.client.clone());
    let s: GitStateStore = serde_json::from_value(json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "GitStateStore",
        "metadata": {"name": "app-store"},
        "spec": {
            "url": "https://github.com/org/state.git",
            "branch": "main",
            "authMethod": "githubApp",
            "secretRef": {"name": "github-app", "namespace": "default"},
        },
    }))
    .unwrap();
    stores.create(&PostParams::default(), &s).await.unwrap();
    let wait_message = |what: &'static str, pred: fn(&str) -> bool| {
        let stores = stores.clone();
        async move {
            wait_for(what, || async {
                stores.get("app-store").await.ok().is_some_and(|s| {
                    s.status.as_ref().and_then(|st| st.status.as_deref()) == Some("NotReady")
                        && cond(&s.status.and_then(|s| s.conditions), "Ready").is_some_and(|c| {
                            c.0 == "False" && c.1 == "ErrorInitialisingWriter" && pred(&c.2)
                        })
                })
            })
            .await
        }
    };
    wait_message("missing installationID named", |m| {
        m.contains("Secret default/github-app")
            && m.contains("\"installationID\"")
            && !m.contains("not supported")
    })
    .await;

    // With every key present, the (bad) private key is what is reported — checked locally,
    // before any request to GitHub.
    secrets
        .replace(
            "github-app",
            &PostParams::default(),
            &secret(json!({"appID": "123", "installationID": "456", "privateKey": "not a key"})),
        )
        .await
        .unwrap();
    wait_message("bad private key reported", |m| {
        m.starts_with("privateKey is not a valid PEM RSA key")
    })
    .await;
}

/// A dependency Work with no selectors goes to every Destination. Deleting one of them
/// must leave its placement in one stable state: the scheduler and the WorkPlacement
/// controller once disagreed about `Ready` (misplaced vs. Destination not found) and
/// rewrote it hundreds of times a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_destination_of_a_dependency_work_settles_silently() {
    let env = start().await;
    env.git_store("local").await;
    for name in ["first", "second"] {
        env.create_destination(json!({
            "apiVersion": "platform.kratix.io/v1alpha1",
            "kind": "Destination",
            "metadata": {"name": name},
            "spec": {"path": name, "stateStoreRef": {"kind": "GitStateStore", "name": "local"}},
        }))
        .await;
        env.destination_ready(name).await;
    }
    env.create_work(
        "kratix-platform-system",
        "deps",
        "deps",
        "",
        "static",
        &[(".", vec![], vec![("cm.yaml", CM_YAML)])],
    )
    .await;
    env.work_condition(
        "kratix-platform-system",
        "deps",
        "Ready",
        "True",
        "AllWorkplacementsScheduled",
    )
    .await;
    let second = env
        .placements("kratix-platform-system", "deps")
        .await
        .into_iter()
        .find(|wp| wp.spec.target_destination_name.as_deref() == Some("second"))
        .expect("a placement on Destination second");
    env.placement_ready("kratix-platform-system", &second.name_any())
        .await;
    env.server.assert_settled_silent(SILENCE).await;

    let dests: Api<Destination> = Api::all(env.client.clone());
    dests
        .delete("second", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("Destination second gone", || async {
        dests.get_opt("second").await.unwrap().is_none()
    })
    .await;
    env.server.assert_settled_silent(SILENCE).await;
    env.placement_ready(
        "kratix-platform-system",
        &env.placements("kratix-platform-system", "deps")
            .await
            .into_iter()
            .find(|wp| wp.spec.target_destination_name.as_deref() == Some("first"))
            .expect("the placement on Destination first stays")
            .name_any(),
    )
    .await;
}

/// Waits until the BucketStateStore's Ready condition has `reason`; returns its message.
async fn bucket_store_reason(env: &Env, name: &str, reason: &str) -> String {
    let api: Api<plinth_api::BucketStateStore> = Api::all(env.client.clone());
    let mut last = None;
    let deadline = tokio::time::Instant::now() + CONVERGE;
    while tokio::time::Instant::now() < deadline {
        last = api
            .get(name)
            .await
            .ok()
            .and_then(|s| cond(&s.status.and_then(|s| s.conditions), "Ready"));
        if let Some((_, r, m)) = &last
            && r == reason
        {
            return m.clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("BucketStateStore {name} never reached {reason}; last {last:?}");
}

/// An endpoint that accepts connections and never answers: the store's reconcile gives
/// up after the network timeout with a stable NotReady message (no timings), keeps
/// retrying with backoff without rewriting its status, and still notices a Secret that
/// appears later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_bucket_endpoint_times_out_with_a_stable_status() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accept and hold every connection, never replying.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in listener.incoming().flatten() {
            held.push(c);
        }
    });
    let env = start_with(|c| c.network_timeout = std::time::Duration::from_secs(2)).await;
    let stores: Api<plinth_api::BucketStateStore> = Api::all(env.client.clone());
    stores
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "platform.kratix.io/v1alpha1",
                "kind": "BucketStateStore",
                "metadata": {"name": "silent"},
                "spec": {
                    "bucketName": "kratix",
                    "endpoint": format!("127.0.0.1:{port}"),
                    "insecure": true,
                    "authMethod": "accessKey",
                    "secretRef": {"name": "silent-creds", "namespace": "default"},
                },
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    bucket_store_reason(&env, "silent", "SecretNotFound").await;
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), "default");
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "silent-creds"},
                "stringData": {"accessKeyID": "id", "secretAccessKey": "secret"},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let msg = bucket_store_reason(&env, "silent", "StateStoreError").await;
    assert!(
        msg.contains(&format!("127.0.0.1:{port}")) && msg.contains("did not answer within 2s"),
        "{msg}"
    );
    env.server.assert_settled_silent(SILENCE).await;
}

/// Re-pointing a GitStateStore at another repository (and path) moves its writer at
/// once: a Destination added right after the change writes its canary files to the new
/// repository under the new path, and nothing more goes to the old one, however soon
/// after the change it writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repointed_git_store_writes_to_the_new_repository() {
    let env = start().await;
    env.git_store("local").await;
    env.create_destination(json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Destination",
        "metadata": {"name": "before"},
        "spec": {"path": "before", "stateStoreRef": {"kind": "GitStateStore", "name": "local"}},
    }))
    .await;
    env.destination_ready("before").await;
    let old_commits = env.commits();

    let new_repo = env.repo.with_file_name("new.git");
    plinth_statestore::git::init_bare(&new_repo, "main").unwrap();
    let stores: Api<GitStateStore> = Api::all(env.client.clone());
    stores
        .patch(
            "local",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"url": format!("file://{}", new_repo.display()), "path": "platform"}})),
        )
        .await
        .unwrap();
    // At once, before the store's controller has opened the new spec: the Destination
    // must wait for it, never write through the client of the old repository.
    env.create_destination(json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Destination",
        "metadata": {"name": "after"},
        "spec": {"path": "after", "stateStoreRef": {"kind": "GitStateStore", "name": "local"}},
    }))
    .await;
    env.destination_ready("after").await;
    let new_files = git(&new_repo, &["ls-tree", "-r", "--name-only", "main"]);
    assert!(
        new_files.contains("platform/after/dependencies/kratix-canary-namespace.yaml"),
        "canaries in the new repository under the new path: {new_files}"
    );
    assert_eq!(
        env.commits(),
        old_commits,
        "nothing more in the old repository"
    );
    assert!(!env.files().iter().any(|f| f.contains("after")));
}

/// A bucket endpoint that refuses connections: the store reports NotReady once, with a
/// message free of retry timings, and then writes nothing while retrying with backoff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_bucket_store_status_is_written_once() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }; // closed again: connections are refused
    let env = start().await;
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), "default");
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "refused-creds"},
                "stringData": {"accessKeyID": "id", "secretAccessKey": "secret"},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let stores: Api<plinth_api::BucketStateStore> = Api::all(env.client.clone());
    stores
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "platform.kratix.io/v1alpha1",
                "kind": "BucketStateStore",
                "metadata": {"name": "refused"},
                "spec": {
                    "bucketName": "kratix",
                    "endpoint": format!("127.0.0.1:{port}"),
                    "insecure": true,
                    "authMethod": "accessKey",
                    "secretRef": {"name": "refused-creds", "namespace": "default"},
                },
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    wait_for("store NotReady", || async {
        stores
            .get("refused")
            .await
            .ok()
            .and_then(|s| s.status)
            .and_then(|s| s.status)
            .as_deref()
            == Some("NotReady")
    })
    .await;
    let msg = cond(
        &stores
            .get("refused")
            .await
            .unwrap()
            .status
            .and_then(|s| s.conditions),
        "Ready",
    )
    .unwrap()
    .2;
    assert!(!msg.contains("retries in") && !msg.contains("ms,"), "{msg}");
    env.server.assert_settled_silent(SILENCE).await;
}

/// A Destination deleted right after its `cleanup` changed is cleaned up as its last
/// spec says, whether or not the controller saw the change: `none` → `all` and an
/// immediate delete removes its files; `all` → `none` and an immediate delete keeps
/// them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_follows_the_cleanup_the_destination_had_when_deleted() {
    let env = start().await;
    env.git_store("local").await;
    let dests: Api<Destination> = Api::all(env.client.clone());
    for (name, from, to, files_stay) in [
        ("to-all", "none", "all", false),
        ("to-none", "all", "none", true),
    ] {
        env.create_destination(json!({
            "apiVersion": "platform.kratix.io/v1alpha1",
            "kind": "Destination",
            "metadata": {"name": name, "labels": {"target": name}},
            "spec": {"path": name, "cleanup": from,
                     "stateStoreRef": {"kind": "GitStateStore", "name": "local"}},
        }))
        .await;
        env.destination_ready(name).await;
        let work = format!("w-{name}");
        env.create_work(
            "default",
            &work,
            "cleanup",
            &work,
            "resource",
            &[(
                ".",
                vec![("promise", labels(&[("target", name)]))],
                vec![("cm.yaml", CM_YAML)],
            )],
        )
        .await;
        let file = format!("{name}/resources/default/cleanup/{work}/resource/5058f/cm.yaml");
        env.wait_file(&file, true).await;

        // The change and the deletion back to back: no wait for the controller between.
        dests
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"cleanup": to}})),
            )
            .await
            .unwrap();
        dests.delete(name, &DeleteParams::default()).await.unwrap();
        wait_for("Destination gone", || async {
            dests.get_opt(name).await.unwrap().is_none()
        })
        .await;
        if files_stay {
            assert!(
                env.files().contains(&file),
                "{name}: kept: {:?}",
                env.files()
            );
        } else {
            env.wait_file(&file, false).await;
            assert!(
                !env.files()
                    .iter()
                    .any(|f| f.starts_with(&format!("{name}/"))),
                "{name}: directory removed: {:?}",
                env.files()
            );
        }
    }
}
