//! The telemetry settings: the `[telemetry]` section of the configuration
//! file, its validation, and [`Settings`], the section combined with the
//! standard OpenTelemetry environment variables (which win).

use std::time::Duration;

use anyhow::{Context as _, bail};
use opentelemetry_sdk::trace::Sampler;
use serde::{Deserialize, Serialize};
use tracing_subscriber::EnvFilter;

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

/// `[telemetry]`: log filter, and OpenTelemetry (OTLP) export of traces and
/// metrics. Export is off by default. The standard `OTEL_*` variables
/// (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER`,
/// `OTEL_TRACES_SAMPLER_ARG`, `OTEL_SDK_DISABLED`, ...) win over these
/// settings; see `docs/OBSERVABILITY.md` and [`Settings::resolve`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// Export traces over OTLP.
    pub traces: bool,
    /// Export metrics over OTLP (the `/metrics` endpoint is always on).
    pub metrics: bool,
    /// OTLP/HTTP base URL (`/v1/traces`, `/v1/metrics` are appended);
    /// empty means `http://localhost:4318`.
    pub endpoint: String,
    /// OTLP protocol; only `http/protobuf` is built in.
    pub protocol: String,
    /// `service.name` of the exported resource.
    pub service_name: String,
    /// Sampler: `always_on`, `always_off`, `traceidratio`,
    /// `parentbased_always_on`, `parentbased_always_off`,
    /// `parentbased_traceidratio`.
    pub sampler: String,
    /// Ratio for the `traceidratio` samplers, 0.0 to 1.0.
    pub sampler_arg: f64,
    /// Seconds between two metric exports.
    pub metrics_interval_secs: u64,
    /// Seconds an export may take before it is abandoned.
    pub export_timeout_secs: u64,
    /// Which log lines are written (`RUST_LOG` syntax; `RUST_LOG` wins).
    pub log_filter: String,
    /// Which spans and events are exported as traces (`RUST_LOG` syntax).
    pub trace_filter: String,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            traces: false,
            metrics: false,
            endpoint: String::new(),
            protocol: "http/protobuf".into(),
            service_name: "pinfold".into(),
            sampler: "parentbased_always_on".into(),
            sampler_arg: 1.0,
            metrics_interval_secs: 60,
            export_timeout_secs: 10,
            log_filter: "info".into(),
            trace_filter: "info".into(),
        }
    }
}

/// Checks the `[telemetry]` section (`Config::validate` calls it).
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
            "{what}: OTLP over gRPC is not built into pinfold; use \"http/protobuf\" (port 4318), for example through an OpenTelemetry collector"
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

