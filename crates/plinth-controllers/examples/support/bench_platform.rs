//! The platform the health benchmarks run on: the embedded API server with every Kratix
//! CRD and a Promise `bench` whose requests are `Bench` (`bench.example.test/v1`) objects.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use plinth_apiserver::testing::TestServer;
use serde_json::{Value, json};

/// A started platform: the server (kept alive), a client, and the `Bench` requests in
/// `default`.
pub struct BenchPlatform {
    pub server: TestServer,
    pub client: kube::Client,
    pub requests: Api<DynamicObject>,
    /// The `benches` resource.
    pub resource: ApiResource,
}

/// Starts the server, registers the CRDs and creates the Promise `bench`; returns once
/// its requests can be listed.
pub async fn start() -> BenchPlatform {
    let server = TestServer::start().await.expect("API server");
    let client = server.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let api_crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "benches.bench.example.test"},
        "spec": {"group": "bench.example.test", "names": {"kind": "Bench", "plural": "benches", "singular": "bench"},
                 "scope": "Namespaced", "versions": [{"name": "v1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object"}}}}}]}});
    let mut all: Vec<Value> = plinth_api::crds::all_crds()
        .into_iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    all.push(plinth_api::request_crd::build_request_crd("bench", &api_crd).unwrap());
    for c in all {
        crds.create(&PostParams::default(), &serde_json::from_value(c).unwrap())
            .await
            .unwrap();
    }
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("bench.example.test", "v1", "Bench"),
        "benches",
    );
    let requests: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    while requests.list(&Default::default()).await.is_err() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let promises: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &plinth_controllers::support::resources::promise_resource(),
    );
    promises
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Promise", "metadata": {"name": "bench"}, "spec": {"api": api_crd}}))
            .unwrap(),
        )
        .await
        .unwrap();
    BenchPlatform {
        server,
        client,
        requests,
        resource: ar,
    }
}
