//! Kratix's `kratix` ConfigMap, watched so that changes apply without
//! a restart (Kratix reads it once at start-up).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;

use crate::context::{Context, ControllerConfig};
use crate::promise::SYSTEM_NAMESPACE;

/// Name of the ConfigMap holding Kratix's configuration.
pub const CONFIG_MAP: &str = "kratix";

/// Why a `kratix` ConfigMap was not applied; the previous configuration stays in force.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The ConfigMap has no `data.config` key.
    #[error("ConfigMap {SYSTEM_NAMESPACE}/{CONFIG_MAP}: data.config is missing")]
    MissingKey,
    /// `data.config` does not parse as YAML; the parser's message.
    #[error("ConfigMap {SYSTEM_NAMESPACE}/{CONFIG_MAP}: data.config is not valid YAML: {0}")]
    Yaml(String),
    /// A key holds a value of the wrong shape.
    #[error("ConfigMap {SYSTEM_NAMESPACE}/{CONFIG_MAP}: {field}: {message}")]
    Field {
        /// Dotted path of the key, e.g. `workflows.defaultContainerSecurityContext`.
        field: String,
        /// What is wrong with its value.
        message: String,
    },
}

/// Applies the keys of a `config` document over `base` (unknown keys are ignored, as
/// Kratix does).
pub fn apply_config(
    base: &ControllerConfig,
    data: Option<&str>,
) -> Result<ControllerConfig, ConfigError> {
    let text = data.ok_or(ConfigError::MissingKey)?;
    let doc: Value = serde_saphyr::from_str(text).map_err(|e| ConfigError::Yaml(e.to_string()))?;
    let mut c = base.clone();
    let dur = |field: &str, v: &Value| -> Result<Option<Duration>, ConfigError> {
        match v.as_str() {
            None if v.is_null() => Ok(None),
            None => Err(ConfigError::Field {
                field: field.into(),
                message: format!("expected a duration string such as \"10h\", got {v}"),
            }),
            Some(s) => plinth_api::duration::parse_go_duration(s)
                .map(Some)
                .map_err(|message| ConfigError::Field {
                    field: field.into(),
                    message,
                }),
        }
    };
    if let Some(n) = doc["numberOfJobsToKeep"].as_u64() {
        c.number_of_jobs_to_keep = if n < 1 { 5 } else { n as usize };
    }
    if let Some(d) = dur("reconciliationInterval", &doc["reconciliationInterval"])? {
        c.reconciliation_interval = d;
    }
    if let Some(d) = dur(
        "stateStoreReconciliationInterval",
        &doc["stateStoreReconciliationInterval"],
    )? {
        c.state_store_reconciliation_interval = d;
    }
    if let Some(s) = doc["resourceBindingVersionStrategy"].as_str() {
        c.resource_binding_version_strategy = if s == "pinned" {
            "pinned".into()
        } else {
            "floating".into()
        };
    }
    if let Some(b) = doc["featureFlags"]["dryRun"].as_bool() {
        c.feature_dry_run = b;
    }
    let wf = &doc["workflows"];
    if let Some(b) = wf["reconcileAfterFailure"].as_bool() {
        c.reconcile_after_failure = b;
    }
    if let Some(n) = wf["maxInFlightPerPromise"].as_u64() {
        c.max_in_flight_per_promise = n as usize;
    }
    if let Some(n) = wf["jobOptions"]["defaultBackoffLimit"].as_i64() {
        c.default_backoff_limit = Some(n as i32);
    }
    if let Some(p) = wf["defaultImagePullPolicy"].as_str() {
        c.default_image_pull_policy = Some(p.to_string()).filter(|p| !p.is_empty());
    }
    if wf["defaultContainerSecurityContext"].is_object() {
        c.default_security_context = Some(wf["defaultContainerSecurityContext"].clone());
    }
    if wf["defaultContainerResources"].is_object() {
        c.default_container_resources = Some(wf["defaultContainerResources"].clone());
    }
    Ok(c)
}

/// Watches the ConfigMap and applies every change; a bad document is reported and the
/// previous configuration kept.
pub async fn watch(ctx: Arc<Context>, defaults: ControllerConfig) {
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), SYSTEM_NAMESPACE);
    let cfg = watcher::Config::default().fields(&format!("metadata.name={CONFIG_MAP}"));
    let mut stream = watcher(api, cfg).touched_objects().boxed();
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(cm) => {
                let data = cm
                    .data
                    .as_ref()
                    .and_then(|d| d.get("config"))
                    .map(String::as_str);
                match apply_config(&defaults, data) {
                    Ok(c) => {
                        tracing::info!(?c.reconciliation_interval, c.number_of_jobs_to_keep, "applied the kratix ConfigMap");
                        ctx.set_config(c);
                    }
                    Err(e) => tracing::error!(error = %e, "ignoring the kratix ConfigMap"),
                }
            }
            Err(e) => tracing::debug!(error = %e, "kratix ConfigMap watch"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_in_flight_per_promise_is_read_from_workflows() {
        assert_eq!(ControllerConfig::default().max_in_flight_per_promise, 10);
        let c = apply_config(
            &ControllerConfig::default(),
            Some("workflows:\n  maxInFlightPerPromise: 3\n"),
        )
        .unwrap();
        assert_eq!(c.max_in_flight_per_promise, 3);
        let c = apply_config(&c, Some("workflows:\n  maxInFlightPerPromise: 0\n")).unwrap();
        assert_eq!(c.max_in_flight_per_promise, 0);
    }

    #[test]
    fn the_dry_run_feature_flag_is_off_unless_set() {
        assert!(!ControllerConfig::default().feature_dry_run);
        let c = apply_config(
            &ControllerConfig::default(),
            Some("featureFlags:\n  dryRun: true\n"),
        )
        .unwrap();
        assert!(c.feature_dry_run);
        let c = apply_config(&c, Some("featureFlags:\n  dryRun: false\n")).unwrap();
        assert!(!c.feature_dry_run);
    }

    #[test]
    fn corpus_config_applies() {
        let text = "numberOfJobsToKeep: 2\nreconciliationInterval: 10s\nworkflows:\n  reconcileAfterFailure: false\n  jobOptions:\n    defaultBackoffLimit: 4\n  defaultContainerSecurityContext:\n    windowsOptions:\n      runAsUserName: setInKratixConfig\n";
        let c = apply_config(&ControllerConfig::default(), Some(text)).unwrap();
        assert_eq!(c.number_of_jobs_to_keep, 2);
        assert_eq!(c.reconciliation_interval, Duration::from_secs(10));
        assert!(!c.reconcile_after_failure);
        assert_eq!(c.default_backoff_limit, Some(4));
        assert_eq!(
            c.default_security_context.unwrap()["windowsOptions"]["runAsUserName"],
            "setInKratixConfig"
        );
        assert!(matches!(
            apply_config(&ControllerConfig::default(), None),
            Err(ConfigError::MissingKey)
        ));
        assert!(matches!(
            apply_config(
                &ControllerConfig::default(),
                Some("reconciliationInterval: soon")
            ),
            Err(ConfigError::Field { .. })
        ));
    }
}
