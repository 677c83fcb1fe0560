//! What a HealthSource does with records that cannot be applied, on a local Git store:
//! a deleted request's record is skipped quietly (no Warning, no rejection) and applied
//! again when the request is back; the rejections always describe the store as it is now
//! (a fixed or removed object clears its entry, down to no `rejectedRecords` at all); an
//! oversized record or one the API refuses is rejected alone while the others apply; and
//! records with megabytes of details leave the request's status bounded, with the worst
//! state.

use crate::health_support;

use std::path::PathBuf;

use health_support::*;
use kube::api::DeleteParams;
use plinth_api::HealthSource;
use plinth_api::constants::health as names;
use serde_json::{Value, json};

/// A bare repository and a clone to commit into, and the HealthSource `git-1` on it.
struct Store {
    work: PathBuf,
}

impl Store {
    async fn new(env: &Env) -> Store {
        let bare = env.dir.path().join("health.git");
        git(
            env.dir.path(),
            &["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()],
        );
        git(
            env.dir.path(),
            &["clone", "-q", bare.to_str().unwrap(), "work"],
        );
        let work = env.dir.path().join("work");
        std::fs::create_dir_all(work.join("worker-1")).unwrap();
        env.create_source(json!({
            "apiVersion": "platform.syntasso.io/v1alpha1",
            "kind": "HealthSource",
            "metadata": {"name": "git-1"},
            "spec": {"git": {"url": format!("file://{}", bare.display()), "branch": "main"},
                     "path": "worker-1", "pollInterval": "10m"},
        }))
        .await;
        Store { work }
    }

    /// Writes (Some) or removes (None) files under `worker-1/` in one commit.
    fn commit(&self, files: &[(&str, Option<Vec<u8>>)]) {
        for (name, content) in files {
            let path = self.work.join("worker-1").join(name);
            match content {
                Some(c) => std::fs::write(&path, c).unwrap(),
                None => std::fs::remove_file(&path).unwrap(),
            }
        }
        git(&self.work, &["add", "-A"]);
        git(&self.work, &["commit", "-qm", "health"]);
        git(&self.work, &["push", "-q", "origin", "HEAD:main"]);
    }
}

fn rejected_keys(hs: &HealthSource) -> Vec<String> {
    hs.status
        .as_ref()
        .and_then(|s| s.rejected_records.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.key)
        .collect()
}

/// Warning notes of the source's rejections that mention `key`.
async fn rejections_of(env: &Env, key: &str) -> Vec<String> {
    env.events("HealthSource", "git-1", names::REJECTED_REASON)
        .await
        .into_iter()
        .filter(|(_, note)| note.starts_with(&format!("{key}:")))
        .map(|(_, note)| note)
        .collect()
}

fn raw_status(hs: &HealthSource) -> Value {
    serde_json::to_value(hs).unwrap()["status"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn a_deleted_requests_record_is_skipped_quietly_and_rejections_follow_the_store() {
    let env = start().await;
    env.create_request("default", "a").await;
    let store = Store::new(&env).await;
    store.commit(&[
        (
            "a.yaml",
            Some(yaml(&record("a-1", "default", "a", "healthy", 10))),
        ),
        ("broken.yaml", Some(b"data: [unclosed".to_vec())),
    ]);
    let hs = env.poll_now("git-1", "1").await;
    env.wait_state("default", "a", "healthy").await;
    assert_eq!(rejected_keys(&hs), ["broken.yaml"]);

    // The request is deleted (the request controller deletes its records with it); the
    // Destination has not removed the object yet.
    env.requests("default")
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("request a gone", || async {
        env.requests("default")
            .get_opt("a")
            .await
            .unwrap()
            .is_none()
    })
    .await;
    env.delete_record("default", "a-1").await;
    wait_for("record a-1 gone", || async {
        env.records("default")
            .get_opt("a-1")
            .await
            .unwrap()
            .is_none()
    })
    .await;
    for trigger in ["2", "3"] {
        let hs = env.poll_now("git-1", trigger).await;
        let st = hs.status.clone().unwrap();
        assert_eq!(rejected_keys(&hs), ["broken.yaml"], "{st:?}");
        assert_eq!((st.records, st.rejected), (Some(0), Some(1)), "{st:?}");
    }
    assert!(
        rejections_of(&env, "a.yaml").await.is_empty(),
        "a deleted request's record is not an error"
    );
    assert!(
        env.records("default")
            .get_opt("a-1")
            .await
            .unwrap()
            .is_none()
    );

    // The request is back: its record applies again.
    env.create_request("default", "a").await;
    let hs = env.poll_now("git-1", "4").await;
    assert_eq!(hs.status.unwrap().records, Some(1));
    env.wait_state("default", "a", "healthy").await;

    // The store is cleaned up: no rejection is left, and no rejectedRecords beside
    // `rejected: 0`.
    store.commit(&[("broken.yaml", None)]);
    let hs = env.poll_now("git-1", "5").await;
    let st = raw_status(&hs);
    assert_eq!(st["rejected"], 0, "{st:#}");
    assert!(st.get("rejectedRecords").is_none(), "{st:#}");
    assert!(rejections_of(&env, "a.yaml").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn an_oversized_or_refused_record_is_rejected_alone_and_status_stays_bounded() {
    let env = start().await;
    for r in ["a", "b", "c"] {
        env.create_request("default", r).await;
    }
    let store = Store::new(&env).await;
    let mut huge = record("a-0", "default", "a", "unhealthy", 10);
    huge["data"]["details"] = json!({"log": "x".repeat(4 * 1024 * 1024)});
    // An invalid object name: the API refuses it (422).
    let refused = record("Not_A_Name", "default", "a", "unhealthy", 10);
    store.commit(&[
        // Key order: the bad ones come first, so a failing poll would apply nothing.
        ("a-0.yaml", Some(yaml(&huge))),
        ("a-00.yaml", Some(yaml(&refused))),
        (
            "a-1.yaml",
            Some(yaml(&record("a-1", "default", "a", "healthy", 10))),
        ),
        (
            "b-1.yaml",
            Some(yaml(&record("b-1", "default", "b", "degraded", 10))),
        ),
    ]);
    let hs = env.poll_now("git-1", "1").await;
    let st = hs.status.clone().unwrap();
    let ready = st
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", names::POLLED),
        "{st:?}"
    );
    assert_eq!((st.records, st.rejected), (Some(2), Some(2)), "{st:?}");
    let reasons = st.rejected_records.clone().unwrap();
    assert!(
        reasons[0].key == "a-0.yaml" && reasons[0].reason.contains("more than the 1048576 bytes"),
        "{reasons:?}"
    );
    assert!(
        reasons[1].key == "a-00.yaml" && reasons[1].reason.contains("refused by the API (422)"),
        "{reasons:?}"
    );
    env.wait_state("default", "a", "healthy").await;
    env.wait_state("default", "b", "degraded").await;
    for key in ["a-0.yaml", "a-00.yaml"] {
        assert_eq!(
            rejections_of(&env, key).await.len(),
            1,
            "{key} evented once"
        );
    }

    // Two records with 2 MiB of details each, applied directly: the request gets the
    // worst state, and its status keeps a bounded part of them.
    for (name, state) in [("c-1", "degraded"), ("c-2", "unhealthy")] {
        let mut r = record(name, "default", "c", state, 10);
        r["data"]["details"] = json!({"log": "y".repeat(2 * 1024 * 1024)});
        env.apply_record(r).await;
    }
    let st = env.wait_state("default", "c", "unhealthy").await;
    let size = serde_json::to_vec(&st).unwrap().len();
    assert!(size < 256 * 1024, "status of {size} bytes");
    let entries = st["healthStatus"]["healthRecords"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{entries:?}");
    for e in entries {
        let note = e["details"]["truncated"].as_str().unwrap_or_default();
        assert!(note.contains("read HealthRecord default/c-"), "{e}");
    }
}
