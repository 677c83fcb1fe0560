//! Durability of the embedded API server through the real binary: a burst of writes over
//! HTTPS, `kill -9`, a restart on the same data directory; every acknowledged write is
//! there, resourceVersions keep increasing, and a watch resumes from a pre-crash
//! resourceVersion.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

struct Plinth(Child);

impl Drop for Plinth {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `plinth up` and returns it with the kubeconfig path it printed.
fn start(data_dir: &Path) -> (Plinth, PathBuf) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_plinth"))
        .args(["up", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .env("PLINTH_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn plinth up");
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let kubeconfig = loop {
        let line = lines
            .next()
            .expect("plinth up exited before printing its kubeconfig")
            .unwrap();
        if let Some(p) = line.strip_prefix("export KUBECONFIG=") {
            break PathBuf::from(p);
        }
    };
    // Keep draining stdout so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (Plinth(child), kubeconfig)
}

async fn client(kubeconfig: &Path) -> kube::Client {
    let kc = Kubeconfig::read_from(kubeconfig).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    kube::Client::try_from(cfg).unwrap()
}

fn cm(name: &str, i: usize) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c.data = Some(BTreeMap::from([("i".to_string(), i.to_string())]));
    c
}

fn rv(c: &ConfigMap) -> u64 {
    c.metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (mut proc1, kc) = start(&data);
    let api: Api<ConfigMap> = Api::namespaced(client(&kc).await, "default");

    // A burst of concurrent writes, all acknowledged.
    let mut acked: Vec<(String, String, u64)> = Vec::new();
    let burst = futures::stream::iter(0..200)
        .map(|i| {
            let api = api.clone();
            async move {
                let name = format!("burst-{i}");
                api.create(&PostParams::default(), &cm(&name, i))
                    .await
                    .map(|c| (name, i.to_string(), rv(&c)))
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    for r in burst {
        acked.push(r.expect("write acknowledged before the crash"));
    }
    let max_rv_before = acked.iter().map(|a| a.2).max().unwrap();

    // More writes in flight while the process is killed: the acknowledged ones must survive.
    let api2 = api.clone();
    let inflight = tokio::spawn(async move {
        let mut ok = Vec::new();
        for i in 0..10_000usize {
            let name = format!("inflight-{i}");
            match api2.create(&PostParams::default(), &cm(&name, i)).await {
                Ok(c) => ok.push((name, i.to_string(), rv(&c))),
                Err(_) => break,
            }
        }
        ok
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    proc1.0.kill().unwrap(); // SIGKILL
    proc1.0.wait().unwrap();
    let inflight_acked = inflight.await.unwrap();
    assert!(
        !inflight_acked.is_empty(),
        "some writes were acknowledged while in flight"
    );
    acked.extend(inflight_acked);
    let max_acked_rv = acked.iter().map(|a| a.2).max().unwrap();

    // Restart on the same directory.
    let (mut proc2, kc) = start(&data);
    let api: Api<ConfigMap> = Api::namespaced(client(&kc).await, "default");
    for (name, i, _) in &acked {
        let c = api
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("acknowledged {name} lost: {e}"));
        assert_eq!(&c.data.unwrap()["i"], i);
    }
    // resourceVersions keep increasing.
    let fresh = api
        .create(&PostParams::default(), &cm("after-restart", 0))
        .await
        .unwrap();
    assert!(rv(&fresh) > max_acked_rv, "{} > {max_acked_rv}", rv(&fresh));

    // A watch resumes from a resourceVersion issued before the crash.
    let mut stream = api
        .watch(
            &WatchParams::default().timeout(10),
            &max_rv_before.to_string(),
        )
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &cm("watched", 0))
        .await
        .unwrap();
    let mut saw = false;
    while let Some(ev) = stream.try_next().await.unwrap() {
        if let WatchEvent::Added(c) = ev
            && c.metadata.name.as_deref() == Some("watched")
        {
            saw = true;
            break;
        }
    }
    assert!(saw, "the resumed watch delivered the new object");

    // SIGTERM stops it cleanly.
    let status = Command::new("kill")
        .args(["-TERM", &proc2.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(code) = proc2.0.try_wait().unwrap() {
            assert!(code.success(), "plinth up exited with {code}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "plinth up did not stop on SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
