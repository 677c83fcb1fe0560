//! Aggregating HealthRecords into a request's `status.healthStatus` (Kratix's shape).

use std::collections::BTreeMap;

use plinth_api::constants::health as names;
use plinth_api::{HealthRecord, HealthState};
use serde_json::{Value, json};

/// The records judged stale (`super::freshness`), by namespace and name, with why: each
/// counts as `unknown` whatever state it last reported.
pub type StaleRecords = BTreeMap<(String, String), String>;

fn key_of(r: &HealthRecord) -> (String, String) {
    (
        r.metadata.namespace.clone().unwrap_or_default(),
        r.metadata.name.clone().unwrap_or_default(),
    )
}

/// The state `r` counts as: its own, or `unknown` when it is stale.
pub fn effective_state(r: &HealthRecord, stale: &StaleRecords) -> HealthState {
    if stale.contains_key(&key_of(r)) {
        HealthState::Unknown
    } else {
        r.spec.data.state
    }
}

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

/// Most bytes (as JSON) of one record's `details` copied into a request's status.
pub const MAX_DETAILS_BYTES: usize = 16 * 1024;
/// Most bytes (as JSON) of all records' `details` copied into one request's status: with
/// the per-record bound, what records add to a status stays far below the API's object
/// size limit however large or many they are.
pub const MAX_TOTAL_DETAILS_BYTES: usize = 128 * 1024;

/// Most records listed in a request's `healthStatus.healthRecords` (the worst first when
/// there are more; `omittedRecords` counts the rest). The state is always that of all.
pub const MAX_LISTED_RECORDS: usize = 500;

/// The marker that replaces `details` too large for the request's status: an object (the
/// shape `details` has), saying how large they were and where the whole of them is.
fn truncated_details(bytes: usize, limit: usize, record: &HealthRecord) -> Value {
    json!({
        "truncated": format!(
            "{bytes} bytes of details, more than the {limit} bytes kept here; read HealthRecord {}/{}",
            record.metadata.namespace.clone().unwrap_or_default(),
            record.metadata.name.clone().unwrap_or_default(),
        )
    })
}

/// `status.healthStatus` for `records` (already filtered to one request): the worst state
/// and one entry per record, ordered by namespace and name so the same records always give
/// the same status. Each entry's `details` are copied up to [`MAX_DETAILS_BYTES`], and
/// all of them up to [`MAX_TOTAL_DETAILS_BYTES`]; beyond that a marker stands in. At most
/// [`MAX_LISTED_RECORDS`] entries are listed, the worst kept. A stale record's entry is
/// `unknown`, with `reason` [`names::STALE_REASON`] and a `message`; its `lastRun` stays.
pub fn health_status(records: &[&HealthRecord], stale: &StaleRecords) -> Value {
    let mut sorted: Vec<&&HealthRecord> = records.iter().collect();
    let omitted = sorted.len().saturating_sub(MAX_LISTED_RECORDS);
    if omitted > 0 {
        sorted.sort_by_key(|r| {
            (
                effective_state(r, stale).rank(),
                r.metadata.namespace.clone(),
                r.metadata.name.clone(),
            )
        });
        sorted.truncate(MAX_LISTED_RECORDS);
    }
    sorted.sort_by_key(|r| (r.metadata.namespace.clone(), r.metadata.name.clone()));
    let mut budget = MAX_TOTAL_DETAILS_BYTES;
    let entries: Vec<Value> = sorted
        .iter()
        .map(|r| {
            let mut e = json!({
                "state": state_name(effective_state(r, stale)),
                "source": {
                    "name": r.metadata.name.clone().unwrap_or_default(),
                    "namespace": r.metadata.namespace.clone().unwrap_or_default(),
                },
            });
            if let Some(why) = stale.get(&key_of(r)) {
                e["reason"] = json!(names::STALE_REASON);
                e["message"] = json!(why);
            }
            if let Some(t) = r.spec.data.last_run {
                e["lastRun"] = json!(t);
            }
            if let Some(d) = &r.spec.data.details {
                let bytes = serde_json::to_vec(d).map_or(usize::MAX, |b| b.len());
                let limit = MAX_DETAILS_BYTES.min(budget);
                e["details"] = if bytes <= limit {
                    budget -= bytes;
                    d.clone()
                } else {
                    truncated_details(bytes, limit, r)
                };
            }
            e
        })
        .collect();
    let mut out = json!({
        "state": state_name(worst(records.iter().map(|r| effective_state(r, stale)))),
        "healthRecords": entries,
    });
    if omitted > 0 {
        out["omittedRecords"] = json!(omitted);
    }
    out
}

/// The record that decides the overall state (the first worst one), as `namespace/name`.
pub fn deciding_source(records: &[&HealthRecord], stale: &StaleRecords) -> String {
    deciding(records, stale)
        .map(|r| {
            let (ns, name) = key_of(r);
            format!("{ns}/{name}")
        })
        .unwrap_or_default()
}

