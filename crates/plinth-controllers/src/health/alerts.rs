//! Alertmanager's webhook payload (version 4) as HealthRecords.
//!
//! `plinth up --alertmanager-addr` receives what Alertmanager's `webhook_configs` send and
//! hands the parsed payload to [`receive`]. Each alert whose labels name a resource
//! request — `kratix_promise` (the Promise), `kratix_resource` (the request's name) and
//! `namespace` (its namespace) — becomes one HealthRecord per alert name and request,
//! named `alert-<alertname>-<hash>` in the request's namespace:
//!
//! - `firing` → `unhealthy`, or by the alert's `severity` label: `warning` and `info` →
//!   `degraded`; `critical`, `error`, any other value or none → `unhealthy`;
//! - `resolved` → `healthy`;
//! - `lastRun`: `startsAt` of a firing alert, `endsAt` of a resolved one (Unix seconds;
//!   the time received when absent or unparsable);
//! - `details`: the alert's name, status, severity, fingerprint, `summary` and
//!   `description` annotations, `startsAt`, `endsAt`, `generatorURL` and labels.
//!
//! Records are written with server-side apply under their own field manager
//! ([`FIELD_MANAGER`]) and carry [`ALERT_LABEL`], so they never take fields of a
//! HealthSource's records (a record of the same name that another manager holds is a
//! `conflict` result, not overwritten). A record whose `lastRun` is newer than the alert's
//! is left alone (`stale`: an out-of-order delivery). When one payload holds several alerts
//! for the same record (one alert name on several instances of one request), the worst
//! state wins. Alerts that do not name a request, or name one that does not exist, change
//! nothing: they are counted (`plinth_alertmanager_alerts_total{result}`) and logged, and
//! every alert's outcome is listed in the [`Summary`].

use std::collections::{BTreeMap, HashMap};

use jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Client, ResourceExt};
use plinth_api::constants::health as names;
use plinth_api::metrics::{Metrics, labels};
use plinth_api::{HealthRecord, HealthState};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::aggregate::state_name;
use super::target::Target;

/// Field manager of the receiver's server-side applies.
pub const FIELD_MANAGER: &str = "plinth-alertmanager";
/// Label on every HealthRecord the receiver applies (value [`ALERT_LABEL_VALUE`]).
pub const ALERT_LABEL: &str = "plinth.dev/health-alert";
/// Value of [`ALERT_LABEL`].
pub const ALERT_LABEL_VALUE: &str = "alertmanager";
/// Alert label naming the Promise.
pub const PROMISE_LABEL: &str = "kratix_promise";
/// Alert label naming the request.
pub const RESOURCE_LABEL: &str = "kratix_resource";
/// Alert label naming the request's namespace.
pub const NAMESPACE_LABEL: &str = "namespace";

/// Alertmanager's webhook payload (`version` "4"); fields Plinth does not use are ignored.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Payload {
    /// Payload version (`4`).
    #[serde(default)]
    pub version: String,
    /// The group's status (`firing` or `resolved`).
    #[serde(default)]
    pub status: String,
    /// The receiver's name in Alertmanager's configuration.
    #[serde(default)]
    pub receiver: String,
    /// The alerts of the group.
    #[serde(default)]
    pub alerts: Vec<Alert>,
}

/// One alert of a [`Payload`].
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Alert {
    /// `firing` or `resolved`.
    #[serde(default)]
    pub status: String,
    /// The alert's labels (`alertname` among them).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The alert's annotations (`summary`, `description`, ...).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// When it started firing (RFC 3339).
    #[serde(default)]
    pub starts_at: String,
    /// When it resolved (RFC 3339; `0001-01-01T00:00:00Z` or a future time while firing).
    #[serde(default)]
    pub ends_at: String,
    /// Alertmanager's identity of the alert (a hash of its labels).
    #[serde(default)]
    pub fingerprint: String,
    /// Link to the alert's source.
    #[serde(default, rename = "generatorURL")]
    pub generator_url: String,
}

