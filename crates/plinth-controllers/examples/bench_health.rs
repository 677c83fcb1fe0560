//! HealthSource benchmark on the embedded API server and moto:
//! 1. 10,000 HealthRecords in a bucket (1,000 requests × 10 checks), 1% of them changing
//!    before each poll: time per poll, process RSS, and writes per poll (HealthRecord
//!    writes and request status writes, counted by watching the API).
//! 2. Record written to the store → request's `healthStatus` updated: p50/p95 with the
//!    manual trigger and with a 10 s poll interval.
//!
//! Run: `cargo run --release -p plinth-controllers --example bench_health`
//! (`-- --records N` for another size; needs moto from scripts/install-test-deps.sh).

#[path = "support/bench_platform.rs"]
mod bench_platform;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use plinth_api::{HealthRecord, HealthSource};
use plinth_controllers::{Context, ControllerConfig};
use plinth_statestore::{BucketAuth, BucketConfig, StateStore, StoreConfig, WriteOp, WriteRequest};
use serde_json::json;

const CHECKS_PER_REQUEST: usize = 10;

fn record(i: usize, state: &str, last_run: i64) -> Vec<u8> {
    let req = i / CHECKS_PER_REQUEST;
    serde_saphyr::to_string(&json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "HealthRecord",
        "metadata": {"name": format!("r{req}-c{}", i % CHECKS_PER_REQUEST), "namespace": "default"},
        "data": {"promiseRef": {"name": "bench"}, "resourceRef": {"name": format!("r{req}"), "namespace": "default"},
                 "state": state, "lastRun": last_run},
    }))
    .unwrap()
    .into_bytes()
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn rss_mib() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

struct Bench {
    client: kube::Client,
    store: StateStore,
    requests: Api<DynamicObject>,
    sources: Api<HealthSource>,
    trigger: usize,
}

impl Bench {
    async fn put(&self, items: Vec<(usize, &str, i64)>) {
        for chunk in items.chunks(500) {
            let ops = chunk
                .iter()
                .map(|(i, s, t)| WriteOp::Put {
                    path: format!("health/{i}.yaml"),
                    content: record(*i, s, *t),
                })
                .collect();
            self.store
                .write(WriteRequest {
                    name: "bench".into(),
                    ops,
                })
                .await
                .expect("write");
        }
    }

