//! The health-state-creator role: turns a health check's
//! `/kratix/output/health-status.yaml` into a HealthRecord at the Destination.
//!
//! The check's Pod (a CronJob the health agent creates for each HealthDefinition) runs
//! `reader`, the user's containers, then this role. Its contract:
//!
//! * `<output-dir>/health-status.yaml`: a mapping with `state` (one of `unknown`, `ready`,
//!   `unhealthy`, `healthy`, `degraded`) and optional `details` (any mapping); any other
//!   key is an error;
//! * the HealthDefinition and the request it checks come from the Pod's environment:
//!   `KRATIX_HEALTH_DEFINITION_NAME`, `KRATIX_HEALTH_DEFINITION_NAMESPACE`,
//!   `KRATIX_PROMISE_NAME`, `KRATIX_OBJECT_NAME`, `KRATIX_OBJECT_NAMESPACE` (the health
//!   agent sets them from the definition's `metadata`, `promiseRef` and `resourceRef`).
//!
//! The record is applied (server-side apply, field manager `health-state-creator`) in the
//! HealthDefinition's namespace under the name [`plinth_api::names::health_record_name`],
//! labelled with the definition's name, with `lastRun` the time of the run; the health
//! agent watches such records and hands them to its store writer.

use std::path::{Path, PathBuf};

use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use plinth_api::constants::health as names;
use plinth_api::{HealthRecord, HealthState};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::PipelineError;

/// What a check reported in `health-status.yaml`.
#[derive(Clone, Debug, PartialEq)]
pub struct HealthStatus {
    /// The state the check found.
    pub state: HealthState,
    /// Optional details (a mapping).
    pub details: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStatus {
    state: Option<Value>,
    #[serde(default)]
    details: Option<Value>,
}

/// Which record to write: the HealthDefinition and the request it checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthTarget {
    /// The HealthDefinition's name.
    pub definition: String,
    /// The HealthDefinition's namespace (where the record is written).
    pub definition_namespace: String,
    /// The request's Promise.
    pub promise: String,
    /// The request's name.
    pub request: String,
    /// The request's namespace.
    pub request_namespace: String,
}

/// Inputs of [`run_health_state_creator`].
#[derive(Clone, Debug)]
pub struct HealthStateCreatorArgs {
    /// Directory holding `health-status.yaml` (`/kratix/output`, or `OUTPUT_DIR`).
    pub output_dir: PathBuf,
    /// The record to write.
    pub target: HealthTarget,
}

/// Reads and checks `<output_dir>/health-status.yaml`.
///
/// # Errors
/// [`PipelineError::Io`] when the file is missing or unreadable,
/// [`PipelineError::InvalidYaml`] when it is not YAML, [`PipelineError::InvalidMetadata`]
/// naming the file, the field and the cause when `state` is missing or not a HealthRecord
/// state, `details` is not a mapping, or another key is present.
pub fn read_health_status(output_dir: &Path) -> Result<HealthStatus, PipelineError> {
    let path = output_dir.join(names::STATUS_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| PipelineError::io(&path, e))?;
    let file = path.display().to_string();
    let raw: RawStatus = crate::yaml::parse_one(&path, &text)
        .map_err(|e| match e {
            PipelineError::InvalidYaml { message, .. } if message.contains("unknown field") => {
                PipelineError::metadata(
                    &file,
                    format!("{message} (a health status has only `state` and `details`)"),
                )
            }
            other => other,
        })?
        .unwrap_or(RawStatus {
            state: None,
            details: None,
        });
    let state = raw.state.ok_or_else(|| {
        PipelineError::metadata(
            &file,
            "field `state` is required (one of unknown, ready, unhealthy, healthy, degraded)",
        )
    })?;
    let state: HealthState = serde_json::from_value(state.clone()).map_err(|_| {
        PipelineError::metadata(
            &file,
            format!(
                "field `state`: {state} is not a health state (one of unknown, ready, unhealthy, healthy, degraded)"
            ),
        )
    })?;
    let details = match raw.details {
        None | Some(Value::Null) => None,
        Some(d @ Value::Object(_)) => Some(d),
        Some(other) => {
            return Err(PipelineError::metadata(
                &file,
                format!("field `details` must be a mapping, got {other}"),
            ));
        }
    };
    Ok(HealthStatus { state, details })
}

