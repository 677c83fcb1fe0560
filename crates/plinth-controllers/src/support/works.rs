//! Readiness of a set of Works, summarised as the `WorksSucceeded` condition of the
//! Promise or resource request that owns them.

use kube::api::{Api, DeleteParams, ListParams};
use kube::{Client, Resource, ResourceExt};
use plinth_api::constants::{condition_types, labels, messages, reasons};
use plinth_api::{Work, WorkPlacement};
use serde_json::Value;

use super::conditions::{condition_true, set_condition};

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
                reasons::WORKS_FAILING,
                format!(
                    "Some works associated with this {what} failed: [{}]",
                    self.failing.join(",")
                ),
            )
        } else if !self.pending.is_empty() {
            (
                "Unknown",
                reasons::WORKS_PENDING,
                format!(
                    "Some works associated with this {what} are not ready: [{}]",
                    self.pending.join(",")
                ),
            )
        } else if !self.misplaced.is_empty() {
            (
                "False",
                reasons::WORKS_MISPLACED,
                format!(
                    "Some works associated with this {what} are misplaced: [{}]: their \
                     Destination no longer matches the destinationSelectors, which changed \
                     after they were placed, so they stay where they are; label the {what} \
                     {}=true to move them to a matching Destination",
                    self.misplaced.join(","),
                    labels::RESCHEDULE
                ),
            )
        } else {
            (
                "True",
                reasons::WORKS_SUCCEEDED,
                format!("All works associated with this {what} are ready"),
            )
        }
    }

    /// Sets `WorksSucceeded` (about `what`: "promise" or "resource") on status `s` and
    /// the `Reconciled` it implies: True once the configure workflow completed (or there
    /// is none, `no_workflow`) and the Works are ready; False `WorksFailing` when Works
    /// failed, False `WorksMisplaced` (message `Misplaced`) when they are only misplaced;
    /// Unknown `WorksPending` otherwise. True when either
    /// condition changed.
    pub fn set_conditions(&self, s: &mut Value, what: &str, no_workflow: bool) -> bool {
        let (ws, wr, wm) = self.condition(what);
        let mut c = set_condition(s, condition_types::WORKS_SUCCEEDED, ws, wr, &wm, None);
        let workflow_done =
            no_workflow || condition_true(s, condition_types::CONFIGURE_WORKFLOW_COMPLETED);
        let (status, reason, message) = if workflow_done && ws == "True" {
            ("True", reasons::RECONCILED, messages::RECONCILED)
        } else if wr == reasons::WORKS_MISPLACED {
            // Placed and written, only on a Destination the selectors no longer pick:
            // not a failure, and the fix is the user's choice (WorksSucceeded says how).
            ("False", reasons::WORKS_MISPLACED, messages::MISPLACED)
        } else if ws == "False" {
            ("False", reasons::WORKS_FAILING, messages::FAILING)
        } else {
            ("Unknown", reasons::WORKS_PENDING, messages::PENDING)
        };
        c |= set_condition(
            s,
            condition_types::RECONCILED,
            status,
            reason,
            message,
            None,
        );
        c
    }
}

/// Classifies Works by the message of their `Ready` condition.
pub fn classify_works(items: &[Work]) -> WorksState {
    let mut st = WorksState {
        failing: vec![],
        pending: vec![],
        misplaced: vec![],
    };
    for w in items {
        let ready = w
            .status
            .as_ref()
            .and_then(|s| plinth_api::find_condition(&s.conditions, "Ready"));
        let msg = ready.map_or("Pending", |c| c.message.as_str());
        let is_true = ready.is_some_and(|c| c.status == "True");
        match msg {
            _ if is_true => {}
            "Failing" => st.failing.push(w.name_any()),
            "Misplaced" => st.misplaced.push(w.name_any()),
            _ => st.pending.push(w.name_any()),
        }
    }
    st
}

/// Deletes the misplaced WorkPlacements of `works` (label `kratix.io/misplaced=true`), so
/// the Work controller places their groups again on Destinations that match now; the
/// deleted placements' files leave the old Destination through their finalizer. Returns
/// how many it deleted.
pub async fn reschedule_misplaced(client: &Client, works: &[Work]) -> Result<usize, crate::Error> {
    let mut deleted = 0;
    for w in works {
        let ns = w.namespace().unwrap_or_default();
        let api: Api<WorkPlacement> = Api::namespaced(client.clone(), &ns);
        let sel = format!(
            "{}=true,{}={}",
            labels::MISPLACED,
            labels::WORK,
            w.name_any()
        );
        let what = format!("Work {ns}/{}", w.name_any());
        let list = api
            .list(&ListParams::default().labels(&sel))
            .await
            .map_err(|e| crate::Error::kube("listing misplaced WorkPlacements of", &what, e))?;
        for wp in list
            .items
            .iter()
            .filter(|wp| wp.meta().deletion_timestamp.is_none())
        {
            match api.delete(&wp.name_any(), &DeleteParams::default()).await {
                Ok(_) => deleted += 1,
                Err(e) if super::api_errors::is_not_found(&e) => {}
                Err(e) => {
                    return Err(crate::Error::kube(
                        "deleting misplaced WorkPlacement of",
                        what,
                        e,
                    ));
                }
            }
        }
    }
    Ok(deleted)
}
