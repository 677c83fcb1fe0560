//! Workflow latency on a real `plinth up`: request created → its Work created, for a
//! Promise whose resource configure pipeline is one `busybox` container running `sh`
//! (writes one ConfigMap to /kratix/output). Creates 100 requests one after another and
//! prints p50/p95/max.
//!
//! Spawns the `plinth` binary next to this example's directory (build it first):
//! `cargo build --release -p plinth && cargo run --release -p plinth --example bench_workflows`
//! (`N=<count>` changes the number of requests).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

fn api(
    client: &kube::Client,
    g: &str,
    v: &str,
    k: &str,
    plural: &str,
    ns: Option<&str>,
) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, v, k), plural);
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let n: usize = std::env::var("N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let exe = std::env::current_exe()?;
    let bin = exe
        .parent()
        .and_then(|p| p.parent())
        .map(|p| p.join("plinth"))
        .ok_or_else(|| anyhow::anyhow!("no target dir"))?;
    anyhow::ensure!(
        bin.exists(),
        "{} not found: build it with `cargo build [--release] -p plinth`",
        bin.display()
    );
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    let mut child = Command::new(&bin)
        .args(["up", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let kc_path = data.join("kubeconfig");
    let deadline = Instant::now() + Duration::from_secs(90);
    let client = loop {
        anyhow::ensure!(Instant::now() < deadline, "plinth up not ready");
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
    let promises = api(
        &client,
        "platform.kratix.io",
        "v1alpha1",
        "Promise",
        "promises",
        None,
    );
    let promise = json!({
        "apiVersion": "platform.kratix.io/v1alpha1", "kind": "Promise", "metadata": {"name": "bench"},
        "spec": {
            "api": {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "benches.test.kratix.io"},
                "spec": {"group": "test.kratix.io", "scope": "Namespaced", "names": {"kind": "Bench", "plural": "benches", "singular": "bench"},
                    "versions": [{"name": "v1alpha1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}},
            "workflows": {"resource": {"configure": [{"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Pipeline", "metadata": {"name": "sh"},
                "spec": {"containers": [{"name": "sh", "image": "busybox", "command": ["sh", "-c"],
                    "args": ["printf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: %s\\n  namespace: default\\n' \"$KRATIX_OBJECT_NAME\" > /kratix/output/cm.yaml"]}]}}]}}
        }
    });
    promises
        .create(&PostParams::default(), &serde_json::from_value(promise)?)
        .await?;
    let deadline = Instant::now() + Duration::from_secs(90);
    while promises
        .get("bench")
        .await
        .map(|p| p.data["status"]["status"] != "Available")
        .unwrap_or(true)
    {
        anyhow::ensure!(Instant::now() < deadline, "Promise not Available");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let requests = api(
        &client,
        "test.kratix.io",
        "v1alpha1",
        "Bench",
        "benches",
        Some("default"),
    );
    let works = api(
        &client,
        "platform.kratix.io",
        "v1alpha1",
        "Work",
        "works",
        Some("default"),
    );
    let mut lat = Vec::with_capacity(n);
    for i in 0..n {
        let name = format!("r{i}");
        let rr = json!({"apiVersion": "test.kratix.io/v1alpha1", "kind": "Bench", "metadata": {"name": name, "namespace": "default"}, "spec": {"i": i}});
        let t0 = Instant::now();
        requests
            .create(&PostParams::default(), &serde_json::from_value(rr)?)
            .await?;
        let lp = ListParams::default().labels(&format!("kratix.io/resource-name={name}"));
        loop {
            if !works.list(&lp).await?.items.is_empty() {
                break;
            }
            anyhow::ensure!(
                t0.elapsed() < Duration::from_secs(60),
                "no Work for {name} after 60 s"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        lat.push(t0.elapsed());
    }
    let _ = child.kill();
    let _ = child.wait();
    lat.sort();
    let pct = |p: f64| lat[((lat.len() as f64 * p).ceil() as usize).clamp(1, lat.len()) - 1];
    println!(
        "request created -> Work created, one-container sh pipeline, {n} requests (sequential):"
    );
    println!(
        "  p50 {:?}  p95 {:?}  max {:?}",
        pct(0.50),
        pct(0.95),
        lat[lat.len() - 1]
    );
    Ok(())
}
