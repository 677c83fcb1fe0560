//! `plinth up`: runs the platform in the foreground on this machine.
//!
//! Starts the embedded API server on `--data-dir` (default `<user data dir>/plinth`,
//! e.g. `~/.local/share/plinth`), serving HTTPS on `--listen` (default `127.0.0.1:6443`;
//! port 0 picks a free port and the kubeconfig holds the real address), prints the
//! kubeconfig path and an `export KUBECONFIG=...` line, and runs until Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use plinth_apiserver::{ApiServer, ServerConfig};

/// Arguments of `plinth up`.
#[derive(clap::Args)]
pub struct UpArgs {
    /// Directory for the database, TLS material, kubeconfig and pod logs
    /// [default: <user data dir>/plinth, e.g. ~/.local/share/plinth].
    #[arg(long, env = "PLINTH_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// HTTPS listen address for kubectl and pipelines (loopback). Port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
}

/// The data directory `plinth up` uses when none is given.
pub fn default_data_dir() -> PathBuf {
    dirs::data_dir()
        .unwrap_or_else(|| std::env::temp_dir())
        .join("plinth")
}

/// Builds and starts the embedded API server for `args`.
pub async fn start_api_server(args: &UpArgs) -> anyhow::Result<ApiServer> {
    let data_dir = args.data_dir.clone().unwrap_or_else(default_data_dir);
    let mut config = ServerConfig::new(&data_dir);
    config.listen = Some(args.listen);
    ApiServer::start(config)
        .await
        .with_context(|| format!("starting the API server in {}", data_dir.display()))
}

/// Runs `plinth up` until Ctrl-C or SIGTERM.
pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    let server = start_api_server(&args).await?;
    let addr = server
        .https_addr()
        .context("the API server is not listening")?;
    let kubeconfig = server
        .kubeconfig_path()
        .context("the API server wrote no kubeconfig")?;
    tracing::info!("API server listening on https://{addr}");
    println!("plinth is up: API server at https://{addr}");
    println!("kubeconfig: {}", kubeconfig.display());
    println!("export KUBECONFIG={}", kubeconfig.display());
    use std::io::Write;
    let _ = std::io::stdout().flush();
    wait_for_shutdown().await?;
    tracing::info!("shutting down");
    server.shutdown().await;
    Ok(())
}

/// Resolves on Ctrl-C (SIGINT) or SIGTERM.
pub async fn wait_for_shutdown() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("installing the SIGTERM handler")?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C")?,
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    Ok(())
}
