//! The registered webhooks: read from the store on the first write after a change of a
//! webhook configuration (never on every write), in kube-apiserver's order
//! (configurations by name, webhooks in their order), with the defaults of
//! `admissionregistration.k8s.io/v1` applied.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{RuleWithOperations, WebhookClientConfig};
use kube::core::Selector;
use serde::Deserialize;
use serde_json::Value;

use crate::registry::rkey;
use crate::store::{Event, Store, StoreError};

/// The API group of the webhook configurations.
pub(super) const GROUP: &str = "admissionregistration.k8s.io";
/// The plural of MutatingWebhookConfiguration.
pub(super) const MUTATING: &str = "mutatingwebhookconfigurations";
/// The plural of ValidatingWebhookConfiguration.
pub(super) const VALIDATING: &str = "validatingwebhookconfigurations";

/// Default and maximum of `timeoutSeconds`.
const DEFAULT_TIMEOUT: u64 = 10;
const MAX_TIMEOUT: u64 = 30;
/// At most this many pooled clients are kept; beyond it the pool starts afresh.
const MAX_CLIENTS: usize = 256;

/// One webhook of a configuration, with its defaults applied.
pub(super) struct Hook {
    /// The webhook's `name`.
    pub name: String,
    /// The configuration's name.
    pub configuration: String,
    /// Identifies the webhook and the configuration version it came from (pooled
    /// clients and reinvocation are keyed by it).
    pub key: String,
    /// Where to call.
    pub client_config: WebhookClientConfig,
    /// `rules` (none: the webhook matches nothing).
    pub rules: Vec<RuleWithOperations>,
    /// `failurePolicy: Ignore` (default Fail).
    pub ignore_failures: bool,
    /// `namespaceSelector` (empty: everything).
    pub namespace_selector: Selector,
    /// `objectSelector` (empty: everything).
    pub object_selector: Selector,
    /// `sideEffects` allows dry-run requests (None or NoneOnDryRun).
    pub dry_run_safe: bool,
    /// `timeoutSeconds` (default 10, at most 30).
    pub timeout: Duration,
    /// `reinvocationPolicy: IfNeeded` (mutating webhooks only).
    pub reinvoke: bool,
}

/// The webhooks registered at one moment.
#[derive(Default)]
pub(super) struct Registered {
    /// Mutating webhooks in calling order.
    pub mutating: Vec<Arc<Hook>>,
    /// Validating webhooks.
    pub validating: Vec<Arc<Hook>>,
}

/// The cache of registered webhooks and their pooled HTTPS clients.
#[derive(Default)]
pub(crate) struct Webhooks {
    /// Bumped by every committed change of a webhook configuration.
    epoch: AtomicU64,
    cached: Mutex<Option<(u64, Arc<Registered>)>>,
    clients: Mutex<HashMap<String, reqwest::Client>>,
}

