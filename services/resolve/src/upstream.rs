//! The upstream MCP client: the official Rust SDK (`rmcp`) over Streamable
//! HTTP, on our own reqwest clients.
//!
//! - One reqwest client (connection pool) per upstream origin: no
//!   redirects, 2 s connect timeout. The total timeout of a resolution is
//!   applied around the whole exchange by the engine, so that the
//!   long-lived notification stream is not cut by it; when it passes, the
//!   engine closes the MCP connection, which drops its HTTP connections.
//! - A JSON answer, and each server-sent event of a streamed answer, is read
//!   up to `max_response_bytes` (1 MiB by default); a larger one fails the
//!   exchange, so an endless or oversized answer costs bounded memory.
//! - One MCP connection per Pinfold session and replica, made lazily on the
//!   first miss. With a server that offers MCP 2026-07-28 it is
//!   sessionless (`server/discover`; the client repeats its version and
//!   capabilities in every request's `_meta`, and list changes arrive on a
//!   `subscriptions/listen` stream); otherwise `initialize` (2025-11-25)
//!   once, and rmcp keeps the negotiated capabilities and the MCP session
//!   id, re-initializing when the upstream forgets the session. A
//!   connection that fails at the transport level is dropped and made
//!   again on the next miss.
//! - On a sessionless connection, resolve calls are sent by
//!   the `direct` module on the same reqwest client (one POST, one answer),
//!   not through rmcp's transport worker; rmcp still opens the connection
//!   and keeps its `subscriptions/listen` stream. A 2025-11-25 connection
//!   sends them through rmcp.
//! - The client advertises the tool-resolution extension under
//!   `capabilities.extensions`, sends `tools/resolve` (SEP-1862) or
//!   `tools/annotations` (dynamic-annotations seed), and adds the session's
//!   upstream headers — never the caller's Pinfold token, which this crate
//!   never sees.
//! - `notifications/tools/list_changed` from the upstream calls the hook
//!   given at connection time (the engine invalidates the session).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures::StreamExt as _;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientRequest, CustomRequest, Implementation,
    ProtocolVersion, ServerNotification, ServerResult, SubscriptionFilter,
};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt, NotificationContext,
    RunningService, ServiceError,
};
use rmcp::transport::DynamicTransportError;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    HttpStatusError, SseError, StreamableHttpClient, StreamableHttpClientTransportConfig,
    StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::direct::{Direct, DirectParts};
use crate::prepared::TOOL_RESOLUTION;

/// Where a session's upstream lives and the headers to send it.
#[derive(Clone, PartialEq, Eq)]
pub struct UpstreamTarget {
    /// The MCP endpoint (`http` or `https`).
    pub url: String,
    /// Headers added to every upstream request (credentials: never logged).
    pub headers: Vec<(String, String)>,
}

impl fmt::Debug for UpstreamTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("UpstreamTarget")
            .field("url", &self.url)
            .field("headers", &format_args!("{names:?} (values redacted)"))
            .finish()
    }
}

/// Why an upstream target was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// Not an absolute `http(s)` URL.
    #[error("upstream url must be an absolute http or https URL")]
    InvalidUrl,
    /// A header name or value that HTTP does not allow.
    #[error("upstream header {0:?} is not a valid HTTP header")]
    InvalidHeader(String),
    /// A header the MCP transport sets itself.
    #[error("upstream header {0:?} is set by the MCP transport and cannot be given")]
    ReservedHeader(String),
}

/// Headers the MCP transport or HTTP itself sets (lowercase): a session
/// cannot configure them.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "content-length",
    "host",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
    "connection",
    "transfer-encoding",
    "te",
    "upgrade",
    "keep-alive",
    "proxy-connection",
];

/// Whether an upstream header name (any case) is one the transport sets
/// itself and a session therefore cannot give.
pub fn is_reserved_header(name: &str) -> bool {
    RESERVED_HEADERS
        .iter()
        .any(|r| r.eq_ignore_ascii_case(name))
}

