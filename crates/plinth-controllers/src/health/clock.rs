//! The time source of the health controllers, injectable so tests can script a history.

use std::sync::Mutex;

use jiff::{SignedDuration, Timestamp};

/// Where the health controllers get "now".
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that moves only when told to (tests).
#[derive(Debug)]
pub struct ManualClock(Mutex<Timestamp>);

impl ManualClock {
    /// A clock standing at `at`.
    pub fn new(at: Timestamp) -> ManualClock {
        ManualClock(Mutex::new(at))
    }

    /// Moves the clock forward by `secs` seconds.
    pub fn advance(&self, secs: i64) {
        let mut t = self.0.lock().expect("clock");
        *t = t
            .checked_add(SignedDuration::from_secs(secs))
            .expect("time in range");
    }

    /// Sets the clock.
    pub fn set(&self, at: Timestamp) {
        *self.0.lock().expect("clock") = at;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().expect("clock")
    }
}

/// RFC 3339 with second precision, as Kubernetes writes times.
pub fn rfc3339(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}
