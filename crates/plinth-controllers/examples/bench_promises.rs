//! Promise install latency: time from creating a Promise with an API (no workflows) to
//! `Available`, for one Promise at a time and for 100 Promises created at once, on the
//! embedded API server with the controllers in-process.
//!
//! Run: `cargo run --release -p plinth-controllers --example bench_promises`

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use plinth_apiserver::testing::TestServer;
use plinth_controllers::{Context, ControllerConfig, promise};
use serde_json::{Value, json};

fn promise_json(i: usize) -> Value {
    let group = format!("bench{i}.example.test");
    json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Promise",
        "metadata": {"name": format!("bench-{i}")},
        "spec": {"api": {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("widgets.{group}")},
            "spec": {
                "group": group,
                "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
                "scope": "Namespaced",
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                    "type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "string"}}}}}}}],
            },
        }},
    })
}

async fn available(api: &Api<DynamicObject>, name: &str) -> bool {
    api.get(name)
        .await
        .is_ok_and(|p| plinth_api::constants::promise_status::is_available(&p.data["status"]))
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = TestServer::start().await.expect("API server");
    let client = server.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in plinth_api::crds::all_crds() {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("Kratix CRDs");
    }
    let ctx = Context::new(
        client.clone(),
        ControllerConfig {
            data_dir: server.data_dir().join("controllers"),
            ..ControllerConfig::default()
        },
    );
    tokio::spawn(promise::run(ctx));
    let promises: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &plinth_controllers::support::resources::promise_resource(),
    );

    // One at a time.
    let mut singles = Vec::new();
    for i in 0..20 {
        let start = Instant::now();
        promises
            .create(
                &PostParams::default(),
                &serde_json::from_value(promise_json(i)).unwrap(),
            )
            .await
            .unwrap();
        while !available(&promises, &format!("bench-{i}")).await {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        singles.push(start.elapsed());
    }
    singles.sort();
    println!(
        "one Promise, apply -> Available (20 runs): p50 {:?}, p95 {:?}, max {:?}",
        pct(&singles, 0.5),
        pct(&singles, 0.95),
        singles.last().unwrap()
    );

    // 100 at once.
    let start = Instant::now();
    for i in 100..200 {
        promises
            .create(
                &PostParams::default(),
                &serde_json::from_value(promise_json(i)).unwrap(),
            )
            .await
            .unwrap();
    }
    let created = start.elapsed();
    for i in 100..200 {
        while !available(&promises, &format!("bench-{i}")).await {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    println!(
        "100 Promises created at once: all Available after {:?} (creating took {:?})",
        start.elapsed(),
        created
    );
}
