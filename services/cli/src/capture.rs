//! `pinfold capture`: list what a live MCP server offers and write a draft
//! server card with its signature.
//!
//! The client is the official Rust SDK (`rmcp`), over Streamable HTTP (our
//! own reqwest client: no redirects, bounded timeouts, the `--header`s on
//! every request) or over stdio (a child process started from
//! `--command`). It negotiates MCP 2026-07-28 (`server/discover`, no
//! protocol session) when the server offers it and otherwise the
//! `initialize` handshake of 2025-11-25, then runs every list the server
//! advertises (`tools/list`, `prompts/list`, `resources/list`,
//! `resources/templates/list`), following `nextCursor`.
//!
//! # Raw answers
//!
//! rmcp decodes list results into its own types, which drop every member
//! they do not model (a tool's `securitySchemes`, the tool-resolution
//! seed's `resolve`, `dynamicAnnotations`, an annotation's `agencyHint`,
//! `taskHint`, ...). A signature must hold exactly what the server said, so
//! the transports here are tapped: the Streamable HTTP client posts the
//! list requests itself and records each JSON-RPC response as received,
//! and the child's stdout passes through a reader that does the same. The
//! capture uses those raw results (keyed by request id); rmcp still runs
//! the protocol. Answers are read as strict JSON (duplicate keys are
//! refused: two readers could disagree on which one counts).
//!
//! The pure part — turning lists into a card, folding in `--merge`d
//! captures — is `pinfold_core::draft`.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use pinfold_core::card::{Limits, ServerCard};
use pinfold_core::draft::{self, Capture, Merged, Origin, Overrides, ServerInfo};
use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientJsonRpcMessage, ClientRequest, ErrorCode,
    Implementation, ListPromptsRequest, ListResourceTemplatesRequest, ListResourcesRequest,
    ListToolsRequest, PaginatedRequestParams, ProtocolVersion, RequestId, ServerJsonRpcMessage,
};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt as _, PeerRequestOptions,
    RunningService, ServiceError,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    HttpStatusError, SseError, StreamableHttpClient, StreamableHttpClientTransportConfig,
    StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Map, Value, json};
use sse_stream::{Sse, SseStream};
use tokio::io::{AsyncRead, AsyncReadExt as _, ReadBuf};
use url::Url;

use crate::progress::Progress;

/// The tool-resolution extension a capture advertises, as Pinfold's resolve
/// client does: a server may list resolvable tools only to clients that
/// speak it.
const TOOL_RESOLUTION: &str = "io.modelcontextprotocol/tool-resolution";
/// Largest answer to one list request (JSON body or SSE stream).
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;
/// Most pages followed per list.
const MAX_PAGES: usize = 1000;
/// How deep a server's JSON answer may nest (the card allows 64 levels
/// below its root; a JSON-RPC answer wraps the items three levels deeper).
const MAX_ANSWER_DEPTH: usize = 72;
/// How much of a child's stderr is kept to explain a failure.
const STDERR_TAIL: usize = 4096;

/// Exit codes of `pinfold capture`.
pub mod exit {
    /// The draft card was written.
    pub const OK: i32 = 0;
    /// The captures conflict; the conflicts are on stdout, no card.
    pub const CONFLICT: i32 = 1;
    /// Bad arguments or an unreadable `--merge` file.
    pub const USAGE: i32 = 2;
    /// The MCP server could not be reached, started or understood.
    pub const MCP_SERVER: i32 = 3;
    /// The draft is written but does not pass the registry's validation.
    pub const INVALID_DRAFT: i32 = 4;
}

const EXIT_CODES: &str = "\
Exit codes:
  0  the draft card was written
  1  the captures conflict (an inputSchema, outputSchema or prompt's arguments differ):
     the conflicts are printed as JSON on stdout, with both versions; no card is written
  2  bad arguments, or a --merge file that cannot be read
  3  the MCP server could not be reached, started or understood
  4  the server's lists do not make a card the registry accepts: the draft is written
     and the problems are listed on stderr

Progress goes to stderr (a spinner on a terminal); the card to stdout or --out.";

/// `pinfold capture`.
#[derive(Debug, Clone, clap::Args)]
#[command(disable_version_flag = true, after_help = EXIT_CODES)]
pub struct CaptureArgs {
    /// The MCP server's Streamable HTTP endpoint (http:// or https://).
    #[arg(value_name = "URL", required_unless_present_any = ["command", "merge"])]
    pub url: Option<String>,
    /// Start a local MCP server and capture it over stdio: "CMD ARGS", split
    /// as a shell would (quotes, no expansion).
    #[arg(long, value_name = "CMD ARGS", conflicts_with = "url")]
    pub command: Option<String>,
    /// A header sent with every request to the server, as "Name: value"
    /// (repeatable). Values are never printed.
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE")]
    pub headers: Vec<HeaderArg>,
    /// Write the card to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Fold earlier captures into the signature (cards written by `pinfold
    /// capture`, or saved list results), e.g. one per user role.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub merge: Vec<PathBuf>,
    /// Server name of the draft, reverse-DNS "namespace/name" [default: the
    /// server's serverInfo.name when it is one, else derived from it].
    #[arg(long)]
    pub name: Option<String>,
    /// Version of the draft, exact SemVer [default: the server's
    /// serverInfo.version].
    #[arg(long)]
    pub version: Option<String>,
    /// Seconds to wait for the server to connect and for each answer.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub timeout: u64,
}

// ------------------------------------------------------------------ target

/// The MCP server to capture.
#[derive(Debug, Clone)]
pub enum Target {
    /// A Streamable HTTP endpoint and the headers to send it.
    Http {
        /// The endpoint.
        url: Url,
        /// Extra headers (values are sensitive).
        headers: Vec<(HeaderName, HeaderValue)>,
    },
    /// A local server started as a child process, spoken to over stdio.
    Stdio {
        /// The program.
        program: String,
        /// Its arguments.
        args: Vec<String>,
    },
}

/// Headers the MCP transport sets itself.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "content-length",
    "host",
    "mcp-session-id",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "last-event-id",
    "connection",
    "transfer-encoding",
    "te",
    "upgrade",
    "keep-alive",
];

