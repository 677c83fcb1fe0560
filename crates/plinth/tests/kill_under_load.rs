//! `kill -9` under load: resource requests are applied in parallel while `plinth up` is
//! killed with SIGKILL at seeded random moments and restarted on the same data dir. The
//! run still converges (every request Reconciled), every acknowledged create survives each
//! crash, every file the pipelines wrote is in Git exactly once, and no request has more
//! than one completed configure Job for its spec.
//!
//! `PLINTH_KILL_SEED` picks another seed (the moments are printed).

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use plinth_api::constants::labels;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use support::*;

const N: usize = 60;
const KILLS: usize = 3;

fn promise() -> Value {
    let script = "for f in a b; do printf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: %s-%s\\n  namespace: default\\n' \"$KRATIX_OBJECT_NAME\" $f > /kratix/output/$f.yaml; done";
    json!({
        "apiVersion": "platform.kratix.io/v1alpha1", "kind": "Promise", "metadata": {"name": "crash"},
        "spec": {
            "api": {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "crashes.test.kratix.io"},
                "spec": {"group": "test.kratix.io", "scope": "Namespaced", "names": {"kind": "Crash", "plural": "crashes", "singular": "crash"},
                    "versions": [{"name": "v1alpha1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}},
            "workflows": {"resource": {"configure": [{"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Pipeline", "metadata": {"name": "sh"},
                "spec": {"containers": [{"name": "sh", "image": "busybox", "command": ["sh", "-c"], "args": [script]}]}}]}}
        }
    })
}

fn requests(client: &kube::Client) -> Api<DynamicObject> {
    dynamic(
        client,
        "test.kratix.io",
        "v1alpha1",
        "Crash",
        "crashes",
        Some("default"),
    )
}

/// Creates the requests in `pending`, 8 at a time; returns those the server acknowledged
/// (created, or already there).
async fn create_some(client: &kube::Client, pending: &BTreeSet<usize>) -> BTreeSet<usize> {
    let api = requests(client);
    futures::stream::iter(pending.iter().copied())
        .map(|i| {
            let api = api.clone();
            async move {
                let obj: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "test.kratix.io/v1alpha1", "kind": "Crash",
                    "metadata": {"name": format!("r{i}"), "namespace": "default"}, "spec": {"i": i}}))
                .unwrap();
                match api.create(&PostParams::default(), &obj).await {
                    Ok(_) => Some(i),
                    Err(kube::Error::Api(e)) if e.code == 409 => Some(i),
                    Err(_) => None,
                }
            }
        })
        .buffer_unordered(8)
        .filter_map(|r| async move { r })
        .collect()
        .await
}

async fn names(client: &kube::Client) -> Option<BTreeSet<String>> {
    let l = requests(client).list(&ListParams::default()).await.ok()?;
    Some(
        l.items
            .into_iter()
            .filter_map(|o| o.metadata.name)
            .collect(),
    )
}

fn all_reconciled(items: &[DynamicObject]) -> bool {
    items.len() == N
        && items
            .iter()
            .all(|o| condition(o, "Reconciled").is_some_and(|c| c.0 == "True"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_load_converges_without_duplicates_or_lost_writes() {
    let seed: u64 = std::env::var("PLINTH_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(14);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut moments: Vec<Duration> = (0..KILLS)
        .map(|_| Duration::from_millis(rng.random_range(500..25_000)))
        .collect();
    moments.sort();
    println!("seed {seed}: kill -9 at {moments:?} after the first create");

    let mut p = Plinth::up(&[]).await;
    let client = p.client().await;
    let promises = promise_api(&client);
    create_available(&promises, &promise(), "crash", 120).await;

    let mut acked: BTreeSet<usize> = BTreeSet::new();
    let t0 = Instant::now();
    let mut moments = moments.into_iter().peekable();
    let deadline = t0 + Duration::from_secs(900);
    loop {
        assert!(Instant::now() < deadline, "not converged: {}", p.log());
        if moments.peek().is_some_and(|m| t0.elapsed() >= *m) {
            moments.next();
            println!("kill -9 at {:?}", t0.elapsed());
            let dir = p.kill();
            p = Plinth::up_in(dir, &[]).await;
            // Every create acknowledged before the crash is there after it.
            let client = p.client().await;
            let have = names(&client).await.expect("list after restart");
            let lost: Vec<_> = acked
                .iter()
                .filter(|i| !have.contains(&format!("r{i}")))
                .collect();
            assert!(lost.is_empty(), "acknowledged creates lost: {lost:?}");
        }
        let client = p.client().await;
        // Create in slices so creates keep going while kills happen.
        let pending: BTreeSet<usize> = (0..N).filter(|i| !acked.contains(i)).take(12).collect();
        if !pending.is_empty() {
            acked.extend(create_some(&client, &pending).await);
            tokio::time::sleep(Duration::from_millis(300)).await;
            continue;
        }
        if let Ok(l) = requests(&client).list(&ListParams::default()).await
            && moments.peek().is_none()
            && all_reconciled(&l.items)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!("converged after {:?}", t0.elapsed());
    let client = p.client().await;

    // Every file of every request is in Git exactly once.
    let files = repo_files(&p.repo(), "main");
    let mut per_request: BTreeMap<(String, String), usize> = BTreeMap::new();
    for f in files
        .iter()
        .filter(|f| f.contains("/resources/default/crash/"))
    {
        let parts: Vec<&str> = f.split('/').collect();
        let request = parts[4].to_string();
        let file = parts.last().unwrap().to_string();
        *per_request.entry((request, file)).or_default() += 1;
    }
    for i in 0..N {
        for f in ["a.yaml", "b.yaml"] {
            let count = per_request.get(&(format!("r{i}"), f.to_string())).copied();
            assert_eq!(
                count,
                Some(1),
                "r{i}/{f} in Git {count:?} times; files: {files:?}"
            );
        }
    }
    assert_eq!(per_request.len(), 2 * N, "unexpected files: {files:?}");

    // No request has more than one completed configure Job for its spec.
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client.clone(), "default");
    let lp = ListParams::default().labels(&format!(
        "{}=crash,{}=configure",
        labels::PROMISE_NAME,
        labels::WORKFLOW_ACTION
    ));
    let mut completed: BTreeMap<(String, String), usize> = BTreeMap::new();
    for j in jobs.list(&lp).await.unwrap().items {
        let l = j.metadata.labels.clone().unwrap_or_default();
        if j.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0) > 0 {
            let key = (
                l.get(labels::RESOURCE_NAME).cloned().unwrap_or_default(),
                l.get(labels::HASH).cloned().unwrap_or_default(),
            );
            *completed.entry(key).or_default() += 1;
        }
    }
    let dup: Vec<_> = completed.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        dup.is_empty(),
        "requests with more than one completed Job per spec: {dup:?}"
    );
    assert_eq!(
        completed
            .keys()
            .map(|k| &k.0)
            .collect::<BTreeSet<_>>()
            .len(),
        N,
        "every request has its completed Job"
    );
}
