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

use std::fmt;
use std::io::IsTerminal as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method};
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, MeterProvider as _, ObservableGauge};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator as _};
use opentelemetry::trace::{TraceContextExt as _, TraceId, TracerProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing::field::{Field, Visit};
use tracing::{Dispatch, Span, Subscriber};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use crate::config::{Config, TelemetryConfig};

/// The samplers `telemetry.sampler` / `OTEL_TRACES_SAMPLER` accept.
pub const SAMPLERS: [&str; 6] = [
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
];

/// The only OTLP protocol built into this binary.
pub const PROTOCOL: &str = "http/protobuf";

/// The name of the span the edge middleware opens for every request; the
/// OTLP metrics are recorded when it closes.
pub const REQUEST_SPAN: &str = "http.request";

/// Histogram bucket upper bounds in seconds (the same as `/metrics`).
const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 2.5, 10.0,
];

// ---------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------

/// Checks the `[telemetry]` section (called by [`Config::validate`]).
pub fn validate_config(t: &TelemetryConfig) -> anyhow::Result<()> {
    if !SAMPLERS.contains(&t.sampler.as_str()) {
        bail!(
            "telemetry.sampler: unknown sampler {:?} (known: {})",
            t.sampler,
            SAMPLERS.join(", ")
        );
    }
    if !(0.0..=1.0).contains(&t.sampler_arg) {
        bail!("telemetry.sampler_arg must be between 0.0 and 1.0");
    }
    check_protocol(&t.protocol, "telemetry.protocol")?;
    if !t.endpoint.is_empty() {
        check_endpoint(&t.endpoint, "telemetry.endpoint")?;
    }
    if t.metrics_interval_secs == 0 {
        bail!("telemetry.metrics_interval_secs must be greater than 0");
    }
    if t.export_timeout_secs == 0 {
        bail!("telemetry.export_timeout_secs must be greater than 0");
    }
    EnvFilter::try_new(&t.log_filter).map_err(|e| anyhow::anyhow!("telemetry.log_filter: {e}"))?;
    EnvFilter::try_new(&t.trace_filter)
        .map_err(|e| anyhow::anyhow!("telemetry.trace_filter: {e}"))?;
    Ok(())
}

fn check_protocol(p: &str, what: &str) -> anyhow::Result<()> {
    match p {
        PROTOCOL => Ok(()),
        "grpc" => bail!(
            "{what}: OTLP over gRPC is not built into signet; use \"http/protobuf\" (port 4318), for example through an OpenTelemetry collector"
        ),
        other => bail!("{what}: unsupported OTLP protocol {other:?} (use \"http/protobuf\")"),
    }
}

/// An OTLP endpoint: a parsed `http://` or `https://` URL with a host and no
/// credentials (send those in `OTEL_EXPORTER_OTLP_HEADERS`). Plain http to
/// another host is allowed: collectors usually run beside the server (a
/// sidecar, a cluster-local Service) and the export carries no secret.
fn check_endpoint(url: &str, what: &str) -> anyhow::Result<()> {
    crate::url_policy::http_url(url).map_err(|e| anyhow::anyhow!("{what}: {e}"))?;
    Ok(())
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// The effective telemetry settings: configuration plus environment.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Log line format.
    pub log_format: LogFormat,
    /// Which log lines are written (`RUST_LOG` syntax).
    pub log_filter: String,
    /// Which spans and events are exported as traces (`RUST_LOG` syntax).
    pub trace_filter: String,
    /// Full OTLP/HTTP URL for traces, when trace export is on.
    pub traces_endpoint: Option<String>,
    /// Full OTLP/HTTP URL for metrics, when metric export is on.
    pub metrics_endpoint: Option<String>,
    /// `service.name`.
    pub service_name: String,
    /// Sampler name (one of [`SAMPLERS`]).
    pub sampler: String,
    /// Sampler ratio.
    pub sampler_arg: f64,
    /// Time between metric exports.
    pub metrics_interval: Duration,
    /// Time an export may take.
    pub export_timeout: Duration,
}