/// A `--header` as given ("Name: value"), checked by [`parse_header`] when
/// used. Its `Debug` shows the name only: the value is a credential.
#[derive(Clone)]
pub struct HeaderArg(String);

impl HeaderArg {
    /// The argument as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for HeaderArg {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(HeaderArg(s.to_owned()))
    }
}

impl std::fmt::Debug for HeaderArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = self.0.split_once(':').map_or("?", |(n, _)| n.trim());
        write!(f, "HeaderArg({name:?}: <redacted>)")
    }
}

/// Parses `Name: value` (the value is marked sensitive and never shown).
pub fn parse_header(raw: &str) -> Result<(HeaderName, HeaderValue), String> {
    let Some((name, value)) = raw.split_once(':') else {
        return Err("a --header is \"Name: value\"".into());
    };
    let name = name.trim();
    let header = HeaderName::try_from(name)
        .map_err(|_| format!("--header {name:?}: not a valid header name"))?;
    if RESERVED_HEADERS.contains(&header.as_str()) {
        return Err(format!(
            "--header {name}: set by the MCP transport itself, it cannot be given"
        ));
    }
    let mut value = HeaderValue::try_from(value.trim())
        .map_err(|_| format!("--header {name}: the value is not a valid header value"))?;
    value.set_sensitive(true);
    Ok((header, value))
}

impl Target {
    /// A Streamable HTTP target; `headers` as given to `--header`.
    pub fn http(url: &str, headers: &[HeaderArg]) -> Result<Target, String> {
        let parsed = Url::parse(url).map_err(|e| format!("{url:?} is not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(format!("{url:?} is not an http:// or https:// URL"));
        }
        let headers = headers
            .iter()
            .map(|h| parse_header(h.as_str()))
            .collect::<Result<_, _>>()?;
        Ok(Target::Http {
            url: parsed,
            headers,
        })
    }

    /// A stdio target from `--command "CMD ARGS"`.
    pub fn stdio(command: &str, headers: &[HeaderArg]) -> Result<Target, String> {
        if !headers.is_empty() {
            return Err("--header applies to HTTP servers, not to --command".into());
        }
        let words = shlex::split(command)
            .ok_or_else(|| format!("--command {command:?}: unbalanced quotes"))?;
        let mut words = words.into_iter();
        let program = words
            .next()
            .filter(|p| !p.is_empty())
            .ok_or("--command is empty")?;
        Ok(Target::Stdio {
            program,
            args: words.collect(),
        })
    }

    /// How the target is shown: the URL without credentials, query or
    /// fragment, or the program started.
    pub fn label(&self) -> String {
        match self {
            Target::Http { url, .. } => public_url(url),
            Target::Stdio { program, .. } => format!("`{program}` (stdio)"),
        }
    }
}

/// `url` without userinfo, query and fragment (any of which may carry a
/// credential).
fn public_url(url: &Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.set_query(None);
    u.set_fragment(None);
    u.to_string()
}

/// Replaces every spelling of `url` in an error text by its public form:
/// the URL as given, the URL without its credentials (how reqwest names it
/// in its errors), and then any remaining trace of the query, fragment or
/// password, which may hold an API key.
fn redact(text: &str, url: &Url) -> String {
    let shown = public_url(url);
    let mut out = text.replace(url.as_str(), &shown);
    let mut bare = url.clone();
    let _ = bare.set_username("");
    let _ = bare.set_password(None);
    out = out.replace(bare.as_str(), &shown);
    for secret in [url.query(), url.fragment(), url.password()]
        .into_iter()
        .flatten()
        .filter(|s| !s.is_empty())
    {
        out = out.replace(secret, "[redacted]");
    }
    out
}

// -------------------------------------------------------------------- tap

/// Raw JSON-RPC results by request id, as the server sent them.
#[derive(Clone, Default)]
struct Tap(Arc<Mutex<HashMap<String, Result<Value, String>>>>);

impl Tap {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Result<Value, String>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the responses in one JSON-RPC message (or batch) text.
    fn record_text(&self, text: &str) {
        match pinfold_core::json::parse_strict(text.as_bytes(), MAX_ANSWER_DEPTH) {
            Ok(v) => self.record(&v),
            Err(e) => {
                // Note the failure under the ids a lenient reader finds.
                if let Ok(v) = serde_json::from_str::<Value>(text) {
                    let reason = format!("the answer is not acceptable JSON: {e}");
                    for (id, _) in responses(&v) {
                        self.lock().insert(id, Err(reason.clone()));
                    }
                }
            }
        }
    }

    fn record(&self, msg: &Value) {
        let found = responses(msg);
        if !found.is_empty() {
            let mut map = self.lock();
            for (id, result) in found {
                map.insert(id, Ok(result.clone()));
            }
        }
    }

    fn take(&self, id: &RequestId) -> Option<Result<Value, String>> {
        let key = serde_json::to_string(id).ok()?;
        self.lock().remove(&key)
    }

    /// `stream` with every event's data recorded as it passes.
    fn wrap(
        &self,
        stream: BoxStream<'static, Result<Sse, SseError>>,
    ) -> BoxStream<'static, Result<Sse, SseError>> {
        let tap = self.clone();
        stream
            .map(move |item| {
                if let Ok(Sse {
                    data: Some(data), ..
                }) = &item
                {
                    tap.record_text(data);
                }
                item
            })
            .boxed()
    }
}

