//! The GitStateStore and BucketStateStore controllers, and the [`registry`] of the
//! stores they opened.
//!
//! Per reconcile:
//! 1. Read the Secret named by `spec.secretRef` (namespace defaults to `default`). A
//!    missing Secret makes the store `NotReady/SecretNotFound` ("Secret <name> not found
//!    in namespace <ns>") and drops it from the registry; other read errors give
//!    `StateStoreError`. No `secretRef` is not an error: a `file://` Git store (the
//!    embedded default) and an `IAM` bucket need none (Kratix dereferenced nil).
//! 2. Build a [`StoreConfig`] from spec + Secret. Keys: basicAuth `username` (optional)
//!    and `password`; ssh `sshPrivateKey`, `knownHosts`, optional `passphrase`; githubApp
//!    `appID`, `installationID`, `privateKey` and optional `apiURL` (Plinth's addition: the
//!    GitHub API base, default `https://api.github.com`, e.g. `https://<host>/api/v3` for
//!    GitHub Enterprise Server — Kratix fixes it); bucket accessKey `accessKeyID`,
//!    `secretAccessKey`. A missing key is named with the Secret
//!    (`NotReady/ErrorInitialisingWriter`).
//! 3. If the registry already holds this store opened from the same store generation and
//!    Secret `resourceVersion`, keep it; else open it (`ErrorInitialisingWriter` on
//!    failure) and validate write permission (`ErrorValidatingPermissions` "Error
//!    validating state store permissions: <err>", entry dropped).
//! 4. `Ready`: `status.status=Ready`, `Ready=True/StateStoreReady` "State store is
//!    ready", `observedGeneration`; NotReady paths set `status.status=NotReady`.
//!    Events (`Ready` / Warning `NotReady`) only when the condition or
//!    `observedGeneration` changed.
//!
//! Secrets are watched and mapped to the stores that reference them, so changed
//! credentials are reloaded at once: the writer is opened again from the new Secret and
//! replaces the old one in the registry, whose credentials are never used again.
//! Credentials the remote refuses (at open, validation, or a WorkPlacement's write,
//! which reports it through the registry) make the store
//! `NotReady/AuthenticationFailed` naming the Secret, retried with backoff until the
//! Secret changes or the remote accepts them again. Deleting a store drops it from the
//! registry.
//!
//! URL schemes: Kratix accepts only `https://` and SSH URLs for GitStateStores. Plinth
//! additionally accepts `file://` (a local bare repository — the embedded mode's default
//! store) and `git://` (read-only daemons, useful in tests); the writer checks the URL.

pub mod registry;

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::Api;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use plinth_api::{
    BucketAuthMethod, BucketStateStore, GitAuthMethod, GitStateStore, SecretRef, StateStoreStatus,
};
use plinth_statestore::{BucketAuth, BucketConfig, GitAuth, GitConfig, StateStore, StoreConfig};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::Error;
use crate::context::{Context, ControllerConfig};
use crate::support::harness::{Harness, Start};
use crate::support::{
    describe, get_condition, patch_status, publish, set_condition, typed_reference,
};
use crate::triggers::{deletions, inputs_hash, watch_inputs};
use plinth_api::constants::condition_types;
use plinth_api::events::{EventRecorder, EventType};

/// Namespace of a `secretRef` without one.
pub const DEFAULT_SECRET_NAMESPACE: &str = "default";

/// Why a store is not Ready: the condition reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotReady {
    /// Kratix reason: `SecretNotFound`, `StateStoreError`, `ErrorInitialisingWriter`,
    /// `ErrorValidatingPermissions`.
    pub reason: &'static str,
    /// Human-readable cause naming the Secret, key or store.
    pub message: String,
}

impl NotReady {
    fn init(message: impl Into<String>) -> Self {
        NotReady {
            reason: "ErrorInitialisingWriter",
            message: message.into(),
        }
    }
}

