//! The application as hyper calls it: the router, behind two fast paths
//! for the requests clients repeat most.
//!
//! ## A version record that has not changed
//!
//! A conditional read of a version record (`GET .../versions/{version}`
//! with `If-None-Match` → `304`).
//!
//! Clients and gateways revalidate the signatures they hold at call time,
//! so this request dominates a registry's traffic. Through the router it
//! costs about twice a bare axum `304` (callgrind, `bench/instructions.sh`):
//! routing allocates the three path parameters and percent-decodes them,
//! the edge and the extractors insert extensions, the request parts are
//! built and dropped. Everything the answer depends on is in memory:
//! the verified-token cache, the caller's tenant and roles, and the ETag
//! index. So [`App`] answers it before routing **only when all of it is
//! already there**, and otherwise hands the request to the router
//! unchanged:
//!
//! - the method is `GET`, the path has exactly the route's shape with no
//!   percent-escape but `%2F` in the server name, no query, no body;
//! - the bearer token is in the authenticator's cache and not expired;
//! - the token's own tenant is the path's tenant and it holds a tenant
//!   role, `platform` not being one (a `platform` token, another tenant, a
//!   missing role all take the router, which answers 404 or 403);
//! - the ETag index holds the server (keyed by its canonical, lowercase
//!   name) and `If-None-Match` names the version's current record.
//!
//! Then the answer is the router's, header for header: `304` with the
//! `ETag`, the request id, the request metrics under the route's template,
//! the span (when a subscriber wants it) with the tenant and status, the
//! rate-limit charge of the `reads` class (refused: the same `429`
//! problem). Every other outcome (a `200`, any error) comes from the
//! router, so its behaviour is defined in one place.
//!
//! ## A message to the guard
//!
//! A `POST` to the guard's MCP endpoint (`/t/{tenant}/mcp/{server}`) is
//! every message an MCP client sends through Pinfold: its `tools/list`
//! and every `tools/call`. Through the router, matching the wildcard path,
//! percent-decoding and allocating its two parameters, the extractors and
//! the request's rebuilt parts cost about a fifth of a served list. The
//! endpoint has one handler, [`EndpointState::message`], that takes the
//! path's segments, the caller and the read body; so when
//!
//! - the method is `POST`, the path has exactly the endpoint's shape with
//!   no percent-escape, and there is no query;
//! - the body's length is declared (`Content-Length`) and within the body
//!   limit;
//! - the bearer token is in the authenticator's cache and not expired,
//!
//! the application reads the body itself and calls that handler, inside
//! the edge ([`EdgeLayer::begin`]): the same request id, span, request
//! timeout, problem rendering, metrics under the endpoint's template and
//! rate-limit class (`guard`, charged by the handler) as a routed request.
//! The handler decides everything else (the tenant, the role, the origin,
//! the route) as it does for a routed request, so the
//! answer is the router's, byte for byte but the request id. Any other
//! request to the endpoint (a token not yet verified, a chunked body, an
//! escaped path, `GET` and `DELETE`) takes the router.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::Router;
use std::future::Future;
use std::pin::Pin;

