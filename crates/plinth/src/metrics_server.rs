//! `--metrics-addr`: `/metrics` in the Prometheus text format on a plain HTTP listener of
//! its own, without authentication, as controller-runtime's metrics port serves it. It is
//! separate from the API server's HTTPS listener so that `plinth operator` and
//! `plinth agent` (which have none) serve it the same way, and so that a scraper needs
//! neither the cluster CA nor a token; bind it to loopback or a network you trust, since
//! metric labels name Promises, resource requests, namespaces and Destinations. It has the
//! limits of every Plinth listener (`plinth_apiserver::listener`: a connection cap,
//! header-read and idle timeouts, backoff and rate-limited logging on accept errors).

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use axum::http::header;
use plinth_api::metrics::{CONTENT_TYPE, Metrics};
use tokio::task::JoinHandle;

/// The `/metrics` route over `metrics`.
pub fn router(metrics: Arc<Metrics>) -> axum::Router {
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let metrics = metrics.clone();
            async move { ([(header::CONTENT_TYPE, CONTENT_TYPE)], metrics.encode()) }
        }),
    )
}

/// Binds `addr` and serves `/metrics` until the process stops; returns the bound address
/// (port 0 picks a free one) and the serving task.
///
/// # Errors
/// The address cannot be bound.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
) -> anyhow::Result<(SocketAddr, JoinHandle<()>)> {
    let limits = plinth_apiserver::listener::ListenerLimits {
        // A few scrapers at most: a small cap leaves descriptors to the rest.
        max_connections: 64,
        ..Default::default()
    };
    let listener = plinth_apiserver::listener::bind(addr, limits.backlog)
        .with_context(|| format!("--metrics-addr {addr}: cannot listen"))?;
    let local = listener.local_addr()?;
    let app = router(metrics);
    let task = tokio::spawn(plinth_apiserver::listener::serve(
        listener, None, app, limits, "metrics",
    ));
    tracing::info!(addr = %local, "serving metrics on http://{local}/metrics");
    Ok((local, task))
}

/// Starts the listener when `addr` is set, printing where it listens on standard output
/// (`metrics: http://ADDR/metrics`, a line scripts can read).
///
/// # Errors
/// The address cannot be bound.
pub async fn maybe_serve(
    addr: Option<SocketAddr>,
    metrics: Arc<Metrics>,
) -> anyhow::Result<Option<JoinHandle<()>>> {
    let Some(addr) = addr else { return Ok(None) };
    let (local, task) = serve(addr, metrics).await?;
    println!("metrics: http://{local}/metrics");
    Ok(Some(task))
}
