//! Test harness: [`TestServer`] runs an [`ApiServer`] on a temporary data directory,
//! optionally with HTTPS on `127.0.0.1:0`; dropping it stops the server and removes the
//! directory.

use std::path::{Path, PathBuf};

use crate::{ApiServer, Error, ServerConfig};

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