/// The HealthRecord for `status` of `target`, run at `last_run` (unix seconds).
pub fn health_record(target: &HealthTarget, status: &HealthStatus, last_run: i64) -> Value {
    let name = plinth_api::names::health_record_name(
        &target.promise,
        &target.request_namespace,
        &target.request,
        &target.definition_namespace,
        &target.definition,
    );
    let mut data = json!({
        "promiseRef": {"name": target.promise},
        "resourceRef": {"name": target.request, "namespace": target.request_namespace},
        "state": status.state,
        "lastRun": last_run,
    });
    if let Some(d) = &status.details {
        data["details"] = d.clone();
    }
    json!({
        "apiVersion": names::RECORD_API_VERSION,
        "kind": names::RECORD_KIND,
        "metadata": {
            "name": name,
            "namespace": target.definition_namespace,
            "labels": {names::DEFINITION_LABEL: target.definition},
        },
        "data": data,
    })
}

/// Reads the check's status and applies its HealthRecord; returns the record's name.
///
/// # Errors
/// The errors of [`read_health_status`], and [`PipelineError::Kube`] naming the record
/// when the apply fails.
pub async fn run_health_state_creator(
    client: Client,
    args: HealthStateCreatorArgs,
) -> Result<String, PipelineError> {
    let status = read_health_status(&args.output_dir)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default();
    let record = health_record(&args.target, &status, now);
    let name = record["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let api: Api<HealthRecord> = Api::namespaced(client, &args.target.definition_namespace);
    api.patch(
        &name,
        &PatchParams::apply(names::STATE_CREATOR_FIELD_MANAGER).force(),
        &Patch::Apply(&record),
    )
    .await
    .map_err(|e| {
        PipelineError::kube(
            format!(
                "applying HealthRecord {}/{name}",
                args.target.definition_namespace
            ),
            e,
        )
    })?;
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(text: &str) -> Result<HealthStatus, String> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(names::STATUS_FILE), text).unwrap();
        read_health_status(dir.path()).map_err(|e| e.to_string())
    }

    #[test]
    fn a_state_and_details_are_read() {
        let s = status("state: healthy\ndetails: {replicas: 2}\n").unwrap();
        assert_eq!(s.state, HealthState::Healthy);
        assert_eq!(s.details, Some(json!({"replicas": 2})));
        assert_eq!(status("state: degraded\n").unwrap().details, None);
    }

    #[test]
    fn bad_input_names_file_field_and_cause() {
        let e = status("details: {a: 1}\n").unwrap_err();
        assert!(
            e.contains("health-status.yaml") && e.contains("`state` is required"),
            "{e}"
        );
        let e = status("state: fine\n").unwrap_err();
        assert!(
            e.contains("health-status.yaml") && e.contains("\"fine\" is not a health state"),
            "{e}"
        );
        let e = status("state: healthy\ndetails: [1]\n").unwrap_err();
        assert!(e.contains("`details` must be a mapping"), "{e}");
        let e = status("state: healthy\nstatus: ok\n").unwrap_err();
        assert!(
            e.contains("health-status.yaml") && e.contains("status"),
            "{e}"
        );
        let e = status("state: [\n").unwrap_err();
        assert!(
            e.contains("health-status.yaml") && e.contains("invalid YAML"),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let e = read_health_status(dir.path()).unwrap_err().to_string();
        assert!(e.contains("health-status.yaml"), "{e}");
    }

    #[test]
    fn the_record_names_the_request_and_the_definition() {
        let t = HealthTarget {
            definition: "db-health".into(),
            definition_namespace: "apps".into(),
            promise: "postgresql".into(),
            request: "example".into(),
            request_namespace: "default".into(),
        };
        let r = health_record(
            &t,
            &HealthStatus {
                state: HealthState::Unhealthy,
                details: Some(json!({"why": "down"})),
            },
            42,
        );
        assert_eq!(r["metadata"]["namespace"], "apps");
        assert_eq!(
            r["metadata"]["labels"][names::DEFINITION_LABEL],
            "db-health"
        );
        assert_eq!(
            r["metadata"]["name"],
            plinth_api::names::health_record_name(
                "postgresql",
                "default",
                "example",
                "apps",
                "db-health"
            )
        );
        assert_eq!(r["data"]["state"], "unhealthy");
        assert_eq!(r["data"]["lastRun"], 42);
        assert_eq!(r["data"]["resourceRef"]["namespace"], "default");
        assert_eq!(r["data"]["details"]["why"], "down");
        let parsed: HealthRecord = serde_json::from_value(r).unwrap();
        assert_eq!(parsed.spec.data.promise_ref.name, "postgresql");
    }
}