/// Reads the process environment (empty values count as unset).
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

impl Settings {
    /// Combines `cfg` with the environment read through `env`. The standard
    /// variables win over the file:
    ///
    /// - `OTEL_SDK_DISABLED=true` turns all export off;
    /// - `OTEL_TRACES_EXPORTER` / `OTEL_METRICS_EXPORTER` = `otlp` or `none`
    ///   turn one signal on or off;
    /// - otherwise a signal is exported when the file enables it or when
    ///   `OTEL_EXPORTER_OTLP_ENDPOINT` (or the signal's own
    ///   `OTEL_EXPORTER_OTLP_{TRACES,METRICS}_ENDPOINT`) is set;
    /// - `OTEL_EXPORTER_OTLP_{TRACES_,METRICS_,}PROTOCOL`, `OTEL_SERVICE_NAME`,
    ///   `OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`,
    ///   `OTEL_METRIC_EXPORT_INTERVAL` (ms) and `RUST_LOG` override the
    ///   matching setting. `OTEL_EXPORTER_OTLP_HEADERS` is read by the
    ///   exporter itself.
    pub fn resolve(cfg: &Config, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<Settings> {
        let t = &cfg.telemetry;
        let get = |k: &str| {
            env(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let disabled = get("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let base_env = get("OTEL_EXPORTER_OTLP_ENDPOINT");
        if let Some(b) = &base_env {
            check_endpoint(b, "OTEL_EXPORTER_OTLP_ENDPOINT")?;
        }
        let base = base_env
            .clone()
            .or_else(|| (!t.endpoint.is_empty()).then(|| t.endpoint.clone()))
            .unwrap_or_else(|| "http://localhost:4318".into());
        let general_protocol = get("OTEL_EXPORTER_OTLP_PROTOCOL");
        let signal = |name: &str, enabled: bool, path: &str| -> anyhow::Result<Option<String>> {
            let upper = name.to_ascii_uppercase();
            let exporter_var = format!("OTEL_{upper}_EXPORTER");
            let endpoint_var = format!("OTEL_EXPORTER_OTLP_{upper}_ENDPOINT");
            let protocol_var = format!("OTEL_EXPORTER_OTLP_{upper}_PROTOCOL");
            let specific = get(&endpoint_var);
            let on = match get(&exporter_var).as_deref() {
                Some("none") => false,
                Some("otlp") => true,
                Some(other) => {
                    bail!("{exporter_var}={other:?}: only \"otlp\" and \"none\" are supported")
                }
                None => enabled || specific.is_some() || base_env.is_some(),
            };
            if disabled || !on {
                return Ok(None);
            }
            match (get(&protocol_var), &general_protocol) {
                (Some(p), _) => check_protocol(&p, &protocol_var)?,
                (None, Some(p)) => check_protocol(p, "OTEL_EXPORTER_OTLP_PROTOCOL")?,
                (None, None) => check_protocol(&t.protocol, "telemetry.protocol")?,
            }
            let url = match specific {
                Some(u) => {
                    check_endpoint(&u, &endpoint_var)?;
                    u
                }
                None => format!("{}/{path}", base.trim_end_matches('/')),
            };
            Ok(Some(url))
        };
        let traces_endpoint = signal("traces", t.traces, "v1/traces")?;
        let metrics_endpoint = signal("metrics", t.metrics, "v1/metrics")?;
        let sampler = get("OTEL_TRACES_SAMPLER").unwrap_or_else(|| t.sampler.clone());
        if !SAMPLERS.contains(&sampler.as_str()) {
            bail!(
                "OTEL_TRACES_SAMPLER: unknown sampler {sampler:?} (known: {})",
                SAMPLERS.join(", ")
            );
        }
        let sampler_arg = match get("OTEL_TRACES_SAMPLER_ARG") {
            Some(a) => a
                .parse::<f64>()
                .ok()
                .filter(|r| (0.0..=1.0).contains(r))
                .with_context(|| {
                    format!("OTEL_TRACES_SAMPLER_ARG: {a:?} is not a ratio between 0 and 1")
                })?,
            None => t.sampler_arg,
        };
        let metrics_interval = match get("OTEL_METRIC_EXPORT_INTERVAL") {
            Some(ms) => Duration::from_millis(
                ms.parse::<u64>()
                    .ok()
                    .filter(|ms| *ms > 0)
                    .with_context(|| {
                        format!("OTEL_METRIC_EXPORT_INTERVAL: {ms:?} is not a positive number of milliseconds")
                    })?,
            ),
            None => Duration::from_secs(t.metrics_interval_secs),
        };
        let log_filter = get("RUST_LOG").unwrap_or_else(|| t.log_filter.clone());
        EnvFilter::try_new(&log_filter).map_err(|e| anyhow::anyhow!("RUST_LOG: {e}"))?;
        Ok(Settings {
            log_format: if cfg.log_format == "json" {
                LogFormat::Json
            } else {
                LogFormat::Text
            },
            log_filter,
            trace_filter: t.trace_filter.clone(),
            traces_endpoint,
            metrics_endpoint,
            service_name: get("OTEL_SERVICE_NAME").unwrap_or_else(|| t.service_name.clone()),
            sampler,
            sampler_arg,
            metrics_interval,
            export_timeout: Duration::from_secs(t.export_timeout_secs),
        })
    }
}

fn sampler(name: &str, ratio: f64) -> anyhow::Result<Sampler> {
    Ok(match name {
        "always_on" => Sampler::AlwaysOn,
        "always_off" => Sampler::AlwaysOff,
        "traceidratio" => Sampler::TraceIdRatioBased(ratio),
        "parentbased_always_on" => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
        "parentbased_always_off" => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
        "parentbased_traceidratio" => {
            Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio)))
        }
        other => bail!("unknown sampler {other:?}"),
    })
}

// ---------------------------------------------------------------------------
// Building the subscriber
// ---------------------------------------------------------------------------

/// Where log lines go.
pub enum LogOutput {
    /// Standard error (coloured when it is a terminal and `NO_COLOR` is unset).
    Stderr,
    /// An in-memory buffer (tests, diagnostics); never coloured.
    Capture(LogCapture),
}

/// An in-memory log sink: every line the subscriber writes, in order.
#[derive(Clone, Default)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl LogCapture {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Everything written so far.
    pub fn contents(&self) -> String {
        let buf = self.0.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&buf).into_owned()
    }
}