/// The (id, result) pairs of the responses in a message or batch.
fn responses(msg: &Value) -> Vec<(String, &Value)> {
    match msg {
        Value::Array(items) => items.iter().flat_map(responses).collect(),
        Value::Object(o) if !o.contains_key("method") => match (o.get("id"), o.get("result")) {
            (Some(id), Some(result)) => vec![(id.to_string(), result)],
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

const LIST_METHODS: [&str; 4] = [
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
];

fn is_list_request(m: &ClientJsonRpcMessage) -> bool {
    matches!(m, ClientJsonRpcMessage::Request(r) if LIST_METHODS.contains(&r.request.method()))
}

/// The Streamable HTTP client of a capture: rmcp's reqwest client for the
/// handshake and everything else, our own request for the list methods
/// so that their answers are recorded as sent.
#[derive(Clone)]
struct TapClient {
    http: reqwest::Client,
    tap: Tap,
}

/// A body that went wrong while being read.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    #[error("{0}")]
    Read(#[from] reqwest::Error),
    #[error("the answer is larger than {0} bytes")]
    TooLarge(usize),
}

type HttpResult<T> = Result<T, StreamableHttpError<reqwest::Error>>;

impl TapClient {
    async fn post_list(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let mut req = self
            .http
            .post(uri.as_ref())
            .header(http::header::ACCEPT, "application/json, text/event-stream");
        if let Some(a) = auth_header {
            req = req.bearer_auth(a);
        }
        for (n, v) in custom_headers {
            req = req.header(n, v);
        }
        if let Some(s) = &session_id {
            req = req.header("mcp-session-id", s.as_ref());
        }
        let resp = req.json(&message).send().await?;
        let status = resp.status();
        let new_session = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if status == reqwest::StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        if status == reqwest::StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            let retry_after = resp
                .headers()
                .get(http::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            return Err(HttpStatusError::new(status.as_u16(), retry_after).into());
        }
        let content_type = resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|s| s.to_ascii_lowercase())
            .unwrap_or_default();
        if !status.is_success() {
            let body = read_prefix(resp, 4096).await;
            let text = String::from_utf8_lossy(&body).into_owned();
            if let Ok(m @ ServerJsonRpcMessage::Error(_)) =
                serde_json::from_str::<ServerJsonRpcMessage>(&text)
            {
                return Ok(StreamableHttpPostResponse::Json(m, new_session));
            }
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("HTTP {status}: {}", text.trim()),
            )));
        }
        if content_type.starts_with("text/event-stream") {
            let bytes = bounded_stream(resp.bytes_stream(), MAX_ANSWER_BYTES);
            let events = SseStream::from_bytes_stream(bytes).boxed();
            return Ok(StreamableHttpPostResponse::Sse(
                self.tap.wrap(events),
                new_session,
            ));
        }
        if content_type.starts_with("application/json") {
            let body = read_bounded(resp, MAX_ANSWER_BYTES)
                .await
                .map_err(|e| match e {
                    BodyError::Read(r) => StreamableHttpError::Client(r),
                    BodyError::TooLarge(max) => {
                        StreamableHttpError::ResponseBodyTooLarge { max_size: max }
                    }
                })?;
            let text = String::from_utf8_lossy(&body);
            self.tap.record_text(&text);
            let parsed = serde_json::from_str::<ServerJsonRpcMessage>(&text)?;
            return Ok(StreamableHttpPostResponse::Json(parsed, new_session));
        }
        Err(StreamableHttpError::UnexpectedContentType(Some(
            content_type,
        )))
    }

    fn tapped(&self, r: StreamableHttpPostResponse) -> StreamableHttpPostResponse {
        match r {
            StreamableHttpPostResponse::Sse(s, sid) => {
                StreamableHttpPostResponse::Sse(self.tap.wrap(s), sid)
            }
            other => other,
        }
    }
}

async fn read_bounded(mut resp: reqwest::Response, max: usize) -> Result<Vec<u8>, BodyError> {
    let mut out = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        if out.len() + chunk.len() > max {
            return Err(BodyError::TooLarge(max));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// At most `max` bytes of a body (what an error message quotes).
async fn read_prefix(mut resp: reqwest::Response, max: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while out.len() < max {
        match resp.chunk().await {
            Ok(Some(chunk)) => out.extend_from_slice(&chunk[..chunk.len().min(max - out.len())]),
            _ => break,
        }
    }
    out
}

/// A byte stream that fails once more than `max` bytes have passed.
fn bounded_stream(
    stream: impl futures::Stream<Item = reqwest::Result<Bytes>> + Send + 'static,
    max: usize,
) -> BoxStream<'static, Result<Bytes, BodyError>> {
    let mut seen = 0usize;
    stream
        .map(move |chunk| {
            let chunk = chunk?;
            seen += chunk.len();
            if seen > max {
                return Err(BodyError::TooLarge(max));
            }
            Ok(chunk)
        })
        .boxed()
}

impl StreamableHttpClient for TapClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<StreamableHttpPostResponse> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> HttpResult<StreamableHttpPostResponse> {
        if is_list_request(&message) {
            return self
                .post_list(uri, message, session_id, auth_header, custom_headers)
                .await;
        }
        let r = self
            .http
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await?;
        Ok(self.tapped(r))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<()> {
        self.http
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>> {
        let s = self
            .http
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await?;
        Ok(self.tap.wrap(s))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>> {
        let s = self
            .http
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        Ok(self.tap.wrap(s))
    }
}

/// The child's stdout as rmcp reads it, each complete line recorded.
struct TapReader<R> {
    inner: R,
    tap: Tap,
    line: Vec<u8>,
    overflow: bool,
}

impl<R: AsyncRead + Unpin> AsyncRead for TapReader<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        for piece in buf.filled()[before..].split_inclusive(|b| *b == b'\n') {
            let (body, complete) = match piece.strip_suffix(b"\n") {
                Some(b) => (b, true),
                None => (piece, false),
            };
            if this.line.len() + body.len() > MAX_ANSWER_BYTES {
                this.overflow = true;
                this.line.clear();
            } else if !this.overflow {
                this.line.extend_from_slice(body);
            }
            if complete {
                if !this.overflow {
                    this.tap.record_text(&String::from_utf8_lossy(&this.line));
                }
                this.line.clear();
                this.overflow = false;
            }
        }
        Poll::Ready(Ok(()))
    }
}

// ---------------------------------------------------------------- session

#[derive(Clone)]
struct CaptureClient;

impl ClientHandler for CaptureClient {
    fn get_info(&self) -> ClientConfig {
        let mut caps = ClientCapabilities::default();
        let mut ext = std::collections::BTreeMap::new();
        ext.insert(TOOL_RESOLUTION.to_owned(), Map::new());
        caps.extensions = Some(ext);
        let mut info = ClientConfig::new(
            caps,
            Implementation::new("pinfold-capture", env!("CARGO_PKG_VERSION")),
        );
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info
    }
}

/// Why a capture failed (exit code 3).
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The server (or the program) could not be reached or started.
    #[error("{0}")]
    Unreachable(String),
    /// It answered, but not as an MCP server should.
    #[error("{0}")]
    Protocol(String),
}

