//! The status-writer role (`update-status`): merges a pipeline's `status.yaml` into the
//! object's status and records suspend/retry requests.

use crate::control::{ControlRequest, WorkflowControl};
use crate::{PipelineError, WorkflowType, yaml};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Patch, PatchParams, PostParams};
use plinth_api::constants::{condition_types, labels, messages, reasons};
use plinth_api::contract::ObjectRef;
use plinth_api::contract::{STATUS_FILE, WORKFLOW_CONTROL_FILE};
use serde_json::{Map, Value, json};
use std::path::PathBuf;

/// Condition types only Kratix writes; a pipeline's `status.yaml` may not set them
/// (pipelines cannot overwrite Kratix-owned status).
pub const KRATIX_OWNED_CONDITIONS: &[&str] = &[
    condition_types::CONFIGURE_WORKFLOW_COMPLETED,
    condition_types::WORKS_SUCCEEDED,
    condition_types::RECONCILED,
    condition_types::DELETE_WORKFLOW_COMPLETED,
    condition_types::PROMISE_AVAILABLE,
    condition_types::AVAILABLE,
    condition_types::REQUIREMENTS_FULFILLED,
];

/// Everything [`merge_status`] needs besides the two statuses.
#[derive(Clone, Debug)]
pub struct StatusContext {
    /// This pipeline's name (its entry in `status.kratix.workflows.pipelines[]`).
    pub pipeline_name: String,
    /// Promise or resource workflow (decides the completion message).
    pub workflow_type: WorkflowType,
    /// `IS_LAST_PIPELINE`: mark the workflow complete (unless suspended).
    pub is_last_pipeline: bool,
    /// `KRATIX_DRY_RUN`.
    pub dry_run: bool,
    /// What `workflow-control.yaml` asked for.
    pub control: ControlRequest,
    /// `metadata.generation` of the object (for `suspendedGeneration`).
    pub generation: Option<i64>,
    /// The current time.
    pub now: Timestamp,
}

fn rfc3339(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Inserts or replaces the condition with `cond["type"]` in `conditions`; the transition
/// time is kept when the status did not change (Kubernetes condition convention).
fn upsert_condition(conditions: &mut Vec<Value>, mut cond: Value) {
    let ty = cond["type"].clone();
    if let Some(existing) = conditions.iter_mut().find(|c| c["type"] == ty) {
        if existing["status"] == cond["status"]
            && let Some(t) = existing.get("lastTransitionTime").filter(|t| !t.is_null())
        {
            cond["lastTransitionTime"] = t.clone();
        }
        *existing = cond;
    } else {
        conditions.push(cond);
    }
}

fn object_mut<'a>(m: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let v = m.entry(key.to_string()).or_insert_with(|| json!({}));
    if !v.is_object() {
        *v = json!({});
    }
    v.as_object_mut().expect("just made an object")
}

