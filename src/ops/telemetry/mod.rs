//! Log setup: tracing to stderr, pretty for people or one JSON object per line
//! (`json`).
//!
//! Secrets never reach a log line because they never reach a field: the API key
//! and admin token are `Secret`s whose `Debug` is a placeholder, request headers
//! are not logged, and upstream text is scrubbed of the key before it is kept.

mod in_span;
mod json;

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

pub use in_span::InSpan;
pub use json::NULL;

/// How log lines are written (`LADLE_LOG_FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// For people at a terminal.
    Pretty,
    /// One JSON object per line, for machines.
    Json,
}

/// Installs the global subscriber; `RUST_LOG` refines the default `info` level.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Pretty => builder.try_init(),
        LogFormat::Json => builder
            .event_format(json::JsonLines)
            .fmt_fields(json::SpanFields)
            .try_init(),
    };
    // A subscriber installed earlier (by a test harness, say) keeps its place.
    drop(result);
}
