//! The edge: the one tower layer every request passes through, after
//! routing (so the route *template* is known) and before the handler.
//!
//! It does, in one `Service` and one hand-written future per request
//! ([`EdgeFuture`], not boxed: the handler's future is held in place), what
//! used to take five layers (a `from_fn` middleware, an `Extension`, two
//! body-limit layers and a timeout layer, each re-boxing the route):
//!
//! - keeps a sane inbound `x-request-id` or assigns one, and echoes it;
//! - opens the request's tracing span, only when a subscriber wants it
//!   (the span's callsite is disabled at `warn`, and then no field of it is
//!   formatted, no trace context parsed);
//! - refuses a declared body over the limit at once (413) and sets the
//!   limit the body extractors apply to any other body;
//! - places the [`Authenticator`] in the request extensions, and the rate
//!   limiter with the route's class ([`crate::rate_limits`]) that
//!   `TenantScope` charges on admission;
//! - bounds the handler by the request timeout (408; the timer is armed
//!   only when the handler does not answer on its first poll);
//! - renders every error as `application/problem+json` carrying the request
//!   id, including rejections that never reached a handler (unknown route,
//!   405, body limit, timeout), except a body the handler marked
//!   [`NotAProblem`] (the official registry API's `{"error"}` 404s);
//! - adds RFC 9728 `resource_metadata` to the challenge of every `401`;
//! - records the request metrics by route template.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pinfold_http::Authenticator;
use pinfold_http::body::too_large;
use pinfold_http::problem::{ApiError, NotAProblem, PROBLEM_JSON, RenderedProblem};
use pinfold_http::ratelimit::{Charge, RateLimiter};
use tower::{Layer, Service};

use crate::metrics::{Metrics, UNMATCHED_ROUTE};
use crate::protected_resource::{
    PROTECTED_RESOURCE_PATH, ProtectedResource, add_resource_metadata,
};

/// The request id header.
pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// What the edge needs, shared by every route.
struct Shared {
    metrics: Arc<Metrics>,
    authn: Arc<Authenticator>,
    body_limit: usize,
    timeout: Duration,
    /// Names the RFC 9728 metadata every `401` points at.
    protected: Arc<ProtectedResource>,
    /// Rate limits (`None`: off).
    limiter: Option<Arc<RateLimiter>>,
}

impl Shared {
    /// What a request of `method` on the route `template` is handed to
    /// charge (`None` when limits are off or the route has no class).
    fn charge(&self, method: &axum::http::Method, template: &str) -> Option<Charge> {
        let limiter = self.limiter.as_ref()?;
        let class = crate::rate_limits::classify(method, template)?;
        Some(Charge {
            limiter: limiter.clone(),
            class,
        })
    }
}

/// The edge layer (see the module documentation).
#[derive(Clone)]
pub struct EdgeLayer(Arc<Shared>);

impl EdgeLayer {
    /// An edge recording into `metrics`, authenticating with `authn`,
    /// refusing bodies over `body_limit` bytes and answering 408 after
    /// `timeout`; every `401` names `protected`'s metadata; tenant routes
    /// are charged to `limiter`.
    pub fn new(
        metrics: Arc<Metrics>,
        authn: Arc<Authenticator>,
        body_limit: usize,
        timeout: Duration,
        protected: Arc<ProtectedResource>,
        limiter: Option<Arc<RateLimiter>>,
    ) -> EdgeLayer {
        EdgeLayer(Arc::new(Shared {
            metrics,
            authn,
            body_limit,
            timeout,
            protected,
            limiter,
        }))
    }
}

impl<S> Layer<S> for EdgeLayer {
    type Service = Edge<S>;

    fn layer(&self, inner: S) -> Edge<S> {
        Edge {
            inner,
            shared: self.0.clone(),
        }
    }
}

