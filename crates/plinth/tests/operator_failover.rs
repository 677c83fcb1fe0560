//! Two `plinth operator` replicas against one `plinth up --no-controllers`: the leader is
//! killed (SIGKILL) in the middle of a burst of requests. The follower takes the Lease
//! within the lease duration plus a margin, every request converges, no request has more
//! than one completed Job for its spec, and every file is in Git exactly once, written by
//! no more commits than needed. Then the new leader is stopped with SIGTERM: it releases
//! the Lease and a third replica takes over without waiting for expiry.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DynamicObject};
use plinth_api::constants::labels;
use serde_json::Value;
use support::*;

const LEASE_SECS: u64 = 6;
/// The generous margin over the lease duration a takeover may take on a loaded machine.
const TAKEOVER_MARGIN_SECS: u64 = 20;
const REQUESTS: usize = 20;
const LEASE: &str = "plinth-operator";

fn file_of(name: &str) -> String {
    format!("local/resources/default/webapp/{name}/render/5058f/deployment.yaml")
}

async fn lease(leases: &Api<Lease>) -> Option<Lease> {
    leases.get_opt(LEASE).await.ok().flatten()
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    lease(leases).await.and_then(|l| l.spec?.holder_identity)
}

/// Waits until `who` holds the Lease; returns how long that took.
async fn takeover(leases: &Api<Lease>, who: &str, since: Instant) -> Duration {
    let limit = LEASE_SECS + TAKEOVER_MARGIN_SECS;
    wait_until(limit, &format!("{who} takes the Lease"), || async {
        holder(leases).await.as_deref() == Some(who)
    })
    .await;
    since.elapsed()
}

fn sigterm(child: &Child) {
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
}

fn request(name: &str, i: usize) -> Value {
    let mut r = webapp_sample("request.yaml");
    r["metadata"]["name"] = name.into();
    r["spec"]["image"] = format!("nginx:1.{i}").into();
    r
}

/// Every request Reconciled=True.
async fn all_reconciled(webapps: &Api<DynamicObject>, names: &[String]) -> bool {
    let Ok(list) = webapps.list(&Default::default()).await else {
        return false;
    };
    let done: BTreeSet<_> = list
        .items
        .iter()
        .filter(|o| condition(o, "Reconciled").is_some_and(|c| c.0 == "True"))
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    names.iter().all(|n| done.contains(n))
}

fn completed(job: &Job) -> bool {
    let Some(status) = job.status.as_ref() else {
        return false;
    };
    status.succeeded.unwrap_or(0) > 0
        || status.conditions.as_ref().is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Complete" && c.status == "True")
        })
}

/// Completed Jobs per (request, spec hash, pipeline).
async fn completed_jobs(client: &kube::Client) -> BTreeMap<(String, String, String), Vec<String>> {
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let mut out: BTreeMap<_, Vec<String>> = BTreeMap::new();
    for job in jobs.list(&Default::default()).await.unwrap().items {
        let l = job.metadata.labels.clone().unwrap_or_default();
        let Some(resource) = l.get(labels::RESOURCE_NAME) else {
            continue;
        };
        if !completed(&job) {
            continue;
        }
        let key = (
            resource.clone(),
            l.get(labels::HASH).cloned().unwrap_or_default(),
            l.get(labels::PIPELINE_NAME).cloned().unwrap_or_default(),
        );
        out.entry(key)
            .or_default()
            .push(job.metadata.name.unwrap_or_default());
    }
    out
}

