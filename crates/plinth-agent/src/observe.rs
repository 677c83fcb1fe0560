//! Metrics of the agent's passes ([`plinth_api::metrics::Metrics`]`::agent_*`).

use std::time::Duration;

use plinth_api::metrics::{Metrics, labels};

use crate::report::SyncReport;

/// Records one pass of agent `agent`: its result, duration and the objects it applied,
/// left unchanged and pruned.
pub(crate) fn pass(metrics: &Metrics, agent: &str, report: &SyncReport, took: Duration) {
    let result = if report.errors.is_empty() {
        "success"
    } else {
        "error"
    };
    metrics
        .agent_passes
        .get_or_create(&labels([("agent", agent), ("result", result)]))
        .inc();
    metrics
        .agent_pass_duration
        .get_or_create(&labels([("agent", agent)]))
        .observe(took.as_secs_f64());
    for (action, n) in [
        ("applied", report.applied),
        ("unchanged", report.unchanged),
        ("pruned", report.pruned),
    ] {
        metrics
            .agent_objects
            .get_or_create(&labels([("agent", agent), ("action", action)]))
            .inc_by(n as u64);
    }
}
