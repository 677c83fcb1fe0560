//! Go duration strings (`time.ParseDuration`), as Kratix's YAML carries them:
//! `reconciliationInterval`, `retryAfter`, the `kratix` ConfigMap's intervals.

use std::time::Duration;

/// Parses a Go `time.ParseDuration` string: a sequence of decimal numbers with units
/// `ns`, `us`/`µs`, `ms`, `s`, `m`, `h` (e.g. `1h30m`, `1.5s`, `300ms`). Negative durations
/// are rejected (a retry cannot be in the past).
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let orig = s;
    let mut s = s.strip_prefix('+').unwrap_or(s);
    if s.starts_with('-') {
        return Err(format!("negative duration {orig:?}"));
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err("empty duration".into());
    }
    let mut total = 0f64;
    while !s.is_empty() {
        let num_end = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        if num_end == 0 {
            return Err(format!("invalid duration {orig:?}"));
        }
        let value: f64 = s[..num_end]
            .parse()
            .map_err(|_| format!("invalid duration {orig:?}"))?;
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
            "" => return Err(format!("missing unit in duration {orig:?}")),
            other => return Err(format!("unknown unit {other:?} in duration {orig:?}")),
        };
        total += value * secs;
    }
    Duration::try_from_secs_f64(total).map_err(|e| format!("invalid duration {orig:?}: {e}"))
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
