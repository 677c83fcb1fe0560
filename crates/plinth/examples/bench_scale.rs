//! Scale on a real `plinth up`: N resource requests applied at once, time until every one
//! is Reconciled, for a Promise whose resource configure workflow is K `busybox`
//! pipelines each writing two files.
//!
//! Build the binary and the example in release, then run:
//!
//! ```text
//! cargo build --release -p plinth --bin plinth --example bench_scale
//! cargo run --release -p plinth --example bench_scale -- --requests 1000 [--pipelines 1] [--kill 5] [--seed 1]
//! ```
//!
//! Prints, for one run: the sandbox floor measured first in the same process (a Pod of
//! the containers that run in a sandbox — the user's alone, or all four with
//! `BENCH_UP_ARGS=--sandbox-adapters` — through the runner, times N × K Pods over the
//! cores), the time to apply
//! the N requests through the API (32 concurrent creates), the time until all are
//! Reconciled (followed with one watch of the requests, as an observer should: polling
//! with a list of all N would add the benchmark's own N² work to the server's) and requests/s, Git commits, API writes per request (the store's revision
//! counter), peak RSS of the `plinth up` process (`VmHWM`), the data directory's size after
//! a graceful stop and a compaction to the last 1,000 revisions (what the server keeps) with its parts, a real `kubectl apply -f`
//! of the N requests (an annotation added, so every object is patched) in ms per object and
//! the peak RSS including it,
//! and the load average before and after. `--kill K` kills `plinth up` with SIGKILL at K
//! seeded random moments during the run and restarts it on the same data dir.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use plinth_runner::{
    ClusterAccess, EngineMode, RunOptions, RunnerConfig, RunnerError, SandboxMode, run_pod_once,
};
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

/// Scale on a real `plinth up`: N resource requests at once, timed until all are
/// Reconciled, with the API writes, memory, Git commits and watch delivery of the run.
/// Build both in release first:
/// `cargo build --release -p plinth --bin plinth --example bench_scale`.
#[derive(clap::Parser)]
#[command(name = "bench_scale")]
struct Args {
    /// How many resource requests to create.
    #[arg(long, default_value_t = 100)]
    requests: usize,
    /// Pipelines in the resource configure workflow (each one `busybox` container
    /// writing two files).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pipelines: u64,
    /// Kill `plinth up` with SIGKILL this many times at seeded moments, restarting it on
    /// the same data directory; the run must still converge.
    #[arg(long = "kill", default_value_t = 0)]
    kills: usize,
    /// Seed of the kill moments.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Concurrent creates of the requests.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..))]
    concurrency: u64,
    /// Give up when not all requests are Reconciled after this many seconds.
    #[arg(long = "timeout-s", default_value_t = 3600)]
    timeout_s: u64,
    /// Ignored: passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// `VmHWM` of a process in KiB.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn dir_bytes(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else {
        return std::fs::symlink_metadata(p).map(|m| m.len()).unwrap_or(0);
    };
    rd.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            _ => e.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}

struct NoApi;

impl ClusterAccess for NoApi {
    async fn config_map(&self, _: &str, _: &str) -> Result<Option<ConfigMap>, RunnerError> {
        Ok(None)
    }
    async fn secret(&self, _: &str, _: &str) -> Result<Option<Secret>, RunnerError> {
        Ok(None)
    }
    async fn service_account_token(
        &self,
        _: &str,
        _: &str,
        _: &Pod,
        _: Vec<String>,
        _: i64,
    ) -> Result<String, RunnerError> {
        Ok("token".into())
    }
}