/// The edge service around one route.
#[derive(Clone)]
pub struct Edge<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> Service<Request> for Edge<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = EdgeFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request) -> EdgeFuture<S::Future> {
        let start = Instant::now();
        let shared = self.shared.clone();
        let rid = request_id(req.headers());
        // An `Arc` clone: the template itself is never copied.
        let matched = req.extensions().get::<MatchedPath>().cloned();
        let span = request_span(
            req.method(),
            req.headers(),
            matched.as_ref().map_or(UNMATCHED_ROUTE, |m| m.as_str()),
            &rid,
        );
        let method = req.method().clone();
        // Only needed to name the metadata URL of a 401 when no public URL
        // is configured; a `HeaderValue` clone shares its bytes.
        let host = if shared.protected.public_url.is_none() {
            req.headers().get(header::HOST).cloned()
        } else {
            None
        };
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let too_big = declared.is_some_and(|n| n > shared.body_limit as u64);
        let inner = if too_big {
            None
        } else {
            if !axum::body::HttpBody::is_end_stream(req.body()) {
                // What the body extractors (`Bytes`, `StrictJson` ...) apply
                // to a body sent without a length, or with one we accepted.
                DefaultBodyLimit::max(shared.body_limit).apply(&mut req);
            }
            // The operational routes never authenticate: they skip the
            // insert.
            if matched.as_ref().is_some_and(|m| authenticates(m.as_str())) {
                req.extensions_mut().insert(shared.authn.clone());
            }
            if let Some(charge) = matched
                .as_ref()
                .and_then(|m| shared.charge(&method, m.as_str()))
            {
                req.extensions_mut().insert(charge);
            }
            Some(self.inner.call(req))
        };
        EdgeFuture {
            inner,
            timer: None,
            converting: None,
            done: Some(Done {
                shared,
                rid,
                route: Route::Matched(matched),
                span,
                method,
                host,
                start,
            }),
        }
    }
}

impl EdgeLayer {
    /// The edge's part of a request the application answers before
    /// routing ([`crate::fastpath`]), begun from its method and headers:
    /// [`Begun::around`] then wraps the handler.
    pub(crate) fn begin(
        &self,
        method: axum::http::Method,
        headers: &axum::http::HeaderMap,
        route: &'static str,
        start: Instant,
    ) -> Begun {
        let shared = self.0.clone();
        let rid = request_id(headers);
        let span = request_span(&method, headers, route, &rid);
        let host = if shared.protected.public_url.is_none() {
            headers.get(header::HOST).cloned()
        } else {
            None
        };
        Begun(Done {
            shared,
            rid,
            route: Route::Fixed(route),
            span,
            method,
            host,
            start,
        })
    }

    /// The largest request body accepted.
    pub(crate) fn body_limit(&self) -> usize {
        self.0.body_limit
    }

    /// What a routed request of `method` on `template` is handed to charge,
    /// for a request answered before routing.
    pub(crate) fn charge(&self, method: &axum::http::Method, template: &str) -> Option<Charge> {
        self.0.charge(method, template)
    }
}

/// A request the edge has begun ([`EdgeLayer::begin`]).
pub(crate) struct Begun(Done);

impl Begun {
    /// The edge around `handler` (which reads the body itself): bounded by
    /// the request timeout, run in the request's span, its answer finished
    /// as a routed one is (the request id, problem rendering, the metadata
    /// of a `401`, the metrics under the route begun with).
    pub(crate) fn around<F>(self, handler: F) -> EdgeFuture<F> {
        EdgeFuture {
            inner: Some(handler),
            timer: None,
            converting: None,
            done: Some(self.0),
        }
    }
}

