//! Aggregating HealthRecords into a request's `status.healthStatus` (Kratix's shape).

use plinth_api::{HealthRecord, HealthState};
use serde_json::{Value, json};

/// The state of a request with no records (Kratix's default).
pub const EMPTY_STATE: HealthState = HealthState::Ready;

/// The lowercase name of a state as it appears in YAML.
pub fn state_name(s: HealthState) -> &'static str {
    match s {
        HealthState::Unknown => "unknown",
        HealthState::Ready => "ready",
        HealthState::Unhealthy => "unhealthy",
        HealthState::Healthy => "healthy",
        HealthState::Degraded => "degraded",
    }
}

/// Parses a state name; `None` for anything outside the enum.
pub fn parse_state(s: &str) -> Option<HealthState> {
    Some(match s {
        "unknown" => HealthState::Unknown,
        "ready" => HealthState::Ready,
        "unhealthy" => HealthState::Unhealthy,
        "healthy" => HealthState::Healthy,
        "degraded" => HealthState::Degraded,
        _ => return None,
    })
}

/// Whether a state counts as up for uptime (`healthy` or `ready`).
pub fn is_up(s: HealthState) -> bool {
    matches!(s, HealthState::Healthy | HealthState::Ready)
}

/// The worst state of `states` (unhealthy < degraded < unknown < healthy < ready);
/// [`EMPTY_STATE`] when there are none.
pub fn worst(states: impl IntoIterator<Item = HealthState>) -> HealthState {
    states
        .into_iter()
        .min_by_key(|s| s.rank())
        .unwrap_or(EMPTY_STATE)
}

/// `status.healthStatus` for `records` (already filtered to one request): the worst state
/// and one entry per record, ordered by namespace and name so the same records always give
/// the same status.
pub fn health_status(records: &[&HealthRecord]) -> Value {
    let mut sorted: Vec<&&HealthRecord> = records.iter().collect();
    sorted.sort_by_key(|r| (r.metadata.namespace.clone(), r.metadata.name.clone()));
    let entries: Vec<Value> = sorted
        .iter()
        .map(|r| {
            let mut e = json!({
                "state": state_name(r.spec.data.state),
                "source": {
                    "name": r.metadata.name.clone().unwrap_or_default(),
                    "namespace": r.metadata.namespace.clone().unwrap_or_default(),
                },
            });
            if let Some(t) = r.spec.data.last_run {
                e["lastRun"] = json!(t);
            }
            if let Some(d) = &r.spec.data.details {
                e["details"] = d.clone();
            }
            e
        })
        .collect();
    json!({
        "state": state_name(worst(records.iter().map(|r| r.spec.data.state))),
        "healthRecords": entries,
    })
}

/// The record that decides the overall state (the first worst one), as `namespace/name`.
pub fn deciding_source(records: &[&HealthRecord]) -> String {
    let mut sorted: Vec<&&HealthRecord> = records.iter().collect();
    sorted.sort_by_key(|r| {
        (
            r.spec.data.state.rank(),
            r.metadata.namespace.clone(),
            r.metadata.name.clone(),
        )
    });
    sorted
        .first()
        .map(|r| {
            format!(
                "{}/{}",
                r.metadata.namespace.clone().unwrap_or_default(),
                r.metadata.name.clone().unwrap_or_default()
            )
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use plinth_api::{HealthRecordData, PromiseRef, ResourceRef};

    fn rec(name: &str, state: HealthState, last_run: i64) -> HealthRecord {
        let mut r = HealthRecord::new(
            name,
            plinth_api::HealthRecordFields {
                data: HealthRecordData {
                    promise_ref: PromiseRef {
                        name: "redis".into(),
                        ..Default::default()
                    },
                    resource_ref: ResourceRef::default(),
                    state,
                    last_run: Some(last_run),
                    details: None,
                    extra: Default::default(),
                },
            },
        );
        r.metadata.namespace = Some("default".into());
        r
    }

    #[test]
    fn worst_state_wins_in_kratix_order() {
        use HealthState::*;
        assert_eq!(worst([Ready, Healthy]), Healthy);
        assert_eq!(worst([Ready, Unknown, Healthy]), Unknown);
        assert_eq!(worst([Degraded, Unknown]), Degraded);
        assert_eq!(worst([Degraded, Unhealthy, Ready]), Unhealthy);
        assert_eq!(worst([]), Ready);
        let (a, b) = (rec("b", Healthy, 2), rec("a", Degraded, 1));
        let s = health_status(&[&a, &b]);
        assert_eq!(s["state"], "degraded");
        assert_eq!(s["healthRecords"][0]["source"]["name"], "a");
        assert_eq!(s["healthRecords"][1]["lastRun"], 2);
        assert_eq!(deciding_source(&[&a, &b]), "default/a");
    }
}