/// One writer handed out by [`LogCapture`].
pub struct CaptureWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for CaptureWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for LogCapture {
    type Writer = CaptureWriter;

    fn make_writer(&'a self) -> Self::Writer {
        CaptureWriter(self.0.clone())
    }
}

type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

fn log_layer<W>(format: LogFormat, writer: W, ansi: bool, filter: EnvFilter) -> BoxedLayer
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(ansi);
    match format {
        LogFormat::Json => layer.json().flatten_event(true).with_filter(filter).boxed(),
        LogFormat::Text => layer.with_filter(filter).boxed(),
    }
}

/// The flush-on-exit handle of the tracer and meter providers.
#[derive(Default)]
pub struct TelemetryGuard {
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
    _build_info: Option<ObservableGauge<u64>>,
}

impl TelemetryGuard {
    /// Whether traces are exported.
    pub fn exports_traces(&self) -> bool {
        self.tracer.is_some()
    }

    /// Whether metrics are exported.
    pub fn exports_metrics(&self) -> bool {
        self.meter.is_some()
    }

    /// Exports everything recorded so far (blocks until done or timed out).
    pub fn flush(&self) {
        if let Some(t) = &self.tracer
            && let Err(e) = t.force_flush()
        {
            eprintln!("signet: flushing traces failed: {e}");
        }
        if let Some(m) = &self.meter
            && let Err(e) = m.force_flush()
        {
            eprintln!("signet: flushing metrics failed: {e}");
        }
    }

