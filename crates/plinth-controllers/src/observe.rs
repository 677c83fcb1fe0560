//! Metric hooks the controllers call at the few places where something worth counting
//! happens: a state store write of a WorkPlacement, a scheduling outcome, a finished
//! pipeline Job. Each is one call from the controller; the metric families live in
//! [`plinth_api::metrics::Metrics`].

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use plinth_api::constants::labels as kl;
use plinth_api::metrics::{Metrics, labels};
use plinth_api::{Destination, WorkPlacement};
use plinth_statestore::{StoreError, WriteOp, WriteOutcome};

/// Content bytes a write sends (file contents; deletions count zero).
pub fn content_bytes(ops: &[WriteOp]) -> u64 {
    ops.iter()
        .map(|op| match op {
            WriteOp::ReplaceDir { files, .. } => files.iter().map(|(_, c)| c.len() as u64).sum(),
            WriteOp::Put { content, .. } => content.len() as u64,
            WriteOp::Delete { .. } | WriteOp::DeleteDir { .. } => 0,
        })
        .sum()
}

fn label_of<'a>(wp: &'a WorkPlacement, key: &str) -> &'a str {
    wp.labels().get(key).map(String::as_str).unwrap_or("")
}

fn spec_or_label<'a>(field: &'a Option<String>, wp: &'a WorkPlacement, key: &str) -> &'a str {
    field.as_deref().unwrap_or_else(|| label_of(wp, key))
}

/// Records a WorkPlacement's write to its Destination's state store: the store's write
/// count, latency, bytes and commits, and Kratix's `kratix_workplacement_writes_total`
/// (`result` success or failure, with the placement's Promise, resource, Destination and
/// pipeline).
pub fn workplacement_write(
    metrics: &Metrics,
    wp: &WorkPlacement,
    dest: &Destination,
    bytes: u64,
    elapsed: Duration,
    result: &Result<WriteOutcome, StoreError>,
) {
    let store = &dest.spec.state_store_ref;
    let outcome = match result {
        Ok(o) => Ok((o.changed, o.version_id.as_str())),
        Err(_) => Err(()),
    };
    metrics.observe_store_write(store.kind.as_str(), &store.name, elapsed, bytes, outcome);
    let result = if result.is_ok() { "success" } else { "failure" };
    metrics
        .workplacement_writes
        .get_or_create(&labels([
            ("result", result),
            (
                "promise",
                spec_or_label(&wp.spec.promise_name, wp, kl::PROMISE_NAME),
            ),
            (
                "resource",
                spec_or_label(&wp.spec.resource_name, wp, kl::RESOURCE_NAME),
            ),
            ("destination", &dest.name_any()),
            ("pipeline", label_of(wp, kl::PIPELINE_NAME)),
        ]))
        .inc();
}

/// Scheduling outcome of a workload group, as Kratix counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Placed on a Destination.
    Scheduled,
    /// No Destination matches.
    Unscheduled,
    /// Placed on a Destination that no longer matches.
    Misplaced,
}

/// Counts one scheduling outcome in `kratix_workplacement_outcomes_total` with Kratix's
/// labels (`destination` empty when unscheduled).
pub fn placement_outcome(
    metrics: &Metrics,
    outcome: Outcome,
    promise: &str,
    resource: &str,
    namespace: &str,
    destination: &str,
) {
    let result = match outcome {
        Outcome::Scheduled => "scheduled",
        Outcome::Unscheduled => "unscheduled",
        Outcome::Misplaced => "misplaced",
    };
    metrics
        .workplacement_outcomes
        .get_or_create(&labels([
            ("result", result),
            ("promise", promise),
            ("resource", resource),
            ("namespace", namespace),
            ("destination", destination),
        ]))
        .inc();
}

/// Records a pipeline Job that has just been seen finished (`succeeded` or `failed`),
/// with its duration from `status.startTime` to `status.completionTime` (or the last
/// condition's transition when Kubernetes sets no completion time, as for failed Jobs).
/// Labels come from the Job's Kratix labels (`promise`, `pipeline`).
pub fn pipeline_finished(metrics: &Metrics, job: &Job, succeeded: bool) {
    let labels = job.labels();
    let get = |k: &str| labels.get(k).map(String::as_str).unwrap_or("");
    let status = job.status.clone().unwrap_or_default();
    let end = status.completion_time.map(|t| t.0).or_else(|| {
        status
            .conditions
            .as_deref()
            .unwrap_or(&[])
            .iter()
            .filter_map(|c| c.last_transition_time.as_ref().map(|t| t.0))
            .max()
    });
    let took = match (status.start_time.map(|t| t.0), end) {
        (Some(s), Some(e)) => e.duration_since(s).try_into().unwrap_or(Duration::ZERO),
        _ => Duration::ZERO,
    };
    let result = if succeeded { "succeeded" } else { "failed" };
    metrics.observe_pipeline(get(kl::PROMISE_NAME), get(kl::PIPELINE_NAME), result, took);
}

/// Tracks pipeline Jobs and counts each one once when it is seen finishing.
#[derive(Default)]
pub struct PipelineTracker {
    /// Job uid → whether it was finished when last seen.
    finished: std::collections::HashMap<String, bool>,
    /// Set after the first listing: Jobs first seen later are new, and count.
    listed: bool,
}

