//! Resolve calls on a sessionless (MCP 2026-07-28) connection, sent by us
//! on the connection's reqwest client instead of through rmcp's transport
//! worker.
//!
//! Without a protocol session every request stands alone (SEP-2575: the
//! client repeats its protocol version and capabilities in each request's
//! `_meta`), so a `tools/resolve` or `tools/annotations` call is one HTTP
//! POST whose answer is one JSON-RPC response, either as a JSON body or as
//! an event in a `text/event-stream` body. Sending it directly saves the
//! hops through rmcp's worker task and its deserialisation of every
//! answer into the typed model union, which together were most of what a
//! resolve miss cost beyond the upstream itself. The connection is still
//! opened by rmcp (`server/discover`), and its `subscriptions/listen`
//! stream still carries list changes.
//!
//! The answer is treated exactly as the rmcp path treats it:
//!
//! - a JSON body, and each event of a stream, is read up to the limit
//!   (`max_response_bytes`); larger is a transport error;
//! - HTTP 429 and 5xx are transport errors carrying `Retry-After`; a
//!   JSON-RPC error in a non-success JSON body is still a JSON-RPC error;
//! - events other than the answer are skipped, except
//!   `notifications/tools/list_changed`, which calls the hook;
//! - a stream that ends without the answer, `202`, or another content type
//!   is a transport error;
//! - the call ends when the connection is closed (its cancellation token),
//!   and the engine's total timeout drops it (and its TCP connection).

use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt as _;
use pinfold_egress::EgressError;
use pinfold_egress::events::{EventError, response_events};
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::error::{FetchError, redact};
use super::handler::ListChangedHook;

/// The direct caller of one sessionless connection.
pub(crate) struct Direct {
    client: reqwest::Client,
    url: reqwest::Url,
    /// The session's upstream headers plus `Accept`, `Content-Type` and
    /// `MCP-Protocol-Version`.
    headers: HeaderMap,
    /// The request `_meta` every call carries.
    meta: Value,
    max: usize,
    ids: AtomicU64,
    ct: CancellationToken,
    on_list_changed: ListChangedHook,
}

/// What the caller gives [`Direct::new`].
pub(crate) struct DirectParts<'a> {
    pub client: reqwest::Client,
    pub url: &'a str,
    pub headers: HeaderMap,
    pub protocol_version: String,
    /// The client capabilities the connection was opened with.
    pub capabilities: Value,
    /// The client's name and version.
    pub client_info: Value,
    pub max: usize,
    pub ct: CancellationToken,
    pub on_list_changed: ListChangedHook,
}

#[derive(Serialize)]
struct Request<'a> {
    jsonrpc: &'static str,
    id: u64,
    method: &'a str,
    params: Params<'a>,
}

#[derive(Serialize)]
struct Params<'a> {
    name: &'a str,
    arguments: &'a Value,
    #[serde(rename = "_meta")]
    meta: &'a Value,
}

/// Any JSON-RPC message, as far as a client needs to read it.
#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<RpcError>,
}

#[derive(Deserialize)]
struct RpcError {
    code: i32,
    #[serde(default)]
    message: String,
}

fn transport(detail: impl Into<String>) -> FetchError {
    FetchError::Transport {
        detail: detail.into(),
        retry_after: None,
    }
}

impl Direct {
    pub(crate) fn new(p: DirectParts<'_>) -> Result<Direct, FetchError> {
        let url = reqwest::Url::parse(p.url).map_err(|_| transport("invalid upstream url"))?;
        let mut headers = p.headers;
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let version = HeaderValue::from_str(&p.protocol_version)
            .map_err(|_| transport("the negotiated protocol version is not a header value"))?;
        headers.insert(HeaderName::from_static("mcp-protocol-version"), version);
        let meta = serde_json::json!({
            "io.modelcontextprotocol/protocolVersion": p.protocol_version,
            "io.modelcontextprotocol/clientCapabilities": p.capabilities,
            "io.modelcontextprotocol/clientInfo": p.client_info,
        });
        Ok(Direct {
            client: p.client,
            url,
            headers,
            meta,
            max: p.max,
            ids: AtomicU64::new(1),
            ct: p.ct,
            on_list_changed: p.on_list_changed,
        })
    }

    /// Sends `method` for `name` and `arguments`; the raw result object.
    pub(crate) async fn call(
        &self,
        method: &str,
        name: &str,
        arguments: &Value,
    ) -> Result<Value, FetchError> {
        tokio::select! {
            r = self.exchange(method, name, arguments) => r,
            () = self.ct.cancelled() => Err(transport("upstream connection closed")),
        }
    }

