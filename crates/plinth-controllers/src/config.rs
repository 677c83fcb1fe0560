//! Kratix's `kratix` ConfigMap, watched so that changes apply without
//! a restart (Kratix reads it once at start-up).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use plinth_api::constants::events as ev;
use serde_json::Value;

use crate::context::{Context, ControllerConfig};
use crate::support;
use plinth_api::constants::SYSTEM_NAMESPACE;
use plinth_api::events::EventType;

/// Name of the ConfigMap holding Kratix's configuration.
pub const CONFIG_MAP: &str = "kratix";

/// Why a `kratix` ConfigMap was not applied; the previous configuration stays in force.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The ConfigMap has no `data.config` key.
    #[error(
        "ConfigMap {SYSTEM_NAMESPACE}/{CONFIG_MAP}: data.config is missing (Kratix's keys go in one YAML document under data.config)"
    )]
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

/// A `config` document applied over a base configuration.
#[derive(Debug)]
pub struct Applied {
    /// The configuration in force afterwards.
    pub config: ControllerConfig,
    /// One line per key whose value was not usable: the key, the value given and the
    /// value kept (`workflows.maxInFlightPerPromise: "lots" is not a non-negative
    /// integer; keeping 10`).
    pub warnings: Vec<String>,
}

/// Reads keys of the document; a value of the wrong shape is a warning and the base
/// value stays.
struct Keys<'a> {
    doc: &'a Value,
    warnings: Vec<String>,
}

impl Keys<'_> {
    /// The value at dotted `path` parsed by `parse`; `None` when absent, `null`, or
    /// unusable (then a warning naming `expected` and the value `kept`).
    fn get<T>(
        &mut self,
        path: &str,
        expected: &str,
        kept: impl Kept,
        parse: impl Fn(&Value) -> Option<T>,
    ) -> Option<T> {
        let v = path.split('.').fold(self.doc, |v, k| &v[k]);
        if v.is_null() {
            return None;
        }
        let parsed = parse(v);
        if parsed.is_none() {
            self.warnings.push(format!(
                "{path}: {v} is not {expected}; keeping {}",
                kept.shown()
            ));
        }
        parsed
    }
}

/// A value kept in force, as a warning shows it (an unset one as "the default").
trait Kept {
    fn shown(&self) -> String;
}

macro_rules! kept_as_displayed {
    ($($t:ty),*) => {$(
        impl Kept for $t {
            fn shown(&self) -> String {
                self.to_string()
            }
        }
    )*};
}

kept_as_displayed!(usize, u32, bool);

impl Kept for &String {
    fn shown(&self) -> String {
        format!("{self:?}")
    }
}

impl<T: std::fmt::Display> Kept for &Option<T> {
    fn shown(&self) -> String {
        self.as_ref()
            .map_or_else(|| "the default".to_string(), |v| v.to_string())
    }
}

/// Applies the keys of a `config` document over `base`. A key Kratix does not know (a
/// typo), a mapping key of another shape and a known key with an unusable value are
/// named in [`Applied::warnings`] (the base value stays); keys Kratix knows and Plinth
/// has no use for are passed over. Errors: no document, YAML that does not parse, or an interval
/// that is not a duration (nothing is applied then).
pub fn apply_config(base: &ControllerConfig, data: Option<&str>) -> Result<Applied, ConfigError> {
    let text = data.ok_or(ConfigError::MissingKey)?;
    let doc: Value = serde_saphyr::from_str(text).map_err(|e| ConfigError::Yaml(e.to_string()))?;
    if !doc.is_object() && !doc.is_null() {
        return Err(ConfigError::Field {
            field: "config".into(),
            message: format!("expected a mapping of Kratix config keys, got {doc}"),
        });
    }
    let mut c = base.clone();
    apply_intervals(&doc, &mut c)?;
    let mut warnings = Vec::new();
    unknown_keys(&doc, KRATIX_KEYS, "", &mut warnings);
    warnings.extend(apply_values(&doc, &mut c));
    Ok(Applied {
        config: c,
        warnings,
    })
}

/// Step: the two intervals; one that is not a duration refuses the whole document.
fn apply_intervals(doc: &Value, c: &mut ControllerConfig) -> Result<(), ConfigError> {
    let dur = |field: &str, v: &Value| -> Result<Option<Duration>, ConfigError> {
        match v.as_str() {
            None if v.is_null() => Ok(None),
            None => Err(ConfigError::Field {
                field: field.into(),
                message: format!("expected a duration string such as \"10h\", got {v}"),
            }),
            Some(s) => plinth_api::duration::parse_go_duration(s)
                .map(Some)
                .map_err(|e| ConfigError::Field {
                    field: field.into(),
                    message: e.to_string(),
                }),
        }
    };
    if let Some(d) = dur("reconciliationInterval", &doc["reconciliationInterval"])? {
        c.reconciliation_interval = d;
    }
    if let Some(d) = dur(
        "stateStoreReconciliationInterval",
        &doc["stateStoreReconciliationInterval"],
    )? {
        c.state_store_reconciliation_interval = d;
    }
    Ok(())
}

