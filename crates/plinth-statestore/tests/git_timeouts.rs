//! Git state stores against a server that accepts connections and never answers: every
//! open gives up after the network timeout (over `http://` and `git://`), and the writer
//! it started is freed, so the same work directory serves a working repository next.
//!
//! A test binary of its own: the timeouts are process-wide and read by libgit2 once.

use std::time::Duration;

use plinth_statestore::git::init_bare;
use plinth_statestore::{GitConfig, StateStore, StoreConfig, StoreError};

/// Listens on 127.0.0.1, accepts every connection and holds it without replying.
fn silent_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in listener.incoming().flatten() {
            held.push(c);
        }
    });
    port
}

async fn silent_open_fails_then_the_work_dir_is_free(url: String) {
    plinth_statestore::set_network_timeouts(Duration::from_secs(1), Duration::from_secs(2));
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    let mut c = GitConfig::new(url.clone(), "main", &work);
    c.insecure_skip_tls_verify = true;
    // Generous bound: without network timeouts the open never returns.
    let err = tokio::time::timeout(
        Duration::from_secs(30),
        StateStore::open(StoreConfig::Git(c)),
    )
    .await
    .unwrap_or_else(|_| panic!("opening {url} hung on a silent server"))
    .err()
    .unwrap_or_else(|| panic!("opening {url} succeeded against a silent server"));
    assert!(
        matches!(err, StoreError::Unreachable { .. }),
        "{url}: {err:?}"
    );
    assert!(err.to_string().contains("127.0.0.1"), "{err}");

    // The writer that waited on the silent server is gone: its work directory is usable.
    let bare = tmp.path().join("good.git");
    init_bare(&bare, "main").unwrap();
    let good = GitConfig::new(format!("file://{}", bare.display()), "main", &work);
    tokio::time::timeout(
        Duration::from_secs(30),
        StateStore::open(StoreConfig::Git(good)),
    )
    .await
    .expect("the work directory was released")
    .expect("a working repository opens in the same work directory");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_server_that_never_answers_times_out() {
    let port = silent_server();
    silent_open_fails_then_the_work_dir_is_free(format!("http://127.0.0.1:{port}/repo.git")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_daemon_that_never_answers_times_out() {
    let port = silent_server();
    silent_open_fails_then_the_work_dir_is_free(format!("git://127.0.0.1:{port}/repo.git")).await;
}
