//! The Work's `ScheduleSucceeded` and `Ready` conditions, summarised from the outcome of
//! placing each workload group and from what its WorkPlacements report.

use plinth_api::constants::events;
use plinth_api::events::EventType;

/// The result of placing one workload group.
#[derive(Debug, Default)]
pub(super) struct GroupOutcome {
    /// No Destination matches the group (and it has no WorkPlacement yet).
    pub unscheduled: bool,
    /// One of its WorkPlacements is on a Destination that no longer matches.
    pub misplaced: bool,
    /// The error of a failed WorkPlacement write.
    pub failed: Option<String>,
    /// A WorkPlacement write lost a race (409): no failure, the reconcile runs again.
    pub conflicted: bool,
}

/// One condition the Work should carry, with the event announcing a change to it.
pub(super) struct WantedCondition {
    pub type_: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
    pub event_type: EventType,
    pub event_reason: &'static str,
}

/// The conditions a Work should carry.
pub(super) struct Summary {
    /// `ScheduleSucceeded` first, then `Ready`.
    pub conditions: Vec<WantedCondition>,
}

/// `ScheduleSucceeded` as (status, reason, message) and `Ready` as (status, reason,
/// message), both announced with one event (type, reason).
fn pair(
    schedule: (bool, &'static str, String),
    ready: (bool, &'static str, &str),
    event: (EventType, &'static str),
) -> Summary {
    let cond = |type_, (status, reason, message): (bool, &'static str, String)| WantedCondition {
        type_,
        status,
        reason,
        message,
        event_type: event.0,
        event_reason: event.1,
    };
    Summary {
        conditions: vec![
            cond("ScheduleSucceeded", schedule),
            cond("Ready", (ready.0, ready.1, ready.2.to_string())),
        ],
    }
}

/// The ids of the groups whose outcome satisfies `pred`, space-separated.
fn ids(outcomes: &[(String, GroupOutcome)], pred: impl Fn(&GroupOutcome) -> bool) -> String {
    outcomes
        .iter()
        .filter(|(_, o)| pred(o))
        .map(|(id, _)| id.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `Workplacements failed to write: [<names>]`, then `; <name>: <message>` for each
/// failing placement with a message.
fn failing_message(failing: &[(String, String)]) -> String {
    let names: Vec<&str> = failing.iter().map(|(n, _)| n.as_str()).collect();
    let details: Vec<String> = failing
        .iter()
        .filter(|(_, m)| !m.is_empty())
        .map(|(n, m)| format!("{n}: {m}"))
        .collect();
    let mut msg = format!("Workplacements failed to write: [{}]", names.join(" "));
    if !details.is_empty() {
        msg.push_str("; ");
        msg.push_str(&details.join("; "));
    }
    msg
}

/// The Work's `Ready` and `ScheduleSucceeded` conditions from the group outcomes, the
/// failing placements (name, message) and the placements not yet written, in priority
/// order: failing writes, failed upserts, unscheduled groups, misplaced groups,
/// pending writes, ready.
pub(super) fn summarize(
    outcomes: &[(String, GroupOutcome)],
    failing: &[(String, String)],
    unwritten: &[String],
) -> Summary {
    let scheduled = (
        true,
        "AllWorkplacementsScheduled",
        "All workplacements scheduled successfully".to_string(),
    );
    if !failing.is_empty() {
        let reason = "WorkplacementsFailing";
        let event = (EventType::Warning, events::WORKPLACEMENTS_FAILING);
        pair(
            (false, reason, failing_message(failing)),
            (false, reason, "Failing"),
            event,
        )
    } else if outcomes.iter().any(|(_, o)| o.failed.is_some()) {
        let reason = "FailedToScheduleWorkloads";
        let msg = format!(
            "Failed to schedule or update for workloadGroups: [{}]",
            ids(outcomes, |o| o.failed.is_some())
        );
        pair(
            (false, reason, msg),
            (false, reason, "Pending"),
            (EventType::Warning, reason),
        )
    } else if outcomes.iter().any(|(_, o)| o.unscheduled) {
        let reason = "UnscheduledWorkloads";
        let msg = format!(
            "No matching destination found for workloadGroups: [{}]",
            ids(outcomes, |o| o.unscheduled)
        );
        pair(
            (false, reason, msg),
            (false, reason, "Pending"),
            (EventType::Normal, events::WAITING_DESTINATION),
        )
    } else if outcomes.iter().any(|(_, o)| o.misplaced) {
        let msg = format!(
            "Target destination no longer matches destinationSelectors for workloadGroups: [{}]",
            ids(outcomes, |o| o.misplaced)
        );
        pair(
            (false, "DestinationSelectorMismatch", msg),
            (false, "Misplaced", "Misplaced"),
            (EventType::Warning, events::DESTINATION_SELECTOR_MISMATCH),
        )
    } else if !unwritten.is_empty() {
        pair(
            scheduled,
            (false, "WorkplacementsPending", "Pending"),
            (EventType::Normal, events::ALL_WORKPLACEMENTS_SCHEDULED),
        )
    } else {
        pair(
            scheduled,
            (true, "AllWorkplacementsScheduled", "Ready"),
            (EventType::Normal, events::ALL_WORKPLACEMENTS_SCHEDULED),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_priorities() {
        let ok = GroupOutcome::default();
        let uns = GroupOutcome {
            unscheduled: true,
            ..Default::default()
        };
        let mis = GroupOutcome {
            misplaced: true,
            ..Default::default()
        };
        let s = summarize(
            &[("g1".into(), ok), ("g2".into(), uns), ("g3".into(), mis)],
            &[],
            &[],
        );
        assert_eq!(s.conditions[0].reason, "UnscheduledWorkloads");
        assert_eq!(
            s.conditions[0].message,
            "No matching destination found for workloadGroups: [g2]"
        );
        let s = summarize(
            &[(
                "g3".into(),
                GroupOutcome {
                    misplaced: true,
                    ..Default::default()
                },
            )],
            &[],
            &[],
        );
        assert_eq!(s.conditions[1].reason, "Misplaced");
        let s = summarize(
            &[("g1".into(), GroupOutcome::default())],
            &[("wp1".into(), "bad path".into())],
            &[],
        );
        assert_eq!(s.conditions[0].reason, "WorkplacementsFailing");
        assert!(
            s.conditions[0]
                .message
                .starts_with("Workplacements failed to write: [wp1]")
        );
        assert!(s.conditions[0].message.contains("bad path"));
        let s = summarize(
            &[("g1".into(), GroupOutcome::default())],
            &[],
            &["wp1".into()],
        );
        assert_eq!(
            (s.conditions[0].status, s.conditions[1].status),
            (true, false),
            "scheduled, not yet written"
        );
        assert_eq!(s.conditions[1].message, "Pending");
        let s = summarize(&[("g1".into(), GroupOutcome::default())], &[], &[]);
        assert!(s.conditions.iter().all(|c| c.status));
    }
}
