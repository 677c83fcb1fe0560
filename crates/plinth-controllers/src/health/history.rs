//! The platform's own record of health: every change of a request's overall health state,
//! kept in the request's `status.healthHistory` (so it lives behind the Kubernetes API in
//! embedded and cluster mode, and survives restarts), and the figures derived from it.
//!
//! Shape (Plinth's addition beside Kratix's `healthStatus`, which is unchanged):
//! ```yaml
//! healthHistory:
//!   transitions:            # oldest first
//!   - {state: unhealthy, time: "2026-01-01T00:00:00Z", source: default/check-a}
//!   firstHealthyAfterSeconds: 42     # request creation → first healthy/ready
//!   lastRecoverySeconds: 300         # last unhealthy → healthy/ready
//!   meanRecoverySeconds: 250         # over the kept transitions
//! ```
//! Bounded: transitions older than [`RETENTION_SECS`] are dropped (the last one before the
//! cutoff is kept, so the state at the start of the window is known) and at most
//! [`MAX_TRANSITIONS`] are kept. Uptime depends on "now" and is therefore computed when
//! read ([`uptime`]), never stored: a status that changed with the clock would be a write
//! per second of a settled platform.

use jiff::{SignedDuration, Timestamp};
use plinth_api::HealthState;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::aggregate::{is_up, parse_state, state_name};
use super::clock::rfc3339;

/// How long transitions are kept: 30 days, in seconds.
pub const RETENTION_SECS: i64 = 30 * 24 * 3600;
/// At most this many transitions are kept per request.
pub const MAX_TRANSITIONS: usize = 500;
/// The uptime windows reported: 1 h, 24 h, 7 d, 30 d (label, seconds).
pub const WINDOWS: [(&str, i64); 4] = [
    ("1h", 3600),
    ("24h", 86_400),
    ("7d", 7 * 86_400),
    ("30d", 30 * 86_400),
];

/// One change of the overall state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// The new overall state (`unhealthy`, `degraded`, `unknown`, `healthy`, `ready`).
    pub state: String,
    /// When it changed (RFC 3339).
    pub time: String,
    /// The HealthRecord (`namespace/name`) that decided the new state; empty when the
    /// last record went away.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
}

/// `status.healthHistory` of a request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthHistory {
    /// Changes of the overall state, oldest first.
    #[serde(default)]
    pub transitions: Vec<Transition>,
    /// Seconds from the request's creation to its first `healthy`/`ready` state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_healthy_after_seconds: Option<i64>,
    /// Seconds the last recovery (`unhealthy` → `healthy`/`ready`) took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_recovery_seconds: Option<i64>,
    /// Mean recovery time over the kept transitions, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_recovery_seconds: Option<i64>,
}

fn parse_time(s: &str) -> Option<Timestamp> {
    s.parse().ok()
}

impl HealthHistory {
    /// Reads `status.healthHistory` (empty when absent or malformed).
    pub fn from_status(status: &Value) -> HealthHistory {
        status
            .get("healthHistory")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    }

    /// The current overall state by the history.
    pub fn current(&self) -> Option<HealthState> {
        self.transitions.last().and_then(|t| parse_state(&t.state))
    }

    /// Records a change to `state` at `now` (no-op when it is already the current state),
    /// prunes, and recomputes the derived figures. `created` is the request's creation
    /// time. Returns whether anything changed.
    pub fn record(
        &mut self,
        state: HealthState,
        source: &str,
        now: Timestamp,
        created: Option<Timestamp>,
    ) -> bool {
        if self.current() == Some(state) {
            return false;
        }
        self.transitions.push(Transition {
            state: state_name(state).to_string(),
            time: rfc3339(now),
            source: source.to_string(),
        });
        self.prune(now);
        self.derive(created);
        true
    }

