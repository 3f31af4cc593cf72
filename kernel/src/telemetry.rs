//! Logging set-up: one subscriber for the process, filtered by `RUST_LOG` (default `info`), human-readable or
//! one JSON object per line (`FRONTDESK_LOG_FORMAT=json`).

use tracing_subscriber::{EnvFilter, fmt};

use clap::ValueEnum;

pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
    // A second initialisation (tests embedding the core) keeps the first subscriber.
    let _ = result;
}

/// Logging output format.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}
