//! Scheduler + WorkPlacement integration tests against the embedded API server and a
//! `file://` Git state store.

use crate::placement_support;

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use placement_support::*;
use plinth_api::{Destination, Work, WorkPlacement};
use plinth_controllers::work::scheduler::rendezvous_choice;
use serde_json::json;

const GROUP: &str = "5058f1af8388633f609cadb75a75dc9d";

fn dest_json(name: &str, labels: serde_json::Value, path: &str) -> serde_json::Value {
    json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Destination",
        "metadata": {"name": name, "labels": labels},
        "spec": {"path": path, "stateStoreRef": {"kind": "GitStateStore", "name": "default"}},
    })
}

/// A resource group is not placed on a Destination whose state store does not exist
/// while a Ready one matches: without the preference, the rendezvous choice would send
/// about half of these Works there, to fail for as long as the store is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_groups_go_to_ready_destinations_first() {
    let env = start().await;
    env.git_store("default").await;
    env.create_destination(dest_json("good", json!({"env": "dev"}), "good"))
        .await;
    env.destination_ready("good").await;
    let mut broken = dest_json("broken", json!({"env": "dev"}), "broken");
    broken["spec"]["stateStoreRef"]["name"] = "missing".into();
    env.create_destination(broken).await;

    let works: Vec<String> = (0..8).map(|i| format!("w{i}")).collect();
    let on_broken = works
        .iter()
        .filter(|w| rendezvous_choice("team-a", w, GROUP, ["good", "broken"]) == Some("broken"))
        .count();
    assert!(
        on_broken > 0,
        "the test needs Works that would go to broken"
    );
    for w in &works {
        let sel = vec![("promise", labels(&[("env", "dev")]))];
        env.create_work(
            "team-a",
            w,
            "widget",
            w,
            "configure",
            &[(".", sel, vec![("a.yaml", "a: 1\n")])],
        )
        .await;
    }
    for w in &works {
        env.work_condition("team-a", w, "Ready", "True", "AllWorkplacementsScheduled")
            .await;
        let wps = env.placements("team-a", w).await;
        let targets: Vec<_> = wps
            .iter()
            .map(|wp| wp.spec.target_destination_name.clone().unwrap_or_default())
            .collect();
        assert_eq!(targets, ["good"], "Work {w}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unscheduled_resource_work_is_placed_when_a_matching_destination_appears() {
    let env = start().await;
    env.git_store("default").await;
    env.create_destination(dest_json("dev", json!({"env": "dev"}), "dev"))
        .await;
    env.destination_ready("dev").await;

    let sel = vec![("promise", labels(&[("env", "testing")]))];
    env.create_work(
        "team-a",
        "widget-r1-configure",
        "widget",
        "r1",
        "configure",
        &[(".", sel, vec![("cm.yaml", "kind: ConfigMap\n")])],
    )
    .await;
    let msg = env
        .work_condition(
            "team-a",
            "widget-r1-configure",
            "ScheduleSucceeded",
            "False",
            "UnscheduledWorkloads",
        )
        .await;
    assert_eq!(
        msg,
        format!("No matching destination found for workloadGroups: [{GROUP}]")
    );
    let work = Api::<Work>::namespaced(env.client.clone(), "team-a")
        .get("widget-r1-configure")
        .await
        .unwrap();
    let st = work.status.unwrap();
    assert_eq!(
        (st.work_placements, st.work_placements_created),
        (Some(1), Some(0))
    );
    assert!(
        env.placements("team-a", "widget-r1-configure")
            .await
            .is_empty()
    );

    // The new Destination attracts the Work without any other trigger.
    env.create_destination(dest_json("testing", json!({"env": "testing"}), "testing"))
        .await;
    env.work_condition(
        "team-a",
        "widget-r1-configure",
        "ScheduleSucceeded",
        "True",
        "AllWorkplacementsScheduled",
    )
    .await;
    let wps = env.placements("team-a", "widget-r1-configure").await;
    assert_eq!(wps.len(), 1);
    assert_eq!(
        wps[0].name_any(),
        format!("widget-r1-configure.testing-5058f")
    );
    assert_eq!(
        wps[0].spec.target_destination_name.as_deref(),
        Some("testing")
    );
    let wp = env.placement_ready("team-a", &wps[0].name_any()).await;
    assert!(
        !wp.status.unwrap().version_id.unwrap_or_default().is_empty(),
        "versionID recorded"
    );
    env.wait_file(
        "testing/resources/team-a/widget/r1/configure/5058f/cm.yaml",
        true,
    )
    .await;
    assert_eq!(
        env.show("testing/resources/team-a/widget/r1/configure/5058f/cm.yaml"),
        "kind: ConfigMap\n"
    );
    assert!(
        !env.files()
            .iter()
            .any(|f| f.starts_with("dev/resources/team-a")),
        "nothing written to the non-matching Destination"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendezvous_placement_is_deterministic_and_stable() {
    let env = start().await;
    env.git_store("default").await;
    let names = ["d-a", "d-b", "d-c"];
    for n in names {
        env.create_destination(dest_json(n, json!({"tier": "gold"}), n))
            .await;
    }
    for n in names {
        env.destination_ready(n).await;
    }
    let sel = vec![("resource-workflow", labels(&[("tier", "gold")]))];
    env.create_work(
        "team-a",
        "w1",
        "widget",
        "r1",
        "configure",
        &[(".", sel, vec![("a.yaml", "a: 1\n")])],
    )
    .await;
    env.work_condition(
        "team-a",
        "w1",
        "Ready",
        "True",
        "AllWorkplacementsScheduled",
    )
    .await;
    let expected = rendezvous_choice("team-a", "w1", GROUP, names.iter().copied()).unwrap();
    let wps = env.placements("team-a", "w1").await;
    assert_eq!(wps.len(), 1);
    assert_eq!(
        wps[0].spec.target_destination_name.as_deref(),
        Some(expected)
    );

    // Re-reconcile several times (spec changes bump the generation): never moves, never duplicates.
    let works: Api<Work> = Api::namespaced(env.client.clone(), "team-a");
    for i in 0..3 {
        works
            .patch("w1", &PatchParams::default(), &Patch::Merge(json!({"spec": {"lastExecutionTimestamp": format!("2026-01-0{}T00:00:00Z", i + 1)}})))
            .await
            .unwrap();
        let want_gen = works.get("w1").await.unwrap().metadata.generation;
        wait_for("placement follows the Work generation", || async {
            let wps = env.placements("team-a", "w1").await;
            wps.len() == 1 && wps[0].spec.generation == want_gen
        })
        .await;
        let wps = env.placements("team-a", "w1").await;
        assert_eq!(
            wps[0].spec.target_destination_name.as_deref(),
            Some(expected)
        );
    }
    // A new, equally matching Destination does not steal the placed group.
    env.create_destination(dest_json("d-z", json!({"tier": "gold"}), "d-z"))
        .await;
    env.destination_ready("d-z").await;
    let wps = env.placements("team-a", "w1").await;
    assert_eq!(wps.len(), 1);
    assert_eq!(
        wps[0].spec.target_destination_name.as_deref(),
        Some(expected)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relabelled_destination_marks_placement_misplaced() {
    let env = start().await;
    env.git_store("default").await;
    env.create_destination(dest_json("dev", json!({"env": "dev"}), "dev"))
        .await;
    env.destination_ready("dev").await;
    let sel = vec![("promise", labels(&[("env", "dev")]))];
    env.create_work(
        "team-a",
        "w2",
        "widget",
        "r2",
        "configure",
        &[(".", sel, vec![("a.yaml", "a: 1\n")])],
    )
    .await;
    env.work_condition(
        "team-a",
        "w2",
        "Ready",
        "True",
        "AllWorkplacementsScheduled",
    )
    .await;
    let wp_name = env.placements("team-a", "w2").await[0].name_any();
    env.placement_ready("team-a", &wp_name).await;

    env.relabel_destination("dev", json!({"env": "prod"})).await;
    let msg = env
        .work_condition(
            "team-a",
            "w2",
            "ScheduleSucceeded",
            "False",
            "DestinationSelectorMismatch",
        )
        .await;
    assert!(msg.contains(GROUP), "{msg}");
    env.work_condition("team-a", "w2", "Ready", "False", "Misplaced")
        .await;
    let wps: Api<WorkPlacement> = Api::namespaced(env.client.clone(), "team-a");
    wait_for(
        "misplaced label and conditions on the WorkPlacement",
        || async {
            let wp = wps.get(&wp_name).await.unwrap();
            wp.labels().get("kratix.io/misplaced").map(String::as_str) == Some("true")
                && cond(
                    &wp.status.as_ref().and_then(|s| s.conditions.clone()),
                    "ScheduleSucceeded",
                )
                .is_some_and(|c| c.1 == "DestinationSelectorMismatch")
                && cond(&wp.status.and_then(|s| s.conditions), "Ready")
                    .is_some_and(|c| c.1 == "Misplaced")
        },
    )
    .await;
    // Never moved.
    assert_eq!(env.placements("team-a", "w2").await.len(), 1);

    // Relabel back: correct again.
    env.relabel_destination("dev", json!({"env": "dev"})).await;
    env.work_condition(
        "team-a",
        "w2",
        "Ready",
        "True",
        "AllWorkplacementsScheduled",
    )
    .await;
    wait_for("misplaced label removed", || async {
        !wps.get(&wp_name)
            .await
            .unwrap()
            .labels()
            .contains_key("kratix.io/misplaced")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependency_work_goes_to_every_matching_non_strict_destination() {
    let env = start().await;
    env.git_store("default").await;
    // a is strict and labelled, b has no labels.
    let mut a = dest_json("a", json!({"env": "prod"}), "a");
    a["spec"]["strictMatchLabels"] = json!(true);
    env.create_destination(a).await;
    env.create_destination(dest_json("b", json!({}), "b")).await;
    env.create_destination(dest_json("c", json!({"zone": "eu"}), "c"))
        .await;
    env.create_work(
        "kratix-platform-system",
        "p1-install",
        "p1",
        "",
        "install",
        &[(".", vec![], vec![("ns.yaml", "kind: Namespace\n")])],
    )
    .await;
    env.work_condition(
        "kratix-platform-system",
        "p1-install",
        "Ready",
        "True",
        "AllWorkplacementsScheduled",
    )
    .await;
    let mut targets: Vec<String> = env
        .placements("kratix-platform-system", "p1-install")
        .await
        .iter()
        .map(|w| w.spec.target_destination_name.clone().unwrap())
        .collect();
    targets.sort();
    assert_eq!(targets, ["b", "c"]);
    env.wait_file("b/dependencies/p1/install/5058f/ns.yaml", true)
        .await;
    env.wait_file("c/dependencies/p1/install/5058f/ns.yaml", true)
        .await;
    assert!(
        !env.files()
            .iter()
            .any(|f| f.starts_with("a/dependencies/p1"))
    );

    // A Destination registered later receives the dependencies too.
    env.create_destination(dest_json("d", json!({}), "d")).await;
    env.wait_file("d/dependencies/p1/install/5058f/ns.yaml", true)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escaping_workload_path_is_a_terminal_condition_and_nothing_is_written() {
    let env = start().await;
    env.git_store("default").await;
    env.create_destination(dest_json("dev", json!({}), "dev"))
        .await;
    env.destination_ready("dev").await;
    let before = env.commits();
    let files_before = env.files();
    env.create_work(
        "team-a",
        "evil",
        "widget",
        "r3",
        "configure",
        &[(
            ".",
            vec![],
            vec![
                ("ok.yaml", "a: 1\n"),
                ("../../../../escape.yaml", "pwned: true\n"),
            ],
        )],
    )
    .await;
    let wp_name = "evil.dev-5058f";
    let wps: Api<WorkPlacement> = Api::namespaced(env.client.clone(), "team-a");
    wait_for("InvalidWorkloadPath on the WorkPlacement", || async {
        wps.get_opt(wp_name).await.unwrap().is_some_and(|wp| {
            cond(&wp.status.and_then(|s| s.conditions), "WriteSucceeded").is_some_and(|c| {
                c.0 == "False"
                    && c.1 == "InvalidWorkloadPath"
                    && c.2.contains("../../../../escape.yaml")
            })
        })
    })
    .await;
    let msg = env
        .work_condition(
            "team-a",
            "evil",
            "ScheduleSucceeded",
            "False",
            "WorkplacementsFailing",
        )
        .await;
    assert!(
        msg.contains(wp_name) && msg.contains("escape.yaml"),
        "{msg}"
    );
    env.work_condition("team-a", "evil", "Ready", "False", "WorkplacementsFailing")
        .await;
    // Not retried in a loop: the resourceVersion settles.
    let rv1 = wps.get(wp_name).await.unwrap().resource_version();
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(
        wps.get(wp_name).await.unwrap().resource_version(),
        rv1,
        "terminal condition is not rewritten in a loop"
    );
    assert_eq!(env.commits(), before, "nothing committed");
    assert_eq!(env.files(), files_before);
    assert!(!env.files().iter().any(|f| f.contains("escape")));
    let ev = wait_event(&env.client, "team-a", wp_name, "FailedWriteToDestination").await;
    assert_eq!(
        (ev.0.as_str(), ev.1.as_str()),
        ("Warning", "WorkPlacementController")
    );
    assert!(ev.2.contains("escape.yaml"), "{}", ev.2);
    let ev = wait_event(&env.client, "team-a", "evil", "WorkplacementsFailing").await;
    assert_eq!(
        (ev.0.as_str(), ev.1.as_str()),
        ("Warning", "WorkController")
    );

    // Deleting such a Work still completes.
    env.delete_work("team-a", "evil").await;
    assert!(wps.get_opt(wp_name).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_work_removes_its_placements_and_files() {
    let env = start().await;
    env.git_store("default").await;
    env.create_destination(dest_json("dev", json!({}), "dev"))
        .await;
    env.destination_ready("dev").await;
    env.create_work(
        "team-a",
        "w4",
        "widget",
        "r4",
        "configure",
        &[
            (".", vec![], vec![("a.yaml", "a: 1\n")]),
            ("extra", vec![], vec![("extra/b.yaml", "b: 2\n")]),
        ],
    )
    .await;
    env.work_condition(
        "team-a",
        "w4",
        "Ready",
        "True",
        "AllWorkplacementsScheduled",
    )
    .await;
    let extra_id = plinth_api::hash::workload_group_id("extra");
    let extra_dir = format!(
        "dev/resources/team-a/widget/r4/configure/{}",
        &extra_id[..5]
    );
    env.wait_file(
        "dev/resources/team-a/widget/r4/configure/5058f/a.yaml",
        true,
    )
    .await;
    env.wait_file(&format!("{extra_dir}/extra/b.yaml"), true)
        .await;
    let work = Api::<Work>::namespaced(env.client.clone(), "team-a")
        .get("w4")
        .await
        .unwrap();
    assert!(
        work.finalizers()
            .iter()
            .any(|f| f == "kratix.io/work-cleanup")
    );
    let wps = env.placements("team-a", "w4").await;
    assert_eq!(wps.len(), 2);
    for wp in &wps {
        assert_eq!(wp.labels()["kratix.io/work"], "w4");
        assert_eq!(wp.labels()["kratix.io/targetDestinationName"], "dev");
        assert_eq!(wp.labels()["kratix.io/pipeline-name"], "configure");
        assert!(
            wp.finalizers()
                .iter()
                .any(|f| f == "finalizers.workplacement.kratix.io/repo-cleanup")
        );
        let owner = &wp.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("Work", "w4", Some(true))
        );
    }

    // Dropping a group removes its (dangling) placement and directory.
    let works: Api<Work> = Api::namespaced(env.client.clone(), "team-a");
    let mut spec = serde_json::to_value(&work.spec).unwrap();
    spec["workloadGroups"]
        .as_array_mut()
        .unwrap()
        .retain(|g| g["directory"] == ".");
    works
        .patch(
            "w4",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"workloadGroups": spec["workloadGroups"]}})),
        )
        .await
        .unwrap();
    env.wait_file(&format!("{extra_dir}/extra/b.yaml"), false)
        .await;
    wait_for("dangling placement deleted", || async {
        env.placements("team-a", "w4").await.len() == 1
    })
    .await;

    env.delete_work("team-a", "w4").await;
    assert!(env.placements("team-a", "w4").await.is_empty());
    assert!(
        !env.files()
            .iter()
            .any(|f| f.starts_with("dev/resources/team-a/widget/r4"))
    );
    assert!(
        env.files()
            .iter()
            .any(|f| f == "dev/resources/kratix-canary-configmap.yaml"),
        "canaries untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placements_of_a_deleted_destination_do_not_block_deletion() {
    let env = start().await;
    env.git_store("default").await;
    env.create_destination(dest_json("worker-1", json!({}), "worker-1"))
        .await;
    env.destination_ready("worker-1").await;
    env.create_work(
        "team-a",
        "w5",
        "widget",
        "r5",
        "configure",
        &[(".", vec![], vec![("a.yaml", "a: 1\n")])],
    )
    .await;
    env.work_condition(
        "team-a",
        "w5",
        "Ready",
        "True",
        "AllWorkplacementsScheduled",
    )
    .await;
    let wp_name = env.placements("team-a", "w5").await[0].name_any();
    env.placement_ready("team-a", &wp_name).await;

    // cleanup: none (default) — the Destination just goes.
    let dests: Api<Destination> = Api::all(env.client.clone());
    dests
        .delete("worker-1", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("Destination gone", || async {
        dests.get_opt("worker-1").await.unwrap().is_none()
    })
    .await;
    let wps: Api<WorkPlacement> = Api::namespaced(env.client.clone(), "team-a");
    wait_for("placement marked and released", || async {
        wps.get(&wp_name).await.ok().is_some_and(|wp| {
            wp.finalizers().is_empty()
                && cond(&wp.status.and_then(|s| s.conditions), "Ready")
                    .is_some_and(|c| c.1 == "DestinationNotFound")
        })
    })
    .await;
    env.work_condition("team-a", "w5", "Ready", "False", "Misplaced")
        .await;
    env.delete_work("team-a", "w5").await;
    assert!(wps.get_opt(&wp_name).await.unwrap().is_none());
    // Files stay: nobody manages them any more, and nobody else's files were touched.
    assert!(
        env.files()
            .iter()
            .any(|f| f == "worker-1/resources/team-a/widget/r5/configure/5058f/a.yaml")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pipelines_of_one_request_get_separate_directories() {
    // Two configure pipelines of the same request both emit config.yaml.
    let env = start().await;
    env.git_store("default").await;
    env.create_destination(dest_json("dev", json!({}), "dev"))
        .await;
    env.destination_ready("dev").await;
    env.create_work(
        "team-a",
        "widget-r1-p1",
        "widget",
        "r1",
        "p1",
        &[(".", vec![], vec![("config.yaml", "from: p1\n")])],
    )
    .await;
    env.create_work(
        "team-a",
        "widget-r1-p2",
        "widget",
        "r1",
        "p2",
        &[(".", vec![], vec![("config.yaml", "from: p2\n")])],
    )
    .await;
    env.wait_file("dev/resources/team-a/widget/r1/p1/5058f/config.yaml", true)
        .await;
    env.wait_file("dev/resources/team-a/widget/r1/p2/5058f/config.yaml", true)
        .await;
    assert_eq!(
        env.show("dev/resources/team-a/widget/r1/p1/5058f/config.yaml"),
        "from: p1\n"
    );
    assert_eq!(
        env.show("dev/resources/team-a/widget/r1/p2/5058f/config.yaml"),
        "from: p2\n"
    );
    env.delete_work("team-a", "widget-r1-p1").await;
    env.wait_file("dev/resources/team-a/widget/r1/p1/5058f/config.yaml", false)
        .await;
    assert_eq!(
        env.show("dev/resources/team-a/widget/r1/p2/5058f/config.yaml"),
        "from: p2\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_without_workload_groups_is_ready_with_no_placements() {
    // Empty pipeline output makes no placements, directories or commits.
    let env = start().await;
    env.git_store("default").await;
    env.create_destination(dest_json("dev", json!({}), "dev"))
        .await;
    env.destination_ready("dev").await;
    let commits = env.commits();
    env.create_work("team-a", "empty", "widget", "r9", "configure", &[])
        .await;
    env.work_condition(
        "team-a",
        "empty",
        "Ready",
        "True",
        "AllWorkplacementsScheduled",
    )
    .await;
    let st = Api::<Work>::namespaced(env.client.clone(), "team-a")
        .get("empty")
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(
        (st.work_placements, st.work_placements_created),
        (Some(0), Some(0))
    );
    assert!(env.placements("team-a", "empty").await.is_empty());
    assert_eq!(env.commits(), commits);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_controllers_keep_placements_and_make_no_commits_for_unchanged_work() {
    let mut env = start().await;
    env.git_store("default").await;
    for n in ["d-a", "d-b"] {
        env.create_destination(dest_json(n, json!({"pool": "x"}), n))
            .await;
        env.destination_ready(n).await;
    }
    let sel = vec![("promise", labels(&[("pool", "x")]))];
    env.create_work(
        "team-a",
        "keep",
        "widget",
        "r1",
        "configure",
        &[(".", sel, vec![("a.yaml", "a: 1\n")])],
    )
    .await;
    env.work_condition(
        "team-a",
        "keep",
        "Ready",
        "True",
        "AllWorkplacementsScheduled",
    )
    .await;
    let before = env.placements("team-a", "keep").await;
    assert_eq!(before.len(), 1);
    let wp_before = env.placement_ready("team-a", &before[0].name_any()).await;
    let commits = env.commits();

    env.restart_controllers().await;
    env.create_work(
        "team-a",
        "after",
        "widget",
        "r2",
        "configure",
        &[(".", vec![], vec![("b.yaml", "b: 1\n")])],
    )
    .await;
    env.work_condition(
        "team-a",
        "after",
        "Ready",
        "True",
        "AllWorkplacementsScheduled",
    )
    .await;
    let after_wp = env.placements("team-a", "after").await[0].name_any();
    env.placement_ready("team-a", &after_wp).await;
    let after = env.placements("team-a", "keep").await;
    assert_eq!(after.len(), 1);
    assert_eq!(
        after[0].name_any(),
        before[0].name_any(),
        "not moved or duplicated"
    );
    assert_eq!(
        after[0].status.as_ref().unwrap().version_id,
        wp_before.status.as_ref().unwrap().version_id,
        "unchanged placement keeps its version"
    );
    assert_eq!(
        env.commits(),
        commits + 1,
        "only the new Work made a commit"
    );
}
