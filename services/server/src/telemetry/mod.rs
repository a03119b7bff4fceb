//! Logs, traces and OTLP metrics.
//!
//! Logs go to stderr: human-readable by default (coloured only on a
//! terminal), JSON with `log_format = "json"`. Which lines are written comes
//! from `RUST_LOG`, else `telemetry.log_filter` (default `info`). Every line
//! written inside a request carries the request span's fields, among them
//! `request.id`, `tenant.id` and `trace.id`.
//!
//! Traces and metrics can also be exported over OTLP (HTTP/protobuf). Export
//! is off by default; it is turned on by `telemetry.traces` /
//! `telemetry.metrics`, or by the standard OpenTelemetry variables, which win
//! over the file (see [`Settings::resolve`]). The `/metrics` endpoint
//! (Prometheus text) is always served; OTLP metrics carry the same
//! instruments, recorded from the request spans by a small layer.
//!
//! Everything is built by [`Telemetry::build`] without touching global state,
//! so tests can run the real subscriber against an in-memory log buffer
//! ([`LogCapture`]); [`init`] installs it process-wide for the binary. The
//! tracer and meter providers are flushed by [`TelemetryGuard::shutdown`]
//! (or on drop).
//!
//! Never log a token, a secret, an upstream credential or full arguments:
//! spans carry route templates, ids and status codes, never headers or bodies.
//!
//! | module | concern |
//! | --- | --- |
//! | `settings` | `[telemetry]` ([`TelemetryConfig`]), its validation, [`Settings`] (file + `OTEL_*`) |
//! | `logs` | where log lines go ([`LogOutput`], [`LogCapture`]) |
//! | `subscriber` | building and installing the subscriber ([`Telemetry`], [`init`]) |
//! | `context` | W3C trace context in and out ([`link_request_span`], [`inject_trace_context`]) |
//! | `otlp_metrics` | the OTLP request instruments (names, labels, buckets from [`crate::metrics`]) |
//!
//! This module depends on no other part of the server but [`crate::metrics`]
//! and [`crate::url_policy`]: the configuration embeds [`TelemetryConfig`]
//! and hands it over, never the other way round.

mod context;
mod logs;
mod otlp_metrics;
mod settings;
mod subscriber;

pub use context::{inject_context, inject_trace_context, link_request_span};
pub use logs::{CaptureWriter, LogCapture, LogOutput};
pub use otlp_metrics::REQUEST_SPAN;
pub use settings::{
    LogFormat, PROTOCOL, SAMPLERS, Settings, TelemetryConfig, process_env, validate_config,
};
pub use subscriber::{Telemetry, TelemetryGuard, init};
