//! The adaptive batch window of the Git writer: when to close a batch of queued writes and
//! make one commit of it.
//!
//! A batch opens with its first write and closes when the queue has been quiet for the
//! *quiet gap*, or at the latest [`MAX_LATENCY_FACTOR`] batch windows after it opened (the
//! bounded worst-case wait of any write), or when it holds `max_batch` writes.
//!
//! The quiet gap adapts to how writes arrive: it is [`QUIET_FACTOR`] times the mean interval
//! between the writes that arrived within the last worst-case latency, never shorter than
//! the configured window and never longer than the latency bound. So a lone write waits one
//! window; a burst closes one window after its last write; and a steady trickle of
//! WorkPlacements (pipelines finishing one after another, with gaps longer than the
//! window) keeps filling the same batch until the latency bound, instead of committing
//! every write on its own. Writes arriving at least every `latency bound / 20` therefore
//! share commits twenty or more at a time, however irregularly they come.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The quiet gap that closes a batch, in mean intervals between recent writes.
pub const QUIET_FACTOR: u32 = 8;
/// A batch is closed at the latest this many batch windows after its first write.
pub const MAX_LATENCY_FACTOR: u32 = 20;

/// Arrival history and the batch-closing rule (see the module docs).
#[derive(Debug)]
pub struct Batcher {
    window: Duration,
    max_latency: Duration,
    /// Arrival times within the last `max_latency`, oldest first.
    recent: VecDeque<Instant>,
}

/// The batch being filled: when it opened and when its last write arrived.
#[derive(Debug, Clone, Copy)]
pub struct OpenBatch {
    opened: Instant,
    last: Instant,
}

impl Batcher {
    /// A batcher for the configured window (the quiet gap's lower bound); the worst-case
    /// latency is [`MAX_LATENCY_FACTOR`] windows.
    pub fn new(window: Duration) -> Batcher {
        Batcher {
            window,
            max_latency: window * MAX_LATENCY_FACTOR,
            recent: VecDeque::new(),
        }
    }

    /// The longest a write waits in a batch before the batch is closed.
    pub fn max_latency(&self) -> Duration {
        self.max_latency
    }

    fn record(&mut self, now: Instant) {
        self.recent.push_back(now);
        while let Some(&t) = self.recent.front()
            && now.duration_since(t) > self.max_latency
        {
            self.recent.pop_front();
        }
    }

    /// The current quiet gap: [`QUIET_FACTOR`] × the mean interval between recent writes,
    /// within [window, max latency].
    pub fn quiet_gap(&self) -> Duration {
        let (Some(first), Some(last)) = (self.recent.front(), self.recent.back()) else {
            return self.window;
        };
        if self.recent.len() < 2 {
            return self.window;
        }
        let mean = last.duration_since(*first) / (self.recent.len() as u32 - 1);
        (mean * QUIET_FACTOR).clamp(self.window, self.max_latency.max(self.window))
    }

    /// Opens a batch with a write that arrived at `now`.
    pub fn open(&mut self, now: Instant) -> OpenBatch {
        self.record(now);
        OpenBatch {
            opened: now,
            last: now,
        }
    }

    /// Adds a write that arrived at `now` to the open batch.
    pub fn arrived(&mut self, batch: &mut OpenBatch, now: Instant) {
        self.record(now);
        batch.last = now;
    }

    /// When the open batch closes if nothing else arrives.
    pub fn deadline(&self, batch: &OpenBatch) -> Instant {
        (batch.last + self.quiet_gap()).min(batch.opened + self.max_latency)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replays writes arriving at the given offsets through the closing rule (committing
    /// takes no time) and returns, per batch, its size and the longest wait of a write in it.
    fn simulate(
        window: Duration,
        max_batch: usize,
        arrivals: &[Duration],
    ) -> Vec<(usize, Duration)> {
        let t0 = Instant::now();
        let mut b = Batcher::new(window);
        let mut out = Vec::new();
        let mut i = 0;
        while i < arrivals.len() {
            let first = t0 + arrivals[i];
            let mut batch = b.open(first);
            let mut members = vec![first];
            i += 1;
            while i < arrivals.len() && members.len() < max_batch {
                let at = t0 + arrivals[i];
                if at > b.deadline(&batch) {
                    break;
                }
                b.arrived(&mut batch, at);
                members.push(at);
                i += 1;
            }
            let closed = if members.len() == max_batch {
                *members.last().unwrap()
            } else {
                b.deadline(&batch)
            };
            let wait = members.iter().map(|m| closed - *m).max().unwrap();
            out.push((members.len(), wait));
        }
        out
    }

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    const WINDOW: Duration = Duration::from_millis(500);

    fn check(name: &str, arrivals: &[Duration]) -> Vec<(usize, Duration)> {
        let batches = simulate(WINDOW, 500, arrivals);
        let n = arrivals.len();
        assert!(
            batches.len() <= n / 20,
            "{name}: {} commits for {n} writes (more than n/20)",
            batches.len()
        );
        for (_, wait) in &batches {
            assert!(
                *wait <= WINDOW * MAX_LATENCY_FACTOR,
                "{name}: a write waited {wait:?}"
            );
        }
        batches
    }

    #[test]
    fn a_burst_commits_one_window_after_its_last_write() {
        let arrivals: Vec<Duration> = (0..1000).map(|i| Duration::from_micros(i * 500)).collect();
        let batches = check("burst", &arrivals);
        // 500 per commit at most.
        assert_eq!(
            batches.iter().map(|b| b.0).collect::<Vec<_>>(),
            vec![500, 500]
        );
    }

    #[test]
    fn a_steady_trickle_shares_commits_up_to_the_latency_bound() {
        // One write every 450 ms: a plain debounce of 500 ms with a 5 s ceiling made one
        // commit per 11 writes; pipelines finishing one after another look like this.
        for every in [200, 450] {
            let arrivals: Vec<Duration> = (0..400).map(|i| ms(i * every)).collect();
            check(&format!("trickle every {every} ms"), &arrivals);
        }
    }

    #[test]
    fn an_irregular_trickle_with_gaps_longer_than_the_window_shares_commits() {
        // Pairs of writes 50 ms apart, pairs 650 ms apart: every gap between pairs is longer
        // than the window, which used to close a batch per pair.
        let mut t = 0;
        let arrivals: Vec<Duration> = (0..600)
            .map(|i| {
                t += if i % 2 == 0 { 650 } else { 50 };
                ms(t)
            })
            .collect();
        check("pairs", &arrivals);
    }

    #[test]
    fn a_lone_write_waits_one_window() {
        let batches = simulate(WINDOW, 500, &[ms(0)]);
        assert_eq!(batches, vec![(1, WINDOW)]);
        // And after a quiet period, a new lone write again waits one window only.
        let batches = simulate(WINDOW, 500, &[ms(0), ms(10), ms(60_000)]);
        assert_eq!(batches.len(), 2);
        assert_eq!(batches[1], (1, WINDOW));
    }

    #[test]
    fn no_write_waits_longer_than_the_latency_bound() {
        // A stream that never pauses: batches close at the bound.
        let arrivals: Vec<Duration> = (0..2000).map(|i| ms(i * 20)).collect();
        let batches = simulate(WINDOW, 10_000, &arrivals);
        assert!(batches.len() > 1);
        for (_, wait) in batches {
            assert!(wait <= WINDOW * MAX_LATENCY_FACTOR, "waited {wait:?}");
        }
    }
}