/// Merges a pipeline's `status.yaml` (`incoming`) into the object's current status
/// (`existing`; `null` = none) and applies the workflow bookkeeping:
///
/// 1. `incoming` must be a map (or empty). A top-level `kratix` key, or a condition of a
///    Kratix-owned type ([`KRATIX_OWNED_CONDITIONS`]), is rejected
///    ([`PipelineError::ForbiddenStatus`]).
/// 2. Top-level keys of `incoming` overwrite (no deep merge); keys it does not mention are
///    kept. `conditions` are merged by `type` (incoming wins; a missing
///    `lastTransitionTime` is set to now).
/// 3. Promise workflows: keys other than `message` are logged as warnings (the Promise
///    status schema drops them).
/// 4. Suspend/retry: this pipeline's entry in `kratix.workflows.pipelines[]` gets
///    `phase: Suspended`, the message (or none), and for retries `nextRetryAt` (now + delay,
///    RFC 3339 UTC) and `attempts + 1`; `kratix.workflows.suspendedGeneration` = generation.
///    No completion is recorded. The caller also labels the object
///    `kratix.io/workflow-suspended: "true"`.
/// 5. Otherwise any suspension of this pipeline is cleared (phase `Running`, message,
///    attempts and nextRetryAt removed), and if this is the last pipeline: `message`
///    `Pending` becomes `Resource requested` / `Promise configured`,
///    `suspendedGeneration` is removed and `ConfigureWorkflowCompleted=True`
///    (`PipelinesExecutedSuccessfully`, "Pipelines completed") is upserted.
/// 6. Dry runs: `message: Dry run executed`.
pub fn merge_status(
    existing: &Value,
    incoming: &Value,
    ctx: &StatusContext,
) -> Result<Value, PipelineError> {
    let mut status = existing_map(existing)?;
    let incoming = incoming_map(incoming)?;
    let now = rfc3339(ctx.now);
    merge_incoming(&mut status, incoming, ctx, &now)?;
    record_control(&mut status, ctx, &now)?;
    let suspended = ctx.control.is_suspended();
    if !suspended && ctx.is_last_pipeline {
        complete_workflow(&mut status, ctx, &now);
    }
    if ctx.dry_run {
        status.insert("message".into(), json!(messages::DRY_RUN_EXECUTED));
    }
    Ok(Value::Object(status))
}

/// The object's current status as a map (`null`: none).
fn existing_map(existing: &Value) -> Result<Map<String, Value>, PipelineError> {
    match existing {
        Value::Object(m) => Ok(m.clone()),
        Value::Null => Ok(Map::new()),
        other => Err(PipelineError::Config(format!(
            "existing status is not an object: {other}"
        ))),
    }
}

/// Step 1: the pipeline's `status.yaml` as a map (empty: none), without `kratix`.
fn incoming_map(incoming: &Value) -> Result<Map<String, Value>, PipelineError> {
    let incoming = match incoming {
        Value::Object(m) => m.clone(),
        Value::Null => Map::new(),
        other => {
            return Err(PipelineError::ForbiddenStatus(format!(
                "must be a map of status fields, got {}",
                match other {
                    Value::Array(_) => "a list",
                    Value::String(_) => "a string",
                    _ => "a scalar",
                }
            )));
        }
    };
    if incoming.contains_key("kratix") {
        return Err(PipelineError::ForbiddenStatus(
            "the `kratix` key is reserved for Kratix; pipelines cannot write status.kratix".into(),
        ));
    }
    Ok(incoming)
}

/// Steps 2 and 3: top-level keys overwrite, `conditions` merge by type.
fn merge_incoming(
    status: &mut Map<String, Value>,
    incoming: Map<String, Value>,
    ctx: &StatusContext,
    now: &str,
) -> Result<(), PipelineError> {
    for (key, value) in incoming {
        if ctx.workflow_type == WorkflowType::Promise && key != "message" {
            tracing::warn!(key = %key, "promise workflows can only set status.message; the Promise status schema drops other keys");
        }
        if key != "conditions" {
            status.insert(key, value);
            continue;
        }
        let list = value
            .as_array()
            .ok_or_else(|| PipelineError::ForbiddenStatus("`conditions` must be a list".into()))?;
        let merged = merge_conditions(status, list, now)?;
        status.insert("conditions".into(), Value::Array(merged));
    }
    Ok(())
}

