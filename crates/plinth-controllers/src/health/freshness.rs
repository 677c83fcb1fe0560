//! Freshness of HealthRecords: when a record is overdue, from the schedule and heartbeat
//! its writer stamped on it.
//!
//! Plinth's health writer annotates each record with the HealthDefinition's schedule
//! (`plinth.dev/health-schedule`) and its own heartbeat (`plinth.dev/health-refresh-seconds`:
//! an unchanged state is written again at least that often). From `data.lastRun` the
//! platform then knows when each next write is due: the first run of the schedule at
//! least one heartbeat after the previous write. A record whose `missed` next writes are
//! all overdue, by more than the time the record takes to reach the platform (`grace`:
//! its HealthSource's poll interval, none for a stream, plus [`SLACK`]), is stale, and its request's health
//! becomes `unknown` until a fresh one arrives.
//!
//! Records without the annotations (written by hand, by Kratix's own agent) or with a
//! heartbeat of zero (a writer that writes only changes) are never judged stale: nothing
//! says when their next write is due.
//!
//! ```
//! use std::time::Duration;
//! use plinth_controllers::health::freshness::{Freshness, Verdict};
//!
//! let every_minute = Freshness { missed: 3, grace: Duration::from_secs(30) };
//! let last_run = "2026-01-01T00:00:05Z".parse().unwrap();
//! // Runs due at 00:01, 00:02 and 00:03; stale once 00:03:30 has passed.
//! let judged = |now: &str| every_minute.judge("* * * * *", 1, last_run, now.parse().unwrap());
//! assert!(matches!(judged("2026-01-01T00:03:29Z"), Verdict::Fresh { .. }));
//! assert!(matches!(judged("2026-01-01T00:03:31Z"), Verdict::Stale { .. }));
//! ```

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use plinth_api::HealthRecord;
use plinth_api::constants::health as names;
use plinth_api::schedule::Schedule;

/// Time a check's record may take beyond its scheduled minute before it counts as
/// missed: the Job starting, the check running, the writer's batch and the store write.
pub const SLACK: Duration = Duration::from_secs(30);

/// Most missed runs the platform waits for (a bound on the work of one judgement).
pub const MAX_MISSED: u32 = 100;

/// How overdue a record may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Freshness {
    /// Writes that must be overdue before the record is stale (0: never stale).
    pub missed: u32,
    /// Time a write may take to reach the platform after its run.
    pub grace: Duration,
}

/// What [`Freshness::judge`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing says when the next write is due.
    Unjudged,
    /// Fresh until `stale_at`.
    Fresh {
        /// When the record becomes stale if no newer one arrives.
        stale_at: Timestamp,
    },
    /// Overdue: the message says since when and why.
    Stale {
        /// Fit for a condition or an Event: the runs missed and when the record was last
        /// heard from.
        message: String,
    },
}

impl Freshness {
    /// Judges a record last run at `last_run`, written on `schedule` by a writer with a
    /// heartbeat of `refresh_seconds`, at `now`.
    pub fn judge(
        &self,
        schedule: &str,
        refresh_seconds: u64,
        last_run: Timestamp,
        now: Timestamp,
    ) -> Verdict {
        if self.missed == 0 || refresh_seconds == 0 {
            return Verdict::Unjudged;
        }
        let Ok(parsed) = Schedule::parse(schedule, None) else {
            return Verdict::Unjudged;
        };
        let refresh = SignedDuration::from_secs(refresh_seconds.min(i64::MAX as u64) as i64);
        let mut due = last_run;
        for _ in 0..self.missed.min(MAX_MISSED) {
            // The first run at or after one heartbeat past the previous write.
            let earliest = add(due, refresh - SignedDuration::from_secs(1));
            match parsed.next_after(earliest) {
                Some(next) => due = next,
                None => return Verdict::Unjudged,
            }
        }
        let stale_at = add(
            due,
            SignedDuration::try_from(self.grace).unwrap_or(SignedDuration::MAX),
        );
        if now <= stale_at {
            return Verdict::Fresh { stale_at };
        }
        Verdict::Stale {
            message: format!(
                "last heard from at {} (data.lastRun); {} scheduled writes ({schedule:?}, heartbeat {refresh_seconds}s) are overdue",
                super::clock::rfc3339(last_run),
                self.missed.min(MAX_MISSED),
            ),
        }
    }