/// Mean time of a Pod of sandboxed `true` containers through the runner's bubblewrap
/// sandbox, over `runs` runs after 3 warm-up runs: the four a pipeline Pod has (reader,
/// user container, work-writer, status-writer) `with_adapters`, else the user's alone
/// (what is left in a sandbox when Plinth's adapters run in the runner's process).
async fn sandbox_pod_floor(runs: u32, with_adapters: bool) -> anyhow::Result<Duration> {
    let dir = tempfile::tempdir()?;
    let mut cfg = RunnerConfig::new(dir.path().join("data"), "127.0.0.1", 6443, "");
    cfg.sandbox = SandboxMode::Bwrap;
    cfg.engine = EngineMode::Disabled;
    let mount = |n: &str, p: &str| json!({"name": n, "mountPath": p});
    let c = |name: &str| {
        json!({"name": name, "image": "busybox", "command": ["true"], "volumeMounts": [
            mount("in", "/kratix/input"), mount("out", "/kratix/output"), mount("md", "/kratix/metadata")]})
    };
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "floor", "namespace": "bench"},
        "spec": {
            "volumes": [{"name": "in", "emptyDir": {}}, {"name": "out", "emptyDir": {}}, {"name": "md", "emptyDir": {}}],
            "initContainers": if with_adapters { vec![c("reader"), c("user"), c("work-writer")] } else { vec![] },
            "containers": [if with_adapters { c("status-writer") } else { c("user") }]
        }
    }))?;
    let mut total = Duration::ZERO;
    for i in 0..runs + 3 {
        let t = Instant::now();
        let st = run_pod_once(&NoApi, &cfg, &pod, RunOptions::default()).await?;
        anyhow::ensure!(
            st.phase.as_deref() == Some("Succeeded"),
            "floor Pod failed: {:?}",
            st.phase
        );
        if i >= 3 {
            total += t.elapsed();
        }
    }
    Ok(total / runs)
}

/// The `plinth up` child process and a client for it.
struct Up {
    bin: PathBuf,
    data: PathBuf,
    metrics: SocketAddr,
    child: Child,
    client: kube::Client,
}

impl Up {
    async fn start(bin: &Path, data: &Path, metrics: SocketAddr) -> anyhow::Result<Up> {
        let kc_path = data.join("kubeconfig");
        let _ = std::fs::remove_file(&kc_path);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(data.with_extension("log"))?;
        let mut cmd = Command::new(bin);
        cmd.args(["up", "--listen", "127.0.0.1:0", "--metrics-addr"])
            .arg(metrics.to_string());
        // Extra `plinth up` flags for experiments, e.g. `--max-parallel-jobs 8`.
        if let Ok(extra) = std::env::var("BENCH_UP_ARGS") {
            cmd.args(extra.split_whitespace());
        }
        let child = cmd
            .arg("--data-dir")
            .arg(data)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        let deadline = Instant::now() + Duration::from_secs(120);
        let client = loop {
            anyhow::ensure!(Instant::now() < deadline, "plinth up not ready in 120 s");
            if kc_path.exists()
                && let Ok(kc) = Kubeconfig::read_from(&kc_path)
                && let Ok(cfg) =
                    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await
                && let Ok(c) = kube::Client::try_from(cfg)
                && c.apiserver_version().await.is_ok()
            {
                break c;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        Ok(Up {
            bin: bin.to_path_buf(),
            data: data.to_path_buf(),
            metrics,
            child,
            client,
        })
    }

    fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    async fn restart(&mut self) -> anyhow::Result<()> {
        self.kill9();
        let fresh = Up::start(&self.bin, &self.data, self.metrics).await?;
        *self = fresh;
        Ok(())
    }

    /// SIGTERM, then waits for the graceful stop (compaction, WAL checkpoint).
    fn stop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill9();
    }
}

fn api(
    client: &kube::Client,
    g: &str,
    k: &str,
    plural: &str,
    ns: Option<&str>,
) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, "v1alpha1", k), plural);
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

