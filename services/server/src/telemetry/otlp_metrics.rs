//! OTLP metrics: the same request instruments as `/metrics`, recorded from
//! the request spans when they close (names, labels and buckets come from
//! [`crate::metrics`]).

use std::fmt;
use std::time::Instant;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter, ObservableGauge};
use tracing::Subscriber;
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use super::logs::BoxedLayer;
use crate::metrics;

/// The name of the span the edge middleware opens for every request; the
/// OTLP metrics are recorded when it closes.
pub const REQUEST_SPAN: &str = "http.request";

/// The instruments on `meter`: the build-info gauge (keep it alive: its
/// callback reports while it exists) and the layer recording requests.
pub(super) fn instruments(meter: &Meter) -> (ObservableGauge<u64>, BoxedLayer) {
    let build_info = meter
        .u64_observable_gauge(metrics::BUILD_INFO.otlp)
        .with_description(metrics::BUILD_INFO.help)
        .with_callback(|o| {
            o.observe(
                1,
                &[KeyValue::new(
                    metrics::LABEL_VERSION,
                    env!("CARGO_PKG_VERSION"),
                )],
            )
        })
        .build();
    let layer = HttpMetricsLayer {
        requests: meter
            .u64_counter(metrics::HTTP_REQUESTS.otlp)
            .with_unit("{request}")
            .with_description(metrics::HTTP_REQUESTS.help)
            .build(),
        duration: meter
            .f64_histogram(metrics::HTTP_DURATION.otlp)
            .with_unit("s")
            .with_description(metrics::HTTP_DURATION.help)
            .with_boundaries(metrics::BUCKETS.to_vec())
            .build(),
    };
    let layer = layer
        .with_filter(filter_fn(|m| m.is_span() && m.name() == REQUEST_SPAN))
        .boxed();
    (build_info, layer)
}

/// Records [`metrics::HTTP_REQUESTS`] and [`metrics::HTTP_DURATION`] when a
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

impl Visit for RequestFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "http.route" => value.clone_into(&mut self.route),
            "http.method" => self.method = metrics::method_label(value),
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
            KeyValue::new(metrics::LABEL_ROUTE, f.route),
            KeyValue::new(metrics::LABEL_METHOD, f.method),
            KeyValue::new(metrics::LABEL_STATUS, f.status),
        ];
        self.requests.add(1, &attrs);
        self.duration
            .record(f.start.elapsed().as_secs_f64(), &attrs);
    }
}
