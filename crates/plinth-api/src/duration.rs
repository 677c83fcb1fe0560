//! Go duration strings (`time.ParseDuration`), as Kratix's YAML carries them:
//! `reconciliationInterval`, `retryAfter`, the `kratix` ConfigMap's intervals.

use std::time::Duration;

/// Why a Go duration string does not parse. Messages quote the string as written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The duration is negative.
    #[error("negative duration {text:?}")]
    Negative {
        /// The string as written.
        text: String,
    },
    /// The string is empty.
    #[error("empty duration")]
    Empty,
    /// A number is missing or malformed.
    #[error("invalid duration {text:?}")]
    Invalid {
        /// The string as written.
        text: String,
    },
    /// A number has no unit.
    #[error("missing unit in duration {text:?}")]
    MissingUnit {
        /// The string as written.
        text: String,
    },
    /// A unit is not one of `ns`, `us`, `µs`, `ms`, `s`, `m`, `h`.
    #[error("unknown unit {unit:?} in duration {text:?}")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
        /// The string as written.
        text: String,
    },
    /// The total does not fit a duration.
    #[error("invalid duration {text:?}: {cause}")]
    OutOfRange {
        /// The string as written.
        text: String,
        /// Why the value is out of range.
        cause: String,
    },
}

/// Parses a Go `time.ParseDuration` string: a sequence of decimal numbers with units
/// `ns`, `us`/`µs`, `ms`, `s`, `m`, `h` (e.g. `1h30m`, `1.5s`, `300ms`). Negative durations
/// are rejected (a retry cannot be in the past).
///
/// # Errors
/// A [`DurationError`] quoting the string: negative, empty, a malformed number, a
/// missing or unknown unit, or a total out of range.
pub fn parse_go_duration(s: &str) -> Result<Duration, DurationError> {
    let orig = s;
    let text = || orig.to_string();
    let mut s = s.strip_prefix('+').unwrap_or(s);
    if s.starts_with('-') {
        return Err(DurationError::Negative { text: text() });
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    let mut total = 0f64;
    while !s.is_empty() {
        let num_end = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        if num_end == 0 {
            return Err(DurationError::Invalid { text: text() });
        }
        let value: f64 = s[..num_end]
            .parse()
            .map_err(|_| DurationError::Invalid { text: text() })?;
        s = &s[num_end..];
        let unit_end = s
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(s.len());
        let unit = &s[..unit_end];
        s = &s[unit_end..];
        let secs = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(DurationError::MissingUnit { text: text() }),
            other => {
                return Err(DurationError::UnknownUnit {
                    unit: other.to_string(),
                    text: text(),
                });
            }
        };
        total += value * secs;
    }
    Duration::try_from_secs_f64(total).map_err(|e| DurationError::OutOfRange {
        text: text(),
        cause: e.to_string(),
    })
}

/// Writes a duration as Go's `time.Duration.String()` does: `0s`, `300ms`, `1.5s`,
/// `1m30s`, `1h0m0s` (what Kratix's typed objects carry after a round trip).
///
/// ```
/// use std::time::Duration;
/// use plinth_api::duration::format_go_duration;
/// assert_eq!(format_go_duration(Duration::from_secs(300)), "5m0s");
/// assert_eq!(format_go_duration(Duration::from_millis(1500)), "1.5s");
/// ```
pub fn format_go_duration(d: Duration) -> String {
    const SECOND: u128 = 1_000_000_000;
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".into();
    }
    if ns < SECOND {
        let (unit, per) = match ns {
            n if n < 1_000 => ("ns", 1),
            n if n < 1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{}{unit}", decimal(ns, per));
    }
    let secs = ns / SECOND;
    let (h, m) = (secs / 3600, (secs / 60) % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if h > 0 || m > 0 {
        out.push_str(&format!("{m}m"));
    }
    out.push_str(&decimal(ns % (60 * SECOND), SECOND));
    out.push('s');
    out
}

/// `n / per` with the remainder as a decimal fraction, trailing zeros dropped.
fn decimal(n: u128, per: u128) -> String {
    let (whole, rest) = (n / per, n % per);
    if rest == 0 {
        return whole.to_string();
    }
    let digits = per.ilog10() as usize;
    let fraction = format!("{rest:0digits$}");
    format!("{whole}.{}", fraction.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected texts are Go's `time.Duration.String()` of the same durations.
    #[test]
    fn durations_print_as_go_prints_them() {
        for (d, go) in [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(7), "7ns"),
            (Duration::from_micros(1500), "1.5ms"),
            (Duration::from_nanos(2_500), "2.5µs"),
            (Duration::from_millis(300), "300ms"),
            (Duration::from_secs(1), "1s"),
            (Duration::from_millis(61_250), "1m1.25s"),
            (Duration::from_secs(300), "5m0s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_secs(36_000), "10h0m0s"),
            (Duration::from_secs(5430), "1h30m30s"),
        ] {
            assert_eq!(format_go_duration(d), go, "{d:?}");
        }
        let round = |s: &str| format_go_duration(parse_go_duration(s).unwrap());
        assert_eq!(round("90m"), "1h30m0s");
        assert_eq!(round("1.5h"), "1h30m0s");
    }

    #[test]
    fn parses_go_durations() {
        assert_eq!(
            parse_go_duration("1h30m").unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(
            parse_go_duration("500ms").unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!(parse_go_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_go_duration("10x").is_err());
        assert!(parse_go_duration("").is_err());
        assert!(parse_go_duration("-1s").is_err());
        assert!(parse_go_duration("5").is_err());
    }
}
