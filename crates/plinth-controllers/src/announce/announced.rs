//! Which condition transitions are due as Events, and the memory of those already
//! announced (kept in the controllers' `Context`, read by the wrapper in the parent).

use std::collections::HashMap;
use std::sync::Mutex;

use kube::Resource;
use kube::api::DynamicObject;
use plinth_api::constants::events as ev;
use serde_json::Value;

/// A condition state that is announced: `(condition type, status, reason or "" for any,
/// event reason, warning)`.
type Rule = (&'static str, &'static str, &'static str, &'static str, bool);

/// The condition states of Promises and resource requests that Kratix reports as Events.
const RULES: &[Rule] = &[
    ("WorksSucceeded", "True", "", ev::WORKS_SUCCEEDED, false),
    (
        "WorksSucceeded",
        "False",
        "WorksFailing",
        ev::WORKS_FAILING,
        true,
    ),
    (
        "WorksSucceeded",
        "False",
        "WorksMisplaced",
        ev::WORKS_MISPLACED,
        true,
    ),
    (
        "ConfigureWorkflowCompleted",
        "True",
        "",
        ev::CONFIGURE_WORKFLOW_COMPLETED,
        false,
    ),
    (
        "RequirementsFulfilled",
        "True",
        "",
        ev::REQUIREMENTS_FULFILLED,
        false,
    ),
    (
        "RequirementsFulfilled",
        "False",
        "RequirementsNotInstalled",
        ev::REQUIREMENTS_NOT_INSTALLED,
        false,
    ),
    (
        "RequirementsFulfilled",
        "False",
        "RequirementsNotAvailable",
        ev::REQUIREMENTS_NOT_AVAILABLE,
        false,
    ),
    (
        "Reconciled",
        "Unknown",
        "PausedReconciliation",
        ev::PAUSED_RECONCILIATION,
        true,
    ),
];

/// What was announced last, per object uid and event reason: the condition's
/// `lastTransitionTime` and reason.
#[derive(Default)]
pub struct Announced(Mutex<HashMap<(String, &'static str), String>>);

impl Announced {
    /// Whether `(uid, reason)` at `stamp` is new; records it.
    fn is_new(&self, uid: &str, reason: &'static str, stamp: String) -> bool {
        let mut seen = self.0.lock().expect("announced lock");
        let key = (uid.to_string(), reason);
        if seen.get(&key) == Some(&stamp) {
            return false;
        }
        seen.insert(key, stamp);
        true
    }

    /// Forgets a deleted object.
    fn forget(&self, uid: &str) {
        self.0
            .lock()
            .expect("announced lock")
            .retain(|(u, _), _| u != uid);
    }
}

/// The events due for `obj`'s conditions: `(reason, warning, message)` of each rule whose
/// condition state is new since the last call for this object, among the reasons Kratix
/// emits for `component` (a resource request gets no `ConfigureWorkflowCompleted`).
pub fn due(
    announced: &Announced,
    component: &str,
    obj: &DynamicObject,
) -> Vec<(&'static str, bool, String)> {
    let uid = obj.meta().uid.clone().unwrap_or_default();
    if obj.meta().deletion_timestamp.is_some() {
        announced.forget(&uid);
        return Vec::new();
    }
    let conditions = obj
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    for (type_, status, reason, event, warning) in RULES {
        if !ev::KRATIX
            .iter()
            .any(|(c, r, _)| *c == component && r == event)
        {
            continue;
        }
        let Some(c) = conditions.iter().find(|c| c["type"] == *type_) else {
            continue;
        };
        let c_reason = c["reason"].as_str().unwrap_or("");
        if c["status"] != *status || !(reason.is_empty() || c_reason == *reason) {
            continue;
        }
        let stamp = format!(
            "{}/{}",
            c["lastTransitionTime"].as_str().unwrap_or(""),
            c_reason
        );
        if announced.is_new(&uid, event, stamp) {
            let message = c["message"].as_str().unwrap_or(type_).to_string();
            out.push((*event, *warning, message));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(conditions: Value) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "example.test/v1", "kind": "Widget",
            "metadata": {"name": "w1", "namespace": "default", "uid": "u1"},
            "status": {"conditions": conditions}
        }))
        .expect("object")
    }

    #[test]
    fn once_per_transition() {
        let a = Announced::default();
        let works_true = serde_json::json!([
            {"type": "WorksSucceeded", "status": "True", "reason": "WorksSucceeded",
             "message": "All works associated with this resource are ready",
             "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "ConfigureWorkflowCompleted", "status": "False", "reason": "PipelinesInProgress",
             "lastTransitionTime": "2026-01-01T00:00:00Z"}
        ]);
        let first = due(
            &a,
            ev::RESOURCE_REQUEST_CONTROLLER,
            &obj(works_true.clone()),
        );
        assert_eq!(
            first,
            vec![(
                ev::WORKS_SUCCEEDED,
                false,
                "All works associated with this resource are ready".to_string()
            )]
        );
        assert!(
            due(&a, ev::RESOURCE_REQUEST_CONTROLLER, &obj(works_true)).is_empty(),
            "no repeat"
        );
        let failing = serde_json::json!([
            {"type": "WorksSucceeded", "status": "False", "reason": "WorksFailing",
             "message": "Some works failed", "lastTransitionTime": "2026-01-01T00:01:00Z"}
        ]);
        assert_eq!(
            due(&a, ev::RESOURCE_REQUEST_CONTROLLER, &obj(failing)),
            vec![(ev::WORKS_FAILING, true, "Some works failed".to_string())]
        );
        let back = serde_json::json!([
            {"type": "WorksSucceeded", "status": "True", "reason": "WorksSucceeded",
             "message": "ready", "lastTransitionTime": "2026-01-01T00:02:00Z"}
        ]);
        assert_eq!(
            due(&a, ev::RESOURCE_REQUEST_CONTROLLER, &obj(back)).len(),
            1,
            "a new transition is announced again"
        );
    }
}