/// A local server started for the capture; killed when dropped.
struct Child {
    child: tokio::process::Child,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Child {
    /// The last lines the child wrote on stderr, for an error message.
    fn stderr_tail(&self) -> String {
        let buf = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        let text = String::from_utf8_lossy(&buf);
        let text = text.trim();
        if text.is_empty() {
            String::new()
        } else {
            format!("\nits stderr ended with:\n{text}")
        }
    }

    async fn stop(mut self) {
        // Its stdin is closed by now: give it a moment to exit by itself.
        if tokio::time::timeout(Duration::from_secs(2), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

struct Session {
    service: RunningService<RoleClient, CaptureClient>,
    tap: Tap,
    child: Option<Child>,
}

fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

async fn connect(target: &Target, timeout: Duration) -> Result<Session, CaptureError> {
    let label = target.label();
    let fut = async {
        match target {
            Target::Http { url, headers } => connect_http(url, headers).await,
            Target::Stdio { program, args } => connect_stdio(program, args).await,
        }
    };
    tokio::time::timeout(timeout, fut)
        .await
        .unwrap_or_else(|_| {
            Err(CaptureError::Unreachable(format!(
                "{label} did not complete the MCP handshake within {} s",
                timeout.as_secs()
            )))
        })
}

fn init_error(label: &str, e: &ClientInitializeError) -> CaptureError {
    match e {
        // The transport's own error, without rmcp's wrapper naming types.
        ClientInitializeError::TransportError { error, .. } => {
            let inner = error.error.as_ref();
            let why = match inner.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
                Some(StreamableHttpError::Client(r)) => error_chain(r),
                _ => error_chain(inner),
            };
            CaptureError::Unreachable(format!("cannot reach the MCP server at {label}: {why}"))
        }
        ClientInitializeError::ConnectionClosed(why) => CaptureError::Unreachable(format!(
            "the MCP server at {label} closed the connection during the handshake: {why}"
        )),
        other => CaptureError::Protocol(format!(
            "the MCP handshake with {label} failed: {}",
            error_chain(other)
        )),
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let next = c.to_string();
        if !s.contains(&next) {
            s.push_str(": ");
            s.push_str(&next);
        }
        cur = c.source();
    }
    s
}

async fn connect_http(
    url: &Url,
    headers: &[(HeaderName, HeaderValue)],
) -> Result<Session, CaptureError> {
    let label = public_url(url);
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(5))
        .user_agent(concat!("pinfold-capture/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| CaptureError::Unreachable(format!("cannot build an HTTP client: {e}")))?;
    let tap = Tap::default();
    let client = TapClient {
        http,
        tap: tap.clone(),
    };
    let header_map: HashMap<HeaderName, HeaderValue> = headers.iter().cloned().collect();
    let transport = || {
        let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
            .custom_headers(header_map.clone())
            .max_json_response_size(MAX_ANSWER_BYTES)
            .reinit_on_expired_session(true);
        StreamableHttpClientTransport::with_client(client.clone(), config)
    };
    let service = match CaptureClient
        .serve_with_lifecycle(transport(), lifecycle())
        .await
    {
        Ok(s) => s,
        // The server knows `server/discover` but offers only versions with
        // the `initialize` handshake: ask again that way.
        Err(ClientInitializeError::NoCompatibleProtocolVersion { .. }) => CaptureClient
            .serve_with_lifecycle(transport(), ClientLifecycleMode::Initialize)
            .await
            .map_err(|e| redacted(init_error(&label, &e), url))?,
        Err(e) => return Err(redacted(init_error(&label, &e), url)),
    };
    Ok(Session {
        service,
        tap,
        child: None,
    })
}

fn redacted(e: CaptureError, url: &Url) -> CaptureError {
    match e {
        CaptureError::Unreachable(s) => CaptureError::Unreachable(redact(&s, url)),
        CaptureError::Protocol(s) => CaptureError::Protocol(redact(&s, url)),
    }
}

fn spawn(
    program: &str,
    args: &[String],
) -> Result<
    (
        Child,
        tokio::process::ChildStdout,
        tokio::process::ChildStdin,
    ),
    CaptureError,
> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|e| CaptureError::Unreachable(format!("cannot start `{program}`: {e}")))?;
    let (Some(stdout), Some(stdin), Some(mut stderr)) =
        (child.stdout.take(), child.stdin.take(), child.stderr.take())
    else {
        return Err(CaptureError::Unreachable(format!(
            "`{program}` started without piped stdio"
        )));
    };
    let tail = Arc::new(Mutex::new(Vec::new()));
    let sink = tail.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 1024];
        while let Ok(n) = stderr.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let mut t = sink.lock().unwrap_or_else(|e| e.into_inner());
            t.extend_from_slice(&buf[..n]);
            if t.len() > STDERR_TAIL {
                let cut = t.len() - STDERR_TAIL;
                t.drain(..cut);
            }
        }
    });
    Ok((
        Child {
            child,
            stderr: tail,
        },
        stdout,
        stdin,
    ))
}