use axum::body::Bytes;
use axum::body::HttpBody;
use axum::http::{HeaderValue, Method, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::future::{Either, Ready, ready};
use http_body_util::BodyExt as _;
use pinfold_guard::endpoint::EndpointState;
use pinfold_http::Authenticator;
use pinfold_http::auth::{Auth, Role};
use pinfold_http::ratelimit::{Charge, RateLimiter, RouteClass};
use pinfold_registry::RegistryState;
use pinfold_registry::index::VERSION_ROUTE;
use tower::Service;

use crate::edge::{self, EdgeFuture, EdgeLayer};
use crate::metrics::Metrics;

/// The longest server name the fast path decodes (longer ones take the
/// router; the registry's own limit on names is far below it).
const MAX_NAME_BYTES: usize = 256;

/// What the fast path reads.
struct Fast {
    registry: RegistryState,
    authn: Arc<Authenticator>,
    metrics: Arc<Metrics>,
    /// The limiter with the route's class (classified once, here).
    limiter: Option<(Arc<RateLimiter>, RouteClass)>,
    answered: AtomicU64,
}

/// What the guard's fast path reads.
struct GuardFast {
    endpoint: EndpointState,
    authn: Arc<Authenticator>,
    edge: EdgeLayer,
    /// The endpoint's rate-limit class, as the edge hands it to a routed
    /// request (classified once, here).
    charge: Option<Charge>,
    answered: AtomicU64,
}

/// The router behind the fast paths (module docs).
#[derive(Clone)]
pub struct App {
    router: Router,
    fast: Option<Arc<Fast>>,
    guard: Option<Arc<GuardFast>>,
}

/// The guard's handler as the fast path runs it.
type GuardAnswer = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

impl App {
    /// `router` alone: every request is routed.
    pub fn routed(router: Router) -> App {
        App {
            router,
            fast: None,
            guard: None,
        }
    }

    /// This application, with messages to the guard's endpoint handed to
    /// `endpoint` before routing (module docs) inside `edge`, the layer
    /// the router's routes are under.
    pub fn with_guard_fast_path(
        mut self,
        endpoint: EndpointState,
        authn: Arc<Authenticator>,
        edge: EdgeLayer,
    ) -> App {
        let charge = edge.charge(&Method::POST, pinfold_guard::endpoint::PATH);
        self.guard = Some(Arc::new(GuardFast {
            endpoint,
            authn,
            edge,
            charge,
            answered: AtomicU64::new(0),
        }));
        self
    }

    /// How many messages the guard's fast path took (for tests).
    pub fn guard_fast_answers(&self) -> u64 {
        self.guard
            .as_ref()
            .map_or(0, |g| g.answered.load(Ordering::Relaxed))
    }

    /// `router` behind the fast path over the registry's index.
    pub fn with_fast_path(
        router: Router,
        registry: RegistryState,
        authn: Arc<Authenticator>,
        metrics: Arc<Metrics>,
        limiter: Option<Arc<RateLimiter>>,
    ) -> App {
        App {
            router,
            guard: None,
            fast: Some(Arc::new(Fast {
                registry,
                authn,
                metrics,
                limiter: limiter.and_then(|l| {
                    crate::rate_limits::classify(&Method::GET, VERSION_ROUTE).map(|c| (l, c))
                }),
                answered: AtomicU64::new(0),
            })),
        }
    }

    /// How many requests the fast path answered (for tests).
    pub fn fast_answers(&self) -> u64 {
        self.fast
            .as_ref()
            .map_or(0, |f| f.answered.load(Ordering::Relaxed))
    }
}

impl<B> Service<Request<B>> for App
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<
        Either<Ready<Result<Response, Infallible>>, axum::routing::future::RouteFuture<Infallible>>,
        EdgeFuture<GuardAnswer>,
    >;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // The router is always ready.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        if let Some(fast) = &self.fast
            && let Some(resp) = fast.answer(&req)
        {
            return Either::Left(Either::Left(ready(Ok(resp))));
        }
        if let Some(guard) = &self.guard
            && let Some(auth) = guard.takes(&req)
        {
            return Either::Right(guard.answer(req, auth));
        }
        Either::Left(Either::Right(self.router.call(req)))
    }
}

/// The segments of `/t/{tenant}/mcp/{server}` when the path has exactly
/// that shape and nothing to decode (the server name keeps its slash).
fn split_guard_path(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/t/")?;
    let (tenant, rest) = rest.split_once('/')?;
    let server = rest.strip_prefix("mcp/")?;
    (!tenant.is_empty() && !server.is_empty() && !path.contains('%')).then_some((tenant, server))
}

/// The whole of `body`, at most `limit` bytes: a body that comes in one
/// frame (a small one usually does) is that frame, not copied; more frames
/// are joined. Trailers are ignored, as the router's body extractor does.
async fn read_body<B>(body: B, limit: usize) -> Result<Bytes, axum::BoxError>
where
    B: HttpBody<Data = Bytes>,
    B::Error: Into<axum::BoxError>,
{
    let mut body = std::pin::pin!(body);
    let mut first: Option<Bytes> = None;
    let mut joined: Vec<u8> = Vec::new();
    let mut len = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(Into::into)?.into_data() else {
            continue;
        };
        len += data.len();
        if len > limit {
            return Err("length limit exceeded".into());
        }
        match first.take() {
            None if joined.is_empty() => first = Some(data),
            prior => {
                if let Some(p) = prior {
                    joined.extend_from_slice(&p);
                }
                joined.extend_from_slice(&data);
            }
        }
    }
    Ok(first.unwrap_or_else(|| Bytes::from(joined)))
}

impl GuardFast {
    /// The caller, when the fast path takes the request (module docs).
    fn takes<B: HttpBody>(&self, req: &Request<B>) -> Option<Auth> {
        if req.method() != Method::POST || req.uri().query().is_some() {
            return None;
        }
        split_guard_path(req.uri().path())?;
        // A length known up front (hyper's body of a `Content-Length`).
        let declared = req.body().size_hint().exact()?;
        if declared > self.edge.body_limit() as u64 {
            return None;
        }
        let headers = req.headers();
        let principal = self
            .authn
            .cached_header(headers.get(header::AUTHORIZATION)?)?;
        Some(Auth(principal))
    }