    fn prune(&mut self, now: Timestamp) {
        let cutoff = now - SignedDuration::from_secs(RETENTION_SECS);
        // Keep the last transition before the cutoff: it is the state at the window start.
        let before = self
            .transitions
            .iter()
            .rposition(|t| parse_time(&t.time).is_some_and(|x| x < cutoff));
        if let Some(i) = before {
            self.transitions.drain(..i);
        }
        if self.transitions.len() > MAX_TRANSITIONS {
            let extra = self.transitions.len() - MAX_TRANSITIONS;
            self.transitions.drain(..extra);
        }
    }

    fn derive(&mut self, created: Option<Timestamp>) {
        let times: Vec<(HealthState, Timestamp)> = self
            .transitions
            .iter()
            .filter_map(|t| Some((parse_state(&t.state)?, parse_time(&t.time)?)))
            .collect();
        if self.first_healthy_after_seconds.is_none()
            && let (Some(c), Some((_, t))) = (created, times.iter().find(|(s, _)| is_up(*s)))
        {
            self.first_healthy_after_seconds = Some(t.duration_since(c).as_secs().max(0));
        }
        let recoveries = recoveries(&times);
        self.last_recovery_seconds = recoveries.last().copied();
        self.mean_recovery_seconds = (!recoveries.is_empty())
            .then(|| recoveries.iter().sum::<i64>() / recoveries.len() as i64);
    }
}

/// Durations (seconds) from entering `unhealthy` to the next `healthy`/`ready`.
fn recoveries(times: &[(HealthState, Timestamp)]) -> Vec<i64> {
    let mut out = Vec::new();
    let mut down_since: Option<Timestamp> = None;
    for (s, t) in times {
        match s {
            HealthState::Unhealthy => {
                down_since.get_or_insert(*t);
            }
            s if is_up(*s) => {
                if let Some(d) = down_since.take() {
                    out.push(t.duration_since(d).as_secs());
                }
            }
            _ => {}
        }
    }
    out
}

/// Seconds up and seconds observed in the window `[now - window, now]`.
///
/// Time before the first transition is not observed (no data); `healthy` and `ready`
/// count as up, every other state (including `unknown`) as observed but not up.
pub fn up_and_observed(history: &HealthHistory, now: Timestamp, window_secs: i64) -> (i64, i64) {
    let start = now - SignedDuration::from_secs(window_secs);
    let points: Vec<(HealthState, Timestamp)> = history
        .transitions
        .iter()
        .filter_map(|t| Some((parse_state(&t.state)?, parse_time(&t.time)?)))
        .collect();
    let (mut up, mut observed) = (0i64, 0i64);
    for (i, (state, from)) in points.iter().enumerate() {
        let to = points.get(i + 1).map(|p| p.1).unwrap_or(now);
        let (a, b) = ((*from).max(start), to.min(now));
        if b <= a {
            continue;
        }
        let secs = b.duration_since(a).as_secs();
        observed += secs;
        if is_up(*state) {
            up += secs;
        }
    }
    (up, observed)
}

/// Uptime in percent over the window, `None` when nothing was observed in it.
pub fn uptime(history: &HealthHistory, now: Timestamp, window_secs: i64) -> Option<f64> {
    let (up, observed) = up_and_observed(history, now, window_secs);
    (observed > 0).then(|| 100.0 * up as f64 / observed as f64)
}

/// Uptime of several requests together (a Promise): total up over total observed.
pub fn combined_uptime<'a>(
    histories: impl IntoIterator<Item = &'a HealthHistory>,
    now: Timestamp,
    window_secs: i64,
) -> Option<f64> {
    let (mut up, mut observed) = (0, 0);
    for h in histories {
        let (u, o) = up_and_observed(h, now, window_secs);
        up += u;
        observed += o;
    }
    (observed > 0).then(|| 100.0 * up as f64 / observed as f64)
}