    /// Flushes and stops the exporters (blocks until done or timed out).
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(t) = self.tracer.take()
            && let Err(e) = t.shutdown()
        {
            eprintln!("signet: shutting down the trace exporter failed: {e}");
        }
        if let Some(m) = self.meter.take()
            && let Err(e) = m.shutdown()
        {
            eprintln!("signet: shutting down the metric exporter failed: {e}");
        }
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A built subscriber (not installed anywhere) and its providers.
pub struct Telemetry {
    dispatch: Dispatch,
    guard: TelemetryGuard,
}

impl Telemetry {
    /// Builds the logging layer and, when `settings` say so, the OTLP trace
    /// and metric pipelines. Installs nothing globally.
    pub fn build(settings: &Settings, output: LogOutput) -> anyhow::Result<Telemetry> {
        let mut layers: Vec<BoxedLayer> = Vec::with_capacity(3);
        let log_filter = EnvFilter::try_new(&settings.log_filter)
            .map_err(|e| anyhow::anyhow!("log filter: {e}"))?;
        layers.push(match output {
            LogOutput::Stderr => {
                let ansi =
                    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
                log_layer(settings.log_format, std::io::stderr, ansi, log_filter)
            }
            LogOutput::Capture(c) => log_layer(settings.log_format, c, false, log_filter),
        });
        let resource = Resource::builder()
            .with_service_name(settings.service_name.clone())
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let mut guard = TelemetryGuard::default();
        if let Some(url) = &settings.traces_endpoint {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint(url.clone())
                .with_timeout(settings.export_timeout)
                .build()
                .context("building the OTLP trace exporter")?;
            let provider = SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_sampler(sampler(&settings.sampler, settings.sampler_arg)?)
                .with_resource(resource.clone())
                .build();
            let filter = EnvFilter::try_new(&settings.trace_filter)
                .map_err(|e| anyhow::anyhow!("trace filter: {e}"))?;
            layers.push(
                tracing_opentelemetry::layer()
                    .with_tracer(provider.tracer("signet"))
                    .with_location(false)
                    .with_threads(false)
                    .with_level(false)
                    .with_tracked_inactivity(false)
                    .with_filter(filter)
                    .boxed(),
            );
            guard.tracer = Some(provider);
        }
        if let Some(url) = &settings.metrics_endpoint {
            let exporter = opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint(url.clone())
                .with_timeout(settings.export_timeout)
                .build()
                .context("building the OTLP metric exporter")?;
            let reader = PeriodicReader::builder(exporter)
                .with_interval(settings.metrics_interval)
                .build();
            let provider = SdkMeterProvider::builder()
                .with_reader(reader)
                .with_resource(resource)
                .build();
            let meter = provider.meter("signet");
            guard._build_info = Some(
                meter
                    .u64_observable_gauge("signet.build.info")
                    .with_description("Build information.")
                    .with_callback(|o| {
                        o.observe(1, &[KeyValue::new("version", env!("CARGO_PKG_VERSION"))])
                    })
                    .build(),
            );
            let layer = HttpMetricsLayer {
                requests: meter
                    .u64_counter("signet.http.requests")
                    .with_unit("{request}")
                    .with_description("HTTP requests handled.")
                    .build(),
                duration: meter
                    .f64_histogram("signet.http.request.duration")
                    .with_unit("s")
                    .with_description("HTTP request latency.")
                    .with_boundaries(BUCKETS.to_vec())
                    .build(),
            };
            layers.push(
                layer
                    .with_filter(filter_fn(|m| m.is_span() && m.name() == REQUEST_SPAN))
                    .boxed(),
            );
            guard.meter = Some(provider);
        }
        let dispatch = Dispatch::new(Registry::default().with(layers));
        Ok(Telemetry { dispatch, guard })
    }

    /// The subscriber, for `tracing::dispatcher::with_default` and friends.
    pub fn dispatch(&self) -> &Dispatch {
        &self.dispatch
    }