/// The outcome of one alert.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AlertResult {
    /// The alert's fingerprint.
    pub fingerprint: String,
    /// The alert's `alertname` label.
    pub alertname: String,
    /// `applied`, `unchanged`, `stale`, `noRequestLabels`, `requestNotFound`, `conflict`
    /// or `error`.
    pub result: &'static str,
    /// The HealthRecord (`namespace/name`) the alert maps to, when it names a request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
    /// Why the alert changed nothing, or the error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What one payload did: counts and per-alert results, in payload order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Alerts in the payload.
    pub received: usize,
    /// Alerts whose record was created or changed.
    pub applied: usize,
    /// Alerts whose record already said the same (or a later) thing.
    pub unchanged: usize,
    /// Alerts that name no request, or a request that does not exist.
    pub ignored: usize,
    /// Alerts whose record could not be written.
    pub failed: usize,
    /// Each alert's outcome.
    pub results: Vec<AlertResult>,
}

/// The HealthRecord state an alert stands for (see the module documentation).
pub fn state_of(alert: &Alert) -> HealthState {
    if alert.status == "resolved" {
        return HealthState::Healthy;
    }
    match alert.labels.get("severity").map(|s| s.to_ascii_lowercase()) {
        Some(s) if s == "warning" || s == "info" => HealthState::Degraded,
        _ => HealthState::Unhealthy,
    }
}

fn unix(s: &str) -> Option<i64> {
    let t: Timestamp = s.parse().ok()?;
    // Alertmanager's zero time (`0001-01-01T00:00:00Z`) means "not set".
    (t.as_second() > 0).then_some(t.as_second())
}

/// Why an alert names no resource request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AlertError {
    /// Labels naming the request are missing or empty.
    #[error("no {labels} label")]
    MissingLabels {
        /// The missing labels, comma-separated.
        labels: String,
    },
}

/// The request an alert names: `(promise, namespace, name)`.
///
/// # Errors
/// [`AlertError::MissingLabels`] naming the labels it misses.
pub fn target_of(alert: &Alert) -> Result<Target, AlertError> {
    let get = |k: &str| alert.labels.get(k).filter(|v| !v.is_empty());
    let missing: Vec<&str> = [PROMISE_LABEL, RESOURCE_LABEL, NAMESPACE_LABEL]
        .into_iter()
        .filter(|k| get(k).is_none())
        .collect();
    if !missing.is_empty() {
        return Err(AlertError::MissingLabels {
            labels: missing.join(", "),
        });
    }
    Ok(Target {
        promise: get(PROMISE_LABEL).cloned().unwrap_or_default(),
        namespace: get(NAMESPACE_LABEL).cloned().unwrap_or_default(),
        name: get(RESOURCE_LABEL).cloned().unwrap_or_default(),
    })
}

fn alertname(alert: &Alert) -> String {
    alert.labels.get("alertname").cloned().unwrap_or_default()
}

/// Name of the record of alert `alertname` on `target`: `alert-<alertname>-<hash>`,
/// DNS-safe and at most 63 characters, the hash over the Promise, the request's namespace
/// and name and the alert name.
pub fn record_name(target: &Target, alertname: &str) -> String {
    plinth_api::names::object_name(
        &format!("alert-{alertname}"),
        &[
            "alertmanager",
            &target.promise,
            &target.namespace,
            &target.name,
            alertname,
        ],
        plinth_api::names::MAX_NAME_LEN,
    )
}