/// The route template an answer's metrics are recorded under.
enum Route {
    /// What the router matched (`None`: nothing).
    Matched(Option<MatchedPath>),
    /// A route answered before routing.
    Fixed(&'static str),
}

impl Route {
    fn as_str(&self) -> &str {
        match self {
            Route::Matched(m) => m.as_ref().map_or(UNMATCHED_ROUTE, |m| m.as_str()),
            Route::Fixed(t) => t,
        }
    }
}

/// Whether a route may read the [`Authenticator`]: all but the operational
/// ones (probes, metrics, the API documents and the RFC 9728 metadata),
/// which are public. A route missing here that does authenticate answers
/// 500 (`no Authenticator installed`), which every route's tests would see.
fn authenticates(template: &str) -> bool {
    !(matches!(
        template,
        "/healthz" | "/readyz" | "/metrics" | "/openapi.json"
    ) || template.starts_with(PROTECTED_RESOURCE_PATH)
        || template.starts_with("/docs"))
}

/// What the edge keeps of a request to finish its answer.
struct Done {
    shared: Arc<Shared>,
    rid: HeaderValue,
    route: Route,
    span: tracing::Span,
    method: axum::http::Method,
    host: Option<HeaderValue>,
    start: Instant,
}

pin_project_lite::pin_project! {
    /// The edge's answer to one request. Written out rather than an
    /// `async` block so that a request costs no allocation of its own: the
    /// handler's future is held in place, the request-timeout timer is
    /// armed only if the handler does not answer on its first poll (most
    /// answers from memory never touch the timer wheel), and only the rare
    /// plain-text error whose body must be read is boxed.
    pub struct EdgeFuture<F> {
        #[pin]
        inner: Option<F>,
        #[pin]
        timer: Option<tokio::time::Sleep>,
        converting: Option<Pin<Box<dyn Future<Output = Response> + Send>>>,
        done: Option<Done>,
    }
}

impl<F> Future for EdgeFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Some(converting) = this.converting.as_mut() {
            let resp = std::task::ready!(converting.as_mut().poll(cx));
            *this.converting = None;
            return Poll::Ready(Ok(complete(this.done, resp)));
        }
        let Some(done) = this.done.as_ref() else {
            panic!("EdgeFuture polled after completion");
        };
        let answer = match this.inner.as_mut().as_pin_mut() {
            None => Err(too_large()),
            Some(fut) => {
                // The handler runs inside the request's span.
                let polled = {
                    let _entered = done.span.enter();
                    fut.poll(cx)
                };
                match polled {
                    Poll::Ready(Ok(r)) => Ok(r),
                    Poll::Ready(Err(never)) => match never {},
                    Poll::Pending => {
                        if this.timer.is_none() {
                            let deadline =
                                tokio::time::Instant::from_std(done.start + done.shared.timeout);
                            this.timer.set(Some(tokio::time::sleep_until(deadline)));
                        }
                        match this.timer.as_mut().as_pin_mut().map(|t| t.poll(cx)) {
                            Some(Poll::Ready(())) => Err(ApiError::new(
                                StatusCode::REQUEST_TIMEOUT,
                                "request_timeout",
                                "Request timed out",
                            )),
                            _ => return Poll::Pending,
                        }
                    }
                }
            }
        };
        // The handler's future is done (or abandoned): drop it now.
        this.inner.set(None);
        this.timer.set(None);
        let mut resp = match answer {
            Ok(r) => r,
            Err(e) => e.into_response(),
        };
        let status = resp.status();
        if let Some(RenderedProblem(err)) = resp.extensions_mut().remove::<RenderedProblem>() {
            resp = err.into_response_with_id(Some(id_text(&done.rid)));
        } else if (status.is_client_error() || status.is_server_error())
            && resp.extensions().get::<NotAProblem>().is_none()
            && resp
                .headers()
                .get(header::CONTENT_TYPE)
                .is_none_or(|v| v.as_bytes() != PROBLEM_JSON.as_bytes())
        {
            // Rare (axum's own rejections): the plain body is read into the
            // problem's detail, which needs an `await`.
            let id = id_text(&done.rid);
            let mut converting: Pin<Box<dyn Future<Output = Response> + Send>> =
                Box::pin(async move {
                    convert_plain_error(resp)
                        .await
                        .into_response_with_id(Some(id))
                });
            return match converting.as_mut().poll(cx) {
                Poll::Ready(resp) => Poll::Ready(Ok(complete(this.done, resp))),
                Poll::Pending => {
                    *this.converting = Some(converting);
                    Poll::Pending
                }
            };
        }
        Poll::Ready(Ok(complete(this.done, resp)))
    }
}

/// The last touches of an answer: the metadata URL of a `401`, then
/// [`finish`].
fn complete(done: &mut Option<Done>, mut resp: Response) -> Response {
    let Some(d) = done.take() else {
        return resp;
    };
    if resp.status() == StatusCode::UNAUTHORIZED {
        add_resource_metadata(&mut resp, &d.shared.protected.metadata_url(d.host.as_ref()));
    }
    if let Route::Fixed(_) = d.route
        && !resp.headers().contains_key(header::CONTENT_LENGTH)
        && let Some(n) = axum::body::HttpBody::size_hint(resp.body()).exact()
    {
        // What axum's routing adds to an answer of known length.
        resp.headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(n));
    }
    finish(
        &d.shared.metrics,
        d.route.as_str(),
        &d.method,
        &mut resp,
        d.rid,
        d.start,
        &d.span,
    );
    resp
}