    /// Makes this subscriber the current thread's default until the guard is
    /// dropped (tests; use a current-thread runtime so spawned tasks see it).
    pub fn set_default(&self) -> tracing::dispatcher::DefaultGuard {
        tracing::dispatcher::set_default(&self.dispatch)
    }

    /// The providers' handle.
    pub fn guard(&self) -> &TelemetryGuard {
        &self.guard
    }

    /// Installs the subscriber process-wide (and the `log` bridge). When a
    /// global subscriber already exists (several servers in one test
    /// process), the existing one stays. Returns the flush handle.
    pub fn install(self) -> TelemetryGuard {
        let _ = self.dispatch.try_init();
        self.guard
    }
}

/// Builds the telemetry `cfg` and the environment ask for and installs it
/// globally: what `signet serve` and `signet migrate` call first. Keep the
/// returned guard and call [`TelemetryGuard::shutdown`] on exit.
pub fn init(cfg: &Config) -> anyhow::Result<TelemetryGuard> {
    let settings = Settings::resolve(cfg, &process_env)?;
    let guard = Telemetry::build(&settings, LogOutput::Stderr)?.install();
    if let Some(url) = &settings.traces_endpoint {
        tracing::info!(otlp.endpoint = %url, sampler = %settings.sampler, "exporting traces over OTLP");
    }
    if let Some(url) = &settings.metrics_endpoint {
        tracing::info!(otlp.endpoint = %url, interval_secs = settings.metrics_interval.as_secs(), "exporting metrics over OTLP");
    }
    Ok(guard)
}

// ---------------------------------------------------------------------------
// Request spans and W3C trace context
// ---------------------------------------------------------------------------

struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

struct HeaderInjector<'a>(&'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// Joins the request span to the caller's trace. The span must declare
/// `trace.id`, `otel.name` and `otel.kind` as `Empty`.
///
/// The W3C `traceparent` / `tracestate` headers become the span's remote
/// parent when traces are exported; `trace.id` is recorded in every case (the
/// exported trace, else the caller's, else a fresh random one) so that each
/// log line of the request can be correlated.
pub fn link_request_span(span: &Span, headers: &HeaderMap, method: &Method, route: &str) {
    if span.is_disabled() {
        return;
    }
    let parent = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
    let inbound = parent.span().span_context().trace_id();
    let trace_id = match span.set_parent(parent) {
        Ok(()) => {
            // Name and kind must be set before the span is started.
            span.record(
                "otel.name",
                tracing::field::display(format_args!("{method} {route}")),
            );
            span.record("otel.kind", "server");
            span.context().span().span_context().trace_id()
        }
        Err(_) if inbound != TraceId::INVALID => inbound,
        Err(_) => TraceId::from_bytes(*uuid::Uuid::new_v4().as_bytes()),
    };
    span.record("trace.id", tracing::field::display(trace_id));
}

/// Writes the trace context of `span` into outgoing request headers
/// (`traceparent`, and `tracestate` when present). A no-op when traces are
/// not exported. Unsampled spans propagate too, with the sampled flag off,
/// so the upstream can honour the decision.
pub fn inject_context(span: &Span, headers: &mut HeaderMap) {
    let cx = span.context();
    if cx.span().span_context().is_valid() {
        TraceContextPropagator::new().inject_context(&cx, &mut HeaderInjector(headers));
    }
}

/// [`inject_context`] for the current span: call it on the headers of every
/// upstream (MCP) request, e.g.
/// `let mut h = HeaderMap::new(); inject_trace_context(&mut h); client.post(url).headers(h)`.
pub fn inject_trace_context(headers: &mut HeaderMap) {
    inject_context(&Span::current(), headers);
}

// ---------------------------------------------------------------------------
// OTLP metrics from request spans
// ---------------------------------------------------------------------------

/// Records `signet.http.requests` and `signet.http.request.duration` when a
/// request span closes, with the same bounded labels as `/metrics`.
struct HttpMetricsLayer {
    requests: Counter<u64>,
    duration: Histogram<f64>,
}

struct RequestFields {
    start: Instant,
    route: String,
    method: &'static str,
    status: i64,
}

/// The `method` label: a standard verb or `other` (as `/metrics`).
pub fn method_label(m: &str) -> &'static str {
    match m {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        "OPTIONS" => "OPTIONS",
        _ => "other",
    }
}