/// The HealthRecord (as the object applied) for `alert` on `target`; `now` (Unix seconds)
/// is its `lastRun` when the alert carries no usable time (none, or one more than
/// [`super::validate::MAX_AHEAD`] ahead of `now`).
pub fn record_for(alert: &Alert, target: &Target, now: i64) -> Value {
    let state = state_of(alert);
    // A time further ahead than a record may be (a wrong clock) is taken as now: the alert
    // is happening now, and its resolution must be able to follow it.
    let ahead = super::validate::MAX_AHEAD.as_secs() as i64;
    let last_run = if state == HealthState::Healthy {
        unix(&alert.ends_at)
    } else {
        unix(&alert.starts_at)
    }
    .filter(|t| t.saturating_sub(now) <= ahead)
    .unwrap_or(now);
    let name = alertname(alert);
    let ann = |k: &str| alert.annotations.get(k).cloned();
    let mut details = json!({
        "source": "alertmanager",
        "alertname": name,
        "status": alert.status,
        "fingerprint": alert.fingerprint,
        "startsAt": alert.starts_at,
        "endsAt": alert.ends_at,
        "labels": alert.labels,
    });
    let d = details.as_object_mut().expect("object");
    for (k, v) in [
        ("severity", alert.labels.get("severity").cloned()),
        ("summary", ann("summary")),
        ("description", ann("description")),
        (
            "generatorURL",
            Some(alert.generator_url.clone()).filter(|u| !u.is_empty()),
        ),
    ] {
        if let Some(v) = v {
            d.insert(k.into(), Value::String(v));
        }
    }
    json!({
        "apiVersion": names::RECORD_API_VERSION,
        "kind": names::RECORD_KIND,
        "metadata": {
            "name": record_name(target, &name),
            "namespace": target.namespace,
            "labels": {
                ALERT_LABEL: ALERT_LABEL_VALUE,
                names::REQUEST_LABEL: target.label_value(),
            },
        },
        "data": {
            "promiseRef": {"name": target.promise},
            "resourceRef": {"name": target.name, "namespace": target.namespace},
            "state": state_name(state),
            "lastRun": last_run,
            "details": details,
        },
    })
}

/// One record to write, with the alerts (indices into the payload) it stands for.
struct Planned {
    target: Target,
    doc: Value,
    state: HealthState,
    alerts: Vec<usize>,
}

