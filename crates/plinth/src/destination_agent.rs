//! A Destination's agent inside a Plinth process: `plinth worker` runs one applying its
//! Destination's directory into the worker's embedded cluster, and `plinth up` runs one for
//! the Destination `platform` applying back into the platform (compound Promises).
//!
//! The store is read the way the platform writes it: URL, branch and path from the state
//! store's spec, the Destination's `spec.path` below it, credentials from the store's
//! Secret read through the platform API (the same key names the writer uses). The agent
//! polls at its interval and is also woken by the platform's WorkPlacements for the
//! Destination (and the Destination itself, whose canary files its controller writes), so a
//! written change lands at once.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher;
use plinth_api::constants::labels::TARGET_DESTINATION_NAME;
use plinth_api::{BucketStateStore, GitStateStore};
use plinth_controllers::ControllerConfig;
use plinth_controllers::statestore::{DEFAULT_SECRET_NAMESPACE, SecretData, StateStoreObject};
use plinth_statestore::StoreConfig;
use tokio::task::JoinHandle;

/// The state store a Destination is registered on: `GitStateStore`/`BucketStateStore` and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreRef {
    /// `GitStateStore` or `BucketStateStore`.
    pub kind: String,
    /// The store's name.
    pub name: String,
}

impl std::str::FromStr for StoreRef {
    type Err = String;

    /// `KIND/NAME`, e.g. `GitStateStore/local`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, name) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?}: expected KIND/NAME, e.g. GitStateStore/local"))?;
        if !matches!(kind, "GitStateStore" | "BucketStateStore") {
            return Err(format!(
                "{s:?}: kind must be GitStateStore or BucketStateStore"
            ));
        }
        if name.is_empty() {
            return Err(format!("{s:?}: the store name is empty"));
        }
        Ok(StoreRef {
            kind: kind.into(),
            name: name.into(),
        })
    }
}

/// Builds the agent's read-only view of a store from its spec and Secret on the platform.
/// A Git store is cloned under `work_dir`.
///
/// # Errors
/// The store or its Secret cannot be read, or the spec and Secret do not make a usable
/// configuration (the message names the store, the Secret and the key).
pub async fn store_config(
    platform: &kube::Client,
    store: &StoreRef,
    work_dir: &Path,
) -> anyhow::Result<StoreConfig> {
    let cfg = ControllerConfig {
        data_dir: work_dir.to_path_buf(),
        ..ControllerConfig::default()
    };
    let label = format!("{}/{}", store.kind, store.name);
    match store.kind.as_str() {
        "GitStateStore" => build::<GitStateStore>(platform, &store.name, &label, &cfg).await,
        "BucketStateStore" => build::<BucketStateStore>(platform, &store.name, &label, &cfg).await,
        other => bail!("state store kind {other} is not GitStateStore or BucketStateStore"),
    }
}

/// Reads the state store `name` of kind `S` and its Secret on the platform, and builds
/// the writer's configuration from them.
async fn build<S>(
    platform: &kube::Client,
    name: &str,
    label: &str,
    cfg: &ControllerConfig,
) -> anyhow::Result<StoreConfig>
where
    S: StateStoreObject
        + kube::Resource<Scope = kube::core::ClusterResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let obj: S = Api::all(platform.clone())
        .get_opt(name)
        .await
        .with_context(|| format!("reading {label} on the platform"))?
        .with_context(|| format!("{label} not found on the platform"))?;
    let (secret, data) = match obj.secret_ref() {
        Some(r) => {
            let ns = r
                .namespace
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| DEFAULT_SECRET_NAMESPACE.to_string());
            let name = r.name.clone().unwrap_or_default();
            let api: Api<Secret> = Api::namespaced(platform.clone(), &ns);
            let s = api
                .get(&name)
                .await
                .with_context(|| format!("{label}: reading Secret {ns}/{name}"))?;
            (format!("{ns}/{name}"), secret_data(&s))
        }
        None => (String::new(), SecretData::new()),
    };
    obj.build_config(&secret, &data, cfg)
        .map_err(|e| anyhow::anyhow!("{label}: {}", e.message))
}

fn secret_data(secret: &Secret) -> SecretData {
    let mut out = SecretData::new();
    for (k, v) in secret.data.iter().flatten() {
        out.insert(k.clone(), String::from_utf8_lossy(&v.0).into_owned());
    }
    for (k, v) in secret.string_data.iter().flatten() {
        out.insert(k.clone(), v.clone());
    }
    out
}