    /// Reads the body and hands the message to the endpoint, inside the
    /// edge.
    fn answer<B>(&self, req: Request<B>, auth: Auth) -> EdgeFuture<GuardAnswer>
    where
        B: HttpBody<Data = Bytes> + Send + 'static,
        B::Error: Into<axum::BoxError>,
    {
        let start = Instant::now();
        self.answered.fetch_add(1, Ordering::Relaxed);
        let (mut parts, body) = req.into_parts();
        let begun = self.edge.begin(
            Method::POST,
            &parts.headers,
            pinfold_guard::endpoint::PATH,
            start,
        );
        let headers = std::mem::take(&mut parts.headers);
        let endpoint = self.endpoint.clone();
        let charge = self.charge.clone();
        let limit = self.edge.body_limit();
        let handler: GuardAnswer = Box::pin(async move {
            let body = match read_body(body, limit).await {
                Ok(bytes) => bytes,
                // As the router's body extractor says it (the edge renders
                // it as a problem).
                Err(e) => {
                    return Ok((
                        StatusCode::BAD_REQUEST,
                        format!("Failed to buffer the request body: {e}"),
                    )
                        .into_response());
                }
            };
            let (tenant, server) = split_guard_path(parts.uri.path()).unwrap_or_default();
            Ok(endpoint
                .message(tenant, server, Ok(auth), charge, headers, body)
                .await)
        });
        begun.around(handler)
    }
}

/// The parts of `/v1/tenants/{tenant}/servers/{server}/versions/{version}`.
fn split_version_path(path: &str) -> Option<(&str, &str, &str)> {
    let rest = path.strip_prefix("/v1/tenants/")?;
    let (tenant, rest) = rest.split_once('/')?;
    let rest = rest.strip_prefix("servers/")?;
    let (server, rest) = rest.split_once('/')?;
    let version = rest.strip_prefix("versions/")?;
    let plain = |s: &str| !s.is_empty() && !s.contains(['/', '%']);
    (plain(tenant) && !server.is_empty() && plain(version)).then_some((tenant, server, version))
}

/// The server segment as its canonical key, when it can only mean that:
/// `%2F` (either case) is the only escape, and no uppercase letter (the
/// canonical form is lowercase; other names take the router, which
/// parses them properly).
fn canonical_server<'a>(segment: &str, buf: &'a mut [u8; MAX_NAME_BYTES]) -> Option<&'a str> {
    let bytes = segment.as_bytes();
    let mut len = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = match bytes[i] {
            b'%' => {
                if !matches!(bytes.get(i + 1..i + 3), Some(b"2F" | b"2f")) {
                    return None;
                }
                i += 3;
                b'/'
            }
            b if b.is_ascii_uppercase() || !b.is_ascii() => return None,
            b => {
                i += 1;
                b
            }
        };
        *buf.get_mut(len)? = b;
        len += 1;
    }
    std::str::from_utf8(&buf[..len]).ok()
}

