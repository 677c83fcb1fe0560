//! Log output of the binary: `tracing` events on standard error, as text or as JSON
//! lines, filtered by `--log` / `PLINTH_LOG` / `RUST_LOG`.
//!
//! Controllers log "reconciliation started" and "reconciliation finished" (with
//! `duration`) at debug level with Kratix's keys (`controller`, `name`, `namespace`,
//! `promise`, `resourceRequest`); in JSON those keys are top-level fields of each line.

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (coloured on a terminal).
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `message`, the event's
    /// fields, and the fields of the spans it happened in.
    Json,
}

/// Installs the process's subscriber. A filter that does not parse falls back to `info`.
pub fn init(filter: &str, format: LogFormat) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .init(),
    }
}