impl UpstreamTarget {
    /// Checks the URL and headers (what session creation should call).
    pub fn validate(&self) -> Result<(), TargetError> {
        origin(&self.url).ok_or(TargetError::InvalidUrl)?;
        self.header_map().map(|_| ())
    }

    fn header_map(&self) -> Result<HashMap<HeaderName, HeaderValue>, TargetError> {
        let mut out = HashMap::new();
        for (n, v) in &self.headers {
            let name = HeaderName::try_from(n.as_str())
                .map_err(|_| TargetError::InvalidHeader(n.clone()))?;
            if is_reserved_header(name.as_str()) {
                return Err(TargetError::ReservedHeader(n.clone()));
            }
            let mut value = HeaderValue::try_from(v.as_str())
                .map_err(|_| TargetError::InvalidHeader(n.clone()))?;
            value.set_sensitive(true);
            out.insert(name, value);
        }
        Ok(out)
    }
}

/// `scheme://host[:port]` of an absolute http(s) URL.
fn origin(url: &str) -> Option<String> {
    let u = reqwest::Url::parse(url).ok()?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
        return None;
    }
    Some(u.origin().ascii_serialization())
}

/// A failed upstream exchange (never cached).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FetchError {
    /// Unreachable, HTTP error, or a broken transport.
    Transport {
        detail: String,
        retry_after: Option<Duration>,
    },
    /// A JSON-RPC error answer.
    Rpc { code: i32, message: String },
    /// The configured total timeout passed.
    Timeout,
    /// An answer that is not a resolution result.
    Malformed(String),
}

/// The reqwest clients, one per upstream origin.
pub(crate) struct Pool {
    clients: Mutex<HashMap<String, reqwest::Client>>,
    connect_timeout: Duration,
    max_response_bytes: usize,
}

impl Pool {
    pub(crate) fn new(connect_timeout: Duration, max_response_bytes: usize) -> Self {
        Self {
            clients: Mutex::new(HashMap::new()),
            connect_timeout,
            max_response_bytes,
        }
    }

    fn client(&self, url: &str) -> Result<reqwest::Client, FetchError> {
        let origin = origin(url).ok_or_else(|| FetchError::Transport {
            detail: "invalid upstream url".into(),
            retry_after: None,
        })?;
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = clients.get(&origin) {
            return Ok(c.clone());
        }
        let c = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(self.connect_timeout)
            .pool_idle_timeout(Duration::from_secs(60))
            .tcp_nodelay(true)
            .build()
            .map_err(|e| FetchError::Transport {
                detail: format!("cannot build an HTTP client: {e}"),
                retry_after: None,
            })?;
        clients.insert(origin, c.clone());
        Ok(c)
    }
}

/// The reqwest client of one MCP connection, every request of which ends
/// when the connection's token is cancelled (the connection closed, or its
/// opening abandoned at the total timeout). rmcp awaits the first request
/// of a connection (`initialize` or `server/discover`) without watching its
/// own cancellation, so without this a hanging or trickling upstream would
/// keep that request, its task and its TCP connection forever.
#[derive(Clone)]
struct Cancellable {
    inner: reqwest::Client,
    ct: CancellationToken,
}

type HttpResult<T> = Result<T, StreamableHttpError<reqwest::Error>>;
type SseStream = BoxStream<'static, Result<sse_stream::Sse, SseError>>;

impl Cancellable {
    async fn bounded<T>(&self, fut: impl Future<Output = HttpResult<T>>) -> HttpResult<T> {
        tokio::select! {
            r = fut => r,
            () = self.ct.cancelled() => Err(StreamableHttpError::Io(std::io::Error::new(
                std::io::ErrorKind::Interrupted,
                "upstream connection closed",
            ))),
        }
    }

    fn bounded_stream(&self, s: SseStream) -> SseStream {
        s.take_until(self.ct.clone().cancelled_owned()).boxed()
    }