/// Groups the payload's alerts into records (worst state, then latest `lastRun`, wins);
/// alerts that name no request get their result at once.
fn plan(payload: &Payload, now: i64, results: &mut [Option<AlertResult>]) -> Vec<Planned> {
    let mut planned: Vec<Planned> = Vec::new();
    let mut by_name: HashMap<(String, String), usize> = HashMap::new();
    for (i, alert) in payload.alerts.iter().enumerate() {
        let target = match target_of(alert) {
            Ok(t) => t,
            Err(why) => {
                results[i] = Some(result(
                    alert,
                    "noRequestLabels",
                    None,
                    Some(why.to_string()),
                ));
                continue;
            }
        };
        let doc = record_for(alert, &target, now);
        let state = state_of(alert);
        let key = (
            target.namespace.clone(),
            doc["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
        match by_name.get(&key) {
            Some(&j) => {
                let p = &mut planned[j];
                p.alerts.push(i);
                let later = doc["data"]["lastRun"].as_i64() > p.doc["data"]["lastRun"].as_i64();
                if state.rank() < p.state.rank() || (state.rank() == p.state.rank() && later) {
                    p.doc = doc;
                    p.state = state;
                }
            }
            None => {
                by_name.insert(key, planned.len());
                planned.push(Planned {
                    target,
                    doc,
                    state,
                    alerts: vec![i],
                });
            }
        }
    }
    planned
}

fn result(
    alert: &Alert,
    what: &'static str,
    record: Option<String>,
    message: Option<String>,
) -> AlertResult {
    AlertResult {
        fingerprint: alert.fingerprint.clone(),
        alertname: alertname(alert),
        result: what,
        record,
        message,
    }
}

/// Applies the records `payload` stands for through `client`, at `now`, counting each
/// alert's outcome in `metrics`. Never fails as a whole: each alert's outcome is in the
/// returned summary (API errors as `error` results), so the webhook can answer 200 and
/// Alertmanager does not resend the group for alerts that will never apply.
pub async fn receive(
    client: &Client,
    metrics: &Metrics,
    payload: &Payload,
    now: Timestamp,
) -> Summary {
    let mut results: Vec<Option<AlertResult>> = vec![None; payload.alerts.len()];
    let planned = plan(payload, now.as_second(), &mut results);
    let mut apis: HashMap<String, Option<ApiResource>> = HashMap::new();
    for p in planned {
        let record = format!(
            "{}/{}",
            p.target.namespace,
            p.doc["metadata"]["name"].as_str().unwrap_or_default()
        );
        let (what, message) = match write(client, &mut apis, &p).await {
            Ok(what) => (what, None),
            Err((what, why)) => (what, Some(why)),
        };
        for i in p.alerts {
            let alert = &payload.alerts[i];
            results[i] = Some(result(alert, what, Some(record.clone()), message.clone()));
        }
    }
    let mut summary = Summary {
        received: payload.alerts.len(),
        ..Default::default()
    };
    for r in results.into_iter().flatten() {
        match r.result {
            "applied" => summary.applied += 1,
            "unchanged" | "stale" => summary.unchanged += 1,
            "noRequestLabels" | "requestNotFound" => summary.ignored += 1,
            _ => summary.failed += 1,
        }
        metrics
            .alertmanager_alerts
            .get_or_create(&labels([("result", r.result)]))
            .inc();
        log(&r);
        summary.results.push(r);
    }
    summary
}

fn log(r: &AlertResult) {
    let (fp, name) = (&r.fingerprint, &r.alertname);
    let msg = r.message.as_deref().unwrap_or("");
    let rec = r.record.as_deref().unwrap_or("");
    match r.result {
        "applied" | "unchanged" => {
            tracing::debug!(fingerprint = %fp, alertname = %name, record = rec, result = r.result, "alert received")
        }
        "error" | "conflict" => {
            tracing::warn!(fingerprint = %fp, alertname = %name, record = rec, result = r.result, message = msg, "alert not applied")
        }
        _ => {
            tracing::info!(fingerprint = %fp, alertname = %name, record = rec, result = r.result, message = msg, "alert ignored")
        }
    }
}

type WriteError = (&'static str, String);

/// Writes one planned record; the result word, or the word and the reason.
async fn write(
    client: &Client,
    apis: &mut HashMap<String, Option<ApiResource>>,
    p: &Planned,
) -> Result<&'static str, WriteError> {
    let t = &p.target;
    let failed = |e: kube::Error| ("error", e.to_string());
    if !request_exists(client, apis, t).await.map_err(failed)? {
        return Err((
            "requestNotFound",
            format!(
                "no request {}/{} of Promise {}",
                t.namespace, t.name, t.promise
            ),
        ));
    }
    let name = p.doc["metadata"]["name"].as_str().unwrap_or_default();
    let api: Api<HealthRecord> = Api::namespaced(client.clone(), &t.namespace);
    if let Some(cur) = api.get_opt(name).await.map_err(failed)? {
        let data = serde_json::to_value(&cur.spec.data).unwrap_or(Value::Null);
        let new_run = p.doc["data"]["lastRun"].as_i64();
        if cur.spec.data.last_run > new_run {
            return Ok("stale");
        }
        let mine = cur.labels().get(ALERT_LABEL).map(String::as_str) == Some(ALERT_LABEL_VALUE);
        if mine && data == p.doc["data"] {
            return Ok("unchanged");
        }
    }
    let params = PatchParams::apply(FIELD_MANAGER);
    match api.patch(name, &params, &Patch::Apply(&p.doc)).await {
        Ok(_) => Ok("applied"),
        Err(kube::Error::Api(e)) if e.code == 409 => Err((
            "conflict",
            format!(
                "HealthRecord {}/{name} is managed by another manager: {}",
                t.namespace, e.message
            ),
        )),
        Err(e) => Err(failed(e)),
    }
}

/// Whether `target`'s request exists (its Promise, the Promise's API and the object).
async fn request_exists(
    client: &Client,
    apis: &mut HashMap<String, Option<ApiResource>>,
    t: &Target,
) -> Result<bool, kube::Error> {
    if !apis.contains_key(&t.promise) {
        let promises: Api<plinth_api::Promise> = Api::all(client.clone());
        let ar = promises
            .get_opt(&t.promise)
            .await?
            .and_then(|p| crate::support::resources::request_resource_of(&p));
        apis.insert(t.promise.clone(), ar);
    }
    let Some(ar) = apis.get(&t.promise).cloned().flatten() else {
        return Ok(false);
    };
    let requests: Api<DynamicObject> = Api::namespaced_with(client.clone(), &t.namespace, &ar);
    Ok(requests
        .get_metadata_opt(&t.name)
        .await?
        .is_some_and(|r| r.metadata.deletion_timestamp.is_none()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(status: &str, labels: &[(&str, &str)]) -> Alert {
        Alert {
            status: status.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            annotations: [("summary".to_string(), "Redis is down".to_string())].into(),
            starts_at: "2026-01-01T00:00:00Z".into(),
            ends_at: "2026-01-01T00:10:00Z".into(),
            fingerprint: "abc".into(),
            generator_url: String::new(),
        }
    }

    const NAMED: &[(&str, &str)] = &[
        ("alertname", "RedisDown"),
        ("kratix_promise", "redis"),
        ("kratix_resource", "r1"),
        ("namespace", "default"),
    ];

    #[test]
    fn states_follow_status_and_severity() {
        assert_eq!(state_of(&alert("firing", NAMED)), HealthState::Unhealthy);
        assert_eq!(state_of(&alert("resolved", NAMED)), HealthState::Healthy);
        let mut a = alert("firing", NAMED);
        for (sev, want) in [
            ("critical", HealthState::Unhealthy),
            ("error", HealthState::Unhealthy),
            ("Warning", HealthState::Degraded),
            ("info", HealthState::Degraded),
            ("page", HealthState::Unhealthy),
        ] {
            a.labels.insert("severity".into(), sev.into());
            assert_eq!(state_of(&a), want, "{sev}");
        }
    }

    #[test]
    fn a_record_carries_the_alert() {
        let a = alert("firing", NAMED);
        let t = target_of(&a).unwrap();
        // The platform's clock at the alert's start.
        let now = 1_767_225_600;
        let doc = record_for(&a, &t, now);
        let name = doc["metadata"]["name"].as_str().unwrap();
        assert!(name.starts_with("alert-redisdown-"), "{name}");
        assert!(name.len() <= 63);
        assert_eq!(doc["metadata"]["namespace"], "default");
        assert_eq!(doc["data"]["state"], "unhealthy");
        assert_eq!(doc["data"]["lastRun"], 1_767_225_600);
        assert_eq!(doc["data"]["details"]["summary"], "Redis is down");
        assert_eq!(doc["data"]["details"]["labels"]["kratix_resource"], "r1");
        let r = record_for(&alert("resolved", NAMED), &t, now);
        assert_eq!(r["data"]["state"], "healthy");
        assert_eq!(r["data"]["lastRun"], 1_767_226_200);
        assert_eq!(r["metadata"]["name"], doc["metadata"]["name"]);
        let mut z = alert("firing", NAMED);
        z.starts_at = "0001-01-01T00:00:00Z".into();
        assert_eq!(record_for(&z, &t, now)["data"]["lastRun"], now);
        // A start more than an hour ahead of the platform's clock is taken as now, so the
        // resolution that follows is newer.
        let mut ahead = alert("firing", NAMED);
        ahead.starts_at = "2999-01-01T00:00:00Z".into();
        assert_eq!(record_for(&ahead, &t, now)["data"]["lastRun"], now);
    }

    #[test]
    fn missing_labels_are_named() {
        let a = alert("firing", &[("alertname", "X"), ("namespace", "default")]);
        assert_eq!(
            target_of(&a).unwrap_err().to_string(),
            "no kratix_promise, kratix_resource label"
        );
    }

    #[test]
    fn the_worst_alert_of_one_record_wins() {
        let mut results = vec![None; 3];
        let payload = Payload {
            alerts: vec![
                alert("resolved", NAMED),
                alert("firing", NAMED),
                alert("firing", &[("alertname", "X")]),
            ],
            ..Default::default()
        };
        let planned = plan(&payload, 0, &mut results);
        assert_eq!(planned.len(), 1);
        assert_eq!(planned[0].alerts, vec![0, 1]);
        assert_eq!(planned[0].doc["data"]["state"], "unhealthy");
        assert_eq!(results[2].as_ref().unwrap().result, "noRequestLabels");
    }
}