/// Per commit on `main`, the (path, blob) pairs it wrote; and the commits that changed
/// nothing (the store's empty root commit, "Initialise state store", aside).
fn commit_writes(repo: &Path) -> (Vec<(String, String, String)>, Vec<String>) {
    let r = repo.to_string_lossy();
    let mut writes = Vec::new();
    let mut empty = Vec::new();
    let roots = git(&["--git-dir", &r, "rev-list", "--max-parents=0", "main"]);
    let roots: BTreeSet<&str> = roots.lines().collect();
    for commit in git(&["--git-dir", &r, "rev-list", "--reverse", "main"]).lines() {
        let diff = git(&[
            "--git-dir",
            &r,
            "diff-tree",
            "--no-commit-id",
            "-r",
            "--root",
            commit,
        ]);
        let mut changed = false;
        for line in diff.lines() {
            // ":<old mode> <new mode> <old blob> <new blob> <status>\t<path>"
            let Some((meta, path)) = line.split_once('\t') else {
                continue;
            };
            changed = true;
            let fields: Vec<&str> = meta.split_whitespace().collect();
            if fields.get(4).is_some_and(|s| s.starts_with('D')) {
                continue;
            }
            writes.push((
                commit.to_string(),
                path.to_string(),
                fields.get(3).unwrap_or(&"").to_string(),
            ));
        }
        if !changed && !roots.contains(commit) {
            empty.push(commit.to_string());
        }
    }
    (writes, empty)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_takes_over_a_killed_leader_without_duplicate_jobs_or_commits() {
    let p = Plinth::up(&["--no-controllers"]).await;
    let client = p.client().await;
    let repo = p.repo();
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kratix-platform-system");
    let promises = promise_api(&client);
    create(&promises, &webapp_sample("promise.yaml")).await;

    let mut a = p.operator("replica-a", LEASE_SECS);
    wait_until(30, "replica-a holds the Lease", || async {
        holder(&leases).await.as_deref() == Some("replica-a")
    })
    .await;
    let first = lease(&leases).await.unwrap().spec.unwrap();
    assert!(first.acquire_time.is_some() && first.renew_time.is_some());
    assert_eq!(first.lease_duration_seconds, Some(LEASE_SECS as i32));
    let mut b = p.operator("replica-b", LEASE_SECS);
    wait_until(90, "Promise webapp Available", || async {
        promises
            .get("webapp")
            .await
            .is_ok_and(|o| o.data["status"]["status"] == "Available")
    })
    .await;

    // The burst: half the requests, the leader dies once it has started pipeline Jobs
    // for them, then the other half while the Lease is orphaned.
    let webapps = dynamic(
        &client,
        "quickstart.plinth.dev",
        "v1alpha1",
        "WebApp",
        "webapps",
        Some("default"),
    );
    let names: Vec<String> = (0..REQUESTS).map(|i| format!("burst-{i:02}")).collect();
    for (i, name) in names.iter().enumerate().take(REQUESTS / 2) {
        create(&webapps, &request(name, i)).await;
    }
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    wait_until(
        90,
        "the leader has started a request's pipeline Job",
        || async {
            jobs.list(&Default::default()).await.is_ok_and(|l| {
                l.items.iter().any(|j| {
                    j.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(labels::RESOURCE_NAME))
                        .is_some_and(|n| n.starts_with("burst-"))
                })
            })
        },
    )
    .await;
    assert_eq!(
        holder(&leases).await.as_deref(),
        Some("replica-a"),
        "the follower took the Lease from a live leader"
    );
    let jobs_before_kill = completed_jobs(&client).await.len();
    let written_before_kill = names
        .iter()
        .filter(|n| repo_file(&repo, "main", &file_of(n)).is_some())
        .count();
    let killed = Instant::now();
    a.kill().unwrap();
    a.wait().unwrap();
    for (i, name) in names.iter().enumerate().skip(REQUESTS / 2) {
        create(&webapps, &request(name, i)).await;
    }
    let took = takeover(&leases, "replica-b", killed).await;
    println!(
        "SIGKILL failover: replica-b led {:.1} s after the kill (lease {LEASE_SECS} s; \
         {jobs_before_kill} pipelines completed and {written_before_kill}/{REQUESTS} requests \
         written before the kill)",
        took.as_secs_f64()
    );
    let after = lease(&leases).await.unwrap().spec.unwrap();
    assert_eq!(after.lease_transitions, Some(1), "{after:?}");
    assert_ne!(after.acquire_time, first.acquire_time);

    wait_until(180, "every request Reconciled", || {
        all_reconciled(&webapps, &names)
    })
    .await;
    for name in &names {
        assert!(
            repo_file(&repo, "main", &file_of(name)).is_some(),
            "{} missing",
            file_of(name)
        );
    }

    // One completed Job per request and spec.
    let jobs = completed_jobs(&client).await;
    for name in &names {
        let mine: Vec<_> = jobs.iter().filter(|(k, _)| &k.0 == name).collect();
        assert!(!mine.is_empty(), "{name} has no completed Job: {jobs:?}");
        for (key, list) in mine {
            assert_eq!(list.len(), 1, "{key:?} ran more than once: {list:?}");
        }
    }

    // Every file once: one file per expected path under each request, and no commit
    // writes a content that path already had (no rewrite, no empty commit).
    let files = repo_files(&repo, "main");
    for name in &names {
        let dir = format!("local/resources/default/webapp/{name}/");
        let under: Vec<_> = files.iter().filter(|f| f.starts_with(&dir)).collect();
        let unique: BTreeSet<_> = under.iter().collect();
        assert_eq!(under.len(), unique.len(), "{under:?}");
        assert!(
            under
                .iter()
                .all(|f| f.starts_with(&format!("{dir}render/5058f/"))),
            "{name}: files outside its one workload group: {under:?}"
        );
    }
    let (writes, empty) = commit_writes(&repo);
    assert!(empty.is_empty(), "commits that change nothing: {empty:?}");
    let mut seen: BTreeMap<(String, String), String> = BTreeMap::new();
    for (commit, path, blob) in &writes {
        if let Some(earlier) = seen.insert((path.clone(), blob.clone()), commit.clone()) {
            panic!("{path} written with the same content by {earlier} and again by {commit}");
        }
    }
    for name in &names {
        let path = file_of(name);
        let times = writes.iter().filter(|w| w.1 == path).count();
        assert_eq!(times, 1, "{path} written {times} times");
    }

    // SIGTERM: the leader releases the Lease and a follower takes over at once, without
    // waiting out the lease duration.
    let mut c = p.operator("replica-c", LEASE_SECS);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(holder(&leases).await.as_deref(), Some("replica-b"));
    let termed = Instant::now();
    sigterm(&b);
    let took = takeover(&leases, "replica-c", termed).await;
    println!(
        "SIGTERM handover: replica-c led {:.1} s after the signal (lease {LEASE_SECS} s)",
        took.as_secs_f64()
    );
    let status = b.wait().unwrap();
    assert!(
        status.success(),
        "replica-b exits cleanly on SIGTERM: {status}"
    );
    let log = std::fs::read_to_string(p.dir.path().join("operator-replica-b.log")).unwrap();
    assert!(
        log.contains("released the leader Lease"),
        "replica-b released the Lease:\n{log}"
    );
    let last = lease(&leases).await.unwrap().spec.unwrap();
    assert_eq!(last.lease_transitions, Some(2), "{last:?}");
    c.kill().unwrap();
    c.wait().unwrap();
}
