//! The `kratix` ConfigMap against the embedded API server: what the controllers could
//! not use is said on the ConfigMap as a Warning Event, never only in the log.

use crate::placement_support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use placement_support::{start, wait_event, wait_for};
use plinth_controllers::{ControllerConfig, config};
use serde_json::json;

const NS: &str = "kratix-platform-system";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_values_are_warned_about_on_the_configmap() {
    let env = start().await;
    tokio::spawn(config::watch(env.ctx.clone(), ControllerConfig::default()));
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), NS);
    let cm = json!({"metadata": {"name": "kratix"},
                    "data": {"config": "numberOfJobsToKeep: 3\nworkflows: {maxInFlightPerPromise: lots}\n"}});
    cms.create(&PostParams::default(), &serde_json::from_value(cm).unwrap())
        .await
        .unwrap();
    let (type_, _, note) = wait_event(&env.client, NS, "kratix", "InvalidConfigValue").await;
    assert_eq!(type_, "Warning");
    assert!(
        note.contains(
            r#"workflows.maxInFlightPerPromise: "lots" is not a non-negative integer; keeping 10"#
        ),
        "{note}"
    );
    wait_for("the usable key applies", || async {
        env.ctx.config().number_of_jobs_to_keep == 3
    })
    .await;
    assert_eq!(env.ctx.config().max_in_flight_per_promise, 10);

    // Keys written straight into data (not under data.config) are refused as a whole.
    cms.patch(
        "kratix",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"config": null, "numberOfJobsToKeep": "4"}})),
    )
    .await
    .unwrap();
    let (type_, _, note) = wait_event(&env.client, NS, "kratix", "InvalidConfig").await;
    assert_eq!(type_, "Warning");
    assert!(note.contains("data.config is missing"), "{note}");
    assert_eq!(env.ctx.config().number_of_jobs_to_keep, 3);
}