async fn connect_stdio(program: &str, args: &[String]) -> Result<Session, CaptureError> {
    let label = format!("`{program}` (stdio)");
    let attempt = |mode: ClientLifecycleMode| async move {
        let (child, stdout, stdin) = spawn(program, args)?;
        let tap = Tap::default();
        let reader = TapReader {
            inner: stdout,
            tap: tap.clone(),
            line: Vec::new(),
            overflow: false,
        };
        match CaptureClient
            .serve_with_lifecycle((reader, stdin), mode)
            .await
        {
            Ok(service) => Ok(Ok(Session {
                service,
                tap,
                child: Some(child),
            })),
            Err(e) => {
                // Let the child's last words arrive before quoting them.
                tokio::time::sleep(Duration::from_millis(100)).await;
                let tail = child.stderr_tail();
                Ok(Err((e, tail)))
            }
        }
    };
    match attempt(lifecycle()).await? {
        Ok(s) => Ok(s),
        Err((ClientInitializeError::NoCompatibleProtocolVersion { .. }, _)) => {
            match attempt(ClientLifecycleMode::Initialize).await? {
                Ok(s) => Ok(s),
                Err((e, tail)) => Err(stdio_error(&label, &e, &tail)),
            }
        }
        Err((e, tail)) => Err(stdio_error(&label, &e, &tail)),
    }
}

fn stdio_error(label: &str, e: &ClientInitializeError, tail: &str) -> CaptureError {
    match init_error(label, e) {
        CaptureError::Unreachable(s) => CaptureError::Unreachable(format!("{s}{tail}")),
        CaptureError::Protocol(s) => CaptureError::Protocol(format!("{s}{tail}")),
    }
}

// ------------------------------------------------------------------ lists

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListKind {
    Tools,
    Prompts,
    Resources,
    ResourceTemplates,
}

impl ListKind {
    fn method(self) -> &'static str {
        match self {
            ListKind::Tools => "tools/list",
            ListKind::Prompts => "prompts/list",
            ListKind::Resources => "resources/list",
            ListKind::ResourceTemplates => "resources/templates/list",
        }
    }

    fn key(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources => "resources",
            ListKind::ResourceTemplates => "resourceTemplates",
        }
    }

    fn request(self, cursor: Option<String>) -> ClientRequest {
        let p = PaginatedRequestParams::default().with_cursor(cursor);
        match self {
            ListKind::Tools => ClientRequest::ListToolsRequest(ListToolsRequest::with_param(p)),
            ListKind::Prompts => {
                ClientRequest::ListPromptsRequest(ListPromptsRequest::with_param(p))
            }
            ListKind::Resources => {
                ClientRequest::ListResourcesRequest(ListResourcesRequest::with_param(p))
            }
            ListKind::ResourceTemplates => ClientRequest::ListResourceTemplatesRequest(
                ListResourceTemplatesRequest::with_param(p),
            ),
        }
    }
}

/// What a capture found.
#[derive(Debug, Clone)]
pub struct Captured {
    /// How the server is shown (public URL, or the program).
    pub label: String,
    /// The negotiated protocol version.
    pub protocol_version: String,
    /// What the server says about itself.
    pub server_info: ServerInfo,
    /// Where it was captured (for the draft's name and remote).
    pub origin: Origin,
    /// `{"tools", "prompts", "resources", "resourceTemplates"}`: the lists
    /// the server advertises, as it sent them; the others empty.
    pub lists: Value,
    /// Things worth saying about the capture (a list the server advertises
    /// but does not answer, ...).
    pub notes: Vec<String>,
}

impl Captured {
    /// "3 tools, 0 prompts, 1 resource, 0 resource templates".
    pub fn summary(&self) -> String {
        let n = |k: &str| self.lists[k].as_array().map_or(0, Vec::len);
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        format!(
            "{}, {}, {}, {}",
            plural(n("tools"), "tool", "tools"),
            plural(n("prompts"), "prompt", "prompts"),
            plural(n("resources"), "resource", "resources"),
            plural(
                n("resourceTemplates"),
                "resource template",
                "resource templates"
            ),
        )
    }
}

/// Connects to `target`, runs every list it advertises and disconnects.
pub async fn capture(
    target: &Target,
    timeout: Duration,
    progress: &mut Progress<'_>,
) -> Result<Captured, CaptureError> {
    let label = target.label();
    let session = progress
        .run(
            &format!("capture: connecting to {label}"),
            connect(target, timeout),
        )
        .await
        .map_err(|e| match target {
            Target::Http { url, .. } => redacted(e, url),
            Target::Stdio { .. } => e,
        })?;
    let result = capture_lists(&session, target, &label, timeout, progress).await;
    let Session { service, child, .. } = session;
    let _ = service.cancel().await;
    if let Some(c) = child {
        c.stop().await;
    }
    // Every error, whichever layer wrote it (reqwest names the full URL in
    // its own), is shown without the URL's query or credentials.
    match target {
        Target::Http { url, .. } => result.map_err(|e| redacted(e, url)),
        Target::Stdio { .. } => result,
    }
}

async fn capture_lists(
    session: &Session,
    target: &Target,
    label: &str,
    timeout: Duration,
    progress: &mut Progress<'_>,
) -> Result<Captured, CaptureError> {
    let peer = session.service.peer();
    let Some(info) = peer.peer_info() else {
        return Err(CaptureError::Protocol(format!(
            "{label} completed the handshake without saying what it offers"
        )));
    };
    let protocol_version = info.protocol_version.as_str().to_owned();
    let caps = &info.capabilities;
    let mut kinds = Vec::new();
    if caps.tools.is_some() {
        kinds.push(ListKind::Tools);
    }
    if caps.prompts.is_some() {
        kinds.push(ListKind::Prompts);
    }
    if caps.resources.is_some() {
        kinds.extend([ListKind::Resources, ListKind::ResourceTemplates]);
    }
    let server_info = match &info.server_info {
        Some(i) => ServerInfo {
            name: i.name.clone(),
            version: i.version.clone(),
            title: i.title.clone(),
            description: i.description.clone(),
            website_url: i.website_url.clone(),
        },
        None => ServerInfo::default(),
    };
    let offered: Vec<&str> = kinds.iter().map(|k| k.method()).collect();
    progress.line(&format!(
        "capture: {label}: {} {} speaks MCP {protocol_version}; lists: {}",
        if server_info.name.is_empty() {
            "(unnamed server)"
        } else {
            &server_info.name
        },
        server_info.version,
        if offered.is_empty() {
            "none".to_owned()
        } else {
            offered.join(", ")
        },
    ));
    let mut lists = Map::new();
    for k in [
        ListKind::Tools,
        ListKind::Prompts,
        ListKind::Resources,
        ListKind::ResourceTemplates,
    ] {
        lists.insert(k.key().to_owned(), Value::Array(Vec::new()));
    }
    let mut notes = Vec::new();
    for kind in kinds {
        match list_all(session, kind, label, timeout, progress).await {
            Ok(items) => {
                lists.insert(kind.key().to_owned(), Value::Array(items));
            }
            // Templates came after resources: a server may advertise
            // resources and not know the method.
            Err(ListError::Rpc { code, .. })
                if kind == ListKind::ResourceTemplates && code == ErrorCode::METHOD_NOT_FOUND.0 =>
            {
                notes.push(format!(
                    "{label} advertises resources but does not know resources/templates/list; no templates recorded"
                ));
            }
            Err(e) => return Err(CaptureError::Protocol(e.to_string())),
        }
    }
    let origin = match target {
        Target::Http { url, .. } => Origin {
            host: url.domain().map(str::to_owned),
            remote_url: Some(public_url(url)),
        },
        Target::Stdio { .. } => Origin::default(),
    };
    let server_info = if server_info.name.is_empty() {
        // No serverInfo (a discovery answer may omit it): name the draft
        // after the host or the program.
        let fallback = match target {
            Target::Http { url, .. } => url.host_str().unwrap_or("server").to_owned(),
            Target::Stdio { program, .. } => Path::new(program)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "server".into()),
        };
        ServerInfo {
            name: fallback,
            ..server_info
        }
    } else {
        server_info
    };
    Ok(Captured {
        label: label.to_owned(),
        protocol_version,
        server_info,
        origin,
        lists: Value::Object(lists),
        notes,
    })
}