/// Log line format (`log_format`).
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
    /// Combines the `[telemetry]` section `t` and the log format with the
    /// environment read through `env`. The standard variables win over the
    /// file:
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
    pub fn resolve(
        t: &TelemetryConfig,
        log_format: LogFormat,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Settings> {
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
        let log_filter = quiet_sdk(get("RUST_LOG").unwrap_or_else(|| t.log_filter.clone()));
        EnvFilter::try_new(&log_filter).map_err(|e| anyhow::anyhow!("RUST_LOG: {e}"))?;
        Ok(Settings {
            log_format,
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

pub(super) fn sampler(name: &str, ratio: f64) -> anyhow::Result<Sampler> {
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

/// The directive that keeps the MCP SDK's own log lines out.
pub const SDK_QUIET: &str = "rmcp=off";

/// `filter`, with the MCP SDK (`rmcp`) silenced unless the filter names it.
///
/// rmcp logs an upstream's routine failures (a connection that closes, an
/// event stream that ends, a worker that stops) at `ERROR`. They are the
/// upstream's fault, not Pinfold's, and Pinfold logs each failed exchange
/// itself, once, at `WARN` with its tenant and session. A filter that names
/// `rmcp` (`RUST_LOG=info,rmcp=debug`) gets its lines back.
pub fn quiet_sdk(filter: String) -> String {
    if filter.contains("rmcp") || filter.trim().is_empty() {
        filter
    } else {
        format!("{filter},{SDK_QUIET}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sdks_routine_errors_stay_out_of_the_log_unless_asked_for() {
        use crate::telemetry::{LogCapture, LogOutput, Telemetry};
        let emit = |filter: Option<&str>| {
            let logs = LogCapture::new();
            let env: Vec<(&str, &str)> = filter.map(|f| ("RUST_LOG", f)).into_iter().collect();
            let settings =
                Settings::resolve(&TelemetryConfig::default(), LogFormat::Text, &env_of(&env))
                    .unwrap();
            let t = Telemetry::build(&settings, LogOutput::Capture(logs.clone())).unwrap();
            let _g = t.set_default();
            tracing::error!(target: "rmcp::transport::worker", "worker quit with fatal: Transport channel closed");
            tracing::warn!(target: "pinfold_resolve::engine", "upstream resolution failed");
            logs.contents()
        };
        let text = emit(None);
        assert!(!text.contains("worker quit"), "{text}");
        assert!(!text.contains("ERROR"), "{text}");
        assert!(text.contains("upstream resolution failed"), "{text}");
        let text = emit(Some("info"));
        assert!(!text.contains("worker quit"), "{text}");
        // Asked for by name, they are back.
        let text = emit(Some("info,rmcp=error"));
        assert!(text.contains("worker quit"), "{text}");
    }

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn export_is_off_by_default() {
        let s =
            Settings::resolve(&TelemetryConfig::default(), LogFormat::Text, &env_of(&[])).unwrap();
        assert_eq!(s.traces_endpoint, None);
        assert_eq!(s.metrics_endpoint, None);
        assert_eq!(s.log_filter, "info,rmcp=off");
        assert_eq!(s.service_name, "pinfold");
    }

    #[test]
    fn the_standard_variables_turn_export_on_and_win_over_the_file() {
        let cfg = TelemetryConfig {
            endpoint: "http://file:4318".into(),
            service_name: "from-file".into(),
            ..TelemetryConfig::default()
        };
        let s = Settings::resolve(
            &cfg,
            LogFormat::Text,
            &env_of(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
                ("OTEL_SERVICE_NAME", "pinfold-eu"),
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
        assert_eq!(s.service_name, "pinfold-eu");
        assert_eq!(s.sampler, "parentbased_traceidratio");
        assert_eq!(s.sampler_arg, 0.25);
        assert_eq!(s.log_filter, "debug,rmcp=off");
    }

    #[test]
    fn the_file_alone_can_turn_export_on_and_sdk_disabled_wins() {
        let cfg = TelemetryConfig {
            traces: true,
            metrics: true,
            endpoint: "https://otel.example:4318".into(),
            ..TelemetryConfig::default()
        };
        let s = Settings::resolve(&cfg, LogFormat::Text, &env_of(&[])).unwrap();
        assert_eq!(
            s.metrics_endpoint.as_deref(),
            Some("https://otel.example:4318/v1/metrics")
        );
        let s = Settings::resolve(
            &cfg,
            LogFormat::Text,
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
        let s = Settings::resolve(
            &cfg,
            LogFormat::Text,
            &env_of(&[("OTEL_SDK_DISABLED", "true")]),
        )
        .unwrap();
        assert_eq!((s.traces_endpoint, s.metrics_endpoint), (None, None));
    }

    #[test]
    fn bad_values_are_named() {
        let cfg = TelemetryConfig::default();
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
            let e = Settings::resolve(&cfg, LogFormat::Text, &env_of(&[(k, v)])).unwrap_err();
            assert!(e.to_string().contains(want), "{k}={v}: {e}");
        }
        let e = Settings::resolve(
            &cfg,
            LogFormat::Text,
            &env_of(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ]),
        )
        .unwrap_err();
        assert!(e.to_string().contains("gRPC"), "{e}");
        let c = TelemetryConfig {
            sampler: "nope".into(),
            ..TelemetryConfig::default()
        };
        assert!(
            validate_config(&c)
                .unwrap_err()
                .to_string()
                .contains("telemetry.sampler")
        );
        let c = TelemetryConfig {
            log_filter: "[[[".into(),
            ..TelemetryConfig::default()
        };
        assert!(
            validate_config(&c)
                .unwrap_err()
                .to_string()
                .contains("telemetry.log_filter")
        );
        let c = TelemetryConfig {
            endpoint: "http://user:secret@collector:4318".into(),
            ..TelemetryConfig::default()
        };
        let e = validate_config(&c).unwrap_err().to_string();
        assert!(
            e.contains("telemetry.endpoint") && e.contains("credentials"),
            "{e}"
        );
    }
}
