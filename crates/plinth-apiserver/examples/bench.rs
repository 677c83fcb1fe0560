//! API server benchmark: durable creates/s in-process, list latency for 10,000 objects,
//! watch delivery latency with 100 watchers, and the data-file size after 100,000
//! updates with compaction.
//!
//! Run: `cargo run --release -p plinth-apiserver --example bench`

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use plinth_apiserver::testing::TestServer;

fn cm(name: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c.metadata.labels = Some(BTreeMap::from([("app".to_string(), "bench".to_string())]));
    c.data = Some(BTreeMap::from([("payload".to_string(), "x".repeat(200))]));
    c
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

async fn ns(client: &kube::Client, name: &str) {
    let mut n = Namespace::default();
    n.metadata.name = Some(name.into());
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &n)
        .await
        .unwrap();
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let ts = TestServer::start_with(|c| {
        c.compaction_interval = Duration::from_secs(1);
        c.compaction_min_retained = 1000;
        c.maintenance_interval = Duration::from_secs(1);
    })
    .await
    .unwrap();
    let client = ts.client();

    // 1. Durable creates/s (64 concurrent in-process clients).
    ns(&client, "bench").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "bench");
    let n = 10_000;
    let start = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &cm(&format!("cm-{i:05}")))
                    .await
                    .unwrap()
            }
        })
        .buffer_unordered(64)
        .for_each(|_| async {})
        .await;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "creates: {n} durable creates in {secs:.2}s = {:.0} creates/s (64 concurrent, in-process kube::Client)",
        n as f64 / secs
    );

    // 2. List latency, 10,000 objects.
    let mut lat = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        let l = api.list(&ListParams::default()).await.unwrap();
        assert_eq!(l.items.len(), n);
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "list 10,000 objects (kube::Client, typed): p50 {:.1} ms, max {:.1} ms",
        pct(&mut lat.clone(), 0.5),
        pct(&mut lat, 1.0)
    );
    let mut lat = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        let req = http::Request::get("/api/v1/namespaces/bench/configmaps")
            .body(Vec::new())
            .unwrap();
        let body = client.request_text(req).await.unwrap();
        assert!(body.len() > n * 200);
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "list 10,000 objects (raw JSON response): p50 {:.1} ms, max {:.1} ms",
        pct(&mut lat.clone(), 0.5),
        pct(&mut lat, 1.0)
    );
    let mut lat = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        let l = api
            .list(&ListParams::default().labels("app=bench").limit(500))
            .await
            .unwrap();
        assert_eq!(l.items.len(), 500);
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "list first page of 500 with a label selector: p50 {:.1} ms",
        pct(&mut lat, 0.5)
    );

    // 3. Watch delivery latency with 100 watchers.
    ns(&client, "watch").await;
    let wapi: Api<ConfigMap> = Api::namespaced(client.clone(), "watch");
    let starts: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let samples: Arc<Mutex<Vec<f64>>> = Arc::default();
    let events = 200;
    let rv = wapi
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut watchers = Vec::new();
    for _ in 0..100 {
        let mut stream = wapi
            .watch(&WatchParams::default().timeout(120), &rv)
            .await
            .unwrap()
            .boxed();
        let starts = starts.clone();
        let samples = samples.clone();
        watchers.push(tokio::spawn(async move {
            let mut seen = 0;
            while let Some(ev) = stream.try_next().await.unwrap() {
                if let WatchEvent::Added(c) = ev {
                    let now = Instant::now();
                    let t0 = starts.lock().unwrap()[c.metadata.name.as_ref().unwrap()];
                    samples
                        .lock()
                        .unwrap()
                        .push((now - t0).as_secs_f64() * 1000.0);
                    seen += 1;
                    if seen == events {
                        return;
                    }
                }
            }
        }));
    }
    for i in 0..events {
        let name = format!("w-{i}");
        starts.lock().unwrap().insert(name.clone(), Instant::now());
        wapi.create(&PostParams::default(), &cm(&name))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for w in watchers {
        tokio::time::timeout(Duration::from_secs(60), w)
            .await
            .unwrap()
            .unwrap();
    }
    let mut s = samples.lock().unwrap().clone();
    println!(
        "watch delivery, 100 watchers x {events} events ({} deliveries), write start to receipt: p50 {:.2} ms, p99 {:.2} ms",
        s.len(),
        pct(&mut s.clone(), 0.5),
        pct(&mut s, 0.99)
    );

    // 4. Data-file size after 100,000 updates with compaction.
    let objs = 100;
    ns(&client, "upd").await;
    let uapi: Api<ConfigMap> = Api::namespaced(client.clone(), "upd");
    for i in 0..objs {
        uapi.create(&PostParams::default(), &cm(&format!("u-{i}")))
            .await
            .unwrap();
    }
    let total = 100_000usize;
    let start = Instant::now();
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut checkpoints = Vec::new();
    for quarter in 0..4 {
        futures::stream::iter(0..total / 4)
            .map(|i| {
                let uapi = uapi.clone();
                let done = done.clone();
                async move {
                    let name = format!("u-{}", (i + quarter * total / 4) % objs);
                    let p =
                        serde_json::json!({"data": {"n": (i + quarter * total / 4).to_string()}});
                    uapi.patch(&name, &PatchParams::default(), &Patch::Merge(p))
                        .await
                        .unwrap();
                    done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            })
            .buffer_unordered(64)
            .for_each(|_| async {})
            .await;
        checkpoints.push(ts.server().data_file_size());
    }
    let secs = start.elapsed().as_secs_f64();
    // Let one more compaction + checkpoint run.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    ts.server().maintain().await.unwrap();
    let size = ts.server().data_file_size();
    println!(
        "updates: {total} merge-patch updates of {objs} objects in {secs:.1}s = {:.0} updates/s",
        total as f64 / secs
    );
    println!(
        "data file (db + WAL) after 25k/50k/75k/100k updates: {} / {} / {} / {} KiB; after final compaction + checkpoint: {} KiB ({} live objects, revision log compacted to the last 1000 revisions every 1 s)",
        checkpoints[0] / 1024,
        checkpoints[1] / 1024,
        checkpoints[2] / 1024,
        checkpoints[3] / 1024,
        size / 1024,
        n + events + objs,
    );
}
