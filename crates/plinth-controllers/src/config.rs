//! Kratix's `kratix` ConfigMap (reference §8.1), watched so that changes apply without
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
    #[error("ConfigMap {SYSTEM_NAMESPACE}/{CONFIG_MAP}: data.config is missing")]
    MissingKey,
    #[error("ConfigMap {SYSTEM_NAMESPACE}/{CONFIG_MAP}: data.config is not valid YAML: {0}")]
    Yaml(String),
    #[error("ConfigMap {SYSTEM_NAMESPACE}/{CONFIG_MAP}: {field}: {message}")]
    Field { field: String, message: String },
}

/// Applies the keys of a `config` document over `base` (unknown keys are ignored, as
/// Kratix does).
pub fn apply_config(base: &ControllerConfig, data: Option<&str>) -> Result<ControllerConfig, ConfigError> {
    let text = data.ok_or(ConfigError::MissingKey)?;
    let doc: Value = serde_saphyr::from_str(text).map_err(|e| ConfigError::Yaml(e.to_string()))?;
    let mut c = base.clone();
    let dur = |field: &str, v: &Value| -> Result<Option<Duration>, ConfigError> {
        match v.as_str() {
            None if v.is_null() => Ok(None),
            None => Err(ConfigError::Field { field: field.into(), message: format!("expected a duration string such as \"10h\", got {v}") }),
            Some(s) => parse_go_duration(s).map(Some).ok_or_else(|| ConfigError::Field { field: field.into(), message: format!("invalid duration {s:?}") }),
        }
    };
    if let Some(n) = doc["numberOfJobsToKeep"].as_u64() {
        c.number_of_jobs_to_keep = if n < 1 { 5 } else { n as usize };
    }
    if let Some(d) = dur("reconciliationInterval", &doc["reconciliationInterval"])? {
        c.reconciliation_interval = d;
    }
    if let Some(d) = dur("stateStoreReconciliationInterval", &doc["stateStoreReconciliationInterval"])? {
        c.state_store_reconciliation_interval = d;
    }
    if let Some(s) = doc["resourceBindingVersionStrategy"].as_str() {
        c.resource_binding_version_strategy = if s == "pinned" { "pinned".into() } else { "floating".into() };
    }
    let wf = &doc["workflows"];
    if let Some(b) = wf["reconcileAfterFailure"].as_bool() {
        c.reconcile_after_failure = b;
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

/// Parses a Go duration (`1h30m`, `10s`, `500ms`, `2h45m10s`).
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = s;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_end = rest.find(|ch: char| !(ch.is_ascii_digit() || ch == '.'))?;
        let n: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest.find(|ch: char| ch.is_ascii_digit() || ch == '.').unwrap_or(rest.len());
        let factor = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += n * factor;
        rest = &rest[unit_end..];
    }
    Some(Duration::from_secs_f64(total))
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
                let data = cm.data.as_ref().and_then(|d| d.get("config")).map(String::as_str);
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
    fn go_durations() {
        assert_eq!(parse_go_duration("10s"), Some(Duration::from_secs(10)));
        assert_eq!(parse_go_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_go_duration("10x"), None);
        assert_eq!(parse_go_duration(""), None);
    }

    #[test]
    fn corpus_config_applies() {
        let text = "numberOfJobsToKeep: 2\nreconciliationInterval: 10s\nworkflows:\n  reconcileAfterFailure: false\n  jobOptions:\n    defaultBackoffLimit: 4\n  defaultContainerSecurityContext:\n    windowsOptions:\n      runAsUserName: setInKratixConfig\n";
        let c = apply_config(&ControllerConfig::default(), Some(text)).unwrap();
        assert_eq!(c.number_of_jobs_to_keep, 2);
        assert_eq!(c.reconciliation_interval, Duration::from_secs(10));
        assert!(!c.reconcile_after_failure);
        assert_eq!(c.default_backoff_limit, Some(4));
        assert_eq!(c.default_security_context.unwrap()["windowsOptions"]["runAsUserName"], "setInKratixConfig");
        assert!(matches!(apply_config(&ControllerConfig::default(), None), Err(ConfigError::MissingKey)));
        assert!(matches!(apply_config(&ControllerConfig::default(), Some("reconciliationInterval: soon")), Err(ConfigError::Field { .. })));
    }
}