    /// Judges `record` from its annotations and `data.lastRun`.
    pub fn judge_record(&self, record: &HealthRecord, now: Timestamp) -> Verdict {
        let annotations = record.metadata.annotations.as_ref();
        let get = |k: &str| annotations.and_then(|a| a.get(k));
        let (Some(schedule), Some(refresh), Some(last_run)) = (
            get(names::SCHEDULE_ANNOTATION),
            get(names::REFRESH_ANNOTATION).and_then(|s| s.parse::<u64>().ok()),
            record
                .spec
                .data
                .last_run
                .and_then(|s| Timestamp::from_second(s).ok()),
        ) else {
            return Verdict::Unjudged;
        };
        self.judge(schedule, refresh, last_run, now)
    }
}

/// `t + d`, the latest representable time when that is beyond it.
fn add(t: Timestamp, d: SignedDuration) -> Timestamp {
    t.checked_add(d).unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    const THREE: Freshness = Freshness {
        missed: 3,
        grace: Duration::from_secs(60),
    };

    #[test]
    fn a_minutely_check_goes_stale_after_three_missed_runs_and_the_grace() {
        let last = t("2026-01-01T00:00:04Z");
        let j = |now| THREE.judge("* * * * *", 1, last, t(now));
        assert_eq!(
            j("2026-01-01T00:02:00Z"),
            Verdict::Fresh {
                stale_at: t("2026-01-01T00:04:00Z")
            }
        );
        let Verdict::Stale { message } = j("2026-01-01T00:04:01Z") else {
            panic!("stale")
        };
        assert!(message.contains("2026-01-01T00:00:04Z"), "{message}");
        assert!(message.contains("3 scheduled writes"), "{message}");
    }

    #[test]
    fn a_daily_check_is_not_stale_after_minutes() {
        let last = t("2026-01-01T00:00:10Z");
        let j = |now| THREE.judge("@daily", 1, last, t(now));
        assert!(matches!(j("2026-01-01T00:10:00Z"), Verdict::Fresh { .. }));
        assert!(matches!(j("2026-01-03T23:00:00Z"), Verdict::Fresh { .. }));
        assert!(matches!(j("2026-01-04T00:01:01Z"), Verdict::Stale { .. }));
    }

    #[test]
    fn a_heartbeat_longer_than_the_period_spaces_the_expected_writes() {
        // A Git writer refreshing hourly: a minutely check is due once an hour.
        let last = t("2026-01-01T00:00:05Z");
        let j = |now| THREE.judge("* * * * *", 3600, last, t(now));
        assert_eq!(
            j("2026-01-01T01:00:00Z"),
            Verdict::Fresh {
                stale_at: t("2026-01-01T03:02:00Z")
            }
        );
    }

    #[test]
    fn no_expectation_means_never_stale() {
        let last = t("2026-01-01T00:00:00Z");
        let far = t("2027-01-01T00:00:00Z");
        assert_eq!(THREE.judge("* * * * *", 0, last, far), Verdict::Unjudged);
        assert_eq!(THREE.judge("59 23 31 2 *", 1, last, far), Verdict::Unjudged);
        assert_eq!(
            THREE.judge("not a schedule", 1, last, far),
            Verdict::Unjudged
        );
        let off = Freshness { missed: 0, ..THREE };
        assert_eq!(off.judge("* * * * *", 1, last, far), Verdict::Unjudged);
    }
}
