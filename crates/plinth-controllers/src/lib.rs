//! Plinth's controllers: kube-runtime controllers that implement Kratix's behaviour on
//! any Kubernetes API (the embedded server in-process, or a real cluster).
//!
//! The controllers, one module (or folder) each:
//! - [`promise`]: Promises; per Promise API a dynamic resource-request controller
//!   ([`request`]: its caches, workflow fan-out, ResourceBindings and deletion).
//! - [`promiserelease`], [`dryrun`]: PromiseReleases and dry runs of Promise changes.
//! - [`work`] (with its [`work::scheduler`]), [`workplacement`], [`destination`],
//!   [`statestore`]: Works to files in state stores.
//! - [`health`]: HealthSources and HealthRecords to a request's health.
//! - [`config`]: the `kratix` ConfigMap's keys, applied to every controller.
//!
//! The machinery they share:
//! - [`context`] (the one client and the configuration), [`support`] (conditions, the
//!   status writer, the finalizer editor, Events, the controller harness),
//!   [`instrument`] (metrics and logs of every reconcile), [`announce`] (condition
//!   Events), [`workflow`] (pipelines as Jobs), [`dynamic`] (the registry of running
//!   request controllers), [`observe`], [`triggers`], [`apply`], [`user_roles`].
//!
//! Every controller talks to the control plane only through the one `kube::Client` in
//! [`Context`].
#![deny(missing_docs)]

// The controllers.
pub mod config;
pub mod destination;
pub mod dryrun;
pub mod health;
pub mod promise;
pub mod promiserelease;
pub mod request;
pub mod statestore;
pub mod work;
pub mod workplacement;

// The machinery they share.
pub mod announce;
pub mod apply;
pub mod context;
pub mod dynamic;
pub mod instrument;
pub mod observe;
pub mod support;
pub mod triggers;
pub mod user_roles;
pub mod workflow;

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
        work::run(ctx.clone()),
        workplacement::run(ctx.clone()),
        destination::run(ctx.clone()),
        statestore::run(ctx.clone()),
        health::run(ctx.clone(), Arc::new(health::SystemClock)),
        observe::watch_pipelines(ctx.clone()),
        observe::forget_deleted(ctx.clone()),
    );
}

/// The error of every controller in this crate. A reconcile that fails is logged with
/// the object it concerns and retried by its controller's error policy.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the Kubernetes API failed.
    // kube's own Display of an API error appends the Status' Debug form; these read it.
    #[error("Kubernetes API: {}", plinth_api::kube_error::describe(.0))]
    Kube(#[from] kube::Error),
    /// A call to the Kubernetes API failed while doing `action` to `object`.
    #[error("{action} {object}: {}", plinth_api::kube_error::describe(source))]
    Api {
        /// What the controller was doing, e.g. `listing WorkPlacements of`.
        action: &'static str,
        /// `<Kind> <namespace>/<name>` or `<Kind> <name>`.
        object: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// An object did not (de)serialize.
    #[error("JSON: {0}")]
    Json(serde_json::Error),
    /// A pipeline of a Promise cannot be run.
    #[error("invalid pipeline at {field}: {message}")]
    InvalidPipeline {
        /// Where in the Promise, e.g. `spec.workflows.resource.configure[0]`.
        field: String,
        /// The cause.
        message: String,
    },
    /// A Promise cannot be installed as written.
    #[error("invalid Promise {promise}: {message}")]
    InvalidPromise {
        /// The Promise's name.
        promise: String,
        /// The field and cause.
        message: String,
    },
    /// An object kept changing under a read-modify-write.
    #[error("conflict: {0}")]
    Conflict(String),
    /// A state store operation failed.
    #[error("state store {store}: {message}")]
    Store {
        /// `<Kind>/<name>` of the state store.
        store: String,
        /// The writer's error text.
        message: String,
    },
    /// The object is malformed in a way that needs a user fix.
    #[error("{object}: {message}")]
    Invalid {
        /// `<Kind> <namespace>/<name>`.
        object: String,
        /// The field and cause.
        message: String,
    },
    /// Something asked for by name does not exist (`<what>` names it).
    #[error("{0} not found")]
    NotFound(String),
    /// A cache the reconcile reads has not had its first list yet (the message names it).
    #[error("{0}")]
    NotReady(String),
    /// A Promise has no `spec.api`, so it has no resource requests.
    #[error("Promise {0:?} has no API")]
    NoApi(String),
}

impl Error {
    /// True for a write that lost a race: the API's 409 Conflict, or an object that kept
    /// changing under a read-modify-write.
    pub fn is_conflict(&self) -> bool {
        match self {
            Error::Kube(e) | Error::Api { source: e, .. } => support::is_conflict(e),
            Error::Conflict(_) => true,
            _ => false,
        }
    }

    /// Wraps a client error with what was being done to which object.
    pub fn kube(action: &'static str, object: impl Into<String>, source: kube::Error) -> Self {
        Error::Api {
            action,
            object: object.into(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Error;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(
            kube::core::Status::failure("x", reason).with_code(code),
        ))
    }

    #[test]
    fn only_lost_write_races_are_conflicts() {
        assert!(Error::kube("updating", "Work a/b", api(409, "Conflict")).is_conflict());
        assert!(Error::Kube(api(409, "Conflict")).is_conflict());
        assert!(Error::Conflict("Promise p".into()).is_conflict());
        assert!(!Error::kube("updating", "Work a/b", api(404, "NotFound")).is_conflict());
        assert!(!Error::NotFound("Destination d".into()).is_conflict());
    }
}