/// The status's conditions with the pipeline's `list` merged in by `type` (incoming wins;
/// a missing `lastTransitionTime` is `now`); Kratix-owned types are refused.
fn merge_conditions(
    status: &Map<String, Value>,
    list: &[Value],
    now: &str,
) -> Result<Vec<Value>, PipelineError> {
    let mut merged: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, c) in list.iter().enumerate() {
        let ty = c
            .get("type")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                PipelineError::ForbiddenStatus(format!("conditions[{i}] has no `type`"))
            })?;
        if KRATIX_OWNED_CONDITIONS.contains(&ty) {
            return Err(PipelineError::ForbiddenStatus(format!(
                "conditions[{i}]: condition type {ty:?} is owned by Kratix and cannot be set by a pipeline"
            )));
        }
        let mut c = c.clone();
        if c.get("lastTransitionTime").is_none_or(Value::is_null) {
            c["lastTransitionTime"] = json!(now);
        }
        // Incoming wins outright for pipeline-owned conditions.
        if let Some(slot) = merged.iter_mut().find(|e| e["type"] == ty) {
            *slot = c;
        } else {
            merged.push(c);
        }
    }
    Ok(merged)
}

/// Steps 4 and 5: this pipeline's entry in `kratix.workflows.pipelines[]` and
/// `kratix.workflows.suspendedGeneration`, as the workflow control file asks.
fn record_control(
    status: &mut Map<String, Value>,
    ctx: &StatusContext,
    now: &str,
) -> Result<(), PipelineError> {
    let suspended = ctx.control.is_suspended();
    let kratix = object_mut(status, "kratix");
    let workflows = object_mut(kratix, "workflows");
    let pipelines = workflows.entry("pipelines").or_insert_with(|| json!([]));
    if !pipelines.is_array() {
        *pipelines = json!([]);
    }
    let pipelines = pipelines.as_array_mut().expect("array");
    let idx = match pipelines
        .iter()
        .position(|p| p["name"] == ctx.pipeline_name.as_str())
    {
        Some(i) => Some(i),
        None if suspended => {
            pipelines.push(json!({"name": ctx.pipeline_name}));
            Some(pipelines.len() - 1)
        }
        None => None,
    };
    if let Some(i) = idx {
        let entry = pipelines[i].as_object_mut().ok_or_else(|| {
            PipelineError::Config(format!(
                "status.kratix.workflows.pipelines[{i}] is not an object"
            ))
        })?;
        record_pipeline_phase(entry, ctx, now)?;
    }
    if suspended {
        match ctx.generation {
            Some(g) => workflows.insert("suspendedGeneration".into(), json!(g)),
            None => workflows.remove("suspendedGeneration"),
        };
    } else if ctx.is_last_pipeline {
        workflows.remove("suspendedGeneration");
    }
    Ok(())
}

/// One pipeline's entry: a suspension or retry recorded (phase, message, next retry and
/// attempts), or any earlier one cleared.
fn record_pipeline_phase(
    entry: &mut Map<String, Value>,
    ctx: &StatusContext,
    now: &str,
) -> Result<(), PipelineError> {
    let was_suspended = entry.get("phase").and_then(Value::as_str) == Some("Suspended");
    match &ctx.control {
        ControlRequest::Continue => {
            entry.remove("message");
            entry.remove("nextRetryAt");
            entry.remove("attempts");
            if was_suspended {
                entry.insert("phase".into(), json!("Running"));
                entry.insert("lastTransitionTime".into(), json!(now));
            }
        }
        ControlRequest::Suspend { message } | ControlRequest::Retry { message, .. } => {
            if !was_suspended {
                entry.insert("lastTransitionTime".into(), json!(now));
            }
            entry.insert("phase".into(), json!("Suspended"));
            match message.as_ref().filter(|m| !m.is_empty()) {
                Some(m) => entry.insert("message".into(), json!(m)),
                None => entry.remove("message"),
            };
            if let ControlRequest::Retry { after, .. } = &ctx.control {
                let next = ctx.now.checked_add(*after).map_err(|e| {
                    PipelineError::metadata(WORKFLOW_CONTROL_FILE, format!("retryAfter: {e}"))
                })?;
                let attempts = entry.get("attempts").and_then(Value::as_i64).unwrap_or(0) + 1;
                entry.insert("nextRetryAt".into(), json!(rfc3339(next)));
                entry.insert("attempts".into(), json!(attempts));
            } else {
                entry.remove("nextRetryAt");
                entry.remove("attempts");
            }
        }
    }
    Ok(())
}

