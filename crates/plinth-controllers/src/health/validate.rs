//! Checking one object read from a health store before it becomes a HealthRecord on the
//! platform. Every failure names the cause; the HealthSource skips the object, events and
//! counts it, and carries on with the others.

use plinth_api::HealthRecord;
use plinth_api::constants::health as names;
use serde_json::Value;

use super::aggregate::parse_state;

/// Largest object a HealthSource reads into a HealthRecord, in bytes. Below the 1.5 MiB
/// etcd keeps per object on a real cluster and the embedded server's 3 MiB body limit, so
/// a record the source accepts can always be written; a larger one is rejected alone.
pub const MAX_RECORD_BYTES: usize = 1024 * 1024;

/// How far ahead of the platform's clock a record's `data.lastRun` may be (clocks of
/// Destinations drift). A record further ahead would be newer than every record after it
/// until its time came — a writer in milliseconds, or with a wrong clock, would freeze the
/// request's health for years — so it is rejected.
pub const MAX_AHEAD: std::time::Duration = std::time::Duration::from_secs(3600);

/// Rejects a record whose `data.lastRun` is before 1970 or more than [`MAX_AHEAD`] after
/// `now`.
///
/// # Errors
/// [`Rejection::Invalid`] naming the value, its time and the platform's.
pub fn check_last_run(rec: &HealthRecord, now: jiff::Timestamp) -> Result<(), Rejection> {
    let Some(last_run) = rec.spec.data.last_run else {
        return Ok(());
    };
    if last_run < 0 {
        return Err(Rejection::Invalid(format!(
            "data.lastRun {last_run} is before 1970 (Unix seconds are expected)"
        )));
    }
    let ahead = last_run.saturating_sub(now.as_second());
    if ahead > MAX_AHEAD.as_secs() as i64 {
        let when = jiff::Timestamp::from_second(last_run)
            .map(|t| t.to_string())
            .unwrap_or_else(|_| "beyond the year 9999".into());
        return Err(Rejection::Invalid(format!(
            "data.lastRun {last_run} ({when}) is more than {}h ahead of the platform's clock ({}): the writer's clock is wrong, or lastRun is not in Unix seconds",
            MAX_AHEAD.as_secs() / 3600,
            super::clock::rfc3339(now)
        )));
    }
    Ok(())
}

/// Why an object was skipped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// Not YAML/JSON, not a HealthRecord document, too large, or refused by the API.
    Invalid(String),
    /// The Promise or the request it names does not exist (yet): tried again every poll.
    Dangling(String),
    /// Older than the record already applied (out of order, or overwritten).
    Stale(String),
    /// The request's records come from another HealthSource.
    Claimed(String),
    /// The HealthRecord on the platform is managed by something else (a GitOps sync).
    Conflict(String),
    /// The request it references was deleted (or is being deleted) after its record was
    /// applied: not an error, so neither evented nor listed. Checked again every poll,
    /// until the Destination removes the object or the request is back.
    Orphaned(String),
}

impl Rejection {
    /// The human-readable reason.
    pub fn reason(&self) -> &str {
        match self {
            Rejection::Invalid(m)
            | Rejection::Dangling(m)
            | Rejection::Stale(m)
            | Rejection::Claimed(m)
            | Rejection::Conflict(m)
            | Rejection::Orphaned(m) => m,
        }
    }

    /// Whether the same bytes may be accepted later without a change in the store (the
    /// request appears, the other manager or source lets go).
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            Rejection::Dangling(_)
                | Rejection::Conflict(_)
                | Rejection::Claimed(_)
                | Rejection::Orphaned(_)
        )
    }
}

/// Parses and checks a record document: YAML or JSON, `apiVersion`
/// `platform.kratix.io/v1alpha1`, `kind: HealthRecord`, a `metadata.name`, a
/// `data.promiseRef.name`, a `data.resourceRef.name`, and a `data.state` in the enum.
/// The namespace defaults to `resourceRef.namespace`, then `default`.
pub fn parse_record(bytes: &[u8]) -> Result<HealthRecord, Rejection> {
    if bytes.len() > MAX_RECORD_BYTES {
        return Err(Rejection::Invalid(format!(
            "{} bytes, more than the {MAX_RECORD_BYTES} bytes a HealthRecord may have (shorten data.details)",
            bytes.len()
        )));
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|e| Rejection::Invalid(format!("not UTF-8 text: {e}")))?;
    let doc: Value = serde_saphyr::from_str(text).map_err(|e| {
        Rejection::Invalid(format!("unparsable YAML: {}", first_line(&e.to_string())))
    })?;
    if !doc.is_object() {
        return Err(Rejection::Invalid("not a YAML mapping".into()));
    }
    let api_version = doc["apiVersion"].as_str().unwrap_or("");
    let kind = doc["kind"].as_str().unwrap_or("");
    if api_version != names::RECORD_API_VERSION || kind != names::RECORD_KIND {
        return Err(Rejection::Invalid(format!(
            "apiVersion {api_version:?} kind {kind:?} is not {} {}",
            names::RECORD_API_VERSION,
            names::RECORD_KIND
        )));
    }
    if let Some(s) = doc.pointer("/data/state") {
        let ok = s.as_str().and_then(parse_state).is_some();
        if !ok {
            return Err(Rejection::Invalid(format!(
                "data.state {s} is not one of unknown, ready, unhealthy, healthy, degraded"
            )));
        }
    }
    let need = |ptr: &str, field: &str| {
        doc.pointer(ptr)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(|_| ())
            .ok_or_else(|| Rejection::Invalid(format!("{field} is missing")))
    };
    need("/metadata/name", "metadata.name")?;
    need("/data/promiseRef/name", "data.promiseRef.name")?;
    need("/data/resourceRef/name", "data.resourceRef.name")?;
    let mut rec: HealthRecord = serde_json::from_value(doc)
        .map_err(|e| Rejection::Invalid(format!("not a HealthRecord: {e}")))?;
    if rec.metadata.namespace.as_deref().is_none_or(str::is_empty) {
        rec.metadata.namespace = Some(
            rec.spec
                .data
                .resource_ref
                .namespace
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "default".into()),
        );
    }
    Ok(rec)
}