#[derive(Debug, thiserror::Error)]
enum ListError {
    #[error("{label}: {method} failed: JSON-RPC error {code}: {message}")]
    Rpc {
        label: String,
        method: &'static str,
        code: i32,
        message: String,
    },
    #[error("{0}")]
    Other(String),
}

async fn list_all(
    session: &Session,
    kind: ListKind,
    label: &str,
    timeout: Duration,
    progress: &mut Progress<'_>,
) -> Result<Vec<Value>, ListError> {
    let method = kind.method();
    let peer = session.service.peer();
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    let mut seen: HashSet<String> = HashSet::new();
    for page in 1..=MAX_PAGES {
        let status = if page == 1 {
            format!("capture: {method}")
        } else {
            format!("capture: {method}, page {page} ({} so far)", items.len())
        };
        let mut options = PeerRequestOptions::no_options();
        options.timeout = Some(timeout);
        let fut = async {
            let handle = peer
                .send_request_with_option(kind.request(cursor.clone()), options)
                .await?;
            let id = handle.id.clone();
            handle.await_response().await.map(|_| id)
        };
        let id = match progress.run(&status, fut).await {
            Ok(id) => id,
            Err(ServiceError::McpError(e)) => {
                return Err(ListError::Rpc {
                    label: label.to_owned(),
                    method,
                    code: e.code.0,
                    message: e.message.to_string(),
                });
            }
            Err(ServiceError::Timeout { .. }) => {
                return Err(ListError::Other(format!(
                    "{label}: no answer to {method} within {} s",
                    timeout.as_secs()
                )));
            }
            Err(e) => {
                return Err(ListError::Other(format!(
                    "{label}: {method} failed: {}",
                    error_chain(&e)
                )));
            }
        };
        let raw = match session.tap.take(&id) {
            Some(Ok(v)) => v,
            Some(Err(reason)) => {
                return Err(ListError::Other(format!("{label}: {method}: {reason}")));
            }
            None => {
                return Err(ListError::Other(format!(
                    "{label}: the answer to {method} could not be read as it was sent"
                )));
            }
        };
        let Some(page_items) = raw.get(kind.key()).and_then(Value::as_array) else {
            return Err(ListError::Other(format!(
                "{label}: the answer to {method} has no {} array",
                kind.key()
            )));
        };
        items.extend(page_items.iter().cloned());
        match raw.get("nextCursor") {
            None | Some(Value::Null) => return Ok(items),
            Some(Value::String(c)) => {
                if !seen.insert(c.clone()) {
                    return Err(ListError::Other(format!(
                        "{label}: {method} returned the cursor {c:?} twice; stopping rather than looping"
                    )));
                }
                cursor = Some(c.clone());
            }
            Some(_) => {
                return Err(ListError::Other(format!(
                    "{label}: {method}: nextCursor is not a string"
                )));
            }
        }
    }
    Err(ListError::Other(format!(
        "{label}: {method} still had more pages after {MAX_PAGES}"
    )))
}

// -------------------------------------------------------------------- run

/// One `--merge` file: its path, its document, and where the lists are.
struct MergeFile {
    label: String,
    doc: Value,
    base: &'static str,
}

impl MergeFile {
    fn lists(&self) -> &Value {
        match self.base {
            "/signature" => &self.doc["signature"],
            "/result" => &self.doc["result"],
            _ => &self.doc,
        }
    }

    fn card(&self) -> Option<&Map<String, Value>> {
        (self.base == "/signature")
            .then(|| self.doc.as_object())
            .flatten()
    }
}