/// Step 5, last pipeline: `Pending` becomes the finished message, and
/// `ConfigureWorkflowCompleted=True` is upserted.
fn complete_workflow(status: &mut Map<String, Value>, ctx: &StatusContext, now: &str) {
    if status.get("message").and_then(Value::as_str) == Some(messages::PENDING) {
        let done = match ctx.workflow_type {
            WorkflowType::Resource => messages::RESOURCE_REQUESTED,
            WorkflowType::Promise => messages::PROMISE_CONFIGURED,
        };
        status.insert("message".into(), json!(done));
    }
    let mut conditions: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    upsert_condition(
        &mut conditions,
        json!({
            "type": condition_types::CONFIGURE_WORKFLOW_COMPLETED,
            "status": "True",
            "reason": reasons::PIPELINES_EXECUTED_SUCCESSFULLY,
            "message": messages::PIPELINES_COMPLETED,
            "lastTransitionTime": now,
        }),
    );
    status.insert("conditions".into(), Value::Array(conditions));
}

/// Inputs of [`run_status_writer`].
#[derive(Clone, Debug)]
pub struct StatusWriterArgs {
    /// Directory holding `status.yaml` and `workflow-control.yaml`
    /// (`/work-creator-files/metadata`).
    pub metadata_dir: PathBuf,
    /// The object.
    pub object: ObjectRef,
    /// This pipeline's name (`KRATIX_PIPELINE_NAME`).
    pub pipeline_name: String,
    /// `KRATIX_WORKFLOW_TYPE`.
    pub workflow_type: WorkflowType,
    /// `IS_LAST_PIPELINE`.
    pub is_last_pipeline: bool,
    /// `KRATIX_DRY_RUN`.
    pub dry_run: bool,
    /// How many times to re-read and re-merge after a 409 conflict before giving up.
    pub max_conflict_retries: u32,
}

