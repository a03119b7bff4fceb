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
//! | `pinfold_http_requests_total`            | `pinfold.http.requests`         | counter   | route, method, status|
//! | `pinfold_http_request_duration_seconds`  | `pinfold.http.request.duration` | histogram | route, method, status|
//! | `pinfold_build_info`                     | `pinfold.build.info`            | gauge     | version              |
//! | `pinfold_rate_limited_total`             | (Prometheus only)              | counter   | class, scope         |
//! | `pinfold_metrics_scrapes_total`          | (Prometheus only)              | counter   |                      |
//! | `pinfold_metrics_renders_total`          | (Prometheus only)              | counter   |                      |

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// Label: the matched route template.
pub const LABEL_ROUTE: &str = "route";
/// Label: the request method ([`method_label`]).
pub const LABEL_METHOD: &str = "method";
/// Label: the response status code.
pub const LABEL_STATUS: &str = "status";
/// Label: the build version (`pinfold_build_info`).
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
    prometheus: "pinfold_http_requests_total",
    otlp: "pinfold.http.requests",
    help: "HTTP requests handled.",
};

/// Request latency in seconds (histogram over [`BUCKETS`]).
pub const HTTP_DURATION: MetricName = MetricName {
    prometheus: "pinfold_http_request_duration_seconds",
    otlp: "pinfold.http.request.duration",
    help: "HTTP request latency.",
};