impl Visit for RequestFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "http.route" => value.clone_into(&mut self.route),
            "http.method" => self.method = method_label(value),
            _ => {}
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "http.status" {
            self.status = i64::try_from(value).unwrap_or(0);
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if field.name() == "http.status" {
            self.status = value;
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field.name() {
            "http.route" | "http.method" => self.record_str(field, &format!("{value:?}")),
            _ => {}
        }
    }
}

impl<S> Layer<S> for HttpMetricsLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: Context<'_, S>,
    ) {
        let mut fields = RequestFields {
            start: Instant::now(),
            route: String::new(),
            method: "other",
            status: 0,
        };
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: Context<'_, S>,
    ) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<RequestFields>()
        {
            values.record(fields);
        }
    }

    fn on_close(&self, id: tracing::span::Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(f) = span.extensions_mut().remove::<RequestFields>() else {
            return;
        };
        let attrs = [
            KeyValue::new("route", f.route),
            KeyValue::new("method", f.method),
            KeyValue::new("status", f.status),
        ];
        self.requests.add(1, &attrs);
        self.duration
            .record(f.start.elapsed().as_secs_f64(), &attrs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn export_is_off_by_default() {
        let s = Settings::resolve(&Config::default(), &env_of(&[])).unwrap();
        assert_eq!(s.traces_endpoint, None);
        assert_eq!(s.metrics_endpoint, None);
        assert_eq!(s.log_filter, "info");
        assert_eq!(s.service_name, "signet");
    }

    #[test]
    fn the_standard_variables_turn_export_on_and_win_over_the_file() {
        let mut cfg = Config::default();
        cfg.telemetry.endpoint = "http://file:4318".into();
        cfg.telemetry.service_name = "from-file".into();
        let s = Settings::resolve(
            &cfg,
            &env_of(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
                ("OTEL_SERVICE_NAME", "signet-eu"),
                ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
                ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
                ("OTEL_METRICS_EXPORTER", "none"),
                ("RUST_LOG", "debug"),
            ]),
        )
        .unwrap();
        assert_eq!(
            s.traces_endpoint.as_deref(),
            Some("http://collector:4318/v1/traces")
        );
        assert_eq!(s.metrics_endpoint, None);
        assert_eq!(s.service_name, "signet-eu");
        assert_eq!(s.sampler, "parentbased_traceidratio");
        assert_eq!(s.sampler_arg, 0.25);
        assert_eq!(s.log_filter, "debug");
    }

    #[test]
    fn the_file_alone_can_turn_export_on_and_sdk_disabled_wins() {
        let mut cfg = Config::default();
        cfg.telemetry.traces = true;
        cfg.telemetry.metrics = true;
        cfg.telemetry.endpoint = "https://otel.example:4318".into();
        let s = Settings::resolve(&cfg, &env_of(&[])).unwrap();
        assert_eq!(
            s.metrics_endpoint.as_deref(),
            Some("https://otel.example:4318/v1/metrics")
        );
        let s = Settings::resolve(
            &cfg,
            &env_of(&[(
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://tempo:4318/custom",
            )]),
        )
        .unwrap();
        assert_eq!(
            s.traces_endpoint.as_deref(),
            Some("http://tempo:4318/custom")
        );
        let s = Settings::resolve(&cfg, &env_of(&[("OTEL_SDK_DISABLED", "true")])).unwrap();
        assert_eq!((s.traces_endpoint, s.metrics_endpoint), (None, None));
    }

    #[test]
    fn bad_values_are_named() {
        let cfg = Config::default();
        for (k, v, want) in [
            ("OTEL_TRACES_SAMPLER", "sometimes", "OTEL_TRACES_SAMPLER"),
            ("OTEL_TRACES_SAMPLER_ARG", "2", "OTEL_TRACES_SAMPLER_ARG"),
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "collector:4318",
                "OTEL_EXPORTER_OTLP_ENDPOINT",
            ),
            ("OTEL_TRACES_EXPORTER", "zipkin", "OTEL_TRACES_EXPORTER"),
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "http://user:key@collector:4318",
                "credentials",
            ),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            ),
        ] {
            let e = Settings::resolve(&cfg, &env_of(&[(k, v)])).unwrap_err();
            assert!(e.to_string().contains(want), "{k}={v}: {e}");
        }
        let e = Settings::resolve(
            &cfg,
            &env_of(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ]),
        )
        .unwrap_err();
        assert!(e.to_string().contains("gRPC"), "{e}");
        let mut c = Config::default();
        c.telemetry.sampler = "nope".into();
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("telemetry.sampler")
        );
        let mut c = Config::default();
        c.telemetry.log_filter = "[[[".into();
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("telemetry.log_filter")
        );
    }

    /// A subscriber with an OpenTelemetry layer and no exporter.
    fn otel_dispatch() -> (Dispatch, SdkTracerProvider) {
        let provider = SdkTracerProvider::builder().build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("test"));
        (Dispatch::new(Registry::default().with(layer)), provider)
    }

    fn request_span() -> Span {
        tracing::info_span!(
            "http.request",
            trace.id = tracing::field::Empty,
            otel.name = tracing::field::Empty,
            otel.kind = tracing::field::Empty,
        )
    }

    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

    #[test]
    fn the_inbound_traceparent_is_honoured_and_propagated_upstream() {
        let (dispatch, _provider) = otel_dispatch();
        tracing::dispatcher::with_default(&dispatch, || {
            let mut inbound = HeaderMap::new();
            inbound.insert(
                "traceparent",
                HeaderValue::from_str(&format!("00-{TRACE}-00f067aa0ba902b7-01")).unwrap(),
            );
            let span = request_span();
            link_request_span(&span, &inbound, &Method::GET, "/v1/tenants/{tenant}");
            let _entered = span.enter();
            let mut out = HeaderMap::new();
            inject_trace_context(&mut out);
            let tp = out.get("traceparent").unwrap().to_str().unwrap();
            let parts: Vec<&str> = tp.split('-').collect();
            assert_eq!(parts.len(), 4, "{tp}");
            assert_eq!(parts[0], "00");
            assert_eq!(parts[1], TRACE, "same trace as the caller");
            assert_ne!(parts[2], "00f067aa0ba902b7", "our own span id");
            assert_eq!(parts[3], "01", "sampled");
        });
    }

    #[test]
    fn without_otel_the_trace_id_is_still_recorded_and_nothing_is_injected() {
        let logs = LogCapture::new();
        let settings = Settings::resolve(&Config::default(), &env_of(&[])).unwrap();
        let t = Telemetry::build(&settings, LogOutput::Capture(logs.clone())).unwrap();
        let _g = t.set_default();
        let mut inbound = HeaderMap::new();
        inbound.insert(
            "traceparent",
            HeaderValue::from_str(&format!("00-{TRACE}-00f067aa0ba902b7-01")).unwrap(),
        );
        let span = request_span();
        link_request_span(&span, &inbound, &Method::GET, "/x");
        let _entered = span.enter();
        tracing::info!("inside");
        let mut out = HeaderMap::new();
        inject_trace_context(&mut out);
        assert!(out.is_empty());
        let text = logs.contents();
        assert!(text.contains(&format!("trace.id={TRACE}")), "{text}");
        assert!(!text.contains("otel."), "{text}");
    }

    #[test]
    fn method_labels_are_bounded() {
        assert_eq!(method_label("GET"), "GET");
        assert_eq!(method_label("BREW"), "other");
    }
}
