//! Logging setup.
//!
//! Logs go to stderr: human-readable by default, JSON with `log_format =
//! "json"`. The filter comes from `RUST_LOG` (default `info`). Never log a
//! token, a secret, an upstream credential or full arguments.

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber (once; later calls are no-ops).
pub fn init(format: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if format == "json" {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.try_init()
    };
}
