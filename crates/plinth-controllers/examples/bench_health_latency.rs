//! Latency of health records, for the four transports a HealthSource reads: the health
//! writer hands a record over (`HealthWriter::report`, as the health agent does when a
//! check's HealthRecord appears) → the request's `status.healthStatus` shows it, on the
//! embedded API server with the health controllers in-process.
//!
//! - **Redis stream** (`redis-server`) and **NATS JetStream** (`nats-server -js`): the
//!   writer as the agent runs it on a stream (no flush window, a 50 ms tick); the source
//!   consumes as messages come.
//! - **Bucket** (moto's S3) and **Git** (a bare repository on disk, `file://`): the writer
//!   as the agent runs it on a store (its default 10 s flush window, a 1 s tick); the
//!   source polls every 10 s (the shortest `pollInterval`). Each sample is written at a
//!   different moment of the poll cycle, so the figures spread over it rather than hit
//!   its worst case every time.
//!
//! A record of one request flips between `healthy` and `unhealthy`; each sample waits for
//! the request to follow (read every 2 ms); one warm-up record first. Prints p50/p95/p99/max
//! per transport.
//!
//! Run from the repository root: `cargo run --release -p plinth-controllers --example
//! bench_health_latency` (needs `redis-server`, `nats-server`, `git` and moto from
//! scripts/install-test-deps.sh, moto found in `$PLINTH_TEST_TOOLS` or `target/test-tools`;
//! `-- --samples N` for the streams (default 200), `-- --polled-samples N` for the bucket
//! and Git (default 20), `-- --only redis|nats|bucket|git`).

#[path = "support/bench_platform.rs"]
#[allow(dead_code)] // each benchmark uses what it needs of the shared platform
mod bench_platform;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Api, PostParams};
use plinth_api::HealthState;
use plinth_controllers::{Context, ControllerConfig};
use plinth_statestore::health::{
    HealthReport, HealthSink, HealthWriter, HealthWriterConfig, RecordKey, StoreSink,
};
use plinth_statestore::{
    BucketAuth, BucketConfig, GitConfig, NatsConfig, RedisConfig, StoreConfig, StreamConfig,
    StreamSink,
};
use serde_json::{Value, json};

/// The poll interval of the bucket and Git sources (the shortest a HealthSource takes).
const POLL: Duration = Duration::from_secs(10);

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn find(bin: &str) -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/sbin")])
        .map(|d| d.join(bin))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{bin} not found (scripts/install-test-deps.sh)"))
}

