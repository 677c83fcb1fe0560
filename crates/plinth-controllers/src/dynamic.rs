//! The registry of running dynamic resource-request controllers, one per Promise API.
//!
//! The Promise controller starts and stops them ([`crate::request::start`]); the
//! registry itself knows nothing of how a request is reconciled, so the shared
//! [`crate::Context`] that holds it depends on neither the Promise nor the request
//! controller.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::api::{ApiResource, GroupVersionKind};
use tokio::task::JoinHandle;

/// A Promise API as the request controller watches it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestApi {
    /// The API group of the Promise's CRD, e.g. `example.promise.syntasso.io`.
    pub group: String,
    /// The request kind, e.g. `Redis`.
    pub kind: String,
    /// The plural resource name, e.g. `redis`.
    pub plural: String,
    /// The CRD's storage version (reported as the Promise's `status.apiVersion`).
    pub storage_version: String,
    /// The version the controller watches: served now.
    pub served_version: String,
}

impl RequestApi {
    /// The dynamic API resource at the watched version.
    pub fn resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(&self.group, &self.served_version, &self.kind),
            &self.plural,
        )
    }
}

struct Running {
    api: RequestApi,
    task: JoinHandle<()>,
}

/// The running request controllers keyed by Promise name.
#[derive(Default)]
pub struct RequestControllers {
    inner: Mutex<HashMap<String, Running>>,
}

impl RequestControllers {
    /// Starts the controller for `promise` with `start` (which spawns it on `api`), or
    /// restarts it when its API changed or its task ended; does nothing when it already
    /// runs on `api`.
    pub fn ensure(
        &self,
        promise: &str,
        api: RequestApi,
        start: impl FnOnce(RequestApi) -> JoinHandle<()>,
    ) {
        let mut map = self.inner.lock().expect("request controllers poisoned");
        if let Some(r) = map.get(promise) {
            if r.api == api && !r.task.is_finished() {
                return;
            }
            r.task.abort();
        }
        tracing::info!(promise, kind = %api.kind, version = %api.served_version, "starting resource request controller");
        let task = start(api.clone());
        map.insert(promise.to_string(), Running { api, task });
    }

    /// Stops the controller for `promise` (Promise deleted or API unusable).
    pub fn stop(&self, promise: &str) {
        if let Some(r) = self
            .inner
            .lock()
            .expect("request controllers poisoned")
            .remove(promise)
        {
            r.task.abort();
            tracing::info!(promise, "stopped resource request controller");
        }
    }

    /// The API the controller for `promise` watches, if running.
    pub fn api_of(&self, promise: &str) -> Option<RequestApi> {
        self.inner
            .lock()
            .expect("request controllers poisoned")
            .get(promise)
            .map(|r| r.api.clone())
    }
}
