//! Plinth's controllers: kube-runtime controllers that implement Kratix's behaviour on
//! any Kubernetes API (the embedded server in-process, or a real cluster).
//!
//! - [`promise`]: Promises (reference §2) and, per Promise API, a dynamic
//!   resource-request controller ([`request`], §3).
//! - [`workflow`]: pipelines as Jobs and the workflow engine (§4).
//! - [`scheduler`], [`workplacement`], [`destination`], [`statestore`]: Works to files
//!   (§5, §6).
//!
//! Every controller talks to the control plane only through the one `kube::Client` in
//! [`Context`].

pub mod apply;
pub mod config;
pub mod context;
pub mod destination;
pub mod dryrun;
pub mod events;
pub mod fanout;
pub mod health;
pub mod labels;
pub mod objstatus;
pub mod promise;
pub mod promiserelease;
pub mod request;
pub mod resourcebinding;
pub mod scheduler;
pub mod statestore;
pub mod status;
pub mod stores;
pub mod triggers;
pub mod user_roles;
pub mod workflow;
pub mod workplacement;

pub use context::{Context, ControllerConfig};

use std::sync::Arc;

/// Runs every controller on `ctx`'s client until they all stop (their watches end or
/// the task is aborted). `defaults` is the configuration the `kratix` ConfigMap's keys
/// are applied over.
pub async fn run_all(ctx: Arc<Context>, defaults: ControllerConfig) {
    tokio::join!(
        config::watch(ctx.clone(), defaults),
        promise::run(ctx.clone()),
        promiserelease::run(ctx.clone()),
        dryrun::run(ctx.clone()),
        scheduler::run(ctx.clone()),
        workplacement::run(ctx.clone()),
        destination::run(ctx.clone()),
        statestore::run(ctx.clone()),
        health::run(ctx.clone(), Arc::new(health::SystemClock)),
    );
}

/// Errors of a reconcile. Each is logged with the object it concerns and retried by the
/// controller's error policy after `requeue_default`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("JSON: {0}")]
    Json(serde_json::Error),
    #[error("invalid pipeline at {field}: {message}")]
    InvalidPipeline { field: String, message: String },
    #[error("invalid Promise {promise}: {message}")]
    InvalidPromise { promise: String, message: String },
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("{0}")]
    Other(String),
}
