//! Latency of the stream HealthSources: the health writer hands a record over
//! (`HealthWriter::report`) → the request's `status.healthStatus` shows it, for a Redis
//! stream and a NATS JetStream stream, on the embedded API server with the health
//! controllers in-process. A record of one request flips between `healthy` and `unhealthy`
//! `--samples N` times (default 200), each time waiting for the request to follow; prints
//! p50/p95/p99/max per transport.
//!
//! Run: `cargo run --release -p plinth-controllers --example bench_health_streams`
//! (needs `redis-server` and `nats-server` on PATH or in /usr/sbin, from
//! scripts/install-test-deps.sh; `-- --samples N`, `-- --only redis|nats`).

#[path = "support/bench_platform.rs"]
#[allow(dead_code)] // each benchmark uses what it needs of the shared platform
mod bench_platform;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Api, PostParams};
use plinth_api::HealthState;
use plinth_controllers::{Context, ControllerConfig};
use plinth_statestore::health::{HealthReport, HealthWriter, HealthWriterConfig, RecordKey};
use plinth_statestore::{NatsConfig, RedisConfig, StreamConfig, StreamSink};
use serde_json::{Value, json};

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

async fn spawn(bin: &str, args: impl Fn(u16, &Path) -> Vec<String>) -> (Child, u16) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let child = std::process::Command::new(find(bin))
        .args(args(port, dir.path()))
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    (Child(child, dir), port)
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
    let samples: usize = arg("--samples").and_then(|v| v.parse().ok()).unwrap_or(200);
    let only = arg("--only");
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
    let mut children = Vec::new();
    let mut transports: Vec<(&str, Value, StreamConfig)> = Vec::new();
    if only.as_deref().is_none_or(|o| o == "redis") {
        let (c, port) = spawn("redis-server", |port, dir| {
            [
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
            ]
            .map(String::from)
            .to_vec()
        })
        .await;
        children.push(c);
        let url = format!("redis://127.0.0.1:{port}");
        transports.push((
            "redis",
            json!({"redis": {"address": url, "stream": "health"}}),
            StreamConfig::Redis(RedisConfig::new(url.clone(), "health")),
        ));
    }
    if only.as_deref().is_none_or(|o| o == "nats") {
        let (c, port) = spawn("nats-server", |port, dir| {
            [
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-sd",
                dir.to_str().unwrap(),
            ]
            .map(String::from)
            .to_vec()
        })
        .await;
        children.push(c);
        let url = format!("nats://127.0.0.1:{port}");
        transports.push((
            "nats",
            json!({"nats": {"servers": [url], "stream": "HEALTH", "subject": "health.records"}}),
            StreamConfig::Nats(NatsConfig::new(
                vec![url.clone()],
                "HEALTH",
                "health.records",
            )),
        ));
    }
    println!("| transport | samples | p50 | p95 | p99 | max |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for (name, spec, cfg) in transports {
        let request = format!("req-{name}");
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
                    "kind": "HealthSource", "metadata": {"name": name}, "spec": spec}))
                .unwrap(),
            )
            .await
            .unwrap();
        let writer = HealthWriter::start(
            Arc::new(StreamSink::new(cfg)),
            HealthWriterConfig {
                flush_window: Duration::ZERO,
                heartbeat_interval: Duration::from_secs(1),
                ..HealthWriterConfig::default()
            },
            Arc::new(jiff::Timestamp::now),
            plinth_agent_tick(),
        );
        let key = RecordKey {
            namespace: "default".into(),
            promise: "bench".into(),
            request: request.clone(),
            definition_namespace: "default".into(),
            definition: "probe".into(),
        };
        let mut times = Vec::with_capacity(samples);
        // One warm-up record (the consumer joins the group, the caches fill).
        for i in 0..=samples {
            let state = if i % 2 == 0 {
                HealthState::Healthy
            } else {
                HealthState::Unhealthy
            };
            let want = json!(if i % 2 == 0 { "healthy" } else { "unhealthy" });
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
        println!(
            "| {name} | {samples} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms |",
            pct(&times, 0.5).as_secs_f64() * 1e3,
            pct(&times, 0.95).as_secs_f64() * 1e3,
            pct(&times, 0.99).as_secs_f64() * 1e3,
            times.last().unwrap().as_secs_f64() * 1e3,
        );
    }
    drop(children);
}

/// The writer's tick on a stream, as the health agent sets it (`STREAM_TICK`, 50 ms).
fn plinth_agent_tick() -> Duration {
    Duration::from_millis(50)
}