/// The request id to answer with: a sane inbound `x-request-id`, else a
/// fresh one.
pub(crate) fn request_id(headers: &axum::http::HeaderMap) -> HeaderValue {
    match headers.get(&X_REQUEST_ID) {
        Some(v) if valid_request_id(v) => v.clone(),
        _ => next_request_id(),
    }
}

/// What every answer gets on its way out, also one the server gives before
/// routing ([`crate::fastpath`]): the request id header, the request
/// metrics by route template, the span's status, and the request's log
/// line.
pub(crate) fn finish(
    metrics: &Metrics,
    route: &str,
    method: &axum::http::Method,
    resp: &mut Response,
    rid: HeaderValue,
    start: Instant,
    span: &tracing::Span,
) {
    resp.headers_mut().insert(X_REQUEST_ID, rid);
    let elapsed = start.elapsed();
    let status = resp.status().as_u16();
    metrics.record(route, method, status, elapsed);
    if !span.is_disabled() {
        span.record("http.status", status);
        if resp.status().is_server_error() {
            span.record("otel.status_code", "error");
        }
    }
    if resp.status().is_server_error() {
        tracing::warn!(parent: span, http.status = status,
            duration_ms = elapsed.as_secs_f64() * 1000.0, "request failed");
    } else {
        tracing::debug!(parent: span, http.status = status,
            duration_ms = elapsed.as_secs_f64() * 1000.0, "request");
    }
}

/// The request's span: the root of everything logged or traced while it is
/// handled. Disabled (and free) when no subscriber wants `info` spans of
/// this crate; only then are its fields formatted and the caller's trace
/// context read.
pub(crate) fn request_span(
    method: &axum::http::Method,
    headers: &axum::http::HeaderMap,
    route: &str,
    rid: &HeaderValue,
) -> tracing::Span {
    // The field values are evaluated only when the span is enabled.
    let span = tracing::info_span!(
        "http.request",
        http.method = method.as_str(),
        http.route = route,
        request.id = rid.to_str().unwrap_or("unknown"),
        http.status = tracing::field::Empty,
        tenant.id = tracing::field::Empty,
        trace.id = tracing::field::Empty,
        otel.name = tracing::field::Empty,
        otel.kind = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    // W3C traceparent: join the caller's trace; records `trace.id` (a no-op
    // on a disabled span).
    crate::telemetry::link_request_span(&span, headers, method, route);
    span
}

/// The request id as text (ids are checked ASCII, or generated).
pub(crate) fn id_text(rid: &HeaderValue) -> String {
    rid.to_str().unwrap_or("unknown").to_owned()
}

/// A sane inbound id: 1 to 64 of `[A-Za-z0-9._-]`.
fn valid_request_id(v: &HeaderValue) -> bool {
    let b = v.as_bytes();
    (1..=64).contains(&b.len())
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A fresh request id in UUID form: a random per-process prefix and a
/// counter, so ids are unique within the process and the hot path makes no
/// system call and no formatting pass.
fn next_request_id() -> HeaderValue {
    use std::sync::OnceLock;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    // The prefix's half of the text is formatted once; each id only writes
    // the counter's 16 hex digits (the last 4-12 groups).
    static TEMPLATE: OnceLock<[u8; 36]> = OnceLock::new();
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut text = *TEMPLATE.get_or_init(|| uuid_text(process_prefix(), 0));
    let mut n = COUNTER.fetch_add(1, Ordering::Relaxed);
    for at in (24..36).rev().chain((19..23).rev()) {
        text[at] = HEX[(n & 0xf) as usize];
        n >>= 4;
    }
    HeaderValue::from_bytes(&text).unwrap_or_else(|_| HeaderValue::from_static("unknown"))
}

/// 64 random bits drawn once per process.
pub(crate) fn process_prefix() -> u64 {
    use std::sync::OnceLock;
    static PREFIX: OnceLock<u64> = OnceLock::new();
    *PREFIX.get_or_init(|| uuid::Uuid::new_v4().as_u64_pair().0)
}

/// `hi` and `lo` as the 36 characters of a UUID (`8-4-4-4-12`, lowercase).
fn uuid_text(hi: u64, lo: u64) -> [u8; 36] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = ((u128::from(hi) << 64) | u128::from(lo)).to_be_bytes();
    let mut out = [b'-'; 36];
    let mut at = 0;
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            at += 1;
        }
        out[at] = HEX[usize::from(b >> 4)];
        out[at + 1] = HEX[usize::from(b & 0x0f)];
        at += 2;
    }
    out
}

