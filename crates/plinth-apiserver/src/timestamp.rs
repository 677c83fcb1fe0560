//! The time the server stamps on what it writes (`creationTimestamp`, managed fields,
//! conditions), as Kubernetes serialises a `metav1.Time`.

/// RFC 3339 timestamp with second precision (metav1.Time).
pub(crate) fn now() -> String {
    // Truncated, as Kubernetes serialises a metav1.Time: rounding could date an object
    // up to half a second after what its controllers write about it (a Job created
    // "after" its completionTime).
    let now = jiff::Timestamp::now();
    let round = jiff::TimestampRound::new()
        .smallest(jiff::Unit::Second)
        .mode(jiff::RoundMode::Trunc);
    now.round(round).unwrap_or(now).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_whole_seconds_never_in_the_future() {
        for _ in 0..50 {
            let stamp = now();
            let after = jiff::Timestamp::now();
            let t: jiff::Timestamp = stamp.parse().expect("RFC 3339");
            assert!(t <= after, "{stamp} is after {after}");
            assert_eq!(t.subsec_nanosecond(), 0, "{stamp}");
            std::thread::sleep(std::time::Duration::from_millis(7));
        }
    }
}
