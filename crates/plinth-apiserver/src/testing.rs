//! Test harness: [`TestServer`] runs an [`ApiServer`] on a temporary data directory,
//! optionally with HTTPS on `127.0.0.1:0`; dropping it stops the server and removes the
//! directory.
//!
//! [`TestServer::assert_settled_silent`] is the "settled means silent" check: once a
//! scenario has converged, the platform must make no writes at all.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::{ApiServer, Error, ServerConfig};

/// How long no write must be stored before [`TestServer::assert_settled_silent`]
/// starts its window.
pub const QUIET_GAP: Duration = Duration::from_secs(2);
/// How long [`TestServer::assert_settled_silent`] waits for the platform to settle.
pub const SETTLE_LIMIT: Duration = Duration::from_secs(30);
/// The silence window the scenario tests use.
pub const SILENCE_WINDOW: Duration = Duration::from_secs(10);

/// An API server on a temporary directory.
pub struct TestServer {
    server: Option<ApiServer>,
    dir: tempfile::TempDir,
}

impl TestServer {
    /// In-process only.
    pub async fn start() -> Result<TestServer, Error> {
        Self::start_with(|_| {}).await
    }

    /// With HTTPS on a free loopback port (and a kubeconfig).
    pub async fn start_https() -> Result<TestServer, Error> {
        Self::start_with(|c| c.listen = Some("127.0.0.1:0".parse().unwrap())).await
    }

    /// With a configuration adjusted by `f` (the data directory is set by the harness).
    pub async fn start_with(f: impl FnOnce(&mut ServerConfig)) -> Result<TestServer, Error> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().map_err(|e| Error::io(std::env::temp_dir(), e))?;
        let mut cfg = ServerConfig::new(dir.path().join("data"));
        f(&mut cfg);
        cfg.data_dir = dir.path().join("data");
        let server = ApiServer::start(cfg).await?;
        Ok(TestServer {
            server: Some(server),
            dir,
        })
    }

    /// The server.
    pub fn server(&self) -> &ApiServer {
        self.server.as_ref().expect("server running")
    }

    /// An in-process client (admin, default namespace `default`).
    pub fn client(&self) -> kube::Client {
        self.server().client()
    }

    /// The in-process router.
    pub fn router(&self) -> axum::Router {
        self.server().router()
    }

    /// The kubeconfig path (HTTPS servers only).
    pub fn kubeconfig(&self) -> Option<PathBuf> {
        self.server().kubeconfig_path()
    }

    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The temporary directory holding everything.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The "settled means silent" check. Waits until no write has been stored for
    /// [`QUIET_GAP`] (at most [`SETTLE_LIMIT`]), then watches the revision log for
    /// `window` (10 s in the scenario tests) and panics if anything was written, naming
    /// each object and how often it changed.
    ///
    /// Every kind counts, Events included: a settled platform has nothing to report, so
    /// a recurring Event is a reconcile that keeps running. Leases
    /// (`coordination.k8s.io`) are the one exception, because a leader renews its Lease
    /// on a timer by design.
    pub async fn assert_settled_silent(&self, window: Duration) {
        let server = self.server();
        let start = tokio::time::Instant::now();
        let mut last = server.resource_version();
        let mut quiet_since = tokio::time::Instant::now();
        while quiet_since.elapsed() < QUIET_GAP {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = server.resource_version();
            if now != last {
                if start.elapsed() > SETTLE_LIMIT {
                    let writes = self.writes_after(last - 1).await;
                    panic!(
                        "the platform never settled: still writing after {SETTLE_LIMIT:?}: {writes}"
                    );
                }
                last = now;
                quiet_since = tokio::time::Instant::now();
            }
        }
        tokio::time::sleep(window).await;
        let writes = self.writes_after(last).await;
        assert!(
            writes.is_empty(),
            "a settled platform wrote within {window:?}: {writes}"
        );
    }

    /// Non-Lease writes after resourceVersion `after`, summarised as
    /// `TYPE group/plural ns/name ×count` (empty when there were none).
    async fn writes_after(&self, after: u64) -> String {
        let changes = self
            .server()
            .changes_since(after)
            .await
            .expect("revision log readable");
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for (_, t, rkey, ns, name) in changes {
            if rkey.starts_with("coordination.k8s.io/") {
                continue;
            }
            *counts.entry(format!("{t} {rkey} {ns}/{name}")).or_default() += 1;
        }
        counts
            .iter()
            .map(|(k, n)| format!("{k} x{n}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Stops the server, keeping the directory, and starts a new one on it (a restart).
    pub async fn restart(&mut self) -> Result<(), Error> {
        let listen = self
            .server()
            .https_addr()
            .map(|_| "127.0.0.1:0".parse().unwrap());
        if let Some(s) = self.server.take() {
            s.shutdown().await;
        }
        let mut cfg = ServerConfig::new(self.data_dir());
        cfg.listen = listen;
        self.server = Some(ApiServer::start(cfg).await?);
        Ok(())
    }
}
