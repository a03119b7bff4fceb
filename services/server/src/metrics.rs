//! Request metrics: the Prometheus text of `/metrics`, and the one place
//! that names every metric, label and histogram bucket (the OTLP layer in
//! [`crate::telemetry`] records the same instruments under the same labels).
//!
//! Labels are bounded: `route` is the matched route *template*
//! (`/v1/tenants/{tenant}`), never the raw path, and unmatched requests share
//! the label [`UNMATCHED_ROUTE`]; `method` is one of the standard verbs or
//! `other`; `status` is the status code. Tenant ids never appear in labels.
//!
//! | Prometheus                              | OTLP                           | type      | labels               |
//! |-----------------------------------------|--------------------------------|-----------|----------------------|
//! | `signet_http_requests_total`            | `signet.http.requests`         | counter   | route, method, status|
//! | `signet_http_request_duration_seconds`  | `signet.http.request.duration` | histogram | route, method, status|
//! | `signet_build_info`                     | `signet.build.info`            | gauge     | version              |

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Label: the matched route template.
pub const LABEL_ROUTE: &str = "route";
/// Label: the request method ([`method_label`]).
pub const LABEL_METHOD: &str = "method";
/// Label: the response status code.
pub const LABEL_STATUS: &str = "status";
/// Label: the build version (`signet_build_info`).
pub const LABEL_VERSION: &str = "version";
/// The `route` label of requests no route matched.
pub const UNMATCHED_ROUTE: &str = "unmatched";

/// Histogram bucket upper bounds, in seconds, for both exports.
pub const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 2.5, 10.0,
];

/// One metric under its Prometheus and OpenTelemetry names.
#[derive(Debug, Clone, Copy)]
pub struct MetricName {
    /// Name in the Prometheus text (`/metrics`).
    pub prometheus: &'static str,
    /// Name of the OTLP instrument.
    pub otlp: &'static str,
    /// The description both carry.
    pub help: &'static str,
}

/// Requests handled (counter).
pub const HTTP_REQUESTS: MetricName = MetricName {
    prometheus: "signet_http_requests_total",
    otlp: "signet.http.requests",
    help: "HTTP requests handled.",
};

/// Request latency in seconds (histogram over [`BUCKETS`]).
pub const HTTP_DURATION: MetricName = MetricName {
    prometheus: "signet_http_request_duration_seconds",
    otlp: "signet.http.request.duration",
    help: "HTTP request latency.",
};

/// Build information (gauge, always 1, labelled with the version).
pub const BUILD_INFO: MetricName = MetricName {
    prometheus: "signet_build_info",
    otlp: "signet.build.info",
    help: "Build information.",
};

/// The `method` label: a standard verb, or `other`.
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

#[derive(Default)]
struct Series {
    count: AtomicU64,
    sum_nanos: AtomicU64,
    buckets: [AtomicU64; BUCKETS.len()],
}

