//! One wrapper around every controller's reconcile function: it counts reconciles and
//! errors, times them, tracks the reconciles running now
//! ([`plinth_api::metrics::Metrics`]), and logs "reconciliation started" / "reconciliation
//! finished" with Kratix's log keys (`controller`, `name`, `namespace`, `promise`,
//! `resourceRequest`) and the duration. Reconcilers themselves know nothing of it.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use plinth_api::constants::labels as kl;
use plinth_api::metrics::{Metrics, labels};

/// Who the object of a reconcile is, in Kratix's log keys.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogKeys {
    /// The object's name.
    pub name: String,
    /// The object's namespace (empty for cluster-scoped objects).
    pub namespace: String,
    /// The Promise the object belongs to (empty when none).
    pub promise: String,
    /// `<promise>/<namespace>/<name>` of the resource request the object belongs to
    /// (empty when none).
    pub resource_request: String,
}

/// An object a controller reconciles, as far as logs are concerned: the Promise and the
/// resource request it belongs to. By default read from Kratix's labels
/// (`kratix.io/promise-name`, `kratix.io/resource-name`, `kratix.io/resource-namespace`).
pub trait LogSubject: Resource + Sized {
    /// `(promise, request name, request namespace)`, each empty when unknown; the
    /// namespace defaults to the object's own.
    fn owners(&self) -> (String, String, String) {
        let l = self.labels();
        let label = |k: &str| l.get(k).cloned().unwrap_or_default();
        (
            label(kl::PROMISE_NAME),
            label(kl::RESOURCE_NAME),
            label(kl::RESOURCE_NAMESPACE),
        )
    }
}

impl LogSubject for kube::api::DynamicObject {}
impl LogSubject for plinth_api::Destination {}
impl LogSubject for plinth_api::GitStateStore {}
impl LogSubject for plinth_api::BucketStateStore {}
impl LogSubject for plinth_api::HealthRecord {}
impl LogSubject for plinth_api::HealthSource {}
impl LogSubject for plinth_api::PromiseRelease {}
impl LogSubject for plinth_api::DryRun {}

impl LogSubject for plinth_api::Work {
    fn owners(&self) -> (String, String, String) {
        let s = &self.spec;
        (
            s.promise_name.clone().unwrap_or_default(),
            s.resource_name.clone().unwrap_or_default(),
            String::new(),
        )
    }
}

impl LogSubject for plinth_api::WorkPlacement {
    fn owners(&self) -> (String, String, String) {
        let s = &self.spec;
        (
            s.promise_name.clone().unwrap_or_default(),
            s.resource_name.clone().unwrap_or_default(),
            String::new(),
        )
    }
}

/// The log keys of `obj` reconciled by `controller`. `promise` is the Promise of a
/// dynamic resource-request controller (the object is then the request itself); other
/// objects name their Promise and request through Kratix's labels.
pub fn log_keys<K: LogSubject>(controller: &str, promise: Option<&str>, obj: &K) -> LogKeys {
    let name = obj.name_any();
    let namespace = obj.namespace().unwrap_or_default();
    let (promise, resource_request) = match promise {
        Some(p) => (p.to_string(), format!("{p}/{namespace}/{name}")),
        None if controller == "promise" => (name.clone(), String::new()),
        None => {
            let (p, rr, rr_ns) = obj.owners();
            let rr_ns = if rr_ns.is_empty() {
                namespace.clone()
            } else {
                rr_ns
            };
            let resource_request = if rr.is_empty() || p.is_empty() {
                String::new()
            } else {
                format!("{p}/{rr_ns}/{rr}")
            };
            (p, resource_request)
        }
    };
    LogKeys {
        name,
        namespace,
        promise,
        resource_request,
    }
}

