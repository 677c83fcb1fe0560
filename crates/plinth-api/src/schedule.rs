//! Cron schedules as Kubernetes reads a CronJob's `spec.schedule` (and Kratix a
//! HealthDefinition's, which becomes one): five fields or a macro, in a time zone.
//!
//! ```
//! use plinth_api::schedule::Schedule;
//!
//! let every_five = Schedule::parse("*/5 * * * *", None).unwrap();
//! let t = "2026-01-01T00:02:00Z".parse().unwrap();
//! assert_eq!(every_five.next_after(t).unwrap().to_string(), "2026-01-01T00:05:00Z");
//! assert!(Schedule::parse("* * *", None).is_err());
//! ```

use jiff::Timestamp;
use jiff::tz::TimeZone;

/// Why a schedule or time zone does not parse. Messages name the field (`spec.schedule`,
/// `spec.timeZone`) and quote its value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The schedule is neither five fields nor a macro.
    #[error(
        "spec.schedule {schedule:?}: expected 5 fields (minute hour day-of-month month day-of-week) or a macro such as @hourly"
    )]
    FieldCount {
        /// The schedule as written.
        schedule: String,
    },
    /// The cron parser refused the schedule.
    #[error("spec.schedule {schedule:?}: {cause}")]
    Invalid {
        /// The schedule as written.
        schedule: String,
        /// The parser's message.
        cause: String,
    },
    /// The time zone is not in the IANA database.
    #[error("spec.timeZone {time_zone:?}: unknown time zone")]
    UnknownTimeZone {
        /// The time zone as written.
        time_zone: String,
    },
}

/// A parsed `schedule` with its time zone.
#[derive(Debug)]
pub struct Schedule {
    cron: croner::Cron,
    tz: TimeZone,
}

impl Schedule {
    /// Parses `schedule` (five fields or a macro: `@yearly`, `@annually`, `@monthly`,
    /// `@weekly`, `@daily`, `@midnight`, `@hourly`) in `time_zone` (IANA; UTC when `None`
    /// or empty).
    ///
    /// # Errors
    /// A [`ScheduleError`] naming the field and the cause (`spec.schedule "…": …`,
    /// `spec.timeZone "…": unknown time zone`).
    pub fn parse(schedule: &str, time_zone: Option<&str>) -> Result<Schedule, ScheduleError> {
        let expr = match schedule.trim() {
            "@midnight" => "@daily",
            s => s,
        };
        if !expr.starts_with('@') && expr.split_whitespace().count() != 5 {
            return Err(ScheduleError::FieldCount {
                schedule: schedule.to_string(),
            });
        }
        let cron = <croner::Cron as std::str::FromStr>::from_str(expr).map_err(|e| {
            ScheduleError::Invalid {
                schedule: schedule.to_string(),
                cause: e.to_string(),
            }
        })?;
        let tz = match time_zone {
            None | Some("") => TimeZone::UTC,
            Some(name) => TimeZone::get(name).map_err(|_| ScheduleError::UnknownTimeZone {
                time_zone: name.to_string(),
            })?,
        };
        Ok(Schedule { cron, tz })
    }

    /// The civil minute of `t` in the schedule's zone, as chrono's naive time.
    fn civil(&self, t: Timestamp) -> Option<chrono::NaiveDateTime> {
        let c = t.to_zoned(self.tz.clone()).datetime();
        chrono::NaiveDate::from_ymd_opt(c.year().into(), c.month() as u32, c.day() as u32)?
            .and_hms_opt(c.hour() as u32, c.minute() as u32, 0)
    }

    /// Whether the schedule fires at the minute starting at `t`.
    pub fn fires_at(&self, t: Timestamp) -> bool {
        let Some(naive) = self.civil(t) else {
            return false;
        };
        let at = chrono::TimeZone::from_utc_datetime(&chrono::Utc, &naive);
        self.cron.is_time_matching(&at).unwrap_or(false)
    }

    /// The latest scheduled time `t` with `after < t <= now` (minute resolution), looking
    /// back at most `max_lookback_minutes`.
    pub fn latest_between(
        &self,
        after: Timestamp,
        now: Timestamp,
        max_lookback_minutes: i64,
    ) -> Option<Timestamp> {
        let now_min = now.as_second().div_euclid(60);
        let after_min = after.as_second().div_euclid(60);
        let floor = after_min.max(now_min - max_lookback_minutes);
        (floor + 1..=now_min)
            .rev()
            .map(|m| Timestamp::from_second(m * 60).expect("in range"))
            .find(|t| self.fires_at(*t))
    }

    /// The first scheduled time strictly after `t`; `None` when the schedule never fires
    /// again (`59 23 31 2 *`: the 31st of February).
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        let naive = self.civil(t)?;
        let start = chrono::TimeZone::from_utc_datetime(&chrono::Utc, &naive);
        let next = self.cron.find_next_occurrence(&start, false).ok()?;
        let n = next.naive_utc();
        use chrono::{Datelike as _, Timelike as _};
        let civil = jiff::civil::date(n.year() as i16, n.month() as i8, n.day() as i8).at(
            n.hour() as i8,
            n.minute() as i8,
            0,
            0,
        );
        let at = civil.to_zoned(self.tz.clone()).ok()?.timestamp();
        // A zone's clock going back can map the civil minute before `t`: step past it.
        if at <= t {
            return self.next_after(Timestamp::from_second(t.as_second() + 60).ok()?);
        }
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn next_after_steps_over_the_schedule() {
        let s = Schedule::parse("* * * * *", None).unwrap();
        assert_eq!(
            s.next_after(ts("2026-01-01T00:00:00Z")),
            Some(ts("2026-01-01T00:01:00Z"))
        );
        assert_eq!(
            s.next_after(ts("2026-01-01T00:00:30Z")),
            Some(ts("2026-01-01T00:01:00Z"))
        );
        let daily = Schedule::parse("@daily", None).unwrap();
        assert_eq!(
            daily.next_after(ts("2026-01-01T00:00:00Z")),
            Some(ts("2026-01-02T00:00:00Z"))
        );
    }

    #[test]
    fn next_after_honours_the_time_zone() {
        let s = Schedule::parse("0 9 * * *", Some("Europe/London")).unwrap();
        // Summer time: 09:00 in London is 08:00 UTC.
        assert_eq!(
            s.next_after(ts("2026-07-01T00:00:00Z")),
            Some(ts("2026-07-01T08:00:00Z"))
        );
    }

    #[test]
    fn a_schedule_that_never_fires_has_no_next_time() {
        let s = Schedule::parse("59 23 31 2 *", None).unwrap();
        assert_eq!(s.next_after(ts("2026-01-01T00:00:00Z")), None);
    }

    #[test]
    fn bad_schedules_name_the_field() {
        let e = Schedule::parse("* * *", None).unwrap_err().to_string();
        assert!(e.starts_with("spec.schedule \"* * *\""), "{e}");
        let e = Schedule::parse("* * * * *", Some("Mars/Olympus"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("spec.timeZone"), "{e}");
    }
}