/// Starts an agent named after `destination` applying `path` of `source` into `target`,
/// woken by changes to the Destination's WorkPlacements on `platform`, counting its passes
/// in `metrics`.
///
/// # Errors
/// The agent's inventory in the target cannot be read.
pub async fn spawn(
    destination: &str,
    source: StoreConfig,
    path: &str,
    target: kube::Client,
    platform: kube::Client,
    interval: Duration,
    metrics: Arc<plinth_api::metrics::Metrics>,
) -> anyhow::Result<JoinHandle<()>> {
    let cfg = agent_config(destination, source, path, interval, metrics);
    start(cfg, target, platform).await
}

/// [`spawn`] for the Destination `platform` of `plinth up`, whose directory is applied
/// back into the platform itself (`target` is the platform): the requests whose outputs
/// it applies are compound requests, and its Events say so.
///
/// # Errors
/// The agent's inventory in the platform cannot be read.
pub async fn spawn_into_platform(
    destination: &str,
    source: StoreConfig,
    path: &str,
    platform: kube::Client,
    interval: Duration,
    metrics: Arc<plinth_api::metrics::Metrics>,
) -> anyhow::Result<JoinHandle<()>> {
    let mut cfg = agent_config(destination, source, path, interval, metrics);
    cfg.platform = true;
    start(cfg, platform.clone(), platform).await
}

/// The configuration of the agent of `destination`, passing every `interval`.
fn agent_config(
    destination: &str,
    source: StoreConfig,
    path: &str,
    interval: Duration,
    metrics: Arc<plinth_api::metrics::Metrics>,
) -> plinth_agent::AgentConfig {
    let mut cfg = plinth_agent::AgentConfig::new(destination, source, path);
    cfg.interval = interval;
    cfg.metrics = Some(metrics);
    cfg
}

/// Starts the agent of `cfg` applying into `target`, woken by its Destination's
/// WorkPlacements on `platform`.
async fn start(
    cfg: plinth_agent::AgentConfig,
    target: kube::Client,
    platform: kube::Client,
) -> anyhow::Result<JoinHandle<()>> {
    let destination = cfg.name.clone();
    let agent = plinth_agent::Agent::new(cfg, target)
        .await
        .with_context(|| format!("starting the agent of Destination {destination}"))?;
    let wake = Arc::new(tokio::sync::Notify::new());
    let watches = wake_on_changes(platform, destination, wake.clone());
    Ok(tokio::spawn(async move {
        tokio::select! {
            _ = agent.run_woken(wake, std::future::pending()) => {}
            _ = watches => {}
        }
    }))
}

/// Notifies `wake` on every event of the Destination's WorkPlacements and of the
/// Destination itself. Watch errors are retried by the watcher's backoff.
async fn wake_on_changes(
    platform: kube::Client,
    destination: String,
    wake: Arc<tokio::sync::Notify>,
) {
    let kratix = |kind: &str, plural: &str| {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(plinth_api::GROUP, plinth_api::VERSION, kind),
            plural,
        )
    };
    let wps: Api<DynamicObject> =
        Api::all_with(platform.clone(), &kratix("WorkPlacement", "workplacements"));
    let dests: Api<DynamicObject> = Api::all_with(platform, &kratix("Destination", "destinations"));
    let wp_cfg =
        watcher::Config::default().labels(&format!("{TARGET_DESTINATION_NAME}={destination}"));
    let events = futures::stream::select(
        watcher::watcher(wps, wp_cfg).map(|e| e.is_ok()).boxed(),
        // Destinations are few; any of their events is a cheap reason to look.
        watcher::watcher(dests, watcher::Config::default())
            .map(|e| e.is_ok())
            .boxed(),
    );
    let mut events = std::pin::pin!(events);
    while let Some(ok) = events.next().await {
        if ok {
            wake.notify_one();
        } else {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_refs_parse_or_name_the_problem() {
        let r: StoreRef = "GitStateStore/local".parse().unwrap();
        assert_eq!(r.kind, "GitStateStore");
        assert_eq!(r.name, "local");
        assert!(
            "local"
                .parse::<StoreRef>()
                .unwrap_err()
                .contains("KIND/NAME")
        );
        assert!(
            "Bucket/x"
                .parse::<StoreRef>()
                .unwrap_err()
                .contains("kind must be")
        );
        assert!(
            "GitStateStore/"
                .parse::<StoreRef>()
                .unwrap_err()
                .contains("empty")
        );
    }
}