/// A text timeline of the last `window_secs`: `width` cells, each the worst state seen in
/// its slice (`#` healthy/ready, `~` degraded, `?` unknown, `X` unhealthy, ` ` no data).
pub fn timeline(history: &HealthHistory, now: Timestamp, window_secs: i64, width: usize) -> String {
    let points: Vec<(HealthState, Timestamp)> = history
        .transitions
        .iter()
        .filter_map(|t| Some((parse_state(&t.state)?, parse_time(&t.time)?)))
        .collect();
    let start = now - SignedDuration::from_secs(window_secs);
    let cell = window_secs as f64 / width as f64;
    (0..width)
        .map(|i| {
            let a = start + SignedDuration::from_secs_f64(cell * i as f64);
            let b = start + SignedDuration::from_secs_f64(cell * (i + 1) as f64);
            let worst = points
                .iter()
                .enumerate()
                .filter(|(j, (_, from))| {
                    let to = points.get(j + 1).map(|p| p.1).unwrap_or(now);
                    *from < b && to > a
                })
                .map(|(_, (s, _))| *s)
                .min_by_key(|s| s.rank());
            match worst {
                None => ' ',
                Some(HealthState::Healthy | HealthState::Ready) => '#',
                Some(HealthState::Degraded) => '~',
                Some(HealthState::Unknown) => '?',
                Some(HealthState::Unhealthy) => 'X',
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    #[test]
    fn scripted_sequence_gives_uptime_first_healthy_and_recovery() {
        let created = at(0);
        let mut h = HealthHistory::default();
        assert!(h.record(HealthState::Unknown, "ns/a", at(60), Some(created)));
        assert!(h.record(HealthState::Healthy, "ns/a", at(120), Some(created)));
        assert!(!h.record(HealthState::Healthy, "ns/a", at(130), Some(created)));
        assert!(h.record(HealthState::Unhealthy, "ns/b", at(1800), Some(created)));
        assert!(h.record(HealthState::Ready, "ns/a", at(2400), Some(created)));
        assert_eq!(h.transitions.len(), 4);
        assert_eq!(h.first_healthy_after_seconds, Some(120));
        assert_eq!(h.last_recovery_seconds, Some(600));
        assert_eq!(h.mean_recovery_seconds, Some(600));
        // At 3600 s: observed 60..3600 = 3540 s; down 60..120 (unknown) and 1800..2400.
        let now = at(3600);
        assert_eq!(up_and_observed(&h, now, 3600), (3540 - 60 - 600, 3540));
        let up = uptime(&h, now, 3600).unwrap();
        assert!((up - 100.0 * 2880.0 / 3540.0).abs() < 1e-9, "{up}");
        // The 1 h window starting at 1800 s sees 600 s down of 1800 s.
        let later = at(5400);
        assert_eq!(up_and_observed(&h, later, 3600), (3000, 3600));
        assert_eq!(
            combined_uptime([&h, &h], later, 3600),
            Some(100.0 * 3000.0 / 3600.0)
        );
        assert_eq!(timeline(&h, at(3600), 3600, 6), "?##X##");
        assert_eq!(uptime(&HealthHistory::default(), now, 3600), None);
    }

    #[test]
    fn history_is_bounded_and_keeps_the_state_at_the_window_start() {
        let mut h = HealthHistory::default();
        let states = [HealthState::Healthy, HealthState::Unhealthy];
        for i in 0..(MAX_TRANSITIONS as i64 + 20) {
            h.record(states[(i % 2) as usize], "", at(i * 60), None);
        }
        assert_eq!(h.transitions.len(), MAX_TRANSITIONS);
        let mut h = HealthHistory::default();
        h.record(HealthState::Unhealthy, "", at(0), None);
        h.record(HealthState::Healthy, "", at(10), None);
        h.record(HealthState::Degraded, "", at(RETENTION_SECS + 100), None);
        // The healthy transition at 10 s is older than the cutoff but kept: it says what the
        // state was when the 30-day window opened.
        assert_eq!(h.transitions.len(), 2);
        assert_eq!(h.transitions[0].state, "healthy");
    }
}
