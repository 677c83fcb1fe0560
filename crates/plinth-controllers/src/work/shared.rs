//! What the Work controller's reconciles and its WorkPlacement writes share: the
//! controller's state and how a WorkPlacement's conditions are read.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::runtime::reflector::Store;
use plinth_api::{Destination, Work, WorkPlacement};

use crate::context::Context;
use plinth_api::events::EventRecorder;

/// The Work controller's shared state.
pub(super) struct WorkCtx {
    pub(super) ctx: Arc<Context>,
    /// Events of the scheduling step (reporting component `Scheduler`).
    pub(super) recorder: EventRecorder,
    /// Events of the Work lifecycle (reporting component `WorkController`).
    pub(super) work_recorder: EventRecorder,
    /// The watched Works, to tell whether a deleted Work was its request's last.
    pub(super) works: Store<Work>,
    /// The watched Destinations, which every placement is chosen from.
    pub(super) destinations: Store<Destination>,
}

impl crate::support::harness::Shared for WorkCtx {
    fn context(&self) -> &Context {
        &self.ctx
    }
}

/// A WorkPlacement's conditions (none when it has no status).
pub(super) fn wp_conditions(wp: &WorkPlacement) -> Vec<Condition> {
    wp.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
}
