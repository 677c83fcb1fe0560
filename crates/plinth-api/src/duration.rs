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

#[cfg(test)]
mod tests {
    use super::*;

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