impl Fast {
    /// The `304` when everything it needs is in memory (module docs).
    fn answer<B: HttpBody>(&self, req: &Request<B>) -> Option<Response> {
        if req.method() != Method::GET || req.uri().query().is_some() || !req.body().is_end_stream()
        {
            return None;
        }
        let (tenant, server, version) = split_version_path(req.uri().path())?;
        let headers = req.headers();
        let inm = headers.get(header::IF_NONE_MATCH)?.to_str().ok()?;
        let principal = self
            .authn
            .cached_header(headers.get(header::AUTHORIZATION)?)?;
        let own = principal.tenant.as_ref()?;
        if own.as_str() != tenant || !principal.has_any(&Role::TENANT) {
            return None;
        }
        let mut buf = [0u8; MAX_NAME_BYTES];
        let key = canonical_server(server, &mut buf)?;
        let etag =
            pinfold_registry::index::not_modified(&self.registry.index, own, key, version, inm)?;
        // From here on the fast path answers, whatever happens.
        let start = Instant::now();
        let rid = edge::request_id(headers);
        let span = edge::request_span(&Method::GET, headers, VERSION_ROUTE, &rid);
        if !span.is_disabled() {
            span.record("tenant.id", own.as_str());
        }
        let limited = self
            .limiter
            .as_ref()
            .and_then(|(limiter, class)| limiter.check(own, &principal, *class).err());
        let mut resp = match limited {
            Some(limited) => limited
                .into_error()
                .into_response_with_id(Some(edge::id_text(&rid))),
            None => {
                let mut r = StatusCode::NOT_MODIFIED.into_response();
                r.headers_mut().insert(header::ETAG, etag);
                // What axum's routing adds to a response of known length.
                r.headers_mut()
                    .insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
                r
            }
        };
        edge::finish(
            &self.metrics,
            VERSION_ROUTE,
            &Method::GET,
            &mut resp,
            rid,
            start,
            &span,
        );
        self.answered.fetch_add(1, Ordering::Relaxed);
        Some(resp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_version_route_shape_is_taken() {
        assert_eq!(
            split_version_path("/v1/tenants/acme/servers/io.x%2Fy/versions/1.0.0"),
            Some(("acme", "io.x%2Fy", "1.0.0"))
        );
        assert_eq!(
            split_version_path("/v1/tenants/acme/servers/s/versions/latest"),
            Some(("acme", "s", "latest"))
        );
        for other in [
            "/v1/tenants/acme/servers/s/versions/1.0.0/card",
            "/v1/tenants/acme/servers/s/versions/",
            "/v1/tenants/acme/servers/s/versions",
            "/v1/tenants/acme/servers/s",
            "/v1/tenants//servers/s/versions/1",
            "/v1/tenants/a%63me/servers/s/versions/1",
            "/v1/tenants/acme/servers/s/versions/1%2E0",
            "/v1/tenants/acme/servers//versions/1",
            "/v2/tenants/acme/servers/s/versions/1",
        ] {
            assert_eq!(split_version_path(other), None, "{other}");
        }
    }

    #[tokio::test]
    async fn a_body_is_read_whole_within_its_limit() {
        use http_body_util::{Full, StreamBody};
        use hyper::body::Frame;
        let frames = |parts: Vec<&'static [u8]>| {
            StreamBody::new(futures::stream::iter(
                parts
                    .into_iter()
                    .map(|p| Ok::<_, Infallible>(Frame::data(Bytes::from_static(p)))),
            ))
        };
        let read = read_body(frames(vec![b"ab", b"cd", b"e"]), 5)
            .await
            .unwrap();
        assert_eq!(read, "abcde");
        assert!(read_body(frames(vec![b"abc", b"def"]), 5).await.is_err());
        assert_eq!(read_body(frames(vec![]), 5).await.unwrap(), "");
        // One frame is taken as it came, not copied.
        let one = Bytes::from_static(b"hello");
        let read = read_body(Full::new(one.clone()), 5).await.unwrap();
        assert_eq!(read.as_ptr(), one.as_ptr());
    }

    #[test]
    fn only_the_guard_endpoint_shape_without_escapes_is_taken() {
        assert_eq!(
            split_guard_path("/t/acme/mcp/io.github.acme/notes"),
            Some(("acme", "io.github.acme/notes"))
        );
        assert_eq!(
            split_guard_path("/t/acme/mcp/notes"),
            Some(("acme", "notes"))
        );
        for other in [
            "/t/acme/mcp/",
            "/t//mcp/notes",
            "/t/acme/mcp",
            "/t/acme/v0.1/servers",
            "/t/acme/mcp/io.github.acme%2Fnotes",
            "/t/ac%6De/mcp/notes",
            "/v1/tenants/acme/servers/notes/guard",
            "/console/t/acme/mcp/notes",
        ] {
            assert_eq!(split_guard_path(other), None, "{other}");
        }
    }

    #[test]
    fn the_guard_route_constant_is_the_endpoint_path() {
        assert_eq!(pinfold_guard::endpoint::PATH, "/t/{tenant}/mcp/{*server}");
    }

    #[test]
    fn only_plain_lowercase_names_with_an_escaped_slash_are_decoded() {
        let mut buf = [0u8; MAX_NAME_BYTES];
        assert_eq!(
            canonical_server("io.github.acme%2Ffiles", &mut buf),
            Some("io.github.acme/files")
        );
        assert_eq!(canonical_server("io.x%2fy", &mut buf), Some("io.x/y"));
        for other in ["Io.x%2Fy", "io.x%2Gy", "io.x%2", "io.x%20y", "caf\u{e9}"] {
            assert_eq!(canonical_server(other, &mut buf), None, "{other}");
        }
        let long = "a".repeat(MAX_NAME_BYTES + 1);
        assert_eq!(canonical_server(&long, &mut buf), None);
        let max = "a".repeat(MAX_NAME_BYTES);
        assert_eq!(canonical_server(&max, &mut buf), Some(max.as_str()));
    }

    #[test]
    fn the_route_constant_is_the_registry_route() {
        let doc = pinfold_registry::router().into_openapi();
        let item = doc
            .paths
            .paths
            .get(VERSION_ROUTE)
            .expect("the registry serves the version route");
        assert!(item.get.is_some(), "as a GET");
    }
}
