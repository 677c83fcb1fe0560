//! Destination agent benchmarks on real processes (`plinth up` as the target, a bare Git
//! repository over file:// as the store, the git CLI committing):
//!
//! 1. store commit → object present: p50/p95 over N changes of one ConfigMap, for
//!    `plinth agent --interval 200ms` and for a clone-and-`kubectl apply` loop that sleeps
//!    200 ms between rounds (a plain clone-apply loop);
//! 2. 1,000 ConfigMaps in one Destination: `plinth agent --once` wall time and peak RSS for
//!    the first apply and for a full re-apply with nothing changed, with the API writes the
//!    agent counted (the second must be 0).
//!
//! `cargo build --release -p plinth && cargo run --release -p plinth --example bench_agent`
//! (`N=<changes>` and `OBJECTS=<count>` change the sizes).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("git")
        .success();
    assert!(ok, "git {args:?}");
}

fn cm(name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: bench\ndata:\n  k: \"{value}\"\n"
    )
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

struct Repo {
    bare: PathBuf,
    work: PathBuf,
}

impl Repo {
    fn new(root: &Path) -> Repo {
        let bare = root.join("state.git");
        let work = root.join("work");
        std::fs::create_dir_all(&work).unwrap();
        git(
            root,
            &["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()],
        );
        git(&work, &["init", "-q", "-b", "main"]);
        git(&work, &["remote", "add", "origin", bare.to_str().unwrap()]);
        Repo { bare, work }
    }
    fn put(&self, rel: &str, content: &str) {
        let p = self.work.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    fn commit(&self) {
        git(&self.work, &["add", "-A"]);
        git(&self.work, &["commit", "-q", "-m", "c"]);
        git(&self.work, &["push", "-q", "origin", "main"]);
    }
    fn url(&self) -> String {
        format!("file://{}", self.bare.display())
    }
}

/// Commits N values of ConfigMap `name` and measures commit → value visible.
async fn latencies(api: &Api<ConfigMap>, repo: &Repo, name: &str, n: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let value = format!("{name}-{i}");
        repo.put(
            &format!("worker-1/resources/{name}.yaml"),
            &cm(name, &value),
        );
        repo.commit();
        let t0 = Instant::now();
        loop {
            if let Ok(Some(c)) = api.get_opt(name).await
                && c.data.and_then(|d| d.get("k").cloned()).as_deref() == Some(value.as_str())
            {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "{value} never arrived"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        out.push(t0.elapsed());
    }
    out.sort();
    out
}

/// `plinth agent --once` under /usr/bin/time: (seconds, peak RSS KiB, api_writes).
fn agent_once(bin: &Path, kubeconfig: &Path, repo: &Repo, work: &Path) -> (f64, u64, String) {
    let out = Command::new("/usr/bin/time")
        .args(["-f", "TIME %e %M"])
        .arg(bin)
        .args(["agent", "--once", "--name", "bulk", "--kubeconfig"])
        .arg(kubeconfig)
        .args(["--git-url", &repo.url(), "--path", "bulk", "--work-dir"])
        .arg(work)
        .env("PLINTH_LOG", "info")
        .output()
        .expect("plinth agent");
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err
        .lines()
        .find(|l| l.starts_with("TIME "))
        .expect("time output");
    let mut parts = line.split_whitespace().skip(1);
    let secs: f64 = parts.next().unwrap().parse().unwrap();
    let rss: u64 = parts.next().unwrap().parse().unwrap();
    let writes = err
        .split("api_writes=")
        .nth(1)
        .map(|s| s.chars().take_while(|c| c.is_ascii_digit()).collect())
        .unwrap_or_else(|| "?".into());
    (secs, rss, writes)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env_n = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(d)
    };
    let (n, objects) = (env_n("N", 100), env_n("OBJECTS", 1000));
    let exe = std::env::current_exe()?;
    let bin = exe
        .parent()
        .and_then(|p| p.parent())
        .map(|p| p.join("plinth"))
        .unwrap();
    anyhow::ensure!(bin.exists(), "{} not found: build it first", bin.display());
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    let mut up = Command::new(&bin)
        .args(["up", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let kc = data.join("kubeconfig");
    let deadline = Instant::now() + Duration::from_secs(90);
    let client = loop {
        anyhow::ensure!(Instant::now() < deadline, "plinth up not ready");
        if kc.exists()
            && let Ok(k) = Kubeconfig::read_from(&kc)
            && let Ok(cfg) =
                kube::Config::from_custom_kubeconfig(k, &KubeConfigOptions::default()).await
            && let Ok(c) = kube::Client::try_from(cfg)
            && c.apiserver_version().await.is_ok()
        {
            break c;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let repo = Repo::new(dir.path());
    repo.put(
        "worker-1/dependencies/ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: bench\n",
    );
    repo.put("worker-1/resources/agent.yaml", &cm("agent", "start"));
    repo.put("worker-1/resources/loop.yaml", &cm("loop", "start"));
    repo.commit();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "bench");

    // 1a. The agent.
    let mut agent: Child = Command::new(&bin)
        .args([
            "agent",
            "--name",
            "lat",
            "--interval",
            "200ms",
            "--kubeconfig",
        ])
        .arg(&kc)
        .args(["--git-url", &repo.url(), "--path", "worker-1", "--work-dir"])
        .arg(dir.path().join("agent-clone"))
        .env("PLINTH_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let a = latencies(&api, &repo, "agent", n).await;
    let _ = agent.kill();
    let _ = agent.wait();

    // 1b. A plain clone-and-apply loop (shell), same 200 ms pause.
    let script = format!(
        "while true; do rm -rf {d}/c; git clone -q --depth 1 {u} {d}/c 2>/dev/null && kubectl --kubeconfig {k} apply -R -f {d}/c/worker-1 >/dev/null 2>&1; sleep 0.2; done",
        d = dir.path().display(),
        u = repo.url(),
        k = kc.display()
    );
    let mut lp = Command::new("sh").args(["-c", &script]).spawn()?;
    let b = latencies(&api, &repo, "loop", n).await;
    let _ = Command::new("kill").arg(lp.id().to_string()).status();
    let _ = lp.wait();

    println!("store commit → object present, {n} changes (p50 / p95 / max):");
    for (name, v) in [
        ("plinth agent --interval 200ms", &a),
        ("clone + kubectl apply loop, 200ms pause", &b),
    ] {
        println!(
            "  {name:<42} {:>7.0} ms {:>7.0} ms {:>7.0} ms",
            percentile(v, 0.5).as_secs_f64() * 1e3,
            percentile(v, 0.95).as_secs_f64() * 1e3,
            v.last().unwrap().as_secs_f64() * 1e3
        );
    }

    // 2. Many objects in one Destination.
    repo.put(
        "bulk/dependencies/ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: bench\n",
    );
    for i in 0..objects {
        repo.put(
            &format!("bulk/resources/cm-{i:04}.yaml"),
            &cm(&format!("bulk-{i:04}"), "v"),
        );
    }
    repo.commit();
    let work = dir.path().join("bulk-clone");
    let (t1, m1, w1) = agent_once(&bin, &kc, &repo, &work);
    let (t2, m2, w2) = agent_once(&bin, &kc, &repo, &work);
    println!("{objects} ConfigMaps in one Destination, `plinth agent --once`:");
    println!(
        "  first apply:                   {t1:>6.2} s  peak RSS {:>6.1} MiB  API writes {w1}",
        m1 as f64 / 1024.0
    );
    println!(
        "  re-apply, nothing changed:     {t2:>6.2} s  peak RSS {:>6.1} MiB  API writes {w2}",
        m2 as f64 / 1024.0
    );
    let _ = up.kill();
    let _ = up.wait();
    Ok(())
}