/// Wraps `reconcile` of `controller` (a short name: `promise`, `scheduler`, ...) so every
/// call is counted, timed and logged. `promise` is set for a dynamic resource-request
/// controller. Pass the result to `Controller::run` in place of the reconcile function.
pub fn instrument<K, C, F, Fut, E>(
    metrics: Arc<Metrics>,
    controller: &str,
    promise: Option<String>,
    mut reconcile: F,
) -> impl FnMut(Arc<K>, Arc<C>) -> BoxFuture<'static, Result<Action, E>> + use<K, C, F, Fut, E>
where
    K: LogSubject + Send + Sync + 'static,
    C: Send + Sync + 'static,
    F: FnMut(Arc<K>, Arc<C>) -> Fut,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let controller = controller.to_string();
    move |obj: Arc<K>, ctx: Arc<C>| {
        let keys = log_keys(&controller, promise.as_deref(), obj.as_ref());
        let fut = reconcile(obj, ctx);
        let metrics = metrics.clone();
        let controller = controller.clone();
        Box::pin(async move {
            let by_controller = labels([("controller", &controller)]);
            tracing::debug!(
                controller = %controller,
                name = %keys.name,
                namespace = %keys.namespace,
                promise = %keys.promise,
                resourceRequest = %keys.resource_request,
                "reconciliation started"
            );
            let started = Instant::now();
            metrics.active_workers.get_or_create(&by_controller).inc();
            let result = fut.await;
            metrics.active_workers.get_or_create(&by_controller).dec();
            let took = started.elapsed();
            metrics
                .reconcile_time
                .get_or_create(&by_controller)
                .observe(took.as_secs_f64());
            let outcome = if result.is_ok() { "success" } else { "error" };
            metrics
                .reconciles
                .get_or_create(&labels([("controller", &controller), ("result", outcome)]))
                .inc();
            match &result {
                Ok(action) => tracing::debug!(
                    controller = %controller,
                    name = %keys.name,
                    namespace = %keys.namespace,
                    promise = %keys.promise,
                    resourceRequest = %keys.resource_request,
                    duration = ?took,
                    requeue = ?action,
                    "reconciliation finished"
                ),
                Err(e) => {
                    metrics.reconcile_errors.get_or_create(&by_controller).inc();
                    tracing::debug!(
                        controller = %controller,
                        name = %keys.name,
                        namespace = %keys.namespace,
                        promise = %keys.promise,
                        resourceRequest = %keys.resource_request,
                        duration = ?took,
                        error = %e,
                        "reconciliation finished"
                    );
                }
            }
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;
    use plinth_api::WorkPlacement;

    fn wp(labels: &[(&str, &str)]) -> WorkPlacement {
        let mut wp: WorkPlacement = serde_json::from_value(serde_json::json!({
            "apiVersion": "platform.kratix.io/v1alpha1",
            "kind": "WorkPlacement",
            "metadata": {"name": "wp1", "namespace": "default"},
            "spec": {}
        }))
        .expect("workplacement");
        wp.metadata = ObjectMeta {
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..wp.metadata
        };
        wp
    }

    #[test]
    fn keys_from_kratix_labels() {
        let mut obj = wp(&[]);
        obj.spec.promise_name = Some("redis".into());
        obj.spec.resource_name = Some("r1".into());
        let k = log_keys("workplacement", None, &obj);
        assert_eq!(k.promise, "redis");
        assert_eq!(k.resource_request, "redis/default/r1");
        let k = log_keys("workplacement", None, &wp(&[]));
        assert_eq!((k.promise.as_str(), k.resource_request.as_str()), ("", ""));
        let k = log_keys("request", Some("redis"), &wp(&[]));
        assert_eq!(k.resource_request, "redis/default/wp1");
    }

    #[test]
    fn keys_from_labels() {
        let dest: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns", "labels": {
                kl::PROMISE_NAME: "redis", kl::RESOURCE_NAME: "r1"}}
        }))
        .expect("object");
        let k = log_keys("job", None, &dest);
        assert_eq!(k.resource_request, "redis/ns/r1");
    }

    #[tokio::test]
    async fn counts_times_and_errors() {
        let metrics = Arc::new(Metrics::new());
        let mut ok = instrument(
            metrics.clone(),
            "workplacement",
            None,
            |_: Arc<WorkPlacement>, _: Arc<()>| async { Ok::<_, String>(Action::await_change()) },
        );
        let mut bad = instrument(
            metrics.clone(),
            "workplacement",
            None,
            |_: Arc<WorkPlacement>, _: Arc<()>| async { Err::<Action, _>("boom".to_string()) },
        );
        ok(Arc::new(wp(&[])), Arc::new(())).await.expect("ok");
        ok(Arc::new(wp(&[])), Arc::new(())).await.expect("ok");
        assert!(bad(Arc::new(wp(&[])), Arc::new(())).await.is_err());
        let text = metrics.encode();
        for line in [
            r#"controller_runtime_reconcile_total{controller="workplacement",result="success"} 2"#,
            r#"controller_runtime_reconcile_total{controller="workplacement",result="error"} 1"#,
            r#"controller_runtime_reconcile_errors_total{controller="workplacement"} 1"#,
            r#"controller_runtime_reconcile_time_seconds_count{controller="workplacement"} 3"#,
            r#"controller_runtime_active_workers{controller="workplacement"} 0"#,
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }
}