/// Why the overall state is what it is when a stale record decides it: the record and
/// the freshness message.
pub fn stale_reason(records: &[&HealthRecord], stale: &StaleRecords) -> Option<String> {
    let r = deciding(records, stale)?;
    let (ns, name) = key_of(r);
    let why = stale.get(&(ns.clone(), name.clone()))?;
    let from = r
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(names::SOURCE_LABEL))
        .map(|s| format!(" from HealthSource {s}"))
        .unwrap_or_default();
    Some(format!("HealthRecord {ns}/{name}{from} is stale: {why}"))
}

fn deciding<'a>(records: &[&'a HealthRecord], stale: &StaleRecords) -> Option<&'a HealthRecord> {
    let mut sorted: Vec<&&HealthRecord> = records.iter().collect();
    sorted.sort_by_key(|r| {
        (
            effective_state(r, stale).rank(),
            r.metadata.namespace.clone(),
            r.metadata.name.clone(),
        )
    });
    sorted.first().map(|r| **r)
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
        let s = health_status(&[&a, &b], &StaleRecords::new());
        assert_eq!(s["state"], "degraded");
        assert_eq!(s["healthRecords"][0]["source"]["name"], "a");
        assert_eq!(s["healthRecords"][1]["lastRun"], 2);
        assert_eq!(
            deciding_source(&[&a, &b], &StaleRecords::new()),
            "default/a"
        );
    }

    #[test]
    fn details_copied_into_status_are_bounded_and_states_kept() {
        let with_details = |name: &str, state, len: usize| {
            let mut r = rec(name, state, 1);
            r.spec.data.details = Some(json!({"log": "x".repeat(len)}));
            r
        };
        use HealthState::*;
        // Two large ones, then small ones until the total budget is spent.
        let mut recs = vec![
            with_details("a-big", Healthy, 2 * 1024 * 1024),
            with_details("b-big", Unhealthy, MAX_DETAILS_BYTES),
        ];
        for i in 0..20 {
            recs.push(with_details(&format!("c-{i:02}"), Healthy, 10_000));
        }
        let refs: Vec<&HealthRecord> = recs.iter().collect();
        let s = health_status(&refs, &StaleRecords::new());
        assert_eq!(s["state"], "unhealthy");
        let entries = s["healthRecords"].as_array().unwrap();
        assert_eq!(entries.len(), 22);
        assert!(
            entries[0]["details"]["truncated"]
                .as_str()
                .unwrap()
                .contains("HealthRecord default/a-big"),
            "{}",
            entries[0]["details"]
        );
        assert_eq!(entries[1]["state"], "unhealthy");
        assert!(
            entries[1]["details"]["truncated"].is_string(),
            "just over the bound"
        );
        assert_eq!(entries[2]["details"]["log"].as_str().unwrap().len(), 10_000);
        let kept = entries
            .iter()
            .filter(|e| e["details"]["log"].is_string())
            .count();
        assert!(
            (10..20).contains(&kept),
            "the total budget cut some: {kept}"
        );
        assert!(serde_json::to_vec(&s).unwrap().len() < MAX_TOTAL_DETAILS_BYTES + 16 * 1024);
    }

    #[test]
    fn many_records_list_the_worst_and_count_the_rest() {
        let mut recs: Vec<HealthRecord> = (0..MAX_LISTED_RECORDS + 10)
            .map(|i| rec(&format!("r-{i:04}"), HealthState::Healthy, 1))
            .collect();
        recs.push(rec("z-last", HealthState::Unhealthy, 1));
        let refs: Vec<&HealthRecord> = recs.iter().collect();
        let s = health_status(&refs, &StaleRecords::new());
        assert_eq!(s["state"], "unhealthy");
        assert_eq!(s["omittedRecords"], 11);
        let entries = s["healthRecords"].as_array().unwrap();
        assert_eq!(entries.len(), MAX_LISTED_RECORDS);
        assert_eq!(
            entries.last().unwrap()["source"]["name"],
            "z-last",
            "the worst is kept"
        );
        assert!(
            health_status(&refs[..3], &StaleRecords::new())
                .get("omittedRecords")
                .is_none()
        );
    }

    #[test]
    fn a_stale_record_counts_as_unknown_and_says_why() {
        use HealthState::*;
        let (a, b) = (rec("a", Healthy, 1), rec("b", Healthy, 2));
        let stale = StaleRecords::from([(
            ("default".to_string(), "b".to_string()),
            "last heard from at T".to_string(),
        )]);
        let s = health_status(&[&a, &b], &stale);
        assert_eq!(s["state"], "unknown");
        assert_eq!(s["healthRecords"][1]["state"], "unknown");
        assert_eq!(s["healthRecords"][1]["reason"], names::STALE_REASON);
        assert_eq!(s["healthRecords"][1]["lastRun"], 2, "the last run is kept");
        assert!(s["healthRecords"][0].get("reason").is_none());
        assert_eq!(deciding_source(&[&a, &b], &stale), "default/b");
        assert_eq!(
            stale_reason(&[&a, &b], &stale).as_deref(),
            Some("HealthRecord default/b is stale: last heard from at T")
        );
        assert_eq!(stale_reason(&[&a, &b], &StaleRecords::new()), None);
    }
}
