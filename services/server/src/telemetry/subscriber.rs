//! The one subscriber: the log layer plus, when enabled, the OTLP trace and
//! metric pipelines, built without touching global state.

use std::io::IsTerminal as _;

use anyhow::Context as _;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{MeterProvider as _, ObservableGauge};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Dispatch;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use super::logs::{BoxedLayer, LogOutput, log_layer};
use super::otlp_metrics::instruments;
use super::settings::{LogFormat, Settings, TelemetryConfig, process_env, sampler};

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
            eprintln!("pinfold: flushing traces failed: {e}");
        }
        if let Some(m) = &self.meter
            && let Err(e) = m.force_flush()
        {
            eprintln!("pinfold: flushing metrics failed: {e}");
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
            eprintln!("pinfold: shutting down the trace exporter failed: {e}");
        }
        if let Some(m) = self.meter.take()
            && let Err(e) = m.shutdown()
        {
            eprintln!("pinfold: shutting down the metric exporter failed: {e}");
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
                    .with_tracer(provider.tracer("pinfold"))
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
            let (build_info, layer) = instruments(&provider.meter("pinfold"));
            guard._build_info = Some(build_info);
            layers.push(layer);
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

/// Builds the telemetry the `[telemetry]` section `t`, the log format and
/// the environment ask for and installs it globally: what `pinfold serve` and
/// `pinfold migrate` call first. Keep the returned guard and call
/// [`TelemetryGuard::shutdown`] on exit.
pub fn init(t: &TelemetryConfig, log_format: LogFormat) -> anyhow::Result<TelemetryGuard> {
    let settings = Settings::resolve(t, log_format, &process_env)?;
    let guard = Telemetry::build(&settings, LogOutput::Stderr)?.install();
    if let Some(url) = &settings.traces_endpoint {
        tracing::info!(otlp.endpoint = %url, sampler = %settings.sampler, "exporting traces over OTLP");
    }
    if let Some(url) = &settings.metrics_endpoint {
        tracing::info!(otlp.endpoint = %url, interval_secs = settings.metrics_interval.as_secs(), "exporting metrics over OTLP");
    }
    Ok(guard)
}
