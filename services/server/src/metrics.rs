//! Prometheus metrics for `/metrics`.
//!
//! Labels are bounded: `route` is the matched route *template*
//! (`/v1/tenants/{tenant}`), never the raw path, and unmatched requests share
//! the label `unmatched`; `method` is one of the standard verbs or `other`.
//!
//! | metric                                  | type      | labels               |
//! |-----------------------------------------|-----------|----------------------|
//! | `signet_http_requests_total`            | counter   | route, method, status|
//! | `signet_http_request_duration_seconds`  | histogram | route, method, status|
//! | `signet_build_info`                     | gauge     | version              |

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Histogram bucket upper bounds, in seconds.
const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 2.5, 10.0,
];

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

fn method_label(m: &axum::http::Method) -> &'static str {
    match m.as_str() {
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

impl Metrics {
    /// Records one finished request.
    pub fn record(&self, route: &str, method: &axum::http::Method, status: u16, elapsed: Duration) {
        let method = method_label(method);
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
        out.push_str(
            "# HELP signet_build_info Build information.\n# TYPE signet_build_info gauge\n",
        );
        let _ = writeln!(
            out,
            "signet_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        out.push_str("# HELP signet_http_requests_total HTTP requests handled.\n# TYPE signet_http_requests_total counter\n");
        for (k, s) in &flat {
            let _ = writeln!(
                out,
                "signet_http_requests_total{{route=\"{}\",method=\"{}\",status=\"{}\"}} {}",
                escape(&k.0),
                k.1,
                k.2,
                s.count.load(Ordering::Relaxed)
            );
        }
        out.push_str("# HELP signet_http_request_duration_seconds HTTP request latency.\n# TYPE signet_http_request_duration_seconds histogram\n");
        for (k, s) in &flat {
            let labels = format!(
                "route=\"{}\",method=\"{}\",status=\"{}\"",
                escape(&k.0),
                k.1,
                k.2
            );
            for (i, le) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "signet_http_request_duration_seconds_bucket{{{labels},le=\"{le}\"}} {}",
                    s.buckets[i].load(Ordering::Relaxed)
                );
            }
            let count = s.count.load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "signet_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {count}"
            );
            let _ = writeln!(
                out,
                "signet_http_request_duration_seconds_sum{{{labels}}} {}",
                s.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9
            );
            let _ = writeln!(
                out,
                "signet_http_request_duration_seconds_count{{{labels}}} {count}"
            );
        }
        out
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
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
    }
}