/// The Secret's data as strings (`data` decoded, `stringData` as given).
pub type SecretData = BTreeMap<String, String>;

fn secret_data(secret: &Secret) -> SecretData {
    let mut out = BTreeMap::new();
    for (k, ByteString(v)) in secret.data.iter().flatten() {
        out.insert(k.clone(), String::from_utf8_lossy(v).into_owned());
    }
    for (k, v) in secret.string_data.iter().flatten() {
        out.insert(k.clone(), v.clone());
    }
    out
}

fn require<'a>(data: &'a SecretData, secret: &str, key: &str) -> Result<&'a str, NotReady> {
    data.get(key)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| NotReady::init(format!("Secret {secret} has no key {key:?}")))
}

/// What a state store kind contributes to the shared reconcile.
pub trait StateStoreObject:
    Resource<DynamicType = ()>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + crate::support::outcome::HasConditions
    + 'static
{
    /// `spec.secretRef`.
    fn secret_ref(&self) -> Option<&SecretRef>;
    /// Whether this configuration needs the Secret at all.
    fn needs_secret(&self) -> bool;
    /// `status`.
    fn store_status(&self) -> Option<&StateStoreStatus>;
    /// The endpoint for messages: the Git URL, or the bucket and its endpoint.
    fn endpoint(&self) -> String;
    /// Builds the writer configuration from the spec and the Secret's data (`secret` is
    /// `<namespace>/<name>` for messages, or empty when there is none).
    fn build_config(
        &self,
        secret: &str,
        data: &SecretData,
        cfg: &ControllerConfig,
    ) -> Result<StoreConfig, NotReady>;
}

/// A `secretRef` that names a Secret (one with an empty name names none).
fn named(secret_ref: Option<&SecretRef>) -> Option<&SecretRef> {
    secret_ref.filter(|s| s.name.as_deref().is_some_and(|n| !n.is_empty()))
}

impl StateStoreObject for GitStateStore {
    fn secret_ref(&self) -> Option<&SecretRef> {
        named(self.spec.secret_ref.as_ref())
    }

    fn needs_secret(&self) -> bool {
        let url = self.spec.url.as_deref().unwrap_or("");
        !(url.starts_with("file://") || url.starts_with("git://"))
    }

    fn store_status(&self) -> Option<&StateStoreStatus> {
        self.status.as_ref()
    }

    fn endpoint(&self) -> String {
        plinth_statestore::redact_url(self.spec.url.as_deref().unwrap_or_default())
    }

    fn build_config(
        &self,
        secret: &str,
        data: &SecretData,
        cfg: &ControllerConfig,
    ) -> Result<StoreConfig, NotReady> {
        let url = self
            .spec
            .url
            .clone()
            .filter(|u| !u.is_empty())
            .ok_or_else(|| NotReady::init("spec.url is empty"))?;
        let branch = self
            .spec
            .branch
            .clone()
            .filter(|b| !b.is_empty())
            .unwrap_or_else(|| "main".into());
        let work_dir = cfg
            .data_dir
            .join("statestores")
            .join(format!("GitStateStore-{}", self.name_any()));
        let mut g = GitConfig::new(url.clone(), branch, work_dir);
        g.path = self.spec.path.clone().unwrap_or_default();
        if let Some(author) = &self.spec.git_author {
            if let Some(n) = author.name.clone().filter(|n| !n.is_empty()) {
                g.author_name = n;
            }
            if let Some(e) = author.email.clone().filter(|e| !e.is_empty()) {
                g.author_email = e;
            }
        }
        g.batch_window = cfg.git_batch_window;
        g.auth = git_auth(
            self.spec.auth_method.unwrap_or_default(),
            &url,
            secret,
            data,
        )?;
        Ok(StoreConfig::Git(g))
    }
}