struct Child(std::process::Child, #[allow(dead_code)] tempfile::TempDir);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn spawn(bin: &Path, args: impl Fn(u16, &Path) -> Vec<String>) -> (Child, u16) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let child = std::process::Command::new(bin)
        .args(args(port, dir.path()))
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    (Child(child, dir), port)
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// One transport under test: the HealthSource's spec, the writer's sink, tick and
/// configuration, and how many samples to take.
struct Transport {
    name: &'static str,
    label: &'static str,
    spec: Value,
    sink: Arc<dyn HealthSink>,
    tick: Duration,
    writer: HealthWriterConfig,
    samples: usize,
    /// Spread the samples over the poll cycle (polled stores).
    spread: Option<Duration>,
}

/// The agent's writer configuration on a stream: no flush window, every run a heartbeat.
fn stream_writer() -> HealthWriterConfig {
    HealthWriterConfig {
        flush_window: Duration::ZERO,
        heartbeat_interval: Duration::from_secs(1),
        ..HealthWriterConfig::default()
    }
}

async fn redis(samples: usize, children: &mut Vec<Child>) -> Transport {
    let (c, port) = spawn(&find("redis-server"), |port, dir| {
        strings(&[
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--dir",
            dir.to_str().unwrap(),
            "--save",
            "",
            "--appendonly",
            "no",
        ])
    })
    .await;
    children.push(c);
    let url = format!("redis://127.0.0.1:{port}");
    Transport {
        name: "redis",
        label: "Redis stream (redis-server)",
        spec: json!({"redis": {"address": url, "stream": "health"}}),
        sink: Arc::new(StreamSink::new(StreamConfig::Redis(RedisConfig::new(
            url.clone(),
            "health",
        )))),
        tick: Duration::from_millis(50),
        writer: stream_writer(),
        samples,
        spread: None,
    }
}

async fn nats(samples: usize, children: &mut Vec<Child>) -> Transport {
    let (c, port) = spawn(&find("nats-server"), |port, dir| {
        strings(&[
            "-js",
            "-a",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-sd",
            dir.to_str().unwrap(),
        ])
    })
    .await;
    children.push(c);
    let url = format!("nats://127.0.0.1:{port}");
    Transport {
        name: "nats",
        label: "NATS JetStream (nats-server)",
        spec: json!({"nats": {"servers": [url], "stream": "HEALTH", "subject": "health.records"}}),
        sink: Arc::new(StreamSink::new(StreamConfig::Nats(NatsConfig::new(
            vec![url.clone()],
            "HEALTH",
            "health.records",
        )))),
        tick: Duration::from_millis(50),
        writer: stream_writer(),
        samples,
        spread: None,
    }
}

/// moto's S3 with the bucket `health`; the source reads it with the Secret `bench-s3`.
async fn bucket(
    samples: usize,
    children: &mut Vec<Child>,
    secrets: &Api<k8s_openapi::api::core::v1::Secret>,
) -> Transport {
    let tools = std::env::var_os("PLINTH_TEST_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/test-tools"));
    let moto = tools.join("venv/bin/moto_server");
    // Absolute: the server runs in its own directory.
    let moto = std::fs::canonicalize(&moto).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (scripts/install-test-deps.sh, or set PLINTH_TEST_TOOLS)",
            moto.display()
        )
    });
    let (c, port) = spawn(&moto, |port, _| {
        strings(&["-H", "127.0.0.1", "-p", &port.to_string()])
    })
    .await;
    children.push(c);
    plinth_statestore::install_tls_provider();
    reqwest::Client::new()
        .put(format!("http://127.0.0.1:{port}/health"))
        .send()
        .await
        .expect("bucket created");
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "bench-s3"},
                "stringData": {"accessKeyID": "k", "secretAccessKey": "s"}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let endpoint = format!("127.0.0.1:{port}");
    let mut cfg = BucketConfig::s3(
        endpoint.clone(),
        "health",
        BucketAuth::AccessKey {
            id: "k".into(),
            secret: "s".into(),
        },
    );
    cfg.insecure = true;
    cfg.path = "health".into();
    Transport {
        name: "bucket",
        label: "bucket (moto S3), `pollInterval: 10s`",
        spec: json!({"bucket": {"endpoint": endpoint, "bucketName": "health", "insecure": true,
                     "authMethod": "accessKey", "secretRef": {"name": "bench-s3", "namespace": "default"}},
                     "path": "health", "pollInterval": "10s"}),
        sink: Arc::new(StoreSink::new(StoreConfig::Bucket(cfg))),
        tick: Duration::from_secs(1),
        writer: HealthWriterConfig::default(),
        samples,
        spread: Some(POLL),
    }
}