    fn bounded_answer(&self, r: StreamableHttpPostResponse) -> StreamableHttpPostResponse {
        match r {
            StreamableHttpPostResponse::Sse(s, id) => {
                StreamableHttpPostResponse::Sse(self.bounded_stream(s), id)
            }
            other => other,
        }
    }
}

impl StreamableHttpClient for Cancellable {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let r = self
            .bounded(
                self.inner
                    .post_message(uri, message, session_id, auth_header, custom_headers),
            )
            .await?;
        Ok(self.bounded_answer(r))
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let r = self
            .bounded(self.inner.post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            ))
            .await?;
        Ok(self.bounded_answer(r))
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let r = self
            .bounded(self.inner.post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            ))
            .await?;
        Ok(self.bounded_answer(r))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<()> {
        // Not cut by the token (closing a connection sends this DELETE after
        // cancelling it), but bounded all the same.
        tokio::time::timeout(
            Duration::from_secs(5),
            self.inner
                .delete_session(uri, session_id, auth_header, custom_headers),
        )
        .await
        .unwrap_or(Ok(()))
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<SseStream> {
        let s = self
            .bounded(self.inner.get_stream(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
            ))
            .await?;
        Ok(self.bounded_stream(s))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<SseStream> {
        let s = self
            .bounded(self.inner.get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            ))
            .await?;
        Ok(self.bounded_stream(s))
    }
}

/// Called when the upstream says its tool list changed.
pub(crate) type ListChangedHook = Arc<dyn Fn() + Send + Sync>;

struct Handler {
    info: ClientConfig,
    on_list_changed: ListChangedHook,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        (self.on_list_changed)();
    }
}

fn client_info() -> ClientConfig {
    let mut caps = ClientCapabilities::default();
    let mut ext = std::collections::BTreeMap::new();
    ext.insert(TOOL_RESOLUTION.to_owned(), Map::new());
    caps.extensions = Some(ext);
    let mut info = ClientConfig::new(
        caps,
        Implementation::new("pinfold-resolve", env!("CARGO_PKG_VERSION")),
    );
    info.protocol_version = ProtocolVersion::V_2025_11_25;
    info
}

/// One initialized MCP connection.
pub(crate) struct Connection {
    service: RunningService<RoleClient, Handler>,
    url: String,
    /// The `subscriptions/listen` task of a 2026-07-28 connection.
    listener: Option<tokio::task::JoinHandle<()>>,
    /// Ends every HTTP request of this connection ([`Cancellable`]).
    http: CancellationToken,
    /// How resolve calls go on a sessionless connection ([`Direct`]);
    /// `None` on a 2025-11-25 connection, whose calls go through rmcp.
    direct: Option<Direct>,
}

