//! A stopped health agent, with real stream servers (`redis-server`, `nats-server -js`).
//! The Destination is its own embedded API server running Plinth's `HealthAgent`, whose
//! `health-state-store-config` names the stream; the platform reads it with a stream
//! HealthSource. While the agent runs, every check run refreshes the record, so the request
//! stays healthy for longer than three intervals. Stopped, its request turns `unknown`
//! once three scheduled runs (and the grace) are missed, with one Warning naming the
//! record. Resumed, the agent hands over what its check wrote meanwhile and the request is
//! healthy again, by itself.

use crate::health_support;

use std::time::Duration;

use health_support::*;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use plinth_agent::health::{HealthAgent, HealthAgentConfig};
use plinth_api::HealthRecord;
use plinth_api::constants::health as names;
use plinth_apiserver::testing::TestServer;
use plinth_controllers::health::Clock;
use serde_json::{Value, json};

/// The Destination: its API server with the Kratix CRDs, the agent's store configuration,
/// a minutely HealthDefinition for request `a`, and the HealthRecord its first run wrote.
struct Destination {
    server: TestServer,
    dir: tempfile::TempDir,
}

const RECORD: &str = "a-probe";

impl Destination {
    async fn start(store: Value, first_run: i64) -> Destination {
        let server = TestServer::start().await.expect("Destination API server");
        let client = server.client();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in plinth_api::crds::all_crds() {
            crds.create(&PostParams::default(), &crd).await.unwrap();
        }
        let create = |doc: Value| {
            let client = client.clone();
            async move {
                let ns = doc["metadata"]["namespace"].as_str().map(String::from);
                let obj: kube::api::DynamicObject = serde_json::from_value(doc.clone()).unwrap();
                let gvk =
                    kube::api::GroupVersionKind::try_from(obj.types.as_ref().unwrap()).unwrap();
                let (ar, _) = kube::discovery::pinned_kind(&client, &gvk).await.unwrap();
                let api: Api<kube::api::DynamicObject> = match ns {
                    Some(ns) => Api::namespaced_with(client, &ns, &ar),
                    None => Api::all_with(client, &ar),
                };
                api.create(&PostParams::default(), &obj)
                    .await
                    .unwrap_or_else(|e| panic!("{doc}: {e}"));
            }
        };
        let namespaces: Api<Namespace> = Api::all(client.clone());
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "plinth-agent"}})).unwrap(),
            )
            .await
            .unwrap();
        let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "plinth-agent");
        configmaps
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({
                    "metadata": {"name": names::STORE_CONFIGMAP, "namespace": "plinth-agent"},
                    "data": store,
                }))
                .unwrap(),
            )
            .await
            .unwrap();
        create(json!({
            "apiVersion": "platform.kratix.io/v1alpha1", "kind": "HealthDefinition",
            "metadata": {"name": "probe", "namespace": "default"},
            "spec": {
                "resourceRef": {"name": "a", "namespace": "default"},
                "promiseRef": {"name": PROMISE},
                "schedule": "* * * * *",
                "input": "apiVersion: v1\nkind: ConfigMap\n",
                "workflow": {"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Pipeline",
                    "metadata": {"name": "check"},
                    "spec": {"containers": [{"name": "probe", "image": "busybox"}]}},
            }
        }))
        .await;
        // What `health-state-creator` applies after the check's run.
        create(json!({
            "apiVersion": "platform.kratix.io/v1alpha1", "kind": "HealthRecord",
            "metadata": {"name": RECORD, "namespace": "default",
                "labels": {names::DEFINITION_LABEL: "probe"}},
            "data": {"promiseRef": {"name": PROMISE},
                "resourceRef": {"name": "a", "namespace": "default"},
                "state": "healthy", "lastRun": first_run},
        }))
        .await;
        Destination {
            server,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// Starts the agent; the returned sender stops it (it flushes what it holds first).
    fn start_agent(
        &self,
    ) -> (
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<()>,
    ) {
        let mut cfg = HealthAgentConfig::new(self.dir.path().join("work"));
        cfg.interval = Duration::from_millis(500);
        let agent = HealthAgent::new(cfg, self.server.client());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(agent.run(async {
            let _ = stopped.await;
        }));
        (stop, task)
    }

    /// A check run: `health-state-creator` updates the record's `lastRun` (same state).
    async fn check_ran(&self, last_run: i64) {
        let records: Api<HealthRecord> = Api::namespaced(self.server.client(), "default");
        records
            .patch(
                RECORD,
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"lastRun": last_run}})),
            )
            .await
            .unwrap();
    }
}