fn promise(pipelines: usize) -> Value {
    let pipes: Vec<Value> = (0..pipelines)
        .map(|p| {
            let script = format!(
                "for f in a b; do printf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: %s-{p}-%s\\n  namespace: default\\ndata:\\n  request: %s\\n' \"$KRATIX_OBJECT_NAME\" $f \"$KRATIX_OBJECT_NAME\" > /kratix/output/$f.yaml; done"
            );
            json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Pipeline", "metadata": {"name": format!("sh{p}")},
                "spec": {"containers": [{"name": "sh", "image": "busybox", "command": ["sh", "-c"], "args": [script]}]}})
        })
        .collect();
    json!({
        "apiVersion": "platform.kratix.io/v1alpha1", "kind": "Promise", "metadata": {"name": "scale"},
        "spec": {
            "api": {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "scales.test.kratix.io"},
                "spec": {"group": "test.kratix.io", "scope": "Namespaced", "names": {"kind": "Scale", "plural": "scales", "singular": "scale"},
                    "versions": [{"name": "v1alpha1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}},
            "workflows": {"resource": {"configure": pipes}}
        }
    })
}

fn request(i: usize) -> Value {
    json!({"apiVersion": "test.kratix.io/v1alpha1", "kind": "Scale", "metadata": {"name": format!("r{i}"), "namespace": "default"}, "spec": {"i": i}})
}

fn reconciled(o: &DynamicObject) -> bool {
    o.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Reconciled" && c["status"] == "True")
}

/// How many objects `api` lists, in pages of 500 as `kubectl get` reads them, so the
/// count does not make the server answer 10,000 objects in one piece.
async fn count_paged(api: &Api<DynamicObject>) -> anyhow::Result<usize> {
    let (mut n, mut token) = (0, None::<String>);
    loop {
        let mut lp = ListParams::default().limit(500);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api.list_metadata(&lp).await?;
        n += page.items.len();
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            return Ok(n);
        }
    }
}

/// The store's revision counter (the resourceVersion of a list).
async fn revision(client: &kube::Client) -> anyhow::Result<u64> {
    let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let l = ns.list_metadata(&ListParams::default().limit(1)).await?;
    Ok(l.metadata
        .resource_version
        .unwrap_or_default()
        .parse()
        .unwrap_or(0))
}

fn commits(repo: &Path) -> u64 {
    Command::new("git")
        .arg("--git-dir")
        .arg(repo)
        .args(["rev-list", "--count", "main"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(0)
}

/// Creates the requests not yet acknowledged, `concurrency` at a time; a request whose
/// create fails (the server was killed) stays in `pending`.
async fn create_requests(client: &kube::Client, pending: &mut BTreeSet<usize>, concurrency: usize) {
    let requests = api(client, "test.kratix.io", "Scale", "scales", Some("default"));
    let todo: Vec<usize> = pending.iter().copied().collect();
    let done: Vec<usize> = futures::stream::iter(todo)
        .map(|i| {
            let requests = requests.clone();
            async move {
                let obj: DynamicObject = serde_json::from_value(request(i)).ok()?;
                match requests.create(&PostParams::default(), &obj).await {
                    Ok(_) => Some(i),
                    Err(kube::Error::Api(e)) if e.code == 409 => Some(i),
                    Err(_) => None,
                }
            }
        })
        .buffer_unordered(concurrency)
        .filter_map(|r| async move { r })
        .collect()
        .await;
    for i in done {
        pending.remove(&i);
    }
}

/// The requests seen and those Reconciled, kept from one watch of the requests (a list,
/// then its events), so that watching the run does not list every request again and
/// again: a list of all N every 250 ms grows the server's work with N², which is the
/// benchmark's load, not the platform's.
struct ReconciledCount {
    seen: Arc<Mutex<(BTreeSet<String>, BTreeSet<String>)>>,
    task: tokio::task::JoinHandle<()>,
}

impl ReconciledCount {
    fn start(client: &kube::Client) -> ReconciledCount {
        use kube::runtime::{WatchStreamExt, watcher};
        let requests = api(client, "test.kratix.io", "Scale", "scales", Some("default"));
        let seen: Arc<Mutex<(BTreeSet<String>, BTreeSet<String>)>> = Arc::default();
        let keep = seen.clone();
        let task = tokio::spawn(async move {
            let mut events = watcher(requests, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(ev) = events.next().await {
                let mut seen = keep.lock().expect("count lock");
                let (all, done) = &mut *seen;
                match ev {
                    Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                        let name = o.metadata.name.clone().unwrap_or_default();
                        if reconciled(&o) {
                            done.insert(name.clone());
                        } else {
                            done.remove(&name);
                        }
                        all.insert(name);
                    }
                    Ok(watcher::Event::Delete(o)) => {
                        let name = o.metadata.name.clone().unwrap_or_default();
                        done.remove(&name);
                        all.remove(&name);
                    }
                    Ok(watcher::Event::Init | watcher::Event::InitDone) | Err(_) => {}
                }
            }
        });
        ReconciledCount { seen, task }
    }

    /// Number of requests Reconciled, and seen.
    fn get(&self) -> (usize, usize) {
        let seen = self.seen.lock().expect("count lock");
        (seen.1.len(), seen.0.len())
    }
}

impl Drop for ReconciledCount {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn kubectl_apply(kubeconfig: &Path, n: usize, dir: &Path) -> anyhow::Result<Duration> {
    let mut yaml = String::new();
    for i in 0..n {
        let mut r = request(i);
        r["metadata"]["annotations"] = json!({"bench.plinth.dev/applied": "kubectl"});
        yaml.push_str("---\n");
        yaml.push_str(&serde_json::to_string(&r)?);
        yaml.push('\n');
    }
    let file = dir.join("requests.yaml");
    std::fs::write(&file, yaml)?;
    let t = Instant::now();
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["apply", "-f"])
        .arg(&file)
        .output()?;
    let took = t.elapsed();
    anyhow::ensure!(
        out.status.success(),
        "kubectl apply failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(took)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let a = <Args as clap::Parser>::parse();
    let (pipelines, concurrency) = (a.pipelines as usize, a.concurrency as usize);
    let timeout = Duration::from_secs(a.timeout_s);
    let n = a.requests;
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let exe = std::env::current_exe()?;
    let bin = exe
        .parent()
        .and_then(|p| p.parent())
        .map(|p| p.join("plinth"))
        .ok_or_else(|| anyhow::anyhow!("no target dir"))?;
    anyhow::ensure!(
        bin.exists(),
        "{} not found: build it with `cargo build --release -p plinth --bin plinth`",
        bin.display()
    );
    println!(
        "bench_scale: {n} requests, {} pipeline(s) of one busybox container writing two files, {cores} cores, {} kill(s)",
        pipelines, a.kills
    );
    println!("load average at start: {}", loadavg());

    // Plinth's three adapter containers run in `plinth up`'s process unless
    // `--sandbox-adapters` is among the extra flags; the floor counts the sandboxes left.
    let sandboxed_adapters = std::env::var("BENCH_UP_ARGS")
        .is_ok_and(|a| a.split_whitespace().any(|f| f == "--sandbox-adapters"));
    let all_four = sandbox_pod_floor(20, true).await?;
    let user_only = sandbox_pod_floor(20, false).await?;
    let pod = if sandboxed_adapters {
        all_four
    } else {
        user_only
    };
    let floor = pod * (n * pipelines) as u32 / cores as u32;
    println!(
        "sandbox floor: {:.1} ms per Pod of 4 sandboxed containers, {:.1} ms with the user's alone; \
         adapters {} -> {:.1} s for {} Pods on {cores} cores",
        all_four.as_secs_f64() * 1e3,
        user_only.as_secs_f64() * 1e3,
        if sandboxed_adapters {
            "sandboxed"
        } else {
            "in-process"
        },
        floor.as_secs_f64(),
        n * pipelines
    );

    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data)?;
    let metrics_addr = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let mut up = Up::start(&bin, &data, metrics_addr).await?;
    let promises = api(
        &up.client,
        "platform.kratix.io",
        "Promise",
        "promises",
        None,
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    // The Kratix CRDs are registered just after the API answers.
    while let Err(e) = promises
        .create(
            &PostParams::default(),
            &serde_json::from_value(promise(pipelines))?,
        )
        .await
    {
        anyhow::ensure!(Instant::now() < deadline, "Promise not created: {e}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    while promises
        .get("scale")
        .await
        .map(|p| p.data["status"]["status"] != "Available")
        .unwrap_or(true)
    {
        anyhow::ensure!(Instant::now() < deadline, "Promise not Available");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let repo = data.join("state-store.git");
    let commits0 = commits(&repo);
    let rev0 = revision(&up.client).await?;

    // Seeded kill moments, spread over an estimate of the run (3× the floor, at least 20 s).
    let mut rng = rand::rngs::StdRng::seed_from_u64(a.seed);
    let span = (floor * 3).max(Duration::from_secs(20));
    let mut kills: Vec<Duration> = (0..a.kills)
        .map(|_| span.mul_f64(rng.random_range(0.02..1.0)))
        .collect();
    kills.sort();
    let mut kills = kills.into_iter().peekable();
    let mut peak_kib = 0u64;

    let probe = (a.kills == 0).then(|| WatchProbe::start(up.client.clone()));
    let metrics0 = scrape(metrics_addr).unwrap_or_default();
    let cpu0 = cpu_seconds(up.child.id()).unwrap_or(0.0);
    let t0 = Instant::now();
    let mut pending: BTreeSet<usize> = (0..n).collect();
    create_requests(&up.client, &mut pending, concurrency).await;
    let applied = t0.elapsed();
    println!(
        "applied {} requests through the API in {:.2} s ({:.2} ms per request, {} concurrent creates)",
        n - pending.len(),
        applied.as_secs_f64(),
        applied.as_secs_f64() * 1e3 / n as f64,
        concurrency
    );
    let mut restarts = 0;
    let mut count: Option<ReconciledCount> = None;
    let done = loop {
        anyhow::ensure!(t0.elapsed() < timeout, "not converged in {:?}", timeout);
        peak_kib = peak_kib.max(peak_rss_kib(up.child.id()).unwrap_or(0));
        if kills.peek().is_some_and(|k| t0.elapsed() >= *k) {
            kills.next();
            up.restart().await?;
            // The restarted server listens on a new port: watch it from there.
            count = None;
            restarts += 1;
            println!(
                "  killed plinth up (SIGKILL) at {:.1} s and restarted it",
                t0.elapsed().as_secs_f64()
            );
        }
        if !pending.is_empty() {
            create_requests(&up.client, &mut pending, concurrency).await;
            continue;
        }
        let (r, total) = count
            .get_or_insert_with(|| ReconciledCount::start(&up.client))
            .get();
        if r == n && total == n {
            break t0.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    peak_kib = peak_kib.max(peak_rss_kib(up.child.id()).unwrap_or(0));
    if restarts == 0 {
        let cpu = cpu_seconds(up.child.id()).unwrap_or(0.0) - cpu0;
        println!(
            "CPU of plinth up during the run (user + system, its threads; sandboxed containers not included): {cpu:.1} s, {:.1} ms per request",
            cpu * 1e3 / n as f64
        );
        print_api_time(&metrics0, &scrape(metrics_addr).unwrap_or_default(), n);
    }
    let mut probe_writes = 0;
    if let Some(probe) = probe {
        let (mut l, w) = probe.stop().await;
        probe_writes = w;
        l.sort();
        let pct = |p: f64| l[((l.len() as f64 * p) as usize).min(l.len() - 1)].as_secs_f64() * 1e3;
        if l.is_empty() {
            println!("watch delivery: no samples");
        } else {
            println!(
                "watch delivery during the run (ConfigMap patched every 200 ms, patch sent -> event received): {} samples, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
                l.len(),
                pct(0.5),
                pct(0.99),
                l.last().unwrap().as_secs_f64() * 1e3
            );
        }
    }
    let writes = revision(&up.client).await? - rev0 - probe_writes;
    let commits_run = commits(&repo) - commits0;
    println!(
        "all {n} Reconciled after {:.2} s: {:.1} requests/s, {:.1} ms per request ({:.1}x the floor){}",
        done.as_secs_f64(),
        n as f64 / done.as_secs_f64(),
        done.as_secs_f64() * 1e3 / n as f64,
        done.as_secs_f64() / floor.as_secs_f64(),
        if restarts > 0 {
            format!(", {restarts} kill -9 + restart")
        } else {
            String::new()
        }
    );
    let placements = count_paged(&api(
        &up.client,
        "platform.kratix.io",
        "WorkPlacement",
        "workplacements",
        None,
    ))
    .await?;
    println!("commits: {commits_run} for {placements} WorkPlacements");
    println!(
        "API writes: {writes} ({:.1} per request; the watch probe's {probe_writes} ConfigMap writes not counted)",
        writes as f64 / n as f64
    );
    println!(
        "peak RSS of plinth up (VmHWM{}): {:.1} MiB",
        if restarts > 0 {
            ", since the last restart"
        } else {
            ""
        },
        peak_kib as f64 / 1024.0
    );

    let kc = data.join("kubeconfig");
    let before = scrape(metrics_addr).unwrap_or_default();
    let kt = kubectl_apply(&kc, n, dir.path())?;
    let after = scrape(metrics_addr).unwrap_or_default();
    println!(
        "kubectl apply -f of the {n} requests (annotation added): {:.2} s, {:.2} ms per object (client and server)",
        kt.as_secs_f64(),
        kt.as_secs_f64() * 1e3 / n as f64
    );
    let mut server_s = 0.0;
    for verb in ["get", "patch"] {
        let (sum, count) = duration_delta(&before, &after, verb, "scales");
        server_s += sum;
        println!(
            "  server side, {verb} of a request: {count} calls, mean {:.2} ms",
            if count > 0.0 { sum * 1e3 / count } else { 0.0 }
        );
    }
    println!(
        "  server side per object (get + patch): {:.2} ms",
        server_s * 1e3 / n as f64
    );
    // VmHWM is the process's high-water mark, so this covers the run and the apply.
    println!(
        "peak RSS of plinth up including the kubectl apply (VmHWM{}): {:.1} MiB",
        if restarts > 0 {
            ", since the last restart"
        } else {
            ""
        },
        peak_rss_kib(up.child.id()).unwrap_or(0).max(peak_kib) as f64 / 1024.0
    );
    println!("load average at end: {}", loadavg());

    up.stop();
    // What the server's compaction keeps at steady state: the live objects and the last
    // 1,000 revisions (its default), vacuumed and checkpointed.
    let sink: plinth_apiserver::store::EventSink = std::sync::Arc::new(|_| {});
    let store = plinth_apiserver::store::Store::open(&data.join("plinth.db"), sink)?;
    print_write_profile(&store, rev0, n).await?;
    store.compact(store.head().saturating_sub(1000)).await?;
    store.maintain().await?;
    print_live_usage(&store, n).await?;
    drop(store);
    let parts = [
        ("database", data.join("plinth.db")),
        ("pod logs", data.join("pod-logs")),
        ("state store", repo.clone()),
    ];
    let total = dir_bytes(&data);
    let db: u64 = std::fs::read_dir(&data)?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("plinth.db"))
        .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
        .sum();
    print!(
        "data dir after a graceful stop and compaction to the last 1,000 revisions: {:.1} MiB ({:.1} KiB per request; ",
        total as f64 / 1048576.0,
        total as f64 / 1024.0 / n as f64
    );
    for (i, (name, p)) in parts.iter().enumerate() {
        let b = if i == 0 { db } else { dir_bytes(p) };
        print!(
            "{}{name} {:.1} MiB",
            if i > 0 { ", " } else { "" },
            b as f64 / 1048576.0
        );
    }
    println!(")");

    // Steady state: Events are removed an hour after they were last seen (the server's
    // event TTL); what stays is the live objects, the last 1,000 revisions, the logs of
    // the kept Pods and the state store.
    let store = plinth_apiserver::store::Store::open(&data.join("plinth.db"), sink_none())?;
    let expired = plinth_apiserver::expiry::expire_events(
        &store,
        Duration::ZERO,
        jiff::Timestamp::now() + jiff::SignedDuration::from_secs(1),
    )
    .await?;
    store.compact(store.head().saturating_sub(1000)).await?;
    store.maintain().await?;
    drop(store);
    let total = dir_bytes(&data);
    println!(
        "data dir once the Event TTL has passed ({expired} Events expired), compacted to the last 1,000 revisions: {:.1} MiB ({:.1} KiB per request)",
        total as f64 / 1048576.0,
        total as f64 / 1024.0 / n as f64
    );
    Ok(())
}

fn sink_none() -> plinth_apiserver::store::EventSink {
    std::sync::Arc::new(|_| {})
}

/// API writes by resource and by what they changed (from the revision log), per request.
async fn print_write_profile(
    store: &plinth_apiserver::store::Store,
    after: u64,
    n: usize,
) -> anyhow::Result<()> {
    let compacted = store.compacted().await?;
    let profile = store.write_profile(after).await?;
    let total: u64 = profile.iter().map(|w| w.count).sum();
    println!(
        "API writes by resource and change ({total} revisions{}), per request:",
        if compacted > after {
            format!(", those after revision {compacted}; earlier ones were compacted")
        } else {
            String::new()
        }
    );
    for w in profile.iter().take(40) {
        println!(
            "  {:>7.2}  {} {}",
            w.count as f64 / n as f64,
            w.rkey,
            w.change
        );
    }
    if profile.len() > 40 {
        let rest: u64 = profile[40..].iter().map(|w| w.count).sum();
        println!("  {:>7.2}  (other kinds)", rest as f64 / n as f64);
    }
    Ok(())
}

/// Live objects by resource after the run: count and stored bytes per request.
async fn print_live_usage(store: &plinth_apiserver::store::Store, n: usize) -> anyhow::Result<()> {
    println!("live objects by resource (count, stored KiB; per request):");
    for u in store.live_usage().await? {
        println!(
            "  {:<45} {:>7} {:>9.1} KiB   {:>6.2} objects {:>7.2} KiB",
            u.rkey,
            u.objects,
            u.bytes as f64 / 1024.0,
            u.objects as f64 / n as f64,
            u.bytes as f64 / 1024.0 / n as f64
        );
    }
    Ok(())
}

/// The Prometheus text of `plinth up`'s `/metrics`.
fn scrape(addr: SocketAddr) -> anyhow::Result<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// User plus system CPU seconds of process `pid` (its threads, not its children), from
/// `/proc/<pid>/stat` at the usual 100 ticks per second.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// The API requests of the run by verb and resource, the most server time first: calls
/// per request and total seconds (the difference of two `/metrics` scrapes).
fn print_api_time(before: &str, after: &str, n: usize) {
    let totals = |text: &str| {
        let mut m: BTreeMap<(String, String), (f64, f64)> = BTreeMap::new();
        for line in text.lines() {
            let Some((name, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let is_sum = name.starts_with("plinth_apiserver_request_duration_seconds_sum");
            let is_count = name.starts_with("plinth_apiserver_request_duration_seconds_count");
            if !(is_sum || is_count) {
                continue;
            }
            let label = |k: &str| {
                let key = format!("{k}=\"");
                name.split_once(key.as_str())
                    .and_then(|(_, r)| r.split_once('"'))
                    .map(|(v, _)| v.to_string())
                    .unwrap_or_default()
            };
            let e = m.entry((label("verb"), label("resource"))).or_default();
            let v: f64 = value.parse().unwrap_or(0.0);
            if is_sum { e.0 += v } else { e.1 += v }
        }
        m
    };
    let (b, a) = (totals(before), totals(after));
    let mut rows: Vec<_> = a
        .iter()
        .map(|(k, (s, c))| {
            let (s0, c0) = b.get(k).copied().unwrap_or_default();
            (k, s - s0, c - c0)
        })
        .filter(|(_, _, c)| *c > 0.0)
        .collect();
    rows.sort_by(|x, y| y.1.total_cmp(&x.1));
    println!("API requests during the run, most server time first (watch time is its open time):");
    for ((verb, res), s, c) in rows.into_iter().take(40) {
        println!(
            "  {verb:>8} {res:<40} {:>8.2} per request {:>9.2} s total {:>8.2} ms mean",
            c / n as f64,
            s,
            s * 1e3 / c
        );
    }
}

/// Sum and count of `plinth_apiserver_request_duration_seconds` for `verb` on resources
/// starting with `resource`, in `text`.
fn duration_totals(text: &str, verb: &str, resource: &str) -> (f64, f64) {
    let (mut sum, mut count) = (0.0, 0.0);
    let verb_l = format!("verb=\"{verb}\"");
    let res_l = format!("resource=\"{resource}");
    for line in text.lines() {
        let Some((name, value)) = line.rsplit_once(' ') else {
            continue;
        };
        if !(name.contains(&verb_l) && name.contains(&res_l)) {
            continue;
        }
        let v: f64 = value.parse().unwrap_or(0.0);
        if name.starts_with("plinth_apiserver_request_duration_seconds_sum") {
            sum += v;
        } else if name.starts_with("plinth_apiserver_request_duration_seconds_count") {
            count += v;
        }
    }
    (sum, count)
}

fn duration_delta(before: &str, after: &str, verb: &str, resource: &str) -> (f64, f64) {
    let (s0, c0) = duration_totals(before, verb, resource);
    let (s1, c1) = duration_totals(after, verb, resource);
    (s1 - s0, c1 - c0)
}

/// Watch delivery under load: a ConfigMap patched every 200 ms and watched; each sample
/// is the time from sending the patch to receiving its MODIFIED event.
struct WatchProbe {
    stop: Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<(Vec<Duration>, u64)>,
}

impl WatchProbe {
    fn start(client: kube::Client) -> WatchProbe {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        let task = tokio::spawn(async move {
            Self::run(client, stop2).await.unwrap_or_else(|e| {
                println!("watch probe failed: {e}");
                (Vec::new(), 0)
            })
        });
        WatchProbe { stop, task }
    }

    async fn run(
        client: kube::Client,
        stop: Arc<std::sync::atomic::AtomicBool>,
    ) -> anyhow::Result<(Vec<Duration>, u64)> {
        use kube::api::{Patch, PatchParams, WatchEvent, WatchParams};
        let api: Api<ConfigMap> = Api::namespaced(client, "default");
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("watch-probe".into());
        let created = api.create(&PostParams::default(), &cm).await?;
        let rv = created.metadata.resource_version.unwrap_or_default();
        let sent: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
        let samples: Arc<Mutex<Vec<Duration>>> = Arc::default();
        let mut events = api
            .watch(
                &WatchParams::default()
                    .fields("metadata.name=watch-probe")
                    .timeout(3600),
                &rv,
            )
            .await?
            .boxed();
        let (sent2, samples2) = (sent.clone(), samples.clone());
        let receiver = tokio::spawn(async move {
            while let Some(Ok(ev)) = events.next().await {
                if let WatchEvent::Modified(c) = ev {
                    let at = Instant::now();
                    let seq = c
                        .data
                        .as_ref()
                        .and_then(|d| d.get("seq"))
                        .cloned()
                        .unwrap_or_default();
                    if let Some(t) = sent2.lock().unwrap().remove(&seq) {
                        samples2.lock().unwrap().push(at - t);
                    }
                }
            }
        });
        let mut seq = 0u64;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            seq += 1;
            sent.lock().unwrap().insert(seq.to_string(), Instant::now());
            let patch = json!({"data": {"seq": seq.to_string()}});
            let _ = api
                .patch(
                    "watch-probe",
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // The last event's delivery.
        tokio::time::sleep(Duration::from_millis(500)).await;
        receiver.abort();
        let out = samples.lock().unwrap().clone();
        // Its own writes: the create and every patch.
        Ok((out, seq + 1))
    }

    /// The samples and the number of writes the probe made.
    async fn stop(self) -> (Vec<Duration>, u64) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.task.await.unwrap_or_default()
    }
}