    /// Triggers a poll and returns when the source recorded it.
    async fn poll_now(&mut self) -> Duration {
        self.trigger += 1;
        let v = self.trigger.to_string();
        let t0 = Instant::now();
        let body = json!({"metadata": {"annotations": {plinth_api::constants::health::POLL_NOW_ANNOTATION: v}}});
        self.sources
            .patch("bench", &PatchParams::default(), &Patch::Merge(&body))
            .await
            .unwrap();
        loop {
            let hs = self.sources.get("bench").await.unwrap();
            if hs.status.and_then(|s| s.last_handled_trigger) == Some(v.clone()) {
                return t0.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn wait_state(&self, name: &str, state: &str) {
        loop {
            let r = self.requests.get(name).await.unwrap();
            if r.data.pointer("/status/healthStatus/state") == Some(&json!(state)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

fn count(client: &kube::Client, ar: Option<ApiResource>) -> Arc<AtomicUsize> {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let cfg = watcher::Config::default();
    let stream = match ar {
        None => watcher(
            Api::<DynamicObject>::all_with(
                client.clone(),
                &ApiResource::erase::<HealthRecord>(&()),
            ),
            cfg,
        )
        .boxed(),
        Some(ar) => watcher(Api::<DynamicObject>::all_with(client.clone(), &ar), cfg).boxed(),
    };
    tokio::spawn(stream.applied_objects().for_each(move |_| {
        n2.fetch_add(1, Ordering::Relaxed);
        async {}
    }));
    n
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let records: usize = args
        .iter()
        .position(|a| a == "--records")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let tools = std::env::var_os("PLINTH_TEST_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/test-tools"));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut moto = std::process::Command::new(tools.join("venv/bin/moto_server"))
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("moto_server (scripts/install-test-deps.sh)");
    plinth_statestore::install_tls_provider();
    let http = reqwest::Client::new();
    while http
        .put(format!("http://127.0.0.1:{port}/health"))
        .send()
        .await
        .is_err()
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut cfg = BucketConfig::s3(
        format!("127.0.0.1:{port}"),
        "health",
        BucketAuth::AccessKey {
            id: "k".into(),
            secret: "s".into(),
        },
    );
    cfg.insecure = true;
    let store = StateStore::open(StoreConfig::Bucket(cfg)).await.unwrap();

    let bench_platform::BenchPlatform {
        server,
        client,
        requests,
        resource: ar,
    } = bench_platform::start().await;
    let n_requests = records.div_ceil(CHECKS_PER_REQUEST);
    for r in 0..n_requests {
        requests.create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": "bench.example.test/v1",
            "kind": "Bench", "metadata": {"name": format!("r{r}"), "namespace": "default"}, "spec": {}})).unwrap()).await.unwrap();
    }
    let t = Instant::now();
    let mut b = Bench {
        client: client.clone(),
        store,
        requests,
        sources: Api::all(client.clone()),
        trigger: 0,
    };
    b.put((0..records).map(|i| (i, "healthy", 1)).collect())
        .await;
    println!(
        "setup: {n_requests} requests, {records} records in the bucket ({:.1} s)",
        t.elapsed().as_secs_f64()
    );

    let ctx = Context::new(
        client.clone(),
        ControllerConfig {
            data_dir: server.data_dir().join("controllers"),
            ..ControllerConfig::default()
        },
    );
    tokio::spawn(plinth_controllers::health::run(
        ctx,
        Arc::new(plinth_controllers::health::SystemClock),
    ));
    let rec_writes = count(&b.client, None);
    let req_writes = count(&b.client, Some(ar.clone()));
    b.sources.create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": "platform.syntasso.io/v1alpha1",
        "kind": "HealthSource", "metadata": {"name": "bench"},
        "spec": {"bucket": {"endpoint": format!("127.0.0.1:{port}"), "bucketName": "health", "insecure": true,
                 "authMethod": "accessKey", "secretRef": {"name": "bench"}}, "path": "health", "pollInterval": "10m"}})).unwrap()).await.unwrap();
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(client.clone(), "default");
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "bench"},
        "stringData": {"accessKeyID": "k", "secretAccessKey": "s"}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let first = b.poll_now().await;
    println!(
        "first poll (all {records} records applied): {:.2} s, RSS {:.0} MiB",
        first.as_secs_f64(),
        rss_mib()
    );
    b.wait_state(&format!("r{}", n_requests - 1), "healthy")
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;

    println!(
        "\n| poll | changed in store | poll time | HealthRecord writes | request status writes | process RSS |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    let changed = (records / 100).max(1);
    for round in 1..=5i64 {
        let state = if round % 2 == 1 {
            "degraded"
        } else {
            "healthy"
        };
        b.put(
            (0..changed)
                .map(|k| (k * 100 % records + round as usize % 100, state, 1 + round))
                .collect(),
        )
        .await;
        let (r0, q0) = (
            rec_writes.load(Ordering::Relaxed),
            req_writes.load(Ordering::Relaxed),
        );
        let d = b.poll_now().await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        println!(
            "| {round} | {changed} | {:.0} ms | {} | {} | {:.0} MiB |",
            d.as_secs_f64() * 1000.0,
            rec_writes.load(Ordering::Relaxed) - r0,
            req_writes.load(Ordering::Relaxed) - q0,
            rss_mib()
        );
    }
    let (r0, q0) = (
        rec_writes.load(Ordering::Relaxed),
        req_writes.load(Ordering::Relaxed),
    );
    let d = b.poll_now().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!(
        "| settled | 0 | {:.0} ms | {} | {} | {:.0} MiB |",
        d.as_secs_f64() * 1000.0,
        rec_writes.load(Ordering::Relaxed) - r0,
        req_writes.load(Ordering::Relaxed) - q0,
        rss_mib()
    );

    // Latency: the last record (of a request no round touched) flips between unhealthy
    // and healthy.
    let (key, req) = (records - 1, format!("r{}", n_requests - 1));
    let mut last_run = 1000;
    let mut trig = Vec::new();
    let mut timed = Vec::new();
    for sample in 0..30 {
        if sample == 20 {
            let body = json!({"spec": {"pollInterval": "10s"}});
            b.sources
                .patch("bench", &PatchParams::default(), &Patch::Merge(&body))
                .await
                .unwrap();
        }
        last_run += 1;
        let state = if last_run % 2 == 0 {
            "unhealthy"
        } else {
            "healthy"
        };
        let t0 = Instant::now();
        b.put(vec![(key, state, last_run)]).await;
        if sample < 20 {
            b.poll_now().await;
        }
        b.wait_state(&req, state).await;
        if sample < 20 {
            trig.push(t0.elapsed())
        } else {
            timed.push(t0.elapsed())
        }
    }
    trig.sort();
    timed.sort();
    println!("\n| store write → healthStatus | samples | p50 | p95 |");
    println!("| --- | --- | --- | --- |");
    println!(
        "| manual trigger | {} | {:.0} ms | {:.0} ms |",
        trig.len(),
        pct(&trig, 0.5).as_secs_f64() * 1000.0,
        pct(&trig, 0.95).as_secs_f64() * 1000.0
    );
    println!(
        "| pollInterval 10s | {} | {:.1} s | {:.1} s |",
        timed.len(),
        pct(&timed, 0.5).as_secs_f64(),
        pct(&timed, 0.95).as_secs_f64()
    );
    let _ = moto.kill();
    let _ = moto.wait();
}
