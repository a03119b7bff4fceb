//! Requests to a route's upstream over Streamable HTTP, sent through the
//! egress path under the tenant's rules: the route's headers (never the
//! client's credentials), the MCP transport's own headers, bounded bodies
//! and bounded events.

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use pinfold_egress::events::{Event, EventError, response_events};
use pinfold_egress::{Egress, EgressError, Rules};
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use serde_json::Value;

/// The `Mcp-Session-Id` header.
pub const SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");
/// The `MCP-Protocol-Version` header.
pub const PROTOCOL_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// The `Last-Event-ID` header.
pub const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
/// The `Mcp-Method` header (2026-07-28).
pub const METHOD_HEADER: HeaderName = HeaderName::from_static("mcp-method");
/// The `Mcp-Name` header (2026-07-28).
pub const NAME_HEADER: HeaderName = HeaderName::from_static("mcp-name");

/// Where a route's upstream is and how it is reached.
#[derive(Clone)]
pub struct Target {
    /// The MCP endpoint.
    pub url: Url,
    /// The route's headers (credentials: never logged).
    pub headers: HeaderMap,
    /// The tenant's egress rules.
    pub rules: Rules,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field(
                "url",
                &pinfold_egress::redact::redact_url(self.url.as_str()),
            )
            .field(
                "headers",
                &pinfold_egress::redact::header_names(self.headers.keys().map(|k| k.as_str())),
            )
            .finish()
    }
}

/// Why an upstream request failed, as the client may be told.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    /// The egress policy refused the destination.
    #[error("the upstream is not allowed by the tenant's egress policy")]
    NotAllowed,
    /// Could not connect, or broke off.
    #[error("the upstream is unreachable")]
    Unreachable,
    /// No answer within the upstream timeout.
    #[error("the upstream did not answer in time")]
    TimedOut,
    /// An answer larger than the limit.
    #[error("the upstream's answer exceeds {0} bytes")]
    TooLarge(usize),
    /// The upstream does not know the session any more (HTTP 404).
    #[error("the upstream ended the session")]
    SessionGone,
    /// An answer the transport cannot read.
    #[error("the upstream's answer is not valid MCP: {0}")]
    Protocol(String),
}

impl From<EgressError> for UpstreamError {
    fn from(e: EgressError) -> Self {
        if e.is_not_allowed() {
            UpstreamError::NotAllowed
        } else {
            UpstreamError::Unreachable
        }
    }
}

/// The egress path with the guard's limits.
#[derive(Clone)]
pub struct Outbound {
    /// The process's egress path.
    pub egress: Arc<Egress>,
    /// The largest body or event read from an upstream.
    pub max_bytes: usize,
    /// How long a request may take (a stream: how long its head may take).
    pub timeout: Duration,
}

/// What a request carries besides the body.
#[derive(Default)]
pub struct Exchange {
    /// The upstream's session id.
    pub session: Option<String>,
    /// Headers passed through (protocol version, trace context,
    /// `Last-Event-ID`, `Mcp-Method`, `Mcp-Name`).
    pub pass: HeaderMap,
}

impl Outbound {
    /// Sends one request to `target`. A stream (`long`) is not bounded by
    /// the total timeout, only its head is.
    pub async fn send(
        &self,
        target: &Target,
        method: Method,
        body: Option<Vec<u8>>,
        ex: &Exchange,
        long: bool,
    ) -> Result<reqwest::Response, UpstreamError> {
        let credentials = !target.headers.is_empty();
        let mut req =
            self.egress
                .request(&target.rules, method, target.url.clone(), credentials)?;
        let mut headers = target.headers.clone();
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        for (k, v) in &ex.pass {
            headers.insert(k.clone(), v.clone());
        }
        if let Some(s) = &ex.session
            && let Ok(v) = HeaderValue::from_str(s)
        {
            headers.insert(SESSION_HEADER, v);
        }
        if let Some(b) = body {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            req = req.body(b);
        }
        req = req.headers(headers);
        if long {
            req = req.timeout(Duration::from_secs(24 * 3600));
            return tokio::time::timeout(self.timeout, self.egress.send(req))
                .await
                .map_err(|_| UpstreamError::TimedOut)?
                .map_err(UpstreamError::from);
        }
        tokio::time::timeout(self.timeout, self.egress.send(req))
            .await
            .map_err(|_| UpstreamError::TimedOut)?
            .map_err(UpstreamError::from)
    }