/// The Git credentials of `authMethod` from the Secret `secret`'s `data` (no Secret:
/// anonymous for basic auth). Errors name the Secret and the missing keys.
fn git_auth(
    method: GitAuthMethod,
    url: &str,
    secret: &str,
    data: &SecretData,
) -> Result<GitAuth, NotReady> {
    let has_secret = !secret.is_empty();
    Ok(match method {
        GitAuthMethod::BasicAuth if has_secret => {
            let password = require(data, secret, "password")?.to_string();
            let username = match data.get("username").filter(|u| !u.is_empty()) {
                Some(u) => u.clone(),
                None if url.contains("github") => "x-access-token".into(),
                None => {
                    return Err(NotReady::init(format!(
                        "Secret {secret} has no key \"username\""
                    )));
                }
            };
            GitAuth::Basic { username, password }
        }
        GitAuthMethod::BasicAuth => GitAuth::None,
        GitAuthMethod::Ssh => {
            if !has_secret {
                return Err(NotReady::init(
                    "authMethod ssh needs spec.secretRef with sshPrivateKey and knownHosts",
                ));
            }
            GitAuth::Ssh {
                private_key: require(data, secret, "sshPrivateKey")?.to_string(),
                known_hosts: require(data, secret, "knownHosts")?.to_string(),
                passphrase: data.get("passphrase").filter(|p| !p.is_empty()).cloned(),
            }
        }
        GitAuthMethod::GithubApp => {
            if !has_secret {
                return Err(NotReady::init(
                    "authMethod githubApp needs spec.secretRef with appID, installationID and privateKey",
                ));
            }
            let missing: Vec<&str> = ["appID", "installationID", "privateKey"]
                .into_iter()
                .filter(|k| data.get(*k).is_none_or(|v| v.trim().is_empty()))
                .collect();
            if !missing.is_empty() {
                let keys = missing
                    .iter()
                    .map(|k| format!("{k:?}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                let noun = if missing.len() == 1 { "key" } else { "keys" };
                return Err(NotReady::init(format!(
                    "Secret {secret} has no {noun} {keys} (authMethod githubApp needs appID, installationID and privateKey)"
                )));
            }
            GitAuth::GithubApp {
                app_id: data["appID"].trim().to_string(),
                installation_id: data["installationID"].trim().to_string(),
                private_key_pem: data["privateKey"].clone(),
                api_url: data
                    .get("apiURL")
                    .map(|u| u.trim().to_string())
                    .unwrap_or_default(),
            }
        }
    })
}

impl StateStoreObject for BucketStateStore {
    fn secret_ref(&self) -> Option<&SecretRef> {
        named(self.spec.secret_ref.as_ref())
    }

    fn needs_secret(&self) -> bool {
        self.spec.auth_method.unwrap_or_default() == BucketAuthMethod::AccessKey
    }

    fn store_status(&self) -> Option<&StateStoreStatus> {
        self.status.as_ref()
    }

    fn endpoint(&self) -> String {
        format!("bucket {} at {}", self.spec.bucket_name, self.spec.endpoint)
    }

    fn build_config(
        &self,
        secret: &str,
        data: &SecretData,
        _cfg: &ControllerConfig,
    ) -> Result<StoreConfig, NotReady> {
        let auth = match self.spec.auth_method.unwrap_or_default() {
            BucketAuthMethod::AccessKey => {
                if secret.is_empty() {
                    return Err(NotReady::init(
                        "authMethod accessKey needs spec.secretRef with accessKeyID and secretAccessKey",
                    ));
                }
                BucketAuth::AccessKey {
                    id: require(data, secret, "accessKeyID")?.to_string(),
                    secret: require(data, secret, "secretAccessKey")?.to_string(),
                }
            }
            BucketAuthMethod::Iam => BucketAuth::Iam,
        };
        let mut b = BucketConfig::s3(
            self.spec.endpoint.clone(),
            self.spec.bucket_name.clone(),
            auth,
        );
        b.path = self.spec.path.clone().unwrap_or_default();
        b.insecure = self.spec.insecure.unwrap_or(false);
        Ok(StoreConfig::Bucket(b))
    }
}

struct StoreState {
    ctx: Arc<Context>,
    recorder: EventRecorder,
    /// `<Kind>/<name>` → consecutive failed attempts, for the retry backoff.
    failures: Mutex<HashMap<String, u32>>,
}

impl crate::support::harness::Shared for StoreState {
    fn context(&self) -> &Context {
        &self.ctx
    }
}

impl StoreState {
    /// Delay before retrying a store that is not Ready: `requeue_default`, doubled on
    /// each consecutive failure, at most five times `requeue_slow`. Reset on success.
    fn retry_after(&self, key: &str, ok: bool, cfg: &ControllerConfig) -> Duration {
        let mut failures = self.failures.lock().expect("poisoned");
        if ok {
            failures.remove(key);
            return Duration::ZERO;
        }
        let n = failures.entry(key.to_string()).or_default();
        let delay = cfg.requeue_default.saturating_mul(1u32 << (*n).min(10));
        *n = n.saturating_add(1);
        delay.min((cfg.requeue_slow * 5).max(cfg.requeue_default))
    }
}

/// Runs the GitStateStore controller until the process stops. Needs `ctx.client`,
/// `ctx.stores` (filled here) and, from `ctx.config()`, `data_dir` (working copies under
/// `data_dir/statestores/`), `git_batch_window` and `requeue_default`.
pub async fn run_git(ctx: Arc<Context>) {
    run_kind::<GitStateStore>(ctx).await
}

/// Runs the BucketStateStore controller until the process stops. Needs `ctx.client`,
/// `ctx.stores` and `requeue_default`.
pub async fn run_bucket(ctx: Arc<Context>) {
    run_kind::<BucketStateStore>(ctx).await
}

/// Runs both state store controllers until the process stops.
pub async fn run(ctx: Arc<Context>) {
    tokio::join!(run_git(ctx.clone()), run_bucket(ctx));
}

fn stores_using_secret<K: StateStoreObject>(
    store: &Store<K>,
    secret: &Secret,
) -> Vec<ObjectRef<K>> {
    let name = secret.name_any();
    let ns = secret.namespace().unwrap_or_default();
    store
        .state()
        .into_iter()
        .filter(|s| {
            s.secret_ref().is_some_and(|r| {
                r.name.as_deref() == Some(name.as_str())
                    && r.namespace
                        .as_deref()
                        .filter(|n| !n.is_empty())
                        .unwrap_or(DEFAULT_SECRET_NAMESPACE)
                        == ns
            })
        })
        .map(|s| ObjectRef::from_obj(s.as_ref()))
        .collect()
}

async fn run_kind<K: StateStoreObject + crate::instrument::LogSubject>(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let kind = K::kind(&()).into_owned();
    // Woken by spec changes and deletions only: the controller's own status writes
    // must not wake it again.
    let (store, trigger) = watch_inputs(Api::<K>::all(client.clone()), |s: &K| inputs_hash(s, ()));
    let controller = Controller::for_stream(trigger, store.clone());
    let state = Arc::new(StoreState {
        failures: Mutex::new(HashMap::new()),
        recorder: ctx.recorder(&format!("{kind}Controller")),
        ctx: ctx.clone(),
    });
    controller
        .watches(
            Api::<Secret>::all(client.clone()),
            watcher::Config::default(),
            move |s: Secret| stores_using_secret(&store, &s),
        )
        // The main watch only reports applied objects; this one reports deletions,
        // whose reconcile finds no object and drops the writer (below).
        .watches_stream(deletions(Api::<K>::all(client)), |s: K| {
            Some(ObjectRef::from_obj(&s))
        })
        // A writer found the credentials refused: validate again and say so.
        .reconcile_on(revalidations::<K>(&ctx))
        .start_with(
            Harness::new(K::kind(&()).to_ascii_lowercase()),
            reconcile::<K>,
            state,
            move |res| {
                let ctx = ctx.clone();
                let kind = kind.clone();
                async move {
                    match res {
                        // The store was deleted: forget its writer.
                        Err(controller::Error::ObjectNotFound(obj)) => {
                            ctx.stores.mark_failed(&kind, &obj.name)
                        }
                        Err(e) => tracing::debug!(error = %e, "state store reconcile"),
                        Ok(_) => {}
                    }
                }
            },
        )
        .await;
}

/// The stores of kind `K` that writers reported refusing their credentials.
fn revalidations<K: StateStoreObject>(
    ctx: &Context,
) -> impl futures::Stream<Item = ObjectRef<K>> + Send + 'static {
    let prefix = format!("{}/", K::kind(&()));
    futures::stream::unfold(ctx.stores.revalidations(), move |mut rx| {
        let prefix = prefix.clone();
        async move {
            loop {
                match rx.recv().await {
                    Ok(k) => {
                        if let Some(name) = k.strip_prefix(&prefix) {
                            return Some((ObjectRef::new(name), rx));
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                }
            }
        }
    })
}

/// A store error of `open`/`validate` as the store's NotReady reason: refused
/// credentials are `AuthenticationFailed` (naming the Secret), not a generic failure.
fn open_error(e: plinth_statestore::StoreError, secret: &str, fallback: NotReady) -> NotReady {
    use plinth_statestore::StoreError::{AuthFailed, GithubAppAuthFailed};
    match e {
        e @ (AuthFailed { .. } | GithubAppAuthFailed { .. }) => NotReady {
            reason: REASON_AUTHENTICATION_FAILED,
            message: if secret.is_empty() {
                format!("{e}; the store has no spec.secretRef")
            } else {
                format!("{e}; update the credentials in Secret {secret}")
            },
        },
        _ => fallback,
    }
}

/// Reason of a store (and of a WorkPlacement's failed write) whose credentials the
/// remote refused.
pub const REASON_AUTHENTICATION_FAILED: &str = "AuthenticationFailed";

/// One reconcile, a failure of it reported on the store ([`crate::support::outcome`]).
async fn reconcile<K: StateStoreObject>(
    obj: Arc<K>,
    state: Arc<StoreState>,
) -> Result<Action, Error> {
    let result = reconcile_steps(obj.clone(), state.clone()).await;
    let component = format!("{}Controller", K::kind(&()));
    crate::support::outcome::report_typed(&state.ctx, &component, obj.as_ref(), result).await
}

async fn reconcile_steps<K: StateStoreObject>(
    obj: Arc<K>,
    state: Arc<StoreState>,
) -> Result<Action, Error> {
    let ctx = &state.ctx;
    let cfg = ctx.config();
    let kind = K::kind(&()).into_owned();
    let name = obj.name_any();
    let generation = obj.meta().generation;

    // Bounded: a dead endpoint must not hold this store's reconcile (the next Secret or
    // spec change is only seen once it returns). Dropping the future cancels the call.
    let outcome =
        match tokio::time::timeout(cfg.network_timeout, open_store(&state, obj.as_ref(), &cfg))
            .await
        {
            Ok(outcome) => outcome,
            Err(_) => Err(NotReady {
                reason: "StateStoreError",
                message: format!(
                    "{} did not answer within {}s",
                    obj.endpoint(),
                    cfg.network_timeout.as_secs()
                ),
            }),
        };
    let (ready, reason, message) = match &outcome {
        Ok(()) => (true, "StateStoreReady", "State store is ready".to_string()),
        Err(nr) => {
            ctx.stores.mark_failed(&kind, &name);
            (false, nr.reason, nr.message.clone())
        }
    };

    let api: Api<K> = Api::all(ctx.client.clone());
    let mut changed = false;
    patch_status(&api, &name, |cur: &K| {
        let st = cur.store_status();
        let mut conds: Vec<Condition> = st.and_then(|s| s.conditions.clone()).unwrap_or_default();
        let mut ch = set_condition(&mut conds, condition_types::READY, ready, reason, &message, generation);
        ch |= st.and_then(|s| s.observed_generation) != generation;
        let status_word = if ready { "Ready" } else { "NotReady" };
        let status_same = st.and_then(|s| s.status.as_deref()) == Some(status_word);
        changed = ch;
        (ch || !status_same).then(|| json!({"status": status_word, "conditions": conds, "observedGeneration": generation}))
    })
    .await
    .map_err(|e| Error::kube("writing status of", describe(obj.as_ref()), e))?;
    if changed {
        if ready {
            publish(
                &state.recorder,
                &typed_reference(obj.as_ref()),
                EventType::Normal,
                plinth_api::constants::events::READY,
                format!("{kind} \"{name}\" is ready"),
            )
            .await;
        } else {
            publish(
                &state.recorder,
                &typed_reference(obj.as_ref()),
                EventType::Warning,
                plinth_api::constants::events::NOT_READY,
                message.clone(),
            )
            .await;
        }
    }
    let retry = state.retry_after(&format!("{kind}/{name}"), ready, &cfg);
    Ok(if ready {
        Action::await_change()
    } else {
        Action::requeue(retry)
    })
}

/// Opens, validates and registers the store unless the registry already holds it for
/// the same generation and Secret version.
async fn open_store<K: StateStoreObject>(
    state: &StoreState,
    obj: &K,
    cfg: &ControllerConfig,
) -> Result<(), NotReady> {
    let ctx = &state.ctx;
    let kind = K::kind(&()).into_owned();
    let name = obj.name_any();

    let (secret_label, data, secret_version) = match obj.secret_ref() {
        Some(r) => {
            let sname = r.name.clone().unwrap_or_default();
            let sns = r
                .namespace
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| DEFAULT_SECRET_NAMESPACE.into());
            match Api::<Secret>::namespaced(ctx.client.clone(), &sns)
                .get_opt(&sname)
                .await
            {
                Ok(Some(s)) => (
                    format!("{sns}/{sname}"),
                    secret_data(&s),
                    s.resource_version().unwrap_or_default(),
                ),
                Ok(None) => {
                    return Err(NotReady {
                        reason: "SecretNotFound",
                        message: format!("Secret {sname} not found in namespace {sns}"),
                    });
                }
                Err(e) => {
                    return Err(NotReady {
                        reason: "StateStoreError",
                        message: format!("reading Secret {sname} in namespace {sns}: {e}"),
                    });
                }
            }
        }
        None if obj.needs_secret() && K::kind(&()) == "BucketStateStore" => {
            return Err(NotReady::init(
                "authMethod accessKey needs spec.secretRef with accessKeyID and secretAccessKey",
            ));
        }
        None => (String::new(), SecretData::new(), String::new()),
    };

    let fingerprint = format!("{}/{}", obj.meta().generation.unwrap_or(0), secret_version);
    if ctx.stores.fingerprint(&kind, &name).as_deref() == Some(fingerprint.as_str())
        && obj.store_status().is_some_and(|s| {
            get_condition(s.conditions.as_deref().unwrap_or(&[]), "Ready")
                .is_some_and(|c| c.status == "True")
        })
    {
        return Ok(());
    }

    // A store opened from an older spec or Secret is forgotten before the new one opens:
    // no writer may use it any more, and its writer must let go of the clone directory
    // the new one takes (else the new one waits for it).
    if ctx.stores.fingerprint(&kind, &name).is_some() {
        ctx.stores.remove(&kind, &name);
    }
    let config = obj.build_config(&secret_label, &data, cfg)?;
    let store = StateStore::open(config).await.map_err(|e| {
        let generic = NotReady::init(e.to_string());
        open_error(e, &secret_label, generic)
    })?;
    store.validate().await.map_err(|e| {
        let generic = NotReady {
            reason: "ErrorValidatingPermissions",
            message: format!("Error validating state store permissions: {e}"),
        };
        open_error(e, &secret_label, generic)
    })?;
    ctx.stores
        .insert_with_fingerprint(&kind, &name, store, fingerprint);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(spec: serde_json::Value) -> GitStateStore {
        GitStateStore::new("default", serde_json::from_value(spec).unwrap())
    }

    #[test]
    fn basic_auth_needs_password_and_names_the_key() {
        let cfg = ControllerConfig::default();
        let s = git(
            json!({"url": "https://git.example.test/org/state.git", "secretRef": {"name": "creds"}}),
        );
        let data = SecretData::from([("username".to_string(), "u".to_string())]);
        let err = s.build_config("default/creds", &data, &cfg).unwrap_err();
        assert_eq!(err.reason, "ErrorInitialisingWriter");
        assert!(
            err.message.contains("default/creds") && err.message.contains("password"),
            "{}",
            err.message
        );
    }

    #[test]
    fn ssh_needs_key_and_known_hosts() {
        let cfg = ControllerConfig::default();
        let s = git(
            json!({"url": "ssh://git@git.example.test/org/state.git", "authMethod": "ssh", "secretRef": {"name": "k"}}),
        );
        let err = s
            .build_config("default/k", &SecretData::new(), &cfg)
            .unwrap_err();
        assert!(err.message.contains("sshPrivateKey"), "{}", err.message);
        let data = SecretData::from([("sshPrivateKey".to_string(), "KEY".to_string())]);
        let err = s.build_config("default/k", &data, &cfg).unwrap_err();
        assert!(err.message.contains("knownHosts"), "{}", err.message);
    }

    #[test]
    fn github_app_names_missing_keys_and_reads_api_url() {
        let cfg = ControllerConfig::default();
        let s = git(json!({
            "url": "https://github.com/org/state.git",
            "authMethod": "githubApp",
            "secretRef": {"name": "app"}
        }));
        let data = SecretData::from([
            ("appID".to_string(), "123".to_string()),
            ("privateKey".to_string(), "PEM".to_string()),
        ]);
        let err = s.build_config("default/app", &data, &cfg).unwrap_err();
        assert_eq!(err.reason, "ErrorInitialisingWriter");
        assert!(
            err.message.contains("default/app")
                && err.message.contains("\"installationID\"")
                && !err.message.contains("\"appID\","),
            "{}",
            err.message
        );
        let mut data = data;
        data.insert("installationID".into(), " 456 ".into());
        data.insert("apiURL".into(), "https://ghe.example.test/api/v3".into());
        match s.build_config("default/app", &data, &cfg).unwrap() {
            StoreConfig::Git(g) => assert_eq!(
                g.auth,
                GitAuth::GithubApp {
                    app_id: "123".into(),
                    installation_id: "456".into(),
                    private_key_pem: "PEM".into(),
                    api_url: "https://ghe.example.test/api/v3".into(),
                }
            ),
            other => panic!("{other:?}"),
        }
        let err = s.build_config("", &SecretData::new(), &cfg).unwrap_err();
        assert!(err.message.contains("secretRef"), "{}", err.message);
    }

    #[test]
    fn file_store_needs_no_secret() {
        let cfg = ControllerConfig::default();
        let s = git(json!({"url": "file:///tmp/state.git"}));
        assert!(s.secret_ref().is_none());
        assert!(!s.needs_secret());
        assert!(s.build_config("", &SecretData::new(), &cfg).is_ok());
    }

    #[test]
    fn secret_data_merges_data_and_string_data() {
        let s: Secret = serde_json::from_value(json!({
            "metadata": {"name": "x"},
            "data": {"password": "cGFzcw=="},
            "stringData": {"username": "user"}
        }))
        .unwrap();
        let d = secret_data(&s);
        assert_eq!(d["password"], "pass");
        assert_eq!(d["username"], "user");
    }
}