impl Webhooks {
    /// Notes committed events (the store's event sink calls this for every batch): a
    /// changed webhook configuration invalidates the cache and the pooled clients.
    pub(crate) fn observe(&self, events: &[Event]) {
        let changed = events
            .iter()
            .any(|e| e.key.rkey == rkey(GROUP, MUTATING) || e.key.rkey == rkey(GROUP, VALIDATING));
        if changed {
            self.epoch.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The registered webhooks, read from the store when a configuration changed since
    /// the last read.
    ///
    /// # Errors
    /// The store could not be read.
    pub(super) async fn registered(&self, store: &Store) -> Result<Arc<Registered>, StoreError> {
        let epoch = self.epoch.load(Ordering::SeqCst);
        if let Some((e, r)) = self.cached.lock().unwrap().as_ref()
            && *e == epoch
        {
            return Ok(r.clone());
        }
        let registered = Arc::new(load(store).await?);
        *self.cached.lock().unwrap() = Some((epoch, registered.clone()));
        self.clients.lock().unwrap().clear();
        Ok(registered)
    }

    /// The pooled client under `key`, built by `build` when there is none.
    pub(super) fn client<E>(
        &self,
        key: &str,
        build: impl FnOnce() -> Result<reqwest::Client, E>,
    ) -> Result<reqwest::Client, E> {
        let mut clients = self.clients.lock().unwrap();
        if let Some(c) = clients.get(key) {
            return Ok(c.clone());
        }
        if clients.len() >= MAX_CLIENTS {
            clients.clear();
        }
        let c = build()?;
        clients.insert(key.to_string(), c.clone());
        Ok(c)
    }
}

/// Reads both kinds of configuration from the store.
async fn load(store: &Store) -> Result<Registered, StoreError> {
    let mut mutating = store.all_of(rkey(GROUP, MUTATING)).await?;
    let mut validating = store.all_of(rkey(GROUP, VALIDATING)).await?;
    mutating.sort_by(|a, b| name_of(a).cmp(name_of(b)));
    validating.sort_by(|a, b| name_of(a).cmp(name_of(b)));
    Ok(Registered {
        mutating: mutating.iter().flat_map(mutating_hooks).collect(),
        validating: validating.iter().flat_map(validating_hooks).collect(),
    })
}

fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn version_of(obj: &Value) -> &str {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The fields both kinds of webhook have, decoded from either configuration's
/// `webhooks` (a validating webhook has no `reinvocationPolicy`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Common {
    name: String,
    client_config: WebhookClientConfig,
    rules: Option<Vec<RuleWithOperations>>,
    failure_policy: Option<String>,
    namespace_selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    object_selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    side_effects: String,
    timeout_seconds: Option<i32>,
    reinvocation_policy: Option<String>,
}

/// A webhook configuration as far as its webhooks go.
#[derive(Deserialize)]
struct Configuration {
    webhooks: Option<Vec<Common>>,
}

fn mutating_hooks(obj: &Value) -> Vec<Arc<Hook>> {
    configured_hooks(MUTATING, obj)
}

fn validating_hooks(obj: &Value) -> Vec<Arc<Hook>> {
    configured_hooks(VALIDATING, obj)
}

/// The webhooks of stored configuration `obj` of resource `plural`.
fn configured_hooks(plural: &str, obj: &Value) -> Vec<Arc<Hook>> {
    let config = match Configuration::deserialize(obj) {
        Ok(c) => c,
        Err(e) => return unusable(plural, obj, &e),
    };
    let hooks = config
        .webhooks
        .unwrap_or_default()
        .into_iter()
        .map(|mut w| {
            if plural == VALIDATING {
                w.reinvocation_policy = None;
            }
            w
        });
    hooks_of(plural, obj, hooks)
}

/// A stored configuration that does not decode (admission refuses such writes, so only
/// one stored before that check can be): logged and left out.
fn unusable(plural: &str, obj: &Value, e: &serde_json::Error) -> Vec<Arc<Hook>> {
    tracing::warn!(
        "{plural}.{GROUP} {:?} is not used: it does not decode: {e}",
        name_of(obj)
    );
    Vec::new()
}

fn hooks_of(plural: &str, obj: &Value, hooks: impl Iterator<Item = Common>) -> Vec<Arc<Hook>> {
    let configuration = name_of(obj).to_string();
    let mut out = Vec::new();
    for (i, w) in hooks.enumerate() {
        let selectors = selector(&w.namespace_selector)
            .and_then(|n| selector(&w.object_selector).map(|o| (n, o)));
        let (namespace_selector, object_selector) = match selectors {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(
                    "{plural}.{GROUP} {configuration:?} webhook {:?} is not used: {e}",
                    w.name
                );
                continue;
            }
        };
        let timeout = w
            .timeout_seconds
            .map_or(DEFAULT_TIMEOUT, |t| (t.max(1) as u64).min(MAX_TIMEOUT));
        out.push(Arc::new(Hook {
            key: format!("{plural}/{configuration}/{}/{i}", version_of(obj)),
            name: w.name,
            configuration: configuration.clone(),
            client_config: w.client_config,
            rules: w.rules.unwrap_or_default(),
            ignore_failures: w.failure_policy.as_deref() == Some("Ignore"),
            namespace_selector,
            object_selector,
            dry_run_safe: matches!(w.side_effects.as_str(), "None" | "NoneOnDryRun"),
            timeout: Duration::from_secs(timeout),
            reinvoke: w.reinvocation_policy.as_deref() == Some("IfNeeded"),
        }));
    }
    out
}

/// Why a webhook of a configuration is not used.
#[derive(Debug, thiserror::Error)]
enum WebhookConfigError {
    /// Its `namespaceSelector` or `objectSelector` is not a valid LabelSelector.
    #[error("invalid selector: {cause}")]
    InvalidSelector { cause: String },
}

/// A LabelSelector as a matcher (absent: matches everything).
fn selector(
    s: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
) -> Result<Selector, WebhookConfigError> {
    match s {
        None => Ok(Selector::default()),
        Some(s) => Selector::try_from(s.clone()).map_err(|e| WebhookConfigError::InvalidSelector {
            cause: e.to_string(),
        }),
    }
}
