//! A request pinned to a Destination whose state store then breaks or disappears says
//! so on its WorkPlacement (`StateStoreNotReady`, naming the action) and can be moved: labelling its WorkPlacement `plinth.dev/reschedule=true` removes it (leaving
//! the files in the dead store, with a Warning) and its Work is placed again on a Ready
//! matching Destination; deleting the placement of a store that no longer exists does
//! the same instead of waiting forever.

use crate::placement_support;

use std::collections::BTreeMap;

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use placement_support::{start, wait_for};
use plinth_api::{GitStateStore, WorkPlacement};
use serde_json::json;

fn dest(name: &str, store: &str) -> serde_json::Value {
    json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Destination",
        "metadata": {"name": name, "labels": {"env": "dev"}},
        "spec": {"path": name, "stateStoreRef": {"kind": "GitStateStore", "name": store}}})
}

fn target(wp: &WorkPlacement) -> String {
    wp.spec.target_destination_name.clone().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placement_on_a_dead_store_is_moved_by_label_or_by_deleting_it() {
    let env = start().await;
    env.git_store("store-a").await;
    // A second repository for the second Destination.
    let repo_b = env.repo.with_file_name("state-b.git");
    plinth_statestore::git::init_bare(&repo_b, "main").unwrap();
    let stores: Api<GitStateStore> = Api::all(env.client.clone());
    stores
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "store-b"},
            "spec": {"url": format!("file://{}", repo_b.display()), "branch": "main", "authMethod": "basicAuth"}})).unwrap())
        .await
        .unwrap();
    env.create_destination(dest("d-a", "store-a")).await;
    env.create_destination(dest("d-b", "store-b")).await;
    env.destination_ready("d-a").await;
    env.destination_ready("d-b").await;
    let sel = BTreeMap::from([("env".to_string(), "dev".to_string())]);
    env.create_work(
        "team-a",
        "w61",
        "widget",
        "r61",
        "configure",
        &[(".", vec![("promise", sel)], vec![("a.yaml", "a: 1\n")])],
    )
    .await;
    let wps: Api<WorkPlacement> = Api::namespaced(env.client.clone(), "team-a");
    let placed = |not_on: Option<String>| {
        let wps = wps.clone();
        async move {
            let items = wps.list(&Default::default()).await.unwrap().items;
            let live: Vec<&WorkPlacement> = items
                .iter()
                .filter(|w| w.metadata.deletion_timestamp.is_none())
                .collect();
            match live.as_slice() {
                [wp] if Some(target(wp)) != not_on => Some((*wp).clone()),
                _ => None,
            }
        }
    };
    wait_for("placed", || async { placed(None).await.is_some() }).await;
    let first = placed(None).await.unwrap();
    env.placement_ready("team-a", &first.name_any()).await;
    let first_dest = target(&first);
    let (first_store, other_dest) = if first_dest == "d-a" {
        ("store-a", "d-b")
    } else {
        ("store-b", "d-a")
    };

    // The pinned Destination's store breaks (its repository URL now points nowhere).
    stores
        .patch(
            first_store,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"url": "file:///nonexistent/state.git"}})),
        )
        .await
        .unwrap();
    wait_for("store NotReady", || async {
        stores
            .get(first_store)
            .await
            .unwrap()
            .status
            .and_then(|s| s.status)
            .as_deref()
            == Some("NotReady")
    })
    .await;
    // The pinned placement says its store is not ready, and how to move it.
    wait_for("the pinned placement shows the store problem", || async {
        wps.get(&first.name_any())
            .await
            .ok()
            .and_then(|w| w.status)
            .and_then(|s| s.conditions)
            .is_some_and(|c| {
                c.iter().any(|c| {
                    c.type_ == "WriteSucceeded"
                        && c.status == "False"
                        && c.reason == "StateStoreNotReady"
                        && c.message.contains("plinth.dev/reschedule=true")
                }) && c.iter().any(|c| c.type_ == "Ready" && c.status == "False")
            })
    })
    .await;
    // The documented action: label the placement.
    wps.patch(
        &first.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"plinth.dev/reschedule": "true"}}})),
    )
    .await
    .unwrap();
    wait_for("re-placed on the Ready Destination", || async {
        placed(Some(first_dest.clone()))
            .await
            .is_some_and(|wp| target(&wp) == other_dest)
            && wps
                .get_opt(&first.name_any())
                .await
                .unwrap()
                .is_none_or(|w| target(&w) != first_dest)
    })
    .await;
    let second = placed(None).await.unwrap();
    env.placement_ready("team-a", &second.name_any()).await;

    // Now the second Destination's store is deleted outright: deleting the placement
    // releases it (nothing to clean up), and the Work goes back to the repaired first.
    stores
        .patch(first_store, &PatchParams::default(), &Patch::Merge(json!({"spec": {"url": if first_store == "store-a" { env.repo_url() } else { format!("file://{}", repo_b.display()) }}})))
        .await
        .unwrap();
    env.destination_ready(&first_dest).await;
    let second_store = if first_store == "store-a" {
        "store-b"
    } else {
        "store-a"
    };
    stores
        .delete(second_store, &DeleteParams::default())
        .await
        .unwrap();
    wait_for("store gone", || async {
        stores.get_opt(second_store).await.unwrap().is_none()
    })
    .await;
    wps.delete(&second.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    wait_for("re-placed after deleting the placement", || async {
        placed(Some(other_dest.to_string()))
            .await
            .is_some_and(|wp| target(&wp) == first_dest)
    })
    .await;
    let third = placed(None).await.unwrap();
    env.placement_ready("team-a", &third.name_any()).await;
}