    /// Sends `msg` and reads the answer to it (see [`read_answer`]).
    pub async fn call(
        &self,
        target: &Target,
        msg: &Value,
        ex: &Exchange,
    ) -> Result<Answered, UpstreamError> {
        let body = serde_json::to_vec(msg).map_err(|e| UpstreamError::Protocol(e.to_string()))?;
        let resp = self
            .send(target, Method::POST, Some(body), ex, false)
            .await?;
        let id = msg.get("id").cloned().unwrap_or(Value::Null);
        read_answer(resp, &id, self.max_bytes).await
    }
}

/// An answer read whole.
#[derive(Debug)]
pub struct Answered {
    /// The upstream's session id, when it sent one.
    pub session: Option<String>,
    /// The answer to the request (`None` for `202 Accepted`).
    pub response: Option<Value>,
    /// Other messages the upstream sent on the way (notifications and its
    /// own requests on an event stream).
    pub others: Vec<Value>,
}

/// Whether a content type is `want` (parameters ignored).
pub fn is_type(headers: &HeaderMap, want: &str) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case(want))
}

/// Reads the answer to the request `id`: a JSON body, or the events of a
/// stream up to the response carrying `id`. HTTP 404 is
/// [`UpstreamError::SessionGone`]; a JSON-RPC error body on another status
/// is still an answer.
pub async fn read_answer(
    mut resp: reqwest::Response,
    id: &Value,
    max: usize,
) -> Result<Answered, UpstreamError> {
    let session = resp
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let status = resp.status();
    if status == StatusCode::ACCEPTED {
        return Ok(Answered {
            session,
            response: None,
            others: Vec::new(),
        });
    }
    if status == StatusCode::NOT_FOUND {
        return Err(UpstreamError::SessionGone);
    }
    if is_type(resp.headers(), "text/event-stream") && status.is_success() {
        let mut events = Box::pin(response_events(resp, max));
        let mut others = Vec::new();
        while let Some(ev) = events.next().await {
            let ev = ev.map_err(|e| match e {
                EventError::TooLarge(n) => UpstreamError::TooLarge(n),
                EventError::Broken => UpstreamError::Unreachable,
                EventError::Unreadable(m) => UpstreamError::Protocol(m),
            })?;
            let Some(msg) = event_message(&ev) else {
                continue;
            };
            if msg.get("method").is_none() && msg.get("id") == Some(id) {
                return Ok(Answered {
                    session,
                    response: Some(msg),
                    others,
                });
            }
            others.push(msg);
        }
        return Err(UpstreamError::Protocol(
            "the event stream ended without the answer".into(),
        ));
    }
    let body = pinfold_egress::body::read_body(&mut resp, max)
        .await
        .map_err(|e| match e {
            EgressError::TooLarge(n) => UpstreamError::TooLarge(n),
            other => UpstreamError::from(other),
        })?;
    match serde_json::from_slice::<Value>(&body) {
        Ok(v) if v.is_object() && (v.get("result").is_some() || v.get("error").is_some()) => {
            Ok(Answered {
                session,
                response: Some(v),
                others: Vec::new(),
            })
        }
        _ => Err(UpstreamError::Protocol(format!(
            "HTTP {} without a JSON-RPC answer",
            status.as_u16()
        ))),
    }
}

/// The JSON-RPC message an event carries, if it carries one (priming
/// events have empty data).
pub fn event_message(ev: &Event) -> Option<Value> {
    let data = ev.data.as_deref()?;
    if data.trim().is_empty() {
        return None;
    }
    serde_json::from_str(data).ok().filter(Value::is_object)
}

/// The events of a response, mapped to client-facing errors.
pub fn events(
    resp: reqwest::Response,
    max: usize,
) -> impl Stream<Item = Result<Event, EventError>> + Send {
    response_events(resp, max)
}