fn load_merge_file(path: &Path) -> Result<MergeFile, String> {
    let label = path.display().to_string();
    if (label.starts_with("http://") || label.starts_with("https://")) && !path.exists() {
        return Err(format!(
            "--merge takes files, not {label:?}: give the server's URL before --merge"
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {label}: {e}"))?;
    let doc = pinfold_core::json::parse_strict(&bytes, pinfold_core::json::DEFAULT_MAX_DEPTH)
        .map_err(|e| format!("{label} is not acceptable JSON: {e}"))?;
    let has_lists = |v: &Value| {
        ["tools", "prompts", "resources", "resourceTemplates"]
            .iter()
            .any(|k| v.get(k).is_some())
    };
    let base = if doc.get("signature").is_some_and(Value::is_object) {
        "/signature"
    } else if has_lists(&doc) {
        ""
    } else if doc.get("result").is_some_and(has_lists) {
        "/result"
    } else {
        return Err(format!(
            "{label} holds neither a card with a signature nor tools, prompts, resources or resourceTemplates"
        ));
    };
    Ok(MergeFile { label, doc, base })
}

fn write_pretty(out: &mut dyn Write, v: &Value) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, v)?;
    writeln!(out)
}

/// Writes `card` to `path` whole or not at all (a temporary file beside it,
/// renamed).
fn write_file(path: &Path, card: &Value) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "card.json".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut f = std::fs::File::create(&tmp)?;
    write_pretty(&mut f, card)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

fn conflict_lines(m: &Merged) -> Vec<String> {
    let mut lines = Vec::new();
    for c in &m.conflicts {
        lines.push(format!("capture: conflict: {}", c.message));
        for (i, v) in c.versions.iter().enumerate() {
            let at: Vec<String> = v
                .found_in
                .iter()
                .map(|l| format!("{} {}", l.capture, l.pointer))
                .collect();
            let shown = v
                .value
                .as_ref()
                .map_or("(absent)".to_owned(), Value::to_string);
            let differs = if v.differs_at.is_empty() {
                String::new()
            } else {
                format!(
                    " (differs at {})",
                    v.differs_at
                        .iter()
                        .map(|p| if p.is_empty() { "the root" } else { p.as_str() })
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            lines.push(format!(
                "  version {} in {}{differs}: {shown}",
                i + 1,
                at.join(", ")
            ));
        }
    }
    lines
}

/// Runs `pinfold capture`; the card goes to `out` (or `--out`), everything
/// else to `progress`. Returns the exit code (see [`exit`]).
pub async fn run(
    args: CaptureArgs,
    out: &mut (dyn Write + Send),
    progress: &mut Progress<'_>,
) -> anyhow::Result<i32> {
    let usage = |progress: &mut Progress<'_>, msg: &str| {
        progress.line(&format!("pinfold capture: {msg}"));
        Ok(exit::USAGE)
    };
    let target = match (&args.url, &args.command) {
        (Some(u), _) => Some(Target::http(u, &args.headers)),
        (None, Some(c)) => Some(Target::stdio(c, &args.headers)),
        (None, None) => None,
    };
    let target = match target.transpose() {
        Ok(t) => t,
        Err(e) => return usage(progress, &e),
    };
    if target.is_none() {
        if args.merge.is_empty() {
            return usage(progress, "give a URL, --command, or --merge FILE...");
        }
        if !args.headers.is_empty() {
            return usage(progress, "--header needs a URL to send it to");
        }
    }
    if args.timeout == 0 {
        return usage(progress, "--timeout must be at least 1 second");
    }
    let mut files = Vec::new();
    for p in &args.merge {
        match load_merge_file(p) {
            Ok(f) => files.push(f),
            Err(e) => return usage(progress, &e),
        }
    }
    let overrides = Overrides {
        name: args.name.clone(),
        version: args.version.clone(),
    };
    let limits = Limits::default();
    // Each --merge file on its own first: a bad file is a usage error.
    for f in &files {
        let one = Capture {
            label: f.label.clone(),
            base: f.base.to_owned(),
            lists: f.lists(),
        };
        if let Err(e) = draft::merge(&[one], &limits) {
            return usage(
                progress,
                &format!("{} is not a usable capture: {e}", f.label),
            );
        }
    }
    let captured = match &target {
        Some(t) => match capture(t, Duration::from_secs(args.timeout), progress).await {
            Ok(c) => Some(c),
            Err(e) => {
                progress.line(&format!("pinfold capture: {e}"));
                return Ok(exit::MCP_SERVER);
            }
        },
        None => None,
    };
    if let Some(c) = &captured {
        progress.line(&format!("capture: {}: {}", c.label, c.summary()));
        for n in &c.notes {
            progress.line(&format!("capture: note: {n}"));
        }
        if let Some(Target::Http { url, .. }) = &target
            && (url.query().is_some() || !url.username().is_empty() || url.password().is_some())
        {
            progress.line(
                "capture: note: the endpoint's credentials and query string are left out of the card",
            );
        }
    }
    let mut caps = Vec::new();
    if let Some(c) = &captured {
        caps.push(Capture {
            label: c.label.clone(),
            base: String::new(),
            lists: &c.lists,
        });
    }
    caps.extend(files.iter().map(|f| Capture {
        label: f.label.clone(),
        base: f.base.to_owned(),
        lists: f.lists(),
    }));
    let merged = match draft::merge(&caps, &limits) {
        Ok(m) => m,
        Err(e) => {
            // Every file merged on its own: the live lists are at fault.
            progress.line(&format!(
                "pinfold capture: the server's lists are not well formed: {e}"
            ));
            for err in e.errors.iter().take(20) {
                progress.line(&format!("  {} {}: {}", err.code, err.pointer, err.message));
            }
            return Ok(exit::MCP_SERVER);
        }
    };
    if !merged.is_clean() {
        for l in conflict_lines(&merged) {
            progress.line(&l);
        }
        write_pretty(out, &json!({"conflicts": merged.conflicts}))?;
        progress.line(&format!(
            "pinfold capture: {} conflict(s) between the captures; no card written",
            merged.conflicts.len()
        ));
        return Ok(exit::CONFLICT);
    }
    for n in &merged.notes {
        progress.line(&format!(
            "capture: note: the captures disagree on {} {} {} ({} values); kept {}",
            n.list, n.item, n.member, n.distinct, n.kept
        ));
    }
    let card = match &captured {
        Some(c) => match draft::identity(&c.server_info, &c.origin, &overrides) {
            Ok(id) => {
                for n in &id.notes {
                    progress.line(&format!("capture: note: {n}"));
                }
                if !id.notes.is_empty() {
                    progress.line(
                        "capture: note: pass --name and --version to choose the draft's identity",
                    );
                }
                draft::draft_card(&id, merged.signature)
            }
            Err(e) => return usage(progress, &format!("--name/--version: {e}")),
        },
        None => {
            let first_card = files.iter().find_map(MergeFile::card);
            match first_card {
                Some(card) => match draft::with_signature(card, merged.signature, &overrides) {
                    Ok(c) => c,
                    Err(e) => return usage(progress, &format!("--name/--version: {e}")),
                },
                None if overrides.name.is_some() && overrides.version.is_some() => {
                    match draft::identity(&ServerInfo::default(), &Origin::default(), &overrides) {
                        Ok(id) => draft::draft_card(&id, merged.signature),
                        Err(e) => return usage(progress, &format!("--name/--version: {e}")),
                    }
                }
                None => {
                    return usage(
                        progress,
                        "none of the --merge files is a card: pass --name and --version for the draft",
                    );
                }
            }
        }
    };
    let verdict = ServerCard::from_value(&card, &limits);
    match &args.out {
        Some(path) => {
            if let Err(e) = write_file(path, &card) {
                progress.line(&format!(
                    "pinfold capture: cannot write {}: {e}",
                    path.display()
                ));
                return Ok(exit::USAGE);
            }
        }
        None => write_pretty(out, &card)?,
    }
    let whereto = args
        .out
        .as_ref()
        .map_or("stdout".to_owned(), |p| p.display().to_string());
    match verdict {
        Ok(c) => {
            progress.line(&format!(
                "capture: wrote the draft card {} {} to {whereto} ({} tools; digest {})",
                c.name,
                c.version,
                c.signature.tools.len(),
                c.digest()
            ));
            Ok(exit::OK)
        }
        Err(e) => {
            progress.line(&format!(
                "pinfold capture: the draft written to {whereto} does not pass the registry's validation ({} problem(s)):",
                e.errors.len()
            ));
            for err in e.errors.iter().take(20) {
                progress.line(&format!("  {} {}: {}", err.code, err.pointer, err.message));
            }
            Ok(exit::INVALID_DRAFT)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_covers_every_spelling_of_the_url() {
        let url = Url::parse("http://u:pw-1@mcp.example/mcp?api_key=k-2#f-3").unwrap();
        for text in [
            "error sending request for url (http://u:pw-1@mcp.example/mcp?api_key=k-2#f-3)",
            // reqwest names the URL without its credentials.
            "error sending request for url (http://mcp.example/mcp?api_key=k-2#f-3)",
            "odd: api_key=k-2 and pw-1",
        ] {
            let out = redact(text, &url);
            for secret in ["pw-1", "k-2", "f-3"] {
                assert!(!out.contains(secret), "{out}");
            }
        }
        assert_eq!(
            redact("for url (http://mcp.example/mcp?api_key=k-2#f-3)", &url),
            "for url (http://mcp.example/mcp)"
        );
    }

    #[test]
    fn headers_are_checked_and_never_shown() {
        let (n, v) = parse_header("Authorization: Bearer s3cret").unwrap();
        assert_eq!(n.as_str(), "authorization");
        assert!(v.is_sensitive());
        assert!(!format!("{v:?}").contains("s3cret"));
        for bad in ["nocolon", "bad name: x", "Mcp-Session-Id: 1", "X: a\nb"] {
            let e = parse_header(bad).unwrap_err();
            assert!(!e.contains("s3cret"), "{e}");
        }
        assert!(
            parse_header("Accept: x")
                .unwrap_err()
                .contains("MCP transport")
        );
    }

    #[test]
    fn targets() {
        let t = Target::http("https://u:p@mcp.example/x?key=secret#f", &[]).unwrap();
        assert_eq!(t.label(), "https://mcp.example/x");
        assert!(Target::http("ftp://x/", &[]).is_err());
        assert!(Target::http("not a url", &[]).is_err());
        let s = Target::stdio("node 'my server.mjs' --port 0", &[]).unwrap();
        let Target::Stdio { program, args } = &s else {
            panic!()
        };
        assert_eq!(program, "node");
        assert_eq!(args, &["my server.mjs", "--port", "0"]);
        assert!(Target::stdio("a 'b", &[]).is_err());
        assert!(Target::stdio("   ", &[]).is_err());
        let h: HeaderArg = "X-Key: s3cret".parse().unwrap();
        assert!(Target::stdio("a", std::slice::from_ref(&h)).is_err());
        assert_eq!(format!("{h:?}"), "HeaderArg(\"X-Key\": <redacted>)");
        let u = Url::parse("http://h/p?token=abc").unwrap();
        assert_eq!(
            redact("error sending request for url (http://h/p?token=abc)", &u),
            "error sending request for url (http://h/p)"
        );
    }

    #[test]
    fn the_tap_records_responses_by_id() {
        let tap = Tap::default();
        tap.record_text(
            r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"t","resolve":true}]}}"#,
        );
        tap.record_text(r#"[{"jsonrpc":"2.0","id":"a","result":{}},{"jsonrpc":"2.0","method":"x","id":9,"params":{}}]"#);
        tap.record_text(r#"{"jsonrpc":"2.0","id":4,"result":{"a":1,"a":2}}"#);
        tap.record_text("not json");
        let got = tap.take(&RequestId::Number(3)).unwrap().unwrap();
        assert_eq!(got["tools"][0]["resolve"], true);
        assert!(tap.take(&RequestId::Number(3)).is_none(), "taken once");
        assert!(tap.take(&RequestId::String("a".into())).unwrap().is_ok());
        // A request from the server is not a response.
        assert!(tap.take(&RequestId::Number(9)).is_none());
        // Duplicate keys: the id is known, the result refused.
        let dup = tap.take(&RequestId::Number(4)).unwrap().unwrap_err();
        assert!(dup.contains("duplicate"), "{dup}");
    }

    #[tokio::test]
    async fn the_stdio_reader_records_complete_lines() {
        let tap = Tap::default();
        let data: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"x\":1}}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"res";
        let mut r = TapReader {
            inner: data,
            tap: tap.clone(),
            line: Vec::new(),
            overflow: false,
        };
        let mut out = Vec::new();
        r.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, data, "bytes pass through unchanged");
        assert_eq!(
            tap.take(&RequestId::Number(1)).unwrap().unwrap(),
            json!({"x": 1})
        );
        assert!(tap.take(&RequestId::Number(2)).is_none(), "incomplete line");
    }
}
