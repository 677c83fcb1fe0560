//! Series named after an object go with the object: a request's scheduling and write
//! series when its last Work is deleted, a Destination's when it is deleted, a state
//! store's, a Promise's when they are deleted. Creating and deleting requests leaves
//! `/metrics` as it was.

use crate::placement_support;

use kube::api::{Api, DeleteParams};
use placement_support::*;
use plinth_api::{Destination, GitStateStore, Promise};
use serde_json::json;

const REQUESTS: usize = 20;

fn dest_json(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Destination",
        "metadata": {"name": name, "labels": {"env": "dev"}},
        "spec": {"path": name, "stateStoreRef": {"kind": "GitStateStore", "name": "default"}},
    })
}

/// Creates the Work of request `name` in `ns` and waits until it is written.
async fn placed_request(env: &Env, ns: &str, name: &str) {
    let sel = vec![("promise", labels(&[("env", "dev")]))];
    let file = format!("{name}.yaml");
    env.create_work(
        ns,
        name,
        "widget",
        name,
        "configure",
        &[(".", sel, vec![(file.as_str(), "a: 1\n")])],
    )
    .await;
    env.work_condition(ns, name, "Ready", "True", "AllWorkplacementsScheduled")
        .await;
    for wp in env.placements(ns, name).await {
        env.placement_ready(ns, &name_of(&wp)).await;
    }
}

/// Waits until the metrics text satisfies `ok`, panicking with `what` and the text.
async fn wait_metrics(env: &Env, what: &str, ok: impl Fn(&str) -> bool) {
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        let text = env.ctx.metrics.encode();
        if ok(&text) {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for: {what}\n{text}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Deletes cluster-scoped `name` of kind `K` and waits until no series contains `label`.
async fn deleted_without_series<K>(env: &Env, name: &str, label: &str)
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::all(env.client.clone())
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    let what = format!("{} {name}'s series gone", K::kind(&()));
    wait_metrics(env, &what, |t| !t.contains(label)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_objects_leave_no_series() {
    let env = start().await;
    // `run_all` runs it beside the controllers; the test harness starts them one by one.
    let pruner = tokio::spawn(plinth_controllers::observe::forget_deleted(env.ctx.clone()));
    let m = env.ctx.metrics.clone();
    env.git_store("default").await;
    env.create_destination(dest_json("dev")).await;
    env.destination_ready("dev").await;

    // A request named `shared` lives in two namespaces.
    placed_request(&env, "default", "shared").await;
    placed_request(&env, "team-a", "shared").await;
    let outcomes = m.workplacement_outcomes.len();
    let writes = m.workplacement_writes.len();
    assert!(outcomes >= 2 && writes >= 1, "{}", m.encode());

    let names: Vec<String> = (0..REQUESTS).map(|i| format!("r{i}")).collect();
    for n in &names {
        placed_request(&env, "team-a", n).await;
    }
    let text = m.encode();
    for n in &names {
        let series = format!(r#"resource="{n}",namespace="team-a",destination="dev""#);
        assert!(text.contains(&series), "no series for {n}:\n{text}");
    }
    assert!(m.workplacement_outcomes.len() >= outcomes + REQUESTS);
    assert!(m.workplacement_writes.len() >= writes + REQUESTS);

    for n in &names {
        env.delete_work("team-a", n).await;
    }
    wait_metrics(&env, "the deleted requests' series gone", |_| {
        m.workplacement_outcomes.len() == outcomes && m.workplacement_writes.len() == writes
    })
    .await;
    let text = m.encode();
    assert!(!text.contains(r#"resource="r"#), "{text}");

    // `shared` in default goes; team-a's keeps its series, the write series (which has
    // no namespace label) included.
    env.delete_work("default", "shared").await;
    wait_metrics(&env, "default/shared's outcome series gone", |t| {
        !t.contains(r#"resource="shared",namespace="default""#)
    })
    .await;
    let text = m.encode();
    assert!(
        text.contains(r#"resource="shared",namespace="team-a""#)
            && text.contains(r#"kratix_workplacement_writes_total{result="success",promise="widget",resource="shared""#),
        "{text}"
    );

    // Deleting the Destination removes every series naming it.
    deleted_without_series::<Destination>(&env, "dev", r#"destination="dev""#).await;

    // Deleting the state store removes its series.
    assert!(m.encode().contains(r#"store="default""#));
    deleted_without_series::<GitStateStore>(&env, "default", r#"store="default""#).await;

    // Deleting the Promise removes every series naming it: here a pipeline run (no
    // runner in this harness, so it is recorded as the Job watch would).
    m.observe_pipeline(
        "widget",
        "configure",
        "succeeded",
        std::time::Duration::from_secs(1),
    );
    assert!(m.encode().contains(r#"promise="widget""#));
    let promise: Promise = serde_json::from_value(json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Promise",
        "metadata": {"name": "widget"},
        "spec": {},
    }))
    .unwrap();
    Api::<Promise>::all(env.client.clone())
        .create(&Default::default(), &promise)
        .await
        .unwrap();
    deleted_without_series::<Promise>(&env, "widget", r#"promise="widget""#).await;
    pruner.abort();
}