/// A bare repository on disk, written by the writer's Git worker and read by the source.
fn git(samples: usize, dir: &Path) -> Transport {
    let bare = dir.join("health.git");
    let out = std::process::Command::new("git")
        .args(["init", "-q", "--bare", "-b", "main"])
        .arg(&bare)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git init: {out:?}");
    let url = format!("file://{}", bare.display());
    let mut cfg = GitConfig::new(url.clone(), "main", dir.join("writer"));
    cfg.path = "health".into();
    Transport {
        name: "git",
        label: "Git (bare repository, `file://`), `pollInterval: 10s`",
        spec: json!({"git": {"url": url, "branch": "main"}, "path": "health", "pollInterval": "10s"}),
        sink: Arc::new(StoreSink::new(StoreConfig::Git(cfg))),
        tick: Duration::from_secs(1),
        writer: HealthWriterConfig::default(),
        samples,
        spread: Some(POLL),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let count = |name: &str, default: usize| -> usize {
        match arg(name) {
            None => default,
            Some(v) => match v.parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => {
                    eprintln!("{name} {v:?}: expected a number of samples, at least 1");
                    std::process::exit(2);
                }
            },
        }
    };
    let samples = count("--samples", 200);
    let polled = count("--polled-samples", 20);
    let only = arg("--only");
    if let Some(o) = only.as_deref()
        && !["redis", "nats", "bucket", "git"].contains(&o)
    {
        eprintln!("--only {o:?}: expected redis, nats, bucket or git");
        std::process::exit(2);
    }
    let wanted = |t: &str| only.as_deref().is_none_or(|o| o == t);
    let bench_platform::BenchPlatform {
        server,
        client,
        requests,
        ..
    } = bench_platform::start().await;
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
    let sources: Api<plinth_api::HealthSource> = Api::all(client.clone());
    let secrets = Api::namespaced(client.clone(), "default");
    let work = tempfile::tempdir().unwrap();
    let mut children = Vec::new();
    let mut transports = Vec::new();
    if wanted("redis") {
        transports.push(redis(samples, &mut children).await);
    }
    if wanted("nats") {
        transports.push(nats(samples, &mut children).await);
    }
    if wanted("bucket") {
        transports.push(bucket(polled, &mut children, &secrets).await);
    }
    if wanted("git") {
        transports.push(git(polled, work.path()));
    }
    println!("| transport | samples | p50 | p95 | p99 | max |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for t in transports {
        let request = format!("req-{}", t.name);
        requests
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"apiVersion": "bench.example.test/v1",
                    "kind": "Bench", "metadata": {"name": request, "namespace": "default"}, "spec": {}}))
                .unwrap(),
            )
            .await
            .unwrap();
        sources
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"apiVersion": "platform.syntasso.io/v1alpha1",
                    "kind": "HealthSource", "metadata": {"name": t.name}, "spec": t.spec}))
                .unwrap(),
            )
            .await
            .unwrap();
        let writer = HealthWriter::start(t.sink, t.writer, Arc::new(jiff::Timestamp::now), t.tick);
        let key = RecordKey {
            namespace: "default".into(),
            promise: "bench".into(),
            request: request.clone(),
            definition_namespace: "default".into(),
            definition: "probe".into(),
        };
        let mut times = Vec::with_capacity(t.samples);
        // One warm-up record (the consumer joins the group, the clone is made, the caches
        // fill).
        for i in 0..=t.samples {
            if let (Some(cycle), true) = (t.spread, i > 0) {
                // A different point of the poll cycle each time (golden-ratio steps).
                let frac = (i as f64 * 0.618_034).fract();
                tokio::time::sleep(cycle.mul_f64(frac)).await;
            }
            let (state, want) = if i % 2 == 0 {
                (HealthState::Healthy, json!("healthy"))
            } else {
                (HealthState::Unhealthy, json!("unhealthy"))
            };
            let t0 = Instant::now();
            writer.report(HealthReport {
                key: key.clone(),
                state,
                details: None,
                run_at: jiff::Timestamp::now(),
                schedule: None,
            });
            loop {
                let r = requests.get(&request).await.unwrap();
                if r.data.pointer("/status/healthStatus/state") == Some(&want) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            if i > 0 {
                times.push(t0.elapsed());
            }
        }
        times.sort();
        let ms = |d: Duration| {
            let ms = d.as_secs_f64() * 1e3;
            if ms >= 1_000.0 {
                format!("{:.2} s", ms / 1e3)
            } else {
                format!("{ms:.1} ms")
            }
        };
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            t.label,
            t.samples,
            ms(pct(&times, 0.5)),
            ms(pct(&times, 0.95)),
            ms(pct(&times, 0.99)),
            ms(*times.last().unwrap()),
        );
    }
    drop(children);
}