/// Runs the status-writer: reads `status.yaml` and `workflow-control.yaml`, GETs the object
/// through the dynamic API, merges with [`merge_status`] and writes the status subresource.
///
/// On suspend/retry the object is first labelled `kratix.io/workflow-suspended: "true"`
/// (merge patch). The status write carries the object's resourceVersion; a 409 conflict
/// re-reads the object and merges again (up to `max_conflict_retries` times), so a
/// concurrent controller write is never lost. Returns the status written.
pub async fn run_status_writer(
    client: Client,
    args: StatusWriterArgs,
) -> Result<Value, PipelineError> {
    let status_path = args.metadata_dir.join(STATUS_FILE);
    let incoming: Value = yaml::read_optional(&status_path)?.unwrap_or(Value::Null);
    let control = WorkflowControl::read(&args.metadata_dir)?.request()?;
    let api = args.object.api(client);
    let what = args.object.describe();

    if control.is_suspended() {
        let patch = json!({"metadata": {"labels": {labels::WORKFLOW_SUSPENDED: labels::TRUE}}});
        api.patch(
            &args.object.name,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(|e| {
            PipelineError::kube(
                format!("labelling {what} {}", labels::WORKFLOW_SUSPENDED),
                e,
            )
        })?;
    }

    let mut attempt = 0;
    loop {
        let mut obj = api
            .get(&args.object.name)
            .await
            .map_err(|e| PipelineError::kube(format!("getting {what}"), e))?;
        let ctx = StatusContext {
            pipeline_name: args.pipeline_name.clone(),
            workflow_type: args.workflow_type,
            is_last_pipeline: args.is_last_pipeline,
            dry_run: args.dry_run,
            control: control.clone(),
            generation: obj.metadata.generation,
            now: Timestamp::now(),
        };
        let existing = obj.data.get("status").cloned().unwrap_or(Value::Null);
        let merged = merge_status(&existing, &incoming, &ctx)?;
        obj.data["status"] = merged.clone();
        obj.metadata.managed_fields = None;
        match api
            .replace_status(&args.object.name, &PostParams::default(), &obj)
            .await
        {
            Ok(_) => {
                tracing::info!(object = %what, "status written");
                return Ok(merged);
            }
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < args.max_conflict_retries => {
                attempt += 1;
                tracing::info!(object = %what, attempt, "status write conflicted; re-reading and merging again");
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                return Err(PipelineError::Conflict(format!(
                    "writing status of {what}: still conflicting after {attempt} retries: {}",
                    s.message
                )));
            }
            Err(e) => return Err(PipelineError::kube(format!("writing status of {what}"), e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ctx(control: ControlRequest, last: bool) -> StatusContext {
        StatusContext {
            pipeline_name: "p2".into(),
            workflow_type: WorkflowType::Resource,
            is_last_pipeline: last,
            dry_run: false,
            control,
            generation: Some(4),
            now: "2026-01-01T00:00:00Z".parse().unwrap(),
        }
    }

    fn existing() -> Value {
        json!({
            "message": "Pending",
            "endpoint": "db.old",
            "keep": "me",
            "conditions": [
                {"type": "ConfigureWorkflowCompleted", "status": "False", "reason": "PipelinesInProgress",
                 "message": "Pipelines are still in progress", "lastTransitionTime": "2025-12-31T00:00:00Z"},
                {"type": "Custom", "status": "False", "reason": "Old", "message": "old", "lastTransitionTime": "2025-12-31T00:00:00Z"}
            ],
            "kratix": {"workflows": {"pipelines": [
                {"name": "p1", "phase": "Succeeded"},
                {"name": "p2", "phase": "Running"}
            ]}}
        })
    }

    #[test]
    fn top_level_keys_overwrite_and_earlier_keys_stay() {
        let out = merge_status(
            &existing(),
            &json!({"endpoint": "db.new", "nested": {"a": 1}}),
            &ctx(ControlRequest::Continue, false),
        )
        .unwrap();
        assert_eq!(out["endpoint"], "db.new");
        assert_eq!(out["keep"], "me");
        assert_eq!(out["nested"]["a"], 1);
        assert_eq!(
            out["message"], "Pending",
            "not the last pipeline: no completion"
        );
        let c = out["conditions"].as_array().unwrap();
        assert_eq!(
            c.iter()
                .find(|c| c["type"] == "ConfigureWorkflowCompleted")
                .unwrap()["status"],
            "False"
        );
    }

    #[test]
    fn conditions_merge_by_type() {
        let incoming = json!({"conditions": [
            {"type": "Custom", "status": "True", "reason": "New", "message": "new"},
            {"type": "Another", "status": "True", "reason": "R", "message": "m", "lastTransitionTime": "2025-01-01T00:00:00Z"}
        ]});
        let out = merge_status(
            &existing(),
            &incoming,
            &ctx(ControlRequest::Continue, false),
        )
        .unwrap();
        let c = out["conditions"].as_array().unwrap();
        assert_eq!(c.len(), 3);
        let custom = c.iter().find(|c| c["type"] == "Custom").unwrap();
        assert_eq!(custom["reason"], "New");
        assert_eq!(custom["lastTransitionTime"], "2026-01-01T00:00:00Z");
        assert_eq!(
            c.iter().find(|c| c["type"] == "Another").unwrap()["lastTransitionTime"],
            "2025-01-01T00:00:00Z"
        );
    }

    #[test]
    fn kratix_key_and_owned_conditions_are_rejected() {
        let e = merge_status(
            &existing(),
            &json!({"kratix": {}}),
            &ctx(ControlRequest::Continue, true),
        )
        .unwrap_err();
        assert!(e.to_string().contains("`kratix` key is reserved"), "{e}");
        let e = merge_status(
            &existing(),
            &json!({"conditions": [{"type": "Reconciled", "status": "True"}]}),
            &ctx(ControlRequest::Continue, true),
        )
        .unwrap_err();
        assert!(e.to_string().contains("owned by Kratix"), "{e}");
        assert!(
            merge_status(
                &existing(),
                &json!(["x"]),
                &ctx(ControlRequest::Continue, true)
            )
            .is_err()
        );
    }

    #[test]
    fn completion_only_on_the_last_pipeline() {
        let out = merge_status(
            &existing(),
            &Value::Null,
            &ctx(ControlRequest::Continue, true),
        )
        .unwrap();
        assert_eq!(out["message"], "Resource requested");
        let c = out["conditions"].as_array().unwrap();
        let done = c
            .iter()
            .find(|c| c["type"] == "ConfigureWorkflowCompleted")
            .unwrap();
        assert_eq!(done["status"], "True");
        assert_eq!(done["reason"], "PipelinesExecutedSuccessfully");
        assert_eq!(done["message"], "Pipelines completed");
        assert_eq!(done["lastTransitionTime"], "2026-01-01T00:00:00Z");

        let mut promise = ctx(ControlRequest::Continue, true);
        promise.workflow_type = WorkflowType::Promise;
        let out = merge_status(&existing(), &Value::Null, &promise).unwrap();
        assert_eq!(out["message"], "Promise configured");

        // A message set by the pipeline is kept.
        let out = merge_status(
            &existing(),
            &json!({"message": "ready at db.new"}),
            &ctx(ControlRequest::Continue, true),
        )
        .unwrap();
        assert_eq!(out["message"], "ready at db.new");
    }

    #[test]
    fn suspend_and_retry_record_the_pipeline_state() {
        let retry = ControlRequest::Retry {
            after: Duration::from_secs(90),
            message: Some("waiting for db".into()),
        };
        let out = merge_status(&existing(), &Value::Null, &ctx(retry.clone(), true)).unwrap();
        let p2 = &out["kratix"]["workflows"]["pipelines"][1];
        assert_eq!(p2["phase"], "Suspended");
        assert_eq!(p2["message"], "waiting for db");
        assert_eq!(p2["nextRetryAt"], "2026-01-01T00:01:30Z");
        assert_eq!(p2["attempts"], 1);
        assert_eq!(out["kratix"]["workflows"]["suspendedGeneration"], 4);
        assert_eq!(out["message"], "Pending", "no completion when suspended");
        assert!(
            out["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .all(|c| c["status"] != "True")
        );

        // A second retry counts up.
        let again = merge_status(&out, &Value::Null, &ctx(retry, true)).unwrap();
        assert_eq!(again["kratix"]["workflows"]["pipelines"][1]["attempts"], 2);

        // Plain suspend drops retry fields.
        let sus = merge_status(
            &again,
            &Value::Null,
            &ctx(ControlRequest::Suspend { message: None }, false),
        )
        .unwrap();
        let p2 = &sus["kratix"]["workflows"]["pipelines"][1];
        assert_eq!(p2["phase"], "Suspended");
        assert!(
            p2.get("attempts").is_none()
                && p2.get("nextRetryAt").is_none()
                && p2.get("message").is_none()
        );

        // No control file on the next run clears the suspension and completes.
        let resumed =
            merge_status(&sus, &Value::Null, &ctx(ControlRequest::Continue, true)).unwrap();
        let p2 = &resumed["kratix"]["workflows"]["pipelines"][1];
        assert_eq!(p2["phase"], "Running");
        assert!(
            resumed["kratix"]["workflows"]
                .get("suspendedGeneration")
                .is_none()
        );
        assert_eq!(resumed["message"], "Resource requested");
    }

    #[test]
    fn dry_run_message() {
        let mut c = ctx(ControlRequest::Continue, true);
        c.dry_run = true;
        assert_eq!(
            merge_status(&Value::Null, &Value::Null, &c).unwrap()["message"],
            "Dry run executed"
        );
    }
}