/// Step: every other key Plinth reads; an unusable value keeps the one in force and is
/// returned as a warning.
fn apply_values(doc: &Value, c: &mut ControllerConfig) -> Vec<String> {
    let mut k = Keys {
        doc,
        warnings: Vec::new(),
    };
    if let Some(n) = k.get(
        "numberOfJobsToKeep",
        "a non-negative integer",
        c.number_of_jobs_to_keep,
        Value::as_u64,
    ) {
        c.number_of_jobs_to_keep = if n < 1 { 5 } else { n as usize };
    }
    let strategy = |v: &Value| {
        v.as_str()
            .filter(|s| matches!(*s, "pinned" | "floating"))
            .map(str::to_string)
    };
    if let Some(s) = k.get(
        "resourceBindingVersionStrategy",
        "\"pinned\" or \"floating\"",
        &c.resource_binding_version_strategy,
        strategy,
    ) {
        c.resource_binding_version_strategy = s;
    }
    if let Some(b) = k.get(
        "featureFlags.dryRun",
        "a boolean",
        c.feature_dry_run,
        Value::as_bool,
    ) {
        c.feature_dry_run = b;
    }
    let runs = |v: &Value| v.as_u64().and_then(|n| u32::try_from(n).ok());
    if let Some(n) = k.get(
        "health.staleAfterMissedRuns",
        "a non-negative integer",
        c.health_stale_after_missed_runs,
        runs,
    ) {
        c.health_stale_after_missed_runs = n;
    }
    apply_workflow_values(&mut k, c);
    k.warnings
}

/// The `workflows.*` keys of [`apply_values`]: how pipeline Jobs and their containers
/// are built and re-run.
fn apply_workflow_values(k: &mut Keys<'_>, c: &mut ControllerConfig) {
    if let Some(b) = k.get(
        "workflows.reconcileAfterFailure",
        "a boolean",
        c.reconcile_after_failure,
        Value::as_bool,
    ) {
        c.reconcile_after_failure = b;
    }
    if let Some(n) = k.get(
        "workflows.maxInFlightPerPromise",
        "a non-negative integer",
        c.max_in_flight_per_promise,
        Value::as_u64,
    ) {
        c.max_in_flight_per_promise = n as usize;
    }
    let backoff = |v: &Value| {
        v.as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .filter(|n| *n >= 0)
    };
    if let Some(n) = k.get(
        "workflows.jobOptions.defaultBackoffLimit",
        "a non-negative integer",
        &c.default_backoff_limit,
        backoff,
    ) {
        c.default_backoff_limit = Some(n);
    }
    let policy = |v: &Value| {
        v.as_str()
            .filter(|s| matches!(*s, "" | "Always" | "IfNotPresent" | "Never"))
            .map(str::to_string)
    };
    if let Some(p) = k.get(
        "workflows.defaultImagePullPolicy",
        "Always, IfNotPresent or Never",
        &c.default_image_pull_policy,
        policy,
    ) {
        c.default_image_pull_policy = Some(p).filter(|p| !p.is_empty());
    }
    let object = |v: &Value| v.is_object().then(|| v.clone());
    if let Some(v) = k.get(
        "workflows.defaultContainerSecurityContext",
        "a mapping",
        &c.default_security_context,
        object,
    ) {
        c.default_security_context = Some(v);
    }
    if let Some(v) = k.get(
        "workflows.defaultContainerResources",
        "a mapping",
        &c.default_container_resources,
        object,
    ) {
        c.default_container_resources = Some(v);
    }
}

/// The keys of Kratix's config document, those Plinth reads and those it has no use for
/// (leader election, logging, telemetry, Git fetch coalescing), as a tree; `ANY` below a
/// [`Keyed::Any`] takes any value (a Kubernetes type, or a block passed on as it is).
enum Keyed {
    /// A value, not a mapping of further keys.
    Leaf,
    /// Any value at all.
    Any,
    /// A mapping of these keys.
    Map(&'static [(&'static str, Keyed)]),
}