impl Connection {
    /// Connects and initializes.
    pub(crate) async fn open(
        pool: &Pool,
        target: &UpstreamTarget,
        on_list_changed: ListChangedHook,
    ) -> Result<Connection, FetchError> {
        let http = CancellationToken::new();
        // Disarmed only once the connection is made: a failed or abandoned
        // opening (the engine's total timeout drops this future) ends its
        // requests.
        let opening = http.clone().drop_guard();
        let client = Cancellable {
            inner: pool.client(&target.url)?,
            ct: http.clone(),
        };
        let headers = target.header_map().map_err(|e| FetchError::Transport {
            detail: e.to_string(),
            retry_after: None,
        })?;
        let transport = || {
            let mut config = StreamableHttpClientTransportConfig::with_uri(target.url.as_str())
                .custom_headers(headers.clone())
                .max_json_response_size(pool.max_response_bytes)
                .reinit_on_expired_session(true);
            config.max_sse_event_size = pool.max_response_bytes;
            config.max_concurrent_requests = 64;
            StreamableHttpClientTransport::with_client(client.clone(), config)
        };
        let handler = || Handler {
            info: client_info(),
            on_list_changed: on_list_changed.clone(),
        };
        let failed = |e: ClientInitializeError| FetchError::Transport {
            detail: redact(&format!("initialize failed: {e}"), &target.url),
            retry_after: retry_after_in(&e),
        };
        // 2026-07-28 (no protocol session) when the server offers it,
        // otherwise the `initialize` handshake of 2025-11-25. rmcp's Auto
        // mode falls back by itself when the server does not know
        // `server/discover`; a server that knows it but offers only older
        // versions is asked again with `initialize`.
        let lifecycle = ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        };
        let service = match handler().serve_with_lifecycle(transport(), lifecycle).await {
            Ok(s) => s,
            Err(ClientInitializeError::NoCompatibleProtocolVersion { .. }) => handler()
                .serve_with_lifecycle(transport(), ClientLifecycleMode::Initialize)
                .await
                .map_err(failed)?,
            Err(e) => return Err(failed(e)),
        };
        let modern = service
            .peer()
            .peer_info()
            .is_some_and(|i| !i.protocol_version.has_initialize());
        let listener = modern.then(|| {
            // Without a protocol session, list changes arrive on a
            // `subscriptions/listen` stream rather than the session's.
            let peer = service.peer().clone();
            let on_list_changed = on_list_changed.clone();
            tokio::spawn(async move {
                let filter = SubscriptionFilter::builder().tools_list_changed().build();
                let Ok(mut sub) = peer.listen(filter).await else {
                    tracing::debug!("upstream refused subscriptions/listen");
                    return;
                };
                while let Ok(Some(n)) = sub.next().await {
                    if matches!(n, ServerNotification::ToolListChangedNotification(_)) {
                        on_list_changed();
                    }
                }
            })
        });
        let direct = match service.peer().peer_info() {
            Some(i) if modern => {
                let info = client_info();
                Some(Direct::new(DirectParts {
                    client: client.inner.clone(),
                    url: &target.url,
                    headers: headers.into_iter().collect(),
                    protocol_version: i.protocol_version.as_str().to_owned(),
                    capabilities: serde_json::to_value(&info.capabilities).unwrap_or_default(),
                    client_info: serde_json::to_value(&info.client_info).unwrap_or_default(),
                    max: pool.max_response_bytes,
                    ct: http.clone(),
                    on_list_changed,
                })?)
            }
            _ => None,
        };
        opening.disarm();
        Ok(Connection {
            service,
            url: target.url.clone(),
            listener,
            http,
            direct,
        })
    }

    /// The negotiated protocol version.
    pub(crate) fn protocol_version(&self) -> Option<String> {
        self.service
            .peer()
            .peer_info()
            .map(|i| i.protocol_version.as_str().to_owned())
    }

    /// The server's `initialize` answer, if any.
    pub(crate) fn server_capabilities(&self) -> Option<Value> {
        self.service
            .peer()
            .peer_info()
            .and_then(|i| serde_json::to_value(&i.capabilities).ok())
    }

    /// Sends `method` (`tools/resolve` or `tools/annotations`) and returns
    /// the raw result object.
    pub(crate) async fn call(
        &self,
        method: &str,
        name: &str,
        arguments: &Value,
    ) -> Result<Value, FetchError> {
        match &self.direct {
            Some(d) => d.call(method, name, arguments).await,
            None => self.call_rmcp(method, name, arguments).await,
        }
    }

    /// [`Connection::call`] through rmcp's transport (2025-11-25).
    async fn call_rmcp(
        &self,
        method: &str,
        name: &str,
        arguments: &Value,
    ) -> Result<Value, FetchError> {
        let mut params = Map::new();
        params.insert("name".into(), Value::String(name.to_owned()));
        params.insert("arguments".into(), arguments.clone());
        // The client repeats the capability in the request itself, as
        // 2026-07-28 asks of every request: an upstream without protocol
        // sessions (or a replica of one that never saw our `initialize`)
        // still knows we speak the tool-resolution extension, instead of
        // answering -32021.
        params.insert(
            "_meta".into(),
            serde_json::json!({
                "io.modelcontextprotocol/clientCapabilities": {
                    "extensions": {TOOL_RESOLUTION: {}}
                }
            }),
        );
        let req =
            ClientRequest::CustomRequest(CustomRequest::new(method, Some(Value::Object(params))));
        match self.service.peer().send_request(req).await {
            Ok(ServerResult::CustomResult(r)) => Ok(r.0),
            // Another result type matched the untagged union first; its
            // serialisation is what the upstream sent, less unknown members.
            Ok(other) => serde_json::to_value(&other)
                .map_err(|e| FetchError::Malformed(format!("unreadable result: {e}"))),
            Err(ServiceError::McpError(e)) => Err(FetchError::Rpc {
                code: e.code.0,
                message: e.message.to_string(),
            }),
            Err(e) => Err(FetchError::Transport {
                detail: redact(&e.to_string(), &self.url),
                retry_after: retry_after_in(&e),
            }),
        }
    }

    /// True when the transport has closed (the connection must be made
    /// again).
    pub(crate) fn is_closed(&self) -> bool {
        self.service.peer().is_transport_closed()
    }

    /// Closes the connection (ends the upstream session) in the background.
    pub(crate) fn close(&self) {
        if let Some(l) = &self.listener {
            l.abort();
        }
        let ct = self.service.cancellation_token();
        ct.cancel();
        self.http.cancel();
    }
}