/// Build information (gauge, always 1, labelled with the version).
pub const BUILD_INFO: MetricName = MetricName {
    prometheus: "pinfold_build_info",
    otlp: "pinfold.build.info",
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

/// One labelled series. Buckets hold the count of their own interval (not
/// cumulative), so recording a request is three atomic additions; the
/// Prometheus text sums them up.
struct Series {
    route: Box<str>,
    method: &'static str,
    status: u16,
    count: AtomicU64,
    sum_nanos: AtomicU64,
    buckets: [AtomicU64; BUCKETS.len()],
}

impl Series {
    fn new(route: &str, method: &'static str, status: u16) -> Series {
        Series {
            route: route.into(),
            method,
            status,
            count: AtomicU64::new(0),
            sum_nanos: AtomicU64::new(0),
            buckets: Default::default(),
        }
    }

    fn add(&self, elapsed: Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
        if let Some(i) = BUCKET_NANOS.iter().position(|le| nanos <= *le) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// [`BUCKETS`] in nanoseconds.
const BUCKET_NANOS: [u64; BUCKETS.len()] = {
    let mut out = [0u64; BUCKETS.len()];
    let mut i = 0;
    while i < BUCKETS.len() {
        out[i] = (BUCKETS[i] * 1e9) as u64;
        i += 1;
    }
    out
};

type Key = (String, &'static str, u16);

/// The hot-path key: where the route string lives (address and length),
/// the method label's address and the status. Route templates come from
/// the router, which keeps each template in one shared allocation for its
/// whole life, so a request finds its series without hashing the template;
/// a hit is still confirmed by comparing the template itself, so any
/// string may be passed.
type FastKey = (usize, usize, usize, u16);

/// A multiply-rotate hasher for [`FastKey`] (four machine words: no need
/// for SipHash, and the map's contents are not chosen by clients).
#[derive(Default, Clone, Copy)]
struct WordHasher(u64);

impl std::hash::Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_u16(&mut self, n: u16) {
        self.write_u64(u64::from(n));
    }
}

type FastMap = HashMap<FastKey, Arc<Series>, std::hash::BuildHasherDefault<WordHasher>>;

/// Most distinct route strings the hot-path map remembers before it starts
/// over (templates are few; this only bounds callers passing fresh strings).
const FAST_CAP: usize = 4096;

/// Request counters and latency histograms.
#[derive(Default)]
pub struct Metrics {
    /// (route, method, status) → series: every series, for rendering.
    series: Mutex<HashMap<Key, Arc<Series>>>,
    /// The same series by [`FastKey`], read on every request.
    fast: RwLock<FastMap>,
}

impl Metrics {
    /// Records one finished request.
    pub fn record(&self, route: &str, method: &axum::http::Method, status: u16, elapsed: Duration) {
        let method = method_label(method.as_str());
        let key: FastKey = (
            route.as_ptr() as usize,
            route.len(),
            method.as_ptr() as usize,
            status,
        );
        {
            let fast = self.fast.read().unwrap_or_else(|e| e.into_inner());
            if let Some(s) = fast.get(&key)
                && *s.route == *route
            {
                s.add(elapsed);
                return;
            }
        }
        let series = self
            .series
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry((route.to_owned(), method, status))
            .or_insert_with(|| Arc::new(Series::new(route, method, status)))
            .clone();
        series.add(elapsed);
        let mut fast = self.fast.write().unwrap_or_else(|e| e.into_inner());
        if fast.len() >= FAST_CAP {
            fast.clear();
        }
        fast.insert(key, series);
    }

    /// Renders the Prometheus text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut flat: Vec<Arc<Series>> = self
            .series
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        flat.sort_by(|a, b| (&a.route, a.method, a.status).cmp(&(&b.route, b.method, b.status)));
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
        for s in &flat {
            let _ = writeln!(
                out,
                "{requests}{{{}}} {}",
                labels(s),
                s.count.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "# HELP {duration} {}\n# TYPE {duration} histogram",
            HTTP_DURATION.help
        );
        for s in &flat {
            let labels = labels(s);
            // A request recorded while rendering may show in a bucket and
            // not yet in the count: `+Inf` is never below the buckets.
            let mut cumulative = 0;
            for (i, le) in BUCKETS.iter().enumerate() {
                cumulative += s.buckets[i].load(Ordering::Relaxed);
                let _ = writeln!(
                    out,
                    "{duration}_bucket{{{labels},le=\"{le}\"}} {cumulative}"
                );
            }
            let count = s.count.load(Ordering::Relaxed).max(cumulative);
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
fn labels(s: &Series) -> String {
    format!(
        "{LABEL_ROUTE}=\"{}\",{LABEL_METHOD}=\"{}\",{LABEL_STATUS}=\"{}\"",
        escape(&s.route),
        s.method,
        s.status
    )
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Requests refused by a rate limit (counter, Prometheus only).
pub const RATE_LIMITED: &str = "pinfold_rate_limited_total";

/// Appends `pinfold_rate_limited_total{class,scope}`: requests answered
/// `429` per route class and bucket scope (`tenant` or `principal`). Both
/// labels are fixed sets.
pub fn render_rate_limited(limiter: &pinfold_http::ratelimit::RateLimiter, out: &mut String) {
    use pinfold_http::ratelimit::{LimitScope, RouteClass};
    let _ = writeln!(
        out,
        "# HELP {RATE_LIMITED} Requests refused by a rate limit.\n# TYPE {RATE_LIMITED} counter"
    );
    for class in RouteClass::ALL {
        for scope in LimitScope::ALL {
            let _ = writeln!(
                out,
                "{RATE_LIMITED}{{class=\"{}\",scope=\"{}\"}} {}",
                class.name(),
                scope.name(),
                limiter.refused(class, scope)
            );
        }
    }
}

/// Scrapes of `/metrics` admitted (counter, Prometheus only).
pub const SCRAPES: &str = "pinfold_metrics_scrapes_total";
/// Renderings of `/metrics` (counter, Prometheus only): below
/// [`SCRAPES`] when concurrent scrapes shared one.
pub const RENDERS: &str = "pinfold_metrics_renders_total";

/// Appends `pinfold_metrics_scrapes_total` and
/// `pinfold_metrics_renders_total` (no labels): scrapes admitted and
/// renderings started, the one being written included.
pub fn render_scrapes(scrapes: u64, renders: u64, out: &mut String) {
    for (name, help, v) in [
        (SCRAPES, "Scrapes of /metrics admitted.", scrapes),
        (
            RENDERS,
            "Renderings of /metrics (concurrent scrapes share one).",
            renders,
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
        );
    }
}

/// The guard endpoint's counters since start (no labels: never a tenant,
/// route or tool).
///
/// | Prometheus                          | type    | what |
/// |-------------------------------------|---------|------|
/// | `pinfold_guard_refused_calls_total` | counter | calls refused before the upstream (not shown, or the route's `calls` policy) |
/// | `pinfold_guard_drifts_total`        | counter | distinct drifted upstream lists recorded (one `guard.drift` audit event each) |
/// | `pinfold_guard_forwarded_total`     | counter | client requests forwarded to upstreams |
pub fn render_guard(s: &pinfold_guard::endpoint::GuardStats, out: &mut String) {
    use std::sync::atomic::Ordering::Relaxed;
    for (name, help, v) in [
        (
            "pinfold_guard_refused_calls_total",
            "Calls the guard refused before the upstream.",
            s.refused.load(Relaxed),
        ),
        (
            "pinfold_guard_drifts_total",
            "Distinct drifted upstream tool lists the guard recorded.",
            s.drifts.load(Relaxed),
        ),
        (
            "pinfold_guard_forwarded_total",
            "Client requests the guard forwarded to upstreams.",
            s.forwarded.load(Relaxed),
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
        );
    }
}

/// Resolve-cache metrics (Prometheus names; counters since start). Labels:
/// `reason` (a fallback reason) and `kind` (a violation kind), both from
/// closed sets; never a tenant, session or tool.
///
/// | Prometheus                                      | type      | labels |
/// |-------------------------------------------------|-----------|--------|
/// | `pinfold_resolve_hits_total`                     | counter   |        |
/// | `pinfold_resolve_misses_total`                   | counter   |        |
/// | `pinfold_resolve_coalesced_waits_total`          | counter   |        |
/// | `pinfold_resolve_static_total`                   | counter   |        |
/// | `pinfold_resolve_upstream_calls_total`           | counter   |        |
/// | `pinfold_resolve_share_refusals_total`           | counter   |        |
/// | `pinfold_resolve_invalidations_total`            | counter   |        |
/// | `pinfold_resolve_stale_dropped_total`            | counter   |        |
/// | `pinfold_resolve_stale_refusals_total`           | counter   |        |
/// | `pinfold_resolve_states_evicted_total`           | counter   |        |
/// | `pinfold_resolve_fallbacks_total`                | counter   | reason |
/// | `pinfold_resolve_violations_total`               | counter   | kind   |
/// | `pinfold_resolve_upstream_duration_seconds`      | histogram |        |
/// | `pinfold_resolve_cache_bytes`                    | gauge     |        |
/// | `pinfold_resolve_cache_entries`                  | gauge     |        |
/// | `pinfold_resolve_session_states`                 | gauge     |        |
pub fn render_resolve(s: &pinfold_resolve::StatsSnapshot, out: &mut String) {
    let mut scalar = |name: &str, kind: &str, help: &str, v: u64| {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
        );
    };
    scalar(
        "pinfold_resolve_hits_total",
        "counter",
        "Resolutions served from the session cache.",
        s.hits,
    );
    scalar(
        "pinfold_resolve_misses_total",
        "counter",
        "Resolutions that needed an upstream answer.",
        s.misses,
    );
    scalar(
        "pinfold_resolve_coalesced_waits_total",
        "counter",
        "Misses that waited on an identical in-flight upstream call.",
        s.coalesced_waits,
    );
    scalar(
        "pinfold_resolve_static_total",
        "counter",
        "Resolutions of tools that do not resolve (worst case, no upstream call).",
        s.static_answers,
    );
    scalar(
        "pinfold_resolve_upstream_calls_total",
        "counter",
        "Upstream tools/resolve and tools/annotations requests.",
        s.upstream_calls,
    );
    scalar(
        "pinfold_resolve_share_refusals_total",
        "counter",
        "Answers not cached because their tenant was at its share.",
        s.share_refusals,
    );
    scalar(
        "pinfold_resolve_invalidations_total",
        "counter",
        "Session invalidations (upstream list changes, ended sessions); each costs one counter operation.",
        s.invalidations,
    );
    scalar(
        "pinfold_resolve_stale_dropped_total",
        "counter",
        "Cache entries of an older session generation met by a lookup and dropped.",
        s.stale_dropped,
    );
    scalar(
        "pinfold_resolve_stale_refusals_total",
        "counter",
        "Answers not cached because their session was invalidated while they were in flight.",
        s.stale_refusals,
    );
    scalar(
        "pinfold_resolve_states_evicted_total",
        "counter",
        "Session states dropped, least recently used first, to make room (their sessions go on).",
        s.states_evicted,
    );
    scalar(
        "pinfold_resolve_cache_bytes",
        "gauge",
        "Bytes held by the resolve cache.",
        s.cache_bytes,
    );
    scalar(
        "pinfold_resolve_cache_entries",
        "gauge",
        "Entries in the resolve cache.",
        s.cache_entries,
    );
    scalar(
        "pinfold_resolve_session_states",
        "gauge",
        "Session states (upstream connections, generations) this replica holds.",
        s.session_states,
    );
    let mut labelled = |name: &str, help: &str, label: &str, values: &[(&str, u64)]| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for (l, v) in values {
            let _ = writeln!(out, "{name}{{{label}=\"{l}\"}} {v}");
        }
    };
    labelled(
        "pinfold_resolve_fallbacks_total",
        "Worst-case answers served instead of the upstream's, by reason.",
        "reason",
        &s.fallbacks,
    );
    labelled(
        "pinfold_resolve_violations_total",
        "Upstream answers outside the signature or not deterministic, by kind.",
        "kind",
        &s.violations,
    );
    let name = "pinfold_resolve_upstream_duration_seconds";
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
            "pinfold_http_requests_total{route=\"/healthz\",method=\"GET\",status=\"200\"} 2"
        ));
        assert!(text.contains("le=\"0.0005\"} 1"));
        assert!(text.contains("le=\"0.05\"} 2"));
        assert!(text.contains("pinfold_http_request_duration_seconds_count{route=\"/healthz\",method=\"GET\",status=\"200\"} 2"));
        assert!(text.contains("# TYPE pinfold_http_requests_total counter\n"));
        assert!(text.contains("pinfold_build_info{version=\""));
    }

    #[test]
    fn equal_templates_share_a_series_wherever_the_string_lives() {
        let m = Metrics::default();
        let a = String::from("/v1/tenants/{tenant}");
        let b = a.clone();
        let get = axum::http::Method::GET;
        m.record(&a, &get, 200, Duration::from_micros(50));
        m.record(&b, &get, 200, Duration::from_micros(50));
        m.record(&a, &get, 200, Duration::from_millis(3));
        // Another string at an address that once held a template: the
        // template is compared, so it cannot inherit that series.
        drop(a);
        let c = String::from("/v1/tenants/{tenant}/x");
        m.record(&c, &get, 200, Duration::from_micros(50));
        let text = m.render();
        assert!(text.contains(
            "pinfold_http_requests_total{route=\"/v1/tenants/{tenant}\",method=\"GET\",status=\"200\"} 3"
        ), "{text}");
        assert!(text.contains(
            "pinfold_http_requests_total{route=\"/v1/tenants/{tenant}/x\",method=\"GET\",status=\"200\"} 1"
        ), "{text}");
        // Buckets are cumulative in the text.
        let bucket = |le: &str| {
            format!(
                "pinfold_http_request_duration_seconds_bucket{{route=\"/v1/tenants/{{tenant}}\",method=\"GET\",status=\"200\",le=\"{le}\"}}"
            )
        };
        assert!(
            text.contains(&format!("{} 2\n", bucket("0.0001"))),
            "{text}"
        );
        assert!(text.contains(&format!("{} 2\n", bucket("0.001"))), "{text}");
        assert!(text.contains(&format!("{} 3\n", bucket("0.005"))), "{text}");
        assert!(text.contains(&format!("{} 3\n", bucket("+Inf"))), "{text}");
    }

    #[test]
    fn method_labels_are_bounded() {
        assert_eq!(method_label("GET"), "GET");
        assert_eq!(method_label("BREW"), "other");
    }
}