const KRATIX_KEYS: &[(&str, Keyed)] = &[
    ("numberOfJobsToKeep", Keyed::Leaf),
    ("selectiveCache", Keyed::Leaf),
    ("reconciliationInterval", Keyed::Leaf),
    ("stateStoreReconciliationInterval", Keyed::Leaf),
    (
        "controllerLeaderElection",
        Keyed::Map(&[
            ("leaseDuration", Keyed::Leaf),
            ("renewDeadline", Keyed::Leaf),
            ("retryPeriod", Keyed::Leaf),
        ]),
    ),
    ("resourceBindingVersionStrategy", Keyed::Leaf),
    (
        "featureFlags",
        Keyed::Map(&[("dryRun", Keyed::Leaf), ("promiseUpgrade", Keyed::Leaf)]),
    ),
    (
        "workflows",
        Keyed::Map(&[
            ("reconcileAfterFailure", Keyed::Leaf),
            ("maxInFlightPerPromise", Keyed::Leaf),
            (
                "jobOptions",
                Keyed::Map(&[
                    ("defaultBackoffLimit", Keyed::Leaf),
                    ("podTTLSecondsAfterFinished", Keyed::Leaf),
                ]),
            ),
            ("defaultImagePullPolicy", Keyed::Leaf),
            ("defaultContainerResources", Keyed::Any),
            ("defaultContainerSecurityContext", Keyed::Any),
        ]),
    ),
    (
        "logging",
        Keyed::Map(&[("structured", Keyed::Leaf), ("level", Keyed::Leaf)]),
    ),
    ("git", Keyed::Map(&[("minimumFetchInterval", Keyed::Leaf)])),
    ("telemetry", Keyed::Any),
    (
        "health",
        Keyed::Map(&[("staleAfterMissedRuns", Keyed::Leaf)]),
    ),
];

/// A warning for every key of `doc` that is not in `known` (a typo is otherwise
/// silently ignored) and for a mapping key whose value is not a mapping.
fn unknown_keys(doc: &Value, known: &[(&str, Keyed)], prefix: &str, out: &mut Vec<String>) {
    let Some(map) = doc.as_object() else {
        return;
    };
    for (key, value) in map {
        let path = format!("{prefix}{key}");
        match known.iter().find(|(k, _)| k == key).map(|(_, t)| t) {
            None => out.push(format!("{path}: not a key of the Kratix config; ignored")),
            Some(Keyed::Map(children)) if value.is_object() => {
                unknown_keys(value, children, &format!("{path}."), out)
            }
            Some(Keyed::Map(_)) if !value.is_null() => {
                out.push(format!("{path}: {value} is not a mapping; ignored"))
            }
            Some(_) => {}
        }
    }
}

/// Watches the ConfigMap and applies every change. A bad document is a Warning Event
/// on the ConfigMap and the previous configuration stays; so is each key whose value
/// was not usable (the Event names the key and the value kept). A ConfigMap seen again
/// unchanged (a relist) is neither applied nor reported again.
pub async fn watch(ctx: Arc<Context>, defaults: ControllerConfig) {
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), SYSTEM_NAMESPACE);
    let cfg = watcher::Config::default().fields(&format!("metadata.name={CONFIG_MAP}"));
    let mut stream = watcher(api, cfg).touched_objects().boxed();
    let mut last_seen: Option<String> = None;
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(cm) if cm.resource_version().is_some() && cm.resource_version() == last_seen => {}
            Ok(cm) => {
                last_seen = cm.resource_version();
                apply_and_report(&ctx, &defaults, &cm).await;
            }
            Err(e) => tracing::debug!(error = %e, "kratix ConfigMap watch"),
        }
    }
}

