//! W3C trace context: the request span joins the caller's trace
//! (`traceparent`), and outgoing requests carry ours.

use axum::http::{HeaderMap, HeaderName, HeaderValue, Method};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator as _};
use opentelemetry::trace::{TraceContextExt as _, TraceId};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

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
        Err(_) => fresh_trace_id(),
    };
    span.record("trace.id", tracing::field::display(trace_id));
}

/// A trace id for a request that joins no exported trace: only log lines
/// carry it, so it needs to be unique and unguessable enough, not drawn
/// from the system's random source on every request. A per-process random
/// key mixed with a counter (splitmix64, a bijection: distinct counters give
/// distinct ids).
fn fresh_trace_id() -> TraceId {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static KEY: OnceLock<(u64, u64)> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let (a, b) = *KEY.get_or_init(|| uuid::Uuid::new_v4().as_u64_pair());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let hi = splitmix(a ^ n.rotate_left(32));
    let lo = splitmix(b.wrapping_add(n));
    TraceId::from_bytes(((u128::from(hi) << 64) | u128::from(lo)).to_be_bytes())
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
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

#[cfg(test)]
mod tests {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use tracing::Dispatch;
    use tracing_subscriber::Registry;
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;
    use crate::telemetry::{
        LogCapture, LogFormat, LogOutput, Settings, Telemetry, TelemetryConfig,
    };

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
    fn fresh_trace_ids_are_valid_and_distinct() {
        let ids: std::collections::HashSet<TraceId> = (0..1000).map(|_| fresh_trace_id()).collect();
        assert_eq!(ids.len(), 1000);
        assert!(!ids.contains(&TraceId::INVALID));
    }

    #[test]
    fn without_otel_the_trace_id_is_still_recorded_and_nothing_is_injected() {
        let logs = LogCapture::new();
        let settings =
            Settings::resolve(&TelemetryConfig::default(), LogFormat::Text, &|_| None).unwrap();
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
}