impl PipelineTracker {
    /// Takes one event of a watch on pipeline Jobs; records a Job that went from running
    /// (or unseen since the first listing) to finished. Jobs already finished in the first
    /// listing were finished before this process and are not counted.
    pub fn observe(&mut self, metrics: &Metrics, event: kube::runtime::watcher::Event<Job>) {
        use crate::workflow::engine::{JobState, job_state};
        use kube::runtime::watcher::Event;
        let (job, listing) = match event {
            Event::Apply(job) => (job, false),
            Event::InitApply(job) => (job, true),
            Event::Delete(job) => {
                self.finished.remove(&job.uid().unwrap_or_default());
                return;
            }
            Event::Init => return,
            Event::InitDone => {
                self.listed = true;
                return;
            }
        };
        let state = job_state(&job);
        let done = state != JobState::Running;
        let uid = job.uid().unwrap_or_default();
        let before = self.finished.insert(uid, done);
        let count = match before {
            Some(was_done) => !was_done,
            None => !listing || self.listed,
        };
        if done && count {
            pipeline_finished(metrics, &job, state == JobState::Succeeded);
        }
    }
}

/// Watches the pipeline Jobs (those with Kratix's pipeline label) and records each as it
/// finishes ([`pipeline_finished`]). Runs until the process stops.
pub async fn watch_pipelines(ctx: std::sync::Arc<crate::Context>) {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let jobs: kube::Api<Job> = kube::Api::all(ctx.client.clone());
    let cfg =
        watcher::Config::default().labels(&format!("{},{}", kl::PROMISE_NAME, kl::PIPELINE_NAME));
    let mut tracker = PipelineTracker::default();
    let mut events = watcher(jobs, cfg).default_backoff().boxed();
    while let Some(ev) = events.next().await {
        match ev {
            Ok(ev) => tracker.observe(&ctx.metrics, ev),
            Err(e) => tracing::debug!(error = %e, "pipeline Job watch"),
        }
    }
}

/// What [`forget_deleted`] removes series for.
enum Gone {
    Promise(String),
    Destination(String),
    Store(&'static str, String),
}

/// Names of the `K`s as they are deleted (gone from the API, every finalizer done), from
/// a metadata-only watch.
fn deleted_names<K>(client: &kube::Client) -> impl futures::Stream<Item = String> + Send + 'static
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let api = kube::Api::<kube::core::PartialObjectMeta<K>>::all(client.clone());
    watcher(api, watcher::Config::default())
        .default_backoff()
        .filter_map(|ev| async move {
            match ev {
                Ok(watcher::Event::Delete(m)) => Some(m.name_any()),
                Ok(_) => None,
                Err(e) => {
                    tracing::debug!(kind = %K::kind(&()), error = %e, "deletion watch for metrics");
                    None
                }
            }
        })
}

/// Removes the series named after a Promise, a Destination or a state store when the
/// object is deleted, whether or not its controller saw the deletion (a Destination
/// with `cleanup: none` has no finalizer, so no reconcile sees it go). A request's series
/// go with its last Work (the scheduler's deletion). Runs until the process stops.
pub async fn forget_deleted(ctx: std::sync::Arc<crate::Context>) {
    use futures::StreamExt;
    use plinth_api::{BucketStateStore, GitStateStore, Promise};
    let c = &ctx.client;
    let streams: Vec<futures::stream::BoxStream<'static, Gone>> = vec![
        deleted_names::<Promise>(c).map(Gone::Promise).boxed(),
        deleted_names::<Destination>(c)
            .map(Gone::Destination)
            .boxed(),
        deleted_names::<GitStateStore>(c)
            .map(|n| Gone::Store("GitStateStore", n))
            .boxed(),
        deleted_names::<BucketStateStore>(c)
            .map(|n| Gone::Store("BucketStateStore", n))
            .boxed(),
    ];
    let mut gone = futures::stream::select_all(streams);
    while let Some(g) = gone.next().await {
        match g {
            Gone::Promise(name) => {
                ctx.metrics.forget(&[("promise", &name)]);
            }
            Gone::Destination(name) => {
                ctx.metrics.forget(&[("destination", &name)]);
            }
            Gone::Store(kind, name) => ctx.metrics.forget_store(kind, &name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_count_contents_only() {
        let ops = vec![
            WriteOp::ReplaceDir {
                dir: "d".into(),
                files: vec![("a".into(), vec![0; 3]), ("b".into(), vec![0; 4])],
            },
            WriteOp::Put {
                path: "p".into(),
                content: vec![0; 5],
            },
            WriteOp::Delete { path: "x".into() },
        ];
        assert_eq!(content_bytes(&ops), 12);
    }

    #[test]
    fn pipeline_duration_from_job_times() {
        let job: Job = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "j", "labels": {
                kl::PROMISE_NAME: "redis", kl::PIPELINE_NAME: "instance-configure"}},
            "status": {"startTime": "2026-01-01T00:00:00Z",
                       "completionTime": "2026-01-01T00:00:07Z", "succeeded": 1}
        }))
        .expect("job");
        let m = Metrics::new();
        pipeline_finished(&m, &job, true);
        let text = m.encode();
        assert!(text.contains(
            r#"plinth_pipeline_duration_seconds_sum{promise="redis",pipeline="instance-configure",result="succeeded"} 7.0"#
        ), "{text}");
        assert!(text.contains(
            r#"plinth_pipeline_runs_total{promise="redis",pipeline="instance-configure",result="succeeded"} 1"#
        ));
    }
}
