//! Throttled fan-out against the embedded API server: with `maxInFlightPerPromise: 2`,
//! a Promise's requests run their configure workflows at most two at a time, both when
//! they are created and when a Promise change re-runs them all, and the Promise's status
//! counts how many requests have run with its latest revision. Jobs are finished by the
//! test itself, one at a time, standing in for the runner.

use crate::placement_support;

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use placement_support::{SILENCE, start_with, wait_for};
use plinth_controllers::promise;
use serde_json::{Value, json};

const LIMIT: usize = 2;
const REQUESTS: usize = 5;

fn pipeline(name: &str, word: &str) -> Value {
    json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "step", "image": "busybox", "command": ["sh", "-c", format!("echo {word}")]}]},
    })
}

fn fleet_promise(word: &str) -> Value {
    json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Promise",
        "metadata": {"name": "fleet"},
        "spec": {
            "api": {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": "ships.example.test"},
                "spec": {
                    "group": "example.test",
                    "names": {"kind": "Ship", "plural": "ships", "singular": "ship"},
                    "scope": "Namespaced",
                    "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                        "type": "object",
                        "properties": {"spec": {"type": "object", "properties": {"size": {"type": "string"}}}},
                    }}}],
                },
            },
            "workflows": {"resource": {"configure": [pipeline("first", word), pipeline("second", word)]}},
        },
    })
}

async fn configure_jobs(client: &Client) -> Vec<Job> {
    Api::<Job>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels(
            "kratix.io/promise-name=fleet,kratix.io/workflow-type=resource,kratix.io/workflow-action=configure",
        ))
        .await
        .unwrap()
        .items
}

fn running(job: &Job) -> bool {
    job.status
        .as_ref()
        .is_none_or(|s| s.succeeded.unwrap_or(0) == 0 && s.failed.unwrap_or(0) == 0)
}

/// Finishes running Jobs one at a time until `total` Jobs have succeeded, checking before
/// each step that no more than [`LIMIT`] requests have a run in flight; returns the
/// largest number seen.
async fn drain(client: &Client, total: usize) -> usize {
    let api: Api<Job> = Api::namespaced(client.clone(), "default");
    let mut max_seen = 0;
    let deadline = tokio::time::Instant::now() + placement_support::CONVERGE;
    loop {
        let jobs = configure_jobs(client).await;
        let done = jobs.iter().filter(|j| !running(j)).count();
        let mut in_flight: Vec<&Job> = jobs.iter().filter(|j| running(j)).collect();
        // A request between its two pipelines holds its place too: count requests.
        let mut requests: Vec<&str> = in_flight
            .iter()
            .map(|j| j.labels()["kratix.io/resource-name"].as_str())
            .collect();
        requests.sort();
        requests.dedup();
        assert!(
            requests.len() <= LIMIT,
            "{} requests in flight: {requests:?}",
            requests.len()
        );
        max_seen = max_seen.max(requests.len());
        if done >= total && in_flight.is_empty() {
            return max_seen;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {done} of {total} Jobs finished"
        );
        in_flight.sort_by_key(|j| j.metadata.creation_timestamp.clone());
        if let Some(j) = in_flight.first() {
            let patch = json!({"status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
            api.patch_status(
                &j.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .unwrap();
        }
        // Give the controllers time to start whatever the finished Job lets start.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn progress(client: &Client) -> Value {
    Api::<DynamicObject>::all_with(
        client.clone(),
        &plinth_controllers::support::resources::promise_resource(),
    )
    .get("fleet")
    .await
    .unwrap()
    .data["status"]["resourceRequests"]
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promise_change_reruns_its_requests_at_most_n_at_a_time() {
    let env = start_with(|c| c.max_in_flight_per_promise = LIMIT).await;
    tokio::spawn(promise::run(env.ctx.clone()));
    let client = &env.client;
    let promises: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &plinth_controllers::support::resources::promise_resource(),
    );
    promises
        .create(
            &PostParams::default(),
            &serde_json::from_value(fleet_promise("one")).unwrap(),
        )
        .await
        .unwrap();
    wait_for("fleet available", || async {
        promises.get("fleet").await.unwrap().data["status"]["status"] == "Available"
    })
    .await;
    let ships: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("example.test", "v1", "Ship"),
            "ships",
        ),
    );
    for i in 0..REQUESTS {
        ships
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"apiVersion": "example.test/v1", "kind": "Ship", "metadata": {"name": format!("ship-{i}")}, "spec": {"size": "s"}})).unwrap(),
            )
            .await
            .unwrap();
    }
    // New requests: never more than two at once, and two at once at some point.
    wait_for("first runs start", || async {
        !configure_jobs(client).await.is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(drain(client, 2 * REQUESTS).await, LIMIT);
    wait_for("all requests counted as updated", || async {
        progress(client).await
            == json!({"observedGeneration": 1, "total": REQUESTS, "updated": REQUESTS})
    })
    .await;

    // A Promise change re-runs every request, again at most two at a time, and the
    // Promise's status counts them as they move.
    promises
        .patch(
            "fleet",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": fleet_promise("two")["spec"]})),
        )
        .await
        .unwrap();
    wait_for("progress restarts at the new generation", || async {
        let p = progress(client).await;
        p["observedGeneration"] == 2
            && p["total"] == REQUESTS
            && p["updated"].as_u64() < Some(REQUESTS as u64)
    })
    .await;
    assert_eq!(drain(client, 4 * REQUESTS).await, LIMIT);
    wait_for("all requests on the new generation", || async {
        progress(client).await
            == json!({"observedGeneration": 2, "total": REQUESTS, "updated": REQUESTS})
    })
    .await;
    env.server.assert_settled_silent(SILENCE).await;
}
