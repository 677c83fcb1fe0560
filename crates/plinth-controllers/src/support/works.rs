//! Readiness of a set of Works, summarised as the `WorksSucceeded` condition of the
//! Promise or resource request that owns them.

use kube::ResourceExt;
use kube::api::DynamicObject;
use serde_json::Value;

/// Readiness of a set of Works (priority: Failing > Pending > Misplaced > Ready).
pub struct WorksState {
    /// Names of Works whose `Ready` condition says `Failing`.
    pub failing: Vec<String>,
    /// Names of Works not ready for any other reason (no `Ready` condition yet included).
    pub pending: Vec<String>,
    /// Names of Works whose `Ready` condition says `Misplaced`.
    pub misplaced: Vec<String>,
}

impl WorksState {
    /// The `WorksSucceeded` condition (status, reason, message) for `what` ("promise" or "resource").
    pub fn condition(&self, what: &str) -> (&'static str, &'static str, String) {
        if !self.failing.is_empty() {
            (
                "False",
                "WorksFailing",
                format!(
                    "Some works associated with this {what} failed: [{}]",
                    self.failing.join(",")
                ),
            )
        } else if !self.pending.is_empty() {
            (
                "Unknown",
                "WorksPending",
                format!(
                    "Some works associated with this {what} are not ready: [{}]",
                    self.pending.join(",")
                ),
            )
        } else if !self.misplaced.is_empty() {
            (
                "False",
                "WorksMisplaced",
                format!(
                    "Some works associated with this {what} are misplaced: [{}]",
                    self.misplaced.join(",")
                ),
            )
        } else {
            (
                "True",
                "WorksSucceeded",
                format!("All works associated with this {what} are ready"),
            )
        }
    }
}

/// Classifies Works by the message of their `Ready` condition.
pub fn classify_works(items: &[DynamicObject]) -> WorksState {
    let mut st = WorksState {
        failing: vec![],
        pending: vec![],
        misplaced: vec![],
    };
    for w in items {
        let ready =
            super::condition(w.data.get("status").unwrap_or(&Value::Null), "Ready").cloned();
        let msg = ready
            .as_ref()
            .and_then(|c| c["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| "Pending".into());
        let is_true = ready.as_ref().is_some_and(|c| c["status"] == "True");
        match msg.as_str() {
            _ if is_true => {}
            "Failing" => st.failing.push(w.name_any()),
            "Misplaced" => st.misplaced.push(w.name_any()),
            _ => st.pending.push(w.name_any()),
        }
    }
    st
}
