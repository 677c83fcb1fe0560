//! The health writer against real stores: a bare Git repository over `file://` (commits
//! counted and read with the `git` CLI) and a local directory laid out like a bucket.
//! The ledger's decisions are tested with simulated time in `src/health.rs`; here the
//! clock is a settable value, so the flush window is crossed without waiting for it.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use plinth_api::HealthState;
use plinth_statestore::git::init_bare;
use plinth_statestore::health::{
    HealthReport, HealthSink, HealthWriter, HealthWriterConfig, RecordKey, StoreSink,
};
use plinth_statestore::{GitConfig, LocalDirConfig, StoreConfig};

fn key(request: &str) -> RecordKey {
    RecordKey {
        namespace: "default".into(),
        promise: "redis".into(),
        request: request.into(),
        definition_namespace: "default".into(),
        definition: "liveness".into(),
    }
}

struct TestClock(Mutex<Timestamp>);

impl TestClock {
    fn advance(&self, secs: i64) {
        let mut t = self.0.lock().unwrap();
        *t += SignedDuration::from_secs(secs);
    }
    fn now(&self) -> Timestamp {
        *self.0.lock().unwrap()
    }
}

fn writer(sink: Arc<dyn HealthSink>) -> (HealthWriter, Arc<TestClock>) {
    let clock = Arc::new(TestClock(Mutex::new(
        Timestamp::from_second(1_800_000_000).unwrap(),
    )));
    let c = clock.clone();
    let w = HealthWriter::start(
        sink,
        HealthWriterConfig::default(),
        Arc::new(move || c.now()),
        Duration::from_millis(20),
    );
    (w, clock)
}

fn report(clock: &TestClock, request: &str, state: HealthState) -> HealthReport {
    HealthReport {
        key: key(request),
        state,
        details: None,
        run_at: clock.now(),
        schedule: None,
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

async fn wait_for(mut f: impl FnMut() -> bool) {
    for _ in 0..500 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("condition not reached in 10 s");
}

#[tokio::test]
async fn git_one_commit_per_window_naming_the_records_and_none_when_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = tmp.path().join("health.git");
    init_bare(&bare, "main").unwrap();
    let mut cfg = GitConfig::new(
        format!("file://{}", bare.display()),
        "main",
        tmp.path().join("work"),
    );
    cfg.path = "health".into();
    cfg.batch_window = Duration::from_millis(50);
    let (w, clock) = writer(Arc::new(StoreSink::new(StoreConfig::Git(cfg))));
    let commits = || {
        let out = Command::new("git")
            .arg("-C")
            .arg(&bare)
            .args(["rev-list", "--count", "main"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<u32>()
            .unwrap_or(0)
    };

    // `init_bare` may leave a first commit; count from there.
    let base = commits();
    for r in ["a", "b", "c"] {
        w.report(report(&clock, r, HealthState::Healthy));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        commits(),
        base,
        "nothing is written before the window closes"
    );
    clock.advance(10);
    wait_for(|| w.queued() == 0 && commits() == base + 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(commits(), base + 1, "three records, one window, one commit");
    let msg = git(&bare, &["log", "-1", "--format=%B", "main"]);
    for r in ["a", "b", "c"] {
        assert!(
            msg.contains(&format!("default/redis/{r}/liveness")),
            "{msg}"
        );
    }
    let doc = git(
        &bare,
        &["show", "main:health/default/redis/b/liveness.yaml"],
    );
    assert!(
        doc.contains("kind: HealthRecord") && doc.contains("state: healthy"),
        "{doc}"
    );

    // An hour of unchanged runs, one a minute: nothing written.
    for _ in 0..59 {
        clock.advance(60);
        for r in ["a", "b", "c"] {
            w.report(report(&clock, r, HealthState::Healthy));
        }
    }
    clock.advance(30);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(commits(), base + 1, "unchanged runs write nothing");

    // One change: one more commit, naming only that record.
    w.report(report(&clock, "b", HealthState::Unhealthy));
    clock.advance(10);
    wait_for(|| commits() == base + 2).await;
    let msg = git(&bare, &["log", "-1", "--format=%B", "main"]);
    assert!(msg.contains("default/redis/b/liveness"), "{msg}");
    let doc = git(
        &bare,
        &["show", "main:health/default/redis/b/liveness.yaml"],
    );
    assert!(doc.contains("state: unhealthy"), "{doc}");

    // Removing the definition deletes its record.
    w.remove(&key("c"));
    clock.advance(10);
    wait_for(|| commits() == base + 3).await;
    let files = git(&bare, &["ls-tree", "-r", "--name-only", "main"]);
    assert!(!files.contains("redis/c/"), "{files}");
    assert!(files.contains("redis/a/liveness.yaml"), "{files}");
}

#[tokio::test]
async fn a_store_that_is_down_keeps_the_newest_state_and_catches_up() {
    let tmp = tempfile::tempdir().unwrap();
    // The bucket root is a file at first: every write fails, as with a store that is down.
    let root = tmp.path().join("bucket");
    std::fs::write(&root, b"not a directory").unwrap();
    let cfg = LocalDirConfig {
        root: root.clone(),
        path: "health".into(),
    };
    let (w, clock) = writer(Arc::new(StoreSink::new(StoreConfig::LocalDir(cfg))));
    w.report(report(&clock, "a", HealthState::Healthy));
    clock.advance(10);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        w.queued(),
        1,
        "the record stays queued while the store is down"
    );
    // Checks go on (never blocked): the newest state replaces the queued one.
    let t = std::time::Instant::now();
    w.report(report(&clock, "a", HealthState::Degraded));
    assert!(t.elapsed() < Duration::from_millis(100));
    assert_eq!(w.queued(), 1);
    // The store comes back; the retry after the back-off writes the newest state only.
    std::fs::remove_file(&root).unwrap();
    std::fs::create_dir_all(&root).unwrap();
    clock.advance(20);
    let file = root.join("health/default/redis/a/liveness.yaml");
    wait_for(|| file.exists() && w.queued() == 0).await;
    let doc = std::fs::read_to_string(&file).unwrap();
    assert!(doc.contains("state: degraded"), "{doc}");
}