/// Error texts (reqwest's name the URL) with the upstream URL cut to its
/// origin: a path or query may carry a credential.
pub(crate) fn redact(detail: &str, url: &str) -> String {
    let Some(o) = origin(url) else {
        return detail.to_owned();
    };
    let cut = format!("{o}/…");
    let mut out = detail.replace(url, &cut);
    if let Ok(parsed) = reqwest::Url::parse(url) {
        out = out.replace(parsed.as_str(), &cut);
    }
    out
}

/// A `Retry-After` carried by an HTTP 429 or 5xx anywhere in an error's
/// chain: seconds, or an HTTP date.
fn retry_after_in(e: &(dyn std::error::Error + 'static)) -> Option<Duration> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(x) = cur {
        let status = x.downcast_ref::<HttpStatusError>().or_else(|| {
            match x.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
                Some(StreamableHttpError::HttpStatus(h)) => Some(h),
                _ => None,
            }
        });
        if let Some(h) = status {
            return h.retry_after.as_deref().and_then(parse_retry_after);
        }
        cur = if let Some(d) = x.downcast_ref::<DynamicTransportError>() {
            Some(d.error.as_ref())
        } else if let Some(i) = x.downcast_ref::<ClientInitializeError>() {
            match i {
                ClientInitializeError::TransportError { error, .. } => Some(error),
                ClientInitializeError::LegacyFallbackFailed { fallback, .. } => {
                    Some(fallback.as_ref())
                }
                _ => None,
            }
        } else {
            x.source()
        };
    }
    None
}

/// Parses a `Retry-After` value: delay-seconds or an IMF-fixdate.
pub(crate) fn parse_retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    if let Ok(s) = v.parse::<u64>() {
        return Some(Duration::from_secs(s));
    }
    let at = httpdate(v)?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// Parses `Sun, 06 Nov 1994 08:49:37 GMT`.