/// A stream's tombstone (see `plinth_statestore::health::tombstone`): a HealthRecord
/// document with `metadata.name` and no `data` says the record `(namespace, name)` is gone
/// (the namespace defaults to `default`). Anything else is `None`.
pub fn parse_tombstone(bytes: &[u8]) -> Option<(String, String)> {
    if bytes.len() > MAX_RECORD_BYTES {
        return None;
    }
    let doc: Value = serde_saphyr::from_str(std::str::from_utf8(bytes).ok()?).ok()?;
    let is_record = doc["apiVersion"].as_str() == Some(names::RECORD_API_VERSION)
        && doc["kind"].as_str() == Some(names::RECORD_KIND);
    if !is_record || doc.get("data").is_some() {
        return None;
    }
    let name = doc.pointer("/metadata/name")?.as_str()?.to_string();
    let ns = doc
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .unwrap_or("default")
        .to_string();
    (!name.is_empty()).then_some((ns, name))
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "apiVersion: platform.kratix.io/v1alpha1\nkind: HealthRecord\nmetadata: {name: r1}\ndata:\n  promiseRef: {name: redis}\n  resourceRef: {name: a, namespace: team}\n  state: healthy\n  lastRun: 5\n";

    #[test]
    fn a_last_run_before_1970_or_far_ahead_is_rejected_naming_the_clock() {
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let with = |last_run: i64| {
            let text = GOOD.replace("lastRun: 5", &format!("lastRun: {last_run}"));
            check_last_run(&parse_record(text.as_bytes()).unwrap(), now)
        };
        let t = now.as_second();
        assert_eq!(with(5), Ok(()));
        assert_eq!(with(t + 3600), Ok(()), "clock drift within the hour");
        let Err(Rejection::Invalid(m)) = with(t * 1000) else {
            panic!("milliseconds accepted")
        };
        assert!(
            m.contains("more than 1h ahead of the platform's clock (2026-01-01T00:00:00Z)")
                && m.contains("not in Unix seconds"),
            "{m}"
        );
        let Err(Rejection::Invalid(m)) = with(t + 3601) else {
            panic!("ahead accepted")
        };
        assert!(m.contains("(2026-01-01T01:00:01Z)"), "{m}");
        let Err(Rejection::Invalid(m)) = with(-5) else {
            panic!("negative accepted")
        };
        assert!(m.contains("before 1970"), "{m}");
    }

    #[test]
    fn a_tombstone_is_a_record_without_data() {
        let t = plinth_statestore::health::tombstone("team", "r1");
        assert_eq!(
            parse_tombstone(t.as_bytes()),
            Some(("team".into(), "r1".into()))
        );
        assert_eq!(parse_tombstone(GOOD.as_bytes()), None);
        assert_eq!(parse_tombstone(b"kind: HealthRecord"), None);
        assert!(parse_record(t.as_bytes()).is_err());
    }

    #[test]
    fn good_record_parses_and_bad_ones_name_the_cause() {
        let r = parse_record(GOOD.as_bytes()).unwrap();
        assert_eq!(r.metadata.namespace.as_deref(), Some("team"));
        assert_eq!(r.spec.data.last_run, Some(5));
        let bad = |s: &str| parse_record(s.as_bytes()).unwrap_err().reason().to_string();
        assert!(
            bad("a: [").starts_with("unparsable YAML"),
            "{}",
            bad("a: [")
        );
        assert!(bad(&GOOD.replace("kind: HealthRecord", "kind: ConfigMap")).contains("ConfigMap"));
        assert!(bad(&GOOD.replace("state: healthy", "state: fine")).contains("\"fine\""));
        assert!(
            bad(&GOOD.replace("promiseRef: {name: redis}", "promiseRef: {}"))
                .contains("data.promiseRef.name")
        );
        assert!(
            bad(&GOOD.replace(
                "resourceRef: {name: a, namespace: team}",
                "resourceRef: {namespace: team}"
            ))
            .contains("data.resourceRef.name")
        );
        let big = GOOD.replace(
            "lastRun: 5\n",
            &format!(
                "lastRun: 5\n  details: {{log: {}}}\n",
                "x".repeat(MAX_RECORD_BYTES)
            ),
        );
        assert!(
            bad(&big).contains("more than the 1048576 bytes"),
            "{}",
            bad(&big)
        );
    }
}