/// The platform's copy of the record's `lastRun`.
async fn platform_last_run(env: &Env) -> Option<i64> {
    let records = env
        .records("default")
        .list(&Default::default())
        .await
        .ok()?;
    records.items.iter().find_map(|r| r.spec.data.last_run)
}

async fn stale_warnings(env: &Env) -> usize {
    env.events("Healthchecktest", "a", names::RECORD_EVENT_REASON)
        .await
        .iter()
        .filter(|(t, note)| t == "Warning" && note.contains("is stale"))
        .count()
}

/// The scenario, for the platform's source and the agent's store on one stream.
async fn stopped_and_resumed(env: &Env, store: Value) {
    env.create_request("default", "a").await;
    wait_ready(env, "stream-1").await;
    // The platform's clock stands at 2026-01-01T00:00:00Z; the check last ran 5 s ago.
    let t0 = env.clock.now().as_second();
    let dest = Destination::start(store, t0 - 5).await;
    let (stop, agent) = dest.start_agent();
    env.wait_state("default", "a", "healthy").await;

    // Running: a check every minute, each refreshing the record over the stream; four
    // minutes on, past three intervals, the request is still healthy.
    for minute in 1..=4 {
        env.clock.advance(60);
        let run = t0 + minute * 60 - 5;
        dest.check_ran(run).await;
        wait_for("the run's lastRun on the platform", || async {
            platform_last_run(env).await == Some(run)
        })
        .await;
    }
    let st = env.status("default", "a").await;
    assert_eq!(st["healthStatus"]["state"], "healthy", "{st:#}");
    let last_heard = t0 + 4 * 60 - 5;

    // Stopped: nothing reaches the platform. At 00:06:20 the runs of 00:04, 00:05 and
    // 00:06 are missed but the last is within its grace (30 s on a stream, which has no
    // poll to wait for): still healthy. At 00:06:40, unknown.
    stop.send(()).unwrap();
    agent.await.unwrap();
    env.clock.advance(140);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let st = env.status("default", "a").await;
    assert_eq!(
        st["healthStatus"]["state"], "healthy",
        "not stale before three runs are missed: {st:#}"
    );
    env.clock.advance(20);
    let st = env.wait_state("default", "a", "unknown").await;
    let entry = &st["healthStatus"]["healthRecords"][0];
    assert_eq!(entry["reason"], names::STALE_REASON, "{st:#}");
    assert_eq!(entry["lastRun"], last_heard, "the last run is kept");
    let heard = jiff::Timestamp::from_second(last_heard)
        .unwrap()
        .to_string();
    let message = entry["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("last heard from at {heard}")),
        "{message}"
    );
    wait_for("one Warning naming the stale record", || async {
        stale_warnings(env).await == 1
    })
    .await;

    // While the agent is down its checks keep running at the Destination; resumed, it
    // hands the latest record over and the request is healthy again.
    let now = env.clock.now().as_second();
    dest.check_ran(now - 5).await;
    let (stop, agent) = dest.start_agent();
    let st = env.wait_state("default", "a", "healthy").await;
    assert!(
        st["healthStatus"]["healthRecords"][0]
            .get("reason")
            .is_none(),
        "{st:#}"
    );
    assert_eq!(platform_last_run(env).await, Some(now - 5));
    assert_eq!(stale_warnings(env).await, 1, "the outage was reported once");
    stop.send(()).unwrap();
    agent.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn redis_a_stopped_agent_turns_its_request_unknown_and_back_when_it_resumes() {
    let Some(r) = redis_server().await else {
        return;
    };
    let env = start().await;
    redis_source(&env, &r).await;
    stopped_and_resumed(
        &env,
        json!({"stateStoreKind": "Redis", "address": r.redis_url(), "stream": "health"}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn nats_a_stopped_agent_turns_its_request_unknown_and_back_when_it_resumes() {
    let Some(n) = nats_server().await else { return };
    let env = start().await;
    nats_source(&env, &n).await;
    stopped_and_resumed(
        &env,
        json!({"stateStoreKind": "NATS", "servers": n.nats_url(), "stream": "HEALTH",
               "subject": "health.records"}),
    )
    .await;
}