fn httpdate(v: &str) -> Option<SystemTime> {
    let parts: Vec<&str> = v.split_whitespace().collect();
    if parts.len() != 6 || parts[5] != "GMT" {
        return None;
    }
    let day: u64 = parts[1].parse().ok()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == parts[2])? as u64
        + 1;
    let year: i64 = parts[3].parse().ok()?;
    let hms: Vec<u64> = parts[4]
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if hms.len() != 3 || !(1..=31).contains(&day) || year < 1970 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y.div_euclid(400);
    let yoe = (y - era * 400) as u64;
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe as i64 - 719_468;
    let secs = days as u64 * 86_400 + hms[0] * 3600 + hms[1] * 60 + hms[2];
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pinfold_example_upstream::{Running, Switches};

    /// On a sessionless connection, Pinfold's own request and rmcp's give
    /// the same answers and the same errors; a 2025-11-25 connection has
    /// no direct caller.
    #[tokio::test]
    async fn direct_calls_answer_as_rmcp_does() {
        for legacy in [false, true] {
            let up = Running::start(
                "127.0.0.1:0".parse().unwrap(),
                Switches {
                    legacy_only: legacy,
                    require_header: Some(("x-key".into(), "k".into())),
                    ..Switches::default()
                },
            )
            .await
            .unwrap();
            let pool = Pool::new(Duration::from_secs(2), 1 << 20);
            let target = UpstreamTarget {
                url: up.url(),
                headers: vec![("x-key".into(), "k".into())],
            };
            let c = Connection::open(&pool, &target, Arc::new(|| {}))
                .await
                .unwrap();
            assert_eq!(c.direct.is_some(), !legacy, "legacy: {legacy}");
            let args = |a: &str| serde_json::json!({"path": "/a", "action": a});
            let both = async |method: &str, action: &str| {
                let via_rmcp = c.call_rmcp(method, "manage_files", &args(action)).await;
                let direct = c.call(method, "manage_files", &args(action)).await;
                (via_rmcp, direct)
            };
            for action in ["read", "delete"] {
                let (a, b) = both("tools/resolve", action).await;
                assert_eq!(a, b, "{action}");
                let a = a.unwrap();
                assert_eq!(
                    a["tool"]["annotations"]["destructiveHint"],
                    action == "delete"
                );
            }
            // Not a method the upstream knows: the same JSON-RPC error.
            let (a, b) = both("tools/unknown", "read").await;
            assert!(
                matches!(a, Err(FetchError::Rpc { code: -32601, .. })),
                "{a:?}"
            );
            assert_eq!(a, b);
            up.update(|s| s.error = true);
            let (a, b) = both("tools/resolve", "read").await;
            assert!(
                matches!(a, Err(FetchError::Rpc { code: -32603, .. })),
                "{a:?}"
            );
            assert_eq!(a, b);
            // HTTP 503 with Retry-After: a transport error carrying it.
            up.update(|s| {
                s.error = false;
                s.overloaded = Some(120);
            });
            let (a, b) = both("tools/resolve", "read").await;
            for r in [&a, &b] {
                assert!(
                    matches!(r, Err(FetchError::Transport { retry_after: Some(d), .. })
                        if *d == Duration::from_secs(120)),
                    "legacy {legacy}: {r:?}"
                );
            }
            c.close();
        }
    }

    #[test]
    fn targets_are_checked_and_redacted() {
        let t = UpstreamTarget {
            url: "https://mcp.example/x".into(),
            headers: vec![("Authorization".into(), "Bearer secret-token".into())],
        };
        assert!(t.validate().is_ok());
        let dbg = format!("{t:?}");
        assert!(!dbg.contains("secret-token") && dbg.contains("Authorization"));
        let bad = |url: &str, h: (&str, &str)| UpstreamTarget {
            url: url.into(),
            headers: vec![(h.0.into(), h.1.into())],
        };
        assert_eq!(
            bad("ftp://x/", ("a", "b")).validate(),
            Err(TargetError::InvalidUrl)
        );
        assert_eq!(
            bad("/relative", ("a", "b")).validate(),
            Err(TargetError::InvalidUrl)
        );
        assert!(matches!(
            bad("http://x/", ("Mcp-Session-Id", "b")).validate(),
            Err(TargetError::ReservedHeader(_))
        ));
        assert!(matches!(
            bad("http://x/", ("a b", "c")).validate(),
            Err(TargetError::InvalidHeader(_))
        ));
        assert!(matches!(
            bad("http://x/", ("a", "c\nd")).validate(),
            Err(TargetError::InvalidHeader(_))
        ));
    }

    #[test]
    fn retry_after_values() {
        assert_eq!(parse_retry_after("120"), Some(Duration::from_secs(120)));
        assert_eq!(
            httpdate("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
        assert_eq!(
            origin("http://a.b:81/x?y").as_deref(),
            Some("http://a.b:81")
        );
    }
}
