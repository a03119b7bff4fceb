//! The Streamable HTTP client of a capture: rmcp's reqwest client for the
//! handshake and every other message, our own bounded POST for the list
//! methods so that their answers reach the [`Tap`] as sent (event streams
//! pass through it too).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    HttpStatusError, SseError, StreamableHttpClient, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::{Sse, SseStream};

use super::tap::{MAX_ANSWER_BYTES, Tap};

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
pub(super) struct TapClient {
    pub(super) http: reqwest::Client,
    pub(super) tap: Tap,
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