fn code_for(status: StatusCode) -> (&'static str, &'static str) {
    match status.as_u16() {
        400 => ("bad_request", "Bad request"),
        401 => ("unauthenticated", "Authentication required"),
        403 => ("forbidden", "Forbidden"),
        404 => ("route_not_found", "Not found"),
        405 => ("method_not_allowed", "Method not allowed"),
        406 => ("not_acceptable", "Not acceptable"),
        408 => ("request_timeout", "Request timed out"),
        409 => ("conflict", "Conflict"),
        411 => ("length_required", "Length required"),
        413 => ("body_too_large", "Request body too large"),
        415 => ("unsupported_media_type", "Unsupported media type"),
        422 => ("validation_failed", "Invalid request"),
        429 => ("rate_limited", "Too many requests"),
        503 => ("unavailable", "Service unavailable"),
        _ if status.is_server_error() => ("internal_error", "Internal server error"),
        _ => ("http_error", "Request failed"),
    }
}

/// Turns an error response that did not come from an [`ApiError`] (an axum
/// rejection, a 404 or 405 of the router) into a problem.
async fn convert_plain_error(resp: Response) -> ApiError {
    let status = resp.status();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        return too_large();
    }
    let (code, title) = code_for(status);
    let mut err = ApiError::new(status, code, title);
    let is_text = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/plain"));
    if status.is_client_error() && is_text {
        let bytes = axum::body::to_bytes(resp.into_body(), 4096)
            .await
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes).trim().to_owned();
        if !text.is_empty() {
            err = err.detail(text);
        }
    } else if status.is_server_error() {
        err = ApiError::internal();
        err.status = status;
    }
    err
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_have_the_uuid_form_and_differ() {
        let a = next_request_id();
        let b = next_request_id();
        assert_ne!(a, b);
        let a = a.to_str().unwrap();
        assert_eq!(a.len(), 36);
        assert!(valid_request_id(&HeaderValue::from_str(a).unwrap()));
        let parsed = uuid::Uuid::parse_str(a).expect("a UUID");
        assert_eq!(parsed.to_string(), a, "lowercase, hyphenated");
    }

    #[test]
    fn generated_ids_count_up_in_their_last_groups() {
        let a = next_request_id();
        let b = next_request_id();
        let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
        assert_eq!(a[..19], b[..19], "the process prefix");
        let counter = |s: &str| u64::from_str_radix(&s[19..].replace('-', ""), 16).unwrap();
        assert!(counter(b) > counter(a));
        assert_eq!(
            a,
            std::str::from_utf8(&uuid_text(process_prefix(), counter(a))).unwrap()
        );
    }

    #[test]
    fn uuid_text_matches_the_uuid_crate() {
        for (hi, lo) in [
            (0, 0),
            (u64::MAX, 1),
            (0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210),
        ] {
            let text = uuid_text(hi, lo);
            assert_eq!(
                std::str::from_utf8(&text).unwrap(),
                uuid::Uuid::from_u64_pair(hi, lo).to_string()
            );
        }
    }

    #[test]
    fn inbound_ids_are_checked() {
        assert!(valid_request_id(&HeaderValue::from_static("abc-123_x.y")));
        assert!(!valid_request_id(&HeaderValue::from_static("bad id")));
        assert!(!valid_request_id(&HeaderValue::from_static("")));
        let long = "a".repeat(65);
        assert!(!valid_request_id(&HeaderValue::from_str(&long).unwrap()));
    }
}