async fn apply_and_report(ctx: &Context, defaults: &ControllerConfig, cm: &ConfigMap) {
    let data = cm
        .data
        .as_ref()
        .and_then(|d| d.get("config"))
        .map(String::as_str);
    let recorder = ctx.recorder(ev::CONFIG_WATCHER);
    let regarding = support::typed_reference(cm);
    match apply_config(defaults, data) {
        Ok(applied) => {
            let c = applied.config;
            tracing::info!(?c.reconciliation_interval, c.number_of_jobs_to_keep, "applied the kratix ConfigMap");
            ctx.set_config(c);
            for w in applied.warnings {
                tracing::warn!(warning = %w, "kratix ConfigMap");
                let note = format!("ConfigMap {SYSTEM_NAMESPACE}/{CONFIG_MAP}: data.config: {w}");
                support::publish(
                    &recorder,
                    &regarding,
                    EventType::Warning,
                    ev::INVALID_CONFIG_VALUE,
                    note,
                )
                .await;
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "ignoring the kratix ConfigMap");
            let note = format!("{e}; the previous configuration stays in force");
            support::publish(
                &recorder,
                &regarding,
                EventType::Warning,
                ev::INVALID_CONFIG,
                note,
            )
            .await;
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
        .unwrap()
        .config;
        assert_eq!(c.max_in_flight_per_promise, 3);
        let c = apply_config(&c, Some("workflows:\n  maxInFlightPerPromise: 0\n"))
            .unwrap()
            .config;
        assert_eq!(c.max_in_flight_per_promise, 0);
    }

    #[test]
    fn health_staleness_is_read_from_health() {
        assert_eq!(
            ControllerConfig::default().health_stale_after_missed_runs,
            3
        );
        let applied = apply_config(
            &ControllerConfig::default(),
            Some("health:\n  staleAfterMissedRuns: 5\n"),
        )
        .unwrap();
        assert_eq!(applied.config.health_stale_after_missed_runs, 5);
        assert!(applied.warnings.is_empty(), "{:?}", applied.warnings);
        let applied = apply_config(
            &applied.config,
            Some("health:\n  staleAfterMissedRuns: -1\n"),
        )
        .unwrap();
        assert_eq!(applied.config.health_stale_after_missed_runs, 5, "kept");
        assert_eq!(applied.warnings.len(), 1, "{:?}", applied.warnings);
    }

    #[test]
    fn unknown_keys_and_wrong_shapes_are_named() {
        let base = ControllerConfig::default();
        let applied = apply_config(
            &base,
            Some("workflowz: {x: 1}\nworkflows: {bogus: 1, jobOptions: 3}\nlogging: {level: info}\ntelemetry: {endpoint: x}\n"),
        )
        .unwrap();
        assert_eq!(
            applied.warnings,
            [
                "workflowz: not a key of the Kratix config; ignored",
                "workflows.bogus: not a key of the Kratix config; ignored",
                "workflows.jobOptions: 3 is not a mapping; ignored",
            ]
        );
        let list = apply_config(&base, Some("workflows: [1, 2]\n")).unwrap();
        assert_eq!(
            list.warnings,
            ["workflows: [1,2] is not a mapping; ignored"]
        );
        for doc in ["just a string", "- a\n"] {
            let e = apply_config(&base, Some(doc)).unwrap_err().to_string();
            assert!(
                e.contains("expected a mapping of Kratix config keys"),
                "{doc}: {e}"
            );
        }
    }

    #[test]
    fn an_unusable_value_is_named_with_the_value_kept() {
        let text = "workflows:\n  maxInFlightPerPromise: lots\n  reconcileAfterFailure: yes please\n  jobOptions: {defaultBackoffLimit: -1}\nresourceBindingVersionStrategy: sticky\nnumberOfJobsToKeep: 3\n";
        let applied = apply_config(&ControllerConfig::default(), Some(text)).unwrap();
        assert_eq!(applied.config.max_in_flight_per_promise, 10);
        assert!(applied.config.reconcile_after_failure);
        assert_eq!(
            applied.config.number_of_jobs_to_keep, 3,
            "usable keys still apply"
        );
        assert_eq!(
            applied.warnings,
            [
                r#"resourceBindingVersionStrategy: "sticky" is not "pinned" or "floating"; keeping "floating""#,
                r#"workflows.reconcileAfterFailure: "yes please" is not a boolean; keeping true"#,
                r#"workflows.maxInFlightPerPromise: "lots" is not a non-negative integer; keeping 10"#,
                "workflows.jobOptions.defaultBackoffLimit: -1 is not a non-negative integer; keeping the default",
            ]
        );
    }

    #[test]
    fn the_dry_run_feature_flag_is_off_unless_set() {
        assert!(!ControllerConfig::default().feature_dry_run);
        let c = apply_config(
            &ControllerConfig::default(),
            Some("featureFlags:\n  dryRun: true\n"),
        )
        .unwrap()
        .config;
        assert!(c.feature_dry_run);
        let c = apply_config(&c, Some("featureFlags:\n  dryRun: false\n"))
            .unwrap()
            .config;
        assert!(!c.feature_dry_run);
    }

    #[test]
    fn corpus_config_applies() {
        let text = "numberOfJobsToKeep: 2\nreconciliationInterval: 10s\nworkflows:\n  reconcileAfterFailure: false\n  jobOptions:\n    defaultBackoffLimit: 4\n  defaultContainerSecurityContext:\n    windowsOptions:\n      runAsUserName: setInKratixConfig\n";
        let applied = apply_config(&ControllerConfig::default(), Some(text)).unwrap();
        assert!(applied.warnings.is_empty(), "{:?}", applied.warnings);
        let c = applied.config;
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