type Key = (String, &'static str, u16);

/// (method, status) → series, for one route.
type ByRoute = HashMap<(&'static str, u16), Arc<Series>>;

/// Request counters and latency histograms.
#[derive(Default)]
pub struct Metrics {
    /// route → (method, status) → series.
    series: RwLock<HashMap<String, ByRoute>>,
}

impl Metrics {
    /// Records one finished request.
    pub fn record(&self, route: &str, method: &axum::http::Method, status: u16, elapsed: Duration) {
        let method = method_label(method.as_str());
        let series = {
            let read = self.series.read().unwrap_or_else(|e| e.into_inner());
            read.get(route)
                .and_then(|by| by.get(&(method, status)))
                .cloned()
        };
        let series = match series {
            Some(s) => s,
            None => {
                let mut write = self.series.write().unwrap_or_else(|e| e.into_inner());
                write
                    .entry(route.to_owned())
                    .or_default()
                    .entry((method, status))
                    .or_default()
                    .clone()
            }
        };
        let secs = elapsed.as_secs_f64();
        series.count.fetch_add(1, Ordering::Relaxed);
        series
            .sum_nanos
            .fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
        for (i, le) in BUCKETS.iter().enumerate() {
            if secs <= *le {
                series.buckets[i].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Renders the Prometheus text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let read = self.series.read().unwrap_or_else(|e| e.into_inner());
        let mut flat: Vec<(Key, Arc<Series>)> = read
            .iter()
            .flat_map(|(r, by)| {
                by.iter()
                    .map(move |((m, st), s)| ((r.clone(), *m, *st), s.clone()))
            })
            .collect();
        flat.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out = String::with_capacity(4096);
        let (info, requests, duration) = (
            BUILD_INFO.prometheus,
            HTTP_REQUESTS.prometheus,
            HTTP_DURATION.prometheus,
        );
        let _ = writeln!(
            out,
            "# HELP {info} {}\n# TYPE {info} gauge",
            BUILD_INFO.help
        );
        let _ = writeln!(
            out,
            "{info}{{{LABEL_VERSION}=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        let _ = writeln!(
            out,
            "# HELP {requests} {}\n# TYPE {requests} counter",
            HTTP_REQUESTS.help
        );
        for (k, s) in &flat {
            let _ = writeln!(
                out,
                "{requests}{{{}}} {}",
                labels(k),
                s.count.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "# HELP {duration} {}\n# TYPE {duration} histogram",
            HTTP_DURATION.help
        );
        for (k, s) in &flat {
            let labels = labels(k);
            for (i, le) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "{duration}_bucket{{{labels},le=\"{le}\"}} {}",
                    s.buckets[i].load(Ordering::Relaxed)
                );
            }
            let count = s.count.load(Ordering::Relaxed);
            let _ = writeln!(out, "{duration}_bucket{{{labels},le=\"+Inf\"}} {count}");
            let _ = writeln!(
                out,
                "{duration}_sum{{{labels}}} {}",
                s.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9
            );
            let _ = writeln!(out, "{duration}_count{{{labels}}} {count}");
        }
        out
    }
}

/// `route="...",method="...",status="..."`.
fn labels(k: &Key) -> String {
    format!(
        "{LABEL_ROUTE}=\"{}\",{LABEL_METHOD}=\"{}\",{LABEL_STATUS}=\"{}\"",
        escape(&k.0),
        k.1,
        k.2
    )
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Resolve-cache metrics (Prometheus names; counters since start). Labels:
/// `reason` (a fallback reason) and `kind` (a violation kind), both from
/// closed sets; never a tenant, session or tool.
///
/// | Prometheus                                      | type      | labels |
/// |-------------------------------------------------|-----------|--------|
/// | `signet_resolve_hits_total`                     | counter   |        |
/// | `signet_resolve_misses_total`                   | counter   |        |
/// | `signet_resolve_coalesced_waits_total`          | counter   |        |
/// | `signet_resolve_static_total`                   | counter   |        |
/// | `signet_resolve_upstream_calls_total`           | counter   |        |
/// | `signet_resolve_share_refusals_total`           | counter   |        |
/// | `signet_resolve_fallbacks_total`                | counter   | reason |
/// | `signet_resolve_violations_total`               | counter   | kind   |
/// | `signet_resolve_upstream_duration_seconds`      | histogram |        |
/// | `signet_resolve_cache_bytes`                    | gauge     |        |
/// | `signet_resolve_cache_entries`                  | gauge     |        |
pub fn render_resolve(s: &signet_resolve::StatsSnapshot, out: &mut String) {
    let mut scalar = |name: &str, kind: &str, help: &str, v: u64| {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
        );
    };
    scalar(
        "signet_resolve_hits_total",
        "counter",
        "Resolutions served from the session cache.",
        s.hits,
    );
    scalar(
        "signet_resolve_misses_total",
        "counter",
        "Resolutions that needed an upstream answer.",
        s.misses,
    );
    scalar(
        "signet_resolve_coalesced_waits_total",
        "counter",
        "Misses that waited on an identical in-flight upstream call.",
        s.coalesced_waits,
    );
    scalar(
        "signet_resolve_static_total",
        "counter",
        "Resolutions of tools that do not resolve (worst case, no upstream call).",
        s.static_answers,
    );
    scalar(
        "signet_resolve_upstream_calls_total",
        "counter",
        "Upstream tools/resolve and tools/annotations requests.",
        s.upstream_calls,
    );
    scalar(
        "signet_resolve_share_refusals_total",
        "counter",
        "Answers not cached because their tenant was at its share.",
        s.share_refusals,
    );
    scalar(
        "signet_resolve_cache_bytes",
        "gauge",
        "Bytes held by the resolve cache.",
        s.cache_bytes,
    );
    scalar(
        "signet_resolve_cache_entries",
        "gauge",
        "Entries in the resolve cache.",
        s.cache_entries,
    );
    let mut labelled = |name: &str, help: &str, label: &str, values: &[(&str, u64)]| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for (l, v) in values {
            let _ = writeln!(out, "{name}{{{label}=\"{l}\"}} {v}");
        }
    };
    labelled(
        "signet_resolve_fallbacks_total",
        "Worst-case answers served instead of the upstream's, by reason.",
        "reason",
        &s.fallbacks,
    );
    labelled(
        "signet_resolve_violations_total",
        "Upstream answers outside the signature or not deterministic, by kind.",
        "kind",
        &s.violations,
    );
    let name = "signet_resolve_upstream_duration_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} Upstream resolve latency.\n# TYPE {name} histogram"
    );
    let mut count = 0;
    for (le, c) in &s.upstream_latency_buckets {
        let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {c}");
        count = count.max(*c);
    }
    let _ = writeln!(
        out,
        "{name}_bucket{{le=\"+Inf\"}} {}",
        s.upstream_calls.max(count)
    );
    let _ = writeln!(out, "{name}_sum {}", s.upstream_latency_sum_seconds);
    let _ = writeln!(out, "{name}_count {}", s.upstream_calls.max(count));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counts_and_buckets() {
        let m = Metrics::default();
        m.record(
            "/healthz",
            &axum::http::Method::GET,
            200,
            Duration::from_micros(300),
        );
        m.record(
            "/healthz",
            &axum::http::Method::GET,
            200,
            Duration::from_millis(30),
        );
        let text = m.render();
        assert!(text.contains(
            "signet_http_requests_total{route=\"/healthz\",method=\"GET\",status=\"200\"} 2"
        ));
        assert!(text.contains("le=\"0.0005\"} 1"));
        assert!(text.contains("le=\"0.05\"} 2"));
        assert!(text.contains("signet_http_request_duration_seconds_count{route=\"/healthz\",method=\"GET\",status=\"200\"} 2"));
        assert!(text.contains("# TYPE signet_http_requests_total counter\n"));
        assert!(text.contains("signet_build_info{version=\""));
    }

    #[test]
    fn method_labels_are_bounded() {
        assert_eq!(method_label("GET"), "GET");
        assert_eq!(method_label("BREW"), "other");
    }
}