    async fn exchange(
        &self,
        method: &str,
        name: &str,
        arguments: &Value,
    ) -> Result<Value, FetchError> {
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let body = serde_json::to_vec(&Request {
            jsonrpc: "2.0",
            id,
            method,
            params: Params {
                name,
                arguments,
                meta: &self.meta,
            },
        })
        .map_err(|e| transport(format!("cannot encode the request: {e}")))?;
        let mut headers = self.headers.clone();
        if let Ok(m) = HeaderValue::from_str(method) {
            headers.insert(HeaderName::from_static("mcp-method"), m);
        }
        let mut resp = self
            .client
            .post(self.url.clone())
            .headers(headers)
            .body(body)
            .send()
            .await
            .map_err(|e| self.failed(&e))?;
        if resp.status().is_redirection() {
            return Err(transport(format!(
                "upstream answered HTTP {} (a redirect, not followed)",
                resp.status()
            )));
        }
        let status = resp.status();
        let content_type = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                v.split(';')
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_ascii_lowercase()
            })
            .unwrap_or_default();
        let json = content_type == "application/json";
        if !status.is_success() {
            let retry_after = if status.as_u16() == 429 || status.is_server_error() {
                pinfold_egress::retry_after::retry_after(resp.headers())
            } else {
                None
            };
            // A JSON-RPC error keeps its code whatever the HTTP status,
            // except where the status itself is the message (rate limits,
            // refused credentials).
            let readable = json && !matches!(status.as_u16(), 401 | 403 | 429);
            if readable
                && let Ok(bytes) = self.body(&mut resp).await
                && let Ok(m) = serde_json::from_slice::<Message>(&bytes)
                && let Some(e) = m.error
            {
                return Err(FetchError::Rpc {
                    code: e.code,
                    message: e.message,
                });
            }
            return Err(FetchError::Transport {
                detail: format!("upstream answered HTTP {status}"),
                retry_after,
            });
        }
        if matches!(status.as_u16(), 202 | 204) {
            return Err(transport(format!(
                "upstream answered HTTP {status} without a response"
            )));
        }
        if json {
            let bytes = self.body(&mut resp).await?;
            let m: Message = serde_json::from_slice(&bytes)
                .map_err(|e| FetchError::Malformed(format!("unreadable answer: {e}")))?;
            return answer(m, id).unwrap_or_else(|| {
                Err(FetchError::Malformed("an answer to another request".into()))
            });
        }
        if content_type == "text/event-stream" {
            return self.stream(resp, id).await;
        }
        Err(transport(format!(
            "upstream answered with content type {content_type:?}"
        )))
    }

    /// Reads a JSON body up to the limit.
    async fn body(&self, resp: &mut reqwest::Response) -> Result<Vec<u8>, FetchError> {
        pinfold_egress::read_body(resp, self.max)
            .await
            .map_err(|e| match e {
                EgressError::TooLarge(n) => transport(format!("upstream answer exceeds {n} bytes")),
                other => transport(format!("reading the answer failed: {other}")),
            })
    }

    /// Reads events until the answer to `id`.
    async fn stream(&self, resp: reqwest::Response, id: u64) -> Result<Value, FetchError> {
        let events = response_events(resp, self.max);
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            let data = match event {
                Ok(e) => e.data.unwrap_or_default(),
                Err(EventError::TooLarge(n)) => {
                    return Err(transport(format!("upstream event exceeds {n} bytes")));
                }
                Err(e) => return Err(transport(format!("upstream event stream: {e}"))),
            };
            if data.is_empty() {
                continue;
            }
            let Ok(m) = serde_json::from_str::<Message>(&data) else {
                tracing::debug!("skipped an unreadable upstream event");
                continue;
            };
            if m.method.as_deref() == Some("notifications/tools/list_changed") {
                (self.on_list_changed)();
                continue;
            }
            if let Some(r) = answer(m, id) {
                return r;
            }
        }
        Err(transport(
            "upstream ended its event stream without an answer",
        ))
    }

    fn failed(&self, e: &reqwest::Error) -> FetchError {
        let mut detail = e.to_string();
        let mut cur = std::error::Error::source(e);
        while let Some(s) = cur {
            detail.push_str(": ");
            detail.push_str(&s.to_string());
            cur = s.source();
        }
        transport(redact(e, &detail, self.url.as_str()))
    }
}

/// The outcome a message carries if it answers request `id`: a result, a
/// JSON-RPC error, or neither (malformed).
fn answer(m: Message, id: u64) -> Option<Result<Value, FetchError>> {
    if m.method.is_some() || m.id.as_ref().and_then(Value::as_u64) != Some(id) {
        return None;
    }
    Some(match (m.result, m.error) {
        (_, Some(e)) => Err(FetchError::Rpc {
            code: e.code,
            message: e.message,
        }),
        (Some(r), None) => Ok(r),
        (None, None) => Err(FetchError::Malformed(
            "an answer with neither a result nor an error".into(),
        )),
    })
}
