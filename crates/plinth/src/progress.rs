//! Progress of long CLI work (quickstart, waits for objects to settle): a line with the
//! current step and the elapsed time that updates in place on a terminal (indicatif),
//! and plain `[ 12.3s] step` lines when standard output is not a terminal (CI logs,
//! pipes), so nothing but finished lines ever reaches a file.
//!
//! Use: `let p = Progress::stdout_since(Instant::now());` then `p.step("applying the Promise")` for each
//! step, `p.clear()` before printing other output, `p.finish()` at the end.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Progress of one command: either a live line on a terminal or plain lines.
pub struct Progress {
    started: Instant,
    mode: Mode,
}

enum Mode {
    /// A spinner with the current step; finished steps are printed above it.
    Live(Mutex<Option<ProgressBar>>),
    /// One line per step, written to the writer.
    Plain(Mutex<Box<dyn Write + Send>>),
}

impl Progress {
    /// On standard output: live when it is a terminal, plain lines otherwise; the clock
    /// started at `started` (`Instant::now()` for a command that starts here).
    pub fn stdout_since(started: Instant) -> Progress {
        if std::io::stdout().is_terminal() {
            Progress {
                started,
                mode: Mode::Live(Mutex::new(None)),
            }
        } else {
            Progress::plain(started, Box::new(std::io::stdout()))
        }
    }

    /// Plain lines into `out` (what a non-terminal gets), the clock started at `started`.
    pub fn plain(started: Instant, out: Box<dyn Write + Send>) -> Progress {
        Progress {
            started,
            mode: Mode::Plain(Mutex::new(out)),
        }
    }

    /// Time since the clock started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The line printed for a step begun `at` after the start: `[  1.2s] what`.
    pub fn line(at: Duration, what: &str) -> String {
        format!("[{:>5.1}s] {what}", at.as_secs_f64())
    }

    /// Starts step `what`: a plain line, or on a terminal the step's line above a
    /// spinner that shows `what` and the time it has taken so far.
    pub fn step(&self, what: &str) {
        let line = Progress::line(self.elapsed(), what);
        match &self.mode {
            Mode::Plain(out) => {
                let mut out = out.lock().expect("progress lock");
                // A closed pipe is not worth failing the command for.
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            }
            Mode::Live(bar) => {
                let mut bar = bar.lock().expect("progress lock");
                let b = bar.get_or_insert_with(spinner);
                b.println(line);
                b.set_message(what.to_string());
                b.reset_elapsed();
            }
        }
    }

    /// Removes the live line (a no-op for plain lines) so other output can be printed;
    /// the next [`Progress::step`] shows it again.
    pub fn clear(&self) {
        if let Mode::Live(bar) = &self.mode
            && let Some(b) = bar.lock().expect("progress lock").take()
        {
            b.finish_and_clear();
        }
    }

    /// Ends the progress display.
    pub fn finish(&self) {
        self.clear();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}

fn spinner() -> ProgressBar {
    let b = ProgressBar::with_draw_target(None, ProgressDrawTarget::stdout());
    b.set_style(
        ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .expect("valid progress template"),
    );
    b.enable_steady_tick(Duration::from_millis(120));
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A writer the test can read back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn plain_lines_without_a_terminal() {
        let out = Shared::default();
        let started = Instant::now() - Duration::from_millis(1500);
        let p = Progress::plain(started, Box::new(out.clone()));
        p.step("starting the platform");
        p.clear();
        p.step("applying Promise webapp");
        p.finish();
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text:?}");
        for (line, what) in lines
            .iter()
            .zip(["starting the platform", "applying Promise webapp"])
        {
            let (time, rest) = line.split_once("] ").expect("[time] step");
            assert_eq!(rest, what);
            let secs: f64 = time
                .trim_start_matches('[')
                .trim()
                .trim_end_matches('s')
                .parse()
                .expect("seconds");
            assert!(secs >= 1.5, "{line}");
        }
        // No terminal control sequences (spinner redraws) in plain output.
        assert!(!text.contains('\u{1b}') && !text.contains('\r'), "{text:?}");
    }

    #[test]
    fn line_format() {
        assert_eq!(
            Progress::line(Duration::from_millis(12340), "x"),
            "[ 12.3s] x"
        );
    }
}
