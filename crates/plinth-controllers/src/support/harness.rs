//! One way to start a controller: its reconcile counted, timed and logged
//! ([`crate::instrument`]), a failed reconcile requeued after the configured default
//! pause and logged once (at DEBUG when it only lost a write race), and the stream of
//! results drained. Every controller of this crate starts through [`Start::start`], so
//! they fail, retry and log alike.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use kube::runtime::controller::{Action, Controller};
//! # use kube::Api;
//! # use plinth_api::Destination;
//! # use plinth_controllers::{Context, Error};
//! # use plinth_controllers::support::harness::{Harness, Start};
//! async fn reconcile(_d: Arc<Destination>, _ctx: Arc<Context>) -> Result<Action, Error> {
//!     Ok(Action::await_change())
//! }
//! # async fn start(ctx: Arc<Context>) {
//! let destinations: Api<Destination> = Api::all(ctx.client.clone());
//! let controller = Controller::new(destinations, Default::default());
//! controller.start(Harness::new("destination"), reconcile, ctx).await;
//! # }
//! ```

use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

use futures::StreamExt;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;

use crate::instrument::{LogSubject, instrument, log_keys};
use crate::{Context, Error};

/// A controller's shared state: whatever it is, it reaches the controllers' [`Context`].
pub trait Shared: Send + Sync + 'static {
    /// The controllers' context (client, configuration, metrics).
    fn context(&self) -> &Context;
}

impl Shared for Context {
    fn context(&self) -> &Context {
        self
    }
}

/// What one result of a controller's stream is: the object reconciled and what to do
/// next, or why it could not be.
pub type RunResult<K> = Result<(ObjectRef<K>, Action), controller::Error<Error, watcher::Error>>;

/// How one controller is named in metrics and logs: `controller` (`promise`,
/// `scheduler`, ...) and, for a dynamic resource-request controller, its Promise.
#[derive(Clone, Debug)]
pub struct Harness {
    controller: String,
    promise: Option<String>,
}

impl Harness {
    /// The harness of the controller named `controller`.
    pub fn new(controller: impl Into<String>) -> Self {
        Harness {
            controller: controller.into(),
            promise: None,
        }
    }

    /// The harness of the resource-request controller of Promise `promise`.
    pub fn for_promise(controller: impl Into<String>, promise: impl Into<String>) -> Self {
        Harness {
            controller: controller.into(),
            promise: Some(promise.into()),
        }
    }

    /// The error policy: log the failure with the object's log keys, requeue after the
    /// configured default pause.
    fn on_error<K: LogSubject, C: Shared>(&self, obj: &K, err: &Error, state: &C) -> Action {
        let keys = log_keys(&self.controller, self.promise.as_deref(), obj);
        if err.is_conflict() {
            tracing::debug!(controller = %self.controller, name = %keys.name,
                namespace = %keys.namespace, promise = %keys.promise,
                resourceRequest = %keys.resource_request, error = %err,
                "reconcile lost a write race; retrying");
        } else {
            tracing::warn!(controller = %self.controller, name = %keys.name,
                namespace = %keys.namespace, promise = %keys.promise,
                resourceRequest = %keys.resource_request, error = %err,
                "reconcile failed");
        }
        Action::requeue(state.context().config().requeue_default)
    }
}

/// Starts a [`Controller`] under a [`Harness`]: the last call of a controller's set-up.
pub trait Start<K>
where
    K: LogSubject + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Debug + Unpin,
{
    /// Runs this controller with `reconcile` on `state` until its watches end; the
    /// results are drained (a failed reconcile was already logged by the error policy).
    fn start<C, F, Fut>(
        self,
        harness: Harness,
        reconcile: F,
        state: Arc<C>,
    ) -> impl Future<Output = ()>
    where
        C: Shared,
        F: FnMut(Arc<K>, Arc<C>) -> Fut,
        Fut: Future<Output = Result<Action, Error>> + Send + 'static;

    /// As [`Start::start`], with `on_result` called on every result (e.g. to forget an
    /// object the controller found deleted).
    fn start_with<C, F, Fut, R, RFut>(
        self,
        harness: Harness,
        reconcile: F,
        state: Arc<C>,
        on_result: R,
    ) -> impl Future<Output = ()>
    where
        C: Shared,
        F: FnMut(Arc<K>, Arc<C>) -> Fut,
        Fut: Future<Output = Result<Action, Error>> + Send + 'static,
        R: FnMut(RunResult<K>) -> RFut,
        RFut: Future<Output = ()>;
}

impl<K> Start<K> for Controller<K>
where
    K: LogSubject + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Debug + Unpin,
{
    fn start<C, F, Fut>(
        self,
        harness: Harness,
        reconcile: F,
        state: Arc<C>,
    ) -> impl Future<Output = ()>
    where
        C: Shared,
        F: FnMut(Arc<K>, Arc<C>) -> Fut,
        Fut: Future<Output = Result<Action, Error>> + Send + 'static,
    {
        self.start_with(harness, reconcile, state, |_| async {})
    }

    fn start_with<C, F, Fut, R, RFut>(
        self,
        harness: Harness,
        reconcile: F,
        state: Arc<C>,
        on_result: R,
    ) -> impl Future<Output = ()>
    where
        C: Shared,
        F: FnMut(Arc<K>, Arc<C>) -> Fut,
        Fut: Future<Output = Result<Action, Error>> + Send + 'static,
        R: FnMut(RunResult<K>) -> RFut,
        RFut: Future<Output = ()>,
    {
        let metrics = state.context().metrics.clone();
        let reconcile = instrument(
            metrics,
            &harness.controller,
            harness.promise.clone(),
            reconcile,
        );
        let policy = harness;
        self.run(
            reconcile,
            move |obj: Arc<K>, err: &Error, state: Arc<C>| {
                policy.on_error(obj.as_ref(), err, state.as_ref())
            },
            state,
        )
        .for_each(on_result)
    }
}
