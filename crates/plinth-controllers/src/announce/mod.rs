//! Events for condition transitions of Promises and resource requests, as Kratix emits
//! them: `WorksSucceeded`, `WorksFailing`, `WorksMisplaced`, `ConfigureWorkflowCompleted`,
//! `RequirementsFulfilled`, `RequirementsNotInstalled`, `RequirementsNotAvailable`,
//! `PausedReconciliation`.
//!
//! Kratix emits most of these on every reconcile; here each is emitted once per
//! transition of the condition it reports (its `lastTransitionTime` and reason), so a
//! settled platform writes no Events. A wrapper runs before the reconcile function on
//! the object as the watch delivered it, which carries the last status written, by this
//! controller or by a pipeline's status-writer.

pub mod announced;

use std::future::Future;
use std::sync::Arc;

use kube::api::DynamicObject;

use crate::context::Context;
use announced::due;

/// The context of a controller whose state is the [`Context`] itself.
pub fn itself(ctx: &Context) -> &Context {
    ctx
}

/// Wraps the reconcile function of a controller of `component` so the Events due for the
/// object's conditions ([`due`]) are published before it runs.
pub fn with_condition_events<C, F, Fut, T>(
    component: &'static str,
    context_of: fn(&C) -> &Context,
    mut reconcile: F,
) -> impl FnMut(Arc<DynamicObject>, Arc<C>) -> futures::future::BoxFuture<'static, T>
where
    C: Send + Sync + 'static,
    F: FnMut(Arc<DynamicObject>, Arc<C>) -> Fut,
    Fut: Future<Output = T> + Send + 'static,
{
    move |obj: Arc<DynamicObject>, c: Arc<C>| {
        let events = due(&context_of(&c).announced, component, &obj);
        let c2 = c.clone();
        let obj2 = obj.clone();
        let fut = reconcile(obj, c);
        Box::pin(async move {
            let ctx = context_of(&c2);
            let reference = crate::support::reference(&obj2);
            let recorder = ctx.recorder(component);
            for (reason, warning, message) in events {
                crate::support::publish(
                    &recorder,
                    &reference,
                    crate::support::event_type(warning),
                    reason,
                    message,
                )
                .await;
            }
            fut.await
        })
    }
}
